"""Read an audio stream's channel layout once, safely, and hand PyAV only layouts it can copy.

PyAV 18.1 copies FFmpeg's AVChannelLayout by value (a shallow copy) wherever it reads one
(`AudioCodecContext.layout` and `.channels`, every decoded `AudioFrame`, `AudioLayout(layout)`)
or sets one (`codec_context.layout = x`, `AudioFrame(layout=...)`), and an `AudioLayout` frees
the layout it holds when it goes (`av_channel_layout_uninit`). A layout in FFmpeg's native order
(a channel mask) or of unspecified order (a count) owns no memory, so that is harmless. A layout
in custom order owns its channel map (`u.map`): the first `AudioLayout` to go frees the map that
the codec context (or frame) still points at, and FFmpeg frees it again when it closes them:
"double free or corruption", the process aborts. A MOV whose `chan` atom lists its channels in
an order other than FFmpeg's (ffmpeg's own 7.1 MOV: MPEG_7_1_C, L R C LFE Ls Rs Rls Rrs; 6.1;
7.1(wide-side)) opens with such a layout.

`settle(stream)` reads the input stream's layout once, keeps what it says (`Channels`), and puts
a layout without a channel map in the stream's codec context at once: the same layout where it
is in FFmpeg's order (as a mask), else the same count with no order ("8 channels", the channels
in the file's order). The one `AudioLayout` read then owns the map, which nothing else points
at, and frees it once. Every decoded frame carries the map-free layout. Call it right after the
file is opened, before anything reads the layout or the channel count or decodes the stream;
after it, those reads are safe. A copied stream (`add_stream_from_template`) takes its layout
from the source's stream parameters, not from the codec context, so it keeps the file's channel
labels; nothing may read that output stream's layout through PyAV.

A decoder that sets a custom-order layout of its own while decoding would still trip PyAV on
its frames, out of ffdesk's reach; PCM keeps the layout it is given, and the usual FFmpeg
decoders (AAC's standard configurations, AC-3, FLAC, Opus, Vorbis) set native or count-only ones.

PyAV's `AudioFrame.planes` (and so `to_ndarray`/`from_ndarray`) also miscounts the planes of a
planar frame of 8 channels or more: `safe_for_arrays` says whether a frame can be read as an array.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import av

__all__ = ["Channels", "settle", "described", "named_layouts", "safe_for_arrays"]

_COUNT_ONLY = re.compile(r"(\d+) channels?")
"""FFmpeg's name for a layout that gives only a count (unspecified order)."""
_UNNAMED = re.compile(r"\d+ channels? \(.*\)")
"""FFmpeg's name for a layout it has no name for: "8 channels (FL+FR+FC+LFE+SL+SR+BL+BR)"."""

_NAMED = (
    "mono", "stereo", "2.1", "3.0", "3.0(back)", "4.0", "quad", "quad(side)", "3.1", "5.0",
    "5.0(side)", "4.1", "5.1", "5.1(side)", "6.0", "6.0(front)", "3.1.2", "hexagonal", "6.1",
    "6.1(back)", "6.1(front)", "7.0", "7.0(front)", "7.1", "7.1(wide)", "7.1(wide-side)", "5.1.2",
    "5.1.2(back)", "octagonal", "cube", "5.1.4", "5.1.4(back)", "7.1.2", "7.1.4", "7.2.3", "9.1.4",
    "9.1.6", "hexadecagonal", "22.2",
)  # fmt: skip
"""FFmpeg's named layouts (`av_channel_layout_from_string` names; all in its own order)."""


@dataclass(frozen=True)
class Channels:
    """What an audio stream's layout says, read once (see `settle`)."""

    count: int
    """Channels in the stream; 0 where FFmpeg has no decoder for it (nothing read)."""
    labels: tuple[str, ...] = ()
    """FFmpeg's name of each channel, in the stream's order ("FL", "FR", "FC", ...); empty where
    the file gives only a count."""
    layout: str = ""
    """A layout string for PyAV with `count` channels and no channel map: where the stream's
    channels are in FFmpeg's order, FFmpeg's name of its layout ("5.1", "hexadecagonal") or its
    channels' ("FL+FR+LFE+BC"); else the count alone ("8 channels": the channels in the file's
    order, unlabelled)."""

    @property
    def named(self) -> bool:
        """Whether `layout` labels the channels (False: a count only)."""
        return _COUNT_ONLY.fullmatch(self.layout) is None

    def native_order(self) -> tuple[str, tuple[int, ...]] | None:
        """For channels labelled in an order other than FFmpeg's own (a MOV's custom 7.1: FL FR
        FC LFE SL SR BL BR): the layout of the same channels in FFmpeg's order ("7.1"), and, for
        each of its channels, that channel's index in the stream; None where the stream's
        channels are unlabelled, already in that order, or not distinct FFmpeg channels. A
        re-encode takes the channels in that order, so each keeps its label (taken by position,
        the side and back surrounds of a custom 7.1 changed places)."""
        if self.named or len(self.labels) != self.count:
            return None
        bits = _channel_bits()
        if any(label not in bits for label in self.labels) or len(set(self.labels)) != self.count:
            return None
        order = tuple(sorted(range(self.count), key=lambda i: bits[self.labels[i]]))
        return _channels(self.count, tuple(self.labels[i] for i in order)).layout, order

    @property
    def description(self) -> str | None:
        """The layout as the file gives it, for a person: "5.1", "FL+FR+FC+LFE+SL+SR+BL+BR" (an
        order FFmpeg has no name for); None where the file gives only a count."""
        if self.named:
            return self.layout
        if self.labels:
            return "+".join(self.labels)
        return None


