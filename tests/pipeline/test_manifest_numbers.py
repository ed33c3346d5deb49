"""A resumed render checks its manifest's numbers, not only its segments' bytes.

The size and CRC32 of each segment say nothing of the numbers beside them (frames, pts, segment
numbers, file names), which decide where a resumed render starts: edited with the checksums kept,
they made a render end with 240 of 500 frames, or report 100260. Here a render is interrupted
once; each test puts its work folder back as it was, edits the manifest, resumes, and checks the
edit is caught in one line and the output has every frame exactly once.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from ffdesk.errors import Cancelled
from ffdesk.media.segments import segment_contents
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.resume import (
    MANIFEST_NAME,
    Manifest,
    Segment,
    first_disagreement,
    numbers_problem,
    work_dir_for,
)
from ffdesk.pipeline.stage import FramePacket
from ffdesk.runtime.env import RuntimeEnv
from tests.pipeline.test_render import decoded_indices

FRAMES = 100
PER_SEGMENT = 10
STEP = 512
"""pts from one frame to the next in the synthesized clip (time base 1/12800, 25 frames/s)."""

Records = list[dict[str, Any]]


class PassThrough:
    """A stage that passes frames on; with `cancel`, it stops the render after `at` frames."""

    name = "pass"
    max_batch = 1
    edits_regions = False
    workers = 1

    def __init__(self, cancel: threading.Event | None = None, at: int = 0) -> None:
        self.cancel = cancel
        self.at = at
        self.seen = 0

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        self.seen += len(batch)
        if self.cancel is not None and self.seen >= self.at:
            self.cancel.set()
            time.sleep(0.2)  # the encoder finishes what is queued; no new segment starts
        return list(batch)

    def finish(self) -> None:
        return None


@dataclass(frozen=True)
class Interrupted:
    """A render stopped after some segments, and a copy of its work folder as it was left."""

    job: RenderJob
    work: Path
    saved: Path
    env: RuntimeEnv

    def restore(self) -> Records:
        """Put the work folder back as the interrupted render left it (no output); its records."""
        shutil.rmtree(self.work, ignore_errors=True)
        if self.job.output.exists():
            self.job.output.unlink()
        shutil.copytree(self.saved, self.work)
        return list(json.loads((self.work / MANIFEST_NAME).read_text())["segments"])

    def edit(self, records: Records) -> None:
        data = json.loads((self.work / MANIFEST_NAME).read_text())
        data["segments"] = records
        (self.work / MANIFEST_NAME).write_text(json.dumps(data))

    def resume(self, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str]]:
        """Run the same render again; its report and its warnings."""
        monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_a, **_k: [PassThrough()])
        notes: list[str] = []

        def on_event(e: ev.Event) -> None:
            if isinstance(e, ev.Warning):
                notes.append(e.message)

        return run_render(self.job, on_event, env=self.env), notes


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Interrupted]:
    root = tmp_path_factory.mktemp("manifest-numbers")
    clip = root / "clip.mp4"
    synth_clip(clip, width=160, height=90, fps=25, frames=FRAMES, audio_streams=1)
    env = RuntimeEnv.in_folder(root / "env")
    job = RenderJob(target=clip, output=root / "out.mp4", segment_frames=PER_SEGMENT)
    cancel = threading.Event()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("ffdesk.pipeline.engine.build_stages", lambda *_a, **_k: [PassThrough(cancel, 65)])
        # as a killed render leaves it: whole segments only (a cancel would keep the one it cut short)
        mp.setattr("ffdesk.pipeline.resume.Manifest.keeps_cancelled_segment", False)
        with pytest.raises(Cancelled):
            run_render(job, None, cancel, env=env)
    work = work_dir_for(job.output)
    saved = root / "saved"
    shutil.copytree(work, saved)
    records = json.loads((work / MANIFEST_NAME).read_text())["segments"]
    assert len(records) >= 4, records  # enough segments to edit one in the middle
    assert [r["frames"] for r in records] == [PER_SEGMENT] * len(records)
    assert [r["first_pts"] for r in records] == [i * PER_SEGMENT * STEP for i in range(len(records))]
    yield Interrupted(job, work, saved, env)


def _assert_one_line_and_every_frame_once(
    report: Any, notes: list[str], out: Path, prefix: str, kept: int, recorded: int
) -> None:
    lines = [n for n in notes if n.startswith("segment ")]
    assert len(lines) == 1, notes
    assert lines[0].startswith(prefix), lines[0]
    assert "\n" not in lines[0]
    after = recorded - kept - 1
    assert lines[0].endswith(
        f"rendering it and the {after} after it again" if after else "rendering it again"
    )
    assert report.resumed_segments == kept
    assert report.frames_out == FRAMES
    assert decoded_indices(out) == list(range(FRAMES))  # every frame, once, in order (bar codes)


def _frames(i: int) -> Callable[[Records], str]:
    def edit(records: Records) -> str:
        records[i]["frames"] = 240  # the report said 240 of 500, the output had fewer
        return f"segment {i} holds 10 frames, not the 240 recorded"

    return edit


def _huge_last(records: Records) -> str:
    i = len(records) - 1
    records[i]["frames"] = 100_000
    records[i]["last_pts"] = records[i]["first_pts"] + 100_000 * STEP  # room for them, too
    return f"segment {i} holds 10 frames, not the 100000 recorded"


def _pts_shifted(i: int) -> Callable[[Records], str]:
    def edit(records: Records) -> str:
        records[i]["first_pts"] += STEP
        records[i]["last_pts"] += STEP
        return f"segment {i} records pts"

    return edit


def _last_pts_later(records: Records) -> str:
    i = len(records) - 1
    records[i]["last_pts"] += 5 * STEP  # the resumed render would start 5 frames late
    return f"segment {i} records pts"


def _all_pts_shifted(records: Records) -> str:
    for r in records:
        r["first_pts"] += 10 * STEP
        r["last_pts"] += 10 * STEP
    return "segment 0 records pts"


def _numbers_swapped(records: Records) -> str:
    records[1]["number"], records[2]["number"] = 2, 1
    return "segment 1 is recorded as number 2"


def _records_swapped(records: Records) -> str:
    records[1], records[2] = records[2], records[1]
    return "segment 1 is recorded as number 2"


def _files_swapped(records: Records) -> str:
    for key in ("file", "size", "crc32"):  # each record still matches the file it names
        records[1][key], records[2][key] = records[2][key], records[1][key]
    return "segment 1 names the file 'seg00002.mp4' where 'seg00001.mp4' belongs"


def _name_outside(records: Records) -> str:
    records[1]["file"] = "../seg00001.mp4"
    return "segment 1 names '../seg00001.mp4', not a file of its own folder"


EDITS: dict[str, tuple[Callable[[Records], str], int]] = {
    "frames-240": (_frames(1), 1),
    "frames-first": (_frames(0), 0),
    "frames-100000-last": (_huge_last, -1),
    "pts-shifted": (_pts_shifted(2), 2),
    "last-pts-later": (_last_pts_later, -1),
    "all-pts-shifted": (_all_pts_shifted, 0),
    "numbers-swapped": (_numbers_swapped, 1),
    "records-swapped": (_records_swapped, 1),
    "files-swapped": (_files_swapped, 1),
    "name-outside": (_name_outside, 1),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_manifest_is_caught_and_the_output_has_every_frame_once(
    interrupted: Interrupted, monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    change, at = EDITS[edit]
    records = interrupted.restore()
    recorded = len(records)
    prefix = change(records)
    interrupted.edit(records)
    outside = interrupted.work.parent / "seg00001.mp4"
    outside.write_bytes(b"not the renderer's")
    report, notes = interrupted.resume(monkeypatch)
    kept = at % recorded
    _assert_one_line_and_every_frame_once(report, notes, interrupted.job.output, prefix, kept, recorded)
    assert outside.read_bytes() == b"not the renderer's"  # a name outside the folder is never touched
    assert not interrupted.work.exists()


def test_an_unedited_manifest_is_reused_whole(
    interrupted: Interrupted, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = interrupted.restore()
    report, notes = interrupted.resume(monkeypatch)
    assert notes == [] and report.resumed_segments == len(records)
    assert decoded_indices(interrupted.job.output) == list(range(FRAMES))


def test_the_files_are_read_back_exactly(interrupted: Interrupted) -> None:
    records = interrupted.restore()
    for r in records:
        held = segment_contents(interrupted.work / r["file"])
        assert held is not None and held.frames == r["frames"]
        assert held.first_s == Fraction(r["first_pts"], 12800) and held.last_s == Fraction(
            r["last_pts"], 12800
        )


def test_a_time_base_given_catches_pts_scaled_alike_everywhere(interrupted: Interrupted) -> None:
    """Halving every pts keeps the segments agreeing with each other: only the source's own time
    base (which the caller can give) shows them wrong."""
    records = interrupted.restore()
    for r in records:
        r["first_pts"] //= 2
        r["last_pts"] //= 2
    interrupted.edit(records)
    segments = [Segment.from_json(r) for r in records]
    assert first_disagreement(interrupted.work, segments) is None  # a limit of inferring it
    found = first_disagreement(interrupted.work, segments, time_base=Fraction(1, 12800))
    assert found is not None and found[0] == 0
    assert found[1] == f"records pts 0-{9 * STEP // 2} where its frames have pts 0-{9 * STEP}"
    assert first_disagreement(interrupted.work, [Segment.from_json(r) for r in interrupted.restore()],
                              time_base=Fraction(1, 12800)) is None  # fmt: skip


def test_frames_beyond_the_render_range_are_not_reused(interrupted: Interrupted) -> None:
    records = interrupted.restore()
    m, note = Manifest.open(interrupted.work, interrupted.job.output_fingerprint(), True, frames=25)
    try:
        assert [s.number for s in m.segments] == [0, 1]
        assert note == (
            f"segment 2 takes the render past its 25 frames (30): rendering it and the "
            f"{len(records) - 3} after it again"
        )
        assert sorted(p.name for p in interrupted.work.iterdir()) == [
            MANIFEST_NAME,
            "seg00000.mp4",
            "seg00001.mp4",
        ]
    finally:
        m.close()


def _segment(i: int, frames: int = 10, first: int | None = None, last: int | None = None) -> Segment:
    first = i * 10 if first is None else first
    return Segment(i, f"seg{i:05d}.mp4", frames, first, first + frames - 1 if last is None else last)


@pytest.mark.parametrize(
    ("segment", "previous", "problem"),
    [
        (_segment(1, frames=0), _segment(0), "records 0 frames"),
        (_segment(1, first=20, last=15), _segment(0), "ends at pts 15, before it starts (pts 20)"),
        (_segment(1, frames=10, first=10, last=15), _segment(0), "records 10 frames between pts 10 and 15"),
        (
            _segment(1, first=9),
            _segment(0),
            "starts at pts 9, not after the previous segment's last frame (pts 9)",
        ),
        (
            Segment(1, "seg00001.mov", 10, 10, 19),
            _segment(0),
            "names the file 'seg00001.mov' where 'seg00001.mp4'",
        ),
        (Segment(1, "seg1.mp4", 10, 10, 19), _segment(0), "names the file 'seg1.mp4'"),
        (_segment(1), _segment(0), None),
    ],
    ids=["no-frames", "backwards", "too-many", "overlap", "other-suffix", "other-name", "fine"],
)
def test_numbers_are_checked_against_each_other(
    segment: Segment, previous: Segment, problem: str | None
) -> None:
    found = numbers_problem(1, segment, previous, previous)
    assert found == problem if problem is None else found is not None and found.startswith(problem)


@pytest.mark.parametrize(
    "record",
    [
        {"file": "../x.mp4"},
        {"file": "/etc/passwd"},
        {"file": "a\\b.mp4"},
        {"file": ".."},
        {"file": ""},
        {"file": "seg\x0000001.mp4"},
        {"file": 7},
        {"frames": True},
        {"frames": "10"},
        {"size": 1.5},
        {"unknown": 1},
    ],
)
def test_a_record_that_cannot_be_read_is_where_the_render_starts_again(
    tmp_path: Path, record: dict[str, Any]
) -> None:
    folder = work_dir_for(tmp_path / "o.mp4")
    m, _ = Manifest.open(folder, "fp", resume=True)
    for i in range(3):
        (folder / f"seg{i:05d}.mp4").write_bytes(bytes([i]) * 100)
        m.add(Segment(i, f"seg{i:05d}.mp4", 10, i * 10, i * 10 + 9))
    m.close()
    data = json.loads((folder / MANIFEST_NAME).read_text())
    data["segments"][1].update(record)
    (folder / MANIFEST_NAME).write_text(json.dumps(data))
    (tmp_path / "x.mp4").write_bytes(b"outside")
    again, note = Manifest.open(folder, "fp", resume=True)
    try:
        assert [s.number for s in again.segments] == [0]
        assert (
            note is not None
            and note.startswith("segment 1 ")
            and note.endswith(": rendering it and the 1 after it again")
        )
        assert "\n" not in note
        assert sorted(p.name for p in folder.iterdir()) == [MANIFEST_NAME, "seg00000.mp4"]
        assert (tmp_path / "x.mp4").read_bytes() == b"outside"
    finally:
        again.close()


def test_png_segments_are_counted_frame_by_frame(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "frames")
    m, _ = Manifest.open(folder, "fp", resume=True)
    for i in range(2):
        seg = folder / f"seg{i:05d}"
        seg.mkdir()
        for f in range(3):
            (seg / f"frame_{f:06d}.png").write_bytes(bytes([i, f]) * 10)
        m.add(Segment(i, seg.name, 3, i * 3, i * 3 + 2))
    m.close()
    data = json.loads((folder / MANIFEST_NAME).read_text())
    data["segments"][1]["frames"] = 2  # pts still leave room for them; the folder holds 3
    (folder / MANIFEST_NAME).write_text(json.dumps(data))
    again, note = Manifest.open(folder, "fp", resume=True)
    try:
        assert note == "segment 1 holds 3 frames, not the 2 recorded: rendering it again"
        assert again.frames_done == 3
    finally:
        again.close()


def test_a_manifest_written_before_these_checks_still_resumes(tmp_path: Path) -> None:
    """Segments the render named and numbered as it always has: nothing here is new to them."""
    folder = work_dir_for(tmp_path / "o.mp4")
    folder.mkdir()
    (folder / "seg00000.mp4").write_bytes(b"x" * 50)
    record = {"number": 0, "file": "seg00000.mp4", "frames": 10, "first_pts": 0, "last_pts": 9,
              "size": 50, "crc32": zlib.crc32(b"x" * 50)}  # fmt: skip
    (folder / MANIFEST_NAME).write_text(json.dumps({"fingerprint": "fp", "segments": [record]}))
    m, note = Manifest.open(folder, "fp", resume=True)
    try:
        assert note is None and m.frames_done == 10 and m.next_pts == 10
    finally:
        m.close()
