"""`ffdesk bench gpu`: ffdesk's renders on an NVIDIA GPU, watched from outside through NVML.

Three renders of a synthesized one-face clip (realistic-size stand-ins of the models unless
`--models-dir` names a pack), each `ffdesk render` in a process of its own (`render_in_process`),
so the GPU memory NVML lists for that process is the render's alone:

- full: 1080p, swapper + recogniser + enhancer + occlusion and region masks, all resident (no
  budget), `--batch` frames a call, x264 ultrafast (the H200 has no NVENC; ultrafast is the
  nearest a CPU encoder comes to it);
- swap: 1080p, swapper + recogniser and the box mask only;
- full-720-medium: 720p, the full pack, x264 at medium (the configuration compared with FaceFusion).

While a render runs, this process samples the GPU every 50 ms through ffdesk's NVML wrapper
(`ffdesk.telemetry.sampler` over `ffdesk.telemetry.nvml`), not the render itself, so the sampling
costs the render nothing. Over the render's own span (its report's `seconds` less the models'
preparation before the first frame, ending when the report appears): GPU busy % (mean), power
(mean), energy (the board's energy counter's difference where it reads, else power integrated over
time) and energy per frame; over the render process's whole life: its GPU memory peak (NVML's
per-process figure for its pid) and the device's used memory peak. From the render's report:
frames/s over that span, the preparation's seconds (variants, warm-up of every batch shape: paid
once a render, whatever its length), and each stage's wall and CPU milliseconds a frame.

"Models alone": in one fresh process, before the renders (so the swapper's FP16 variant they share
is made there, not inside the first render's timing), each model of the renders is timed on zero
inputs at the render's batch (the swapper at the render's precision, the others in FP32, as a
render runs them), inputs and outputs kept on the models' device, median of `--model-runs` calls after a
warm-up. A file that fixes its batch (FaceFusion's fix it at 1) and has no batch-free copy in the
render is timed at its own batch: the line after "models alone" and each model's row say so.
One face a frame, the models that run for every face (swapper, enhancer, occluder, parser;
not the recogniser, which embeds the source once) allow at most 1000 / (their ms a face summed)
frames/s; the render's efficiency is its frames/s over that ceiling.

Without an NVIDIA GPU usable by ONNX Runtime the bench says so in one line and measures nothing
(exit 0). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ffdesk.bench.common import add_json_option, finish, median_ms, write_so_far
from ffdesk.bench.memory import PACK, face_clip, realistic_pack, render_in_process
from ffdesk.commands.argtypes import whole_at_least
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import UserError
from ffdesk.hw import DriverFlags
from ffdesk.pipeline.job import MAX_BATCH, PIXELS, PROVIDERS, Provider
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.sessions import cuda_usable
from ffdesk.telemetry.nvml import GpuSample, Nvml
from ffdesk.telemetry.sampler import Sample, Sampler, SystemProbe

if TYPE_CHECKING:
    from ffdesk.pipeline.report import PixelFigures, RenderReport

SWAPPER, RECOGNIZER, ENHANCER, OCCLUDER, PARSER = PACK
"""The pack the memory bench builds (`realistic_pack`), each in its role."""

Role = Literal["swapper", "recognizer", "enhancer", "occluder", "parser"]
PER_FACE_ROLES: tuple[Role, ...] = ("swapper", "enhancer", "occluder", "parser")
"""The models that run once for every face (the recogniser embeds the source photo once)."""

INTERVAL_S = 0.05
CLIP_FPS = 25.0
"""The synthesized clips' frame rate (`make_sample_clip`)."""
WARMUP_CALLS = 3
"""Untimed calls before a model is timed: the first call of a batch shape picks cuDNN's algorithms."""
PREFIX = "ffdesk bench gpu"


@dataclass(frozen=True)
class PackModel:
    """One model of a render's pack: its role there and its catalog name."""

    role: Role
    name: str


FULL_PACK = (
    PackModel("swapper", SWAPPER),
    PackModel("recognizer", RECOGNIZER),
    PackModel("enhancer", ENHANCER),
    PackModel("occluder", OCCLUDER),
    PackModel("parser", PARSER),
)
SWAP_PACK = FULL_PACK[:2]


