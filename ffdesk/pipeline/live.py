"""The live tier: a camera in, the swapped face out at camera rate. Qt-free.

    camera --(capture thread, newest frame only)--> stages, batch 1 --(newest only)--> outputs

Three threads, no queue that can grow:

- capture ("ffdesk-capture", `ffdesk.media.capture.FrameGrabber`): reads the camera as fast as
  it delivers and keeps the newest frame; a frame replaced before it was taken is dropped.
- processing (the thread that calls `LiveSession.run`): takes the newest frame and runs the
  job's stages on it as a batch of one, the render's own front end (detection on its schedule,
  the tracker in between, selection) and swap; a stage that looks ahead is drained at every
  frame (`run_through`), so no frame waits for later ones.
- output ("ffdesk-live-output"): hands each processed frame to every output in turn (a
  recording, a stream, a virtual camera, a window: any callable taking a `LiveFrame`); a frame
  processed while the outputs are still busy with an older one replaces it (dropped too).

Each frame's capture time and output time (`time.monotonic()`, after the last output returned)
are recorded, so the latency capture -> output is exact. `run(stop)` returns `LiveFigures`:
frames/s out, latency p50/p95/p99, frames dropped, and where the time went per stage.

The tracking stage sees the frames it is given as consecutive (its packets are numbered in the
order processed, whatever the camera dropped), so a dropped frame never resets a track.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ffdesk.errors import Busy, MediaError, UserError
from ffdesk.media.capture import Camera, CapturedFrame, FrameGrabber, StatusCallback
from ffdesk.media.stream import Picture
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.flow import StageStats, run_through
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.report import ModelsReport, StageFigures, merge_figures
from ffdesk.pipeline.stage import EmitsEvents, FramePacket, Prepares, Stage
from ffdesk.pipeline.stages.placement import frames_started
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.media.stream import VirtualCamera
    from ffdesk.pipeline.lock import OutputLock
    from ffdesk.runtime.env import RuntimeEnv

TIMINGS_KEPT = 36_000
"""Frame timings kept for the figures: the last 20 minutes at 30 frames/s."""
POLL_S = 0.1
"""How often the threads look at the stop event while waiting for a frame."""
DRAIN_S = 5.0
"""At the end of a session (the clip's end, the time, a stop), how long the last frame swapped
may wait for the output thread to take it, so the outputs get it too (the wait ends as it is
taken; a recording's first frame opens its encoder, which is slow on a busy CPU)."""


@dataclass(frozen=True, slots=True)
class LiveFrame:
    """A processed frame on its way to the outputs."""

    number: int
    """The camera's frame number."""
    image: Frame
    """H x W x 3 RGB uint8, the faces swapped. Outputs must not change it."""
    captured: float
    """`time.monotonic()` when the camera captured it."""
    processed: float
    """`time.monotonic()` when the stages were done with it."""
    seconds: float
    """Capture time in seconds since the session's first capture (what outputs stamp)."""
    faces_swapped: int
    """Faces swapped in it (`faces_swapped`)."""
    faces_found: int = 0
    """Faces the swap was to swap in it (found, and matched where `--map` chooses them)."""


Output = Callable[[LiveFrame], None]
"""Takes a processed frame; called on the output thread, one frame at a time."""


class FrameWriter(Protocol):
    """What `ffdesk.media.stream`'s outputs are: pictures in with their capture time (seconds)."""

    def write(self, picture: Picture, seconds: float) -> None: ...


def writing_to(*writers: FrameWriter) -> Output:
    """One output that writes each frame to every one of `writers` in turn, stamped with its
    capture time; the encoders among them share one conversion of the frame to 4:2:0."""

    def output(frame: LiveFrame) -> None:
        picture = Picture(frame.image)
        for writer in writers:
            writer.write(picture, frame.seconds)

    return output


def open_writers(
    camera: Camera,
    stack: ExitStack,
    *,
    stream: str | None,
    virtual_camera: bool,
    record: Path | None,
    on_status: StatusCallback | None = None,
) -> list[FrameWriter]:
    """The outputs asked for, sized as the camera gives its frames (the stream and the virtual
    camera first, the recording last), each closed by `stack` (a recording is then moved into
    place with what it holds). One line (`UserError`, `MediaError`) for one that cannot be
    opened, and for a virtual camera that is the very device the session reads.

    A recording holds its output's lock for the session, as a render of that file does
    (`claim_recording`): a second session or a render of the same file is refused, and the
    partial files a killed session left there are removed (told to `on_status`)."""
    from ffdesk.media.atomic import same_file
    from ffdesk.media.capture import DeviceCamera, device_path
    from ffdesk.media.stream import Recording, UdpStream

    width, height = camera.size
    writers: list[FrameWriter] = []
    if stream is not None:
        udp = UdpStream(stream, width=width, height=height, fps=camera.fps)
        stack.callback(udp.close)
        writers.append(udp)
    if virtual_camera:
        cam = _virtual_camera(width, height, camera.fps)
        stack.callback(cam.close)
        if (
            isinstance(camera, DeviceCamera)
            and cam.device
            and same_file(Path(cam.device), device_path(camera.index))
        ):
            raise UserError(
                f"the virtual camera is {cam.device}, the device {camera.name} reads: the session would "
                "watch its own output; read the real camera (ffdesk live --list-cameras)"
            )
        writers.append(cam)
    if record is not None:
        take, lock = claim_take(record, on_status)
        stack.callback(lock.release)  # released after the close below
        rec = Recording(take, width=width, height=height, fps=camera.fps)
        stack.callback(rec.close)
        writers.append(rec)
    return writers


def recording_in(writers: Sequence[FrameWriter]) -> Path | None:
    """Where the recording among `writers` goes (`claim_take`'s name), None without one."""
    from ffdesk.media.stream import Recording

    return next((w.path for w in writers if isinstance(w, Recording)), None)


def claim_take(asked: Path, on_status: StatusCallback | None = None) -> tuple[Path, OutputLock]:
    """The name a recording asked for at `asked` goes to, with its lock held: `asked`, or where
    a file is there (an earlier take) or another session or render holds it, the first free
    numbered name beside it (`take-2.mp4`), said to `on_status`. Chosen under the name's lock,
    so two sessions started together never take one name, and a take that appears at a name
    meanwhile is passed over: a take cannot be made again, so none is recorded over."""
    from ffdesk.pipeline.output_names import MAX_NUMBER, numbered

    asked = Path(asked).expanduser()
    why = "is there (an earlier take)"
    for number in range(1, MAX_NUMBER + 1):
        candidate = numbered(asked, number)
        if _taken(candidate):
            continue
        try:
            lock = claim_recording(candidate, on_status)
        except Busy:
            if candidate == asked:
                why = "is being written by another process"
            continue  # another session records it, or a render writes it
        if _taken(candidate):  # put there between the look and the lock
            lock.release()
            continue
        if candidate != asked and on_status is not None:
            on_status(f"{asked.name} {why}: recording to {candidate.name}")
        return candidate, lock
    raise UserError(f"--record {asked.name}: every numbered name up to {MAX_NUMBER} beside it is taken")


def _taken(path: Path) -> bool:
    return path.exists() or path.is_symlink()


_BACKEND_ADVICE = re.compile(r"\.?(?:\s*(?:Did you run [^?]*\?|See also [^.]*\.))+")
"""The advice pyvirtualcam adds to its own reason ("Did you run 'modprobe v4l2loopback'? See
also pyvirtualcam's documentation."), which the line ffdesk gives says better."""


def _virtual_camera(width: int, height: int, fps: float) -> VirtualCamera:
    """`VirtualCamera`, its refusal one line with ffdesk's advice alone: pyvirtualcam's reason
    without pyvirtualcam's own advice after it."""
    from ffdesk.media.stream import VirtualCamera

    try:
        return VirtualCamera(width=width, height=height, fps=fps)
    except MediaError as exc:
        raise MediaError(_BACKEND_ADVICE.sub("", str(exc))) from None


def claim_recording(path: Path, on_status: StatusCallback | None = None) -> OutputLock:
    """Take the lock of the output `path` (the one a render of that file holds, beside it), then
    remove the partial recordings of `path` that sessions killed before they could finish left
    behind (`kill -9`, a power cut): with the lock held no other writer of `path` is running, so
    every such partial is a dead one's. `UserError` (one line) while a render or another session
    writes `path`."""
    from ffdesk.media.atomic import check_writable_folder
    from ffdesk.pipeline.resume import claim_output

    path = Path(path).expanduser()
    check_writable_folder(path.parent)  # (taking the lock would make a missing folder)
    path = path.parent.resolve() / path.name  # (a link at the path itself is the recording's to refuse)
    try:
        lock, removed = claim_output(path, writing="recorded")
    except UserError as exc:  # (another process recording or rendering it is busy: exit 75)
        raise (Busy if isinstance(exc, Busy) else UserError)(f"--record {path.name}: {exc}") from None
    if removed and on_status is not None:
        names = ", ".join(p.name for p in removed)
        on_status(f"removed {names}: left unfinished beside {path.name} by a writer that was killed")
    return lock


@dataclass(frozen=True, slots=True)
class FrameTiming:
    """When one frame was captured and when every output had it (`time.monotonic()`)."""

    number: int
    captured: float
    output: float

    @property
    def latency_ms(self) -> float:
        return (self.output - self.captured) * 1000.0


@dataclass(frozen=True)
class StageTime:
    """Mean time per frame of one stage: wall and CPU milliseconds."""

    name: str
    ms: float
    cpu_ms: float


@dataclass(frozen=True)
class LiveFigures:
    """How a live session went. Rates and latencies count the frames output after the first
    `settle_s` seconds (model warm-up) over the last `TIMINGS_KEPT` frames."""

    seconds: float
    """From the first capture to the end."""
    frames_captured: int
    frames_out: int
    frames_dropped: int
    """Frames captured (or due, for a file camera) that never reached the outputs: replaced by
    a newer one while the stages or the outputs were busy, or skipped by the camera (the frames
    still on their way when the session ended are not counted)."""
    fps_out: float
    latency_ms_p50: float | None
    latency_ms_p95: float | None
    latency_ms_p99: float | None
    latency_ms_max: float | None
    frames_with_swap: int
    """Frames output with at least one face swapped."""
    frames_with_face: int = 0
    """Frames out with a face the swap was to swap (found; matched where `--map` chooses)."""
    stages: tuple[StageTime, ...] = ()
    output_ms: float = 0.0
    """Mean time per frame the outputs took (all of them)."""
    ended: str = "stopped"
    """Why the session ended: "stopped", "time" (`seconds` reached), "end of clip" or "error"."""
    error: str | None = None
    """The one-line reason when `ended` is "error"."""
    camera: str = ""
    size: tuple[int, int] = (0, 0)
    camera_fps: float = 0.0
    model_providers: tuple[str, ...] = ()
    """Where a model pack's (or a trained swapper's) models ran ("CUDAExecutionProvider"); empty
    for the embedded swap."""
    pixels: str = ""
    """Where the pack's pixels stayed between its model calls: "host" or "device (cuda:0)"."""
    late_shapes: tuple[tuple[str, int], ...] = ()
    """(model key, calls) of each model that met an input shape its session had not run at once
    the frames started: on a GPU a cuDNN algorithm search in the middle of the session each."""

    def line(self) -> str:
        """The session's figures in one line (the command's last line, the app's Status line)."""

        def ms(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f}"

        # a rate needs two frames out after the warm-up: fewer give none, not "0.0 frames/s"
        rate = f"{self.fps_out:.1f}" if self.fps_out > 0 else "-"
        return (
            f"{self.frames_out} frames out in {self.seconds:.1f} s ({rate} frames/s from "
            f"{self.camera}, {self.size[0]}x{self.size[1]} at {self.camera_fps:g}); latency "
            f"capture->output p50 {ms(self.latency_ms_p50)} ms, p95 {ms(self.latency_ms_p95)} ms, "
            f"p99 {ms(self.latency_ms_p99)} ms; {self.frames_dropped} of {self.frames_captured} "
            f"frames dropped; faces swapped in {self.frames_with_swap} of {self.frames_out} frames"
        )

    def nothing_swapped(self, mapped: bool) -> str | None:
        """A warning for a session whose frames went out with no face swapped (a streamer shows
        their own face without knowing), naming what chooses the faces; None otherwise."""
        if self.frames_out < 1 or self.frames_with_swap:
            return None
        if self.frames_with_face:  # found, and the swap changed nothing there: masked away
            chooser = (
                f"faces were found in {self.frames_with_face} of them, but the masks left none of "
                "their pixels to change (--mask)"
            )
        elif mapped:
            chooser = "no face matched the people --map names"
        else:
            chooser = "no face was found in them"
        return f"no face was swapped in the {self.frames_out} frames out: {chooser}"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 2),
            "camera": self.camera,
            "size": f"{self.size[0]}x{self.size[1]}",
            "camera_fps": round(self.camera_fps, 2),
            "frames_captured": self.frames_captured,
            "frames_out": self.frames_out,
            "frames_dropped": self.frames_dropped,
            "fps_out": round(self.fps_out, 2),
            "latency_ms_p50": _round(self.latency_ms_p50),
            "latency_ms_p95": _round(self.latency_ms_p95),
            "latency_ms_p99": _round(self.latency_ms_p99),
            "latency_ms_max": _round(self.latency_ms_max),
            "frames_with_swap": self.frames_with_swap,
            "frames_with_face": self.frames_with_face,
            "stage_ms": {s.name: round(s.ms, 2) for s in self.stages},
            "stage_cpu_ms": {s.name: round(s.cpu_ms, 2) for s in self.stages},
            "output_ms": round(self.output_ms, 2),
            "ended": self.ended,
            "error": self.error,
            "model_providers": list(self.model_providers),
            "pixels": self.pixels,
            "late_shapes": dict(self.late_shapes),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The `q` (0-1) quantile of `values`, nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class _Newest:
    """A one-frame hand-over between two threads: `put` replaces a frame not yet taken (counted
    in `dropped`), `take` waits for one."""

    def __init__(self) -> None:
        self._item: LiveFrame | None = None
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0

    def put(self, item: LiveFrame) -> None:
        with self._cond:
            if self._item is not None:
                self.dropped += 1
            self._item = item
            self._cond.notify_all()

    def take(self, timeout: float) -> LiveFrame | None:
        with self._cond:
            if self._item is None and not self._closed:
                self._cond.wait(timeout)
            item, self._item = self._item, None
            self._cond.notify_all()
            return item

    def wait_taken(self, timeout: float) -> bool:
        """Wait until the frame put last has been taken (at most `timeout` s); whether it was."""
        with self._cond:
            return self._cond.wait_for(lambda: self._item is None or self._closed, timeout)

    def close(self) -> int:
        """No more frames; returns how many were left untaken (0 or 1)."""
        with self._cond:
            self._closed = True
            left = int(self._item is not None)
            self._item = None
            self._cond.notify_all()
            return left


def start_live_stages(stages: Sequence[Stage], on_event: Callable[[Any], None]) -> None:
    """Ready a session's stages for their first frame: events bound, models prepared (before the
    first frame, never inside it), the stages told the frames start, each started."""
    for stage in stages:
        if isinstance(stage, EmitsEvents):
            stage.bind_events(on_event)
    for stage in stages:
        if isinstance(stage, Prepares):
            stage.prepare(on_event)
    frames_started(stages)
    for stage in stages:
        stage.start()


class LiveSession:
    """A camera through `stages` to `outputs`, frame by frame, newest frame first.

    `seconds`: end after that long (None: until `stop` is set or the source ends).
    `settle_s`: the first seconds left out of the rate and latency figures (warm-up).
    `on_status`: one-line notes as they happen (a camera lost and reopened, a stage's warning);
    called from any of the session's threads.
    The session starts and finishes the stages; it opens and closes the camera; the outputs
    belong to the caller, who closes them after `run` returns (none is called after that).
    """

    def __init__(
        self,
        camera: Camera,
        stages: Sequence[Stage],
        outputs: Sequence[Output] = (),
        *,
        seconds: float | None = None,
        settle_s: float = 0.0,
        on_status: StatusCallback | None = None,
    ) -> None:
        self.camera = camera
        self.stages = list(stages)
        self.outputs = list(outputs)
        self.seconds = seconds
        self.settle_s = settle_s
        self.on_status = on_status or (lambda _line: None)
        self.timings: deque[FrameTiming] = deque(maxlen=TIMINGS_KEPT)
        """Capture and output time of the frames output (the last `TIMINGS_KEPT`)."""
        self.frames_out = 0
        self._with_swap = 0
        self._with_face = 0
        self._output_s = 0.0
        self._origin: float | None = None
        self._error: str | None = None
        self._models: ModelsReport | None = None
        """What the model stages said of their models when they finished."""
        self._halt = threading.Event()
        self._handoff = _Newest()
        self._after_end = 0
        """Frames taken from the camera after `seconds` had passed (left out, not dropped)."""

    # -- the processing thread ---------------------------------------------------------------
    def run(self, stop: threading.Event | None = None) -> LiveFigures:
        """Run until `stop` is set, `seconds` have passed, the source ends or something fails
        (then `LiveFigures.error` says what, in one line). `CameraError` / `UserError` before any
        thread starts when the camera cannot be opened or a stage cannot start."""
        stop = stop or threading.Event()
        self.camera.open()
        try:
            self._start_stages()
        except BaseException:
            self.camera.close()
            raise
        grabber = FrameGrabber(self.camera)
        out_thread = threading.Thread(target=self._output_loop, name="ffdesk-live-output", daemon=True)
        stats = [StageStats(s.name) for s in self.stages]
        ended = "stopped"
        started = time.monotonic()
        grabber.start()
        out_thread.start()
        index = 0
        try:
            while True:
                if stop.is_set():
                    break
                if self._halt.is_set():
                    ended = "error"
                    break
                wait = POLL_S
                if self.seconds is not None:
                    wait = min(wait, started + self.seconds - time.monotonic())
                    if wait <= 0:
                        ended = "time"
                        break
                captured = grabber.take(wait)
                if captured is None:
                    if grabber.ended:
                        ended = "error" if grabber.error else "end of clip"
                        self._error = self._error or grabber.error
                        break
                    continue
                if self.seconds is not None and captured.captured - started >= self.seconds:
                    self._after_end += 1  # captured once the session's time was up: not a drop
                    ended = "time"
                    break
                self._process(captured, index, stats)
                index += 1
        except Exception as exc:  # noqa: BLE001 - the session ends with a one-line reason
            ended = "error"
            self._error = _one_line(exc)
        finally:
            grabber.stop()  # the camera is closed below, once the grabber's read is done
            if ended != "error" and not self._halt.is_set():
                # the last frame swapped reaches the outputs too (a clip's last, a recording's)
                self._handoff.wait_taken(DRAIN_S)
            self._halt.set()
            left = self._handoff.close()
            out_thread.join(10.0)
            grabber.stop_and_close()
            self._finish_stages()
        if self._error and ended != "error":
            ended = "error"
        end = time.monotonic()
        return self._figures(grabber, stats, started, end, ended, left)

    def _process(self, captured: CapturedFrame, index: int, stats: Sequence[StageStats]) -> None:
        if self._origin is None:
            self._origin = captured.captured
        packet = FramePacket(index=index, pts=None, image=captured.image)
        out = run_through(self.stages, [packet], stats=stats)
        done = out[-1] if out else packet
        self._handoff.put(
            LiveFrame(
                number=captured.number,
                image=done.image,
                captured=captured.captured,
                processed=time.monotonic(),
                seconds=captured.captured - self._origin,
                faces_swapped=faces_swapped(done),
                faces_found=len(done.swap.faces),
            )
        )

    def _start_stages(self) -> None:
        start_live_stages(self.stages, self._on_event)

    def _finish_stages(self) -> None:
        """Finish every stage, keeping what the model stages say of their models."""
        figures: list[StageFigures | None] = []
        for stage in self.stages:
            try:
                figures.append(stage.finish())
            except Exception:  # noqa: BLE001, S112 - one stage failing to clean up must not leak the rest
                continue
        self._models = merge_figures(figures).models

    def _on_event(self, event: Any) -> None:
        if isinstance(event, ev.Warning):
            self.on_status(event.message)

    # -- the output thread -------------------------------------------------------------------
    def _output_loop(self) -> None:
        while True:
            frame = self._handoff.take(POLL_S)
            if frame is None:
                if self._halt.is_set():
                    return
                continue
            t0 = time.monotonic()
            try:
                for output in self.outputs:
                    output(frame)
            except Exception as exc:  # noqa: BLE001 - ends the session with a one-line reason
                self._error = _one_line(exc)
                self._halt.set()
                return
            done = time.monotonic()
            self._output_s += done - t0
            self.timings.append(FrameTiming(frame.number, frame.captured, done))
            self.frames_out += 1
            self._with_swap += frame.faces_swapped > 0
            self._with_face += frame.faces_found > 0

    # -- figures -----------------------------------------------------------------------------
    def _figures(
        self,
        grabber: FrameGrabber,
        stats: Sequence[StageStats],
        started: float,
        end: float,
        ended: str,
        left: int,
    ) -> LiveFigures:
        origin = self._origin if self._origin is not None else started
        counted = [t for t in self.timings if t.captured >= origin + self.settle_s]
        latencies = [t.latency_ms for t in counted]
        span = (counted[-1].output - counted[0].output) if len(counted) > 1 else 0.0
        fps = (len(counted) - 1) / span if span > 0 else 0.0
        missed = getattr(self.camera, "missed", 0)
        in_flight = grabber.pending + left + self._after_end  # on their way when the session ended
        captured = grabber.captured + missed
        stages = tuple(
            StageTime(s.name, s.ms_total / max(1, s.frames), s.cpu_ms_total / max(1, s.frames)) for s in stats
        )
        stats_of_models = self._models.models if self._models is not None else ()
        pixels = self._models.pixels if self._models is not None else None
        return LiveFigures(
            seconds=end - origin,
            frames_captured=captured,
            frames_out=self.frames_out,
            frames_dropped=max(0, captured - self.frames_out - in_flight),
            fps_out=fps,
            latency_ms_p50=percentile(latencies, 0.50),
            latency_ms_p95=percentile(latencies, 0.95),
            latency_ms_p99=percentile(latencies, 0.99),
            latency_ms_max=max(latencies) if latencies else None,
            frames_with_swap=self._with_swap,
            frames_with_face=self._with_face,
            stages=stages,
            output_ms=self._output_s * 1000.0 / max(1, self.frames_out),
            ended=ended,
            error=self._error if ended == "error" else None,
            camera=self.camera.name,
            size=self.camera.size,
            camera_fps=self.camera.fps,
            model_providers=tuple(sorted({m.provider for m in stats_of_models})),
            pixels="" if pixels is None else pixels.path + (f" ({pixels.device})" if pixels.device else ""),
            late_shapes=tuple((m.key, m.late_shapes) for m in stats_of_models if m.late_shapes),
        )


def faces_swapped(packet: FramePacket) -> int:
    """Faces swapped in a processed frame: as the swap stage recorded them (the embedded swap
    does), else the faces planned for it where the stages changed pixels (a model pack's)."""
    if packet.swapped_tracks:
        return len(packet.swapped_tracks)
    return len(packet.swap.faces) if packet.regions else 0


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    if isinstance(exc, UserError) and text:
        return text[0]
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# -- the job's stages, for a camera ---------------------------------------------------------
def check_recording(path: Path, job: RenderJob, camera: Camera) -> None:
    """`UserError` (one line) when a recording at `path` could not be one (a folder, a file type
    that holds no H.264 video) or would replace one of the session's inputs: the clip a
    `file:` camera plays, a source photo, a person's photo."""
    from ffdesk.media import atomic
    from ffdesk.pipeline.engine import VIDEO_SUFFIXES

    if path.is_dir():
        raise UserError(f"--record {path}: a folder; give a file in it, such as {path / 'live.mp4'}")
    kinds = VIDEO_SUFFIXES["h264"]
    if path.suffix.lower() not in kinds:
        raise UserError(f"--record {path.name}: a recording is H.264 video ({', '.join(kinds)})")
    clip = getattr(camera, "path", None)
    for inp in (*job.files_read(), *((clip,) if isinstance(clip, Path) else ())):
        if atomic.same_file(path, inp):
            raise UserError(f"--record {path.name} is one of the session's inputs; record to another file")


def live_job(
    sources: Sequence[Path],
    *,
    models_dir: Path | None = None,
    swapper: str | None = None,
    face_selection: str = "largest",
    **settings: Any,
) -> RenderJob:
    """A render job holding the live session's swap settings (its target is the first source
    photo: nothing is read from it but what a source needs; nothing is written to its output).
    A deep swapper or a model made by `ffdesk train` needs no source photo: with one and none,
    the target is only a name (`live_stages` says when the swapper named needs a photo)."""
    if not sources and not settings.get("deep_swapper") and not swapper and not settings.get("face_map"):
        raise UserError(
            "live needs a source face photo (--source FACE or --map PERSON.jpg=FACE.jpg), a deep "
            "swapper model (--deep-swapper) or a model made by `ffdesk train` (--swapper RUN)"
        )
    first = Path(sources[0]) if sources else Path(CAMERA_TARGET)
    return RenderJob(
        target=first,
        output=first.with_name(f".{first.stem}-live.mp4"),
        sources=tuple(Path(s) for s in sources),
        models_dir=models_dir,
        swapper=swapper,
        face_selection=face_selection,  # type: ignore[arg-type]
        batch=1,
        **settings,
    ).resolved()


CAMERA_TARGET = "camera"
"""The target a live job without a source photo names (nothing reads it)."""


def live_stages(job: RenderJob, *, fps: float, env: RuntimeEnv) -> list[Stage]:
    """The stages of `job` for a camera at `fps`: the render's front end (detection on its key
    frames, the tracker in between, selection), without the resumable segments' restarts, then
    the swap (the embedded one, the model pack's with `job.swapper`, or a model `ffdesk train`
    made, which needs no source photo) at batch 1, then the other processors the job names, as
    a render places them (not the lip syncer: a camera's voice is not a file). Built on the
    caller's thread: a source photo without a face fails here, in one line."""
    from ffdesk.pipeline.plan import with_processors

    if job.face_selection == "reference":
        raise UserError(
            "live swaps the largest face, all faces (--face-selection largest|all) or the people "
            "of a face map (--map PERSON.jpg=FACE.jpg)"
        )
    if job.lip_syncer:
        raise UserError("live has no lip syncer (it follows an audio file; a camera's voice is not one)")
    job = replace(job, batch=1)
    return with_processors(_swap_stages(job, fps=fps, env=env), job, None, env=env)


def _swap_stages(job: RenderJob, *, fps: float, env: RuntimeEnv) -> list[Stage]:
    """`live_stages` without the other processors."""
    from ffdesk.pipeline.stages.front import FaceFrontEnd, job_analyser

    if job.swapper:
        from ffdesk.pipeline.stages.trained import is_trained_swapper, trained_stages
        from ffdesk.pipeline.swapper_path import check_swapper_path
        from ffdesk.runtime.files import resolve_models_dir

        models_dir = resolve_models_dir(job.models_dir, env)
        check_swapper_path(job.swapper, models_dir)  # what it names, before whether it needs a photo
        if is_trained_swapper(job.swapper, models_dir):  # no photo
            front = FaceFrontEnd.for_camera(job, job_analyser(job), fps)
            return trained_stages(job, env=env, front=front)
    if not job.sources and not job.face_map:
        if job.swapper:
            raise UserError(
                f"live with the swapper {job.swapper} needs a source face photo (--source FACE); "
                "a model made by `ffdesk train` swaps without one"
            )
        # a deep swapper alone: the front end, then the processors
        return list(FaceFrontEnd.for_camera(job, job_analyser(job), fps).stages())
    if job.swapper:
        from ffdesk.pipeline.report import ModelOrder
        from ffdesk.pipeline.stages.models import ModelRender, pack_stages

        ctx = ModelRender(job, env=env)
        front = FaceFrontEnd.for_camera(job, ctx.analyser, fps)
        return pack_stages(ctx, front, ModelOrder("batch", "live: one frame at a time", 1))
    from ffdesk.pipeline.stages.embedded import embedded_stages

    return embedded_stages(job, front=FaceFrontEnd.for_camera(job, job_analyser(job), fps))
