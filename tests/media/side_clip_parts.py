"""Parts of the test clips with side streams (subtitle tracks, a telemetry track, a font, chapters)
that the side-stream and probe tests write with PyAV."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import av

from ffdesk.media.side_streams import cue_payload

MS = Fraction(1, 1000)


def cue_bytes(codec: str, text: str, n: int) -> bytes:
    """The `n`th cue of a subtitle track of `codec` holding `text` (an ASS event in italics, a
    DVB bitmap's bytes, else ffdesk's own payload of the codec)."""
    if codec == "ass":
        return f"{n},0,Default,,0,0,0,,{{\\i1}}{text}{{\\i0}}".encode()
    if codec == "dvb_subtitle":
        return bytes([0x20, 0x00, 0x0F]) + bytes(20)
    return cue_payload(codec, text)


def subtitle_stream(out: av.container.OutputContainer, codec: str, header: bytes) -> av.stream.Stream:
    """A subtitle track of `codec` (mov_text is encoded, with `header`; others are muxed as they are)."""
    if codec != "mov_text":
        return out.add_mux_stream(codec)
    stream = out.add_stream("mov_text")
    assert isinstance(stream.codec_context, av.subtitles.codeccontext.SubtitleCodecContext)
    stream.codec_context.subtitle_header = header
    return stream


def telemetry_stream(out: av.container.OutputContainer) -> av.stream.Stream:
    """A data track named as a GoPro's telemetry is, in milliseconds."""
    data = out.add_data_stream("bin_data")
    data.time_base = MS
    data.metadata["handler_name"] = "GoPro MET"
    return data


def add_font(out: av.container.OutputContainer) -> None:
    """A font attachment, as anime releases carry for their styled subtitles."""
    out.add_attachment("Caption.ttf", "font/ttf", b"\x00\x01\x00\x00" + bytes(60))


def set_chapters(out: av.container.OutputContainer, chapters: Sequence[tuple[float, float, str]]) -> None:
    """Chapters (start s, end s, title), in milliseconds."""
    out.set_chapters(
        [
            {
                "id": i + 1,
                "start": int(a * 1000),
                "end": int(b * 1000),
                "time_base": MS,
                "metadata": {"title": name},
            }
            for i, (a, b, name) in enumerate(chapters)
        ]
    )
