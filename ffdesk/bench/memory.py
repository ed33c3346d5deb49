"""`ffdesk bench memory`: all models resident vs loaded on demand under a budget.

Renders the first frames of a synthesized 720p clip with one face through a full-quality model
pack (swapper, recogniser, enhancer, and the occlusion and region masks unless `--no-masks`),
using random-weight stand-ins of the real models' size and compute. Two runs, each in its own process
so peak RSS is its own:

- all resident: no budget; every model stays loaded once used;
- on demand: a budget of the two largest models (as measured by the first run, each on one
  item: the least a budget must hold for it); `--budget-models 1`
  tries the largest model alone (the stages then take turns with the models), and `--headroom 0.1`
  adds 10% to the budget (the issue's "largest model plus 10%": `--budget-models 1 --headroom 0.1`).

Goal: on demand at least 35% lower peak model memory, with at least 90% of the throughput.
A budget can only cut the peak by what the models outside it weigh: with a budget of the N largest
models the most it can save is 1 - (N largest / all). The bench prints that bound for the measured
footprints and for the published files' sizes (the catalog's `size_bytes`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.bench.common import (
    add_json_option,
    cache_dir,
    cached,
    finish,
    say_if_no_gpu,
    write_so_far,
)
from ffdesk.commands.argtypes import number_from, whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.media.probe import probe
from ffdesk.pipeline.job import MAX_BATCH
from ffdesk.pipeline.stages.models import frames_at_once, held_frame_bytes
from ffdesk.runtime.env import RuntimeEnv

if TYPE_CHECKING:
    from ffdesk.pipeline.report import RenderReport
    from ffdesk.runtime.residency import ModelStats

GOAL_REDUCTION = 0.35
GOAL_THROUGHPUT = 0.90
PACK = ("inswapper_128", "arcface_w600k_r50", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34")


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "memory", help="models all resident vs on demand under a budget (realistic stand-ins, 720p)"
    )
    at_least_1 = whole_at_least(1)
    p.add_argument("--frames", type=at_least_1, default=16, help="frames rendered per run (default 16)")
    p.add_argument("--batch", type=whole_at_least(1, MAX_BATCH), default=4)
    p.add_argument(
        "--budget-models", type=at_least_1, default=2, help="budget = the N largest models (default 2)"
    )
    p.add_argument(
        "--headroom",
        type=number_from(0),
        default=0.0,
        help="add this fraction to the budget (0.1: 10%%; default 0)",
    )
    p.add_argument(
        "--repeat", type=at_least_1, default=1, help="runs of each, alternating; the best fps is kept"
    )
    p.add_argument(
        "--no-masks", dest="masks", action="store_false", help="leave out the occlusion and region masks"
    )
    p.add_argument("--models-dir", type=Path, default=None, help="pack to use (default: stand-ins)")
    p.add_argument("--provider", choices=("auto", "cpu", "cuda", "tensorrt"), default="auto")
    add_json_option(p)
    p.set_defaults(func=run)


def realistic_pack(env: RuntimeEnv, names: tuple[str, ...] = PACK, *, dynamic_batch: bool = True) -> Path:
    """A folder of realistic-size stand-ins, made once and cached between bench runs."""
    from ffdesk.runtime.standins import write_standins

    folder = cache_dir(env) / ("standins-realistic" + ("-batch" if dynamic_batch else ""))
    missing = [n for n in names if not (folder / f"{n}.onnx").is_file()]
    if missing:
        print(f"writing realistic stand-ins ({', '.join(missing)}) to {folder} ...", flush=True)
        write_standins(folder, missing, realistic=True, dynamic_batch=dynamic_batch)
    return folder


def check_models_dir(folder: Path, names: tuple[str, ...]) -> None:
    """`UserError` (one line, before any work) unless `folder` (`--models-dir`) holds a sound
    file of each of `names` (catalog models): a bench's render found a missing or damaged one
    only in a process of its own, whose refusal came back as an internal error."""
    from ffdesk.runtime.catalog import load_catalog
    from ffdesk.runtime.files import verify

    if not folder.is_dir():
        there = "is a file, not a folder" if folder.exists() else "no such folder"
        raise UserError(f"--models-dir {folder}: {there}")
    catalog = load_catalog()
    for name in names:
        spec = catalog.get(name)
        path = folder / spec.file
        if not path.is_file():
            raise UserError(f"--models-dir: {spec.file} is not in {folder}")
        problems = verify(spec, path)
        if problems:
            raise UserError("; ".join(problems))


def face_clip(env: RuntimeEnv, seconds: float = 6.0, height: int = 720) -> Path:
    """The 720p sample clip with one slowly moving face (cached)."""
    from ffdesk.commands.sample import make_sample_clip

    width = height * 16 // 9
    return cached(
        cache_dir(env) / f"models_{width}x{height}_{seconds:g}s.mp4",
        lambda tmp: make_sample_clip(tmp, seconds=seconds, width=width, height=height),
    )


def source_photo() -> Path:
    from ffdesk.runtime.resources import resource_path

    return resource_path("sample", "grace_hopper.jpg")


def pack_args(batch: int, provider: str, masks: bool) -> list[str]:
    """The render options of the benches' full pack (`PACK`, the masks optional), at FP32."""
    args = ["--swapper", "inswapper_128", "--recognizer", "arcface_w600k_r50", "--enhancer", "gfpgan_1.4",
            "--precision", "fp32", "--batch", str(batch), "--provider", provider]  # fmt: skip
    return [*args, "--mask", "occlusion,region"] if masks else args


