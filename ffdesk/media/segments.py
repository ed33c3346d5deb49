"""Join finished segments into the output: video packets remuxed in order, audio copied from the source."""

from __future__ import annotations

import heapq
import os
import shutil
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import cast

import av

from ffdesk.errors import MediaError
from ffdesk.media import _errors
from ffdesk.media.atomic import raise_if_disk_full
from ffdesk.media.encode import PNG_PATTERN
from ffdesk.media.probe import MediaInfo

_Item = tuple[float, int, av.Packet, av.stream.Stream]
"""(dts in seconds, tie-breaker, packet, output stream) for the time-ordered merge."""


def join_segments(
    segments: list[Path],
    *,
    out_path: Path,
    source: Path,
    source_info: MediaInfo,
    start_s: float | None,
    end_s: float | None,
    encoder: str,
) -> None:
    """Write `out_path` from the segments (in order) plus every audio stream of `source`.

    Video packets are copied without re-encoding; their timestamps are kept (shifted so the
    output starts at 0 when `start_s` is given). Audio is trimmed to the span the video covers
    ([first frame, end_s)), shifted by the same offset so it stays in sync, and copied packet
    for packet; a codec the output container refuses is re-encoded to AAC. Streams are
    interleaved by time. For png, `out_path` becomes a folder holding the segments' frames
    renumbered frame_000000.png, frame_000001.png, ... (hard links where possible, so the
    segments stay intact until the caller discards them).
    """
    out_path = Path(out_path)
    if not segments:
        raise MediaError(f"{out_path}: nothing to join (no segments)")
    if encoder == "png":
        _join_png(segments, out_path)
        return
    try:
        _join_video(segments, out_path, Path(source), source_info, start_s, end_s)
    except OSError as exc:
        _cleanup(out_path)
        raise_if_disk_full(exc, out_path)
        raise MediaError(f"{out_path}: cannot write ({exc.strerror or exc})") from exc
    except BaseException:
        _cleanup(out_path)
        raise


def _cleanup(path: Path) -> None:
    if path.is_file():
        path.unlink(missing_ok=True)


def _join_png(segments: list[Path], out_path: Path) -> None:
    out_path.mkdir(parents=False, exist_ok=False)
    n = 0
    try:
        for seg in segments:
            for frame in sorted(Path(seg).glob("frame_*.png")):
                target = out_path / (PNG_PATTERN % n)
                try:
                    os.link(frame, target)
                except OSError:
                    shutil.copy2(frame, target)
                n += 1
    except OSError as exc:
        shutil.rmtree(out_path, ignore_errors=True)
        raise_if_disk_full(exc, out_path)
        raise MediaError(f"{out_path}: cannot write ({exc.strerror or exc})") from exc
    except BaseException:
        shutil.rmtree(out_path, ignore_errors=True)
        raise
    if n == 0:
        shutil.rmtree(out_path, ignore_errors=True)
        raise MediaError(f"{out_path}: the segments hold no frames")


def _first_frame_time(segment: Path) -> float:
    """Presentation time (seconds) of the earliest frame in a segment file."""
    with _errors.open_input(segment) as c:
        vs = c.streams.video[0]
        times = [
            float(p.pts * p.time_base)
            for p in c.demux(vs)
            if p.pts is not None and p.size > 0 and p.time_base is not None
        ]
    if not times:
        raise MediaError(f"{segment}: segment holds no video frames")
    return min(times)


def _join_video(
    segments: list[Path],
    out_path: Path,
    source: Path,
    info: MediaInfo,
    start_s: float | None,
    end_s: float | None,
) -> None:
    video = info.video
    origin = video.start_time_s if video is not None else 0.0
    first_t = _first_frame_time(segments[0])
    shift = first_t if start_s is not None else 0.0
    audio_from = first_t if start_s is not None else None
    audio_to = origin + end_s if end_s is not None else None

    with av.open(str(out_path), "w") as out:
        with _errors.open_input(segments[0]) as c0:
            template = c0.streams.video[0]
            vout = out.add_stream_from_template(template)
            vout.time_base = template.time_base
        with _errors.open_input(source) as src:
            # a stream FFmpeg knows no codec for can be neither copied nor converted: left out
            audio_in = [a for a in src.streams.audio if a.codec_context is not None]
            plans = [_plan_audio(out, a) for a in audio_in]
            streams: list[Iterator[_Item]] = [_video_packets(segments, vout, shift)]
            if audio_in:
                streams.append(_audio_packets(src, plans, shift, audio_from, audio_to))
            for _, _, packet, stream in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
                packet.stream = stream
                _mux(out, packet)
            for plan in plans:
                plan.flush(out)
    _fsync(out_path)


def _mux(out: av.container.OutputContainer, packet: av.Packet) -> None:
    out.mux(packet)


