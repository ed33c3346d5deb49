from __future__ import annotations

from pathlib import Path

import numpy as np
import skimage.data

from ffdesk.media.decode import VideoReader
from ffdesk.media.probe import probe
from ffdesk.media.synth import draw_frame, frame_index_of, has_red_corner, synth_clip


def test_bar_code_round_trip() -> None:
    for i in (0, 1, 5, 100, 4095):
        img = draw_frame(i, 160, 96)
        assert frame_index_of(img) == i
        assert has_red_corner(img)
    assert not has_red_corner(np.ascontiguousarray(np.rot90(draw_frame(3, 160, 96))))


def test_face_is_pasted_and_moves(tmp_path: Path) -> None:
    face = skimage.data.astronaut()
    a = draw_frame(0, 320, 180, face_image=face, total=10)
    b = draw_frame(4, 320, 180, face_image=face, total=10)
    plain = draw_frame(0, 320, 180)
    assert np.abs(a.astype(int) - plain.astype(int)).mean() > 10  # the face is there
    centre = (slice(60, 120), slice(130, 190))
    assert np.abs(a[centre].astype(int) - b[centre].astype(int)).mean() > 5  # and it moves
    clip = synth_clip(tmp_path / "face.mp4", width=320, height=180, frames=4, face_image=face)
    with VideoReader(clip.path) as reader:
        assert [frame_index_of(f.image) for f in reader] == [0, 1, 2, 3]


def test_synth_audio_lasts_as_long_as_video(tmp_path: Path) -> None:
    clip = synth_clip(tmp_path / "a.mov", frames=10, audio_streams=2, audio_codec="pcm_s16le")
    info = probe(clip.path)
    assert len(info.audio) == 2
    assert all(abs(a.duration_s - 0.4) < 0.05 for a in info.audio)
