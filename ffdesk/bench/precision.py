"""`ffdesk bench precision`: what FP32, FP16 and INT8 cost per model, and how far they drift.

For each model (realistic-size stand-ins by default): the FP16 and INT8 variants are made (INT8
calibrated on aligned face crops from a 720p clip, as a render does), then each variant runs
the same held-out crop: median milliseconds of one inference, file size, and the output's
error against FP32 (max / mean absolute, PSNR). Goal: the INT8 swapper at least 1.5x faster than
FP32 on this CPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ffdesk.bench.common import add_json_option, finish, median_ms, with_article, write_so_far
from ffdesk.bench.memory import check_models_dir, face_clip, realistic_pack, source_photo
from ffdesk.commands.argtypes import whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.units import format_bytes

GOAL_INT8_SPEEDUP = 1.5
DEFAULT_MODELS = ("inswapper_128", "arcface_w600k_r50", "xseg_1", "bisenet_resnet_34")
RECOGNIZER = "arcface_w600k_r50"
"""The recogniser whose embedding of the source photo a swapper's input is made from."""
PRECISIONS = ("fp32", "fp16", "int8")
CALIBRATION_FRAMES = 6
TIMED_KINDS = ("swapper", "recognizer", "enhancer", "occluder", "parser")
"""The catalog kinds the bench has face-crop inputs for (`_feeds`)."""


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("precision", help="FP32 vs FP16 vs INT8 per model")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated catalog names")
    p.add_argument("--runs", type=whole_at_least(1), default=5, help="timed runs per variant (median)")
    p.add_argument(
        "--precisions",
        default=",".join(PRECISIONS),
        help="variants to time, fp32 always among them (fp32,fp16: no INT8 calibration, the slow part)",
    )
    p.add_argument(
        "--threads", type=whole_at_least(0), default=0, help="ONNX Runtime threads (0: one per core)"
    )
    p.add_argument("--provider", choices=("cpu", "cuda", "tensorrt"), default="cpu")
    p.add_argument("--models-dir", type=Path, default=None, help="pack to use (default: stand-ins)")
    add_json_option(p)
    p.set_defaults(func=run)


def _crops(template: str, size: int, env: RuntimeEnv) -> list[npt.NDArray[np.uint8]]:
    """Aligned crops of the clip's face: CALIBRATION_FRAMES for calibration, then one held out."""
    from ffdesk.faces.align import warp_face
    from ffdesk.faces.analyser import FaceAnalyser
    from ffdesk.media.decode import VideoReader

    analyser = FaceAnalyser()
    crops = []
    with VideoReader(face_clip(env)) as reader:
        for i, frame in enumerate(reader):
            if i % 7:
                continue
            faces = analyser.detect(frame.image)
            if faces:
                crops.append(warp_face(frame.image, faces[0].kps, template, size)[0])
            if len(crops) > CALIBRATION_FRAMES:
                break
    if len(crops) < 2:
        raise RuntimeError("the bench clip shows no face")
    return crops


def _feeds(name: str, pack: Any, env: RuntimeEnv) -> list[dict[str, np.ndarray]]:
    """Real inputs of model `name`: face crops from the clip, prepared as its processor does."""
    from ffdesk.faces.recognizer import arcface_input
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.swap import enhancer, masks
    from ffdesk.swap import onnx_swapper as sw

    spec = load_catalog().get(name)
    if spec.kind == "swapper":
        swap = sw.spec_for(name)
        vector = _source_vector(recognizer_file(pack, env), sw.read_projection(pack / spec.file), swap)
        return [
            {swap.target_input: sw.to_model_input(c[None], swap), swap.source_input: vector}
            for c in _crops(swap.template, swap.size, env)
        ]
    if spec.kind == "recognizer":
        return [{"input": arcface_input(c[None])} for c in _crops("arcface_112_v2", 112, env)]
    if spec.kind == "enhancer":
        feeds: list[dict[str, np.ndarray]] = [
            {"input": enhancer.to_model_input(c[None])} for c in _crops("ffhq_512", 512, env)
        ]
        if any(t.name == "weight" for t in spec.inputs):
            for f in feeds:
                f["weight"] = np.array([1.0], np.float64)
        return feeds
    if spec.kind == "occluder":
        return [{"input": masks.occlusion_input(c[None])} for c in _crops("arcface_128", 256, env)]
    if spec.kind == "parser":
        return [{"input": masks.region_input(c[None])} for c in _crops("arcface_128", 512, env)]
    raise UserError(f"{name}: no crop-based inputs for {with_article(spec.kind)}")


def _checked_names(text: str, folder: Path | None) -> tuple[str, ...]:
    """The models of `--models`, each a catalog model of a kind the bench times and, with
    `--models-dir`, its file there and sound (`UserError`, one line, before any work)."""
    from ffdesk.runtime.catalog import load_catalog

    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise UserError(f"--models: no model named (e.g. {','.join(DEFAULT_MODELS)})")
    catalog = load_catalog()
    for name in names:
        kind = catalog.get(name).kind
        if kind not in TIMED_KINDS:
            raise UserError(
                f"--models: {name} is {with_article(kind)}; the bench times {', '.join(TIMED_KINDS)} models"
            )
    if folder is not None:
        check_models_dir(folder, names)
    return names


