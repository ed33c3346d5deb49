"""The render engine: decode → stages → encode in segments, resumable, Qt-free.

`run_render(job, on_event, cancel, env=..., share=...)` is the whole API: the front end passes the
runtime environment it built (folders, models folder, driver switches) and, in an application
that keeps one memory budget, the residency `Share` its stages' models join. Decoding runs on
its own thread, each stage on its own worker thread(s), and encoding on the calling thread;
bounded queues join them, so decode, processing and encode overlap and memory stays flat. The
video is encoded in segments recorded in a manifest beside the output; a killed render resumes
from the first unfinished segment, a cancelled one from the frame it reached (it closes the
segment it was writing there).
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import shutil
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import cv2
import numpy as np

from ffdesk.errors import Cancelled, DiskFull, MediaError, Terminated, UserError
from ffdesk.hw import DriverFlags, nvdec_possible
from ffdesk.media import atomic
from ffdesk.media.decode import (
    DecodedFrame,
    ReadStats,
    VideoReader,
    decoder_label,
    rgb_array,
    rotation_of,
    upright,
)
from ffdesk.media.encode import (
    EncodeSettings,
    SegmentEncoder,
    check_png_folder,
    container_suffix,
    picture_key,
    png_folder_entry,
)
from ffdesk.media.images import IMAGE_SUFFIXES, StillImage, read_still
from ffdesk.media.matte import matte_file
from ffdesk.media.probe import MediaInfo, VideoInfo, probe, probe_still
from ffdesk.media.segments import JoinResult, join_segments
from ffdesk.media.sequence import SEQUENCE_SUFFIXES, is_sequence_path
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.eta import Estimate, EtaEstimator
from ffdesk.pipeline.flow import (
    END,
    Clock,
    FrameGate,
    Halt,
    Pipe,
    StageRunner,
    StageStats,
    Stopped,
    run_thread,
    run_through,
)
from ffdesk.pipeline.helper_priority import HelperPriority
from ffdesk.pipeline.job import SEGMENT_FRAMES, RenderJob, span_frames, working_size
from ffdesk.pipeline.matte import (
    TargetAlphas,
    frame_alpha,
    joined_matte_clip,
    keeps_target_alpha,
    matte_clip_path,
    matte_figures,
    matte_segment_encoder,
    packet_matte,
    target_alpha_warning,
    target_warnings,
    write_image_with_matte,
)
from ffdesk.pipeline.plan import (
    build_stages,
    draft_skipped,
    embedded_ignores,
    mask_parts_unread,
    provider_unusable,
)
from ffdesk.pipeline.providers import job_device
from ffdesk.pipeline.report import (
    BudgetFigures,
    RenderReport,
    StageFigures,
    StageTiming,
    VideoFigures,
    merge_figures,
    processor_figures,
)
from ffdesk.pipeline.resume import Manifest, Segment, lock_path_for, work_dir_for
from ffdesk.pipeline.stage import (
    BoundsFrames,
    EmitsEvents,
    FramePacket,
    HoldsFrames,
    Prepares,
    ReportsBudget,
    Stage,
    edits_regions_only,
)
from ffdesk.pipeline.stages.frame_enhancer import output_scale, upscale_figures
from ffdesk.pipeline.stages.placement import frames_started
from ffdesk.terminal_text import terminal_line
from ffdesk.types import Frame
from ffdesk.units import format_bytes
from ffdesk.userpath import stream_fd, stream_problem

if TYPE_CHECKING:
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

_QUEUE_FRAMES = 8
_PROGRESS_EVERY_S = 0.25
_PREVIEW_EVERY_S = 0.5


def _nothing(_event: ev.Event) -> None:
    return None


@dataclass(frozen=True)
class _Range:
    """The part of the target to render, in seconds (end None = to the end)."""

    start_s: float | None
    end_s: float | None
    total_frames: int


def run_render(
    job: RenderJob,
    on_event: ev.EventCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
) -> RenderReport:
    """Render `job` and return its report. Raises `UserError` for bad input, `Cancelled` on cancel.

    `env`: the runtime environment (models folder, caches, driver switches); `share`: the pool
    the stages' models join (None: the render keeps its own, under `job.memory_budget`)."""
    emit = on_event or _nothing
    job = job.resolved()
    check_paths(job)
    still: StillImage | None = None  # a still image is decoded once, here, and drawn as it was read
    if job.target.suffix.lower() in IMAGE_SUFFIXES and not is_sequence_path(job.target):
        info, still = probe_still(job.target, max_pixels=job.max_pixels)
    else:
        info = probe(job.target, fps=job.fps, max_pixels=job.max_pixels)
    if info.video is None:
        raise UserError(f"{job.target.name}: no video stream")
    _check_output_kind(job, info)
    # Everything that can refuse the job is checked before the stages load their models.
    span = None if info.is_image else _render_range(job, info.video, job.target.name)
    expected = 0
    if span is not None:
        expected = _expected_output_bytes(job, info, info.video, span)
        atomic.check_disk_space(job.output.parent, expected + _expected_matte_bytes(job, info.video, span))
    alpha_lost = target_alpha_warning(job, still.alpha) if still is not None else None
    for warning in (
        *target_warnings(job, info),
        *(_output_warnings(job, info.video) if span is not None else ()),
        *((alpha_lost,) if alpha_lost is not None else ()),
    ):
        emit(ev.Warning(warning))
    t0 = time.perf_counter()
    with contextlib.ExitStack() as held:
        manifest: Manifest | None = None
        if span is not None:
            # The output's lock is taken before any model loads, so a second render of the same
            # output is refused at once; it is released when the render ends, however it ends.
            # the segments' recorded stamps are checked against their files in the source's time base
            manifest, note = Manifest.open(
                work_dir_for(job.output),
                job.output_fingerprint(
                    keeps_target_alpha=(alpha := keeps_target_alpha(job, info.video)),
                    picture=picture_key(info.video, job.encoder, alpha_kept=alpha),
                ),
                job.resume,
                time_base=info.video.time_base,
            )
            held.enter_context(manifest)
            hold_matte_clip(job, held)
            if note:
                emit(ev.Warning(note))
        try:
            stages = build_stages(job, info, env=env, share=share)
        except BaseException:
            _drop_unstarted(manifest)
            raise
        ignored = (*embedded_ignores(job), *mask_parts_unread(job, env))
        for note in (*provider_unusable(job, env), *draft_skipped(job), *ignored):
            emit(ev.Warning(note))
        try:
            _bind(stages, emit, info, job)  # (a budget too small for the frames is refused here)
            for stage in stages:  # the models are ready before the first frame is decoded
                if isinstance(stage, Prepares):
                    stage.prepare(emit)
            frames_started(stages)
            if span is None or manifest is None:
                report = _render_image(job, stages, emit, still)
            else:
                nvdec = _nvdec_for(job, env, info.video)
                try:
                    report = _render_video(
                        job, info, span, manifest, stages, emit, Halt(cancel), env.driver, nvdec
                    )
                except DiskFull as exc:
                    hint = _room_to_finish(manifest, span, expected, job.output.parent)
                    raise DiskFull(exc.path, exc.reason, hint) from exc
        except BaseException:
            with contextlib.suppress(Exception):
                _stage_figures(stages)  # release models and threads; the first error is what counts
            _drop_unstarted(manifest)
            raise
        report = replace(
            report.with_figures(_stage_figures(stages)),
            upscale=upscale_figures(stages),
            budget=budget_figures(stages),
            processors=processor_figures(stages),
        )
    report = report.timed(time.perf_counter() - t0, _peak_rss_bytes())
    emit(ev.Done(report))
    return report