@dataclass(frozen=True)
class RenderConfig:
    """One of the bench's renders: clip height, the full pack or the swapper alone, x264 preset."""

    name: str
    height: int
    full: bool
    video_preset: str

    @property
    def models(self) -> tuple[PackModel, ...]:
        return FULL_PACK if self.full else SWAP_PACK

    @property
    def pack_args(self) -> tuple[str, ...]:
        """The render's model options."""
        models = ("--swapper", SWAPPER, "--recognizer", RECOGNIZER)
        if self.full:
            return (*models, "--enhancer", ENHANCER, "--mask", "occlusion,region")
        return (*models, "--mask", "box")

    def label(self, height: int | None = None) -> str:
        """What the render is, at `height` (default: its own)."""
        pack = "full pack" if self.full else "swapper + box mask"
        return f"{height or self.height}p, {pack}, x264 {self.video_preset}"


RENDERS = (
    RenderConfig("full", 1080, True, "ultrafast"),
    RenderConfig("swap", 1080, False, "ultrafast"),
    RenderConfig("full-720-medium", 720, True, "medium"),
)


@dataclass(frozen=True)
class RenderSettings:
    """What every render of one bench run shares."""

    frames: int
    batch: int
    precision: str
    pixels: str
    provider: Provider
    height: int | None = None
    """Every clip at this height instead of the renders' own (a quick check)."""

    def render_args(self, config: RenderConfig) -> list[str]:
        return [
            *config.pack_args,
            "--batch", str(self.batch),
            "--precision", self.precision,
            "--video-preset", config.video_preset,
            "--provider", self.provider,
            "--pixels", self.pixels,
        ]  # fmt: skip


# ---- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuInfo:
    """The GPU the renders run on (NVML's device 0) and how many there are."""

    name: str | None
    memory_total_bytes: int | None
    power_limit_w: float | None
    count: int


@dataclass(frozen=True)
class ModelTiming:
    """One model timed alone: steady milliseconds a call at `batch` (None with `error`)."""

    name: str
    role: Role
    precision: str
    provider: str | None
    batch: int
    ms_per_call: float | None
    note: str | None = None
    """What was timed other than asked (an INT8 variant not made yet)."""
    error: str | None = None
    held_bytes: int | None = None
    """What the process held after the timed calls over what it held before the session was made
    (on a GPU the device's memory for this process, on the CPU the heap)."""
    pattern_ms_per_call: float | None = None
    """The same calls with ONNX Runtime's memory pattern on (its default; ffdesk turns it off so
    a footprint measured after one call holds from then on): what turning it off costs in speed.
    Per-face models only; None where not timed."""
    pattern_held_bytes: int | None = None
    """`held_bytes` with the memory pattern on."""

    @property
    def ms_per_face(self) -> float | None:
        return None if self.ms_per_call is None else self.ms_per_call / self.batch


@dataclass(frozen=True)
class WatchFigures:
    """What sampling the render process from outside found (None: not readable here)."""

    samples: int
    gpu_util_mean_pct: float | None = None
    process_gpu_memory_peak_bytes: int | None = None
    """The render process's own GPU memory (NVML per process), peak over its life; None when NVML
    never listed it holding any (it ran on the CPU, or NVML sees it under another pid)."""
    gpu_memory_used_peak_bytes: int | None = None
    """The device's used memory (every process), peak over the render process's life."""
    power_mean_w: float | None = None
    energy_j: float | None = None
    energy_source: Literal["nvml_total_energy", "power_integral"] | None = None
    process_cpu_mean_pct: float | None = None
    """The render process's CPU use (100: one core busy), mean over the render."""


@dataclass(frozen=True)
class StageFigure:
    """A stage's wall and CPU milliseconds a frame (of the frames it handled)."""

    name: str
    ms_per_frame: float | None
    cpu_ms_per_frame: float | None


