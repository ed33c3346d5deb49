"""Following a run's `metrics.jsonl` as it grows, and summarising a run for monitors."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ffdesk.training import control
from ffdesk.units import format_bytes


class MetricsFollower:
    """Tails a JSONL file: each `poll()` returns the records completed since the last one.

    A last line without its newline is being written: it stays buffered until the newline
    arrives. A file that shrank (a resumed run drops records after its checkpoint) is re-read
    from the start, and `reset` tells the caller to drop what it had.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._offset = 0
        self._partial = b""
        self._identity: tuple[int, int] | None = None
        self.reset = False
        """True after a `poll()` that restarted from the top of the file."""

    def poll(self) -> list[dict[str, Any]]:
        self.reset = False
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return []
        identity = (st.st_dev, st.st_ino)
        if (self._identity is not None and identity != self._identity) or st.st_size < self._offset:
            self._offset, self._partial, self.reset = 0, b"", True
        self._identity = identity
        if st.st_size == self._offset:
            return []
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            chunk = fh.read()
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        records = []
        for line in lines:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):  # (UnicodeDecodeError too: a damaged file's bytes)
                continue  # a line cut by a crash; the next ones are whole
            sound = sound_record(rec)
            if sound is not None:
                records.append(sound)
        return records


_NUMBERS = ("loss", "samples_per_s", "steps_per_s", "time", "gpu_memory_bytes", "gpu_power_w",
            "allreduce_share", "world_size")  # fmt: skip
"""The figures of a metrics record that are numbers (a rank's too, less `time`)."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def sound_record(rec: Any) -> dict[str, Any] | None:
    """A metrics record as the monitors read it, from a line of `metrics.jsonl`: None where it is
    no object or has no whole step, and without the figures of the wrong kind (a damaged file's
    `{"step": [1], "loss": {"a": 1}}` crashed the summary)."""
    if not isinstance(rec, dict) or _whole(rec.get("step")) is None:
        return None
    out = {k: v for k, v in rec.items() if k not in _NUMBERS or _number(v)}
    losses = out.get("losses")
    if losses is not None:
        out["losses"] = (
            {str(k): v for k, v in losses.items() if _number(v)} if isinstance(losses, dict) else {}
        )
    if "ranks" in out:
        out["ranks"] = _sound_ranks(out["ranks"])
    return out


def _sound_ranks(ranks: Any) -> list[dict[str, Any]]:
    """The ranks' figures of a record or status, each without the figures of the wrong kind."""
    if not isinstance(ranks, list):
        return []
    return [
        {k: v for k, v in r.items() if k not in (*_NUMBERS, "rank") or _number(v)}
        for r in ranks
        if isinstance(r, dict)
    ]


@dataclass(frozen=True)
class RankFigures:
    """One training process's figures from the last metrics record (rank 0 gathers them)."""

    rank: int
    samples_per_s: float | None
    allreduce_share: float | None
    """Share of the logging window this rank's backward passes waited for the gradient
    all-reduce after their own work (the exposed communication, with any wait for a slower rank)."""
    gpu_memory_bytes: int | None
    gpu_power_w: float | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RankFigures:
        return cls(
            rank=int(d.get("rank") or 0),
            samples_per_s=d.get("samples_per_s"),
            allreduce_share=d.get("allreduce_share"),
            gpu_memory_bytes=d.get("gpu_memory_bytes"),
            gpu_power_w=d.get("gpu_power_w"),
        )

    def line(self) -> str:
        rate = "-" if self.samples_per_s is None else f"{self.samples_per_s:.1f}"
        parts = [f"rank {self.rank}: samples/s {rate}"]
        if self.allreduce_share is not None:
            parts.append(f"all-reduce {self.allreduce_share:.0%}")
        if self.gpu_memory_bytes is not None:
            parts.append(f"GPU memory {format_bytes(self.gpu_memory_bytes)}")
        if self.gpu_power_w is not None:
            parts.append(f"power {self.gpu_power_w:.0f} W")
        return "  ".join(parts)


