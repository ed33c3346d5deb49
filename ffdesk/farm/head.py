"""The head of a farm render: plan, hand segments to workers, keep what comes back, join.

Everything that can refuse the job (paths, output kind, range, disk room, the matte clip's
included) is checked by `plan_segments` before the farm is contacted. The output's lock and
manifest are the local render's: finished segments are recorded in order as they arrive, so a
killed head resumes (from the farm or from a local render) after the last segment of the
unbroken prefix. With `--matte clip` each segment's matte comes back with it and is written and
recorded beside it, as a local render records it; the join writes the matte clip beside the
output.

Workers keep a job's models loaded from one segment to the next: the next segment goes to an
idle worker that already holds them when there is one. Without shared storage
(`FarmOptions.ship_source`) each segment's part of the clip travels with it through Ray's object
store (`ffdesk.farm.ship`). While segments render, the workers' progress on the board gives the
caller a smooth `Progress` and a `WorkerProgress` for each worker.

Failures: a worker that dies (process killed, node gone) gives its segment back to the queue; Ray
restarts the worker once on its node, after which it is dropped. A segment is tried at most
`max_tries` times: the last error (the segment's own exception for a render that failed, or the
loss of its worker) then stops the job, keeping every finished segment for a resume.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ffdesk.errors import Cancelled, UserError
from ffdesk.farm.address import FarmAddress, connected
from ffdesk.farm.board import open_board
from ffdesk.farm.ray_support import require_ray
from ffdesk.farm.ship import ShippedRange, cut_range, lead_range, sent_job
from ffdesk.farm.slots import NodeResources, Slot, SlotRules, plan_slots
from ffdesk.farm.worker import FarmWorker, SegmentFiles, segment_dict
from ffdesk.media.atomic import atomic_output, fsync_dir
from ffdesk.media.encode import picture_key
from ffdesk.media.matte import matte_file
from ffdesk.media.sequence import is_sequence_path
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import SegmentPlan, hold_matte_clip, join_planned, plan_segments
from ffdesk.pipeline.job import RenderJob, working_size
from ffdesk.pipeline.job_json import job_to_json
from ffdesk.pipeline.matte import keeps_target_alpha, matte_figures
from ffdesk.pipeline.report import FarmSummary, FarmWorkerRow, RenderReport, VideoFigures
from ffdesk.pipeline.resume import Manifest, Segment, work_dir_for
from ffdesk.units import format_bytes

WORKER_START_S = 120.0
"""How long a worker may take to start (Ray starts its process, it imports ffdesk)."""
WORKER_CLOSE_S = 10.0
"""How long idle workers are given to end their own way before they are killed."""
_WAIT_S = 0.25
_POLL_S = 0.25
"""How often the head reads the workers' progress from the board."""


@dataclass(frozen=True)
class FarmOptions:
    """How a farm render uses the farm."""

    slots: SlotRules = field(default_factory=SlotRules)
    stand_in: str | None = None
    """Stand-in stages for benchmarks (`wait:MS`, see `ffdesk.farm.standin`); None: the job's."""
    max_tries: int = 3
    """Times a segment is tried before its error stops the job."""
    local_cpus: int | None = None
    """CPUs of a Ray started on this machine (`--farm auto` without RAY_ADDRESS); None: all."""
    ship_source: bool = False
    """The workers cannot see the clip (no shared storage): ship each segment's part of it."""
    metrics_port: int | None = 0
    """Where each worker serves its Prometheus metrics (0: a free port; None: not served)."""
    metrics_on_node: bool = False
    """Serve them on the node's address (reachable from other machines, without authentication)
    instead of the node's loopback (only what runs on that machine can read them)."""


def _nothing(_event: ev.Event) -> None:
    return None