@dataclass(frozen=True)
class RenderResult:
    """One render's figures, or the one line saying why there are none (`error`)."""

    config: RenderConfig
    settings: RenderSettings
    error: str | None = None
    frames: int = 0
    seconds: float | None = None
    """From the first frame's decoding to the output in place (the models' preparation left out)."""
    fps: float | None = None
    """`frames` over `seconds`: the render's own rate."""
    prepare_seconds: float | None = None
    """Getting the models ready before the first frame: variants, warm-up of every batch shape."""
    stages: tuple[StageFigure, ...] = ()
    model_providers: tuple[str, ...] = ()
    pixels_used: str | None = None
    """Where the render kept its pixels between model calls, as its report says ("host", or
    "device" with the torch device); None when the report does not say."""
    pixel_bytes: int | None = None
    """The most the pixels took in the GPU's memory (its report's `pixels.device_bytes`); None
    where they did not stay on a GPU (the host path, or torch's CPU device)."""
    watch: WatchFigures = field(default_factory=lambda: WatchFigures(samples=0))
    models_alone: tuple[ModelTiming, ...] = ()
    batch_notes: tuple[str, ...] = ()
    """How the render's files that fix their batch at 1 took their faces (its report's
    `model_batch_notes`)."""
    late_shapes: tuple[tuple[str, int], ...] = ()
    """(model, calls) of each model that met an input shape its session had not run at once the
    frames started (its report's `late_shapes`): a cuDNN algorithm search mid-render each."""

    @property
    def height(self) -> int:
        return self.settings.height or self.config.height

    @property
    def energy_per_frame_j(self) -> float | None:
        energy = self.watch.energy_j
        return energy / self.frames if energy is not None and self.frames > 0 else None

    @property
    def ceiling_fps(self) -> float | None:
        """The frames/s the per-face models alone allow at one face a frame (None if one failed)."""
        per_face = [t.ms_per_face for t in self.models_alone if t.role in PER_FACE_ROLES]
        if not per_face or any(ms is None or ms <= 0 for ms in per_face):
            return None
        return round(1000.0 / sum(ms for ms in per_face if ms is not None), 2)

    @property
    def efficiency(self) -> float | None:
        ceiling = self.ceiling_fps
        return round(self.fps / ceiling, 6) if self.fps is not None and ceiling else None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.config.name,
            "height": self.height,
            "pack": "full" if self.config.full else "swap",
            "video_preset": self.config.video_preset,
            "batch": self.settings.batch,
            "precision": self.settings.precision,
            "pixels": self.settings.pixels,
            "provider": self.settings.provider,
            "error": self.error,
            "frames": self.frames,
            "seconds": self.seconds,
            "fps": self.fps,
            "prepare_seconds": self.prepare_seconds,
            "stage_ms_per_frame": {s.name: s.ms_per_frame for s in self.stages},
            "stage_cpu_ms_per_frame": {s.name: s.cpu_ms_per_frame for s in self.stages},
            "model_providers": list(self.model_providers),
            "pixels_used": self.pixels_used,
            "pixel_bytes": self.pixel_bytes,
            **asdict(self.watch),
            "energy_per_frame_j": self.energy_per_frame_j,
            "models_alone": [{**asdict(t), "ms_per_face": t.ms_per_face} for t in self.models_alone],
            "models_alone_ceiling_fps": self.ceiling_fps,
            "efficiency": self.efficiency,
            "model_batch_notes": list(self.batch_notes),
            "late_shapes": dict(self.late_shapes),
        }


# ---- command line ------------------------------------------------------------------------------


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "gpu", help="renders on an NVIDIA GPU: frames/s, GPU busy, memory, power, energy (NVML)"
    )
    p.add_argument(
        "--frames", type=whole_at_least(1), default=150, help="frames rendered per render (default 150)"
    )
    p.add_argument(
        "--batch",
        type=whole_at_least(1, MAX_BATCH),
        default=16,
        help="frames per inference batch (default 16)",
    )
    p.add_argument("--precision", choices=("auto", "fp32", "fp16", "int8"), default="fp16")
    p.add_argument(
        "--renders",
        default=",".join(r.name for r in RENDERS),
        metavar="NAME,NAME",
        help=f"which renders (default all: {', '.join(r.name for r in RENDERS)})",
    )
    p.add_argument("--pixels", choices=PIXELS, default="auto", help="passed to the render (default auto)")
    p.add_argument(
        "--provider", choices=PROVIDERS, default="cuda", help="passed to the render (default cuda)"
    )
    p.add_argument(
        "--height",
        type=whole_at_least(64, 4320),
        default=None,
        help="every clip at this height instead (a quick check)",
    )
    p.add_argument(
        "--model-runs",
        type=whole_at_least(1),
        default=20,
        help="timed calls per model alone (median; default 20)",
    )
    p.add_argument("--models-dir", type=Path, default=None, help="pack to use (default: realistic stand-ins)")
    p.add_argument(
        "--allow-cpu",
        action="store_true",
        help="without a GPU, run the renders and time the models on the CPU (GPU figures n/a)",
    )
    add_json_option(p)
    p.set_defaults(func=run)


