"""The training loop: data, mixed precision, checkpoints, control files, logs and previews.

Files in the run folder (see `control` for the names): `run.json` (settings), `checkpoint.pt`
(model, optimizer, scaler, step, RNG: plain tensors, numbers, strings, lists and dicts, read back
with `torch.load(weights_only=True)`; replaced atomically), `metrics.jsonl` (one record per log
interval), `status.json`, `control.json` (commands from monitors), `preview.png` and
`previews/`, `tensorboard/`, and at the end `model.onnx` + `model.json`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Literal

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader

from ffdesk import jsontext
from ffdesk.errors import Terminated, UserError
from ffdesk.hw import DriverFlags
from ffdesk.media import atomic
from ffdesk.training import control, runlock
from ffdesk.training import dist as tdist
from ffdesk.training.augment import AugmentSettings, resize_crop
from ffdesk.training.dataset import BatchSpec, PairBatches, StepSampler, worker_init
from ffdesk.training.dist import CommTimer, DistContext
from ffdesk.training.model import RESOLUTIONS, ModelConfig
from ffdesk.training.schedule import LrSchedule, lr_at
from ffdesk.training.store import Faceset, write_json_atomic
from ffdesk.training.tasks import DistillTask, SwapTask, Task, weighted_total

Outcome = Literal["done", "stopped", "interrupted"]
Optimizer = Literal["adam", "sgd"]
StudentInit = Literal["teacher", "random"]
AmpDtype = Literal["auto", "bf16", "fp16"]

_COMMANDS: tuple[control.Command, ...] = ("pause", "resume", "stop", "export")


@dataclass(frozen=True)
class TrainSettings:
    src: Path
    """Faceset of identity A, the face to put in."""
    dst: Path
    """Faceset of identity B, the face to replace."""
    run_dir: Path
    steps: int = 100_000
    resolution: int = 128
    batch: int = 8
    """Faces per identity per step, over all processes (the global batch)."""
    lr: float = 5e-5
    amp: bool = False
    amp_dtype: AmpDtype = "auto"
    """With `amp`: bf16 where the device does it, else fp16 (with a gradient scaler); or forced."""
    grad_checkpoint: bool = False
    resume: bool = False
    workers: int = 2
    seed: int = 0
    device: str = "auto"
    log_every: int = 10
    preview_every: int = 500
    save_every: int = 1000
    export_at_end: bool = True
    model: ModelConfig | None = None
    """Network size; None picks the default for `resolution`."""
    augment: AugmentSettings = field(default_factory=AugmentSettings)
    optimizer: Optimizer = "adam"
    mask_weight: float = 1.0
    """Weight of the mask term; 0 leaves the mask heads out of the loss (and frozen)."""
    alloc_split_mb: int | None = None
    """PYTORCH_CUDA_ALLOC_CONF max_split_size_mb: large blocks are not split below it (fragmentation)."""
    teacher: Path | None = None
    """A finished run: train `model` (a student, or with `qat` a fake-quantized copy) on its outputs."""
    feature_weight: float = 1.0
    """Distillation: weight of matching the decoders' intermediate maps."""
    student_init: StudentInit = "teacher"
    """Distillation: where the student's first weights come from: the teacher's strongest channels
    (`ffdesk.training.inherit`), or random."""
    qat: bool = False
    lr_schedule: LrSchedule = "constant"
    """constant, or cosine: a linear warm-up over the first 5% of `steps`, then a cosine decay
    to 1% of `lr` at `steps`."""
    ddp_bucket_mb: float | None = None
    """DistributedDataParallel's gradient bucket size in MB (None: torch's default, 25)."""

    def model_config(self) -> ModelConfig:
        cfg = self.model or ModelConfig.for_resolution(self.resolution)
        return replace(cfg, resolution=self.resolution, grad_checkpoint=self.grad_checkpoint)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["model"] = self.model_config().to_json()
        return json.loads(json.dumps(d, default=str))


METRICS_LINE_BYTES = 1 << 20
"""The longest line of `metrics.jsonl` a resume keeps: a record is a few hundred bytes (a few
KB with the figures of many ranks); a longer line is damaged and is not read into memory."""


