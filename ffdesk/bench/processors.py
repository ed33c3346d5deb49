"""`ffdesk bench processors`: what each of FaceFusion's other processors costs in a render.

The bench's synthesized clip with a face (`ffdesk.bench.preview.make_clip`) is rendered once as a
plain re-encode and once through each processor alone, with stand-ins of the processor's models
(small by default; `--realistic`: of the published files' size and compute) written once into the
bench cache, on `--provider` (cuda on a GPU). The lip syncer hears a synthesized voice (a vowel-like
tone whose loudness swings four times a second), the face editor smiles (mouth_smile 0.5). Prints,
per processor: its model, frames/s of the render, the processor stage's milliseconds a frame (wall,
from the report's stage timings), the faces or frames it went through, the process's peak
memory and the calls its models made at a shape they had not run at once the frames started
(the report's `late_shapes`: 0 on a GPU, where each shape is warmed up before the first frame);
and the plain re-encode's frames/s beside them. Stand-ins stand for the contracts, not the
published weights: these are the pipeline's costs around models of that size, not the models'.
"""

from __future__ import annotations

import argparse
import tempfile
import wave
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ffdesk.bench.common import add_json_option, cache_dir, cached, finish, write_so_far
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.pipeline.job import PROVIDERS, Provider
from ffdesk.runtime.env import RuntimeEnv


@dataclass(frozen=True)
class Case:
    """One processor as the bench runs it: the job fields that turn it on and the stand-ins it needs."""

    name: str
    stage: str
    models: tuple[str, ...]
    fields: dict[str, Any] = field(default_factory=dict)


CASES = (
    Case("lip_syncer", "lip_sync", ("wav2lip_gan_96",), {"lip_syncer": "wav2lip_gan_96"}),
    Case("deep_swapper", "deep_swap", ("dfl_amp",), {"deep_swapper": "dfl_amp.dfm"}),
    Case(
        "expression_restorer",
        "expression_restore",
        ("live_portrait_feature_extractor", "live_portrait_motion_extractor", "live_portrait_generator"),
        {"expression_restorer": "live_portrait"},
    ),
    Case(
        "face_editor",
        "face_edit",
        (
            "live_portrait_feature_extractor",
            "live_portrait_motion_extractor",
            "live_portrait_generator",
            "live_portrait_eye_retargeter",
            "live_portrait_lip_retargeter",
            "live_portrait_stitcher",
        ),
        {"face_editor": "live_portrait", "face_edits": (("mouth_smile", 0.5),)},
    ),
    Case(
        "age_modifier",
        "age_modify",
        ("fran", "fairface"),
        {"age_modifier": "fran", "age_modifier_direction": 60},
    ),
    Case("background_remover", "background_remove", ("modnet",), {"background_remover": "modnet"}),
    Case("frame_colorizer", "frame_colorize", ("ddcolor",), {"frame_colorizer": "ddcolor"}),
    Case("frame_enhancer", "frame_enhance", ("real_esrgan_x2",), {"frame_enhancer": "real_esrgan_x2"}),
)
"""Each processor with its FaceFusion default model where its stand-in is quick to make (the
frame enhancer: real_esrgan_x2, the smallest scale)."""
NAMES = tuple(c.name for c in CASES)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "processors", help="FaceFusion's other processors: frames/s and stage ms a frame of each"
    )
    p.add_argument("--height", type=int, default=360, choices=(360, 720, 1080))
    p.add_argument("--seconds", type=float, default=2.0, help="length of the clip (default 2)")
    p.add_argument("--realistic", action="store_true", help="stand-ins of the published files' size")
    p.add_argument("--provider", choices=PROVIDERS, default="auto", help="where the models run")
    p.add_argument("--only", default="", metavar="NAMES", help=f"comma-separated, of: {', '.join(NAMES)}")
    add_json_option(p)
    p.set_defaults(func=run)