def chosen_renders(names: str) -> tuple[RenderConfig, ...]:
    """The renders a `--renders` list names, in the bench's order; `UserError` for an unknown one."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {r.name: r for r in RENDERS}
    unknown = [n for n in wanted if n not in known]
    if unknown or not wanted:
        raise UserError(
            f"--renders: unknown render {', '.join(unknown) or '(none)'} (choose from {', '.join(known)})"
        )
    return tuple(r for r in RENDERS if r.name in wanted)


def gpu_check(flags: DriverFlags) -> tuple[GpuInfo | None, str | None]:
    """The GPU, or why there is none ONNX Runtime can use (NVML missing or CUDA unusable)."""
    with Nvml(flags=flags) as nvml:
        if not nvml.available:
            return None, nvml.reason or "no NVIDIA GPU"
        first = next(iter(nvml.sample()), GpuSample(index=0))
        info = GpuInfo(first.name, first.memory_total_bytes, first.power_limit_w, nvml.device_count)
    if not cuda_usable(flags):
        return info, "no NVIDIA GPU: ONNX Runtime here has no CUDA provider it can use"
    return info, None


def run(args: argparse.Namespace) -> int:
    configs = chosen_renders(args.renders)
    if args.models_dir is not None and not args.models_dir.is_dir():
        raise UserError(f"--models-dir {args.models_dir}: no such folder")
    env = runtime_env(args)
    info, reason = gpu_check(env.driver)
    provider: Provider = args.provider
    settings_json: dict[str, Any] = {
        "frames": args.frames,
        "batch": args.batch,
        "precision": args.precision,
        "pixels": args.pixels,
        "renders": [c.name for c in configs],
        "height": args.height,
        "models_dir": None if args.models_dir is None else str(args.models_dir),
        "interval_s": INTERVAL_S,
    }
    if reason is not None and not args.allow_cpu:
        print(f"{PREFIX}: no NVIDIA GPU here ({_short(reason)}); nothing to measure")
        figures_none = {"gpu": None, "reason": reason}
        finish("gpu", {**settings_json, "provider": provider}, figures_none, args.json, env, measured=False)
        return 0
    if reason is not None:
        provider = "cpu"
        print(f"{PREFIX}: no NVIDIA GPU here ({_short(reason)}); --allow-cpu: on the CPU, GPU figures empty")
    settings = RenderSettings(args.frames, args.batch, args.precision, args.pixels, provider, args.height)
    names = tuple(dict.fromkeys(m.name for c in configs for m in c.models))
    pack = args.models_dir or realistic_pack(env, names)
    print(f"models alone: {', '.join(names)} in a fresh process ...", flush=True)
    timings = models_alone(pack, configs, settings, env, args.model_runs)
    said = batches_line(timings, args.batch)
    if said is not None:
        print(said, flush=True)
    for timing in timings:
        if timing.error is not None:
            print(f"{PREFIX}: model {timing.name} alone: {timing.error}", file=sys.stderr)
    results = []
    renders: list[dict[str, Any]] = []
    figures = {
        "gpu": None if info is None else asdict(info),
        "reason": reason,
        "models_alone": [{**asdict(t), "ms_per_face": t.ms_per_face} for t in timings],
        "renders": renders,
    }
    # the models' own timings are kept even if no render comes (a time limit)
    write_so_far("gpu", {**settings_json, "provider": provider}, figures, args.json)
    for config in configs:
        height = settings.height or config.height
        print(f"render {config.name}: {args.frames} frames of a {height}p clip ...", flush=True)
        result = measure_render(config, settings, pack, env, timings)
        if result.error is not None:
            print(f"{PREFIX}: render {config.name} failed: {result.error}", file=sys.stderr)
        else:
            print_render(result)
        results.append(result)
        renders.append(result.to_json())
        write_so_far("gpu", {**settings_json, "provider": provider}, figures, args.json)
    finish("gpu", {**settings_json, "provider": provider}, figures, args.json, env)
    return 1 if any(r.error is not None for r in results) else 0


def _short(reason: str) -> str:
    """A no-GPU reason without its "no NVIDIA GPU: " head (the line says that already)."""
    head = "no NVIDIA GPU: "
    return reason[len(head) :] if reason.startswith(head) else reason


def batches_line(timings: Sequence[ModelTiming], asked: int) -> str | None:
    """The batch each model alone was timed at: `asked` where its file takes it, else the batch
    its file fixes (a published file fixes it at 1; the rows under each render say the same).
    None when no model was timed."""
    at: dict[int, list[str]] = {}
    for t in timings:
        if t.ms_per_call is not None:
            at.setdefault(t.batch, []).append(t.name)
    if not at:
        return None
    parts = []
    for batch in sorted(at, key=lambda b: (b != asked, b)):
        names = ", ".join(at[batch])
        if batch == asked:
            parts.append(f"at batch {batch}: {names}")
        else:
            whose = "its file fixes" if len(at[batch]) == 1 else "their files fix"
            parts.append(f"at batch {batch}, as {whose} it: {names}")
    return "models alone: timed " + "; ".join(parts)


def _render_label(config: RenderConfig, settings: RenderSettings) -> str:
    return (
        f"{config.label(settings.height)}, batch {settings.batch}, {settings.precision},"
        f" pixels {settings.pixels}, provider {settings.provider}"
    )


# ---- models alone ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelRequest:
    """A model to time alone: its file, role and the precision the render runs it at."""

    path: Path
    role: Role
    name: str
    precision: str


def models_alone(
    pack: Path, configs: Sequence[RenderConfig], settings: RenderSettings, env: RuntimeEnv, runs: int
) -> tuple[ModelTiming, ...]:
    """Every model of `configs` timed alone in one fresh process (each model once: the renders
    share batch and precision). A process that dies gives every model its one-line error."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ffdesk.pipeline.providers import job_device
    from ffdesk.runtime.precision import resolve_precision

    precision = resolve_precision(settings.precision, "final", job_device(settings.provider, env))
    models = {m.name: m for c in configs for m in c.models}
    requests = tuple(
        ModelRequest(pack / f"{m.name}.onnx", m.role, m.name, precision if m.role == "swapper" else "fp32")
        for m in models.values()
    )
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            # a file that fixes its batch at 1 is timed as the render loads it where it batches faces
            frees = settings.pixels == "device" or job_device(settings.provider, env) == "cuda"
            args = (requests, env, settings.provider, settings.batch, runs, frees)
            return pool.submit(time_models, *args).result()
    except Exception as exc:  # noqa: BLE001 - a crashed process (CUDA abort, out of memory) is one line
        line = f"the models-alone process failed ({_one_line(exc)})"
        return tuple(
            ModelTiming(r.name, r.role, r.precision, None, settings.batch, None, error=line) for r in requests
        )


