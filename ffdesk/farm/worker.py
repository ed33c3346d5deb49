"""The farm's worker: one Ray actor per GPU slot (or CPU share), rendering segments.

Each worker owns a `ResidencyManager` (its own pool under its own budget, on its own device)
for its whole life; the models of the job it renders join that pool and stay loaded from one
segment to the next (`ffdesk.farm.resident.JobModels`), so a worker loads a job's model pack
once however many of its segments it renders. A segment's encoded file (and, for a job with
`--matte clip`, its matte beside it) comes back as bytes through Ray's object store; the head
writes it into the job's manifest. Without shared storage the head ships the segment's part of
the clip the same way (`ffdesk.farm.ship`). While a segment
renders the worker posts its progress to the farm's board every few frames, and it serves its
Prometheus metrics (`ffdesk.farm.metrics`). What it is shipped and its segments' files live in
a scratch folder of its own that a later worker removes if this one is killed
(`ffdesk.farm.scratch`). The class is plain Python: the head wraps it with
`ray.remote` when a farm is used.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ffdesk.errors import UserError
from ffdesk.farm.resident import JobModels, model_loads
from ffdesk.farm.scratch import claim_scratch
from ffdesk.farm.ship import ShippedRange, received_job, received_segment
from ffdesk.media.encode import container_suffix
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import PlannedSegment, render_segment, segment_matte_path
from ffdesk.pipeline.job_json import job_from_json
from ffdesk.runtime.env import RuntimeEnv

if TYPE_CHECKING:
    from ffdesk.farm.metrics import WorkerFigures
    from ffdesk.telemetry.metrics import MetricsServer

PROGRESS_EVERY_S = 0.2
"""How often a worker posts its progress within a segment to the board."""


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
    model_loads: int = 0
    """Models loaded for this segment (0 when the job's models were already resident)."""
    read_from: str = ""
    """The file the segment was decoded from (the clip, or the shipped cut)."""
    matte_files: tuple[tuple[str, bytes], ...] = ()
    """The segment's matte, as `files` holds the segment, for a job with `--matte clip`
    (`ffdesk.pipeline.engine.segment_matte_path`); empty for a job that writes none."""
    metrics_url: str | None = None
    """Where the worker serves its metrics (None: not served); a restarted worker's may move."""


class _Collect:
    """The segment's events a worker keeps for the head (warnings) or passes on (progress)."""

    def __init__(self, on_progress: Callable[[ev.Progress], None]) -> None:
        self.warnings: list[str] = []
        self.on_progress = on_progress

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.Warning) and event.message not in self.warnings:
            self.warnings.append(event.message)
        elif isinstance(event, ev.Progress):
            self.on_progress(event)


@dataclass
class _Rendering:
    """The segment being rendered, as the board and the metrics see it."""

    job_id: str
    number: int
    first_index: int
    frames: int
    frames_done: int = 0
    fps: float = 0.0
    posted: float = 0.0


