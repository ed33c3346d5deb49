"""`ffdesk bench budget`: does a render stay within `--memory-budget`, as seen from outside?

The renderer counts what its models take; this bench checks that count against what the
process really holds, watched from another process every 50 ms while `ffdesk render` runs:

- on a GPU, NVML's figure for the render process (everything it holds on the card: the CUDA
  context, ONNX Runtime's arenas, torch's cache); where NVML cannot name the process (a container
  with its own PID namespace), the device's used memory over what it was before the render;
- on the CPU, the render process's resident memory (RSS) over that of the same clip re-encoded
  without models (decoding, encoding, the frames in flight: what the budget does not cover),
  each at its peak as the kernel kept it (Linux's VmHWM), so no peak between samples is missed.

One render with every model resident (no budget) gives the models' footprints and the fixed cost
(the reservation: the CUDA context and the runtime's own share, 0 on the CPU); then one render per
budget, `--steps` of them from the smallest the renderer takes (the reservation plus the largest
model on one item, plus 10%) to everything resident at the render's batch. A budget is held when
the watched peak stays within it.
Realistic-size stand-ins of a full pack (`ffdesk bench memory`'s), a 720p clip with one face.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ffdesk.bench.common import add_json_option, finish, say_if_no_gpu, write_so_far
from ffdesk.bench.gpu import watch_render
from ffdesk.bench.memory import (
    PACK,
    check_models_dir,
    face_clip,
    fewest_frames_held,
    on_the_gpu,
    pack_args,
    realistic_pack,
    render_clip,
    render_in_process,
)
from ffdesk.commands.argtypes import whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.hw import DriverFlags
from ffdesk.pipeline.job import MAX_BATCH
from ffdesk.telemetry.nvml import Nvml

if TYPE_CHECKING:
    from ffdesk.pipeline.report import RenderReport
    from ffdesk.telemetry.sampler import Sample

PREFIX = "ffdesk bench budget"
SMALLEST_HEADROOM = 0.10
"""The smallest budget tried: the reservation plus the largest model, plus this fraction."""

Source = Literal["nvml-process", "nvml-device", "rss"]


@dataclass(frozen=True)
class BudgetRun:
    """One render and what was seen of it from outside."""

    budget_bytes: int | None
    """None: no budget (every model resident)."""
    watched_peak_bytes: int | None
    """What the process held at its peak, from outside, over `baseline_bytes` (None: unreadable)."""
    baseline_bytes: int
    """What the watched figure holds that the budget does not cover: on the CPU the re-encode's
    peak RSS; on a GPU 0 (NVML's per-process figure) or the device's use before the render."""
    source: Source | None
    accounted_peak_bytes: int
    """The renderer's own count: its models' peak plus the reservation (plus, on a GPU with the
    pixels there, the most torch held for them): an upper bound, the peaks not all at once."""
    reserved_bytes: int
    fps: float
    loads: int
    evictions: int
    samples: int
    pixel_bytes: int = 0
    """The most the pixels took on the GPU (`PixelFigures.device_bytes`; 0 on the host path)."""

    @property
    def held(self) -> bool | None:
        """Whether the watched peak stayed within the budget (None: no budget, or not seen)."""
        if self.budget_bytes is None or self.watched_peak_bytes is None:
            return None
        return self.watched_peak_bytes <= self.budget_bytes


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "budget", help="renders under memory budgets, watched from outside (NVML on a GPU, RSS on the CPU)"
    )
    p.add_argument("--frames", type=whole_at_least(1), default=8, help="frames rendered per run (default 8)")
    p.add_argument("--batch", type=whole_at_least(1, MAX_BATCH), default=4)
    p.add_argument(
        "--steps",
        type=whole_at_least(1),
        default=4,
        help="budgets tried, smallest to all resident (default 4)",
    )
    p.add_argument("--no-masks", dest="masks", action="store_false", help="leave out the two mask models")
    p.add_argument("--models-dir", type=Path, default=None, help="pack to use (default: stand-ins)")
    p.add_argument("--provider", choices=("auto", "cpu", "cuda"), default="auto")
    add_json_option(p)
    p.set_defaults(func=run)


def budgets(reserved: int, one_item: list[int], at_batch: list[int], steps: int, held: int = 0) -> list[int]:
    """`steps` budgets from the smallest the renderer takes (the reservation and the largest
    model on one item, plus `SMALLEST_HEADROOM`, plus `held`: on the CPU the batch of frames
    segment order holds back) to all resident at the render's batch (the reservation and every
    model's footprint at it), evenly spaced; one when those meet."""
    if not one_item:
        return []
    low = reserved + held + int(max(one_item) * (1.0 + SMALLEST_HEADROOM))
    high = max(low, reserved + sum(at_batch))
    if steps <= 1 or high == low:
        return [low]
    return [low + (high - low) * i // (steps - 1) for i in range(steps)]


def watched_peak(samples: list[Sample], source: Source, device_before: int | None) -> int | None:
    """The peak of the watched figure over the samples (None: it was never read)."""
    values: list[int] = []
    for s in samples:
        if source == "rss":  # the kernel's high-water mark where it keeps one: no peak missed
            readings = [s.host.process_rss_bytes, s.host.process_rss_peak_bytes]
            value = max((v for v in readings if v is not None), default=None)
        elif source == "nvml-process":
            held = [g.process_memory_bytes for g in s.gpus]
            value = sum(v for v in held if v is not None) if any(v is not None for v in held) else None
        else:
            used = [g.memory_used_bytes for g in s.gpus if g.memory_used_bytes is not None]
            value = sum(used) - (device_before or 0) if used else None
        if value is not None:
            values.append(value)
    return max(values) if values else None


def choose_source(samples: list[Sample], on_gpu: bool) -> Source:
    """NVML's per-process figure where the render process is seen holding memory on the card;
    the device's used memory where NVML lists processes but never that one; RSS on the CPU."""
    if not on_gpu:
        return "rss"
    if any((g.process_memory_bytes or 0) > 0 for s in samples for g in s.gpus):
        return "nvml-process"
    return "nvml-device"


def device_used_now(flags: DriverFlags) -> int | None:
    """The GPUs' used memory now (every process), for the device fallback's baseline."""
    nvml = Nvml(flags=flags)
    try:
        used = [g.memory_used_bytes for g in nvml.sample() if g.memory_used_bytes is not None]
        return sum(used) if used else None
    finally:
        nvml.close()


def run(args: argparse.Namespace) -> int:
    env = runtime_env(args)
    say_if_no_gpu(args.provider, env)
    names = PACK if args.masks else PACK[:3]
    if args.models_dir is not None:
        check_models_dir(args.models_dir, names)
    pack = args.models_dir or realistic_pack(env, names)
    clip = face_clip(env)
    base = pack_args(args.batch, args.provider, args.masks)
    settings = {
        "frames": args.frames,
        "batch": args.batch,
        "steps": args.steps,
        "provider": args.provider,
        "models": list(names),
        "models_dir": None if args.models_dir is None else str(args.models_dir),
    }
    runs: list[BudgetRun] = []
    figures: dict[str, Any] = {"runs": runs}
    with tempfile.TemporaryDirectory(prefix="ffdesk-bench-budget-") as tmp:
        print(f"{PREFIX}: {args.frames} frames of {clip.name} a render, batch {args.batch}", flush=True)
        resident = measure(clip, pack, Path(tmp), args.frames, base, None, env.driver)
        on_gpu = on_the_gpu(resident.report)
        baseline = 0 if on_gpu else reencode_peak_rss(clip, Path(tmp), args.frames, env.driver)
        first = resident.figures(baseline)
        runs.append(first)
        print_run(first)
        models = resident.report.models
        stats = models.models if models is not None else ()
        figures["footprints_bytes"] = {m.name: m.bytes for m in stats}
        figures["one_item_bytes"] = {m.name: m.one_item_bytes or m.bytes for m in stats}
        figures["reserved_bytes"] = first.reserved_bytes
        figures["watched"] = first.source
        write_so_far("budget", settings, _json(figures), args.json)
        # on the CPU a batch of the frames segment order holds back counts against the budget too;
        # on a GPU what the pixels took there (the frames on the card and their work)
        figures["held_frames_bytes"] = first.pixel_bytes if on_gpu else fewest_frames_held(clip, args.batch)
        tried = budgets(
            first.reserved_bytes,
            list(figures["one_item_bytes"].values()),
            list(figures["footprints_bytes"].values()),
            args.steps,
            figures["held_frames_bytes"],
        )
        for budget in tried:
            watched = measure(clip, pack, Path(tmp), args.frames, base, budget, env.driver)
            result = watched.figures(baseline)
            runs.append(result)
            print_run(result)
            write_so_far("budget", settings, _json(figures), args.json)
    limited = [r for r in runs if r.budget_bytes is not None]
    figures["all_held"] = all(r.held for r in limited) if limited else None
    shares = [
        r.watched_peak_bytes / r.budget_bytes for r in limited if r.watched_peak_bytes and r.budget_bytes
    ]
    worst = max(shares, default=None)
    figures["worst_peak_over_budget"] = None if worst is None else round(worst, 3)
    if worst is not None:
        verdict = "held" if figures["all_held"] else "NOT held"
        print(f"{PREFIX}: every budget {verdict}; the watched peak reached {worst:.1%} of its budget at most")
    finish("budget", settings, _json(figures), args.json, env)
    return 0


def _json(figures: dict[str, Any]) -> dict[str, Any]:
    runs = [{**asdict(r), "held": r.held} for r in figures["runs"]]
    return {**figures, "runs": runs}


@dataclass(frozen=True)
class Measured:
    report: RenderReport
    samples: list[Sample]
    source: Source
    device_before: int | None

    def figures(self, baseline: int | None) -> BudgetRun:
        models = self.report.models
        reserved = models.reserved_bytes if models is not None else 0
        pixels = models.pixels.device_bytes if models is not None and models.pixels is not None else 0
        # the device's use is over what it was before the render already; RSS over the re-encode's
        peak = watched_peak(self.samples, self.source, self.device_before)
        offset = {"rss": baseline or 0, "nvml-device": self.device_before or 0, "nvml-process": 0}[
            self.source
        ]
        if peak is not None and self.source == "rss":
            peak -= offset
        return BudgetRun(
            budget_bytes=models.memory_budget_bytes if models is not None else None,
            watched_peak_bytes=peak,
            baseline_bytes=offset,
            source=self.source if peak is not None else None,
            accounted_peak_bytes=(models.peak_model_bytes if models is not None else 0) + reserved + pixels,
            reserved_bytes=reserved,
            pixel_bytes=pixels,
            fps=round(self.report.fps, 3),
            loads=sum(m.loads for m in models.models) if models is not None else 0,
            evictions=sum(m.evictions for m in models.models) if models is not None else 0,
            samples=len(self.samples),
        )


def measure(
    clip: Path,
    pack: Path,
    tmp: Path,
    frames: int,
    base: list[str],
    budget: int | None,
    flags: DriverFlags,
) -> Measured:
    """One render in its own process, watched from here."""
    label = "every model resident" if budget is None else f"budget {_mib(budget)}"
    print(f"  render, {label} ...", flush=True)
    extra = base if budget is None else [*base, "--memory-budget", str(budget)]
    out = tmp / ("resident.mp4" if budget is None else f"budget-{budget}.mp4")
    before = device_used_now(flags)
    watched = watch_render(
        lambda: render_in_process(clip, pack, out, frames, extra), out.with_suffix(".json"), flags
    )
    samples = list(watched.samples)
    return Measured(watched.report, samples, choose_source(samples, on_the_gpu(watched.report)), before)


def reencode_peak_rss(clip: Path, tmp: Path, frames: int, flags: DriverFlags) -> int:
    """The peak RSS of the same clip re-encoded without models (what the CPU budget leaves out)."""
    out = tmp / "reencode.mp4"
    print("  re-encode without models (the baseline the CPU budget leaves out) ...", flush=True)
    watched = watch_render(lambda: render_clip(clip, out, frames, []), out.with_suffix(".json"), flags)
    peak = watched_peak(list(watched.samples), "rss", None)
    return peak or 0


def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.0f} MiB"


def print_run(r: BudgetRun) -> None:
    budget = "no budget" if r.budget_bytes is None else f"budget {_mib(r.budget_bytes)}"
    watched = {
        "nvml-process": "NVML, the process",
        "nvml-device": "NVML, the device over its use before",
        "rss": f"RSS over the re-encode's {_mib(r.baseline_bytes)}",
        None: "not seen",
    }[r.source]
    verdict = {True: "  held", False: "  OVER", None: ""}[r.held]
    print(
        f"    {budget}: watched peak {_mib(r.watched_peak_bytes)} ({watched}),"
        f" counted {_mib(r.accounted_peak_bytes)} (reserved {_mib(r.reserved_bytes)}"
        f"{f', pixels {_mib(r.pixel_bytes)}' if r.pixel_bytes else ''}),"
        f" {r.fps:.3f} frames/s, {r.loads} loads, {r.evictions} evictions{verdict}",
        flush=True,
    )
