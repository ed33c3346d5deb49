"""Where live frames go: a recording, an MPEG-TS stream over UDP, a virtual camera.

Each takes a `Picture` (an upright RGB frame) with its capture time in seconds (from any fixed
origin: the session's start) through `write(picture, seconds)`, and `close()`. The encoders
share the picture's one conversion to 4:2:0 (`Picture.yuv420p`).

- `Recording`: an ordinary ffdesk H.264 MP4 (`SegmentEncoder`), written beside its final path
  and moved into place on `close()`; audio-free; each frame stamped with its capture time
  (milliseconds), so the file plays at the pace the camera was captured.
- `UdpStream`: MPEG-TS over UDP (`udp://HOST:PORT`) from libx264 tuned for latency (zerolatency
  tune, ultrafast preset: no B-frames, no lookahead, one frame in, one packet out) with a
  keyframe every second, so a viewer that joins late gets a picture within a second.
- `VirtualCamera`: pyvirtualcam (an optional extra, imported when asked for); its absence, or
  the absence of a virtual camera device (v4l2loopback on Linux), is one line saying what to
  install.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from fractions import Fraction
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import av

from ffdesk.errors import MediaError
from ffdesk.media.scaler_input import yuv_frame
from ffdesk.types import Frame

TIME_BASE = Fraction(1, 1000)
"""Capture times are written in milliseconds."""
SWS_BT601 = 5
"""swscale's BT.601 matrix (SWS_CS_ITU601): an untagged output's, as `SegmentEncoder` writes it."""
UDP_PACKET = 1316
"""Seven 188-byte TS packets: what fits an Ethernet frame's payload, as streaming tools send."""
VIRTUALCAM_HINT = "pip install 'ffdesk[virtualcam]'"
LOOPBACK_HINT = (
    "on Linux: install v4l2loopback (e.g. apt install v4l2loopback-dkms) and load it with "
    "`sudo modprobe v4l2loopback exclusive_caps=1`"
)


class Picture:
    """One frame on its way to several outputs: the RGB picture, and its conversion to 4:2:0
    (BT.601, limited range, untagged: what `SegmentEncoder` writes from RGB, by the same
    conversion, rounded to nearest) made once, by the first encoder that asks, whatever the
    number of encoders."""

    __slots__ = ("image", "_yuv")

    def __init__(self, image: Frame) -> None:
        self.image = image
        self._yuv: av.VideoFrame | None = None

    @property
    def size(self) -> tuple[int, int]:
        return int(self.image.shape[1]), int(self.image.shape[0])

    def yuv420p(self) -> av.VideoFrame:
        """The picture in 4:2:0 (even sizes only). Encoders read it, never change its pixels."""
        if self._yuv is None:
            self._yuv = yuv_frame(self.image, "rgb24", "yuv420p", matrix=SWS_BT601, color_range=1)
        return self._yuv

    def resized(self, size: tuple[int, int]) -> Picture:
        """The picture at `size` (itself when it has that size)."""
        if self.size == size:
            return self
        import cv2

        return Picture(cast(Frame, cv2.resize(self.image, size, interpolation=cv2.INTER_AREA)))


class _Stamps:
    """Strictly increasing millisecond stamps from capture times (two frames captured within
    the same millisecond still get different stamps)."""

    def __init__(self) -> None:
        self._last: int | None = None

    def __call__(self, seconds: float) -> int:
        pts = round(seconds * 1000)
        if self._last is not None and pts <= self._last:
            pts = self._last + 1
        self._last = pts
        return pts


class Recording:
    """An H.264 MP4 of the live frames at `path` (`width` x `height`, nominal `fps`), complete
    on `close()` or absent (`abort()`, or a failure while writing)."""

    def __init__(self, path: Path, *, width: int, height: int, fps: float) -> None:
        from ffdesk.media import atomic
        from ffdesk.media.encode import EncodeSettings, SegmentEncoder

        self.path = Path(path)
        self.frames = 0
        atomic.refuse_link(self.path, "the recording")
        self._output = contextlib.ExitStack()
        tmp = self._output.enter_context(atomic.atomic_output(self.path))
        try:
            self._encoder = SegmentEncoder(
                tmp,
                # veryfast's lookahead would hold frames back; ultrafast keeps up beside the swap
                EncodeSettings("h264", mode="preview", preset="ultrafast"),
                width=width,
                height=height,
                time_base=TIME_BASE,
                fps=fps,
                rotation=0,
                color=None,
            )
        except BaseException as exc:
            self._output.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._stamp = _Stamps()
        self._open = True

    def write(self, picture: Picture, seconds: float) -> None:
        encoder = self._encoder
        try:
            if picture.size == (encoder.coded_width, encoder.coded_height):
                encoder.write_frame(picture.yuv420p(), self._stamp(seconds))
            else:  # an odd size: the encoder pads the RGB picture itself
                encoder.write(picture.image, self._stamp(seconds))
        except BaseException:
            self.abort()
            raise
        self.frames += 1

    def close(self) -> None:
        """Finish the file and move it into place (nothing there when no frame was written)."""
        if not self._open:
            return
        self._open = False
        if self.frames == 0:
            self._encoder.abort()
            with contextlib.suppress(Exception):
                self._output.__exit__(MediaError, MediaError("no frame"), None)
            return
        try:
            self._encoder.close()
        except BaseException as exc:
            self._output.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._output.close()

    def abort(self) -> None:
        """Stop and leave nothing at the path."""
        if not self._open:
            return
        self._open = False
        self._encoder.abort()
        with contextlib.suppress(Exception):
            self._output.__exit__(MediaError, MediaError("aborted"), None)