def _bind(stages: Sequence[Stage], emit: ev.EventCallback, info: MediaInfo, job: RenderJob) -> None:
    """Give the stages the render's events, then count the frames the render will hold against
    its budget (`count_frames_held`), before any model is prepared."""
    for stage in stages:
        if isinstance(stage, EmitsEvents):
            stage.bind_events(emit)
    count_frames_held(stages, info, job)


def count_frames_held(stages: Sequence[Stage], info: MediaInfo, job: RenderJob) -> None:
    """Count the frames a render of `info` through `stages` will hold against its budget
    (`BoundsFrames`: the flow's bound and the encoder's frame, or the one image; each with the
    picture a frame enhancer makes of it, and the target's alpha beside it where the output
    keeps it); `UserError` when they do not fit beside the models."""
    from ffdesk.pipeline.stages.models import enlarged_frame_bytes

    bound = frames_in_flight(stages)
    if bound is None and not info.is_image:
        return
    frames = 1 if info.is_image else (bound or 0) + 1
    scale = output_scale(stages)
    each = enlarged_frame_bytes(info, scale)
    if info.video is not None and not info.is_image and keeps_target_alpha(job, info.video):
        each += info.video.display_width * info.video.display_height * scale * scale  # one byte a pixel
    held = frames * each
    for stage in stages:
        if isinstance(stage, BoundsFrames):
            stage.count_frames_held(held)


def _drop_unstarted(manifest: Manifest | None) -> None:
    """After a failure: a work folder with no finished segment holds nothing to resume from, so
    it goes (with its lock) instead of being left beside the output."""
    if manifest is not None and not manifest.segments:
        with contextlib.suppress(OSError):
            manifest.discard()


def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def check_job_files(job: RenderJob) -> None:
    """`UserError` (one line) when a file the job writes (its output, matte clip, report or
    telemetry log) is one of the files it reads (its target, source photos, face-map photos,
    lip-sync audio) or another file it writes: a render never writes over what it reads, nor one
    of its files over another. Checked before anything is opened."""
    outputs = [("output", job.output)]
    if job.matte == "clip":
        outputs.append(("matte clip", matte_clip_path(job.output)))
    streams: dict[int, str] = {}
    for what, path in (("--report", job.report), ("--telemetry-log", job.telemetry_log)):
        if path is None:
            continue
        fd = stream_fd(path)
        if (problem := stream_problem(path)) is not None:  # checked now, not after the render
            raise UserError(f"{what} {path}: {problem}")
        if fd is None:
            outputs.append((what, path))
        elif fd in streams:  # a JSON report amid a log's JSON lines parses as neither
            raise UserError(f"{what} {path} is also the {streams[fd]}; give each its own path")
        else:
            streams[fd] = what
    inputs = job.files_read()
    for i, (what, out) in enumerate(outputs):
        if what != "--telemetry-log" and (problem := _name_too_long(out)) is not None:  # (opened as named)
            raise UserError(f"{what} {terminal_line(out.name)}: {problem}")
        if any(atomic.same_file(out, inp) for inp in inputs):
            raise UserError(f"{what} {out.name} is one of the inputs; choose another path")
        for other_what, other in outputs[:i]:
            if atomic.same_file(out, other):
                raise UserError(f"{what} {out.name} is also the {other_what}; give each its own path")
    report = next((path for what, path in outputs if what == "--report"), None)
    if report is not None and (kind := _not_a_report(report)) is not None:
        raise UserError(
            f"--report {report} exists and is {kind}, not a render report: not replaced "
            "(remove it or choose another path)"
        )


