"""`ffdesk bench pipeline`: ffdesk's render against the straightforward loop most tools use.

Both render the same frames of a synthesized 720p clip with one face, with the same models: an
inswapper-contract swapper and an ArcFace-contract recogniser whose cost per face on this CPU is
a few milliseconds (about what the real models cost on a mid-range GPU), so the comparison
measures the pipeline rather than the arithmetic. Detection is the embedded RetinaFace in both.

The loop, written here: decode a frame; detect; per face: embed it, swap it (batch of one),
paste the result back onto the full frame (full-frame inverse warp, mask and blend, as
insightface's swapper does); encode the frame. One thing at a time, no overlap, no batching.

Also printed: pipeline efficiency, ffdesk's frames/s over the frames/s the models alone allow
(detector on key frames, mesh tracking, batched swaps); each side's process CPU per frame (the
stand-ins and the encoder both run on the CPU here, so on a 2-core machine CPU per frame bounds
frames/s); and where a face's time in the swap stage goes outside the model (align, the model's
input and output conversions, paste-back) against the loop's full-frame paste. `--repeat N`
renders each side N times, alternating, and reports the medians. Goal: ffdesk at least 3x the
loop.

The encoder: both sides encode with libx264 at `--preset` (default medium, the final render's). On
a 2-core CPU x264 at medium costs about as much a 720p frame as everything else ffdesk does, so a
third render, the same frames re-encoded with no swap, is timed too: the encoder's own ceiling,
which no pipeline can pass. On a GPU the encoder is NVENC, which costs the CPU next to nothing;
`--preset ultrafast` is the nearest a CPU comes to that, and shows the pipelines' difference
rather than the encoder's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.bench.common import (
    add_json_option,
    cache_dir,
    core_scaling,
    finish,
    median_ms,
    priority_line,
    with_article,
)
from ffdesk.bench.memory import face_clip, source_photo
from ffdesk.commands.argtypes import standin_cost_ms, whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.pipeline.helper_priority import unavailable_reason
from ffdesk.pipeline.job import MAX_BATCH
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.types import VIDEO_PRESETS, Frame, VideoPreset

if TYPE_CHECKING:
    from ffdesk.pipeline.report import RenderReport

GOAL_SPEEDUP = 3.0
MODELS = ("inswapper_128", "arcface_w600k_r50")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("pipeline", help="ffdesk vs the one-at-a-time loop, 720p")
    p.add_argument(
        "--frames", type=whole_at_least(1), default=100, help="frames rendered by each (default 100)"
    )
    p.add_argument(
        "--cost-ms", type=standin_cost_ms, default=4.0, help="stand-in swapper cost per face (default 4)"
    )
    p.add_argument("--batch", type=whole_at_least(1, MAX_BATCH), default=8)
    p.add_argument("--provider", choices=("auto", "cpu", "cuda", "tensorrt"), default="auto")
    p.add_argument("--realistic", action="store_true", help="real-size stand-ins instead (for a GPU)")
    p.add_argument(
        "--repeat", type=whole_at_least(1), default=1, help="renders of each side, alternating (default 1)"
    )
    p.add_argument(
        "--preset",
        choices=VIDEO_PRESETS,
        default="medium",
        help="x264 preset of both sides (default medium, the final render's; ultrafast: the "
        "encoder's CPU cost nearer a GPU's NVENC)",
    )
    add_json_option(p)
    p.set_defaults(func=run)


def cost_pack(cost_ms: float, env: RuntimeEnv) -> Path:
    """Stand-ins padded to about `cost_ms` per face on this CPU (cached per cost)."""
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.standins import write_standin

    folder = cache_dir(env) / f"standins-cost{cost_ms:g}ms"
    catalog = load_catalog()
    for name, ms in (("inswapper_128", cost_ms), ("arcface_w600k_r50", cost_ms / 2)):
        if not (folder / f"{name}.onnx").is_file():
            print(f"writing {with_article(name)} stand-in of about {ms:g} ms per face ...", flush=True)
            write_standin(catalog.get(name), folder, cost_ms=ms, dynamic_batch=True)
    return folder


# ---- the straightforward loop -------------------------------------------------------------


def paste_full_frame(frame: Frame, crop: Frame, m: npt.NDArray[np.float64]) -> Frame:
    """insightface-style paste: warp the crop and a mask over the whole frame, erode and blur
    the mask, blend in float over every pixel."""
    h, w = frame.shape[:2]
    inv = cv2.invertAffineTransform(m)
    fake = cv2.warpAffine(crop, inv, (w, h), borderValue=(0, 0, 0)).astype(np.float32)
    white = cv2.warpAffine(np.full(crop.shape[:2], 255, np.float32), inv, (w, h), borderValue=0.0)
    white[white > 20] = 255
    ys, xs = np.where(white == 255)
    size = int(np.sqrt((ys.max() - ys.min()) * (xs.max() - xs.min()))) if len(ys) else 10
    k = max(size // 10, 10)
    mask = cv2.erode(white, np.ones((k, k), np.uint8), iterations=1)
    blur = max(size // 20, 5)
    soft = cv2.GaussianBlur(mask, (2 * blur + 1, 2 * blur + 1), 0)[..., None] / np.float32(255.0)
    merged = soft * fake + (1 - soft) * frame.astype(np.float32)
    return merged.astype(np.uint8)


def _options(provider: str, env: RuntimeEnv) -> Any:
    from ffdesk.runtime.sessions import SessionOptions

    device = "cpu" if provider == "cpu" else "auto"
    return SessionOptions(
        device=device,  # type: ignore[arg-type]
        tensorrt=provider == "tensorrt",
        cache_dir=env.trt_cache_dir,
        driver=env.driver,
    )


def run_loop(
    clip: Path,
    out: Path,
    pack: Path,
    frames: int,
    env: RuntimeEnv,
    provider: str = "auto",
    preset: VideoPreset = "medium",
) -> float:
    """Render `frames` frames the straightforward way; returns wall seconds."""
    import av

    from ffdesk.faces.align import warp_face
    from ffdesk.faces.analyser import FaceAnalyser
    from ffdesk.faces.recognizer import ArcFaceRecognizer
    from ffdesk.media.encode import EncodeSettings, SegmentEncoder
    from ffdesk.media.images import read_image
    from ffdesk.runtime.sessions import create_session
    from ffdesk.swap import onnx_swapper as sw

    analyser = FaceAnalyser()
    options = _options(provider, env)
    recognizer = ArcFaceRecognizer(create_session(pack / "arcface_w600k_r50.onnx", options))
    spec = sw.spec_for("inswapper_128")
    projection = sw.read_projection(pack / "inswapper_128.onnx")
    swapper = sw.OnnxSwapper(
        create_session(pack / "inswapper_128.onnx", options), spec, projection=projection
    )
    photo = read_image(source_photo())
    src = analyser.detect(photo)[0]
    source = swapper.source_vector(
        recognizer.embed_crops(warp_face(photo, src.kps, "arcface_112_v2", 112)[0][None])[0]
    )
    t0 = time.perf_counter()
    with av.open(str(clip)) as container:
        vs = container.streams.video[0]
        encoder: SegmentEncoder | None = None
        for done, frame in enumerate(container.decode(video=0), start=1):
            image: Frame = np.asarray(frame.to_ndarray(format="rgb24"), np.uint8)
            if encoder is None:
                encoder = SegmentEncoder(
                    out, EncodeSettings(encoder="h264", quality=None, mode="final", hw=False, preset=preset),
                    width=image.shape[1], height=image.shape[0], time_base=vs.time_base or Fraction(1, 25),
                    fps=float(vs.average_rate or 25), rotation=0, color=None,
                )  # fmt: skip
            for face in analyser.detect(image):
                recognizer.embed_crops(warp_face(image, face.kps, "arcface_112_v2", 112)[0][None])
                crop, m = warp_face(image, face.kps, spec.template, spec.size)
                image = paste_full_frame(image, swapper.swap(crop[None], source)[0], m)
            encoder.write(image, int(frame.pts if frame.pts is not None else done))
            if done >= frames:
                break
        if encoder is not None:
            encoder.close()
    return time.perf_counter() - t0


# ---- ffdesk ---------------------------------------------------------------------------------


def run_ffdesk(
    clip: Path,
    out: Path,
    pack: Path,
    frames: int,
    batch: int,
    env: RuntimeEnv,
    provider: str = "auto",
    preset: VideoPreset = "medium",
) -> RenderReport:
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    job = RenderJob(
        target=clip, output=out, sources=(source_photo(),), models_dir=pack, swapper="inswapper_128",
        recognizer="arcface_w600k_r50", precision="fp32", batch=batch, resume=False, end=frames / 25.0,
        provider=provider, video_preset=preset,  # type: ignore[arg-type]
    )  # fmt: skip
    return run_render(job, env=env)


def run_reencode(clip: Path, out: Path, frames: int, env: RuntimeEnv, preset: VideoPreset) -> RenderReport:
    """The same frames re-encoded by ffdesk with no swap: the encoder's ceiling."""
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    job = RenderJob(target=clip, output=out, resume=False, end=frames / 25.0, video_preset=preset)
    return run_render(job, env=env)