def _fsync(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _video_packets(segments: list[Path], vout: av.stream.Stream, shift_s: float) -> Iterator[_Item]:
    """Every video packet of the segments in order, with dts kept strictly increasing.

    Each segment was encoded on its own, so the decode-order timestamps the encoder derived for
    the first B-frame-delayed packets of a segment can fall at or below the last dts of the
    previous one (variable frame rate especially). Such a dts is raised just above the previous
    one; it never needs to pass the packet's pts because pts only grow from segment to segment.
    """
    last_dts_s: float | None = None
    order = 0
    for seg in segments:
        with _errors.open_input(seg) as c:
            vs = c.streams.video[0]
            tb = Fraction(vs.time_base or Fraction(1, 90000))
            shift = round(shift_s / tb)
            for packet in c.demux(vs):
                if packet.size == 0 or packet.pts is None:
                    continue
                pts = packet.pts - shift
                dts = (packet.dts if packet.dts is not None else packet.pts) - shift
                if last_dts_s is not None and float(dts * tb) <= last_dts_s:
                    dts = int(last_dts_s / tb) + 1
                    while float(dts * tb) <= last_dts_s:
                        dts += 1
                    dts = min(dts, pts)
                packet.pts, packet.dts = pts, dts
                last_dts_s = float(dts * tb)
                order += 1
                yield (last_dts_s, order, packet, vout)


class _AudioPlan:
    """How one source audio stream reaches the output: copied packets or re-encoded to AAC."""

    def __init__(self, out: av.container.OutputContainer, src: av.AudioStream) -> None:
        self.src = src
        self.copy = src.codec_context.name in out.supported_codecs
        self.encoder: av.AudioStream | None = None
        self.resampler: av.AudioResampler | None = None
        self.next_pts = 0
        if self.copy:
            self.out_stream = out.add_stream_from_template(src)
            self.out_stream.time_base = src.time_base
        else:
            rate = src.codec_context.sample_rate or 48000
            enc = cast(av.AudioStream, out.add_stream("aac", rate=rate))
            enc.layout = src.codec_context.layout.name if src.codec_context.channels else "stereo"
            enc.time_base = Fraction(1, rate)
            self.encoder = enc
            self.out_stream = enc
            self.resampler = av.AudioResampler(format="fltp", layout=enc.layout, rate=rate)
        lang = src.metadata.get("language")
        if lang:
            self.out_stream.metadata["language"] = lang

    def reencode(self, packet: av.Packet, shift_s: float) -> list[av.Packet]:
        assert self.encoder is not None and self.resampler is not None
        out: list[av.Packet] = []
        for frame in self.src.decode(packet):
            if self.next_pts == 0 and frame.pts is not None and frame.time_base is not None:
                start = float(frame.pts * frame.time_base) - shift_s
                self.next_pts = max(0, round(start * self.encoder.rate))
            frame.pts = None
            for res in self.resampler.resample(frame):
                res.pts = self.next_pts
                res.time_base = Fraction(1, self.encoder.rate)
                self.next_pts += res.samples
                out.extend(self.encoder.encode(res))
        return out

    def flush(self, out: av.container.OutputContainer) -> None:
        if self.encoder is None or self.resampler is None:
            return
        for res in self.resampler.resample(None):
            res.pts = self.next_pts
            self.next_pts += res.samples
            for p in self.encoder.encode(res):
                out.mux(p)
        for p in self.encoder.encode(None):
            out.mux(p)


def _plan_audio(out: av.container.OutputContainer, src: av.AudioStream) -> _AudioPlan:
    return _AudioPlan(out, src)


def _audio_packets(
    src: av.container.InputContainer,
    plans: list[_AudioPlan],
    shift_s: float,
    from_s: float | None,
    to_s: float | None,
) -> Iterator[_Item]:
    """Audio packets of the source inside [from_s, to_s), shifted by `shift_s`, in file order."""
    by_index = {p.src.index: p for p in plans}
    order = 0
    eps = 1e-6
    for packet in src.demux(*[p.src for p in plans]):
        if packet.size == 0 or packet.time_base is None:
            continue
        plan = by_index[packet.stream.index]
        tb = Fraction(packet.time_base)
        ts = packet.pts if packet.pts is not None else packet.dts
        if ts is None:
            continue
        t = float(ts * tb)
        if from_s is not None and t < from_s - eps:
            continue
        if to_s is not None and t >= to_s - eps:
            continue
        if plan.copy:
            shift = round(shift_s / tb)
            if packet.pts is not None:
                packet.pts -= shift
            if packet.dts is not None:
                packet.dts -= shift
            order += 1
            when = float((packet.dts if packet.dts is not None else ts) * tb)
            yield (when, order, packet, plan.out_stream)
        else:
            for out_packet in plan.reencode(packet, shift_s):
                order += 1
                otb = Fraction(out_packet.time_base or Fraction(1, plan.encoder.rate))  # type: ignore[union-attr]
                when = float((out_packet.dts if out_packet.dts is not None else 0) * otb)
                yield (when, order, out_packet, plan.out_stream)
