"""Resume checks each finished segment's size and CRC32 before reusing it."""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ffdesk.errors import Cancelled
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.resume import MANIFEST_NAME, Manifest, Segment, segment_check, work_dir_for
from ffdesk.pipeline.stage import FramePacket
from ffdesk.runtime.env import RuntimeEnv
from tests.pipeline.test_render import decoded_indices


def _three_segments(folder: Path) -> None:
    m, _ = Manifest.open(folder, "fp", resume=True)
    for i in range(3):
        (folder / f"seg{i:05d}.mp4").write_bytes(bytes([i]) * (1000 + i))
        m.add(Segment(i, f"seg{i:05d}.mp4", 10, i * 10, i * 10 + 9))
    m.close()


def test_a_segment_records_its_size_and_crc32(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "o.mp4")
    _three_segments(folder)
    saved = json.loads((folder / MANIFEST_NAME).read_text())["segments"]
    assert [s["size"] for s in saved] == [1000, 1001, 1002]
    assert saved[1]["crc32"] == zlib.crc32(b"\x01" * 1001)
    again, note = Manifest.open(folder, "fp", resume=True)
    assert note is None and again.frames_done == 30
    again.close()


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda p: p.write_bytes(p.read_bytes()[:-200]), "failed its check (size 801, expected 1001)"),
        (lambda p: p.write_bytes(b"\x07" + p.read_bytes()[1:]), "failed its check (crc32 "),
        (lambda p: p.unlink(), "is missing"),
    ],
    ids=["truncated-tail", "changed-byte", "missing"],
)
def test_a_damaged_segment_is_dropped_with_every_one_after_it(
    tmp_path: Path, damage: Any, problem: str
) -> None:
    folder = work_dir_for(tmp_path / "o.mp4")
    _three_segments(folder)
    damage(folder / "seg00001.mp4")
    m, note = Manifest.open(folder, "fp", resume=True)
    try:
        assert [s.number for s in m.segments] == [0]
        assert note is not None and note.startswith(f"segment 1 {problem}")
        assert note.endswith(": rendering it and the 1 after it again")
        assert sorted(p.name for p in folder.iterdir()) == [MANIFEST_NAME, "seg00000.mp4"]
        assert m.next_segment_file(".mp4") == "seg00001.mp4"
    finally:
        m.close()


def test_the_last_segment_alone_is_rendered_again(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "o.mp4")
    _three_segments(folder)
    (folder / "seg00002.mp4").write_bytes(b"short")
    m, note = Manifest.open(folder, "fp", resume=True)
    assert note == "segment 2 failed its check (size 5, expected 1002): rendering it again"
    assert m.frames_done == 20
    m.close()


def test_an_old_manifest_without_checks_is_rendered_again(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "o.mp4")
    folder.mkdir()
    (folder / "seg00000.mp4").write_bytes(b"x" * 50)
    old = {"fingerprint": "fp", "segments": [{"number": 0, "file": "seg00000.mp4", "frames": 10,
                                              "first_pts": 0, "last_pts": 9}]}  # fmt: skip
    (folder / MANIFEST_NAME).write_text(json.dumps(old))
    m, note = Manifest.open(folder, "fp", resume=True)
    assert m.frames_done == 0 and note is not None
    assert note.startswith("segment 0 has no recorded size and checksum") and note.endswith(
        "rendering it again"
    )
    m.close()


def test_a_manifest_naming_files_outside_its_folder_is_not_trusted(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "o.mp4")
    folder.mkdir()
    (tmp_path / "secret").write_bytes(b"x")
    record = {
        "number": 0,
        "file": "../secret",
        "frames": 1,
        "first_pts": 0,
        "last_pts": 0,
        "size": 1,
        "crc32": 0,
    }
    bad = {"fingerprint": "fp", "segments": [record]}
    (folder / MANIFEST_NAME).write_text(json.dumps(bad))
    m, _ = Manifest.open(folder, "fp", resume=True)
    assert m.frames_done == 0 and (tmp_path / "secret").exists()
    m.close()


def test_png_segments_are_checked_frame_by_frame_in_order(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "frames")
    m, _ = Manifest.open(folder, "fp", resume=True)
    for i in range(2):
        seg = folder / f"seg{i:05d}"
        seg.mkdir()
        for f in range(3):
            (seg / f"frame_{f:06d}.png").write_bytes(bytes([i, f]) * 100)
        m.add(Segment(i, seg.name, 3, i * 3, i * 3 + 2))
    m.close()
    frames = b"".join(bytes([1, f]) * 100 for f in range(3))
    assert segment_check(folder / "seg00001") == (600, zlib.crc32(frames))
    a, b = folder / "seg00000" / "frame_000000.png", folder / "seg00000" / "frame_000001.png"
    first, second = a.read_bytes(), b.read_bytes()
    a.write_bytes(second)
    b.write_bytes(first)  # the same bytes, frames swapped
    m, note = Manifest.open(folder, "fp", resume=True)
    assert m.frames_done == 0 and note is not None and "segment 0 failed its check (crc32" in note
    assert note.endswith("rendering it and the 1 after it again")
    m.close()


class SlowPass:
    """A stage that passes frames through slowly, so a render can be interrupted mid-way."""

    name = "slow"
    max_batch = 4
    edits_regions = False
    workers = 1

    def start(self) -> None:
        pass

    def process(self, batch: Sequence[FramePacket]) -> list[FramePacket]:
        time.sleep(0.01)
        return list(batch)

    def finish(self) -> None:
        return None


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_resume_after_damage_renders_every_frame_once(
    run_env: RuntimeEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    clip = tmp_path / "clip.mp4"
    synth_clip(clip, width=160, height=90, fps=25, frames=100, audio_streams=1)
    monkeypatch.setattr("ffdesk.pipeline.engine.build_stages", lambda *_, **_kw: [SlowPass()])
    out = tmp_path / "out.mp4"
    job = RenderJob(target=clip, output=out, sources=(clip,), segment_frames=10)
    cancel = threading.Event()

    def stop_mid_way(e: ev.Event) -> None:
        if isinstance(e, ev.Progress) and e.frames_done >= 45:
            cancel.set()

    with pytest.raises(Cancelled):
        run_render(job, stop_mid_way, cancel, env=run_env)
    work = work_dir_for(out)
    finished = json.loads((work / MANIFEST_NAME).read_text())["segments"]
    assert len(finished) >= 3 and not out.exists()
    victim = work / finished[1]["file"]
    data = victim.read_bytes()
    if damage == "truncate":
        victim.write_bytes(data[: len(data) - 100])  # a disk that lost the file's tail
    else:
        victim.write_bytes(data[:500] + bytes([data[500] ^ 0xFF]) + data[501:])  # a copy gone wrong
    events: list[ev.Event] = []
    report = run_render(job, events.append, env=run_env)
    notes = [e.message for e in events if isinstance(e, ev.Warning)]
    expect = f"segment 1 failed its check ({'size' if damage == 'truncate' else 'crc32'} "
    assert any(n.startswith(expect) and "rendering it and the" in n for n in notes), notes
    assert report.resumed_segments == 1
    assert report.video is not None and report.video.resumed_frames == 10
    assert decoded_indices(out) == list(range(100))
    assert not work.exists()
