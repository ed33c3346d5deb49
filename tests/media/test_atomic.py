from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ffdesk.errors import MediaError
from ffdesk.media.atomic import atomic_output, check_disk_space, same_file


def test_success_moves_into_place(tmp_path: Path) -> None:
    final = tmp_path / "out.mp4"
    final.write_bytes(b"old")
    with atomic_output(final) as tmp:
        assert tmp.parent == final.parent
        assert tmp.name.startswith(".") and tmp.suffix == ".mp4"
        tmp.write_bytes(b"new")
        assert final.read_bytes() == b"old"  # untouched until the end
    assert final.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]


def test_failure_leaves_nothing(tmp_path: Path) -> None:
    final = tmp_path / "out.mp4"
    with pytest.raises(RuntimeError), atomic_output(final) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_folders_replace_folders(tmp_path: Path) -> None:
    final = tmp_path / "frames"
    final.mkdir()
    (final / "old.png").write_bytes(b"x")
    with atomic_output(final) as tmp:
        tmp.mkdir()
        (tmp / "frame_000000.png").write_bytes(b"y")
    assert sorted(p.name for p in final.iterdir()) == ["frame_000000.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames"]
    with pytest.raises(KeyError), atomic_output(final) as tmp:
        tmp.mkdir()
        (tmp / "a.png").write_bytes(b"z")
        raise KeyError("stop")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames"]


def test_nothing_written_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="nothing was written"), atomic_output(tmp_path / "x.mp4"):
        pass


def test_missing_or_unwritable_folder(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="does not exist"), atomic_output(tmp_path / "no" / "x.mp4"):
        pass
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        folder = Path("/sys")  # read-only even for root
        if not folder.is_dir():
            pytest.skip("no read-only folder to try as root")
    else:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o500)
    try:
        with pytest.raises(MediaError, match="not writable") as err, atomic_output(folder / "x.mp4"):
            pass
        assert str(folder) in str(err.value) and "\n" not in str(err.value)
    finally:
        if folder != Path("/sys"):
            folder.chmod(0o700)


def test_disk_full_while_writing(tmp_path: Path) -> None:
    final = tmp_path / "out.mp4"

    def write_part(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            fh.write(b"part")
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(MediaError, match="disk full while writing") as err, atomic_output(final) as tmp:
        write_part(tmp)
    assert str(final) in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_same_file(tmp_path: Path) -> None:
    a = tmp_path / "a.mp4"
    a.write_bytes(b"x")
    b = tmp_path / "b.mp4"
    b.write_bytes(b"x")
    link = tmp_path / "link.mp4"
    link.symlink_to(a)
    hard = tmp_path / "hard.mp4"
    os.link(a, hard)
    assert same_file(a, tmp_path / "." / "a.mp4")
    assert same_file(a, link) and same_file(a, hard)
    assert not same_file(a, b)
    assert not same_file(a, tmp_path / "missing.mp4")


def test_check_disk_space(tmp_path: Path) -> None:
    check_disk_space(tmp_path, 1024)
    with pytest.raises(MediaError) as err:
        check_disk_space(tmp_path, 1 << 60)
    msg = str(err.value)
    assert msg.startswith(f"not enough disk space in {tmp_path}: need ")
    assert ", have " in msg and "\n" not in msg


def test_replacing_a_file_is_all_or_nothing(tmp_path: Path) -> None:
    import errno

    from ffdesk.errors import DiskFull
    from ffdesk.media.atomic import replacing, write_json_atomic

    target = tmp_path / "settings.json"
    write_json_atomic(target, {"a": 1})
    assert target.read_text() == '{\n "a": 1\n}'
    with pytest.raises(ValueError), replacing(target) as tmp:
        tmp.write_text("half")
        raise ValueError("interrupted")
    assert target.read_text() == '{\n "a": 1\n}'  # the old contents, no temp file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]
    with (
        pytest.raises(DiskFull, match=r"disk full while writing .*settings\.json \(No space"),
        replacing(target),
    ):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]
