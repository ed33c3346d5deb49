"""The resume manifest: durable, fingerprint-checked, debris removed."""

from __future__ import annotations

from pathlib import Path

from ffdesk.pipeline.resume import Manifest, Segment, work_dir_for


def test_finished_segments_survive_a_reopen_and_debris_is_removed(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "out.mp4")
    m, note = Manifest.open(folder, "abc", resume=True)
    assert note is None and m.frames_done == 0 and m.next_pts is None
    (folder / "seg00000.mp4").write_bytes(b"x")
    m.add(Segment(0, "seg00000.mp4", 48, 0, 47 * 512))
    (folder / "seg00001.mp4").write_bytes(b"half-written")  # the segment being encoded at the crash
    m.close()
    again, note = Manifest.open(folder, "abc", resume=True)
    assert note is None
    assert again.frames_done == 48
    assert again.next_pts == 47 * 512 + 1
    assert not (folder / "seg00001.mp4").exists()
    assert (folder / "seg00000.mp4").exists()


def test_changed_settings_or_no_resume_start_over(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "out.mp4")
    m, _ = Manifest.open(folder, "abc", resume=True)
    (folder / "seg00000.mp4").write_bytes(b"x")
    m.add(Segment(0, "seg00000.mp4", 10, 0, 9))
    m.close()
    other, note = Manifest.open(folder, "different", resume=True)
    assert other.frames_done == 0 and note and "changed" in note
    assert not (folder / "seg00000.mp4").exists()
    other.close()
    m, _ = Manifest.open(folder, "abc", resume=True)
    (folder / "seg00000.mp4").write_bytes(b"x")
    m.add(Segment(0, "seg00000.mp4", 10, 0, 9))
    m.close()
    fresh, note = Manifest.open(folder, "abc", resume=False)
    assert fresh.frames_done == 0 and note and "no-resume" in note


def test_a_segment_missing_on_disk_truncates_the_finished_prefix(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "out.mp4")
    m, _ = Manifest.open(folder, "abc", resume=True)
    for i in range(3):
        (folder / f"seg{i:05d}.mp4").write_bytes(b"x")
        m.add(Segment(i, f"seg{i:05d}.mp4", 10, i * 10, i * 10 + 9))
    (folder / "seg00001.mp4").unlink()
    m.close()
    again, _ = Manifest.open(folder, "abc", resume=True)
    assert [s.number for s in again.segments] == [0]
    assert not (folder / "seg00002.mp4").exists()


def test_a_corrupt_manifest_starts_over(tmp_path: Path) -> None:
    folder = work_dir_for(tmp_path / "out.mp4")
    folder.mkdir()
    (folder / "manifest.json").write_text("{not json")
    m, _ = Manifest.open(folder, "abc", resume=True)
    assert m.frames_done == 0