def parse_udp_url(url: str) -> tuple[str, int]:
    """(host, port) of `udp://HOST:PORT`; `MediaError` (one line) for anything else."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "udp" or not parts.hostname or port is None or not 0 < port < 65536:
        raise MediaError(f"--stream {url!r}: give udp://HOST:PORT (e.g. udp://127.0.0.1:5000)")
    return parts.hostname, port


def udp_options(url: str) -> str:
    """The query FFmpeg's UDP protocol is opened with: the options `url` gives (`broadcast=1`,
    `ttl=4`, `localaddr=...`) as given, with MPEG-TS's packet size unless it names its own."""
    given = [part for part in urlsplit(url.strip()).query.split("&") if part]
    if not any(part.split("=", 1)[0] == "pkt_size" for part in given):
        given.append(f"pkt_size={UDP_PACKET}")
    return "&".join(given)


class UdpStream:
    """MPEG-TS (H.264) over UDP to `url` (`udp://HOST:PORT`), `width` x `height` at nominal
    `fps`. `MediaError` (one line) when the host cannot be resolved or the stream not opened."""

    def __init__(self, url: str, *, width: int, height: int, fps: float) -> None:
        host, port = parse_udp_url(url)
        try:
            address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0][4][0]
        except (socket.gaierror, IndexError) as exc:
            raise MediaError(f"--stream {url}: cannot resolve {host} ({exc})") from None
        self.url = url
        self.frames = 0
        self.width, self.height = width + width % 2, height + height % 2
        rate = Fraction(fps).limit_denominator(1001) if fps > 0 else Fraction(30)
        bracket = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
        target = f"udp://{bracket}:{port}?{udp_options(url)}"
        try:
            container = av.open(target, "w", format="mpegts")
        except (av.error.FFmpegError, OSError) as exc:
            raise MediaError(f"--stream {url}: cannot open ({exc})") from None
        self._container = container
        try:
            stream = container.add_stream("libx264", rate=rate)
            stream.width, stream.height = self.width, self.height
            stream.pix_fmt = "yuv420p"
            stream.time_base = TIME_BASE
            cc = stream.codec_context
            cc.time_base = TIME_BASE
            cc.framerate = rate
            cc.gop_size = max(1, round(float(rate)))
            cc.thread_count = 1  # slice threads would add nothing at this size; keep a core free
            stream.options = {"preset": "ultrafast", "tune": "zerolatency", "crf": "23"}
            cc.open()
            container.start_encoding()
        except (av.error.FFmpegError, OSError) as exc:
            self._discard()
            raise MediaError(f"--stream {url}: cannot start the stream ({exc})") from None
        self._stream = stream
        self._stamp = _Stamps()

    def write(self, picture: Picture, seconds: float) -> None:
        frame = picture.resized((self.width, self.height)).yuv420p()
        frame.pts = self._stamp(seconds)
        frame.time_base = TIME_BASE
        try:
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        except (av.error.FFmpegError, OSError) as exc:
            raise MediaError(f"--stream {self.url}: sending failed ({exc})") from None
        self.frames += 1

    def close(self) -> None:
        if self._container is None:
            return
        with contextlib.suppress(av.error.FFmpegError, OSError):
            for packet in self._stream.encode(None):
                self._container.mux(packet)
        self._discard()

    def _discard(self) -> None:
        if self._container is not None:
            with contextlib.suppress(Exception):
                self._container.close()
        self._container = None  # type: ignore[assignment]


class VirtualCamera:
    """A virtual camera (pyvirtualcam) other programs can pick as a webcam, `width` x `height`
    at `fps`. `MediaError` (one line, what to install) without pyvirtualcam or without a
    virtual camera device."""

    def __init__(self, *, width: int, height: int, fps: float) -> None:
        try:
            import pyvirtualcam
        except ImportError:
            raise MediaError(f"a virtual camera needs pyvirtualcam: {VIRTUALCAM_HINT}") from None
        try:
            self._camera: Any = pyvirtualcam.Camera(width=width, height=height, fps=fps, print_fps=False)
        except Exception as exc:  # noqa: BLE001 - each backend raises its own kind
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise MediaError(f"no virtual camera device ({reason}); {LOOPBACK_HINT}") from None
        self.device = str(getattr(self._camera, "device", "") or "")
        self.size = (width, height)
        self.frames = 0

    def write(self, picture: Picture, seconds: float) -> None:
        self._camera.send(picture.resized(self.size).image)
        self.frames += 1

    def close(self) -> None:
        if self._camera is not None:
            with contextlib.suppress(Exception):
                self._camera.close()
        self._camera = None