def render_in_process(
    clip: Path, pack: Path, out: Path, frames: int, extra: list[str], fps: float = 25.0
) -> RenderReport:
    """Run `ffdesk render` of the bundled source photo with `pack`'s models in a fresh process and
    return its report."""
    return render_clip(
        clip, out, frames, ["--source", str(source_photo()), "--models-dir", str(pack), *extra], fps
    )


def render_clip(clip: Path, out: Path, frames: int, extra: list[str], fps: float = 25.0) -> RenderReport:
    """Run `ffdesk render` of `clip`'s first `frames` in a fresh process and return its report
    (read from `--report`)."""
    from ffdesk.pipeline.report import RenderReport

    report = out.with_suffix(".json")
    cmd = [sys.executable, "-m", "ffdesk", "render", "--target", str(clip), "--output", str(out),
           "--no-resume", "-q", "--end", f"{frames / fps:.4f}", "--report", str(report), *extra]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    said = (proc.stderr or proc.stdout).strip().splitlines()
    if proc.returncode == 2 and said:  # the render refused what it was given: its own one line
        raise UserError(f"the bench's render: {said[-1].removeprefix('ffdesk: error: ')}")
    if proc.returncode != 0:
        tail = said[-3:]
        raise RuntimeError(f"render failed ({proc.returncode}): {' | '.join(tail)}")
    return RenderReport.from_json_dict(json.loads(report.read_text(encoding="utf-8")))


def _published_bound(names: tuple[str, ...], budget_models: int) -> float:
    """1 - (N largest / all) for the catalog's published file sizes of `names`."""
    from ffdesk.runtime.catalog import load_catalog

    catalog = load_catalog()
    sizes = sorted((catalog.get(n).size_bytes or 0 for n in names), reverse=True)
    total = sum(sizes)
    return round(1 - sum(sizes[: max(1, budget_models)]) / total, 3) if total else 0.0


def fewest_frames_held(clip: Path, batch: int) -> int:
    """What the fewest frames a render of `clip` holds at once in segment order count against a
    CPU budget (a batch in each of the swap's and the enhancer's windows, the frames the tracking
    holds back, the decoder's and the encoder's): the least room it must leave beside the largest
    model."""
    from ffdesk.faces.tracking import TrackerSettings
    from ffdesk.pipeline.stages.front import held_back

    return frames_at_once(batch, 2, held_back(TrackerSettings())) * held_frame_bytes(probe(clip))


def on_the_gpu(report: RenderReport) -> bool:
    """Whether the render's models ran on a GPU (CUDA or TensorRT), as its report says."""
    return any(m.provider in ("CUDAExecutionProvider", "TensorrtExecutionProvider") for m in _models(report))


def _models(report: RenderReport) -> tuple[ModelStats, ...]:
    return report.models.models if report.models is not None else ()


def _peak_model_bytes(report: RenderReport) -> int:
    return report.models.peak_model_bytes if report.models is not None else 0


def _mib(n: float | None) -> float | None:
    return None if n is None else round(n / 2**20, 1)


