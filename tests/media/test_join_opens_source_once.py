"""The join opens the source once: its container tags (which decide the muxer's options) and its
tracks are read from the same open file."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import av
import numpy as np
import pytest

from ffdesk.media import _errors
from ffdesk.media.decode import VideoReader
from ffdesk.media.encode import EncodeSettings, SegmentEncoder
from ffdesk.media.probe import probe
from ffdesk.media.segments import join_segments

FPS = 10
TAGS = {"com.apple.quicktime.make": "Apple", "com.apple.quicktime.location.ISO6709": "+48.8584+002.2945/"}
"""QuickTime keys: a MOV output holds them only with the muxer option the source's tags call for."""


def _phone_clip(path: Path) -> Path:
    """One second of video and AAC sound in a MOV tagged as a phone tags its clips."""
    with av.open(str(path), "w", options={"movflags": "+use_metadata_tags"}) as out:
        video = out.add_stream("libx264", rate=FPS, options={"preset": "ultrafast"})
        sound = out.add_stream("aac", rate=48000)
        assert isinstance(video, av.VideoStream) and isinstance(sound, av.AudioStream)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        out.metadata.update(TAGS)
        for i in range(FPS):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 20 * i, np.uint8), format="rgb24")
            frame.pts = i
            for p in video.encode(frame):
                out.mux(p)
        for p in video.encode(None):
            out.mux(p)
        samples = np.zeros((2, 48000), np.float32)  # a second of stereo silence
        chunk = sound.codec_context.frame_size or 1024
        for at in range(0, samples.shape[1], chunk):
            piece = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(samples[:, at : at + chunk]), format="fltp"
            )
            piece.sample_rate, piece.pts = 48000, at
            for p in sound.encode(piece):
                out.mux(p)
        for p in sound.encode(None):
            out.mux(p)
    return path


def _segment(clip: Path, path: Path, end_s: float | None = None) -> Path:
    """The clip's video (up to `end_s`) re-encoded as a render's one segment."""
    v = probe(clip).video
    assert v is not None
    enc = SegmentEncoder(
        path, EncodeSettings("h264", mode="preview", hw=False), width=v.display_width,
        height=v.display_height, time_base=v.time_base, fps=v.fps, rotation=v.rotation, color=v,
    )  # fmt: skip
    with VideoReader(clip, end_s=end_s) as reader:
        for frame in reader:
            assert frame.pts is not None
            enc.write(frame.image, frame.pts)
    enc.close()
    return path


def test_the_join_opens_the_source_once_and_its_tags_reach_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _phone_clip(tmp_path / "phone.mov")
    segment = _segment(src, tmp_path / "seg_0000.mp4")
    info = probe(src)
    opened: list[Path] = []
    real_open = _errors.open_input

    @contextmanager
    def counted(path: Path, *, fps: float | None = None) -> Iterator[av.container.InputContainer]:
        opened.append(Path(path))
        with real_open(path, fps=fps) as container:
            yield container

    monkeypatch.setattr(_errors, "open_input", counted)
    out = tmp_path / "out.mov"
    result = join_segments(
        [segment], out_path=out, source=src, source_info=info, start_s=None, end_s=None, encoder="h264"
    )
    assert opened.count(src) == 1  # it was opened a second time, for its tags alone
    assert result.notes == () and len(result.audio) == 1
    with av.open(str(out)) as c:
        got = dict(c.metadata)
        assert len(c.streams.audio) == 1 and len(c.streams.video) == 1
    assert {k: got.get(k) for k in TAGS} == TAGS