def models_alone_fps(clip: Path, pack: Path, batch: int, provider: str = "auto") -> dict[str, float]:
    """Frames/s the models alone allow for ffdesk's schedule: a detection every key frame, one
    mesh pass per face per frame, swaps in batches."""
    from ffdesk.faces.align import warp_face
    from ffdesk.faces.analyser import FaceAnalyser
    from ffdesk.media.decode import read_frame_at
    from ffdesk.pipeline.stages.embedded import DETECT_EVERY
    from ffdesk.runtime.sessions import create_session
    from ffdesk.swap import onnx_swapper as sw

    analyser = FaceAnalyser()
    frame = read_frame_at(clip, 0.0).image
    face = analyser.analyse(frame)[0]
    spec = sw.spec_for("inswapper_128")
    swapper = sw.OnnxSwapper(
        create_session(pack / "inswapper_128.onnx"),
        spec,
        projection=sw.read_projection(pack / "inswapper_128.onnx"),
    )
    crops = np.stack([warp_face(frame, face.kps, spec.template, spec.size)[0]] * batch)
    vector = np.ones((1, 512), np.float32)

    detect = median_ms(lambda: analyser.detect(frame, try_rotations=False), 7)
    mesh = median_ms(lambda: analyser.track(frame, face), 15)
    x = sw.to_model_input(crops, spec)
    src = np.repeat(vector, batch, axis=0)
    swap = median_ms(lambda: swapper.runner.run({"target": x, "source": src}), 7) / batch
    per_frame = detect / DETECT_EVERY + mesh + swap
    return {"detect_ms": round(detect, 2), "mesh_ms": round(mesh, 2), "swap_ms_per_face": round(swap, 2),
            "fps": round(1000.0 / per_frame, 2)}  # fmt: skip