def run(args: argparse.Namespace) -> int:
    names = PACK if args.masks else PACK[:3]
    env = runtime_env(args)
    say_if_no_gpu(args.provider, env)
    if args.models_dir is not None:
        check_models_dir(args.models_dir, names)
    pack = args.models_dir or realistic_pack(env, names)
    clip = face_clip(env)
    base = pack_args(args.batch, args.provider, args.masks)
    settings = {
        "frames": args.frames,
        "batch": args.batch,
        "masks": args.masks,
        "pack": str(pack),
        "provider": args.provider,
        "repeat": args.repeat,
        "budget_models": args.budget_models,
        "headroom": args.headroom,
    }
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-memory-") as tmp:
        print(f"all resident: {args.frames} frames of {clip.name} ...", flush=True)
        resident = render_in_process(clip, pack, Path(tmp) / "resident.mp4", args.frames, base)
        # a time limit in the on-demand render (the GPU check's) keeps the all-resident figures
        first = {
            "peak_model_mib": _mib(_peak_model_bytes(resident)),
            "peak_rss_mib": _mib(resident.peak_rss_bytes),
            "fps": resident.fps,
            "models_at_batch_mib": {m.name: _mib(m.bytes) for m in _models(resident)},
        }
        write_so_far("memory", settings, {"all_resident": first}, args.json)
        # each model's footprint on one item: the least a budget must hold for it (at the render's
        # batch its runtime holds more, which a tighter budget makes it give up)
        sizes = sorted((m.one_item_bytes or m.bytes for m in _models(resident)), reverse=True)
        models = int(sum(sizes[: max(1, args.budget_models)]) * (1.0 + max(0.0, args.headroom)))
        # on a GPU beside the device's own fixed cost (the CUDA context), which the budget holds too
        reserved = resident.models.reserved_bytes if resident.models is not None else 0
        # on the CPU beside the fewest frames segment order holds at once, which it holds too
        held = 0 if reserved or on_the_gpu(resident) else fewest_frames_held(clip, args.batch)
        # and on the device pixel path beside its frames, crops and masks on the card
        pixels = resident.models.pixels if resident.models is not None else None
        on_card = pixels.device_bytes if pixels is not None else 0
        budget = reserved + models + held + on_card
        limited = [*base, "--memory-budget", str(budget)]
        beside = f", beside {_mib(reserved)} MiB reserved" if reserved else ""
        beside += f", beside {_mib(held)} MiB of frames held" if held else ""
        beside += f", beside {_mib(on_card)} MiB of pixels on the device" if on_card else ""
        print(
            f"on demand: budget {_mib(budget)} MiB ({args.budget_models} largest models"
            f" + {args.headroom:.0%}{beside}) ...",
            flush=True,
        )
        demand = render_in_process(clip, pack, Path(tmp) / "demand.mp4", args.frames, limited)
        best = {"all_resident": resident.fps, "on_demand": demand.fps}
        for _ in range(max(1, args.repeat) - 1):
            again = render_in_process(clip, pack, Path(tmp) / "resident.mp4", args.frames, base)
            best["all_resident"] = max(best["all_resident"], again.fps)
            again = render_in_process(clip, pack, Path(tmp) / "demand.mp4", args.frames, limited)
            best["on_demand"] = max(best["on_demand"], again.fps)
    runs = {"all_resident": resident, "on_demand": demand}
    figures: dict[str, Any] = {}
    for label, rep in runs.items():
        figures[label] = {
            "peak_model_mib": _mib(_peak_model_bytes(rep)),
            "peak_rss_mib": _mib(rep.peak_rss_bytes),
            "fps": best[label],
            "loads": sum(m.loads for m in _models(rep)),
            "evictions": sum(m.evictions for m in _models(rep)),
        }
    figures["models_mib"] = {m.name: _mib(m.one_item_bytes or m.bytes) for m in _models(resident)}
    figures["models_at_batch_mib"] = {m.name: _mib(m.bytes) for m in _models(resident)}
    figures["budget_mib"] = _mib(budget)
    reserved = demand.models.reserved_bytes if demand.models is not None else 0
    order = demand.models.order if demand.models is not None else None
    frames_held = order.held_bytes if order is not None else 0  # on the CPU, in either order
    figures["reserved_mib"] = _mib(reserved)
    figures["frames_held_mib"] = _mib(frames_held)
    figures["within_budget"] = _peak_model_bytes(demand) + reserved + frames_held <= budget
    figures["peak_model_reduction"] = round(1 - _peak_model_bytes(demand) / _peak_model_bytes(resident), 3)
    rss = (demand.peak_rss_bytes or 0) / (resident.peak_rss_bytes or 1)  # a local render has both
    figures["peak_rss_reduction"] = round(1 - rss, 3)
    ratio = best["on_demand"] / best["all_resident"] if best["all_resident"] else None
    figures["throughput_ratio"] = round(ratio, 3) if ratio is not None else None
    # against what every model resident held at its batch: the models' share of the budget (what
    # it leaves beside the reservation and the frames held; the measured reduction counts models
    # alone) is the most the on-demand render's models may hold, so the least reduction it gives
    figures["budget_models_mib"] = _mib(models)
    figures["guaranteed_reduction"] = round(1 - models / max(1, _peak_model_bytes(resident)), 3)
    figures["published_bound"] = _published_bound(names, args.budget_models)
    for label in runs:
        f = figures[label]
        print(
            f"{label:13s} peak model {f['peak_model_mib']:8.1f} MiB  peak RSS {f['peak_rss_mib']:8.1f} MiB"
            f"  {f['fps']:6.3f} frames/s  loads {f['loads']}  evictions {f['evictions']}"
        )
    print(f"models on one item (MiB): {figures['models_mib']}")
    print(f"models at the render's batch (MiB): {figures['models_at_batch_mib']}")
    print(
        f"peak model memory {figures['peak_model_reduction']:.1%} lower (goal: {GOAL_REDUCTION:.0%}; the"
        f" budget's share for the {args.budget_models} largest models makes it at least"
        f" {figures['guaranteed_reduction']:.1%} here)"
    )
    print(
        "  (with the published files' sizes the same budget makes it at least"
        f" {figures['published_bound']:.1%})"
    )
    print(
        f"budget {figures['budget_mib']} MiB: on-demand peak model memory"
        f" {'within' if figures['within_budget'] else 'OVER'} it"
    )
    print(f"peak RSS {figures['peak_rss_reduction']:.1%} lower")
    print(f"throughput {figures['throughput_ratio']:.1%} of all resident (goal: {GOAL_THROUGHPUT:.0%})")
    finish("memory", settings, figures, args.json, runtime_env(args))
    return 0
