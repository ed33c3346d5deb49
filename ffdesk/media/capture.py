"""Cameras for the live tier: frames as they are captured, and only the newest kept.

- `FileCamera`: a clip played as a camera in real time, at its own frame rate or a given one;
  each frame is "captured" when its time comes (`time.monotonic()`), and frames whose time has
  passed before they could be read are skipped (counted in `missed`), as a sensor moves on. Its
  pixels are square and its frames progressive, as a camera's are: a clip whose pixels are not
  square is scaled as a player shows it, an interlaced one deinterlaced.
- `DeviceCamera`: a capture device through OpenCV (V4L2 on Linux). A device that is missing is
  one line (`CameraError`); one that stops delivering is reopened `REOPEN_TRIES` times, then one
  line.
- `FrameGrabber`: the capture thread. It reads the camera as fast as the camera delivers and
  keeps only the newest frame: one the consumer has not taken when the next arrives is dropped
  and counted. Nothing queues, so a slow consumer sees fresh frames, never old ones.

`open_camera("0" | "/dev/video2" | "file:CLIP")` makes either camera from the command line's
spelling; `list_cameras()` lists the V4L2 devices.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

import numpy as np

from ffdesk.errors import MediaError
from ffdesk.media.camera_modes import (
    DEFAULT_SIZE,
    LOOPBACK_DRIVER,
    ModeChoice,
    PixelFormat,
    choose_mode,
    read_device,
)
from ffdesk.types import Frame

if TYPE_CHECKING:
    from ffdesk.media.probe import VideoInfo

REOPEN_TRIES = 3
"""How often a camera that stopped delivering is reopened before the session gives up."""
REOPEN_PAUSE_S = 0.5
"""The pause before each reopening."""
FILE_PREFIX = "file:"


class CameraError(MediaError):
    """A camera that cannot be opened or stopped delivering frames (one line)."""


@dataclass(frozen=True, slots=True)
class CapturedFrame:
    """One picture as the camera gave it."""

    number: int
    """The camera's count of frames, from 0 (skipped and dropped frames count too)."""
    image: Frame
    """H x W x 3 RGB uint8."""
    captured: float
    """`time.monotonic()` when the frame was captured (a file camera: when its time came)."""


class Camera(Protocol):
    """A source of frames at a steady rate; `read` blocks until the next one."""

    name: str
    """How the camera is called in messages ("camera 0", "file:clip.mp4")."""
    fps: float
    size: tuple[int, int]
    """(width, height) of its frames."""
    missed: int
    """Frames the camera skipped because nobody read them in time (a file camera's)."""

    def open(self) -> None:
        """Open the camera (`CameraError`, one line, when it cannot be); sets `size` and `fps`.
        Opening an open camera does nothing."""

    def read(self) -> CapturedFrame | None:
        """The next frame; None when the source has ended (a clip without `loop`). `CameraError`
        when the camera fails for good."""

    def close(self) -> None: ...


@runtime_checkable
class Interruptible(Protocol):
    """A camera whose `read` may wait for a frame's time (a clip played as a camera) and can be
    told to stop waiting."""

    def interrupt(self) -> None:
        """Make a `read` waiting for its frame's time return None at once (and every `read`
        that would wait, until the camera is opened again)."""


StatusCallback = Callable[[str], None]


def _no_status(_line: str) -> None:
    return None


def parse_size(text: str) -> tuple[int, int]:
    """`1280x720` -> (1280, 720); `ValueError` for anything else."""
    w, sep, h = text.lower().partition("x")
    if not sep or not w.strip().isdigit() or not h.strip().isdigit():
        raise ValueError(f"size {text!r} is not WIDTHxHEIGHT (e.g. 1280x720)")
    size = int(w), int(h)
    if min(size) < 16 or max(size) > 8192:
        raise ValueError(f"size {text!r} is out of range (16 to 8192 pixels a side)")
    if size[0] % 2 or size[1] % 2:  # the outputs are H.264 4:2:0: a side of 241 came out as 242
        even = f"{size[0] + size[0] % 2}x{size[1] + size[1] % 2}"
        raise ValueError(f"size {text!r} has an odd side; the outputs need even ones (e.g. {even})")
    return size


def square_pixels(video: VideoInfo) -> tuple[int, int]:
    """(width, height) at which a clip's upright picture has square pixels, as a camera gives
    them and a player shows the clip: a clip whose pixels are not square (its sample aspect
    ratio, e.g. PAL 16:9 or carphone's 128:117) is widened or narrowed to an even width."""
    w, h = video.display_width, video.display_height
    aspect = video.display_pixel_aspect
    if abs(aspect - 1.0) < 0.005:
        return w, h
    return max(2, round(w * aspect / 2) * 2), h