def run_farm_render(
    job: RenderJob,
    farm: FarmAddress,
    on_event: ev.EventCallback | None = None,
    cancel: threading.Event | None = None,
    options: FarmOptions | None = None,
) -> RenderReport:
    """Render `job` on `farm` and return the report: the segments' reports added up (stage
    times, face counts, model figures), the whole render's frames, output and wall time, and
    how the farm was used (`farm`)."""
    emit = on_event or _nothing
    options = options or FarmOptions()
    if options.ship_source and job.lip_syncer:
        raise UserError(
            "--lip-syncer on the farm needs --farm-storage shared: a shipped clip carries its video "
            "only, not its audio nor the --lip-sync-audio file"
        )
    require_ray()
    if options.stand_in:
        from ffdesk.farm.standin import parse_stand_in

        parse_stand_in(options.stand_in)
    t0 = time.perf_counter()
    plan = plan_segments(job, cancel)
    job = plan.job
    lead = shippable(plan) if options.ship_source else None
    for warning in plan.warnings:
        emit(ev.Warning(warning))
    source = plan.info.video
    manifest, note = Manifest.open(
        work_dir_for(job.output),
        job.output_fingerprint(
            keeps_target_alpha=(alpha := source is not None and keeps_target_alpha(job, source)),
            picture=picture_key(source, job.encoder, alpha_kept=alpha) if source is not None else None,
        ),
        job.resume,
        frames=plan.frames,
        time_base=source.time_base if source is not None else None,
    )
    with manifest, contextlib.ExitStack() as held:
        hold_matte_clip(job, held)  # the matte clip's partial is this render's too
        if note:
            emit(ev.Warning(note))
        mismatch = _keep_planned_prefix(manifest, plan)
        if mismatch:
            emit(ev.Warning(mismatch))
        resumed_segments = len(manifest.segments)
        resumed_frames = manifest.frames_done
        try:
            with connected(farm, local_cpus=options.local_cpus) as ray:
                run = _FarmRun(ray, plan, manifest, emit, cancel, options, farm.label, lead)
                with run:
                    run.render()
            joined = join_planned(plan, manifest, emit)
        except BaseException:
            _drop_unstarted(manifest)
            raise
    rendered = run.rendered
    video = rendered.video if rendered is not None else None
    report = RenderReport(
        frames_in=plan.frames,
        frames_out=joined.frames_out,
        frames_processed=plan.frames - resumed_frames,
        stages=rendered.stages if rendered is not None else (),
        output=joined.output,
        resumed_segments=resumed_segments,
        video=VideoFigures(
            encoder=video.encoder if video is not None else "",
            mode=job.mode,
            resumed_frames=resumed_frames,
            timestamps_repaired=video.timestamps_repaired if video is not None else 0,
            frames_concealed=video.frames_concealed if video is not None else 0,
            audio_packets_skipped=joined.audio_packets_skipped,
            audio=joined.audio,
            decoder=video.decoder if video is not None else "",
            timecode=joined.timecode,
        ),
        faces=rendered.faces if rendered is not None else None,
        models=rendered.models if rendered is not None else None,
        farm=run.summary(),
        shots=rendered.shots if rendered is not None else None,
        matte=matte_figures(job),
    ).timed(time.perf_counter() - t0, None)  # the frames were rendered in the workers' processes
    emit(ev.Done(report))
    return report


def shippable(plan: SegmentPlan) -> ShippedRange:
    """The lead cut of a clip to ship, once the last segment's cut showed that cuts from a later
    keyframe keep the clip's stream and timestamps too (`UserError` when they do not)."""
    if is_sequence_path(plan.job.target):
        raise UserError(
            f"{plan.job.target.name}: an image sequence cannot be shipped to the workers "
            "(render it with --farm-storage shared)"
        )
    lead = lead_range(plan)
    if len(plan.segments) > 1:
        last = plan.segments[-1]
        cut_range(plan, last, last)
    return lead


def _drop_unstarted(manifest: Manifest) -> None:
    """After a failure: a work folder with no finished segment holds nothing to resume from, so
    it goes (with its lock) instead of being left beside the output."""
    if not manifest.segments:
        with contextlib.suppress(OSError):
            manifest.discard()


def _keep_planned_prefix(manifest: Manifest, plan: SegmentPlan) -> str | None:
    """Keep the recorded segments that are the plan's, in order; drop the rest (and say so)."""
    for i, seg in enumerate(manifest.segments):
        planned = plan.segments[i] if i < len(plan.segments) else None
        same = planned is not None and (seg.frames, seg.first_pts, seg.last_pts) == (
            planned.frames,
            planned.first_pts,
            planned.last_pts,
        )
        if not same:
            manifest.segments = manifest.segments[:i]
            manifest.save()
            return f"segment {i} of the interrupted render was cut elsewhere: rendering from it again"
    return None


@dataclass
class _Worker:
    slot: Slot
    actor: Any
    pid: int = 0
    node: str = ""
    losses: int = 0
    segments: int = 0
    frames: int = 0
    seconds: float = 0.0
    peak_model_bytes: int = 0
    model_loads: int = 0
    metrics_url: str | None = None
    holds_job: bool = False
    """It rendered (or checked) this job: its models are loaded or planned in its pool."""
    partial: int = 0
    """Frames done of the segment it renders now (from its progress posts)."""
    fps: float = 0.0
    gpu_memory_bytes: int | None = None
    rendering: str | None = None
    dropped: bool = False


