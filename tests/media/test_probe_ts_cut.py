"""A transport stream cut off part-way (a copy or download that stopped) is called truncated by
`probe`, and so by a render, which used to write the frames that were there without a word.
A TS has no index and records no length, but every muxer writes whole packets: a file that ends
inside one was cut. Whole files (188-byte TS, 192-byte M2TS, 204-byte DVB packets, a TS padded
with zeros) are never called truncated."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk import cli
from ffdesk.media.probe import probe, ts_cut_short

FRAMES = 40


def _ts(path: Path, *, m2ts: bool = False) -> Path:
    """A 40-frame 25 frames/s H.264 clip with AAC audio in MPEG-TS (`m2ts`: 192-byte packets)."""
    options = {"mpegts_m2ts_mode": "1"} if m2ts else {}
    with av.open(str(path), "w", format="mpegts", options=options) as out:
        video = out.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        audio = out.add_stream("aac", rate=48000)
        assert isinstance(audio, av.AudioStream)
        audio.layout = "mono"
        for i in range(FRAMES):
            picture = np.full((48, 64, 3), (i * 7) % 256, np.uint8)
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts = i
            out.mux(video.encode(frame))
            tone = av.AudioFrame.from_ndarray(np.zeros((1, 1920), np.float32), format="fltp", layout="mono")
            tone.sample_rate, tone.pts = 48000, i * 1920
            out.mux(audio.encode(tone))
        out.mux(video.encode(None))
        out.mux(audio.encode(None))
    return path


def _with_reed_solomon(ts: Path, path: Path) -> Path:
    """`ts` with 16 bytes after each 188-byte packet, as DVB's 204-byte packets carry them."""
    data = ts.read_bytes()
    path.write_bytes(b"".join(data[i : i + 188] + bytes(16) for i in range(0, len(data), 188)))
    return path


PACKET = {"ts": 188, "m2ts": 192, "dvb": 204}


def _cut(whole: Path, path: Path, packet: int) -> Path:
    """The first half of `whole`, ending 100 bytes into a packet (`packet` bytes long)."""
    data = whole.read_bytes()
    path.write_bytes(data[: packet * (len(data) // packet // 2) + 100])
    return path


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ts")
    ts = _ts(folder / "whole.ts")
    return {
        "ts": ts,
        "m2ts": _ts(folder / "whole.m2ts", m2ts=True),
        "dvb": _with_reed_solomon(ts, folder / "dvb.ts"),
    }


@pytest.mark.parametrize("kind", ["ts", "m2ts", "dvb"])
def test_a_whole_transport_stream_is_not_called_truncated(clips: dict[str, Path], kind: str) -> None:
    whole = clips[kind]
    size = whole.stat().st_size
    assert size % PACKET[kind] == 0
    assert not ts_cut_short(whole)
    info = probe(whole)
    assert info.container == "mpegts" and info.warnings == ()


@pytest.mark.parametrize("kind", ["ts", "m2ts", "dvb"])
def test_a_transport_stream_cut_inside_a_packet_is_called_truncated(
    clips: dict[str, Path], kind: str, tmp_path: Path
) -> None:
    cut = _cut(clips[kind], tmp_path / f"cut.{kind}", PACKET[kind])
    assert ts_cut_short(cut)
    (warning,) = probe(cut).warnings
    assert warning.startswith(f"cut.{kind}: truncated file (it stops part-way through a transport stream")
    assert "rendering the frames that are there" in warning


def test_a_transport_stream_padded_or_followed_by_other_bytes_is_not_called_truncated(
    clips: dict[str, Path], tmp_path: Path
) -> None:
    data = clips["ts"].read_bytes()
    padded = tmp_path / "padded.ts"
    padded.write_bytes(data + bytes(100))  # zeros after the last packet: no sync byte
    assert not ts_cut_short(padded) and probe(padded).warnings == ()
    short = tmp_path / "short.ts"
    short.write_bytes(data[: 188 * 3 + 50])  # too few packets to know their size by
    assert not ts_cut_short(short)


def test_an_m2ts_cut_inside_a_packets_arrival_time_is_not_guessed_at(
    clips: dict[str, Path], tmp_path: Path
) -> None:
    # no sync byte after the last whole packet confirms the cut: nothing is said rather than a guess
    data = clips["m2ts"].read_bytes()
    cut = tmp_path / "cut.m2ts"
    cut.write_bytes(data[: 192 * (len(data) // 384) + 3])
    assert not ts_cut_short(cut)


def test_a_render_of_a_cut_transport_stream_warns(
    clips: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = _cut(clips["ts"], tmp_path / "cut.ts", 188)
    assert cli.main(["render", "-t", str(cut), "-o", str(tmp_path / "out.mp4"), "-q"]) == 0
    err = capsys.readouterr().err
    assert "cut.ts: truncated file (it stops part-way through a transport stream packet" in err
    with av.open(str(tmp_path / "out.mp4")) as out:
        assert 0 < out.streams.video[0].frames < FRAMES