def covered(image: Frame, display: tuple[int, int], size: tuple[int, int]) -> Frame:
    """`image` (shown at `display`, its pixels perhaps not square) at `size`: scaled to cover
    `size` with square pixels, the middle kept. The same shape is a plain scale."""
    import cv2

    (dw, dh), (w, h) = display, size
    ih, iw = image.shape[:2]
    scale = max(w / dw, h / dh)
    # the middle part of the stored picture that shows at `size`, cut before scaling (scaling
    # the whole picture to cover a thin size first could make a frame of hundreds of megabytes)
    cw, ch = min(iw, round(w / scale * iw / dw)), min(ih, round(h / scale * ih / dh))
    x, y = (iw - cw) // 2, (ih - ch) // 2
    part = image[y : y + max(1, ch), x : x + max(1, cw)]
    shrink = w * h < part.shape[0] * part.shape[1]
    how = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
    return cast(Frame, np.asarray(cv2.resize(part, (w, h), interpolation=how), np.uint8))


CATCH_UP_S = 1.0
"""How far behind the clip's clock a clip camera may fall (a decoder slower than the clip, a
loaded machine) before its clock follows the decoder: it skips frames to catch up with less."""


class FileCamera:
    """A clip played as a camera, in real time: each frame is captured at its own time in the
    clip (a variable-rate clip keeps its timing), or with `fps` given at start + k / `fps`. With
    `loop`, the clip starts again at its end (frame numbers go on); otherwise `read` returns None
    there. `size`: the frames' size, reached as a camera asked for another shape reaches it:
    scaled to cover it, with square pixels, and the middle kept (a 4:3 clip at 1280x720 loses a
    strip at the top and bottom; nothing is stretched).

    A frame whose successor is due already is skipped (`missed`), as long as one was delivered
    within the last frame's time: a clip that decodes slower than real time still gives frames,
    the newest it has, and its clock follows the decoder once it is `CATCH_UP_S` behind. `close`
    from another thread while a `read` is under way closes the clip as that read returns."""

    def __init__(
        self, path: Path, *, fps: float | None = None, size: tuple[int, int] | None = None, loop: bool = False
    ) -> None:
        self.path = Path(path)
        self.name = f"{FILE_PREFIX}{self.path.name}"
        self.fps = float(fps) if fps else 0.0
        self.size = size or (0, 0)
        self.loop = loop
        self.missed = 0
        self._fps_given = bool(fps)
        self._want_size = size
        self._display = (0, 0)
        self._reader: Any = None
        self._frames: Iterator[Any] | None = None
        self._number = 0
        self._start: float | None = None
        self._last_out = 0.0
        self._pass_offset = 0.0
        """The clip time the current pass starts at (a loop's passes follow each other)."""
        self._last_time = 0.0
        self._interrupted = threading.Event()
        self._lock = threading.Lock()
        self._reading = False
        self._closing = False

    def open(self) -> None:
        self._interrupted.clear()
        with self._lock:
            self._closing = False
        self._open_reader()

    def _open_reader(self) -> None:
        """Open the clip (`open` without forgetting an `interrupt`: a loop starting again)."""
        from ffdesk.media.decode import VideoReader
        from ffdesk.media.probe import probe

        if self._reader is not None:
            return
        if self.path.is_dir():
            raise CameraError(f"{self.name}: {self.path} is a folder, not a clip")
        if not self.path.is_file():
            raise CameraError(f"{self.name}: no such clip ({self.path})")
        info = probe(self.path)
        if info.video is None or info.is_image:
            raise CameraError(f"{self.name}: not a clip (a camera needs moving pictures)")
        if not self.fps:
            self.fps = info.video.fps if info.video.fps > 0 else 25.0
        self._display = square_pixels(info.video)
        if self._want_size is None:
            self.size = self._display
        # one decoder thread and one conversion thread: a camera is one stream, the cores are
        # the swap's; a camera's frames are progressive: interlaced footage (DV, broadcast) loses
        # its combs, which the swap would otherwise see (and scaling would smear)
        interlaced = info.video.field_order in ("tt", "bb", "tb", "bt")
        self._reader = VideoReader(
            self.path, low_latency=True, decode_threads=1, convert_threads=1, deinterlace=interlaced
        )
        self._frames = iter(self._reader)

    def _next_frame(self) -> Any:
        """The clip's next decoded frame (a `DecodedFrame`), from the start again with `loop`;
        None at its end."""
        frame = next(self._frames, None) if self._frames is not None else None
        if frame is None and self.loop and self._number > 0:
            self._close_reader()
            self._open_reader()  # an `interrupt` holds on: the session is ending
            self._pass_offset = self._last_time + 1.0 / self.fps
            frame = next(self._frames, None) if self._frames is not None else None
        return frame

    def _clip_time(self, frame: Any, number: int) -> float:
        """Seconds from the first frame captured to `frame`'s capture, in the clip's clock."""
        if self._fps_given:
            return number / self.fps
        self._last_time = self._pass_offset + max(0.0, float(frame.time_s))
        return self._last_time

    def _sized(self, image: Frame) -> Frame:
        if (image.shape[1], image.shape[0]) != self.size or self._display != self.size:
            return covered(image, self._display, self.size)
        return image

    def read(self) -> CapturedFrame | None:
        with self._lock:
            if self._closing:
                return None  # closed from another thread while it read: the session is ending
            if self._frames is None:
                raise CameraError(f"{self.name}: not open")
            self._reading = True
        try:
            return self._read()
        finally:
            with self._lock:
                self._reading = False
                close = self._closing
            if close:
                self._close_reader()

    def _read(self) -> CapturedFrame | None:
        period = 1.0 / self.fps
        while not self._interrupted.is_set():
            frame = self._next_frame()
            if frame is None:
                return None
            now = time.monotonic()
            if self._start is None:
                self._start = self._last_out = now
            number = self._number
            self._number += 1
            due = self._start + self._clip_time(frame, number)
            jump = not self._fps_given and due - now > max(CATCH_UP_S, 2 * period)
            if now - due > CATCH_UP_S or jump:  # far behind the clip (a slow decoder), or a
                self._start += now - due  # jump in its timestamps: its clock follows the frames
                due = now
            fresh = now - self._last_out < period  # (a frame went out within a frame's time)
            if now >= due + period and fresh:  # the next frame is due already: this one is gone
                self.missed += 1
                continue
            if due > now and self._interrupted.wait(due - now):
                return None  # told to stop waiting: the session is ending
            self._last_out = max(due, now)
            return CapturedFrame(number, self._sized(frame.image), self._last_out)
        return None  # told to stop: the session is ending

    def interrupt(self) -> None:
        self._interrupted.set()

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self._reader = None
        self._frames = None

    def close(self) -> None:
        with self._lock:
            self._closing = True
            if self._reading:
                return  # the thread reading closes it as its read returns
        self._close_reader()


