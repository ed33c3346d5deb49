"""`ffdesk train`: train a person-specific swap model on two facesets; `ffdesk train export`."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from ffdesk.commands.argtypes import given_path, number_from, whole_at_least, whole_between
from ffdesk.commands.interrupt import REPEAT_S
from ffdesk.errors import Terminated, UserError
from ffdesk.userpath import not_a_file

if TYPE_CHECKING:
    from ffdesk.training.model import ModelConfig
    from ffdesk.training.trainer import TrainSettings


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "train",
        help="train a person-specific swap model (or `train export --run RUN_DIR`)",
        description="Train a swap model that draws the face of --src onto the faces of --dst.",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("export", "distill"),
        help="export: write RUN_DIR/model.onnx and stop; distill: train a small student of --teacher",
    )
    p.add_argument("--src", type=given_path, metavar="FACESET_A", help="faceset of the face to put in")
    p.add_argument("--dst", type=given_path, metavar="FACESET_B", help="faceset of the face to replace")
    p.add_argument(
        "--run",
        "--run-dir",
        dest="run",
        type=given_path,
        required=True,
        metavar="RUN_DIR",
        help="folder for checkpoints and logs (spell it --run-dir under torchrun)",
    )
    p.add_argument(
        "--steps",
        type=whole_at_least(1),
        help="step goal (default 100000; distill 20000; --qat 2000; --resume: the run's)",
    )
    p.add_argument("--resolution", type=int, choices=(64, 128, 256), help="default 128 (--resume: the run's)")
    p.add_argument("--batch", type=whole_at_least(1), help="faces per identity per step (default 8)")
    p.add_argument(
        "--lr", type=number_from(0, above=True), help="learning rate (Adam; default 5e-5, with --qat 1e-5)"
    )
    p.add_argument(
        "--lr-schedule",
        choices=("constant", "cosine"),
        help="constant (default), or a 5%% warm-up then a cosine decay to 1%% of --lr at --steps",
    )
    p.add_argument(
        "--amp",
        action=argparse.BooleanOptionalAction,
        help="mixed precision (bf16 where supported, else fp16; default off)",
    )
    p.add_argument(
        "--grad-checkpoint",
        action=argparse.BooleanOptionalAction,
        help="trade compute for activation memory (default off)",
    )
    p.add_argument(
        "--resume", action="store_true", help="continue the run in RUN_DIR (options left out keep the run's)"
    )
    p.add_argument(
        "--workers", type=whole_at_least(0), help="data loader processes (default 2; 0: in the main process)"
    )
    p.add_argument("--device", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=whole_between(0, 2**32 - 1), help="default 0")
    p.add_argument("--log-every", type=whole_at_least(1), metavar="STEPS", help="default 10")
    p.add_argument("--preview-every", type=whole_at_least(1), metavar="STEPS", help="default 500")
    p.add_argument("--save-every", type=whole_at_least(1), metavar="STEPS", help="default 1000")
    p.add_argument("--model-size", choices=("tiny", "default"), help=argparse.SUPPRESS)
    p.add_argument(
        "--export",
        dest="export_at_end",
        action=argparse.BooleanOptionalAction,
        help="export model.onnx at the end (default; --no-export: do not)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    d = p.add_argument_group("distillation and quantization")
    d.add_argument(
        "--teacher", type=given_path, metavar="RUN_DIR", help="distill: the finished run to reproduce"
    )
    d.add_argument(
        "--size",
        choices=("small", "tiny"),
        help="distill: the student's width (small (default): 1/2 of the teacher's channels, tiny: 1/4)",
    )
    d.add_argument(
        "--feature-weight",
        type=number_from(0),
        metavar="W",
        help="distill: weight of matching the decoders' intermediate maps (default 1; 0: outputs only)",
    )
    d.add_argument(
        "--student-init",
        choices=("teacher", "random"),
        help="distill: start the student from the teacher's strongest channels (default) or at random",
    )
    d.add_argument(
        "--qat",
        action="store_true",
        help="fine-tune RUN_DIR with fake INT8 (in RUN_DIR/qat), export RUN_DIR/model_int8.onnx",
    )
    g = p.add_argument_group("scale and tuning")
    g.add_argument(
        "--nproc",
        type=whole_at_least(1),
        metavar="N",
        help="processes on this machine (DistributedDataParallel; default: one per GPU, else 1)",
    )
    g.add_argument(
        "--max-restarts",
        type=whole_at_least(0),
        default=0,
        metavar="R",
        help="with --nproc: restart the processes from the last checkpoint up to R times",
    )
    g.add_argument(
        "--amp-dtype",
        choices=("auto", "bf16", "fp16"),
        help="with --amp: bf16 where supported else fp16 with a gradient scaler (auto), or forced",
    )
    g.add_argument(
        "--alloc-split-mb",
        type=whole_at_least(20),
        metavar="MB",
        help="PYTORCH_CUDA_ALLOC_CONF max_split_size_mb (less fragmentation on long GPU runs)",
    )
    g.add_argument(
        "--ddp-bucket-mb",
        type=number_from(0, above=True),
        metavar="MB",
        help="with --nproc: gradient all-reduce bucket size (default: torch's 25 MB)",
    )
    g.add_argument("--optimizer", choices=("adam", "sgd"), help=argparse.SUPPRESS)
    g.add_argument(
        "--mask-weight",
        type=number_from(0),
        metavar="W",
        help="weight of the mask loss (default 1; 0: mask heads not trained)",
    )
    p.set_defaults(func=run)


_VALUE_FLAGS = tuple(
    (f"--{name.replace('_', '-')}", name)
    for name in ("src", "dst", "run_dir", "steps", "resolution", "batch", "lr", "workers", "device", "seed",
                 "log_every", "preview_every", "save_every", "model_size", "amp_dtype", "alloc_split_mb",
                 "optimizer", "mask_weight", "teacher", "size", "feature_weight", "lr_schedule",
                 "ddp_bucket_mb", "student_init")
)  # fmt: skip
_SWITCHES = (("--resume", "resume"), ("--quiet", "quiet"), ("--qat", "qat"))
_ON_OFF = (("amp", "--amp", "--no-amp"), ("grad_checkpoint", "--grad-checkpoint", "--no-grad-checkpoint"),
           ("export_at_end", "--export", "--no-export"))  # fmt: skip
"""The switches a run keeps (`run.json`): given either way, or left out (None) for the run's."""


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The options of this command for the processes torchrun starts (no --nproc)."""
    out = [args.action] if args.action else []
    for flag, name in _VALUE_FLAGS:
        value = getattr(args, "run" if name == "run_dir" else name, None)
        if value is not None:
            out += [flag, str(value.resolve() if isinstance(value, Path) else value)]
    out += [flag for flag, name in _SWITCHES if getattr(args, name, False)]
    for name, on, off in _ON_OFF:
        value = getattr(args, name, None)
        if value is not None:  # off said as off: left out, a resumed worker would take the run's
            out.append(on if value else off)
    return out


FRESH: dict[str, Any] = {"steps": 100_000, "resolution": 128, "batch": 8, "seed": 0, "mask_weight": 1.0,
                         "feature_weight": 1.0, "optimizer": "adam", "lr_schedule": "constant",
                         "workers": 2, "device": "auto", "log_every": 10, "preview_every": 500,
                         "save_every": 1000, "amp": False, "amp_dtype": "auto", "grad_checkpoint": False,
                         "export_at_end": True, "student_init": "teacher"}  # fmt: skip
"""The defaults of a new run. A resumed run keeps its own (its `run.json`) for every option not
given, these and `KEPT`, and refuses a given one that would change its model or data (`Trainer`
checks against the checkpoint)."""
KEPT = (*FRESH, "lr", "alloc_split_mb", "ddp_bucket_mb")
"""The options a resumed run takes from its `run.json` when they are not given: those of `FRESH`,
the learning rate (whose default depends on --qat) and the allocator's and DDP's sizes (whose
default is torch's)."""
_CHOICES: dict[str, tuple[str, ...]] = {"optimizer": ("adam", "sgd"), "lr_schedule": ("constant", "cosine"),
                                        "amp_dtype": ("auto", "bf16", "fp16"),
                                        "student_init": ("teacher", "random")}  # fmt: skip
_SWITCH_NAMES = tuple(name for name, _on, _off in _ON_OFF)
_NUMBERS = ("lr", "ddp_bucket_mb", "mask_weight", "feature_weight")
"""Options that take any number (the others take whole numbers)."""
_ABOVE_ZERO = ("lr", "ddp_bucket_mb")
_LEAST = {"seed": 0, "workers": 0, "alloc_split_mb": 20}
"""The least whole number an option takes, where it is not 1."""


@dataclass(frozen=True)
class _Task:
    """What `ffdesk train` trains: into `run_dir`, from `teacher` (distill, --qat) or from scratch."""

    run_dir: Path
    teacher: Path | None = None
    teacher_cfg: ModelConfig | None = None


def run(args: argparse.Namespace) -> int:
    if args.action == "export":
        from ffdesk.training.export import export_run

        path = export_run(args.run)
        print(f"exported {path} (contract: {path.with_suffix('.json')})")
        return 0
    from ffdesk.training import launch

    task = _task(args)
    if args.resume:
        _saved_facesets(args, task.run_dir)
    if args.src is None or args.dst is None:
        raise UserError("ffdesk train: --src and --dst are required (or use `ffdesk train export --run DIR`)")
    _check_run_folder(task.run_dir, args.src, args.dst)
    if not _resumes_a_run(args, task.run_dir) and _same(args.src, args.dst):
        # a run on one faceset trained, then every --resume said "--src and --dst are swapped" (a
        # resumed run's facesets are checked against its own, by the trainer)
        raise UserError(
            f"--src and --dst are the same faceset ({args.src}): the model learns one face onto "
            "another; give two facesets"
        )
    resuming = _resuming(args, task.run_dir)
    _fill_defaults(args, task.run_dir, resuming)
    settings = _settings(args, task, resuming)
    nproc = args.nproc if args.nproc is not None else (1 if launch.in_torchrun() else launch.default_nproc())
    if nproc > 1 and not launch.in_torchrun():
        return _launch(settings, args, nproc)
    return _train(settings, args)


def _task(args: argparse.Namespace) -> _Task:
    """The run folder and teacher of `distill` and `--qat` (whose facesets default to the
    teacher's), or the plain run folder."""
    if not (args.action == "distill" or args.qat):
        return _Task(args.run)
    from ffdesk.training.tasks import teacher_config

    if args.action == "distill" and args.qat:
        raise UserError("ffdesk train: distill a student first, then run --qat on the student's folder")
    if args.action == "distill" and args.teacher is None and args.resume:
        teacher = _run_settings(args.run).get("teacher")  # the run's, as every option left out
        args.teacher = Path(teacher) if isinstance(teacher, str) and teacher else None
    if args.action == "distill" and args.teacher is None:
        raise UserError("ffdesk train distill: --teacher RUN_DIR is required")
    teacher = (args.teacher if args.action == "distill" else args.run).resolve()
    teacher_cfg, teacher_ckpt = teacher_config(teacher)
    args.src = args.src or (Path(teacher_ckpt["src"]) if teacher_ckpt.get("src") else None)
    args.dst = args.dst or (Path(teacher_ckpt["dst"]) if teacher_ckpt.get("dst") else None)
    return _Task(args.run if args.action == "distill" else args.run / "qat", teacher, teacher_cfg)


def _run_settings(run_dir: Path) -> dict[str, Any]:
    """The run's `run.json`; where there is none, or it cannot be read, the settings its
    checkpoint keeps (the same record, saved with the weights); empty where neither is there."""
    from ffdesk.training import control

    settings = control.read_json(run_dir / control.SETTINGS)
    if settings:
        return settings
    checkpoint = run_dir / control.CHECKPOINT
    if not checkpoint.is_file():
        return {}
    import torch

    try:  # (mapped, not read: the weights stay on disk)
        saved = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - a damaged checkpoint is the resume's to say
        return {}
    kept = saved.get("settings") if isinstance(saved, dict) else None
    return kept if isinstance(kept, dict) else {}


def _saved_facesets(args: argparse.Namespace, run_dir: Path) -> None:
    """`--src`/`--dst` not given again to `--resume`: the run's own (its `run.json`), as every
    other option left out is (a run stopped by SIGTERM says "continue with --resume")."""
    saved = _run_settings(run_dir)
    for name in ("src", "dst"):
        value = saved.get(name)
        if getattr(args, name) is None and isinstance(value, str) and value:
            setattr(args, name, Path(value))


def _resuming(args: argparse.Namespace, run_dir: Path) -> bool:
    """Whether this continues a run; --resume where there is none yet starts one (with a warning:
    a job that always passes --resume, as a restarted pod does, starts the same way)."""
    from ffdesk.training import control

    if not args.resume or (run_dir / control.CHECKPOINT).exists():
        return bool(args.resume)
    if os.environ.get("RANK", "0") == "0":
        print(f"ffdesk: warning: no run to resume in {run_dir} (no {control.CHECKPOINT}); starting a new one",
              file=sys.stderr)  # fmt: skip
    args.resume = False  # and so for the processes torchrun starts
    return False


DISTILL_STEPS = 20_000
"""A distillation's step goal unless given: a student starts from its teacher."""
QAT_STEPS = 2_000
"""A quantization-aware fine-tune's step goal unless given: it fine-tunes a trained model."""


def _fill_defaults(args: argparse.Namespace, run_dir: Path, resuming: bool) -> None:
    """Options not given: a resumed run's own (its `run.json`), else the defaults of a new run
    (the step goal of a distillation `DISTILL_STEPS`, of a --qat fine-tune `QAT_STEPS`)."""
    saved = _run_settings(run_dir) if resuming else {}
    if not resuming and args.steps is None:
        if getattr(args, "action", None) == "distill":
            args.steps = DISTILL_STEPS
        elif getattr(args, "qat", False):
            args.steps = QAT_STEPS
    for name in KEPT:
        if getattr(args, name) is None:
            setattr(args, name, _saved_value(saved, name))
        if getattr(args, name) is None and name in FRESH:
            setattr(args, name, FRESH[name])
    if not resuming:  # a resumed run's model is its checkpoint's
        args.model_size = args.model_size or "default"
        args.size = args.size or "small"


def _saved_value(saved: dict[str, Any], name: str) -> Any:
    """`saved[name]` where it is a value the option takes, else None."""
    value = saved.get(name)
    if name in _SWITCH_NAMES:
        return value if isinstance(value, bool) else None
    if name == "device":
        return value if isinstance(value, str) and value else None
    if name in _CHOICES:
        return value if isinstance(value, str) and value in _CHOICES[name] else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if name in _NUMBERS:  # a weight (0 or more), the learning rate or a size (more than 0)
        return float(value) if value > 0 or (value == 0 and name not in _ABOVE_ZERO) else None
    return value if isinstance(value, int) and value >= _LEAST.get(name, 1) else None


def _model(args: argparse.Namespace, task: _Task, resolution: int) -> ModelConfig | None:
    """The network to train; None: the checkpoint's (a resumed run with no size given)."""
    from ffdesk.training.model import ModelConfig

    if args.qat and task.teacher_cfg is not None:
        return replace(task.teacher_cfg, decoders=1)
    if task.teacher_cfg is not None:
        return task.teacher_cfg.student(args.size) if args.size else None
    if args.model_size is None:
        return None
    tiny = args.model_size == "tiny"
    return ModelConfig.tiny(resolution) if tiny else ModelConfig.for_resolution(resolution)


def _settings(args: argparse.Namespace, task: _Task, resuming: bool) -> TrainSettings:
    from ffdesk.training.trainer import TrainSettings

    resolution = task.teacher_cfg.resolution if task.teacher_cfg is not None else args.resolution
    return TrainSettings(
        src=args.src.resolve(),
        dst=args.dst.resolve(),
        run_dir=task.run_dir.resolve(),
        steps=args.steps,
        resolution=resolution,
        batch=args.batch,
        lr=args.lr if args.lr is not None else (1e-5 if args.qat else 5e-5),
        lr_schedule=args.lr_schedule,
        ddp_bucket_mb=args.ddp_bucket_mb,
        amp=args.amp,
        grad_checkpoint=args.grad_checkpoint,
        resume=resuming,
        workers=args.workers,
        seed=args.seed,
        device=args.device,
        log_every=args.log_every,
        preview_every=args.preview_every,
        save_every=args.save_every,
        export_at_end=args.export_at_end,
        model=_model(args, task, resolution),
        teacher=task.teacher,
        feature_weight=args.feature_weight,
        student_init=args.student_init,
        qat=args.qat,
        optimizer=args.optimizer,
        mask_weight=args.mask_weight,
        amp_dtype=args.amp_dtype,
        alloc_split_mb=args.alloc_split_mb,
    )


BUSY_REPEAT_S = 5.0
"""Python runs a signal's handler between two steps of its own, not as the signal comes: GNU
`timeout`'s second delivery, microseconds after the first, had its handler run after a training
step's long call into torch (0.5 s and more on a loaded machine), and counted as a second request
(quit at once, nothing saved). A signal again before the trainer's loop looked for the stop,
within this long, is the first one still."""


class _StopSignals:
    """Ctrl-C and SIGTERM as the trainer's stop: the first saves a checkpoint, then stops
    (status "interrupted", exit 130); a second one quits at once (checkpoints are written
    atomically). The same signal again within `REPEAT_S` is the first delivered twice (GNU
    `timeout` signals the process, then its group), not a second one; so is a SIGTERM whose handler
    Python ran later than that, but before the trainer's loop looked for a stop (`BUSY_REPEAT_S`:
    a terminal's Ctrl-C reaches the process once, and a second one quits at once).

    Under torchrun SIGTERM is torchrun ending its workers (after a Ctrl-C that reached them too):
    once the trainer polls for a stop (its loop has begun) it means save, then stop. Before that it
    ends the process as by default: there is no step to save, and a rank blocked in the
    rendezvous (the others' rank 0 refused) runs no Python handler, so torchrun waited 30 s before
    it killed the rank. The data loader's worker processes are forked with these
    handlers: in them Ctrl-C is ignored (the main process shuts them down) and SIGTERM ends the
    process as by default."""

    def __init__(self, torchrun: bool, speaks: bool) -> None:
        self.pid = os.getpid()
        self.torchrun = torchrun
        self.speaks = speaks
        self.presses = 0
        self.term = False
        self.last = -math.inf
        self.chld: Any = None
        """The SIGCHLD handler set aside while the run stops (`_quiet_worker_ends`)."""
        self.polled = False
        """Whether the trainer asked for a stop yet: its loop has begun."""
        self.polls = 0
        self.polls_at_first = 0
        """How often the trainer asked for a stop: in all, and by the first press."""

    def requested(self) -> bool:
        self.polls += 1
        if not self.polled:
            self.polled = True
            main = threading.current_thread() is threading.main_thread()
            if self.torchrun and main and signal.getsignal(signal.SIGTERM) != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, self.on_sigterm)  # (the loop has begun)
        return self.presses > 0 or self.term

    def on_sigint(self, _sig: int, _frame: FrameType | None) -> None:
        if os.getpid() == self.pid and self._press():
            self._first("Ctrl-C")

    def on_sigterm(self, sig: int, _frame: FrameType | None) -> None:
        if os.getpid() != self.pid:  # a forked data worker: end as by default
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        elif self.torchrun:
            self.term = True
        elif self._press(Terminated):
            self._first("SIGTERM")

    def _press(self, then: Callable[[], BaseException] = KeyboardInterrupt) -> bool:
        """Counts a press; True for the first; raises `then()` for a later one."""
        now = time.monotonic()
        if now - self.last < REPEAT_S:
            return False
        late = self.presses and self.polls == self.polls_at_first and now - self.last < BUSY_REPEAT_S
        if late and then is Terminated:  # delivered with the first, its handler run late: see BUSY_REPEAT_S
            return False
        self.last = now
        self.presses += 1
        self.polls_at_first = self.polls
        if self.presses > 1:
            raise then()
        return True

    def _first(self, what: str) -> None:
        if self.speaks:
            print(f"\nffdesk: {what}: saving a checkpoint, then stopping ({what} again to quit at once)",
                  file=sys.stderr)  # fmt: skip
        if not self.torchrun and self.chld is None:
            self.chld = _quiet_worker_ends()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        # a signal ignored as the run was started (a script's background job) stays ignored
        previous = signal.getsignal(signal.SIGINT)
        if previous != signal.SIG_IGN:
            signal.signal(signal.SIGINT, self.on_sigint)
        at_first = signal.SIG_DFL if self.torchrun and not self.polled else self.on_sigterm
        previous_term = signal.getsignal(signal.SIGTERM)
        if previous_term != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, at_first)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
            signal.signal(signal.SIGTERM, previous_term)
            if self.chld is not None:
                signal.signal(signal.SIGCHLD, self.chld)