def time_models(
    requests: Sequence[ModelRequest],
    env: RuntimeEnv,
    provider: Provider,
    batch: int,
    runs: int,
    frees_batch: bool = False,
) -> tuple[ModelTiming, ...]:
    """Time each model in turn (run in the fresh process); a model that fails gets its error.
    `frees_batch`: a per-face model's file that fixes its batch at 1 is timed through its
    batch-free copy, as a render on a GPU or the device path loads it."""
    from ffdesk.pipeline.providers import job_device, session_options

    device = job_device(provider, env)
    if device == "cuda":  # the CUDA context made now: no model's `held_bytes` counts it
        from ffdesk.runtime.sessions import prime_cuda

        with contextlib.suppress(Exception):  # (a card that will not start: each model says so)
            prime_cuda()
    out = []
    for request in requests:
        try:
            out.append(
                _time_model(
                    request,
                    env,
                    session_options(provider, device, env, request.precision),
                    batch,
                    runs,
                    frees_batch,
                )
            )
        except Exception as exc:  # noqa: BLE001 - one model's failure is one line, the others go on
            out.append(
                ModelTiming(
                    request.name, request.role, request.precision, None, batch, None, error=_one_line(exc)
                )
            )
    return tuple(out)


def _time_model(
    request: ModelRequest, env: RuntimeEnv, options: Any, batch: int, runs: int, frees_batch: bool = False
) -> ModelTiming:
    from ffdesk.runtime import precision as prec
    from ffdesk.runtime.memprobe import ProcessMemoryProbe
    from ffdesk.runtime.sessions import create_session, resolve_device

    if not request.path.is_file():
        raise UserError(f"{request.path}: model file not found")
    probe = ProcessMemoryProbe(
        resolve_device(options.device, options.driver), options.device_id, options.driver
    )
    path, precision, note = request.path, request.precision, None
    if precision == "fp16":
        path = prec.make_fp16(request.path, cache_dir=env.variants_dir)
    elif precision == "int8":
        cached = prec.variant_path(request.path, "int8", cache_dir=env.variants_dir)
        if prec.cached_sound(cached):
            path = cached
        else:  # INT8 is calibrated on a clip's faces: the render makes it, this cannot
            precision, note = "fp32", "no INT8 variant made yet (a render makes one); FP32 timed"
    before = probe.used()[0]
    session = create_session(path, options, name=request.name, precision=precision)
    frees = frees_batch and request.role in PER_FACE_ROLES and precision in ("fp32", "fp16")
    if frees and session.fixed_batch == 1 and batch > 1:
        from ffdesk.runtime.batch_free import batch_free

        freed = batch_free(request.path, cache_dir=env.variants_dir)  # what the render loads
        if freed.copy is not None:
            session.close()
            path = freed.copy
            if precision == "fp16":
                path = prec.make_fp16(freed.copy, cache_dir=env.variants_dir)
            session = create_session(path, options, name=request.name, precision=precision)
            note = "its batch-free copy"
        else:
            note = freed.kept
    used = session.fixed_batch or batch
    if used != batch and note is None:
        note = f"its file fixes the batch at {used}"
    ms, held = _timed(session, used, runs, probe, before)
    timing = ModelTiming(
        request.name, request.role, precision, session.provider, used, round(ms, 3), note, held_bytes=held
    )
    if request.role not in PER_FACE_ROLES:
        return timing
    before = probe.used()[0]  # the same file with ONNX Runtime's memory pattern on, for comparison
    try:
        pattern = create_session(
            path, replace(options, memory_pattern=True), name=request.name, precision=precision
        )
        pattern_ms, pattern_held = _timed(pattern, used, runs, probe, before)
    except Exception:  # noqa: BLE001 - the comparison is extra: the model's own timing stands
        return timing
    return replace(timing, pattern_ms_per_call=round(pattern_ms, 3), pattern_held_bytes=pattern_held)