def device_path(index: int) -> Path:
    return Path(f"/dev/video{index}")


class DeviceCamera:
    """A capture device (OpenCV; V4L2 on Linux), asked for `size` and `fps` (it may give others:
    `size` and `fps` then say what it gives). `on_status` hears of a device lost and reopened."""

    def __init__(
        self,
        index: int,
        *,
        size: tuple[int, int] | None = None,
        fps: float | None = None,
        on_status: StatusCallback = _no_status,
        reopen_tries: int = REOPEN_TRIES,
        reopen_pause_s: float = REOPEN_PAUSE_S,
    ) -> None:
        self.index = index
        self.name = f"camera {index}"
        self.size = size or DEFAULT_SIZE
        self.fps = float(fps or 30.0)
        self.missed = 0
        self.on_status = on_status
        self.reopen_tries = reopen_tries
        self.reopen_pause_s = reopen_pause_s
        self._want = (size or DEFAULT_SIZE, float(fps or 30.0))
        self._size_asked = size is not None
        self._cap: Any = None
        self._number = 0
        self._told = False
        self._choice: ModeChoice | None = None

    def open(self) -> None:
        import cv2

        if self._cap is not None:
            return
        on_linux = sys.platform.startswith("linux")
        if on_linux and not device_path(self.index).exists():
            raise CameraError(f"{self.name}: no such device ({device_path(self.index)} does not exist)")
        choice = self._choose_mode() if on_linux else None
        api = cv2.CAP_V4L2 if on_linux else cv2.CAP_ANY
        cap = cv2.VideoCapture(self.index, api)
        if not cap.isOpened():
            cap.release()
            # a node read as a camera that OpenCV cannot start is, nearly always, streaming elsewhere
            why = "another program may be using it" if choice is not None else "in use, or not a camera?"
            raise CameraError(f"{self.name}: cannot be opened ({why})")
        (w, h), fps = (choice.size, choice.fps) if choice is not None else self._want
        if choice is not None and choice.fourcc is not None:
            # before the size: OpenCV asks the driver for the format with the size it has
            cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*choice.fourcc))
        cap.set(cv2.CAP_PROP_FRAME_WIDTH, w)
        cap.set(cv2.CAP_PROP_FRAME_HEIGHT, h)
        cap.set(cv2.CAP_PROP_FPS, fps)
        cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # the driver's queue: as short as it goes
        got_w, got_h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        got_fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        self.size = (got_w, got_h) if got_w > 0 and got_h > 0 else (w, h)
        self.fps = got_fps if got_fps > 0 else fps
        self._cap = cap
        if choice is not None and not self._told:
            self._told = True
            for note in choice.notes:
                self.on_status(note)

    def _choose_mode(self) -> ModeChoice | None:
        """What to ask the device for, from what it offers (when it cannot be read: what was
        chosen at an earlier opening, else None and OpenCV gets what was asked). A node that is
        not a camera, or one this user may not open, is one line (`CameraError`)."""
        path = device_path(self.index)
        try:
            node = read_device(path)
        except PermissionError:
            raise CameraError(
                f"{self.name}: no permission to open {path} (add your user to the video group)"
            ) from None
        except (ImportError, OSError):
            return self._choice  # a reopening keeps the mode it had (None: OpenCV gets the ask)
        if not node.capture:
            cameras = [str(c.index) for c in list_cameras(query=False) if not c.kind and not c.problem]
            there = f"cameras here: {', '.join(cameras)}" if cameras else "no camera here"
            what = f"{node.kind}: {node.card}" if node.card else node.kind
            raise CameraError(f"{self.name}: {path} is not a camera ({what}); {there} (--list-cameras)")
        (w, h), fps = self._want
        self._choice = choose_mode(node.formats, (w, h) if self._size_asked else None, fps, name=self.name)
        return self._choice

    def _grab(self) -> Frame | None:
        if self._cap is None:
            return None
        import cv2

        ok, bgr = self._cap.read()
        if not ok or bgr is None:
            return None
        # one pass in OpenCV: reversing the channels in numpy is a strided copy, several times slower
        return np.asarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), np.uint8)

    def read(self) -> CapturedFrame | None:
        image = self._grab()
        tries = 0
        while image is None:
            if tries >= self.reopen_tries:
                raise CameraError(
                    f"{self.name} stopped delivering frames (unplugged?); reopened it "
                    f"{self.reopen_tries} times without success"
                )
            tries += 1
            self.on_status(f"{self.name} lost; reopening ({tries}/{self.reopen_tries})")
            self.close()
            time.sleep(self.reopen_pause_s)
            with contextlib.suppress(CameraError):
                self.open()
            image = self._grab()
        captured = time.monotonic()
        number = self._number
        self._number += 1
        return CapturedFrame(number, image, captured)

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
        self._cap = None