class FarmWorker:
    """Renders segments for the head; see the module docstring."""

    def __init__(
        self,
        slot: str,
        budget_bytes: int | None,
        use_gpu: bool,
        env: RuntimeEnv | None = None,
        metrics_port: int | None = None,
        metrics_on_node: bool = False,
    ) -> None:
        """`env`: the runtime environment of this machine; by default it is built here, at the
        worker's edge (its own user folders, settings and `FFDESK_*` switches), since a worker
        runs on a machine of its own. `metrics_port`: where it serves its Prometheus metrics (0: a
        free port; None: not served), on the node's loopback, or with `metrics_on_node` on the
        node's address (readable from other machines: the endpoint has no authentication)."""
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
        self.model_loads = 0
        self.last_fps = 0.0
        self.current: str | None = None
        self.rendering: _Rendering | None = None
        self.started = time.time()
        self.job: JobModels | None = None
        self._job_folder: Path | None = None
        self.scratch = claim_scratch()
        self._board: Any = None
        self._board_looked = False
        self.metrics: MetricsServer | None = None
        if metrics_port is not None:
            from ffdesk.farm.metrics import serve_worker_metrics

            host = _node_address() if metrics_on_node else "127.0.0.1"
            self.metrics = serve_worker_metrics(self.figures, host, metrics_port)

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
            "model_loads": self.model_loads,
            "peak_model_bytes": self.manager.peak_model_bytes,
            "rendering": self.current,
            "metrics_url": self.metrics.url if self.metrics is not None else None,
        }

    def figures(self) -> WorkerFigures:
        """What the worker's metrics endpoint serves."""
        from ffdesk.farm.metrics import WorkerFigures

        now = self.rendering
        return WorkerFigures(
            slot=self.slot,
            frames=self.frames_done + (now.frames_done if now is not None else 0),
            segments=self.segments_done,
            model_loads=self.model_loads,
            fps=now.fps if now is not None else self.last_fps,
            model_bytes=self.manager.pool_bytes,
            gpu_memory_bytes=self._gpu_bytes(),
            rendering=now is not None,
        )

    def check(self, job_json: str, stand_in: str | None = None, lead: ShippedRange | None = None) -> None:
        """Refuse, before any work, a job this worker cannot take: the clip not visible here
        (unless the head ships it: `lead`, the range's first frames), or a model pack that does
        not fit this worker's budget (the job's models are planned in its pool without loading
        them, and kept for its segments)."""
        if stand_in:
            return
        self._job_models(job_json, stand_in, lead)

    def _job_models(self, job_json: str, stand_in: str | None, lead: ShippedRange | None) -> JobModels:
        """This job's models on this worker: kept from an earlier segment (or the check), else
        built now (releasing another job's)."""
        key = hashlib.sha256(f"{stand_in or ''}\n{job_json}".encode()).hexdigest()
        if self.job is not None and self.job.key == key:
            return self.job
        self.release()
        job = job_from_json(job_json).resolved()
        info = None
        if stand_in is None:
            from ffdesk.media.probe import probe

            if lead is not None:
                self._job_folder = Path(tempfile.mkdtemp(prefix="job-", dir=self.scratch.path))
                job = received_job(job, lead, self._job_folder, "lead")
            else:
                self._check_visible(job.target)
            info = probe(job.target, fps=job.fps)
        models = JobModels(key, job, info, env=self.env, manager=self.manager, stand_in=stand_in)
        try:
            models.prepare()
        except BaseException:
            models.release()
            self.release()
            raise
        self.job = models
        return models

    def release(self) -> None:
        """Unload the job's kept models and remove what was shipped for it."""
        job, self.job = self.job, None
        if job is not None:
            job.release()
        folder, self._job_folder = self._job_folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def _check_visible(self, path: Path) -> None:
        if not path.exists():
            raise UserError(
                f"node {self.node} cannot see {path}: every node needs the clip at the same path "
                "(shared storage), or render with the clip shipped to the workers (--farm-storage ship)"
            )

    def render(
        self,
        job_json: str,
        segment: dict[str, Any],
        stand_in: str | None = None,
        shipped: ShippedRange | None = None,
        lead: ShippedRange | None = None,
        job_id: str = "",
    ) -> SegmentFiles:
        """Render one planned segment of the job and return its file(s), and its matte's for a
        job with `--matte clip`. `shipped`: the segment's part of the clip, when the head ships
        it (with `lead`, the range's first frames); `job_id`: the head's name for the render,
        which its progress posts carry."""
        job = job_from_json(job_json)
        planned = PlannedSegment(**segment)
        models = self._job_models(job_json, stand_in, lead)
        loads_before = self.model_loads
        self.current = f"{job.target.name} segment {planned.number}"
        self.rendering = _Rendering(job_id, planned.number, planned.first_index, planned.frames)
        events = _Collect(self._progress)
        t0 = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory(prefix="segment-", dir=self.scratch.path) as tmp:
                if shipped is not None:
                    run_job = received_job(job, shipped, Path(tmp), "source")
                    run_segment = received_segment(planned, shipped)
                else:
                    self._check_visible(job.target)
                    run_job, run_segment = job, planned
                out = Path(tmp) / f"seg{planned.number:05d}{container_suffix(job.encoder)}"
                report = render_segment(
                    run_job,
                    run_segment,
                    out,
                    events,
                    env=self.env,
                    share=self.manager.share(f"segment {planned.number}"),
                    stages_for=models.stages_for(planned.number),
                )
                report = models.segment_report(report)
                files = _read(out)
                matte = _read(segment_matte_path(out)) if job.matte == "clip" else ()
        finally:
            self.current = None
            done, self.rendering = self.rendering, None
            if done is not None:
                self.last_fps = done.fps
        self.segments_done += 1
        self.frames_done += planned.frames
        self.model_loads += model_loads(report)
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
            model_loads=self.model_loads - loads_before,
            read_from=str(run_job.target),
            matte_files=matte,
            metrics_url=self.metrics.url if self.metrics is not None else None,
        )

    def _progress(self, event: ev.Progress) -> None:
        now = self.rendering
        if now is None:
            return
        now.frames_done = max(0, min(now.frames, event.frames_done - now.first_index))
        now.fps = round(event.fps, 2)
        clock = time.monotonic()
        if clock - now.posted < PROGRESS_EVERY_S and now.frames_done < now.frames:
            return
        now.posted = clock
        board = self._find_board()
        if board is None or not now.job_id:
            return
        state = {
            "job": now.job_id,
            "segment": now.number,
            "frames_done": now.frames_done,
            "frames": now.frames,
            "fps": now.fps,
            "gpu_memory_bytes": self._gpu_bytes(),
            "model_bytes": self.manager.pool_bytes,
        }
        with contextlib.suppress(Exception):
            board.segment_progress.remote(self.slot, state)  # not waited for

    def _find_board(self) -> Any:
        if not self._board_looked:
            self._board_looked = True
            with contextlib.suppress(Exception):
                import ray

                from ffdesk.farm.board import find_board

                if ray.is_initialized():
                    self._board = find_board(ray)
        return self._board

    def _gpu_bytes(self) -> int | None:
        if self.device != "cuda":
            return None
        from ffdesk.runtime.memprobe import gpu_used_bytes

        return gpu_used_bytes(self.manager.device_id, self.env.driver)

    def close(self) -> None:
        self.release()
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        self.manager.close()
        self.scratch.close()


def _node_address() -> str:
    """The address of this worker's node as Ray knows it (loopback outside Ray)."""
    try:
        import ray

        if ray.is_initialized():
            return str(ray.util.get_node_ip_address())
    except Exception:  # noqa: BLE001 - outside Ray (tests of the class itself)
        pass
    return "127.0.0.1"


def _read(path: Path) -> tuple[tuple[str, bytes], ...]:
    if path.is_dir():
        return tuple((p.name, p.read_bytes()) for p in sorted(path.iterdir()) if p.is_file())
    return ((path.name, path.read_bytes()),)


def segment_dict(segment: PlannedSegment) -> dict[str, Any]:
    """A planned segment as the plain dict a worker call carries."""
    return asdict(segment)
