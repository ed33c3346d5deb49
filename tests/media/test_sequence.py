"""Image sequences as targets: a printf pattern or a folder of numbered frames."""

from __future__ import annotations

from pathlib import Path

import cv2
import pytest

from ffdesk.errors import MediaError
from ffdesk.media.decode import VideoReader
from ffdesk.media.probe import probe
from ffdesk.media.sequence import find_sequence
from ffdesk.media.synth import draw_frame, frame_index_of
from ffdesk.runtime.env import RuntimeEnv


def _frames(folder: Path, numbers: range, name: str = "shot_{:04d}.png") -> None:
    folder.mkdir(exist_ok=True)
    for i, n in enumerate(numbers):
        cv2.imwrite(str(folder / name.format(n)), draw_frame(i, 96, 64)[..., ::-1])


def test_a_folder_of_numbered_frames_is_a_clip_at_24_fps(tmp_path: Path) -> None:
    _frames(tmp_path / "shots", range(100, 112))
    (tmp_path / "shots" / "notes.txt").write_text("not a frame")
    seq = find_sequence(tmp_path / "shots")
    assert seq is not None and seq.start_number == 100 and seq.count == 12
    assert seq.pattern.name == "shot_%04d.png"
    info = probe(tmp_path / "shots")
    assert info.video is not None and info.video.frame_count == 12 and info.video.fps == 24.0
    with VideoReader(tmp_path / "shots") as reader:
        assert [frame_index_of(f.image) for f in reader] == list(range(12))


def test_a_pattern_with_a_frame_rate(tmp_path: Path) -> None:
    _frames(tmp_path / "s", range(0, 10), "f{:06d}.tif")
    pattern = tmp_path / "s" / "f%06d.tif"
    info = probe(pattern, fps=30)
    assert info.video is not None and info.video.fps == 30.0 and info.video.frame_count == 10
    with VideoReader(pattern, sequence_fps=30, start_s=0.2) as reader:
        frames = list(reader)
    assert [frame_index_of(f.image) for f in frames] == list(range(6, 10))


@pytest.mark.parametrize(
    ("numbers", "target", "fragment"),
    [
        (range(0, 5), "x_%04d.png", "no frames match"),
        ((0, 1, 3), "shot_%04d.png", "shot_0002.png: frame missing"),
    ],
)
def test_bad_sequences_are_one_line(tmp_path: Path, numbers: range, target: str, fragment: str) -> None:
    _frames(tmp_path / "s", numbers)  # type: ignore[arg-type]
    with pytest.raises(MediaError, match=fragment):
        probe(tmp_path / "s" / target)


def test_an_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "e").mkdir()
    with pytest.raises(MediaError, match="no numbered frames"):
        probe(tmp_path / "e")


def test_a_folder_renders_to_a_clip_at_the_given_rate(run_env: RuntimeEnv, tmp_path: Path) -> None:
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    _frames(tmp_path / "shots", range(1, 13))
    out = tmp_path / "out.mp4"
    report = run_render(RenderJob(target=tmp_path / "shots", output=out, fps=30.0), env=run_env)
    assert report.frames_out == 12
    info = probe(out)
    assert info.video is not None and info.video.fps == pytest.approx(30.0)
    assert abs(info.duration_s - 12 / 30) < 1 / 30 + 1e-6
    with VideoReader(out) as reader:
        assert [frame_index_of(f.image) for f in reader] == list(range(12))


def test_a_file_named_like_a_pattern_is_that_file(run_env: RuntimeEnv, tmp_path: Path) -> None:
    """`clip%03d.mp4` that is there is a clip, not a frame pattern ("no frames match this
    pattern" before)."""
    from ffdesk.media.sequence import is_sequence_path
    from ffdesk.media.synth import synth_clip
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    clip = tmp_path / "clip%03d.mp4"
    synth_clip(clip, width=64, height=48, fps=25, frames=5)
    assert not is_sequence_path(clip) and find_sequence(clip) is None
    assert probe(clip).video is not None
    report = run_render(RenderJob(target=clip, output=tmp_path / "out%d.mp4"), env=run_env)
    assert report.frames_out == 5 and (tmp_path / "out%d.mp4").is_file()
    assert is_sequence_path(tmp_path / "frame_%04d.png")  # one that is not there is still a pattern