def open_camera(
    spec: str,
    *,
    size: tuple[int, int] | None = None,
    fps: float | None = None,
    loop: bool = False,
    on_status: StatusCallback = _no_status,
) -> Camera:
    """The camera `spec` names (not opened yet): `file:CLIP`, a device index (`0`) or a device
    path (`/dev/video2`). `CameraError` (one line) for anything else."""
    text = spec.strip()
    if text.startswith(FILE_PREFIX):
        clip = text[len(FILE_PREFIX) :]
        if not clip:
            raise CameraError("--camera file: needs a clip (file:CLIP)")
        return FileCamera(Path(clip).expanduser(), fps=fps, size=size, loop=loop)
    index: int | None = None
    if text.isdigit():
        index = int(text)
    elif text.startswith("/dev/video") and text[len("/dev/video") :].isdigit():
        index = int(text[len("/dev/video") :])
    if index is None:
        raise CameraError(f"camera {spec!r}: give a device index (0), /dev/videoN or file:CLIP")
    return DeviceCamera(index, size=size, fps=fps, on_status=on_status)


@dataclass(frozen=True)
class CameraInfo:
    """A video node as `list_cameras` found it: a camera, or a node that is not one."""

    index: int
    path: Path
    name: str
    """The driver's name for it (empty when unknown)."""
    formats: tuple[PixelFormat, ...] = ()
    """Its pixel formats, sizes and rates (empty when not read)."""
    problem: str = ""
    """Why it could not be read ("" when it could)."""
    kind: str = ""
    """What it is when it is not a camera ("metadata capture", ...); "" for a camera."""
    virtual: bool = False
    """A virtual camera (v4l2loopback): what some program sends, perhaps ffdesk itself."""


NO_PERMISSION = "no permission to open it (add your user to the video group)"