def write_voice(path: Path, seconds: float) -> None:
    """A mono 16 kHz WAV of a vowel-like tone (150 Hz and its harmonics) whose loudness swings four
    times a second, so the lip syncer's windows differ from frame to frame."""
    import numpy as np

    rate = 16000
    t = np.arange(int(rate * seconds)) / rate
    tone = sum(np.sin(2 * np.pi * 150 * k * t) / k for k in range(1, 6))
    swing = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t)
    samples = (tone * swing * 6000).astype(np.int16)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())


def standins(names: tuple[str, ...], realistic: bool, env: RuntimeEnv) -> Path:
    """A folder of the bench's stand-ins (made once per name and size, in the bench cache)."""
    from ffdesk.runtime.standins import write_standins

    folder = cache_dir(env) / ("processor-standins-realistic" if realistic else "processor-standins")
    folder.mkdir(parents=True, exist_ok=True)
    from ffdesk.runtime.catalog import load_catalog

    catalog = load_catalog()
    missing = [n for n in names if not (folder / catalog.get(n).file).exists()]
    if missing:
        print(f"writing stand-ins: {', '.join(missing)}")
        write_standins(folder, missing, realistic=realistic)
    return folder


def measure(
    height: int,
    seconds: float,
    cases: tuple[Case, ...],
    *,
    realistic: bool,
    provider: Provider,
    env: RuntimeEnv,
    so_far: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Each case's figures (and the plain re-encode's), handed to `so_far` as each is done."""
    from dataclasses import replace

    from ffdesk.bench.preview import make_clip
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    clip = make_clip(height, seconds, env)
    voice = cached(cache_dir(env) / f"voice-{seconds:g}s.wav", lambda p: write_voice(p, seconds))
    folder = standins(tuple(dict.fromkeys(m for c in cases for m in c.models)), realistic, env)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-processors-") as tmp:
        base = RenderJob(
            target=clip, output=Path(tmp) / "plain.mp4", resume=False, models_dir=folder, provider=provider
        )
        plain = run_render(base, env=env)
        figures["plain_fps"] = round(plain.fps, 2)
        print(f"plain re-encode: {plain.fps:.1f} frames/s ({plain.frames_out} frames, {height}p)")
        for case in cases:
            fields = dict(case.fields)
            if case.name == "deep_swapper":
                fields["deep_swapper"] = str(folder / "dfl_amp.dfm")
            if case.name == "lip_syncer":
                fields["lip_sync_audio"] = voice
            job = replace(base, output=Path(tmp) / f"{case.name}.mp4", **fields)
            report = run_render(job, env=env)
            timing = report.timing(case.stage)
            work = next((p for p in report.processors if p.name == case.stage), None)
            row = {
                "model": work.model if work else case.models[0],
                "fps": round(report.fps, 2),
                "stage_ms_per_frame": round(timing.ms_total / max(1, timing.frames), 2),
                "faces": work.faces if work else 0,
                "frames": work.frames if work else report.frames_out,
                "peak_rss_mb": round((report.peak_rss_bytes or 0) / 2**20, 1),
                "late_shapes": work.late_shapes if work else None,
            }
            figures[case.name] = row
            if so_far is not None:
                so_far(figures)
            print(
                f"{case.name:<20} {row['model']:<16} {row['fps']:>7.1f} frames/s  "
                f"{row['stage_ms_per_frame']:>8.1f} ms a frame in its stage  "
                f"({row['faces']} faces, {row['frames']} frames; peak {row['peak_rss_mb']:.0f} MiB; "
                f"{row['late_shapes'] or 0} new shapes mid-render)"
            )
    return figures


def run(args: argparse.Namespace) -> int:
    env = runtime_env(args)
    wanted = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in NAMES]
    if unknown:
        raise UserError(f"unknown processor {unknown[0]!r} (one of {', '.join(NAMES)})")
    cases = tuple(c for c in CASES if not wanted or c.name in wanted)
    settings = {
        "height": args.height,
        "seconds": args.seconds,
        "realistic": args.realistic,
        "provider": args.provider,
        "only": ",".join(wanted),
    }
    figures = measure(
        args.height, args.seconds, cases, realistic=args.realistic, provider=args.provider, env=env,
        so_far=lambda done: write_so_far("processors", settings, done, args.json),
    )  # fmt: skip
    finish("processors", settings, figures, args.json, env)
    return 0