def swap_stage_parts(clip: Path, batch: int) -> dict[str, float]:
    """Milliseconds per face of the swap stage's work outside the model, on the clip's first
    frame: aligning the crop, the model's input and output conversions (batched), the paste
    back with the stage's box mask; and the loop's full-frame paste of the same face."""
    from ffdesk.faces.align import warp_face
    from ffdesk.faces.analyser import FaceAnalyser
    from ffdesk.media.decode import read_frame_at
    from ffdesk.swap import onnx_swapper as sw
    from ffdesk.swap.blend import paste_face
    from ffdesk.swap.masks import box_mask

    frame = read_frame_at(clip, 0.0).image
    face = FaceAnalyser().analyse(frame)[0]
    spec = sw.spec_for("inswapper_128")
    crop, m = warp_face(frame, face.kps, spec.template, spec.size)
    crops = np.stack([crop] * batch)
    y = sw.to_model_input(crops, spec)
    mask = box_mask(spec.size)
    image = frame.copy()
    parts = {
        "align": median_ms(lambda: warp_face(frame, face.kps, spec.template, spec.size), 15),
        "to_model_input": median_ms(lambda: sw.to_model_input(crops, spec), 15) / batch,
        "from_model_output": median_ms(lambda: sw.from_model_output(y, spec), 15) / batch,
        "paste": median_ms(lambda: paste_face(image, crop, m, mask), 15),
        "loop_full_frame_paste": median_ms(lambda: paste_full_frame(frame, crop, m), 7),
    }
    return {k: round(v, 3) for k, v in parts.items()}