def recognizer_file(pack: Path, env: RuntimeEnv) -> Path:
    """The ArcFace file that embeds the source photo for a swapper: the pack's own where it
    holds a sound one, else a realistic stand-in (written once, cached)."""
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import verify

    spec = load_catalog().get(RECOGNIZER)
    own = pack / spec.file
    if own.is_file() and not verify(spec, own):
        return own
    return realistic_pack(env, (RECOGNIZER,)) / spec.file


def _source_vector(
    recognizer_path: Path, projection: npt.NDArray[np.float32], spec: Any
) -> npt.NDArray[np.float32]:
    from ffdesk.faces.align import warp_face
    from ffdesk.faces.analyser import FaceAnalyser
    from ffdesk.faces.recognizer import ArcFaceRecognizer
    from ffdesk.media.images import read_image
    from ffdesk.runtime.sessions import create_session
    from ffdesk.swap import onnx_swapper as sw

    photo = read_image(source_photo())
    face = FaceAnalyser().detect(photo)[0]
    crop = warp_face(photo, face.kps, "arcface_112_v2", 112)[0]
    recognizer = ArcFaceRecognizer(create_session(recognizer_path))
    return sw.source_vector(recognizer.embed_crops(crop[None])[0], spec, projection)


def mib(size: int) -> float:
    """`size` bytes in MiB to three significant figures: a file of a few KiB is not 0."""
    return float(f"{size / 2**20:.3g}")


def _cost(
    path: Any, feed: dict[str, np.ndarray], reference: list[np.ndarray] | None, options: Any, runs: int
) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Median ms of one run of `feed` (after a warm-up), file size and error against `reference`."""
    from ffdesk.runtime.precision import psnr
    from ffdesk.runtime.sessions import create_session

    session = create_session(path, options)
    outs = list(session.run(feed).values())
    ms = median_ms(lambda: session.run(feed), runs, warmup=0)  # the first run above warmed it up
    size = path.stat().st_size
    row: dict[str, Any] = {
        "ms": round(ms, 2),
        "bytes": size,
        "mib": mib(size),
        "provider": session.provider,
    }
    if reference is not None:
        diff = [
            np.abs(o.astype(np.float64) - r.astype(np.float64)) for o, r in zip(outs, reference, strict=True)
        ]
        row["max_abs_err"] = round(max(float(d.max()) for d in diff), 5)
        row["mean_abs_err"] = round(float(np.mean([d.mean() for d in diff])), 6)
        value = psnr(outs[0], reference[0])
        row["psnr_db"] = None if value == float("inf") else round(value, 2)
    session.close()
    return row, outs


def run(args: argparse.Namespace) -> int:
    from ffdesk.runtime import precision as prec
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.sessions import SessionOptions

    asked = {p.strip() for p in args.precisions.split(",") if p.strip()}
    if asked - set(PRECISIONS):
        unknown = ", ".join(sorted(asked - set(PRECISIONS)))
        raise UserError(f"--precisions: unknown {unknown} (choose from {', '.join(PRECISIONS)})")
    precisions = tuple(p for p in PRECISIONS if p in asked or p == "fp32")  # each against FP32
    env = runtime_env(args)
    names = _checked_names(args.models, args.models_dir)
    pack = args.models_dir or realistic_pack(env, names)
    options = SessionOptions(
        device="cpu" if args.provider == "cpu" else "cuda",
        tensorrt=args.provider == "tensorrt",
        intra_op_threads=args.threads,
        cache_dir=env.trt_cache_dir,
        driver=env.driver,
    )
    settings = {
        "models": list(names),
        "precisions": list(precisions),
        "runs": args.runs,
        "threads": args.threads,
        "provider": args.provider,
    }
    figures: dict[str, Any] = {}
    for name in names:
        src = pack / load_catalog().get(name).file
        feeds = _feeds(name, pack, env)
        calibration, held_out = feeds[:-1], feeds[-1]
        print(f"{name}: making variants ...", flush=True)
        variants = env.variants_dir
        paths = {p: prec.ensure_variant(src, p, calibration, cache_dir=variants) for p in precisions}
        reference: list[np.ndarray] | None = None
        rows: dict[str, dict[str, Any]] = {}
        for p in precisions:
            rows[p], outs = _cost(paths[p], held_out, reference, options, args.runs)
            if p == "fp32":
                reference = outs
        fp32_ms = float(rows["fp32"]["ms"])
        for p in precisions[1:]:
            ms = float(rows[p]["ms"])
            rows[p]["speedup"] = round(fp32_ms / ms, 3) if ms else None
        figures[name] = rows
        for p, r in rows.items():
            extra = (
                ""
                if p == "fp32"
                else f"  x{r['speedup']:.2f}  err max {r['max_abs_err']:.4g} PSNR {r['psnr_db']}"
            )
            print(f"  {p}  {r['ms']:9.2f} ms  {format_bytes(r['bytes']):>10s}{extra}")
        write_so_far("precision", settings, figures, args.json)  # a time limit keeps the models done
    swapper = next((n for n in names if n.startswith(("inswapper", "hyperswap"))), None)
    if swapper and "int8" in precisions:
        speedup = figures[swapper]["int8"]["speedup"]
        figures["int8_swapper_speedup"] = speedup
        print(f"INT8 swapper {speedup:.2f}x FP32 (goal: at least {GOAL_INT8_SPEEDUP}x)")
    finish("precision", settings, figures, args.json, runtime_env(args))
    return 0