def settle(stream: av.AudioStream) -> Channels:
    """Read `stream`'s channel layout once and leave its codec context a layout without a channel
    map (see the module's note). Call it before the stream is decoded (an open decoder's layout
    is left as it is). Safe to call again on the same stream: it then finds the layout it left
    (labels in a custom order are no longer known)."""
    ctx = stream.codec_context
    if ctx is None:  # no decoder: nothing in PyAV reads this stream's layout
        return Channels(0)
    read = ctx.layout  # the one read: from here on, this object owns a custom layout's map
    count = int(read.nb_channels)
    settable = count > 0 and not ctx.is_open  # (an open context was settled before it opened)
    if settable:
        # First of all: the setter replaces the context's struct, the pointer to a custom map
        # included, without freeing anything; `read` frees that map once, when it goes.
        ctx.layout = f"{count} channels"
    labels = tuple(str(ch.name) for ch in read.channels)
    unlabelled = _COUNT_ONLY.fullmatch(str(read.name)) is not None
    del read
    channels = _channels(count, () if unlabelled else labels)
    if settable and channels.named:
        ctx.layout = channels.layout  # FFmpeg's order: a mask, no map either
    return channels


def described(count: int, description: str | None) -> Channels:
    """`Channels` again from a count and its `Channels.description` (a report's), read from no
    stream."""
    if not description:
        return _channels(count, ())
    if "+" in description:
        return _channels(count, tuple(description.split("+")))
    if _COUNT_ONLY.fullmatch(description) or _UNNAMED.fullmatch(description):
        return _channels(count, ())
    try:  # one of FFmpeg's names: all are in its own order, without a channel map
        layout = av.AudioLayout(description)
    except ValueError:
        return _channels(count, ())
    return _channels(count, tuple(str(ch.name) for ch in layout.channels))


def _channels(count: int, labels: tuple[str, ...]) -> Channels:
    """`Channels` of `count` channels labelled `labels` (empty or "NONE": no labels)."""
    if count <= 0:
        return Channels(0)
    if len(labels) != count or any(label in ("NONE", "") for label in labels):
        labels = ()
    mask = _native_mask(labels)
    if mask is None:
        return Channels(count, labels, f"{count} channels")
    name = str(av.AudioLayout(f"0x{mask:x}").name)  # a mask: native, without a map
    return Channels(count, labels, "+".join(labels) if _UNNAMED.fullmatch(name) else name)


@lru_cache(maxsize=64)
def named_layouts(count: int) -> tuple[str, ...]:
    """FFmpeg's named layouts of `count` channels ("7.1", "7.1(wide)", "octagonal", ... for 8)."""
    found: list[str] = []
    for name in _NAMED:
        try:
            if av.AudioLayout(name).nb_channels == count:
                found.append(name)
        except ValueError:  # a name this FFmpeg does not know
            continue
    return tuple(found)


def safe_for_arrays(frame: av.AudioFrame) -> bool:
    """Whether PyAV reads `frame`'s samples right (`to_ndarray`, `planes`): packed frames, and
    planar ones of fewer than 8 channels (it looks for the planes' end past FFmpeg's 8 data
    pointers, finding planes that are not there)."""
    return not frame.format.is_planar or frame.layout.nb_channels < 8


def _native_mask(labels: tuple[str, ...]) -> int | None:
    """FFmpeg's channel mask for `labels` where they are distinct channels in FFmpeg's own order
    (a layout it keeps as a mask, without a channel map); None otherwise."""
    if not labels:
        return None
    bits = _channel_bits()
    mask = 0
    last = -1
    for label in labels:
        bit = bits.get(label)
        if bit is None or bit <= last:
            return None
        mask |= 1 << bit
        last = bit
    return mask


@lru_cache(maxsize=1)
def _channel_bits() -> dict[str, int]:
    """FFmpeg's bit for each channel name ("FL": 0, "FR": 1, ...), asked of FFmpeg itself: a
    one-bit mask ("0x1") parses to a native layout, which owns no map."""
    bits: dict[str, int] = {}
    for bit in range(64):
        channels = av.AudioLayout(f"0x{1 << bit:x}").channels
        name = str(channels[0].name) if channels else ""
        if name and not name.startswith("USR") and name not in bits:
            bits[name] = bit
    return bits
