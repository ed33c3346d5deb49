"""The farm's worker: one Ray actor per GPU slot (or CPU share), rendering segments.

Each worker owns a `ResidencyManager` (its own pool under its own budget, on its own device)
for its whole life; the stages of every segment it renders join that pool, so its budget,
footprints and peak cover all its segments. A segment's encoded file comes back as bytes through
Ray's object store; the head writes it into the job's manifest. The class is plain Python: the
head wraps it with `ray.remote` when a farm is used.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ffdesk.errors import UserError
from ffdesk.media.encode import container_suffix
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import PlannedSegment, render_segment
from ffdesk.pipeline.job_json import job_from_json
from ffdesk.runtime.env import RuntimeEnv


@dataclass(frozen=True)
class SegmentFiles:
    """What a worker returns for a rendered segment: its file(s) and figures."""

    number: int
    is_dir: bool
    files: tuple[tuple[str, bytes], ...]
    """(name, bytes): one file for a clip segment; a PNG segment's frames, in order."""
    frames: int
    seconds: float
    slot: str
    node: str
    pid: int
    peak_model_bytes: int
    warnings: tuple[str, ...]
    report: dict[str, Any]
    """The segment's `RenderReport` as JSON (`to_json_dict`): it crosses machines."""


class _Collect:
    """The segment's events a worker keeps for the head (warnings; progress is per segment)."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.Warning) and event.message not in self.warnings:
            self.warnings.append(event.message)


class FarmWorker:
    """Renders segments for the head; see the module docstring."""

    def __init__(
        self, slot: str, budget_bytes: int | None, use_gpu: bool, env: RuntimeEnv | None = None
    ) -> None:
        """`env`: the runtime environment of this machine; by default it is built here, at the
        worker's edge (its own user folders, settings and `FFDESK_*` switches), since a worker
        runs on a machine of its own."""
        from ffdesk.runtime.residency import ResidencyManager

        self.env = env if env is not None else RuntimeEnv.from_system()
        self.slot = slot
        self.node = socket.gethostname()
        self.device: Literal["cuda", "cpu"] = "cuda" if use_gpu else "cpu"
        self.manager = ResidencyManager(
            budget_bytes=budget_bytes, device=self.device, holder=slot, env=self.env
        )
        self.segments_done = 0
        self.frames_done = 0
        self.current: str | None = None
        self.started = time.time()

    def describe(self) -> dict[str, Any]:
        """Who this worker is (for the head's report and `farm status`)."""
        gpu_ids: list[str] = []
        try:
            import ray

            gpu_ids = [str(g) for g in ray.get_gpu_ids()]
        except Exception:  # noqa: BLE001 - outside Ray (tests of the class itself)
            gpu_ids = []
        return {
            "slot": self.slot,
            "node": self.node,
            "pid": os.getpid(),
            "device": self.device,
            "gpus": gpu_ids,
            "budget_bytes": self.manager.budget_bytes,
            "segments_done": self.segments_done,
            "frames_done": self.frames_done,
            "peak_model_bytes": self.manager.peak_model_bytes,
            "rendering": self.current,
        }

    def check(self, job_json: str, stand_in: str | None = None) -> None:
        """Refuse, before any work, a job this worker cannot take: the clip not visible here, or
        a model pack that does not fit this worker's budget (the stages are built in its pool,
        which plans the pack's models without loading them, then released)."""
        if stand_in:
            return
        job = job_from_json(job_json)
        self._check_visible(job.target)
        from ffdesk.media.probe import probe
        from ffdesk.pipeline.plan import build_stages

        info = probe(job.target, fps=job.fps)
        share = self.manager.share(f"check {job.target.name}")
        stages = build_stages(job, info, env=self.env, share=share)
        for stage in stages:
            stage.finish()

    def _check_visible(self, path: Path) -> None:
        if not path.exists():
            raise UserError(
                f"node {self.node} cannot see {path}: every node needs the clip at the same path "
                "(shared storage)"
            )

    def render(self, job_json: str, segment: dict[str, Any], stand_in: str | None = None) -> SegmentFiles:
        """Render one planned segment of the job and return its file(s)."""
        job = job_from_json(job_json)
        planned = PlannedSegment(**segment)
        self._check_visible(job.target)
        stages_for = None
        if stand_in:
            from ffdesk.farm.standin import stand_in_stages

            stages_for = stand_in_stages(stand_in)
        self.current = f"{job.target.name} segment {planned.number}"
        events = _Collect()
        t0 = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory(prefix="ffdesk-segment-") as tmp:
                out = Path(tmp) / f"seg{planned.number:05d}{container_suffix(job.encoder)}"
                report = render_segment(
                    job,
                    planned,
                    out,
                    events,
                    env=self.env,
                    share=self.manager.share(f"segment {planned.number}"),
                    stages_for=stages_for,
                )
                files = _read(out)
        finally:
            self.current = None
        self.segments_done += 1
        self.frames_done += planned.frames
        return SegmentFiles(
            number=planned.number,
            is_dir=job.encoder == "png",
            files=files,
            frames=planned.frames,
            seconds=round(time.perf_counter() - t0, 3),
            slot=self.slot,
            node=self.node,
            pid=os.getpid(),
            peak_model_bytes=self.manager.peak_model_bytes,
            warnings=tuple(events.warnings),
            report=report.to_json_dict(),
        )

    def close(self) -> None:
        self.manager.close()


def _read(path: Path) -> tuple[tuple[str, bytes], ...]:
    if path.is_dir():
        return tuple((p.name, p.read_bytes()) for p in sorted(path.iterdir()) if p.is_file())
    return ((path.name, path.read_bytes()),)


def segment_dict(segment: PlannedSegment) -> dict[str, Any]:
    """A planned segment as the plain dict a worker call carries."""
    return asdict(segment)
