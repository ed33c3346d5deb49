"""`ffdesk bench quality --clips DIR --source FACE`: coverage, flicker, flashes and identity per clip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ffdesk import cli
from ffdesk.bench.quality import FrameFaces, dlib_judge, flicker
from ffdesk.runtime.resources import resource_path
from ffdesk.types import Frame
from tests.clip_writer import write_h264
from tests.faces import photos

SOURCE = resource_path("sample", "grace_hopper.jpg")


def _write(path: Path, frames: list[Frame], fps: int = 25) -> Path:
    return write_h264(path, frames, fps=fps, crf=16)


def test_flicker_counts_transitions_per_track_and_short_tracks() -> None:
    on_off_on = [FrameFaces(i, (0,), (0,) if i not in (4, 5) else ()) for i in range(10)]
    flash = [FrameFaces(i, (0, 1), (0, 1) if i < 12 else (0,)) for i in range(10, 20)]
    tracks, transitions, seconds, short = flicker(on_off_on + flash, fps=10.0)
    assert tracks == 2
    assert transitions == 2 + 1  # track 0 goes off and on; track 1 goes off once
    assert seconds == pytest.approx(3.0)  # 20 frames of track 0, 10 of track 1, at 10 frames/s
    assert short == 1  # track 1 was swapped in 2 frames only
    assert flicker([FrameFaces(0, (), ())], 25.0) == (0, 0, 0.0, 0)


def test_bench_quality_reports_each_clip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FFDESK_BENCH_HISTORY", str(tmp_path / "history.jsonl"))
    clips = tmp_path / "clips"
    clips.mkdir()
    empty = photos.background(320, 240, seed=5)
    _write(clips / "a_no_face.mp4", [empty] * 10)
    face = photos.place(empty, photos.astronaut(), 40, 0, 240)
    _write(clips / "b_face.mp4", [np.roll(face, i, axis=1) for i in range(12)])
    (clips / "notes.txt").write_text("not a clip")
    out = tmp_path / "q.json"
    args = ["bench", "quality", "--clips", str(clips), "--source", str(SOURCE), "--json", str(out)]
    assert cli.main(args) == 0
    rows = {r["clip"]: r for r in json.loads(out.read_text())["figures"]["clips"]}
    assert set(rows) == {"a_no_face.mp4", "b_face.mp4"}
    assert rows["a_no_face.mp4"]["with_face"] == 0 and rows["a_no_face.mp4"]["swapped_frames"] == 0
    b = rows["b_face.mp4"]
    assert b["frames"] == 12 and b["with_face"] == 12 and b["swapped"] == 1.0
    assert b["tracks"] == 1 and b["transitions"] == 0 and b["short_tracks"] == 0
    if dlib_judge() is None:
        assert b["judged"] == 0 and b["moved"] is None
    else:
        assert b["judged"] == 12
        assert b["moved"] >= 0.9 and b["distance_after"] < b["distance_before"]


def test_bench_quality_refuses_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["bench", "quality", "--clips", str(tmp_path / "none"), "--source", str(SOURCE)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a folder" in err[0]
    assert cli.main(["bench", "quality", "--clips", str(tmp_path), "--source", str(SOURCE)]) == 2
    assert "no video clips" in capsys.readouterr().err