@dataclass(frozen=True)
class RunSummary:
    """What a monitor shows about a run at one moment."""

    run_dir: Path
    state: str
    step: int
    steps_goal: int | None
    loss: float | None
    losses: dict[str, float]
    samples_per_s: float | None
    eta_s: float | None
    gpu_memory_bytes: int | None
    gpu_power_w: float | None
    preview: Path | None
    updated: float | None
    world_size: int = 1
    """Training processes (DistributedDataParallel ranks); 1 for a single process."""
    allreduce_share: float | None = None
    """The exposed all-reduce share of a step of the rank that waited least, i.e. the
    communication itself without waiting for a slower rank (None for one process)."""
    ranks: tuple[RankFigures, ...] = ()

    def lines(self) -> list[str]:
        goal = f"/{self.steps_goal}" if self.steps_goal else ""
        loss = "-" if self.loss is None else f"{self.loss:.4f}"
        terms = " ".join(f"{k}={v:.4f}" for k, v in sorted(self.losses.items()))
        rate = "-" if self.samples_per_s is None else f"{self.samples_per_s:.1f}"
        out = [
            f"run {self.run_dir}: {self.state}, step {self.step}{goal}",
            f"loss {loss}  {terms}".rstrip(),
            f"samples/s {rate}  ETA {format_eta(self.eta_s)}",
        ]
        gpu = []
        if self.gpu_memory_bytes is not None:
            gpu.append(f"GPU memory {format_bytes(self.gpu_memory_bytes)}")
        if self.gpu_power_w is not None:
            gpu.append(f"power {self.gpu_power_w:.0f} W")
        out.append("  ".join(gpu) if gpu else "GPU: no figures (CPU run or no NVML)")
        if self.world_size > 1:
            share = "-" if self.allreduce_share is None else f"{self.allreduce_share:.0%}"
            out.append(f"{self.world_size} processes, all-reduce share of a step {share}")
            out += [f"  {r.line()}" for r in self.ranks]
        if self.preview:
            out.append(f"preview {self.preview}")
        return out


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def eta_seconds(records: list[dict[str, Any]], steps_goal: int | None) -> float | None:
    """Time left to the goal, from the step rate over the last records (up to 20)."""
    if not records or not steps_goal:
        return None
    last = records[-1]
    if last["step"] >= steps_goal:
        return 0.0
    window = records[-20:]
    first = window[0]
    dt = float(last.get("time", 0)) - float(first.get("time", 0))
    ds = int(last["step"]) - int(first["step"])
    if ds <= 0 or dt <= 0:
        rate = last.get("steps_per_s")
        return (steps_goal - last["step"]) / rate if rate else None
    return (steps_goal - int(last["step"])) * dt / ds


def _seconds(value: Any) -> float | None:
    """`value` where it is a number (a time read from a status file), else None."""
    return float(value) if _number(value) else None


def _whole(value: Any) -> int | None:
    """`value` as a whole number where it is one (a status or record read from a file)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def summarise(run_dir: Path, records: list[dict[str, Any]]) -> RunSummary:
    """Summary from the run's status/settings files and the metrics records read so far.

    A run that has ended is at its status's step (an interrupted one at its checkpoint's, where a
    --resume continues, though steps after it were logged); a running one at the later of its
    status's and its last record's. Only a running trainer has an ETA: not a paused or ended
    one, nor one whose process is gone."""
    run_dir = Path(run_dir)
    raw = control.read_json(run_dir / control.STATUS)
    status = raw or {}
    settings = control.read_json(run_dir / control.SETTINGS) or {}
    goal = _whole(status.get("steps_goal")) or _whole(
        settings.get("steps")
    )  # (a damaged file's "many": none)
    last = records[-1] if records else {}
    preview = run_dir / control.PREVIEW
    state = str(status.get("state", "not started" if not records else "unknown"))
    step = _whole(status.get("step"))
    if step is None or state in control.LIVE_STATES:
        step = max(step or 0, _whole(last.get("step")) or 0)
    else:  # the figures of the step it is shown at, not of one logged after its checkpoint
        last = next((r for r in reversed(records) if (_whole(r.get("step")) or 0) <= step), last)
    running = state == "running" and not control.trainer_gone(raw)
    return RunSummary(
        run_dir=run_dir,
        state=state,
        step=step,
        steps_goal=int(goal) if goal else None,
        loss=last.get("loss"),
        losses=dict(last.get("losses") or {}),
        samples_per_s=last.get("samples_per_s"),
        eta_s=eta_seconds(records, int(goal) if goal else None) if running else None,
        gpu_memory_bytes=last.get("gpu_memory_bytes"),
        gpu_power_w=last.get("gpu_power_w"),
        preview=preview if preview.exists() else None,
        updated=_seconds(status.get("time")) or last.get("time") or (time.time() if records else None),
        world_size=_whole(last.get("world_size")) or _whole(status.get("world_size")) or 1,
        allreduce_share=last.get("allreduce_share"),
        ranks=tuple(
            RankFigures.from_json(r)
            for r in (last.get("ranks") or _sound_ranks(status.get("ranks")))
            if isinstance(r, dict) and "samples_per_s" in r
        ),
    )
