"""Audio tracks whose channel layout PyAV 18.1 mishandled, through probe and render.

- A PCM MOV whose `chan` atom lists its channels in an order other than FFmpeg's (ffmpeg's own
  7.1 MOV is tagged MPEG_7_1_C: L R C LFE Ls Rs Rls Rrs; 6.1 and 7.1(wide-side) likewise) opens
  with a layout in custom order, whose channel map PyAV freed twice: the process aborted ("double
  free or corruption", exit 134) in probe and in render.
- A track of more than 8 channels that names no layout (12-channel PCM) was written as stereo:
  six times the samples, and "damaged audio packets skipped".
- A planar track of 8 channels (Opus 7.1) that must be re-encoded: PyAV miscounts the planes of
  such frames (a segfault).

The clips are made here with PyAV; a MOV's `chan` atom is then rewritten in place to the tag
ffmpeg writes (this FFmpeg writes a channel bitmap instead). Every render, and every read of a
file that could crash, runs in a child process, so a crash fails the test instead of ending
pytest. Channel k of n carries a 100 Hz tone at level (k + 1) / (n + 1) (AAC keeps 100 Hz in
its LFE channel too): the output must hold as many channels, at the same levels, in the same
order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from ffdesk.media.audio_plan import AudioChoice, default_layout, plan_audio
from ffdesk.media.channel_layouts import Channels, described

ROOT = Path(__file__).resolve().parents[2]
FPS = 25
FRAMES = 10
RATE = 48000

MPEG_7_1_C = 0x00800008
"""CoreAudio's kAudioChannelLayoutTag_MPEG_7_1_C (L R C LFE Ls Rs Rls Rrs): ffmpeg's 7.1 MOV."""
MPEG_6_1_A = 0x007D0007
"""kAudioChannelLayoutTag_MPEG_6_1_A (L R C LFE Ls Rs Cs): ffmpeg's 6.1 MOV."""
MPEG_7_1_A = 0x007E0008
"""kAudioChannelLayoutTag_MPEG_7_1_A (L R C LFE Ls Rs Lc Rc): ffmpeg's 7.1(wide-side) MOV."""

LEVELS = r"""
import json, sys
import av, numpy as np
from ffdesk.media.channel_layouts import safe_for_arrays, settle
with av.open(sys.argv[1]) as c:
    s = c.streams.audio[0]
    ch = settle(s)
    chunks, packer = [], None
    for f in c.decode(s):
        frames = [f]
        if not safe_for_arrays(f):
            packer = packer or av.AudioResampler(format=f.format.packed.name, layout=f.layout.name,
                                                 rate=f.sample_rate)
            frames = packer.resample(f)
        for g in frames:
            a = g.to_ndarray().astype(np.float64)
            if not g.format.is_planar:
                a = a.reshape(-1, g.layout.nb_channels).T
            a /= {"s16": 2.0**15, "s32": 2.0**31}.get(g.format.packed.name, 1.0)
            chunks.append(a)
    x = np.concatenate(chunks, axis=1)
    middle = x[:, 2400 : x.shape[1] - 2400]
    levels = np.sqrt((middle**2).mean(axis=1)) * 2**0.5
    print(json.dumps({"codec": s.codec_context.name, "channels": ch.count, "labels": list(ch.labels),
                      "levels": [float(v) for v in levels], "samples": int(x.shape[1])}))
"""


def _levels_of(n: int) -> list[float]:
    return [(k + 1) / (n + 1) for k in range(n)]