class _FarmRun:
    """One render's use of the farm: its workers, the queue, what came back."""

    def __init__(
        self,
        ray: Any,
        plan: SegmentPlan,
        manifest: Manifest,
        emit: ev.EventCallback,
        cancel: threading.Event | None,
        options: FarmOptions,
        label: str,
        lead: ShippedRange | None = None,
    ) -> None:
        """`lead`: the range's first frames, when the clip is shipped (`shippable`)."""
        self.ray = ray
        self.plan = plan
        self.manifest = manifest
        self.emit = emit
        self.cancel = cancel
        self.options = options
        self.label = label
        self.job_json = job_to_json(sent_job(plan.job) if options.ship_source else plan.job)
        self.job_id = f"{plan.job.output}@{os.getpid()}"
        self.done: dict[int, Segment] = {s.number: s for s in manifest.segments}
        self.waiting: dict[int, Segment] = {}
        """Segments back from the workers that wait for an earlier one before the manifest."""
        self.tries: dict[int, int] = {}
        self.reruns = 0
        self.worker_losses = 0
        self.duplicates = 0
        self.rendered: RenderReport | None = None
        """The reports of the segments rendered by this run, added up (None before the first)."""
        self.warned: set[str] = set()
        self.workers: list[_Worker] = []
        self.board: Any = None
        self.t0 = time.perf_counter()
        self.frames_this_run = 0
        self.first_dispatch: float | None = None
        self.last_result: float | None = None
        self.lead_range = lead
        self.lead: Any = None
        """The lead cut's object in the object store (shipping only)."""
        self.cuts: dict[int, Any] = {}
        """Shipped segments' objects, kept until the segment comes back (a rerun reuses it)."""
        self.shown_frames = manifest.frames_done
        self.last_poll = 0.0
        self.shown_workers: dict[str, ev.WorkerProgress] = {}

    # ---- workers ---------------------------------------------------------------------------

    def __enter__(self) -> _FarmRun:
        ray = self.ray
        nodes = [NodeResources.from_ray(n) for n in ray.nodes() if n.get("Alive")]
        slots = plan_slots(nodes, self.options.slots, self.plan.job.memory_budget)
        if not slots:
            raise UserError(f"the farm at {self.label} has no node with a GPU or CPU to give a worker")
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = ray.remote(FarmWorker)
        for slot in slots:
            actor = remote.options(
                num_cpus=slot.num_cpus,
                num_gpus=slot.num_gpus,
                max_restarts=1,
                max_task_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(slot.node_id, soft=False),
            ).remote(
                slot.name,
                slot.budget_bytes,
                slot.num_gpus > 0,
                None,
                self.options.metrics_port,
                self.options.metrics_on_node,
            )
            self.workers.append(_Worker(slot, actor))
        try:
            self._wait_for_workers()
            self._check_job()
        except BaseException:
            self.__exit__()  # the workers end here too: the job was refused before any segment
            raise
        with contextlib.suppress(Exception):
            self.board = open_board(ray)
            self.board.job_started.remote(
                {
                    "id": self.job_id,
                    "target": str(self.plan.job.target),
                    "output": str(self.plan.job.output),
                    "frames": self.plan.frames,
                    "segments": len(self.plan.segments),
                    "segments_done": len(self.done),
                }
            )
        return self

    def _wait_for_workers(self) -> None:
        refs = {w.actor.describe.remote(): w for w in self.workers}
        ready, late = self.ray.wait(list(refs), num_returns=len(refs), timeout=WORKER_START_S)
        for ref in ready:
            w = refs[ref]
            try:
                info = self.ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a worker that cannot start is left out
                self._warn(f"farm worker {w.slot.name} did not start ({_one_line(exc)})")
                w.dropped = True
                continue
            w.pid, w.node = int(info["pid"]), str(info["node"])
            w.metrics_url = info.get("metrics_url")
        for ref in late:
            refs[ref].dropped = True
            self._warn(f"farm worker {refs[ref].slot.name} did not start within {WORKER_START_S:.0f} s")
        if all(w.dropped for w in self.workers):
            raise UserError(f"no worker of the farm at {self.label} could start")

    def _check_job(self) -> None:
        """Every worker checks the job before any segment is handed out (see `FarmWorker.check`)."""
        from ray.exceptions import RayTaskError

        live = [w for w in self.workers if not w.dropped]
        if self.lead_range is not None:
            self.lead = self.ray.put(self.lead_range)
        refs = [w.actor.check.remote(self.job_json, self.options.stand_in, self.lead) for w in live]
        refused: UserError | None = None
        # every worker's answer is read, the refusals too: a failed result nobody reads is printed
        # by Ray, traceback and all, when it is let go
        for w, ref in zip(live, refs, strict=True):
            try:
                self.ray.get(ref, timeout=WORKER_START_S)
                w.holds_job = not self.options.stand_in
            except RayTaskError as exc:
                cause = exc.cause if isinstance(exc.cause, BaseException) else exc
                budget = f"budget {format_bytes(w.slot.budget_bytes)}" if w.slot.budget_bytes else "no budget"
                reason = str(cause) if isinstance(cause, UserError) else _one_line(cause)
                refused = refused or UserError(
                    f"farm worker {w.slot.name} ({budget}) cannot take this job: {reason}"
                )
        if refused is not None:
            raise refused

    def __exit__(self, *_exc: object) -> None:
        self._close_idle_workers()
        for w in self.workers:
            with contextlib.suppress(Exception):
                self.ray.kill(w.actor, no_restart=True)
        if self.board is not None:
            state = "finished" if len(self.done) == len(self.plan.segments) else "stopped"
            with contextlib.suppress(Exception):
                final = {"state": state, "segments_done": len(self.done)}
                posted = [self.board.job_update.remote(self.job_id, final)]
                for w in self.workers:
                    row = {**self._worker_row(w).to_json_dict(), "rendering": None, "ended": True}
                    posted.append(self.board.worker.remote(w.slot.name, row))
                # The board takes a caller's posts in order: once the last is in, every one is,
                # and `farm status` run right after this command sees the whole job.
                self.ray.get(posted, timeout=10)

    def _close_idle_workers(self) -> None:
        """Let each idle worker end its own way (its scratch folder removed, its metrics endpoint
        closed) before it is killed: a killed worker leaves its scratch folder on its node until
        the next worker there starts. A worker still rendering (the render was stopped) is only
        killed; the next one on its node removes what it leaves."""
        idle = [w for w in self.workers if not w.dropped and w.rendering is None]
        with contextlib.suppress(Exception):
            closing = [w.actor.close.remote() for w in idle]
            self.ray.wait(closing, num_returns=len(closing), timeout=WORKER_CLOSE_S)

    # ---- the queue -------------------------------------------------------------------------

    def render(self) -> None:
        ray = self.ray
        plan = self.plan
        video = plan.info.video
        assert video is not None
        width, height = working_size(video.display_width, video.display_height, plan.job.mode)
        resumed = self.manifest.frames_done
        self.emit(ev.Started(plan.frames, resumed, width, height, video.fps))
        pending: deque[int] = deque(s.number for s in plan.segments if s.number not in self.done)
        inflight: dict[Any, tuple[_Worker, int]] = {}
        idle = [w for w in self.workers if not w.dropped]
        while pending or inflight:
            if self.cancel is not None and self.cancel.is_set():
                raise Cancelled
            while idle and pending:
                idle.sort(key=lambda w: not w.holds_job)  # a worker holding the job's models first
                worker, number = idle.pop(0), pending.popleft()
                seg = plan.segments[number]
                ref = worker.actor.render.remote(
                    self.job_json,
                    segment_dict(seg),
                    self.options.stand_in,
                    self._shipped(number),
                    self.lead,
                    self.job_id,
                )
                inflight[ref] = (worker, number)
                if self.first_dispatch is None:
                    self.first_dispatch = time.perf_counter()
                worker.partial, worker.holds_job = 0, True
                self._post(
                    worker, f"segment {number} (frames {seg.first_index}-{seg.first_index + seg.frames - 1})"
                )
            if not inflight:
                raise UserError(
                    f"every worker of the farm at {self.label} was lost; "
                    f"{len(self.done)} of {len(plan.segments)} segments are kept for a resume"
                )
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=_WAIT_S)
            for ref in ready:
                worker, number = inflight.pop(ref)
                worker.partial, worker.rendering = 0, None
                came_back = self._collect(ref, worker, number)
                if not worker.dropped:
                    idle.append(worker)
                if not came_back:
                    pending.appendleft(number)
                else:
                    self.cuts.pop(number, None)
            self._poll_progress(inflight)

    def _shipped(self, number: int) -> Any:
        """The object holding segment `number`'s part of the clip (None with shared storage)."""
        if not self.options.ship_source:
            return None
        ref = self.cuts.get(number)
        if ref is None:
            seg = self.plan.segments[number]
            shipped: ShippedRange = cut_range(self.plan, seg, seg)
            ref = self.cuts[number] = self.ray.put(shipped)
        return ref

    def _poll_progress(self, inflight: dict[Any, tuple[_Worker, int]]) -> None:
        """Read the rendering workers' progress from the board; emit the render's `Progress`
        (never backwards) and each worker's `WorkerProgress` when they changed."""
        now = time.perf_counter()
        if self.board is None or now - self.last_poll < _POLL_S:
            return
        self.last_poll = now
        try:
            posted = self.ray.get(self.board.progress_of.remote(self.job_id), timeout=2)
        except Exception:  # noqa: BLE001 - progress between segments is a nicety
            return
        for worker, number in inflight.values():
            state = posted.get(worker.slot.name)
            if state is None or state.get("segment") != number:
                continue
            worker.partial = int(state.get("frames_done", 0))
            worker.fps = float(state.get("fps", 0.0))
            gpu = state.get("gpu_memory_bytes")
            worker.gpu_memory_bytes = int(gpu) if gpu is not None else None
        self._emit_progress()

    def _emit_progress(self) -> None:
        finished = self.manifest.frames_done + sum(s.frames for s in self.waiting.values())
        partial = sum(w.partial for w in self.workers if w.rendering is not None)
        done = min(self.plan.frames, finished + partial)
        if done > self.shown_frames:
            self.shown_frames = done
            elapsed = time.perf_counter() - self.t0
            fps = (self.frames_this_run + partial) / elapsed if elapsed > 0 else 0.0
            left = self.plan.frames - done
            self.emit(ev.Progress(done, self.plan.frames, fps, left / fps if fps > 0 else None))
        for w in self.workers:
            shown = ev.WorkerProgress(
                worker=w.slot.name,
                node=w.node or w.slot.address,
                rendering=w.rendering,
                frames_done=w.frames + (w.partial if w.rendering is not None else 0),
                segments_done=w.segments,
                fps=w.fps if w.rendering is not None else 0.0,
                gpu_memory_bytes=w.gpu_memory_bytes,
            )
            if self.shown_workers.get(w.slot.name) != shown:
                self.shown_workers[w.slot.name] = shown
                self.emit(shown)

    def _collect(self, ref: Any, worker: _Worker, number: int) -> bool:
        """Take one finished call; True when its segment came back."""
        from ray.exceptions import RayError, RayTaskError

        try:
            result: SegmentFiles = self.ray.get(ref)
        except RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            self._failed(number, cause, worker, lost=False)
            return False
        except RayError as exc:
            self._failed(number, exc, worker, lost=True)
            return False
        if self._store(result):
            part = RenderReport.from_json_dict(result.report)
            self.rendered = part if self.rendered is None else self.rendered.plus(part)
        worker.segments += 1
        worker.frames += result.frames
        worker.seconds += result.seconds
        worker.peak_model_bytes = max(worker.peak_model_bytes, result.peak_model_bytes)
        worker.model_loads += result.model_loads
        worker.fps = round(result.frames / result.seconds, 2) if result.seconds > 0 else 0.0
        worker.pid, worker.metrics_url = result.pid, result.metrics_url
        for warning in result.warnings:
            self._warn(warning)
        self._post(worker, None)
        self._emit_progress()
        return True

    def _failed(self, number: int, exc: BaseException, worker: _Worker, *, lost: bool) -> None:
        tries = self.tries[number] = self.tries.get(number, 0) + 1
        if lost:
            self.worker_losses += 1
            worker.losses += 1
            if worker.losses > 1:  # Ray restarted it once already: leave it out from now on
                worker.dropped = True
            worker.holds_job = False  # a restarted worker loads the job's models again
            worker.pid, worker.metrics_url = 0, None  # (a restarted one's, once it returns a segment)
            self._warn(
                f"farm worker {worker.slot.name} was lost rendering segment {number}: rendering it again"
            )
        if tries >= self.options.max_tries:
            if isinstance(exc, UserError):
                raise UserError(f"segment {number} failed {tries} times: {exc}") from None
            raise UserError(f"segment {number} failed {tries} times: {_one_line(exc)}") from None
        self.reruns += 1

    def _store(self, result: SegmentFiles) -> bool:
        """Write a returned segment (and its matte, for a job with `--matte clip`) beside the
        manifest; record the unbroken prefix in order. False for a segment already kept."""
        number = result.number
        if number in self.done or number in self.waiting:
            self.duplicates += 1  # rendered twice (a worker thought lost came back): keep one
            return False
        self.waiting[number] = write_returned(self.manifest.folder, self.plan, result)
        while (nxt := len(self.manifest.segments)) in self.waiting:
            segment = self.waiting.pop(nxt)
            self.manifest.add(segment)
            self.done[nxt] = segment
        self.frames_this_run += result.frames
        self.last_result = time.perf_counter()
        elapsed = time.perf_counter() - self.t0
        fps = self.frames_this_run / elapsed if elapsed > 0 else 0.0
        if self.board is not None:
            with contextlib.suppress(Exception):
                self.board.job_update.remote(
                    self.job_id, {"segments_done": len(self.done) + len(self.waiting), "fps": round(fps, 2)}
                )
        return True

    # ---- reporting -------------------------------------------------------------------------

    def _warn(self, message: str) -> None:
        if message not in self.warned:
            self.warned.add(message)
            self.emit(ev.Warning(message))

    def _worker_row(self, w: _Worker) -> FarmWorkerRow:
        return FarmWorkerRow(
            slot=w.slot.name,
            node=w.node or w.slot.address,
            pid=w.pid,
            num_cpus=w.slot.num_cpus,
            num_gpus=w.slot.num_gpus,
            budget_bytes=w.slot.budget_bytes,
            segments=w.segments,
            frames=w.frames,
            seconds=round(w.seconds, 3),
            peak_model_bytes=w.peak_model_bytes,
            losses=w.losses,
            dropped=w.dropped,
            model_loads=w.model_loads,
            metrics_url=w.metrics_url,
        )

    def _post(self, w: _Worker, rendering: str | None) -> None:
        label = f"{self.plan.job.target.name} {rendering}" if rendering else None
        w.rendering = label
        if self.board is None:
            return
        with contextlib.suppress(Exception):
            row = {**self._worker_row(w).to_json_dict(), "rendering": label, "job": self.job_id}
            self.board.worker.remote(w.slot.name, row)

    def summary(self) -> FarmSummary:
        return FarmSummary(
            address=self.label,
            workers=tuple(self._worker_row(w) for w in self.workers),
            segments=len(self.plan.segments),
            segments_rerun=self.reruns,
            worker_losses=self.worker_losses,
            duplicates=self.duplicates,
            render_seconds=round(self.last_result - self.first_dispatch, 3)
            if self.first_dispatch is not None and self.last_result is not None
            else 0.0,
        )