def metrics_step(line: bytes) -> int | None:
    """The step of a line of `metrics.jsonl`; None for a damaged line (not UTF-8, not JSON that
    `jsontext.loads` takes (nested too deep), no object, or no whole step: `{"step": 1e999}`),
    which readers of the metrics pass over (`follow.sound_record`)."""
    try:
        record = jsontext.loads(line.decode("utf-8"))
    except ValueError:  # (UnicodeDecodeError too)
        return None
    step = record.get("step") if isinstance(record, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _bounded_lines(f: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """The lines of `f` without their line ends, None for each line longer than `limit` bytes
    (read past a bounded piece at a time, never held whole)."""
    while line := f.readline(limit + 1):
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := f.readline(limit)) and not rest.endswith(b"\n"):
                pass
            yield None
            continue
        yield line.rstrip(b"\r\n")


def refuse_changes(s: TrainSettings, ckpt: dict[str, Any], saved: ModelConfig) -> None:
    """`UserError` (one line, naming the option) when `s`, resuming the run of `ckpt` (whose model
    is `saved`), differs from the run in what shapes the model or what it trains on: the facesets,
    the resolution, the model's size, the batch, the seed, the optimizer, whether the mask heads
    train, the teacher, and for a student whether its feature adapters train and where it started.
    The goal, learning rate, schedule, precision, intervals, workers and device may change."""
    was: dict[str, Any] = ckpt["settings"] if isinstance(ckpt.get("settings"), dict) else {}
    _refuse_other_facesets(s, ckpt.get("src") or was.get("src"), ckpt.get("dst") or was.get("dst"))
    keep = " (leave it out to keep the run's, or start a new --run)"
    if s.resolution != saved.resolution:
        raise UserError(f"--resolution {s.resolution} differs from the run's ({saved.resolution} px){keep}")
    if s.model is not None and _shape(s.model) != _shape(saved):
        flag = "--size" if s.teacher is not None and not s.qat else "--model-size"
        raise UserError(f"{flag}: the run trains another size of model ({_describe(saved)}){keep}")
    for flag, now, then in (
        ("--batch", s.batch, was.get("batch")),
        ("--seed", s.seed, was.get("seed")),
        ("--optimizer", s.optimizer, was.get("optimizer")),
    ):
        if then is not None and now != then:
            raise UserError(f"{flag} {now} differs from the run's ({then}){keep}")
    then_mask = was.get("mask_weight")
    if isinstance(then_mask, (int, float)) and (s.mask_weight > 0) != (then_mask > 0):
        raise UserError(
            f"--mask-weight {s.mask_weight:g}: the run {'trains' if then_mask > 0 else 'does not train'} "
            f"its mask heads (--mask-weight {then_mask:g}){keep}"
        )
    then_teacher = was.get("teacher")
    if s.teacher is not None and then_teacher and not _same_path(s.teacher, then_teacher):
        raise UserError(f"--teacher {s.teacher} is not the run's teacher ({then_teacher}); start a new --run")
    if s.teacher is not None and not s.qat:
        _refuse_student_changes(s, was, keep)


def _refuse_student_changes(s: TrainSettings, was: dict[str, Any], keep: str) -> None:
    """`UserError` when a resumed student would change what its checkpoint holds: feature
    matching on or off (its adapters are in the optimizer), or where it started (it has)."""
    then_weight = was.get("feature_weight")
    if isinstance(then_weight, (int, float)) and (s.feature_weight > 0) != (then_weight > 0):
        trains = "matches" if then_weight > 0 else "does not match"
        raise UserError(
            f"--feature-weight {s.feature_weight:g}: the run {trains} the teacher's features "
            f"(--feature-weight {then_weight:g}){keep}"
        )
    then_init = was.get("student_init")
    if isinstance(then_init, str) and s.student_init != then_init:
        began = "from the teacher" if then_init == "teacher" else "at random"
        raise UserError(f"--student-init {s.student_init}: the run's student started {began} "
                        f"(--student-init {then_init}){keep}")  # fmt: skip


def _refuse_other_facesets(s: TrainSettings, src: Any, dst: Any) -> None:
    """`UserError` when `s` trains on other facesets than the run's `src` and `dst` (or swapped)."""
    if not (isinstance(src, str) and isinstance(dst, str)):
        return  # a checkpoint that does not say
    if not _same_path(src, dst) and _same_path(s.src, dst) and _same_path(s.dst, src):
        raise UserError(f"--src and --dst are swapped: the run puts the face of {src} onto {dst}")
    for flag, now, then in (("--src", s.src, src), ("--dst", s.dst, dst)):
        if not _same_path(now, then):
            raise UserError(f"{flag} {now} is not the run's faceset ({then}); train on it in a new --run")


def _same_path(a: Path | str, b: Path | str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def _shape(cfg: ModelConfig) -> dict[str, Any]:
    """What of a model's config its weights' shapes depend on."""
    return {k: v for k, v in cfg.to_json().items() if k not in ("grad_checkpoint", "resolution")}


def _describe(cfg: ModelConfig) -> str:
    return f"encoder {cfg.encoder_dims}, bottleneck {cfg.ae_dims}, decoder {cfg.decoder_dims} channels"


@dataclass(frozen=True)
class TrainResult:
    outcome: Outcome
    step: int
    model: Path | None


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise UserError(f"unknown device {name!r} (use auto, cpu or cuda[:N])") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name}: no CUDA GPU is available to torch")
    return dev


def amp_dtype(device: torch.device, choice: AmpDtype = "auto") -> torch.dtype:
    """bf16 where the device does it natively, else fp16 (which needs a gradient scaler)."""
    if choice == "bf16":
        return torch.bfloat16
    if choice == "fp16":
        return torch.float16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16


def set_alloc_split(mb: int | None) -> None:
    """`PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<mb>` for this process (before CUDA starts)."""
    if mb is None:
        return
    if mb < 20:
        raise UserError("--alloc-split-mb must be at least 20 (the allocator's smallest split size)")
    parts = [p for p in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "").split(",") if p]
    parts = [p for p in parts if not p.startswith("max_split_size_mb:")] + [f"max_split_size_mb:{mb}"]
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = ",".join(parts)