def _write(path: Path, layout: str, codec: str = "pcm_s24le") -> Path:
    """A clip of FRAMES frames with one audio track of `codec` in `layout` (PyAV, this FFmpeg's
    own way: a layout in its order or a bare count, never a channel map)."""
    out = av.open(str(path), "w")
    vs = out.add_stream("libx264", rate=FPS)
    assert isinstance(vs, av.VideoStream)
    vs.width, vs.height, vs.pix_fmt = 160, 96, "yuv420p"
    vs.options = {"preset": "ultrafast"}
    audio = out.add_stream(codec, rate=RATE)
    assert isinstance(audio, av.AudioStream)
    audio.layout = layout
    n = av.AudioLayout(layout).nb_channels
    for i in range(FRAMES):
        frame = av.VideoFrame.from_ndarray(np.full((96, 160, 3), i * 20, np.uint8), format="rgb24")
        frame.pts, frame.time_base = i, Fraction(1, FPS)
        for p in vs.encode(frame):
            out.mux(p)
    for p in vs.encode(None):
        out.mux(p)
    t = np.arange(RATE * FRAMES // FPS) / RATE
    wave = (np.array(_levels_of(n))[:, None] * np.sin(2 * np.pi * 100 * t)[None, :]).astype(np.float32)
    for start in range(0, wave.shape[1], 960):
        part = np.ascontiguousarray(wave[:, start : start + 960].T).reshape(1, -1)  # packed
        chunk = av.AudioFrame.from_ndarray(part, format="flt", layout=layout)
        chunk.sample_rate, chunk.pts, chunk.time_base = RATE, start, Fraction(1, RATE)
        for p in audio.encode(chunk):
            out.mux(p)
    for p in audio.encode(None):
        out.mux(p)
    out.close()
    return path


def _retag(path: Path, tag: int) -> Path:
    """Rewrite the MOV's `chan` atom from a channel bitmap to the layout tag `tag`, as ffmpeg
    writes it (same size: tag, bitmap 0, no descriptions)."""
    data = bytearray(path.read_bytes())
    at = data.find(b"chan\x00\x00\x00\x00\x00\x01\x00\x00")  # version/flags 0, UseChannelBitmap
    assert at > 0 and data.count(b"chan\x00\x00\x00\x00") == 1
    data[at + 8 : at + 16] = tag.to_bytes(4, "big") + bytes(4)
    path.write_bytes(bytes(data))
    return path


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    """Run Python in a child (from the repository root): a crash there is its exit status."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=280)


def _crashed(run: subprocess.CompletedProcess[str]) -> str:
    return f"exit {run.returncode}; stderr: {run.stderr[-1500:]}"


def _levels(path: Path) -> dict[str, Any]:
    run = _child("-c", LEVELS, str(path))
    assert run.returncode == 0, _crashed(run)
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def _render(clip: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`ffdesk render` of `clip` without a source photo (its flat frames hold no face): the frames
    are decoded and encoded again, the audio planned and muxed as in any render."""
    report = out.with_suffix(".json")
    run = _child(
        "-m", "ffdesk", "render", "-t", str(clip), "-o", str(out), "-q",
        "--video-preset", "ultrafast", "--report", str(report),
    )  # fmt: skip
    assert run.returncode == 0, _crashed(run)
    return run, json.loads(report.read_text())


def _assert_levels(found: dict[str, Any], n: int, tolerance: float) -> None:
    assert found["channels"] == n
    assert found["levels"] == pytest.approx(_levels_of(n), abs=tolerance)
    assert abs(found["samples"] - RATE * FRAMES // FPS) <= 1024  # no doubled or missing samples


@pytest.fixture(scope="module")
def custom_71(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("custom71")
    return _retag(_write(folder / "poly8.mov", "7.1"), MPEG_7_1_C)


@pytest.fixture(scope="module")
def twelve(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("twelve") / "poly12.mov", "12 channels")


# -- the crash: a MOV's channels in custom order ---------------------------------------------


@pytest.mark.parametrize(
    ("layout", "tag", "labels"),
    [
        ("7.1", MPEG_7_1_C, "FL+FR+FC+LFE+SL+SR+BL+BR"),
        ("6.1", MPEG_6_1_A, "FL+FR+FC+LFE+SL+SR+BC"),
        ("7.1(wide-side)", MPEG_7_1_A, "FL+FR+FC+LFE+SL+SR+FLC+FRC"),
    ],
)
def test_probe_reads_a_mov_in_custom_order(tmp_path: Path, layout: str, tag: int, labels: str) -> None:
    clip = _retag(_write(tmp_path / "clip.mov", layout), tag)
    code = "import sys; from ffdesk.media.probe import probe; print(probe(sys.argv[1]).audio[0].channels)"
    run = _child("-c", code, str(clip))
    assert run.returncode == 0, _crashed(run)
    assert run.stdout.strip() == str(av.AudioLayout(layout).nb_channels)
    found = _levels(clip)
    assert "+".join(found["labels"]) == labels  # in custom order: what crashed
    _assert_levels(found, av.AudioLayout(layout).nb_channels, 1e-3)


def test_render_copies_a_custom_order_into_mov_with_its_labels(custom_71: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.mov"
    _, report = _render(custom_71, out)
    assert report["audio"] == ["copy pcm_s24le"] and report["audio_packets_skipped"] == 0
    found = _levels(out)
    assert found["labels"] == ["FL", "FR", "FC", "LFE", "SL", "SR", "BL", "BR"]  # the source's
    _assert_levels(found, 8, 1e-3)


def test_render_reencodes_a_custom_order_to_aac_channel_for_channel(custom_71: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.mp4"
    run, report = _render(custom_71, out)
    assert report["audio"] == ["reencode aac"] and report["audio_packets_skipped"] == 0
    assert "audio track 1: pcm_s24le cannot go into .mp4: re-encoded to AAC" in run.stderr
    found = _levels(out)
    assert found["codec"] == "aac" and found["labels"] == ["FL", "FR", "FC", "LFE", "BL", "BR", "SL", "SR"]
    # each channel keeps its label: the source's SL and SR (its 5th and 6th) are FFmpeg's 7th and
    # 8th (taken by position, the side and back surrounds changed places)
    source = dict(zip(["FL", "FR", "FC", "LFE", "SL", "SR", "BL", "BR"], _levels_of(8), strict=True))
    assert found["levels"] == pytest.approx([source[label] for label in found["labels"]], abs=0.02)
    assert abs(found["samples"] - RATE * FRAMES // FPS) <= 1024


# -- more than 8 channels without a layout ---------------------------------------------------


@pytest.mark.parametrize("suffix", [".mov", ".mkv"])
def test_render_copies_twelve_channels(twelve: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"out{suffix}"
    _, report = _render(twelve, out)
    assert report["audio"] == ["copy pcm_s24le"] and report["audio_packets_skipped"] == 0
    _assert_levels(_levels(out), 12, 1e-3)


def test_render_to_mp4_keeps_twelve_channels_as_pcm_and_says_so(twelve: Path, tmp_path: Path) -> None:
    """AAC takes at most 8 channels (or 16): the 12 go into the MP4 as PCM, in one warning."""
    out = tmp_path / "out.mp4"
    run, report = _render(twelve, out)
    assert report["audio"] == ["reencode pcm_s24le"] and report["audio_packets_skipped"] == 0
    warning = (
        "ffdesk: warning: audio track 1: pcm_s24le cannot go into .mp4, nor can AAC hold its 12 channels "
        "there: re-encoded to PCM (pcm_s24le), which few players read from an MP4 (a .mov output keeps "
        "it for editing apps)"
    )
    assert warning in run.stderr.splitlines()
    found = _levels(out)
    assert found["codec"] == "pcm_s24le"
    _assert_levels(found, 12, 1e-3)


# -- planar frames of 8 channels -------------------------------------------------------------


def test_render_reencodes_planar_opus_71(tmp_path: Path) -> None:
    """Opus decodes to planar float: 8 planes, which PyAV's arrays cannot read as they come."""
    clip = _write(tmp_path / "opus71.mkv", "7.1", codec="libopus")
    out = tmp_path / "out.mov"
    _, report = _render(clip, out)
    assert report["audio"] == ["reencode pcm_s16le"] and report["audio_packets_skipped"] == 0
    _assert_levels(_levels(out), 8, 0.01)


# -- the plan ----------------------------------------------------------------------------------


def test_the_plan_keeps_the_channel_count() -> None:
    twelve = described(12, None)
    assert twelve == Channels(12, (), "12 channels")
    assert default_layout(12) == "12 channels"  # not "stereo"
    assert plan_audio("pcm_s24le", 24, ".mov", twelve) == AudioChoice("copy", "pcm_s24le", None)
    assert plan_audio("pcm_s24le", 24, ".mp4", twelve).layout == "7.1.4"
    assert plan_audio("pcm_s16le", 16, ".mp4", described(16, None)).layout == "hexadecagonal"  # AAC's 16
    webm = plan_audio("pcm_s24le", 24, ".webm", twelve)
    assert webm.action == "drop" and webm.reason and "12 channels" in webm.reason
    custom = described(8, "FL+FR+FC+LFE+SL+SR+BL+BR")
    assert custom.layout == "8 channels" and custom.description == "FL+FR+FC+LFE+SL+SR+BL+BR"
    assert plan_audio("pcm_s24le", 24, ".mp4", custom).layout == "7.1"  # taken channel for channel
    assert plan_audio("pcm_s24le", 24, ".mov", custom).layout is None  # copied with its labels
    assert plan_audio("pcm_s16le", 16, ".mov", described(2, None)).layout == "stereo"  # as before