def write_returned(folder: Path, plan: SegmentPlan, result: SegmentFiles) -> Segment:
    """Write a segment a worker returned into the work folder `folder`, named as a local render
    names it, and for a job with `--matte clip` its matte beside it (first: a segment whose file
    is there has its matte too), each whole or not at all. Returns its record for the manifest
    (`Manifest.add` reads the sizes and CRCs back from disk). `UserError` for a segment of such
    a job that came back without its matte."""
    planned = plan.segments[result.number]
    name = f"seg{result.number:05d}{plan.suffix}"
    matte: str | None = None
    if plan.job.matte == "clip":
        if not result.matte_files:
            raise UserError(
                f"segment {result.number} came back from farm worker {result.slot} without its matte"
            )
        matte = matte_file(name)
        _write_segment(folder, matte, result.is_dir, result.matte_files)
    _write_segment(folder, name, result.is_dir, result.files)
    return Segment(result.number, name, planned.frames, planned.first_pts, planned.last_pts, matte=matte)


def _write_segment(folder: Path, name: str, is_dir: bool, files: tuple[tuple[str, bytes], ...]) -> None:
    """A segment's file (or PNG folder: `is_dir`), or its matte's, in `folder` under `name`,
    written whole or not at all."""
    with atomic_output(folder / name) as tmp:
        if is_dir:
            tmp.mkdir()
            for file_name, data in files:
                _write_file(tmp / file_name, data)
            fsync_dir(tmp)
        else:
            ((_, data),) = files
            _write_file(tmp, data)


def _write_file(path: Path, data: bytes) -> None:
    with path.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}".rstrip(": ")
