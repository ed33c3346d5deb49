"""Single-frame previews through the same stages a render uses. Qt-free.

`Previewer(job, env=env)` builds the job's stages once; `render(time_s)` reads that frame, runs it through
every stage as a batch of one and returns the original beside the processed image. In preview mode
the frame is first scaled down to a working resolution (at most `PREVIEW_MAX_HEIGHT` rows), which
is what keeps a scrub fast; final mode works at full size, exactly as the render will.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import cv2
import numpy as np

from ffdesk.faces.types import Face
from ffdesk.media.frame_clock import NO_LAST, ClockRead, FrameClock, frame_clock
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.events import EventCallback
from ffdesk.pipeline.flow import StageStats, run_through
from ffdesk.pipeline.job import RenderJob, working_size
from ffdesk.pipeline.report import StageFigures
from ffdesk.pipeline.stage import EmitsEvents, FramePacket, Stage
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.media.decode import StreamOrigin
    from ffdesk.runtime.env import RuntimeEnv
    from ffdesk.runtime.residency import Share

FRAME_CACHE = 12
SEQUENTIAL_WINDOW = 12
"""A request at most this many frames after the last one is decoded forward instead of seeking."""


@dataclass(frozen=True)
class PreviewResult:
    """One previewed frame: what the clip holds and what the render would make of it."""

    index: int
    time_s: float
    original: Frame
    processed: Frame
    faces: tuple[Face, ...]
    """Faces found in the frame, in the coordinates of `original` / `processed`."""
    scale: float
    """Working size / source size (1.0 in final mode)."""
    ms: float
    """Time spent on this frame (read + stages)."""
    stage_ms: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    pixel_aspect: float = 1.0
    """Width / height of one pixel as a player shows the clip (non-square pixels: not 1.0)."""


PREVIEW_NEUTRAL_FIELDS = (
    "output",
    "quality",
    "start",
    "end",
    "resume",
    "report",
    "telemetry_log",
    "segment_frames",
    "encoder",
    "video_preset",
    "batch",
    "memory_budget",
)
"""`RenderJob` fields a previewed frame does not depend on: where and how the render is written,
which part of the clip it covers, how it is batched and budgeted. Changing only these keeps the
previewer (and its loaded models)."""


def same_processing(a: RenderJob, b: RenderJob) -> bool:
    """Whether a previewer built for `a` shows exactly what one built for `b` would (with a lip
    syncer the range is not neutral: the voice starts at the range's first frame)."""
    if a.lip_syncer is not None and (a.start, a.end) != (b.start, b.end):
        return False
    return replace(a, **_neutral(b)) == b


@runtime_checkable
class FollowsRange(Protocol):
    """A stage whose work depends on a frame's place in the render range (the lip syncer's voice
    window): `frame_origin` is the `FramePacket.index` of the range's first frame (0 in a render;
    the preview, which numbers frames from the clip's start, sets the in point's)."""

    frame_origin: int


def _neutral(job: RenderJob) -> dict[str, Any]:
    return {name: getattr(job, name) for name in PREVIEW_NEUTRAL_FIELDS}


def faces_in(packet: FramePacket) -> tuple[Face, ...]:
    """The faces the stages found in a packet: the tracked faces, else (before a track is
    confirmed) the detections, else the faces chosen for swapping."""
    for faces in (packet.faces, packet.detections, packet.swap.faces):
        if faces:
            return tuple(faces)
    return ()


class Previewer:
    """Renders single frames of `job.target` through the job's stages.

    Not thread-safe by design: one worker thread owns it (call `start`, `render` and `close` from
    that thread). `close()` releases the stages.

    `env`: the runtime environment the stages use (models folder, caches, driver switches).
    `share`: an application's residency pool and the holder label to join it as; the stages'
    models then share its one budget with the renders beside the preview. `on_event`: gets the stages' events
    other than warnings (which come back with each result), such as `MemoryChanged`; it is called
    on the thread that changed residency, which may be a render's.
    """

    def __init__(
        self,
        job: RenderJob,
        cache: ScrubCache | None = None,
        *,
        on_event: EventCallback | None = None,
        env: RuntimeEnv,
        share: Share | None = None,
        clock: FrameClock | None = None,
    ) -> None:
        from ffdesk.media.probe import probe

        self.job = job
        self.cache = cache
        self.on_event = on_event
        self.env = env
        self.share = share
        self.info = probe(job.target, fps=job.fps, max_pixels=job.max_pixels)
        video = self.info.video
        self.fps = video.fps if video and video.fps > 0 else 25.0
        self.frame_count = video.frame_count if video else 1
        self.width = video.display_width if video else 0
        self.height = video.display_height if video else 0
        self.pixel_aspect = video.display_pixel_aspect if video else 1.0
        if clock is None and cache is not None and cache.path == job.target:
            clock = cache.clock  # a variable rate's stamps are read once a clip, not per build
        self.clock = clock or frame_clock(job.target, None if self.info.is_image else video)
        self._stages: list[Stage] = []
        self._started = False
        self._warnings: list[str] = []
        self._warn_lock = threading.Lock()
        self._frames: OrderedDict[int, tuple[float, Frame]] = OrderedDict()
        self._reader: Any = None
        self._origin: StreamOrigin | None = None
        self._next_index = 0

    def start(self) -> None:
        """Build and start the stages (loads models). Called once; `render` calls it if needed."""
        if self._started:
            return
        from ffdesk.pipeline.plan import build_stages

        self._stages = list(build_stages(self.job, self.info, env=self.env, share=self.share))
        origin = self.clock.first_from(self.job.start or 0.0, max(0, self.frame_count - 1))
        for stage in self._stages:
            if isinstance(stage, FollowsRange):  # the preview numbers frames from the clip's start
                stage.frame_origin = origin
            if isinstance(stage, EmitsEvents):
                stage.bind_events(self._on_event)
            stage.start()
        self._started = True

    @property
    def stage_names(self) -> list[str]:
        return [s.name for s in self._stages]

    def index_at(self, time_s: float) -> int:
        """The frame index shown at `time_s` (clamped to the clip)."""
        return self.clock.index_at(time_s, max(0, self.frame_count - 1))

    def read(self, time_s: float) -> tuple[int, float, Frame]:
        """(index, time, image) of the frame at `time_s`, at working resolution, cached."""
        index = self.index_at(time_s)
        hit = self._frames.get(index)
        if hit is not None:
            self._frames.move_to_end(index)
            return index, hit[0], hit[1]
        cached = self._from_cache(index)
        if cached is not None:
            return index, self.clock.time_of(index), cached
        if self.info.is_image:
            from ffdesk.media.images import read_image

            t, image = 0.0, read_image(self.job.target, max_pixels=self.job.max_pixels)
        else:
            decoded = self._read_video(index)
            t, image = decoded.time_s, decoded.image
        h, w = image.shape[:2]
        ww, wh = working_size(w, h, self.job.mode)
        if (ww, wh) != (w, h):
            image = np.asarray(cv2.resize(image, (ww, wh), interpolation=cv2.INTER_AREA), dtype=np.uint8)
        image = np.ascontiguousarray(image)
        self._frames[index] = (t, image)
        while len(self._frames) > FRAME_CACHE:
            self._frames.popitem(last=False)
        return index, t, image

    def use_clock(self, clock: FrameClock) -> None:
        """Count the frames by `clock` from now on (a variable rate's stamps, read in the
        background after this previewer counted at the average rate): what was kept by index goes."""
        if clock is self.clock or clock == self.clock:
            return
        self.clock = clock
        self._frames.clear()
        self._close_reader()
        if self._started:
            origin = clock.first_from(self.job.start or 0.0, max(0, self.frame_count - 1))
            for stage in self._stages:
                if isinstance(stage, FollowsRange):
                    stage.frame_origin = origin

    def _from_cache(self, index: int) -> Frame | None:
        c = self.cache
        if c is None or self.job.mode != "preview" or c.path != self.job.target:
            return None
        if c.clock is not self.clock and c.clock != self.clock:  # frame N is another picture there
            return None
        if c.size != working_size(self.width, self.height, "preview"):
            return None
        return c.get(index)

    def _read_video(self, index: int) -> Any:
        """Frame `index` as a DecodedFrame.

        A reader is kept open and positioned after the last frame served: a step forward (play,
        frame step, a slow scrub) decodes only the frames in between; any other jump reopens it
        at the keyframe before the wanted frame and decodes forward from there.
        """
        from ffdesk.media.decode import VideoReader, read_frame_at

        ahead = index - self._next_index if self._reader is not None else -1
        if not 0 <= ahead <= SEQUENTIAL_WINDOW:
            self._close_reader()
            # Before the frame's start, so a pts rounded down still counts as this frame.
            self._reader = VideoReader(
                self.job.target,
                start_s=self.clock.before(index),
                low_latency=True,
                sequence_fps=self.job.fps,
                origin=self._origin,
                max_pixels=self.job.max_pixels,  # found by the first reader, not again at every jump
            )
            self._origin = self._reader.origin
            self._next_index = index
        frame = None
        while self._next_index <= index:
            frame = next(self._reader, None)
            if frame is None:  # past the last frame (the frame count was an estimate)
                self._close_reader()
                return read_frame_at(
                    self.job.target,
                    self.clock.time_of(index),
                    sequence_fps=self.job.fps,
                    max_pixels=self.job.max_pixels,
                )
            self._next_index += 1
        return frame

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def render(self, time_s: float) -> PreviewResult:
        """Read the frame at `time_s` and run it through every stage."""
        t0 = time.perf_counter()
        self.start()
        index, t, original = self.read(time_s)
        packet = FramePacket(index=index, pts=None, image=original.copy())
        stats = [StageStats(stage.name) for stage in self._stages]
        batch = run_through(self._stages, [packet], stats=stats)  # drained: the frame comes out
        stage_ms = {s.name: s.ms_total for s in stats}
        out = batch[0] if batch else packet
        with self._warn_lock:
            warnings, self._warnings = tuple(self._warnings), []
        src_h = self.height or original.shape[0]
        return PreviewResult(
            index=index,
            time_s=t,
            original=original,
            processed=np.ascontiguousarray(out.image),
            faces=faces_in(out),
            scale=original.shape[0] / src_h if src_h else 1.0,
            ms=(time.perf_counter() - t0) * 1000.0,
            stage_ms=stage_ms,
            warnings=warnings,
            pixel_aspect=self.pixel_aspect,
        )

    def passthrough(self, time_s: float, warning: str = "") -> PreviewResult:
        """The frame at `time_s` unprocessed (when the stages cannot run, the clip still shows)."""
        t0 = time.perf_counter()
        index, t, original = self.read(time_s)
        src_h = self.height or original.shape[0]
        return PreviewResult(
            index=index,
            time_s=t,
            original=original,
            processed=original,
            faces=(),
            scale=original.shape[0] / src_h if src_h else 1.0,
            ms=(time.perf_counter() - t0) * 1000.0,
            warnings=(warning,) if warning else (),
            pixel_aspect=self.pixel_aspect,
        )

    def close(self) -> StageFigures:
        """Finish every stage; returns their figures, added up."""
        figures = StageFigures()
        for stage in self._stages:
            try:
                figures = figures.plus(stage.finish())
            except Exception:  # noqa: BLE001 - one stage failing to clean up must not leak the rest
                continue
        self._stages = []
        self._started = False
        self._close_reader()
        return figures

    def _on_event(self, event: Any) -> None:
        if isinstance(event, ev.Warning):
            with self._warn_lock:
                self._warnings.append(event.message)
        elif self.on_event is not None:
            self.on_event(event)

    def __enter__(self) -> Previewer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ScrubCache:
    """Every frame of one clip at preview working size, filled by a background decode.

    Random access into a long-GOP clip costs a decode from the keyframe before the wanted frame;
    one sequential pass (on a low-priority thread named "ffdesk-scrubcache") stores each frame
    JPEG-compressed (quality `JPEG_QUALITY`, about 60-100 kB at 540p) until `budget_bytes` is
    used, after which a scrub costs a JPEG decode (a few ms). Preview mode only: final mode always
    reads the exact frame. `stop()` ends the thread promptly.
    """

    JPEG_QUALITY = 92
    NICE = 10

    def __init__(
        self, path: Path, *, budget_bytes: int = 384 * 2**20, clock: FrameClock | ClockRead | None = None
    ) -> None:
        """`clock`: the clip's clock, or its read in progress (the pass waits for it: frames are
        kept by index); None: read here."""
        from ffdesk.media.probe import probe

        self.path = Path(path)
        info = probe(self.path)
        video = info.video
        if video is None or info.is_image:
            raise ValueError(f"{self.path}: a scrub cache needs a video")
        self.fps = video.fps if video.fps > 0 else 25.0
        self._read = clock if isinstance(clock, ClockRead) else None
        if clock is None:
            clock = frame_clock(self.path, video)
        self.clock: FrameClock | None = clock if isinstance(clock, FrameClock) else None
        """None until a read given is done (`get` has nothing until then)."""
        self.size = working_size(video.display_width, video.display_height, "preview")
        self.budget_bytes = budget_bytes
        self._frames: dict[int, bytes] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.done = threading.Event()
        """Set when the pass is over (end of clip, budget used, stopped or failed)."""
        self.error: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._fill, name="ffdesk-scrubcache", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __len__(self) -> int:
        with self._lock:
            return len(self._frames)

    @property
    def bytes_used(self) -> int:
        return self._bytes

    def get(self, index: int) -> Frame | None:
        """Frame `index` at working size, or None when it is not cached (yet)."""
        with self._lock:
            blob = self._frames.get(index)
        if blob is None:
            return None
        bgr = cv2.imdecode(np.frombuffer(blob, np.uint8), cv2.IMREAD_COLOR)
        return None if bgr is None else np.ascontiguousarray(bgr[..., ::-1])

    def _clock(self) -> FrameClock | None:
        """The clip's clock, once its read is done (None: stopped first, or the read was given up)."""
        read = self._read
        if self.clock is None and read is not None:
            while not read.wait(0.2):
                if self._stop.is_set():
                    return None
            self.clock = read.clock
        return None if self._stop.is_set() else self.clock

    def _fill(self) -> None:
        import contextlib
        import os

        from ffdesk.media.decode import VideoReader

        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.NICE)
        params = [cv2.IMWRITE_JPEG_QUALITY, self.JPEG_QUALITY]
        try:
            clock = self._clock()
            if clock is None:
                return  # stopped, or the read was given up
            with VideoReader(self.path) as reader:
                for frame in reader:
                    if self._stop.is_set() or self._bytes >= self.budget_bytes:
                        break
                    index = clock.index_at(frame.time_s, NO_LAST)  # a count may fall short
                    image = frame.image
                    if (image.shape[1], image.shape[0]) != self.size:
                        image = np.asarray(
                            cv2.resize(image, self.size, interpolation=cv2.INTER_AREA), np.uint8
                        )
                    ok, blob = cv2.imencode(".jpg", np.ascontiguousarray(image[..., ::-1]), params)
                    if ok:
                        data = blob.tobytes()
                        with self._lock:
                            self._frames[index] = data
                            self._bytes += len(data)
        except Exception as exc:  # noqa: BLE001 - scrubbing falls back to exact reads
            self.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        finally:
            self.done.set()