def _quiet_worker_ends() -> Any:
    """A signal sent to the process group reaches the data workers too, and ends them: the data
    loader's SIGCHLD handler would then fail the run (at any point, while it saves too). The run
    is stopping and takes no batch after this, so their end is let pass (by a handler that does
    nothing: with the default, a SIGCHLD already pending would be reported as ignored). Returns
    the handler set aside."""
    return signal.signal(signal.SIGCHLD, _let_pass)


def _let_pass(_sig: int, _frame: FrameType | None) -> None:
    """A signal handler that does nothing."""


class StepBar:
    """The training's progress bar, fed the trainer's metric records (`record`).

    It is made at the first record, so errors before training print alone; it starts at that
    record's step (`initial`) and is moved on by what each later record adds, so its rate and
    time left are measured over steps it saw taken: made at step 10 and told 10 steps at once,
    a bar counted from 0 showed 10 steps in a few microseconds ("110960.42step/s") at first."""

    def __init__(self, steps: int, *, quiet: bool, file: TextIO | None = None) -> None:
        self.steps = steps
        self.quiet = quiet
        self.file = file
        self.bar: Any = None

    def record(self, rec: dict[str, Any]) -> None:
        """Show one metrics record: its step, loss and samples a second."""
        from tqdm import tqdm

        step = int(rec["step"])
        if self.bar is None:
            self.bar = tqdm(total=rec.get("steps_goal") or self.steps, initial=step, desc="train",
                            unit="step", disable=self.quiet, dynamic_ncols=True, file=self.file)  # fmt: skip
        elif step > self.bar.n:
            self.bar.update(step - self.bar.n)
        else:  # (a step told again, or earlier: shown as it is, no rate from it)
            self.bar.n = step
        self.bar.set_postfix(loss=f"{rec['loss']:.4f}", sps=f"{rec['samples_per_s'] or 0:.1f}", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _train(settings: TrainSettings, args: argparse.Namespace) -> int:
    """Train in this process (one of torchrun's, or the only one) until done or stopped."""
    from tqdm import tqdm

    from ffdesk.commands.runtime_env import runtime_env
    from ffdesk.training import launch
    from ffdesk.training.trainer import Trainer

    main = not launch.in_torchrun() or os.environ.get("RANK", "0") == "0"
    stops = _StopSignals(launch.in_torchrun(), speaks=main)
    bar = StepBar(settings.steps, quiet=args.quiet)

    def on_message(msg: str) -> None:
        tqdm.write(msg, file=sys.stderr)

    try:
        with stops.installed():
            result = Trainer(settings, stops.requested, bar.record, on_message,
                             driver=runtime_env(args).driver).run()  # fmt: skip
    except FloatingPointError as exc:  # the loss diverged: the last checkpoint is kept
        raise UserError(str(exc)) from None
    except (KeyboardInterrupt, Terminated):  # a second Ctrl-C or SIGTERM: stopped at once
        bar.close()
        if main:
            _say_kept(settings.run_dir)
        raise
    finally:
        bar.close()
    if result.outcome == "interrupted":
        print(f"ffdesk: checkpoint saved at step {result.step} in {settings.run_dir}; continue with --resume",
              file=sys.stderr)  # fmt: skip
        return 130
    if result.model is not None or main:
        print(
            f"{result.outcome} at step {result.step}" + (f"; model: {result.model}" if result.model else "")
        )
    return 0


def _say_kept(run_dir: Path) -> None:
    """After a stop at once: the checkpoint a --resume continues from, as the run's status says."""
    from ffdesk.training import control

    status = control.read_json(run_dir / control.STATUS) or {}
    if status.get("state") == "interrupted" and (run_dir / control.CHECKPOINT).exists():
        print(f"ffdesk: stopped at once; the checkpoint at step {status.get('step')} in {run_dir} is kept; "
              "continue with --resume", file=sys.stderr)  # fmt: skip


def _launch(settings: Any, args: argparse.Namespace, nproc: int) -> int:
    """Check the input here (one clear error, not N), then run the N processes under torchrun."""
    from ffdesk.training import control, launch
    from ffdesk.training.dist import DistContext
    from ffdesk.training.trainer import Trainer

    Trainer(settings, ctx=DistContext(rank=0, world_size=nproc)).check()
    code = launch.run(launch.plan(nproc, args.max_restarts, worker_argv(args)))
    status = control.read_json(settings.run_dir / control.STATUS) or {}
    if status.get("state") == "interrupted":
        print(f"ffdesk: checkpoint saved at step {status.get('step')} in {settings.run_dir}; "
              "continue with --resume", file=sys.stderr)  # fmt: skip
        return 130
    if code != 0:
        raise UserError(
            f"training with {nproc} processes failed (torchrun exit {code}); see the messages above"
        )
    return 0


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def _resumes_a_run(args: argparse.Namespace, run_dir: Path) -> bool:
    from ffdesk.training import control

    return bool(args.resume) and (run_dir / control.CHECKPOINT).exists()


def _check_run_folder(run_dir: Path, src: Path, dst: Path) -> None:
    """`UserError` (one line) when the run's folder is a file (a clip given as --run, say) or
    one of the facesets it trains on (its checkpoints and exports would go among their shards)."""
    not_a_file(run_dir, "--run")
    for flag, faceset in (("--src", src), ("--dst", dst)):
        if run_dir.resolve() == faceset.resolve():
            raise UserError(f"--run {run_dir} is the {flag} faceset; give the run a folder of its own")