def _timed(session: Any, batch: int, runs: int, probe: Any, before: int | None) -> tuple[float, int | None]:
    """The median ms of `runs` calls at `batch` after a warm-up, and what the process then holds
    over `before`; the session is closed after."""
    try:
        ms = median_ms(_bound_call(session, batch), runs, warmup=WARMUP_CALLS)
        after = probe.used()[0]
        return ms, (after - before if after is not None and before is not None else None)
    finally:
        session.close()


def _bound_call(session: Any, batch: int) -> Callable[[], None]:
    """One inference on zero inputs held on the session's device, outputs left there (IO
    binding): the model's own time, without copies to and from host memory."""
    import onnxruntime as ort

    device = "cuda" if session.on_gpu else "cpu"
    device_id = session.options.device_id
    binding = session.ort.io_binding()
    values = [ort.OrtValue.ortvalue_from_numpy(i.example(batch), device, device_id) for i in session.inputs]
    for info, value in zip(session.inputs, values, strict=True):
        binding.bind_ortvalue_input(info.name, value)
    for info in session.outputs:
        binding.bind_output(info.name, device, device_id)

    def call() -> None:
        session.ort.run_with_iobinding(binding)
        if device == "cuda":  # the time is the kernels' too, not just their launch
            binding.synchronize_outputs()

    return call


# ---- one render, watched -----------------------------------------------------------------------


@dataclass(frozen=True)
class Watched:
    """A render and what was sampled while it ran: every sample of the render process's life,
    and when its report appeared (the end of the render's own span)."""

    report: RenderReport
    samples: tuple[Sample, ...]
    report_seen_at: float


def measure_render(
    config: RenderConfig,
    settings: RenderSettings,
    pack: Path,
    env: RuntimeEnv,
    timings: Sequence[ModelTiming],
) -> RenderResult:
    """Render `config` in its own process, sampled from here; a failure is `error`'s one line."""
    height = settings.height or config.height
    seconds = max(1.0, math.ceil(settings.frames / CLIP_FPS))
    names = {m.name for m in config.models}
    alone = tuple(t for t in timings if t.name in names)
    try:
        clip = face_clip(env, seconds, height)
        with tempfile.TemporaryDirectory(prefix="ffdesk-bench-gpu-") as tmp:
            out = Path(tmp) / f"{config.name}.mp4"
            watched = watch_render(
                lambda: render_in_process(clip, pack, out, settings.frames, settings.render_args(config)),
                out.with_suffix(".json"),
                env.driver,
            )
    except Exception as exc:  # noqa: BLE001 - a failed render (or its report) is one line
        return RenderResult(config, settings, error=_one_line(exc), models_alone=alone)
    report = watched.report
    models = report.models
    prepare = (models.prepare_seconds if models is not None else None) or 0.0
    rendering = max(report.seconds - prepare, 1e-3)
    start = watched.report_seen_at - rendering  # the window the GPU figures cover
    pixels = models.pixels if models is not None else None
    return RenderResult(
        config,
        settings,
        frames=report.frames_processed,
        seconds=round(rendering, 3),
        fps=round(report.frames_processed / rendering, 3),
        prepare_seconds=prepare,
        stages=tuple(
            StageFigure(
                t.name,
                round(t.ms_total / t.frames, 3) if t.frames else None,
                round(t.cpu_ms_total / t.frames, 3) if t.frames else None,
            )
            for t in report.stages
        ),
        model_providers=tuple(sorted({m.provider for m in (models.models if models is not None else ())})),
        pixels_used=None if pixels is None else _pixels_label(pixels.path, pixels.device),
        pixel_bytes=_gpu_pixel_bytes(pixels),
        watch=watch_figures(watched.samples, start, watched.report_seen_at),
        models_alone=alone,
        batch_notes=(models.batch_notes if models is not None else None) or (),
        late_shapes=tuple(  # by key: the quality check's FP32 swapper shares the FP16 one's name
            (m.key, m.late_shapes) for m in (models.models if models else ()) if m.late_shapes
        ),
    )