def _name_too_long(path: Path) -> str | None:
    """Why the folder of `path` cannot hold the names a render writes beside it, or None: its
    temporary copy (`atomic.temp_path_for`, the longest), its work folder and lock
    (`work_dir_for`, `lock_path_for`) are all longer than its own name. A name of 238 bytes or
    more failed with an internal error after the whole render, and left its work folder behind."""
    work = work_dir_for(path)
    beside = [atomic.temp_path_for(path).name, work.name, lock_path_for(work).name]
    longest = max(len(os.fsencode(name)) for name in beside)
    try:
        limit = os.pathconf(path.parent if path.parent.exists() else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if longest <= limit:
        return None
    over = longest - limit
    by = f"{over} byte{'s' if over > 1 else ''}"
    return (f"the name is {len(os.fsencode(path.name))} bytes, and the files a render writes beside it "
            f"would be {longest}, over the folder's {limit}: shorten it by {by}")  # fmt: skip


REPORT_KEYS = ("frames_in", "frames_out")
"""What every render report holds (`RenderReport.to_json_dict`): a file holding them is one."""


def _not_a_report(path: Path) -> str | None:
    """What the existing file at `path` is, where a render's report would replace something else
    (a typo's `--report notes.txt`, a queued job from a shared queue naming any file the user
    can write); None where nothing is there, an empty file, or a render report (replaced, as
    every render replaces its last report)."""
    from ffdesk import jsontext

    try:
        st = os.stat(path)
        if st.st_size == 0 or stat.S_ISDIR(st.st_mode):  # (a folder: said where outputs are checked)
            return None
        data = jsontext.read(path, max_bytes=64 * 2**20)
    except FileNotFoundError:
        return None
    except jsontext.NotRegularFile as exc:
        return str(exc)
    except jsontext.TooLarge:
        return "larger than any report"
    except (OSError, ValueError, UnicodeDecodeError):
        return "another kind of file"
    if isinstance(data, dict) and all(k in data for k in REPORT_KEYS):
        return None
    return "another JSON file" if isinstance(data, (dict, list)) else "another kind of file"


def check_paths(job: RenderJob) -> None:
    """A job's inputs are there and its outputs can be written (one line, `UserError`), before
    any work: a render's first check, and `ffdesk queue add`'s."""
    if job.fps is not None and not 0 < job.fps <= 1000:
        raise UserError(f"--fps must be more than 0 and at most 1000, not {job.fps:g}")
    if not job.target.exists() and not is_sequence_path(job.target):
        raise UserError(f"{job.target}: no such file")
    for src in job.sources:
        if not src.exists():
            raise UserError(f"{src}: no such file")
    for photo in (p for entry in job.face_map for p in entry.photos()):
        if not photo.exists():
            raise UserError(f"--map: {photo}: no such file")
    check_job_files(job)
    atomic.check_writable_folder(job.output.parent)
    if job.encoder != "png" and job.output.is_dir():
        example = job.output / f"out{job.output.suffix or '.mp4'}"
        raise UserError(f"{job.output} is a folder; the output is a file: give one in it, such as {example}")
    if job.report is not None and stream_fd(job.report) is None:  # checked now, not after the render
        if job.report.is_dir():
            raise UserError(
                f"--report {job.report} is a folder; give a file in it, such as {job.report / 'report.json'}"
            )
        try:
            atomic.check_writable_folder(job.report.parent)
        except MediaError as exc:
            raise UserError(f"--report: {exc}") from None
    if job.batch < 1:
        raise UserError("--batch must be at least 1")


VIDEO_SUFFIXES: dict[str, tuple[str, ...]] = {
    "h264": (".mp4", ".mov", ".mkv", ".m4v"),
    "h265": (".mp4", ".mov", ".mkv", ".m4v"),
    "prores": (".mov", ".mkv"),
}
"""Output file types each encoder can be written to (png writes a folder of frames)."""

FILE_SUFFIXES = frozenset(
    {s for kinds in VIDEO_SUFFIXES.values() for s in kinds}
    | IMAGE_SUFFIXES
    | SEQUENCE_SUFFIXES
    | {".avi", ".webm"}
)
"""Suffixes that name a clip or image file (the outputs above, the image and frame types, and
the other clip types the app opens): a folder of PNG frames is never given one of them."""


def output_suffix_problem(output: Path, encoder: str, *, is_image: bool) -> str | None:
    """What is wrong with writing `output`, by its name, with `encoder` from an image target or a
    clip (None: nothing): a render refuses it, and `ffdesk probe --output` as the render would."""
    suffix = output.suffix.lower()
    if is_image:
        if suffix not in IMAGE_SUFFIXES:
            return (
                f"{output.name}: an image target needs an image output ({', '.join(sorted(IMAGE_SUFFIXES))})"
            )
        return None
    if encoder == "png":
        if output.exists() and not output.is_dir():
            return f"{output.name}: --encoder png writes a folder of frames, and this is a file"
        if suffix in FILE_SUFFIXES:
            return (
                f"{output.name}: --encoder png writes a folder of frames and cannot be written to a "
                f"'{suffix}' file; give a folder name, such as {output.stem}"
            )
        return None
    allowed = VIDEO_SUFFIXES.get(encoder)
    if allowed is not None and suffix not in allowed:
        return (
            f"{output.name}: --encoder {encoder} cannot be written to a '{suffix or 'no suffix'}' "
            f"file; use {', '.join(allowed)}"
        )
    return None


def _check_output_kind(job: RenderJob, info: MediaInfo) -> None:
    problem = output_suffix_problem(job.output, job.encoder, is_image=info.is_image)
    if problem is not None:
        raise UserError(problem)
    if info.is_image:
        return
    if job.encoder == "png":
        _check_png_folders(job)
        return
    matte = matte_clip_path(job.output)
    if job.matte == "clip" and matte.is_dir() and not matte.is_symlink():
        raise UserError(
            f"{matte.name} is a folder; the matte clip goes to this path as a file: move it away or give "
            "another output"
        )


def hold_matte_clip(job: RenderJob, held: contextlib.ExitStack) -> None:
    """With `--matte clip`, hold the matte clip's own lock for the render (released by `held`),
    as a render or live recording of that path would: its partial file is then never taken for
    a killed writer's by another writer of that path, and a second writer is refused."""
    if job.matte != "clip":
        return
    from ffdesk.pipeline.resume import claim_output

    lock, _ = claim_output(matte_clip_path(job.output))
    held.callback(lock.release)


def _check_png_folders(job: RenderJob) -> None:
    """`UserError` (one line) unless the folders a PNG render writes (the output, and with
    `--matte clip` the matte clip's beside it) can take its frames: a name without a clip or
    image suffix, nothing there, or an empty folder, or one an earlier PNG render wrote (which
    it replaces). A folder of the user's files is refused here, before anything is rendered;
    the join checks again as it replaces it (`atomic.atomic_output`'s `own`)."""
    if job.output.exists() and not job.output.is_dir():
        raise UserError(f"{job.output.name}: --encoder png writes a folder of frames, and this is a file")
    folders = [(job.output, job.output.name, "the output folder")]
    if job.matte == "clip":
        matte = matte_clip_path(job.output)
        folders.append((matte, f"{matte.name} (the matte clip's folder)", "the matte clip's folder"))
    for folder, shown, what in folders:
        atomic.refuse_link(folder, what)
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{shown}: --encoder png writes a folder of frames, and this is a file")
        _refuse_folder_of_inputs(job, folder, shown)
        check_png_folder(folder, shown)


def _refuse_folder_of_inputs(job: RenderJob, folder: Path, shown: str) -> None:
    """`UserError` (one line) when `folder`, which a PNG render replaces, holds what the job reads
    (a frame sequence target's own frames are named as the render's are) or is its target."""
    if not folder.is_dir():
        return
    for read in job.files_read():
        if atomic.same_file(read, folder) or atomic.same_file(read.parent, folder):
            raise UserError(
                f"{shown}: this folder holds {read.name}, which the render reads; give the frames "
                "a folder of their own"
            )


def _stage_figures(stages: list[Stage]) -> StageFigures:
    """Finish every stage (in order); their figures, added up."""
    return merge_figures([stage.finish() for stage in stages])


def _timing(stats: StageStats) -> StageTiming:
    t = stats.as_dict()
    return StageTiming(stats.name, t["calls"], t["frames"], t["ms_total"], t["cpu_ms_total"])


def _flow_timings(decode: StageStats, flow: _Flow, encode: StageStats) -> tuple[StageTiming, ...]:
    """Decode, each stage in order, encode."""
    return (_timing(decode), *(_timing(r.stats) for r in flow.runners), _timing(encode))


def _render_image(
    job: RenderJob, stages: list[Stage], emit: ev.EventCallback, still: StillImage | None = None
) -> RenderReport:
    """The one picture through the stages, written atomically with the target's alpha channel
    where it has one. `still`: the target as already decoded (None: read here)."""
    if still is None:
        still = read_still(job.target, max_pixels=job.max_pixels)
    image = still.picture
    emit(ev.Started(1, 0, image.shape[1], image.shape[0], 0.0))
    for stage in stages:
        stage.start()
    stats = [StageStats(stage.name) for stage in stages]
    out = run_through(stages, [FramePacket(index=0, pts=None, image=image)], stats=stats)  # drained
    if len(out) != 1:
        raise RuntimeError(f"the stages returned {len(out)} frames for one image")
    timings = [_timing(s) for s in stats]
    write_image_with_matte(job, out[0], still.alpha, metadata=still.metadata)  # atomic by itself
    emit(ev.Progress(1, 1, 0.0, 0.0))
    return RenderReport(
        frames_in=1,
        frames_out=1,
        frames_processed=1,
        stages=tuple(timings),
        output=job.output,
        matte=matte_figures(job),
    )


def _render_range(job: RenderJob, video: VideoInfo, name: str) -> _Range:
    duration = video.duration_s
    start = job.start if job.start and job.start > 0 else None
    end = job.end if job.end is not None else None
    if start is not None and duration > 0 and start >= duration:
        raise UserError(f"--start {start:g}s is beyond the end of {name} ({duration:.2f}s)")
    if end is not None and end <= (start or 0.0):
        raise UserError(f"--end {end:g}s is not after --start {start or 0:g}s")
    return _Range(start, end, span_frames(start, end, video))


def _expected_output_bytes(job: RenderJob, info: MediaInfo, video: VideoInfo, span: _Range) -> int:
    """A floor for the room a render needs (its finished segments and the joined file)."""
    pixels = video.display_width * video.display_height * span.total_frames
    if job.encoder == "png":
        return pixels  # PNG of natural video rarely compresses below 1 byte a pixel
    if job.encoder == "prores":
        return pixels // 2
    fraction = span.total_frames / max(video.frame_count, 1)
    size = job.target.stat().st_size if job.target.is_file() else pixels // 4
    return int(2 * size * min(1.0, fraction))


_FEW_INODES = 16
"""Fewer free inodes than this is what filled the disk, whatever the free bytes say."""


def _room_to_finish(manifest: Manifest, span: _Range, expected: int, folder: Path) -> str:
    """How much free space the rest of a render needs: the segments still to encode, at the
    rate the finished ones were written (else at the estimate), plus the joined output."""
    done = manifest.frames_done
    written = sum(s.size or 0 for s in manifest.segments)
    per_frame = written / done if done and written else expected / (2 * max(1, span.total_frames))
    to_encode = per_frame * max(0, span.total_frames - done)
    need = int(to_encode + written + to_encode)  # the rest of the segments, then the joined file
    try:
        free_bytes = shutil.disk_usage(folder).free
        inodes = os.statvfs(folder).f_favail if hasattr(os, "statvfs") else None
    except OSError:
        return f"to finish, the render needs about {format_bytes(need)} free in {folder}"
    if inodes is not None and inodes < _FEW_INODES:
        # the bytes are there; a render creates a file per segment (and a manifest beside them)
        return f"the file system of {folder} has {inodes} free inodes left (files it can still create)"
    if free_bytes >= need:
        # the estimate is below what is free now: the space went to something else meanwhile (another
        # writer, a quota), so it is no guide; say what is known
        return (
            f"{folder} ran out of space ({format_bytes(free_bytes)} free now); the rest of the render "
            f"takes at least about {format_bytes(need)}"
        )
    free = f" ({format_bytes(free_bytes)} free now)"
    return f"to finish, the render needs about {format_bytes(need)} free in {folder}{free}"


def _working_size(job: RenderJob, video: VideoInfo) -> tuple[int, int] | None:
    """(width, height) to scale frames to, or None to keep the source size."""
    source = (video.display_width, video.display_height)
    size = working_size(*source, job.mode)
    return None if size == source else size


def _output_size(size: tuple[int, int], stages: Sequence[Stage]) -> tuple[int, int]:
    """The (width, height) the encoder writes: the working `size` times what the stages scale
    the frames by (a frame enhancer's x2/x4/x8)."""
    scale = output_scale(stages)
    return size[0] * scale, size[1] * scale


def _render_video(
    job: RenderJob,
    info: MediaInfo,
    span: _Range,
    manifest: Manifest,
    stages: list[Stage],
    emit: ev.EventCallback,
    halt: Halt,
    driver: DriverFlags,
    nvdec: _Nvdec,
) -> RenderReport:
    video = info.video
    assert video is not None
    resumed_segments = len(manifest.segments)
    resumed_frames = manifest.frames_done
    size = _working_size(job, video)
    out_w, out_h = _output_size(size or (video.display_width, video.display_height), stages)
    emit(ev.Started(span.total_frames, resumed_frames, out_w, out_h, video.fps))

    decode_stats = StageStats("decode")
    encode_stats = StageStats("encode")
    video, deinterlace = _as_encoded(job, video, size)
    flow = _Flow(job, video, span, manifest, stages, halt, size, decode_stats, deinterlace, nvdec)
    encoder_name = _run_flow(
        job, flow, video, manifest, (out_w, out_h), span, emit, halt, encode_stats, driver
    )

    frames_out = manifest.frames_done
    _check_frames_out(job, frames_out, flow.read_stats)
    for warning in _repair_warnings(job.target.name, flow.read_stats):
        emit(ev.Warning(warning))
    joined = _join_output(job, info, span, manifest, flow.origin_s, emit)
    timings = _flow_timings(decode_stats, flow, encode_stats)
    for t in timings:
        emit(ev.StageTiming(t.name, t.calls, t.frames, t.ms_total))
    return RenderReport(
        frames_in=flow.frames_in + resumed_frames,
        frames_out=frames_out,
        frames_processed=frames_out - resumed_frames,
        stages=timings,
        output=job.output,
        resumed_segments=resumed_segments,
        video=VideoFigures(
            encoder=encoder_name,
            mode=job.mode,
            resumed_frames=resumed_frames,
            timestamps_repaired=flow.read_stats.timestamps_repaired,
            frames_concealed=flow.read_stats.frames_concealed,
            audio_packets_skipped=joined.audio_packets_skipped,
            audio=tuple(f"{c.action} {c.codec}" for c in joined.audio),
            decoder=flow.decoder,
            timecode=joined.timecode,
        ),
        matte=matte_figures(job),
    )


LOSSLESS_H264 = (
    "--quality 100 is lossless H.264 with x264 (High 4:4:4 Predictive), which QuickTime, Premiere, "
    "browsers and hardware decoders do not play: 99 keeps the usual profile, --encoder prores makes a master"
)


def _output_warnings(job: RenderJob, video: VideoInfo) -> list[str]:
    """What a clip's output will lack that players and editing apps expect, one line each."""
    out = [LOSSLESS_H264] if job.encoder == "h264" and job.quality == 100 else []
    sar = video.sample_aspect_ratio
    if job.encoder == "prores" and job.output.suffix.lower() == ".mkv" and sar:
        # Matroska takes the pixel shape from the stream, which the join cannot set for ProRes
        out.append(
            f"{job.output.name}: ProRes in Matroska loses the pixel shape (SAR {sar.numerator}:"
            f"{sar.denominator}): players show it square; a .mov keeps it"
        )
    return out


def _check_frames_out(job: RenderJob, frames_out: int, stats: ReadStats) -> None:
    """A one-line error when the render produced no frame at all."""
    if frames_out:
        return
    reason = stats.ended_early or stats.first_error
    if reason:
        raise UserError(f"{job.target.name}: no decodable video frame ({reason})")
    raise UserError(f"{job.target.name}: no frames in the requested range")


def _join_output(
    job: RenderJob,
    info: MediaInfo,
    span: _Range,
    manifest: Manifest,
    origin_s: float | None,
    emit: ev.EventCallback,
) -> JoinResult:
    """Join the manifest's segments (and the source's audio) into the output, atomically; the
    work folder goes once the output is in place. A matte clip is joined first, and put beside
    the output once the output is in place (where its join fails, neither replaces its file).
    A PNG folder replaces only a folder that holds nothing but frames (`png_folder_entry`): one
    the user put a file in during the render is left as it is, the new frames go beside it, a
    MediaError says where, and the work folder stays for a run that joins again."""
    segment_paths = [manifest.folder / s.file for s in manifest.segments]
    with contextlib.ExitStack() as matte:
        if job.matte == "clip":
            matte.enter_context(joined_matte_clip(job, info, span.end_s, manifest, origin_s))
        with atomic.atomic_output(job.output, own=png_folder_entry) as tmp:
            joined = join_segments(
                segment_paths,
                out_path=tmp,
                source=job.target,
                source_info=info,
                start_s=span.start_s,
                end_s=span.end_s,
                encoder=job.encoder,
                origin_s=origin_s,
            )
    manifest.discard()
    for note in joined.notes:
        emit(ev.Warning(note))
    if joined.audio_packets_skipped:
        emit(ev.Warning(f"{job.target.name}: {joined.audio_packets_skipped} damaged audio packets skipped"))
    return joined


def _run_flow(
    job: RenderJob,
    flow: _Flow,
    video: VideoInfo,
    manifest: Manifest,
    size: tuple[int, int],
    span: _Range,
    emit: ev.EventCallback,
    halt: Halt,
    encode_stats: StageStats,
    driver: DriverFlags,
) -> str:
    """Decode and process through `flow`'s threads while this thread encodes the segments into
    `manifest`; every thread is joined before it returns. Returns the encoder used; raises the
    first error a thread hit, or `Cancelled`. `driver`: the switches the NVENC check honours."""
    settings = EncodeSettings(
        encoder=job.encoder,
        quality=job.quality,
        mode=job.mode,
        driver=driver,
        preset=job.video_preset,
        alpha=job.matte == "alpha" or flow.keeps_alpha,
    )
    threads = flow.start()
    encoder_name = ""
    try:
        encoder_name = _encode_segments(
            job, video, manifest, settings, flow.output, size, span, emit, halt, encode_stats, flow.alphas
        )
    except (Stopped, KeyboardInterrupt, Terminated) as exc:
        halt.stop()
        if isinstance(exc, KeyboardInterrupt | Terminated):  # a second Ctrl-C or SIGTERM
            raise Cancelled from None
    finally:
        halt.stop()  # after END every flow thread is done; otherwise this stops them
        for t in threads:
            t.join()
        flow.priority.stop()
    if halt.error is not None:
        raise halt.error
    if halt.cancelled:
        raise Cancelled
    return encoder_name


def _repair_warnings(name: str, stats: ReadStats) -> list[str]:
    """One line for each kind of damage the reader mended on its way through the clip."""
    lines = []
    if stats.timestamps_repaired:
        lines.append(
            f"{name}: {stats.timestamps_repaired} frames had missing or out-of-order timestamps "
            "(repaired; the frames and their order are kept)"
        )
    if stats.frames_concealed:
        detail = f" (first: {stats.first_error})" if stats.first_error else ""
        lines.append(f"{name}: {stats.frames_concealed} damaged frames concealed{detail}")
    if stats.ended_early:
        lines.append(f"{name}: the file ends early ({stats.ended_early}): rendered the frames that are there")
    return lines


@dataclass(frozen=True)
class _Nvdec:
    """Whether a render's decoder asks for NVDEC, and why not where it does not."""

    wanted: bool
    why_not: str | None = None


def _nvdec_for(job: RenderJob, env: RuntimeEnv, video: VideoInfo) -> _Nvdec:
    """NVDEC where the render's models run on CUDA (a render without models: where they would)
    and the driver switches allow it; the frames are the software decoder's either way."""
    if env.driver.no_nvdec:
        return _Nvdec(False, "switched off (FFDESK_NO_NVDEC)")
    if keeps_target_alpha(job, video):
        return _Nvdec(False, "the output keeps the target's alpha channel, which NVDEC does not decode")
    if job.provider == "cpu":
        return _Nvdec(False, "the render runs on the CPU")
    if job.memory_budget is not None:
        # FFmpeg makes a CUDA context of its own for NVDEC (it will not share ONNX Runtime's):
        # a few hundred MiB on the card that the budget's measurements would not see
        return _Nvdec(False, "a memory budget is set (NVDEC's own CUDA context would be outside it)")
    if not nvdec_possible(env.driver) or job_device(job.provider, env) != "cuda":
        return _Nvdec(False, "no CUDA device")
    return _Nvdec(True)


class _Flow:
    """Decode thread and stage runners feeding `output` with packets in index order."""

    def __init__(
        self,
        job: RenderJob,
        video: VideoInfo,
        span: _Range,
        manifest: Manifest,
        stages: list[Stage],
        halt: Halt,
        size: tuple[int, int] | None,
        decode_stats: StageStats,
        deinterlace: bool,
        nvdec: _Nvdec,
    ) -> None:
        self.job = job
        self.deinterlace = deinterlace
        self.nvdec = nvdec
        self.span = span
        self.halt = halt
        self.size = size
        self.decode_stats = decode_stats
        # With nothing to do to the pixels, frames go from decoder to encoder untouched (no RGB trip;
        # a target's own alpha goes with them). A matte as alpha is added to the RGB picture, so it
        # takes neither way; the target's alpha is too when the frames are converted anyway.
        whole = job.encoder != "png" and job.matte != "alpha"
        self.raw = not stages and size is None and whole
        self.keeps_alpha = keeps_target_alpha(job, video)
        """The output's alpha is the target's (with a matte as alpha: times the matte)."""
        # Stages that change only regions of the picture: keep each decoded frame so the encoder
        # writes just those regions back into it (ffdesk.media.patch).
        self.patch = edits_regions_only(stages) and size is None and whole and not self.keeps_alpha
        self.alphas = TargetAlphas() if self.keeps_alpha and not self.raw else None
        """Each frame's alpha on its way past the stages, for an output that keeps the target's."""
        self.replay_until = manifest.frames_done
        """Frames before this index are in finished segments: played through the stages that carry
        state from frame to frame (`_replayed`), not encoded again."""
        if any(_carries_state(stage) for stage in stages):
            self.first_index, self.from_pts = manifest.replay_start(job.segment_frames or SEGMENT_FRAMES)
        else:
            self.first_index, self.from_pts = manifest.frames_done, manifest.next_pts
        self.frames_in = 0
        self.read_stats = ReadStats()
        self.origin_s: float | None = None
        """What the reader mended (set once decoding starts; complete after END)."""
        depth = max(_QUEUE_FRAMES, 2 * job.batch)
        bound = frames_in_flight(stages)
        self.gate = FrameGate(halt, bound) if bound is not None else None
        """Where a stage pays for the frames in flight from a budget: the most the flow holds."""
        self.source = Pipe(halt, depth)
        pipe = self.source
        # the stages' threads give way to the encoder's while the machine is otherwise quiet
        self.priority = HelperPriority()
        self.runners: list[StageRunner] = []
        replayed = _replayed(stages, self.first_index, self.replay_until)
        for number, stage in enumerate(replayed, 1):
            nxt = Pipe(halt, depth, self.gate if number == len(replayed) else None)
            self.runners.append(
                StageRunner(stage, pipe, nxt, halt, job.batch, self.first_index, priority=self.priority)
            )
            pipe = nxt
        self.output = pipe

    def start(self) -> list[threading.Thread]:
        if self.runners:
            self.priority.start()
        threads = [run_thread("ffdesk-decode", self.halt, self._decode)]
        for runner in self.runners:
            threads += runner.start()
        return threads

    def _frames(self) -> Iterator[DecodedFrame]:
        with VideoReader(
            self.job.target,
            start_s=self.span.start_s,
            end_s=self.span.end_s,
            from_pts=self.from_pts,
            raw=self.raw,
            keep_frames=self.patch,
            keep_alpha=self.alphas is not None,
            convert_threads=1,
            decode_threads=decode_threads(),
            sequence_fps=self.job.fps,
            deinterlace=self.deinterlace,
            hwaccel="cuda" if self.nvdec.wanted else None,
            max_pixels=self.job.max_pixels,
        ) as reader:
            self.read_stats = reader.stats
            try:
                yield from reader
            finally:
                self.origin_s = reader.origin_s  # the first frame's time: where --end counts from

    def _decode(self) -> None:
        index = self.first_index
        frames = self._frames()
        while True:
            if self.gate is not None:
                self.gate.enter()  # before decoding: a frame waiting to enter is one more held
            clock = Clock()
            try:
                frame = next(frames)
            except StopIteration:
                if self.gate is not None:
                    self.gate.leave()
                break
            image = _resize(frame.image, self.size)
            if self.alphas is not None and index >= self.replay_until:  # with the picture, before it
                self.alphas.put(index, None if frame.alpha is None else _resize(frame.alpha, self.size))
            self.decode_stats.add_since(1, clock)
            packet = FramePacket(index=index, pts=frame.pts, image=image)
            if self.raw:
                packet.raw = frame.frame
            else:
                packet.decoded = frame.frame
            self.source.put(packet)
            if packet.index >= self.replay_until:
                self.frames_in += 1
            index += 1
        self.source.put(END)

    @property
    def decoder(self) -> str:
        """The decoder that ran, as the report names it (complete after END)."""
        stats = self.read_stats
        if self.nvdec.wanted or not stats.codec:
            return stats.decoder
        return decoder_label(stats.codec, why_not=self.nvdec.why_not)


def budget_figures(stages: Sequence[Stage]) -> BudgetFigures | None:
    """What a stage outside any model manager counted against the render's CPU budget
    (`ReportsBudget`: the embedded swap), for the report."""
    counted = (s.budget_figures() for s in stages if isinstance(s, ReportsBudget))
    return next((f for f in counted if f is not None), None)


def frames_in_flight(stages: Sequence[Stage]) -> int | None:
    """The most frames a flow through `stages` may hold at once (`BoundsFrames`), or None: no
    bound. Never fewer than the stages that hold frames back keep between calls, plus one."""
    bounds = [s.flow_frames for s in stages if isinstance(s, BoundsFrames) and s.flow_frames is not None]
    if not bounds:
        return None
    held = sum(s.lookahead for s in stages if isinstance(s, HoldsFrames))
    return max(min(bounds), held + 1)


def _carries_state(stage: Stage) -> bool:
    """Whether `stage`'s output for a frame depends on the frames before it (the face tracking,
    which holds frames back to decide them; a stage holding frames is taken to do so)."""
    return isinstance(stage, HoldsFrames)


def _replayed(stages: list[Stage], first_index: int, replay_until: int) -> list[Stage]:
    """The stages as a flow starting at `first_index` runs them when the frames before
    `replay_until` are played only to rebuild state: the stages up to the last that carries
    state see them, the stages after it pass them on untouched."""
    if replay_until <= first_index:
        return stages
    last = max((i for i, stage in enumerate(stages) if _carries_state(stage)), default=-1)
    return [*stages[: last + 1], *(_PassesReplay(stage, replay_until) for stage in stages[last + 1 :])]


class _PassesReplay:
    """`stage`, handing the frames before `until` on untouched (they are already encoded)."""

    def __init__(self, stage: Stage, until: int) -> None:
        self.stage = stage
        self.until = until
        self.name = stage.name
        self.edits_regions = stage.edits_regions
        self.max_batch = stage.max_batch
        self.workers = stage.workers

    def start(self) -> None:
        self.stage.start()

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        replayed = [p for p in batch if p.index < self.until]
        rest = [p for p in batch if p.index >= self.until]
        return [*replayed, *(self.stage.process(rest) if rest else [])]

    def finish(self) -> StageFigures | None:
        return None  # the render finishes the stage itself, once


def _as_encoded(job: RenderJob, video: VideoInfo, size: tuple[int, int] | None) -> tuple[VideoInfo, bool]:
    """The video as the encoder is handed it (progressive when the render deinterlaces), and
    whether it deinterlaces."""
    if _deinterlaces(job, video, size):
        return replace(video, field_order="progressive"), True
    return video, False


def _deinterlaces(job: RenderJob, video: VideoInfo, size: tuple[int, int] | None) -> bool:
    """Whether the render deinterlaces: when asked, and in preview mode when an interlaced source
    is scaled (scaling a frame of two fields blends them into combs)."""
    interlaced = video.field_order in ("tt", "bb", "tb", "bt")
    return job.deinterlace or (interlaced and size is not None)


def decode_threads(cores: int | None = None) -> int:
    """Decoder threads for a render. The stages and the encoder keep every core busy, where each
    extra decoder thread only adds work: on 2 cores, frame-threaded H.264 decoding took 3.0 CPU ms a
    720p frame against 2.0 ms on one thread. One thread decodes 720p at about 400 frames/s, so
    only many-core machines (fast GPU renders of 4K) get more: a quarter of the cores."""
    n = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, n // 4)


def _resize(image: Frame, size: tuple[int, int] | None) -> Frame:
    if size is None or (image.shape[1], image.shape[0]) == size:
        return image
    return np.ascontiguousarray(cv2.resize(image, size, interpolation=cv2.INTER_AREA))


def _encode_segments(
    job: RenderJob,
    video: VideoInfo,
    manifest: Manifest,
    settings: EncodeSettings,
    inbox: Pipe,
    size: tuple[int, int],
    span: _Range,
    emit: ev.EventCallback,
    halt: Halt,
    stats: StageStats,
    alphas: TargetAlphas | None = None,
) -> str:
    """Encode packets into segment files, recording each finished one. Returns the encoder used.
    `alphas`: the target's alpha of each frame, for an output that keeps it (`_Flow.alphas`).

    A segment ends after each frame whose index + 1 is a multiple of the segment length, so the
    segments lie on one grid however often the render was resumed. When the user cancels, the
    segment being written is closed at the frame reached and recorded (`_close_on_cancel`), so a
    resume continues from there; after an error, or when the process dies, it is dropped."""
    writer = _SegmentWriter(job, video, manifest, settings, size, emit, alphas)
    progress = _ProgressClock(span.total_frames, manifest.frames_done, emit)
    per_segment = job.segment_frames or SEGMENT_FRAMES
    flow_first_encoded = manifest.frames_done
    try:
        while True:
            item = inbox.get()
            if item is END:
                break
            packet: FramePacket = item
            if packet.index < flow_first_encoded:
                continue  # played to rebuild the stages' state; already in a finished segment
            clock = Clock()
            writer.write(packet)
            stats.add_since(1, clock)
            progress.frame(packet, held=writer.frames_held)
            if (packet.index + 1) % per_segment == 0:
                clock = Clock()
                writer.close()
                stats.add_since(0, clock)
            if halt.is_set():
                raise Stopped
        writer.close()
    except Stopped:
        _close_on_cancel(writer, manifest, halt)
        raise
    finally:
        writer.abort()
    return writer.encoder_name


def _close_on_cancel(writer: _SegmentWriter, manifest: Manifest, halt: Halt) -> None:
    """When the user cancelled (no thread failed), close the segment being written at the last
    frame handed to the encoder and record it, so a resume continues after that frame. The
    encoder writes out every frame it was given as it closes. Closing is best effort: where it
    fails, the segment is dropped as before and the render is still just cancelled."""
    if not (halt.cancelled and halt.error is None and manifest.keeps_cancelled_segment):
        return
    with contextlib.suppress(Exception):
        writer.close()


class _SegmentWriter:
    """Writes packets into the next segment file of `manifest`, opening one when needed; `close()`
    records the finished segment, `abort()` drops an unfinished one."""

    def __init__(
        self,
        job: RenderJob,
        video: VideoInfo,
        manifest: Manifest,
        settings: EncodeSettings,
        size: tuple[int, int],
        emit: ev.EventCallback,
        alphas: TargetAlphas | None = None,
    ) -> None:
        self.job = job
        self.video = video
        self.manifest = manifest
        self.settings = settings
        self.size = size
        self.emit = emit
        self.alphas = alphas
        """The target's alpha of each frame, for an output that keeps it (None: it does not)."""
        self.suffix = container_suffix(job.encoder)
        self.encoder: SegmentEncoder | None = None
        self.matte_encoder: SegmentEncoder | None = None
        """The open segment's matte clip, for a render that writes one (`RenderJob.matte`)."""
        self.encoder_name = ""
        self.file = ""
        self.first_pts = 0
        self.frames = 0
        self.last_pts = -1
        self._noted: set[str] = set()  # what the encoder cannot keep of the source, said once per render
        self._hw_note = ""  # why the hardware encoder was not used, for the report

    def _open(self, first_pts: int) -> SegmentEncoder:
        self.file = self.manifest.next_segment_file(self.suffix)
        video = self.video
        encoder = SegmentEncoder(
            self.manifest.folder / self.file,
            self.settings,
            width=self.size[0],
            height=self.size[1],
            time_base=video.time_base,
            fps=video.fps,
            rotation=video.rotation,
            color=video,
        )
        if encoder.hw_fallback_reason is not None:
            # A card without NVENC (H100, H200, A100): said in the report, not tried again for
            # the render's other segments (each try opens and drops a CUDA context).
            self._hw_note = f" ({encoder.hw_fallback_reason})"
            self.settings = replace(self.settings, hw=False)
        self.encoder_name = encoder.encoder_name + self._hw_note
        if self.job.matte == "clip":
            try:
                matte_path = self.manifest.folder / matte_file(self.file)
                self.matte_encoder = matte_segment_encoder(matte_path, self.settings, self.size, video)
            except BaseException:
                encoder.abort()
                raise
        for note in encoder.notes:
            if note not in self._noted:
                self._noted.add(note)
                self.emit(ev.Warning(f"{self.job.output.name}: {note}"))
        self.first_pts, self.frames = first_pts, 0
        return encoder

    def write(self, packet: FramePacket) -> None:
        pts = packet.pts if packet.pts is not None else self.last_pts + 1
        if self.encoder is None:
            self.encoder = self._open(pts)
        matte = packet_matte(packet, self.size) if self.job.matte != "none" else None
        if self.matte_encoder is not None and matte is not None:
            self.matte_encoder.write(matte, pts)
        if packet.raw is not None:  # (with alpha: the decoded frame's own)
            self.encoder.write_frame(packet.raw, pts)
        elif self.settings.alpha:
            own = self.alphas.take(packet.index, self.size) if self.alphas is not None else None
            self.encoder.write(packet.image, pts, frame_alpha(self.job, matte, own))
        elif packet.decoded is not None:
            self.encoder.write_patched(packet.decoded, packet.image, packet.regions, pts)
        else:
            self.encoder.write(packet.image, pts)
        self.frames += 1
        self.last_pts = pts

    @property
    def frames_held(self) -> int:
        """Frames written that the open segment's encoder still holds back (its lookahead)."""
        return self.encoder.frames_held if self.encoder is not None else 0

    def close(self) -> None:
        if self.encoder is None:
            return
        self.encoder.close()
        self.encoder = None
        segment = Segment(len(self.manifest.segments), self.file, self.frames, self.first_pts, self.last_pts)
        if self.matte_encoder is not None:  # the segment is finished once its matte is too
            self.matte_encoder.close()
            self.matte_encoder = None
            segment = replace(segment, matte=matte_file(self.file))
        self.manifest.add(segment)

    def abort(self) -> None:
        if self.encoder is not None:
            self.encoder.abort()
            self.encoder = None
        if self.matte_encoder is not None:
            self.matte_encoder.abort()
            self.matte_encoder = None


class _ProgressClock:
    """Throttled progress and preview-frame events with frames/s and ETA (`EtaEstimator`: the rate
    counts from the first frame out, smoothed; the time left counts down steadily)."""

    def __init__(self, total: int, done: int, emit: Callable[[ev.Event], None]) -> None:
        self.total = total
        self.done = done
        self.first_done = done
        """Frames finished before this run (a resume's): the estimate counts what comes after."""
        self.emit = emit
        self.eta = EtaEstimator(total, clock=time.monotonic)
        self.last_progress = -math.inf
        self.last_preview = 0.0

    def frame(self, packet: FramePacket, held: int = 0) -> None:
        """One more frame written; `held`: how many written frames the encoder still holds back.
        The time left is estimated from frames the encoder has put out: frames it merely took in
        come fast while its lookahead fills and are still to be encoded at the end."""
        self.done += 1
        now = time.monotonic()
        if now - self.last_progress >= _PROGRESS_EVERY_S or self.done >= self.total:
            self.last_progress = now
            out = self.done - held
            # the clock starts at the first frame the encoder puts out (not the first it takes in)
            estimate = self.eta.update(out) if out > self.first_done else Estimate(0.0, None)
            self.emit(ev.Progress(self.done, max(self.total, self.done), estimate.fps, estimate.eta_s))
        if now - self.last_preview >= _PREVIEW_EVERY_S:
            self.last_preview = now
            raw = packet.raw
            image = upright(rgb_array(raw), rotation_of(raw)) if raw is not None else packet.image
            self.emit(ev.PreviewFrame(packet.index, image))


# ---- one segment at a time (a render farm renders segments on many workers) ----------------


@dataclass(frozen=True)
class PlannedSegment:
    """One segment of a render, cut where a local render cuts it: frames `first_index` to
    `first_index + frames - 1` of the range, source pts `first_pts` to `last_pts`. `end_s`:
    where the next segment starts (seconds since the clip's first frame; None for the last,
    which ends with the range)."""

    number: int
    first_index: int
    frames: int
    first_pts: int
    last_pts: int
    end_s: float | None


@dataclass(frozen=True)
class SegmentPlan:
    """A clip render split into the segments a local render of the same job would write."""

    job: RenderJob
    info: MediaInfo
    start_s: float | None
    end_s: float | None
    total_frames: int
    origin_s: float | None
    suffix: str
    segments: tuple[PlannedSegment, ...]
    warnings: tuple[str, ...]
    expected_bytes: int

    @property
    def frames(self) -> int:
        return sum(s.frames for s in self.segments)


def plan_segments(job: RenderJob, cancel: threading.Event | None = None) -> SegmentPlan:
    """Check `job` as `run_render` does, then find the segments a local render would cut, by
    reading the clip's frames once without converting them. `UserError` for an image target
    (one frame, nothing to split) and for a range without frames."""
    job = job.resolved()
    check_paths(job)
    info = probe(job.target, fps=job.fps, max_pixels=job.max_pixels)
    if info.video is None:
        raise UserError(f"{job.target.name}: no video stream")
    _check_output_kind(job, info)
    if info.is_image:
        raise UserError(f"{job.target.name} is an image: render it on this machine (without --farm)")
    video = info.video
    span = _render_range(job, video, job.target.name)
    expected = _expected_output_bytes(job, info, video, span) + _expected_matte_bytes(job, video, span)
    atomic.check_disk_space(job.output.parent, expected)
    deinterlace = _deinterlaces(job, video, _working_size(job, video))
    per_segment = job.segment_frames or SEGMENT_FRAMES
    stamps: list[int] = []
    times: list[float] = []
    with VideoReader(
        job.target,
        start_s=span.start_s,
        end_s=span.end_s,
        raw=True,
        decode_threads=decode_threads(),
        sequence_fps=job.fps,
        deinterlace=deinterlace,
        max_pixels=job.max_pixels,
    ) as reader:
        for frame in reader:
            if cancel is not None and cancel.is_set():
                raise Cancelled
            pts = frame.pts if frame.pts is not None else (stamps[-1] + 1 if stamps else 0)
            stamps.append(pts)
            times.append(reader.time_of(pts))
        stats = reader.stats
        origin_s = reader.origin_s
    if not stamps:
        reason = stats.ended_early or stats.first_error
        detail = f"no decodable video frame ({reason})" if reason else "no frames in the requested range"
        raise UserError(f"{job.target.name}: {detail}")
    segments = []
    for number, first in enumerate(range(0, len(stamps), per_segment)):
        last = min(first + per_segment, len(stamps)) - 1
        end_s = times[last + 1] if last + 1 < len(stamps) else span.end_s
        segments.append(PlannedSegment(number, first, last - first + 1, stamps[first], stamps[last], end_s))
    return SegmentPlan(
        job=job,
        info=info,
        start_s=span.start_s,
        end_s=span.end_s,
        total_frames=len(stamps),
        origin_s=origin_s,
        suffix=container_suffix(job.encoder),
        segments=tuple(segments),
        warnings=(*target_warnings(job, info), *_repair_warnings(job.target.name, stats)),
        expected_bytes=expected,
    )


_MATTE_BYTES_PER_PIXEL = {"prores": 1 / 64, "png": 1 / 256}
"""A floor for a matte clip's bytes per pixel per frame, by encoder (H.264/H.265: `_H26X_MATTE`):
a grey clip that is black but for the faces compresses far better than the picture (a face
swap's matte measured about 1/37 in ProRes, 1/150 in PNG, 1/1300 in H.264)."""
_H26X_MATTE = 1 / 2048


def _expected_matte_bytes(job: RenderJob, video: VideoInfo, span: _Range) -> int:
    """A floor for the room a render's matte clip needs (its segments and the joined clip) on top
    of the output's, local or on a farm; 0 for a render that writes none (`--matte clip` only)."""
    if job.matte != "clip":
        return 0
    pixels = video.display_width * video.display_height * span.total_frames
    return int(2 * pixels * _MATTE_BYTES_PER_PIXEL.get(job.encoder, _H26X_MATTE))


class _OneSegment(Manifest):
    """What `_Flow` and `_encode_segments` read of a manifest, for one segment written to `path`:
    the frames before it count as done, nothing is saved to disk, and a cancelled segment is
    dropped (the head renders the whole planned segment again)."""

    keeps_cancelled_segment = False

    def __init__(self, path: Path, segment: PlannedSegment) -> None:
        super().__init__(path.parent, "", [])
        self.path = path
        self.planned = segment

    @property
    def frames_done(self) -> int:
        return self.planned.first_index + sum(s.frames for s in self.segments)

    @property
    def next_pts(self) -> int | None:
        if self.segments:
            return self.segments[-1].last_pts + 1
        return self.planned.first_pts if self.planned.first_index else None

    def next_segment_file(self, suffix: str) -> str:
        return self.path.name if not self.segments else f"{self.path.name}.{len(self.segments)}{suffix}"

    def add(self, segment: Segment) -> None:
        self.segments.append(segment)

    def save(self) -> None:
        return None


def render_segment(
    job: RenderJob,
    segment: PlannedSegment,
    out_path: Path,
    on_event: ev.EventCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    env: RuntimeEnv,
    share: Share | None = None,
    stages_for: Callable[[RenderJob, MediaInfo], list[Stage]] | None = None,
) -> RenderReport:
    """Render the frames of one planned segment of `job` into `out_path` (a file; a folder for
    png), exactly as a local render writes that segment: the same frames, indices, pts and
    encoder settings. `env`: the runtime environment; `share`: the residency pool the stages'
    models join (and who holds them there). `stages_for`: builds the stages instead of the job's
    own (stand-ins for benchmarks). A job with `--matte clip` writes the segment's matte beside
    `out_path` too, as a local render writes it (`segment_matte_path`). Returns the segment's
    report (its output is `out_path`; the farm adds the segments' reports up with
    `RenderReport.plus`); `UserError` when the clip does not give the planned frames."""
    emit = on_event or _nothing
    job = job.resolved()
    info = probe(job.target, fps=job.fps, max_pixels=job.max_pixels)
    if info.video is None:
        raise UserError(f"{job.target.name}: no video stream")
    span = _render_range(job, info.video, job.target.name)
    span = _Range(span.start_s, segment.end_s, span.total_frames)
    size = _working_size(job, info.video)
    video, deinterlace = _as_encoded(job, info.video, size)
    sink = _OneSegment(out_path, segment)  # on the job's segment grid: it ends at the range's end
    halt = Halt(cancel)
    t0 = time.perf_counter()
    if stages_for is not None:
        stages = stages_for(job, info)
    else:
        stages = build_stages(job, info, env=env, share=share)
    out_w, out_h = _output_size(size or (info.video.display_width, info.video.display_height), stages)
    decode_stats = StageStats("decode")
    encode_stats = StageStats("encode")
    nvdec = _nvdec_for(job, env, info.video)
    try:
        _bind(stages, emit, info, job)
        flow = _Flow(job, video, span, sink, stages, halt, size, decode_stats, deinterlace, nvdec)
        encoder_name = _run_flow(
            job, flow, video, sink, (out_w, out_h), span, emit, halt, encode_stats, env.driver
        )
        _check_as_planned(job, segment, sink)
    except BaseException:
        with contextlib.suppress(Exception):
            _stage_figures(stages)
        raise
    report = RenderReport(
        frames_in=segment.frames,
        frames_out=segment.frames,
        frames_processed=segment.frames,
        stages=_flow_timings(decode_stats, flow, encode_stats),
        output=out_path,
        video=VideoFigures(
            encoder=encoder_name,
            mode=job.mode,
            timestamps_repaired=flow.read_stats.timestamps_repaired,
            frames_concealed=flow.read_stats.frames_concealed,
            decoder=flow.decoder,
        ),
    ).with_figures(_stage_figures(stages))
    report = replace(
        report,
        upscale=upscale_figures(stages),
        processors=processor_figures(stages),
        budget=budget_figures(stages),
    )
    return report.timed(time.perf_counter() - t0, _peak_rss_bytes())


def segment_matte_path(out_path: Path) -> Path:
    """Where `render_segment` writes the matte of the segment it writes at `out_path` (for a job
    with `--matte clip`): beside it, named as a local render names a segment's matte."""
    return out_path.with_name(matte_file(out_path.name))


def _check_as_planned(job: RenderJob, segment: PlannedSegment, sink: _OneSegment) -> None:
    """A one-line error when the clip did not give the planned segment's frames."""
    written = [(s.frames, s.first_pts, s.last_pts) for s in sink.segments]
    if written != [(segment.frames, segment.first_pts, segment.last_pts)]:
        raise UserError(
            f"{job.target.name}: segment {segment.number} decoded as {written}, not as planned "
            f"({segment.frames} frames, pts {segment.first_pts}-{segment.last_pts})"
        )


@dataclass(frozen=True)
class JoinedOutput:
    """What `join_planned` wrote: the output, its frames and what the join did to the audio."""

    output: Path
    frames_out: int
    audio_packets_skipped: int
    audio: tuple[str, ...]
    timecode: str | None = None
    """The output's start timecode (`JoinResult.timecode`)."""


def join_planned(plan: SegmentPlan, manifest: Manifest, emit: ev.EventCallback | None = None) -> JoinedOutput:
    """Join the finished segments of `manifest` into the plan's output as `run_render` does
    (video copied, audio trimmed to the range and kept in sync), then remove the work folder.
    With `--matte clip` the segments' mattes are joined into the matte clip beside the output, as
    `run_render` joins them: put in place after the output, and where the output's join fails
    neither replaces its file (the work folder is kept for a resume). Returns the join's part of
    the report."""
    emit = emit or _nothing
    job = plan.job
    if manifest.frames_done != plan.frames or len(manifest.segments) != len(plan.segments):
        raise UserError(
            f"{job.output.name}: {manifest.frames_done} of {plan.frames} frames are rendered; "
            "nothing to join yet"
        )
    joined = _join_output(
        job, plan.info, _Range(plan.start_s, plan.end_s, plan.frames), manifest, plan.origin_s, emit
    )
    return JoinedOutput(
        output=job.output,
        frames_out=manifest.frames_done,
        audio_packets_skipped=joined.audio_packets_skipped,
        audio=tuple(f"{c.action} {c.codec}" for c in joined.audio),
        timecode=joined.timecode,
    )
