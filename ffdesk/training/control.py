"""The files through which a training run and its monitors talk.

`control.json` carries one command from a monitor to the trainer. The monitor writes it
atomically; the trainer claims it by renaming it away before reading, so a command written while
the trainer handles the previous one is never lost, and each command is acted on once.
`status.json` is the trainer's answer: its state, step and goal.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any, Literal, get_args

from ffdesk import jsontext
from ffdesk.training.store import write_json_atomic

Command = Literal["pause", "resume", "stop", "export"]
State = Literal["starting", "running", "paused", "exporting", "stopped", "interrupted", "done", "failed"]
LIVE_STATES: tuple[State, ...] = ("starting", "running", "paused", "exporting")
"""The states of a status that a trainer still writes (its process is there to read commands)."""

CONTROL = "control.json"
STATUS = "status.json"
METRICS = "metrics.jsonl"
SETTINGS = "run.json"
CHECKPOINT = "checkpoint.pt"
PREVIEW = "preview.png"
PREVIEWS = "previews"
"""The folder of every preview of a run (`preview_<step>.png`)."""
MODEL = "model.onnx"
MODEL_INFO = "model.json"
INT8_MODEL = "model_int8.onnx"
"""A quantization-aware run's export, written beside the FP32 `model.onnx` of the run it tuned."""
STUDENT_NOTE = "student.json"
"""In a teacher's run folder: where its latest exported student is (for a preview to pick)."""


def send(run_dir: Path, command: Command) -> None:
    """Ask the trainer of `run_dir` to pause, resume, stop or export (it polls between steps)."""
    if command not in get_args(Command):
        raise ValueError(f"unknown command {command!r}")
    write_json_atomic(Path(run_dir) / CONTROL, {"command": command, "time": time.time()})


def take(run_dir: Path) -> Command | None:
    """Claim the pending command, if any (the trainer's side)."""
    path = Path(run_dir) / CONTROL
    claimed = path.with_name(f".{CONTROL}.{os.getpid()}.taken")
    try:  # a claim, not a write: the rename is what makes one reader act on the command once
        os.replace(path, claimed)
    except FileNotFoundError:
        return None
    try:
        data = jsontext.read(claimed)
    except (OSError, ValueError):
        return None
    finally:
        claimed.unlink(missing_ok=True)
    command = data.get("command") if isinstance(data, dict) else None
    return command if command in get_args(Command) else None


def write_status(run_dir: Path, state: State, step: int, steps_goal: int, **extra: Any) -> None:
    write_json_atomic(
        Path(run_dir) / STATUS,
        {
            "state": state,
            "step": step,
            "steps_goal": steps_goal,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "time": time.time(),
            **extra,
        },
    )


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when it is missing or (briefly) unreadable."""
    try:
        data = jsontext.read(Path(path))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def trainer_running(status: dict[str, Any] | None) -> bool:
    """Whether `status` (a run's `status.json`) is of a trainer that is still there: a live state
    and, when it ran on this machine, its process alive (a trainer ended by SIGKILL or a crash
    leaves "running"). A trainer on another machine (a shared run folder) is taken at its word."""
    if not status or status.get("state") not in LIVE_STATES:
        return False
    host = status.get("host")
    if isinstance(host, str) and host != socket.gethostname():
        return True
    return process_alive(status.get("pid"))


def trainer_gone(status: dict[str, Any] | None) -> bool:
    """Whether `status` says a trainer runs whose process is no longer there."""
    return status is not None and status.get("state") in LIVE_STATES and not trainer_running(status)


def process_alive(pid: Any) -> bool:
    """Whether a process `pid` runs on this machine (a zombie, ended but not reaped, does not)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's process
        return True
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True  # no /proc (not Linux): the signal test is all there is
    return stat.rpartition(")")[2].split()[:1] != ["Z"]