def _gpu_pixel_bytes(pixels: PixelFigures | None) -> int | None:
    """What the pixels took in the GPU's memory at most, None where they stayed off the GPU."""
    if pixels is None or pixels.path != "device" or not pixels.device.startswith("cuda"):
        return None
    return pixels.device_bytes


def _pixels_label(path: str, device: str) -> str:
    return f"{path} ({device})" if path == "device" and device else path


def watch_render(launch: Callable[[], RenderReport], report_path: Path, flags: DriverFlags) -> Watched:
    """Run `launch` (which starts `ffdesk render` as a child of this process and returns its
    report) on a thread; sample the child every `INTERVAL_S` from here until it ends; note when
    `report_path` appears. `launch`'s exception is raised here."""
    report_path.unlink(missing_ok=True)
    samples: list[Sample] = []
    lock = threading.Lock()

    def keep(sample: Sample) -> None:
        with lock:
            samples.append(sample)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ffdesk-bench-render") as pool:
        future = pool.submit(launch)
        pid = _render_child(future)
        seen: float | None = None
        if pid is not None:  # else the render ended before it was seen: nothing to sample
            # PCIe throughput blocks NVML for 20 ms a read: read once, not at every 50 ms tick
            probe = SystemProbe(pid=pid, nvml=Nvml(pid=pid, pcie_every_s=math.inf, flags=flags))
            sampler = Sampler(interval_s=INTERVAL_S, source=probe)
            sampler.add_callback(keep)
            sampler.start()
            try:
                while not future.done():
                    if seen is None and report_path.exists():
                        seen = time.monotonic()
                    time.sleep(0.01)
            finally:
                sampler.stop(final_sample=True)
                probe.close()
        report = future.result()
    with lock:
        taken = tuple(samples)
    return Watched(report, taken, seen if seen is not None else time.monotonic())


def _render_child(future: Future[Any]) -> int | None:
    """The pid of the `ffdesk render` process this process started (None if it ended unseen)."""
    import psutil

    me = psutil.Process()
    while not future.done():
        for child in me.children():
            try:
                cmdline = child.cmdline()
            except psutil.Error:
                continue
            if "ffdesk" in cmdline and "render" in cmdline:
                return int(child.pid)
        time.sleep(0.002)
    return None


def watch_figures(samples: Sequence[Sample], start: float, end: float) -> WatchFigures:
    """The figures of samples taken in [start, end] (the render's span); the memory peaks over
    every sample. A device counts when the watched process held memory on it at some sample
    (all devices when it never did: a CPU render on a GPU machine)."""
    if not samples:
        return WatchFigures(samples=0)
    held = {g.index for s in samples for g in s.gpus if (g.process_memory_bytes or 0) > 0}

    def ours(sample: Sample) -> list[GpuSample]:
        return [g for g in sample.gpus if not held or g.index in held]

    window = [s for s in samples if start <= s.t <= end]
    cpu = [s.host.process_cpu_pct for s in window if s.host.process_cpu_pct is not None]
    util = _mean_of([_mean_of([g.gpu_util_pct for g in ours(s)]) for s in window])
    power = [(s.t, _sum_of([g.power_w for g in ours(s)])) for s in window]
    energy = [(s.t, _sum_of([g.energy_j for g in ours(s)])) for s in window]
    joules, source = _energy(energy, power)
    return WatchFigures(
        samples=len(window),
        gpu_util_mean_pct=_round(util, 1),
        process_gpu_memory_peak_bytes=_peak(
            [_sum_of([g.process_memory_bytes for g in ours(s)]) for s in samples if held]
        ),
        gpu_memory_used_peak_bytes=_peak([_sum_of([g.memory_used_bytes for g in ours(s)]) for s in samples]),
        power_mean_w=_round(_mean_of([w for _, w in power]), 1),
        energy_j=_round(joules, 1),
        energy_source=source,
        process_cpu_mean_pct=_round(statistics.fmean(cpu), 1) if cpu else None,
    )