def _timed(fn: Any) -> tuple[Any, float, float]:
    """(fn(), wall seconds, process CPU seconds: every thread, the encoder's and the models' too)."""
    c0, t0 = os.times(), time.perf_counter()
    result = fn()
    wall, c1 = time.perf_counter() - t0, os.times()
    return result, wall, (c1.user - c0.user) + (c1.system - c0.system)


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def run(args: argparse.Namespace) -> int:
    env = runtime_env(args)
    if args.realistic:
        from ffdesk.bench.memory import realistic_pack

        pack = realistic_pack(env, MODELS)
    else:
        pack = cost_pack(args.cost_ms, env)
    clip = face_clip(env)
    load_before = os.getloadavg()
    scaling_before = core_scaling()
    loop_runs: list[tuple[float, float]] = []
    ffdesk_runs: list[tuple[float, float]] = []
    plain_runs: list[tuple[float, float]] = []
    report: RenderReport | None = None
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-pipeline-") as tmp:
        for i in range(max(1, args.repeat)):
            print(f"[{i + 1}] straightforward loop: {args.frames} frames ...", flush=True)
            _, wall, cpu = _timed(
                lambda: run_loop(
                    clip, Path(tmp) / "loop.mp4", pack, args.frames, env, args.provider, args.preset
                )
            )
            loop_runs.append((args.frames / wall, cpu * 1000.0 / args.frames))
            print(f"[{i + 1}] ffdesk: {args.frames} frames ...", flush=True)
            report, wall, cpu = _timed(
                lambda: run_ffdesk(
                    clip, Path(tmp) / "ffdesk.mp4", pack, args.frames, args.batch, env, args.provider,
                    args.preset,
                )
            )  # fmt: skip
            frames = max(report.frames_out, 1)
            ffdesk_runs.append((report.frames_out / wall, cpu * 1000.0 / frames))
            print(f"[{i + 1}] re-encode alone: {args.frames} frames ...", flush=True)
            plain, wall, cpu = _timed(
                lambda: run_reencode(clip, Path(tmp) / "plain.mp4", args.frames, env, args.preset)
            )
            plain_runs.append((plain.frames_out / wall, cpu * 1000.0 / max(plain.frames_out, 1)))
    assert report is not None
    alone = models_alone_fps(clip, pack, args.batch, args.provider)
    parts = swap_stage_parts(clip, args.batch)
    loop_fps, ffdesk_fps = _median([r[0] for r in loop_runs]), _median([r[0] for r in ffdesk_runs])
    plain_fps = _median([r[0] for r in plain_runs])
    figures = {
        "frames": report.frames_out,
        "repeat": len(loop_runs),
        "loop_fps": round(loop_fps, 2),
        "ffdesk_fps": round(ffdesk_fps, 2),
        "speedup": round(ffdesk_fps / loop_fps, 3),
        "loop_cpu_ms_per_frame": round(_median([r[1] for r in loop_runs]), 1),
        "ffdesk_cpu_ms_per_frame": round(_median([r[1] for r in ffdesk_runs]), 1),
        "reencode_fps": round(plain_fps, 2),
        "reencode_cpu_ms_per_frame": round(_median([r[1] for r in plain_runs]), 1),
        "encoder_ceiling": round(plain_fps / loop_fps, 3),
        "runs": {
            "loop_fps": [round(r[0], 2) for r in loop_runs],
            "ffdesk_fps": [round(r[0], 2) for r in ffdesk_runs],
            "reencode_fps": [round(r[0], 2) for r in plain_runs],
        },
        "models_alone": alone,
        "swap_stage_ms_per_face": parts,
        "pipeline_efficiency": round(ffdesk_fps / alone["fps"], 3),
        "stage_ms_per_frame": {t.name: round(t.ms_total / max(t.frames, 1), 2) for t in report.stages},
        "load_average": [round(v, 2) for v in (*load_before, *os.getloadavg())],
        "core_scaling": [scaling_before, core_scaling()],
        "helper_priority": unavailable_reason() or "governed",
    }
    _print(figures, len(loop_runs))
    settings = {
        "frames": args.frames,
        "cost_ms": None if args.realistic else args.cost_ms,
        "realistic": args.realistic,
        "batch": args.batch,
        "provider": args.provider,
        "height": 720,
        "repeat": args.repeat,
        "preset": args.preset,
    }
    finish("pipeline", settings, figures, args.json, runtime_env(args))
    return 0


def _print(figures: dict[str, Any], repeat: int) -> None:
    alone, parts = figures["models_alone"], figures["swap_stage_ms_per_face"]
    med = f"median of {repeat}, " if repeat > 1 else ""
    loop_cpu, ffdesk_cpu = figures["loop_cpu_ms_per_frame"], figures["ffdesk_cpu_ms_per_frame"]
    print(f"loop    {figures['loop_fps']:7.2f} frames/s  ({med}{loop_cpu} CPU ms a frame)")
    print(f"ffdesk  {figures['ffdesk_fps']:7.2f} frames/s  ({med}{ffdesk_cpu} CPU ms a frame)  "
          f"{figures['speedup']:.2f}x the loop; goal: {GOAL_SPEEDUP}x")  # fmt: skip
    plain_cpu = figures["reencode_cpu_ms_per_frame"]
    print(f"re-encode alone {figures['reencode_fps']:.2f} frames/s ({plain_cpu} CPU ms a frame): with "
          f"this encoder no pipeline passes {figures['encoder_ceiling']:.2f}x the loop")  # fmt: skip
    print(f"models alone allow {alone['fps']:.1f} frames/s (swap {alone['swap_ms_per_face']} ms/face, "
          f"detect {alone['detect_ms']} ms per key frame, mesh {alone['mesh_ms']} ms)")  # fmt: skip
    print(f"swap stage ms per face outside the model: align {parts['align']}, model input "
          f"{parts['to_model_input']}, output {parts['from_model_output']}, paste {parts['paste']} "
          f"(the loop's full-frame paste: {parts['loop_full_frame_paste']})")  # fmt: skip
    print(f"pipeline efficiency {figures['pipeline_efficiency']:.1%}")
    print(f"ffdesk stage ms per frame: {figures['stage_ms_per_frame']}")
    print(f"load average before and after: {figures['load_average']}")
    before, after = figures["core_scaling"]
    threads = os.cpu_count() or 1
    print(f"{threads} threads got {before:.2f}x one thread's throughput before, {after:.2f}x after")
    print(f"stage threads' priority: {priority_line(figures['helper_priority'])}")