def _video_nodes() -> list[tuple[int, Path]]:
    nodes = []
    for path in Path("/dev").glob("video*"):
        suffix = path.name[len("video") :]
        if suffix.isdigit():
            nodes.append((int(suffix), path))
    return sorted(nodes)


def _sysfs_name(path: Path) -> str:
    try:
        return (
            Path(f"/sys/class/video4linux/{path.name}/name")
            .read_text(encoding="utf-8", errors="replace")
            .strip()
        )
    except OSError:
        return ""


def describe_node(index: int, path: Path, *, formats: bool = True) -> CameraInfo:
    """One video node: its name, whether it is a camera and (with `formats`) what it offers."""
    try:
        node = read_device(path, formats=formats)
    except ImportError:  # no linuxpy: the name alone
        return CameraInfo(index, path, _sysfs_name(path))
    except PermissionError:
        return CameraInfo(index, path, _sysfs_name(path), problem=NO_PERMISSION)
    except OSError as exc:
        return CameraInfo(index, path, _sysfs_name(path), problem=f"cannot be read ({exc.strerror or exc})")
    virtual = node.driver == LOOPBACK_DRIVER
    name = node.card or _sysfs_name(path)
    return CameraInfo(index, path, name, node.formats, kind=node.kind, virtual=virtual)


def default_camera() -> str | None:
    """The camera `ffdesk live` opens when none is named: the first capture device that is not
    a virtual camera (which could be fed by this very session), else the first virtual one,
    else "0" where there are video nodes but none that captures (opening it says why); None
    where there is no video node at all."""
    nodes = list_cameras(query=False)
    cameras = [c for c in nodes if not c.kind and not c.problem]
    real = [c for c in cameras if not c.virtual]
    if cameras:
        return str((real or cameras)[0].index)
    return "0" if nodes else None


def list_cameras(*, query: bool = True) -> list[CameraInfo]:
    """The video nodes (`/dev/videoN`) in index order, cameras and others (`kind` says which);
    with `query`, each camera's formats, sizes and rates too."""
    return [describe_node(index, path, formats=query) for index, path in _video_nodes()]


class FrameGrabber:
    """The capture thread ("ffdesk-capture"): reads `camera` continuously and keeps the newest
    frame only. `take()` hands it over (each frame at most once); a frame replaced before it was
    taken counts in `dropped`. The thread ends at `stop()`, when the source ends (`ended`) or
    when the camera fails (`error`, one line); `take` then returns None at once."""

    def __init__(self, camera: Camera) -> None:
        self.camera = camera
        self.dropped = 0
        self.captured = 0
        self.ended = False
        self.error: str | None = None
        self._frame: CapturedFrame | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._close_at_end = False

    def start(self) -> None:
        """Start the thread; the camera must be open."""
        self._thread = threading.Thread(target=self._run, name="ffdesk-capture", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                frame = self.camera.read()
                if frame is None:
                    break
                with self._cond:
                    self.captured += 1
                    if self._frame is not None:
                        self.dropped += 1
                    self._frame = frame
                    self._cond.notify_all()
        except MediaError as exc:
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - the session reports it in one line
            self.error = f"{self.camera.name}: {type(exc).__name__}: {exc}"
        finally:
            with self._cond:
                self.ended = True
                close = self._close_at_end
                self._cond.notify_all()
            if close:  # `stop_and_close` gave up waiting: the camera is this thread's to close
                with contextlib.suppress(Exception):
                    self.camera.close()

    def take(self, timeout: float) -> CapturedFrame | None:
        """The newest frame not yet taken, waiting up to `timeout` s for one; None when none
        came in time or the thread has ended."""
        with self._cond:
            if self._frame is None and not self.ended:
                self._cond.wait(timeout)
            frame, self._frame = self._frame, None
            return frame

    @property
    def pending(self) -> int:
        """Frames captured and not taken yet (0 or 1): in flight, not dropped."""
        with self._cond:
            return int(self._frame is not None)

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread (it finishes the read in progress: at most one frame's time)."""
        self._stop.set()
        if isinstance(self.camera, Interruptible):  # a clip camera waiting for a frame's time
            self.camera.interrupt()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def stop_and_close(self, timeout: float = 5.0) -> None:
        """`stop`, then close the camera, never under a read in progress: when the thread is
        still reading after `timeout` s (a frame decoded on a loaded machine, a device slow to
        answer), the thread closes it as its read returns."""
        self.stop(timeout)
        with self._cond:
            if self._thread is not None and self._thread.is_alive() and not self.ended:
                self._close_at_end = True
                return
        self.camera.close()