def _energy(
    counter: Sequence[tuple[float, float | None]], power: Sequence[tuple[float, float | None]]
) -> tuple[float | None, Literal["nvml_total_energy", "power_integral"] | None]:
    """Joules over the window: the energy counter's difference, else power integrated (trapezoids)."""
    readings = [(t, j) for t, j in counter if j is not None]
    if len(readings) >= 2 and readings[-1][1] >= readings[0][1]:
        return readings[-1][1] - readings[0][1], "nvml_total_energy"
    watts = [(t, w) for t, w in power if w is not None]
    if len(watts) >= 2:
        total = sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(watts, watts[1:], strict=False))
        return total, "power_integral"
    return None, None


def _sum_of(values: Sequence[float | int | None]) -> float | None:
    """Sum over devices, None when any lacks the figure (a partial sum would mislead)."""
    if not values or any(v is None for v in values):
        return None
    return float(sum(v for v in values if v is not None))


def _mean_of(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _peak(values: Sequence[float | None]) -> int | None:
    known = [v for v in values if v is not None]
    return int(max(known)) if known else None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _one_line(exc: BaseException) -> str:
    """An exception as one line: its message's first line (its type when it has none)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


# ---- printing ----------------------------------------------------------------------------------


def _fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.0f} MiB"


def _pixel_memory(n: int | None) -> str:
    """The pixels' peak on the GPU, "n/a" where they did not stay on one (as every GPU line)."""
    return "n/a" if n is None else f"{_mib(n)} at most (torch's allocator)"


def print_render(result: RenderResult) -> None:
    """A readable table of one render's figures ("n/a": not readable here)."""
    w = result.watch
    seconds = _fmt(result.seconds, " s", 2)
    memory = (
        f"{_mib(w.process_gpu_memory_peak_bytes)} (the device's used: {_mib(w.gpu_memory_used_peak_bytes)})"
    )
    energy = f"{_fmt(w.energy_j, ' J')} ({w.energy_source or 'not readable'})"
    rows = (
        ("frames/s", f"{_fmt(result.fps, digits=2)} ({result.frames} frames in {seconds})"),
        ("preparing the models", _fmt(result.prepare_seconds, " s", 2) + " before the first frame"),
        ("GPU busy, mean", _fmt(w.gpu_util_mean_pct, " %")),
        ("GPU memory, peak", memory),
        ("power, mean", _fmt(w.power_mean_w, " W")),
        ("energy", f"{energy}, {_fmt(result.energy_per_frame_j, ' J', 2)} a frame"),
        ("render CPU, mean", f"{_fmt(w.process_cpu_mean_pct, ' %')} (100 %: one core; {w.samples} samples)"),
        ("models ran on", ", ".join(result.model_providers) or "n/a"),
        ("pixels stayed on", result.pixels_used or "n/a"),
        ("pixels' GPU memory", _pixel_memory(result.pixel_bytes)),
        ("new shapes mid-render", ", ".join(f"{name} {n}" for name, n in result.late_shapes) or "none"),
        *(("batch-1 file", note) for note in result.batch_notes),
    )
    print(f"render {result.config.name}: {_render_label(result.config, result.settings)}")
    for label, value in rows:
        print(f"  {label:20s} {value}")
    print(f"  {'stage':20s} {'ms/frame':>9s} {'CPU ms/frame':>13s}")
    for s in result.stages:
        wall, cpu = _fmt(s.ms_per_frame, digits=2), _fmt(s.cpu_ms_per_frame, digits=2)
        print(f"  {s.name:20s} {wall:>9s} {cpu:>13s}")
    print(f"  {'model alone':20s} {'ms/call':>9s} {'ms/face':>13s}  batch precision provider")
    for t in result.models_alone:
        call, face = _fmt(t.ms_per_call, digits=2), _fmt(t.ms_per_face, digits=3)
        where = t.error or f"{t.batch:5d} {t.precision:9s} {t.provider}" + (f" ({t.note})" if t.note else "")
        print(f"  {t.name:20s} {call:>9s} {face:>13s}  {where}")
        if t.pattern_ms_per_call is not None:
            print(
                f"  {'':20s} {_fmt(t.pattern_ms_per_call, digits=2):>9s} ms/call with ONNX Runtime's memory"
                f" pattern on; holding {_mib(t.pattern_held_bytes)} against {_mib(t.held_bytes)} with it off"
            )
    efficiency = result.efficiency
    print(
        f"  models-alone ceiling {_fmt(result.ceiling_fps, ' frames/s', 2)} (one face a frame);"
        f" efficiency {'n/a' if efficiency is None else f'{efficiency:.1%}'}"
    )
    on_gpu = any(p.startswith(("CUDA", "Tensorrt")) for p in result.model_providers)
    if result.settings.provider in ("cuda", "tensorrt") and result.model_providers and not on_gpu:
        print(f"  note: --provider {result.settings.provider} asked, but the models ran on the CPU")