FileStamp = tuple[int, int, int]
"""(inode, modification time in ns, size): changes whenever a file is replaced."""


def _stamp(path: Path) -> FileStamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@dataclass(frozen=True)
class _Saved:
    """A checkpoint this trainer found or wrote: its step, and its file's stamp then."""

    step: int
    stamp: FileStamp | None


def _atomic_torch_save(obj: Any, path: Path) -> None:
    with atomic.replacing(path) as tmp:
        torch.save(obj, tmp)


def _alignment(a: Faceset, b: Faceset) -> dict[str, Any]:
    sa, sb = a.index.settings.get("alignment") or {}, b.index.settings.get("alignment") or {}
    if sa and sb and sa.get("template") != sb.get("template"):
        raise UserError(
            f"{a.folder} and {b.folder} were aligned with different templates "
            f"({sa.get('template')} vs {sb.get('template')}); extract both the same way"
        )
    return {**sb, "faceset_size": b.size}


class _Telemetry:
    """GPU memory and power for the metrics log; None where there is no GPU or NVML."""

    def __init__(self, device: torch.device, driver: DriverFlags | None = None) -> None:
        self.device = device
        self._nvml: Any = None
        if device.type == "cuda":
            try:
                from ffdesk.telemetry.nvml import Nvml

                nv = Nvml(flags=driver)
                self._nvml = nv if nv.available else None
            except Exception:  # noqa: BLE001 - telemetry must never stop training
                self._nvml = None

    def read(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gpu_memory_bytes": None, "gpu_memory_peak_bytes": None, "gpu_power_w": None}
        if self.device.type != "cuda":
            return out
        out["gpu_memory_bytes"] = int(torch.cuda.memory_reserved(self.device))
        out["gpu_memory_peak_bytes"] = int(torch.cuda.max_memory_allocated(self.device))
        if self._nvml is not None:
            try:
                samples = self._nvml.sample()
                ours = [s for s in samples if s.process_memory_bytes] or list(samples)
                if ours:
                    out["gpu_power_w"] = ours[0].power_w
                    if ours[0].process_memory_bytes:
                        out["gpu_memory_bytes"] = int(ours[0].process_memory_bytes)
            except Exception:  # noqa: BLE001
                pass
        return out

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.close()


@dataclass
class _Loop:
    """What one training session works on; `step` advances as it trains."""

    s: TrainSettings
    task: Task
    module: torch.nn.Module
    """`task.module` on the training device."""
    opt: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    device: torch.device
    dtype: torch.dtype
    """The autocast dtype (used when `s.amp`)."""
    alignment: dict[str, Any]
    step: int = 0


class _Logs:
    """Rank 0's metrics file (one JSON record per line) and TensorBoard writer."""

    def __init__(self, run_dir: Path, step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.tb: Any = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=step + 1)
        self.metrics = (run_dir / control.METRICS).open("a", encoding="utf-8")

    def write(self, rec: dict[str, Any], step: int) -> None:
        self.metrics.write(json.dumps(rec) + "\n")
        self.metrics.flush()
        for k, v in rec["losses"].items():
            self.tb.add_scalar(f"loss/{k}", v, step)
        self.tb.add_scalar("loss/total", rec["loss"], step)
        self.tb.add_scalar("speed/samples_per_s", rec["samples_per_s"], step)
        self.tb.add_scalar("lr", rec["lr"], step)

    def close(self) -> None:
        self.metrics.close()
        self.tb.close()


def _loader(s: TrainSettings, step: int, device: torch.device, ctx: DistContext) -> DataLoader[Any]:
    """Batches of this rank's part of each step, from `step` on (the same on a resume)."""
    spec = BatchSpec(resolution=s.resolution, batch=s.batch, seed=s.seed, augment=s.augment,
                     rank=ctx.rank, world_size=ctx.world_size)  # fmt: skip
    data = PairBatches(s.src, s.dst, spec, length=max(s.steps, step))
    return DataLoader(
        data,
        batch_size=None,
        sampler=StepSampler(step, s.steps),
        num_workers=s.workers,
        pin_memory=device.type == "cuda",
        worker_init_fn=worker_init if s.workers else None,
        prefetch_factor=4 if s.workers else None,
        persistent_workers=False,
    )


def _leave_cores_to_workers(device: torch.device, workers: int, world_size: int, threads: int) -> None:
    """On a CPU with data workers, fewer compute threads: the workers need their cores, and
    compute threads spinning on a busy core cost many times the work (measured 20x slower with
    2 threads on 2 busy cores)."""
    if device.type == "cpu" and workers:
        cores = max(1, (os.cpu_count() or 1) // world_size)
        torch.set_num_threads(max(1, min(threads, cores - workers)))


class Trainer:
    """Runs one training session of a run folder. Qt-free; the caller supplies callbacks.

    `should_stop()` is polled between steps (the CLI sets it from Ctrl-C); when it turns true the
    trainer saves a checkpoint and returns `interrupted`. `on_record(record)` gets each metrics
    record as it is logged.

    Under torchrun every rank runs this loop on its part of each batch (DistributedDataParallel
    averages the gradients); rank 0 alone writes the run folder (checkpoints, metrics, status,
    previews, the export) and reads the control file, and the loop shares its command and any
    rank's Ctrl-C with all ranks once a step, so every rank pauses, stops and exports together.
    A restart by torchrun (`--max-restarts`) resumes from the last checkpoint.
    """

    def __init__(
        self,
        settings: TrainSettings,
        should_stop: Callable[[], bool] = lambda: False,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        on_message: Callable[[str], None] | None = None,
        ctx: DistContext | None = None,
        *,
        driver: DriverFlags | None = None,
    ) -> None:
        """`driver`: the front end's driver switches (`FFDESK_NO_NVML`) for the GPU telemetry."""
        self.s = settings
        self.driver = driver
        self.run_dir = Path(settings.run_dir)
        self.should_stop = should_stop
        self.on_record = on_record or (lambda _r: None)
        self.ctx = ctx if ctx is not None else DistContext.from_env()
        say = on_message or (lambda _m: None)
        self.on_message: Callable[[str], None] = say if self.ctx.is_main else (lambda _m: None)
        self._ranks: list[dict[str, Any]] = []
        self._state: control.State | None = None
        """The state this trainer last reported."""
        self._saved = _Saved(0, None)
        """The checkpoint in the run folder, as this trainer last saw it."""
        self._saving: int | None = None
        """The step of the checkpoint being written, while it is."""

    # ---- setup -------------------------------------------------------------------------------

    def check(self) -> None:
        """Everything `run` checks before it writes anything (`UserError` if the run cannot start),
        a trainer of the run already running among it."""
        self._prepare()
        pick_device(self.s.device)
        if self.ctx.is_main and self.run_dir.is_dir():
            runlock.refuse_if_trained(self.run_dir)

    def _prepare(self) -> tuple[TrainSettings, dict[str, Any] | None]:
        """The settings to train with (the checkpoint's model on a resume) and the checkpoint;
        `UserError` for settings the run cannot take. Writes nothing."""
        s, ctx = self.s, self.ctx
        if s.resolution not in RESOLUTIONS:
            raise UserError(f"--resolution {s.resolution}: choose one of {', '.join(map(str, RESOLUTIONS))}")
        if s.batch < 1 or s.steps < 1:
            raise UserError("--batch and --steps must be at least 1")
        ckpt_path = self.run_dir / control.CHECKPOINT
        ckpt = None
        if ckpt_path.exists():
            if not (s.resume or ctx.restart > 0):
                raise UserError(
                    f"{self.run_dir} already holds a run; add --resume or pick a new --run folder"
                )
            from ffdesk.training.export import checkpoint_config, load_checkpoint

            ckpt = load_checkpoint(self.run_dir, require=("optimizer", "rng"))
            saved = checkpoint_config(ckpt, self.run_dir, s.grad_checkpoint)
            refuse_changes(s, ckpt, saved)
            s = replace(s, model=saved)
        if s.batch % ctx.world_size:
            raise UserError(
                f"the global batch of {s.batch} does not split across {ctx.world_size} processes; "
                f"use a multiple of {ctx.world_size}"
            )
        Faceset(s.src), Faceset(s.dst)  # both readable before anything is written
        return s, ckpt

    def _claim(self) -> runlock.RunLock | None:
        """Rank 0 makes the run folder and locks it: one trainer per run (`UserError` naming the
        one that trains it). With the lock held, the partial files of a trainer killed while it
        wrote (its checkpoint, up to the checkpoint's size) are removed, with a note. None on
        the other ranks."""
        if not self.ctx.is_main:
            return None
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            lock = runlock.RunLock.acquire(self.run_dir)
        except OSError as exc:
            raise self._unwritable(exc) from None
        if lock.held:
            removed = runlock.remove_stale_partials(self.run_dir)
            if removed:
                names = ", ".join(str(p.relative_to(self.run_dir)) for p in removed)
                self.on_message(
                    f"removed {names}: left unfinished in {self.run_dir} by a trainer that was killed"
                )
        return lock

    def _write_settings(self, s: TrainSettings) -> None:
        """`run.json`, the first file written: a folder that cannot be written is one line."""
        try:
            write_json_atomic(self.run_dir / control.SETTINGS, s.to_json())
        except OSError as exc:
            raise self._unwritable(exc) from None

    def _unwritable(self, exc: OSError) -> UserError:
        return UserError(f"--run {self.run_dir}: cannot write the run there ({exc.strerror or exc})")

    def _begin(self, ckpt: dict[str, Any] | None, goal: int) -> None:
        """Rank 0 drops a command sent while no trainer was running (a pause would hold this one
        idle from its first step), then says it is starting, so monitors may send commands."""
        if not self.ctx.is_main:
            return
        stale = control.take(self.run_dir) if self.ctx.restart == 0 else None
        if stale is not None:
            self.on_message(f"ignored a {stale!r} sent to {self.run_dir} before this trainer started")
        self._status("starting", int(ckpt["step"]) if ckpt else 0, goal)

    def _truncate_metrics(self, step: int) -> None:
        """Drop records logged after the checkpoint (a crash): steps stay strictly increasing.
        Damaged lines are dropped too, as the monitors pass over them (`metrics_step`); the file
        is read a line at a time, none longer than `METRICS_LINE_BYTES`. A metrics file that is
        not a regular file (a FIFO, a device) is one line (`UserError`), not a hang."""
        path = self.run_dir / control.METRICS
        if not path.exists():
            return
        try:
            fd = jsontext.open_regular(path)
        except OSError as exc:
            raise UserError(f"{path}: cannot read the run's metrics ({exc.strerror or exc})") from None
        with os.fdopen(fd, "rb") as old, atomic.replacing(path, durable=False) as tmp, open(tmp, "wb") as new:
            for line in _bounded_lines(old, METRICS_LINE_BYTES):
                logged = metrics_step(line) if line is not None else None
                if line is not None and logged is not None and logged <= step:
                    new.write(line + b"\n")

    def _status(self, state: control.State, step: int, goal: int, **extra: Any) -> None:
        self._state = state
        if self.ctx.is_main:
            control.write_status(
                self.run_dir, state, step, goal, world_size=self.ctx.world_size, ranks=self._ranks, **extra
            )

    # ---- the loop ------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        set_alloc_split(self.s.alloc_split_mb)
        s, ckpt = self._prepare()
        kind = pick_device(s.device)  # (a device that is not there: refused before the run is touched)
        lock = self._claim()
        try:
            self._saved = _Saved(int(ckpt["step"]) if ckpt else 0, _stamp(self.run_dir / control.CHECKPOINT))
            device = tdist.device_for(self.ctx, kind)
            tdist.init(self.ctx, device)
            if self.ctx.is_main:  # the settings are the run's once it has started with them
                self._write_settings(s)
            try:
                self._begin(ckpt, s.steps)
                return self._run(s, ckpt, device)
            except BaseException as exc:
                if self._state == "starting":  # ended before its first step: not left "starting"
                    with contextlib.suppress(OSError):
                        self._ended(exc, self._saved.step, s.steps)
                raise
            finally:
                tdist.close(self.ctx)
        finally:
            if lock is not None:
                lock.release()

    def _ended(self, exc: BaseException, step: int, goal: int) -> None:
        """The status of a session that `exc` ended: for a Ctrl-C or SIGTERM that stopped it at
        once, "interrupted" at the checkpoint's step (the step a --resume continues from), or
        "stopped" where no checkpoint was saved yet; else "failed" at `step`."""
        if not isinstance(exc, (KeyboardInterrupt, Terminated)):
            self._status("failed", step, goal)
        elif (self.run_dir / control.CHECKPOINT).exists():
            self._status("interrupted", self._checkpoint_step(), goal)
        else:  # (nothing saved yet: no step to resume from)
            self._status("stopped", 0, goal)

    def _checkpoint_step(self) -> int:
        """The step of the checkpoint in the run folder: the last one saved, or the one being
        saved where it was already moved into place (a second Ctrl-C can land between that and
        the note of it)."""
        if self._saving is not None and _stamp(self.run_dir / control.CHECKPOINT) != self._saved.stamp:
            return self._saving
        return self._saved.step

    def _run(self, s: TrainSettings, ckpt: dict[str, Any] | None, device: torch.device) -> TrainResult:
        fa, fb = Faceset(s.src), Faceset(s.dst)
        loop = self._start(s, ckpt, device, _alignment(fa, fb))
        comm = CommTimer()
        step_module = self._distributed(loop.module, device, comm)
        self._announce(loop, len(fa), len(fb))
        loader = _loader(s, loop.step, device, self.ctx)
        main = self.ctx.is_main
        preview_batch = _preview_batch(fa, fb, s.resolution) if main else None
        logs = _Logs(self.run_dir, loop.step) if main else None
        telemetry = _Telemetry(device, self.driver)
        pids = tdist.gather_floats(self.ctx, [float(os.getpid())], device)
        self._ranks = [{"rank": r, "pid": int(p[0])} for r, p in enumerate(pids)]

        outcome: Outcome = "done"
        model_path: Path | None = None
        self._status("running", loop.step, s.steps)
        threads_before = torch.get_num_threads()
        _leave_cores_to_workers(device, s.workers, self.ctx.world_size, threads_before)
        try:
            outcome = self._train(loop, step_module, loader, comm, telemetry, logs, preview_batch)
            replica_diff = tdist.broadcast_max_diff(self.ctx, list(loop.module.parameters()), device)
            self._save(loop, outcome)
            if outcome in ("done", "stopped") and s.export_at_end:
                model_path = self._export(loop)
            self._status(outcome, loop.step, s.steps, replica_max_diff=replica_diff)
        except BaseException as exc:
            self._ended(exc, loop.step, s.steps)
            raise
        finally:
            del loader
            torch.set_num_threads(threads_before)
            if logs is not None:
                logs.close()
            telemetry.close()
        return TrainResult(outcome=outcome, step=loop.step, model=model_path)

    def _start(
        self, s: TrainSettings, ckpt: dict[str, Any] | None, device: torch.device, alignment: dict[str, Any]
    ) -> _Loop:
        """The task, its optimizer and gradient scaler on `device`, at the checkpoint's step."""
        cfg = s.model_config()
        torch.manual_seed(s.seed)
        task: Task
        if s.teacher is not None:
            task = DistillTask(
                s.teacher,
                cfg,
                feature_weight=s.feature_weight,
                qat=s.qat,
                from_teacher=s.student_init == "teacher",
            )
        else:
            task = SwapTask(cfg, mask_weight=s.mask_weight)
        module = task.module.to(device)
        params = [p for p in module.parameters() if p.requires_grad]
        opt: torch.optim.Optimizer
        if s.optimizer == "sgd":
            opt = torch.optim.SGD(params, lr=s.lr)
        else:
            opt = torch.optim.Adam(params, lr=s.lr, betas=(0.5, 0.999))
        dtype = amp_dtype(device, s.amp_dtype)
        scaler = torch.amp.GradScaler(device.type, enabled=s.amp and dtype == torch.float16)
        loop = _Loop(s, task, module, opt, scaler, device, dtype, alignment)
        if ckpt is not None:
            self._resume(loop, ckpt)
        if loop.step >= s.steps:
            self.on_message(f"already at step {loop.step} of {s.steps}; raise --steps to train further")
        return loop

    def _resume(self, loop: _Loop, ckpt: dict[str, Any]) -> None:
        """Model, optimizer, scaler, step and random state from the checkpoint."""
        loop.task.load(ckpt)
        loop.opt.load_state_dict(ckpt["optimizer"])
        if ckpt.get("scaler"):
            loop.scaler.load_state_dict(ckpt["scaler"])
        loop.step = int(ckpt["step"])
        torch.set_rng_state(ckpt["rng"]["torch"])
        if loop.device.type == "cuda" and ckpt["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state(ckpt["rng"]["cuda"], loop.device)
        if self.ctx.is_main:
            self._truncate_metrics(loop.step)
        again = f" (restart {self.ctx.restart})" if self.ctx.restart else ""
        self.on_message(f"resumed at step {loop.step}{again}")

    def _distributed(self, module: torch.nn.Module, device: torch.device, comm: CommTimer) -> torch.nn.Module:
        """The module each step runs: itself, or under torchrun its DistributedDataParallel wrapper
        (all-reduce timed by `comm`)."""
        if not self.ctx.distributed:
            return module
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(
            module,
            device_ids=[device.index] if device.type == "cuda" else None,
            # Every step uses the same parameters (heads outside the loss are frozen, not
            # skipped): no search for unused ones, and DDP may reuse its bucket order.
            static_graph=True,
            # Gradients live in the all-reduce buckets: no copy in and out of them.
            gradient_as_bucket_view=True,
            bucket_cap_mb=self.s.ddp_bucket_mb,
        )
        ddp.register_comm_hook(comm, tdist.timed_allreduce_hook)
        return ddp

    def _announce(self, loop: _Loop, faces_a: int, faces_b: int) -> None:
        s, ctx = loop.s, self.ctx
        procs = f", {ctx.world_size} processes" if ctx.distributed else ""
        precision = "amp " + str(loop.dtype).split(".")[-1] if s.amp else "fp32"
        self.on_message(
            f"training on {loop.device}{procs} ({precision}), "
            f"{loop.task.describe()}, {faces_a} + {faces_b} faces, {s.resolution} px, batch {s.batch}"
        )

    def _train(
        self,
        loop: _Loop,
        step_module: torch.nn.Module,
        loader: DataLoader[Any],
        comm: CommTimer,
        telemetry: _Telemetry,
        logs: _Logs | None,
        preview_batch: dict[str, torch.Tensor] | None,
    ) -> Outcome:
        """Steps until the goal or a command ends the session; logs, previews and checkpoints on
        their intervals (rank 0 writes; every rank gathers the figures)."""
        s = loop.s
        window_t, window_steps = time.perf_counter(), 0
        acc: dict[str, float] = {}
        loop.module.train()
        batches = iter(loader)
        while loop.step < s.steps:
            outcome = self._handle_controls(
                loop.step,
                s.steps,
                lambda state: self._save(loop, state),
                lambda: self._export(loop),
                loop.device,
            )
            if outcome is not None:
                return outcome
            batch = self._next_batch(batches)
            if batch is None:
                return "interrupted"
            rate = lr_at(loop.step, s.steps, s.lr, s.lr_schedule)
            for group in loop.opt.param_groups:
                group["lr"] = rate
            terms = self._train_step(
                step_module,
                loop.opt,
                loop.scaler,
                batch,
                loop.device,
                loop.dtype,
                s.amp,
                loop.task.weights,
                comm,
            )
            loop.step += 1
            window_steps += 1
            for k, v in terms.items():
                acc[k] = acc.get(k, 0.0) + v
            if loop.step % s.log_every == 0 or loop.step == s.steps:
                dt = time.perf_counter() - window_t
                rec = self._record(
                    loop.step, s, acc, window_steps, dt, loop.opt, telemetry, comm, loop.device, loop.task
                )
                if logs is not None:
                    logs.write(rec, loop.step)
                    self._status("running", loop.step, s.steps)
                    self.on_record(rec)
                window_t, window_steps, acc = time.perf_counter(), 0, {}
                comm.reset()
            if preview_batch is not None and (loop.step % s.preview_every == 0 or loop.step == s.steps):
                grid = loop.task.preview(preview_batch, loop.device)
                write_preview(self.run_dir, grid, loop.step)
                if logs is not None:
                    logs.tb.add_image("preview", grid, loop.step, dataformats="HWC")
            if loop.step % s.save_every == 0:
                self._save(loop, "running")
        return "done"

    def _next_batch(self, batches: Iterator[Any]) -> Any:
        """The next batch; None when the data workers ended as this process was asked to stop
        (a signal to its process group reaches them too): the run saves and stops. A worker gone
        shows as the loader's RuntimeError, or, when it died handing a batch over, as the
        connection it shared the batch on reset (ConnectionResetError, EOFError)."""
        try:
            return next(batches)
        except (RuntimeError, OSError, EOFError):
            if self.ctx.distributed or not self.should_stop():
                raise
            return None

    def _save(self, loop: _Loop, state: control.State) -> None:
        """Rank 0 writes the checkpoint (atomically) and the status."""
        if not self.ctx.is_main:
            return
        path = self.run_dir / control.CHECKPOINT
        self._saving = loop.step
        _atomic_torch_save(self._checkpoint(loop), path)
        self._saved, self._saving = _Saved(loop.step, _stamp(path)), None
        self._status(state, loop.step, loop.s.steps)

    def _checkpoint(self, loop: _Loop) -> dict[str, Any]:
        s, device = loop.s, loop.device
        return {
            "step": loop.step,
            "model": loop.task.state(),
            "optimizer": loop.opt.state_dict(),
            "scaler": loop.scaler.state_dict() if loop.scaler.is_enabled() else None,
            **loop.task.checkpoint_extra(),
            "settings": s.to_json(),
            "world_size": self.ctx.world_size,
            "alignment": loop.alignment,
            "src": str(s.src),
            "dst": str(s.dst),
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
            },
        }

    def _export(self, loop: _Loop) -> Path | None:
        """Rank 0 saves a checkpoint and exports the model; None on the other ranks."""
        if not self.ctx.is_main:
            return None
        self._status("exporting", loop.step, loop.s.steps)
        self._save(loop, "exporting")
        path = loop.task.export(self.run_dir)
        self.on_message(f"exported {path}")
        return path

    def _poll(self, device: torch.device) -> tuple[control.Command | None, bool]:
        """Rank 0's pending command and whether any rank was asked to stop (the same on all)."""
        command = control.take(self.run_dir) if self.ctx.is_main else None
        code = _COMMANDS.index(command) + 1 if command else 0
        code, stop = tdist.max_ints(self.ctx, [code, int(self.should_stop())], device)
        return (_COMMANDS[code - 1] if code else None), bool(stop)

    def _handle_controls(
        self,
        step: int,
        goal: int,
        save: Callable[[control.State], None],
        export: Callable[[], Path | None],
        device: torch.device,
    ) -> Outcome | None:
        command, stop = self._poll(device)
        paused = False
        while True:
            if stop:
                return "interrupted"
            if command == "stop":
                self.on_message(f"stop requested at step {step}")
                return "stopped"
            if command == "export":
                export()
                self._status("paused" if paused else "running", step, goal)
            elif command == "pause" and not paused:
                paused = True
                save("paused")
                self.on_message(f"paused at step {step}")
            elif command == "resume" and paused:
                paused = False
                self._status("running", step, goal)
                self.on_message(f"resumed at step {step}")
            if command is None and not paused:
                return None
            if paused:
                time.sleep(0.1)
            command, stop = self._poll(device)

    @staticmethod
    def _train_step(
        module: torch.nn.Module,
        opt: torch.optim.Optimizer,
        scaler: torch.amp.GradScaler,
        batch: dict[str, dict[str, torch.Tensor]],
        device: torch.device,
        dtype: torch.dtype,
        use_amp: bool,
        weights: dict[str, float],
        comm: CommTimer | None = None,
    ) -> dict[str, float]:
        t = {side: _to_device(batch[side], device) for side in ("a", "b")}
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=use_amp):
            terms = module(t)
        loss = weighted_total(terms, weights)
        if not torch.isfinite(loss):
            raise FloatingPointError("the training loss is not finite; lower --lr or turn off --amp")
        scaler.scale(loss).backward()
        if comm is not None:
            comm.backward_done(time.perf_counter())
        scaler.step(opt)
        scaler.update()
        return {k: float(v.detach()) for k, v in terms.items()}

    def _record(
        self,
        step: int,
        s: TrainSettings,
        acc: dict[str, float],
        steps: int,
        dt: float,
        opt: torch.optim.Optimizer,
        telemetry: _Telemetry,
        comm: CommTimer,
        device: torch.device,
        task: Task,
    ) -> dict[str, Any]:
        """The metrics record (rank 0's), with every rank's rate, all-reduce share and GPU figures.
        Every rank calls it at the same steps (it gathers)."""
        ctx = self.ctx
        losses = {k: v / max(steps, 1) for k, v in acc.items()}
        weighted = sum(task.weights[k.split("_")[0]] * v for k, v in losses.items())
        gpu = telemetry.read()
        nan = float("nan")

        def num(v: Any) -> float:
            return nan if v is None else float(v)

        local = 2 * (s.batch // ctx.world_size) * steps
        mine = [local / dt if dt > 0 else nan, comm.exposed, dt, num(gpu["gpu_memory_bytes"]),
                num(gpu["gpu_memory_peak_bytes"]), num(gpu["gpu_power_w"]), comm.seconds]  # fmt: skip
        ranks = self._rank_rows(tdist.gather_floats(ctx, mine, device))
        self._ranks = ranks
        shares = [r["allreduce_share"] for r in ranks if r["allreduce_share"] is not None]
        return {
            "step": step,
            "time": time.time(),
            "loss": weighted,
            "losses": losses,
            "samples_per_s": 2 * s.batch * steps / dt if dt > 0 else None,
            "steps_per_s": steps / dt if dt > 0 else None,
            "lr": float(opt.param_groups[0]["lr"]),
            "steps_goal": s.steps,
            "world_size": ctx.world_size,
            # The rank that reached the all-reduce last waited for no one: its exposed share is
            # the communication itself; the others' extra is waiting for it (load imbalance).
            "allreduce_share": min(shares) if shares else None,
            "sync_wait_share": max(shares) - min(shares) if shares else None,
            "ranks": ranks,
            **gpu,
        }

    def _rank_rows(self, rows: list[list[float]]) -> list[dict[str, Any]]:
        """Each rank's figures (as gathered by `_record`) as its row of the metrics record; NaN
        (a figure a rank does not have) becomes None."""
        distributed = self.ctx.distributed

        def val(v: float, kind: type = float) -> Any:
            return None if v != v else kind(v)

        def share(seconds: float, window: float) -> float | None:
            return seconds / window if distributed and window > 0 else None

        return [
            {
                "rank": r,
                "pid": self._ranks[r]["pid"] if r < len(self._ranks) else None,
                "samples_per_s": val(row[0]),
                "allreduce_s": row[1] if distributed else None,
                "allreduce_share": share(row[1], row[2]),
                "allreduce_in_flight_share": share(row[6], row[2]),
                "gpu_memory_bytes": val(row[3], int),
                "gpu_memory_peak_bytes": val(row[4], int),
                "gpu_power_w": val(row[5]),
            }
            for r, row in enumerate(rows)
        ]


def _to_device(side: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    nb = device.type == "cuda"
    img = {
        k: side[k].to(device, non_blocking=nb).permute(0, 3, 1, 2).float().div_(255)
        for k in ("input", "target")
    }
    img["mask"] = side["mask"].to(device, non_blocking=nb).unsqueeze(1).float().div_(255)
    return img


def _preview_batch(a: Faceset, b: Faceset, resolution: int, count: int = 4) -> dict[str, torch.Tensor]:
    """The first faces of each set, unaugmented: the same faces in every preview of a run."""

    def take(fs: Faceset) -> torch.Tensor:
        idx = np.linspace(0, len(fs) - 1, min(count, len(fs))).round().astype(int)
        crops = [resize_crop(fs.face(int(i)), fs.mask(int(i)), resolution)[0] for i in idx]
        return torch.from_numpy(np.stack(crops)).permute(0, 3, 1, 2).float() / 255

    return {"a": take(a), "b": take(b)}


def write_preview(run_dir: Path, grid: np.ndarray, step: int) -> Path:
    """`previews/preview_<step>.png` and the latest as `preview.png` (both written atomically)."""
    folder = run_dir / control.PREVIEWS
    folder.mkdir(exist_ok=True)
    ok, png = cv2.imencode(".png", cv2.cvtColor(grid, cv2.COLOR_RGB2BGR))
    if not ok:
        raise RuntimeError("PNG encoding failed")
    for path in (folder / f"preview_{step:08d}.png", run_dir / control.PREVIEW):
        atomic.write_bytes_atomic(path, png.tobytes(), durable=False)
    return run_dir / control.PREVIEW
