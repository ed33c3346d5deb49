"""Files someone else put where ffdesk writes: links named like a render's work folder or lock
(anyone who can write a shared output folder can make one), links inside the work folder, and
JSON nested deeper than Python's parser can follow, in every file ffdesk reads back. Nothing is
written or deleted through a link, and every case is one line (exit 2) or a fresh start, never
a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk import jsontext
from ffdesk.cli import main
from ffdesk.media.synth import synth_clip
from ffdesk.pipeline.resume import Manifest, lock_path_for, work_dir_for

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clip") / "c.mp4"
    synth_clip(path, width=64, height=48, fps=25, frames=12)
    return path


def _victim(folder: Path) -> Path:
    """Someone else's folder, with files and a subfolder."""
    folder.mkdir()
    (folder / "thesis.txt").write_text("years of work")
    (folder / "sub").mkdir()
    (folder / "sub" / "data.bin").write_bytes(b"\x00" * 64)
    return folder


def _intact(folder: Path) -> bool:
    return (folder / "thesis.txt").read_text() == "years of work" and (folder / "sub" / "data.bin").is_file()


def _render(clip: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["render", "--target", str(clip), "--output", str(out), "-q"])
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_link_named_like_the_work_folder_is_refused_and_its_target_kept(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = _victim(tmp_path / "victim")
    out = tmp_path / "out" / "o.mp4"
    out.parent.mkdir()
    work_dir_for(out).symlink_to(victim, target_is_directory=True)
    code, err = _render(clip, out, capsys)
    assert code == 2 and len(err) == 1 and "symbolic link" in err[0] and "work folder" in err[0], err
    assert _intact(victim) and not out.exists()
    # with --no-resume too (a start over removes the old folder)
    assert main(["render", "--target", str(clip), "--output", str(out), "-q", "--no-resume"]) == 2
    assert _intact(victim)


def test_a_link_named_like_the_lock_is_refused_and_its_target_kept(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("do not overwrite")
    out = tmp_path / "o.mp4"
    lock_path_for(work_dir_for(out)).symlink_to(precious)
    code, err = _render(clip, out, capsys)
    assert code == 2 and len(err) == 1 and "symbolic link" in err[0] and "lock" in err[0], err
    assert precious.read_text() == "do not overwrite"


def test_a_link_inside_the_work_folder_is_removed_itself(tmp_path: Path) -> None:
    victim = _victim(tmp_path / "victim")
    folder = work_dir_for(tmp_path / "o.mp4")
    m, _ = Manifest.open(folder, "fp", resume=True)
    m.close()
    (folder / "debris").symlink_to(victim, target_is_directory=True)
    (folder / "debris.txt").symlink_to(victim / "thesis.txt")
    m, _ = Manifest.open(folder, "fp", resume=True)  # the debris of the folder is cleared
    assert not (folder / "debris").exists() and not (folder / "debris").is_symlink()
    assert not (folder / "debris.txt").is_symlink()
    m.discard()
    assert _intact(victim) and not folder.exists()


def test_deep_json_is_a_value_error_not_a_recursion_error() -> None:
    with pytest.raises(ValueError, match="deep"):
        jsontext.loads(DEEP)
    with pytest.raises(ValueError, match="deeper than 64"):
        jsontext.loads("[" * 70 + "]" * 70)
    assert jsontext.loads('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    assert jsontext.depth([[[]]]) == 3


def test_deep_json_in_a_manifest_starts_the_render_over(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o.mp4"
    folder = work_dir_for(out)
    folder.mkdir()
    (folder / "manifest.json").write_text(DEEP)
    code, err = _render(clip, out, capsys)
    assert code == 0 and out.is_file(), err
    assert not any("Traceback" in line or "Recursion" in line for line in err)


def test_deep_json_in_the_settings_and_the_queue_is_set_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.runtime.env import RuntimeEnv, read_settings

    env = RuntimeEnv.from_system()
    env.settings_path.parent.mkdir(parents=True, exist_ok=True)
    env.settings_path.write_text(DEEP)
    assert read_settings(env.settings_path) == {}
    assert main(["models", "list", "--no-verify", "--models-dir", str(tmp_path)]) == 0
    queue_file = tmp_path / "queue.json"
    queue_file.write_text(DEEP)
    code = main(["queue", "list", "--queue", str(queue_file)])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err and "Recursion" not in err


def test_a_render_that_fails_before_any_segment_leaves_no_work_folder(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o.mp4"
    missing = str(tmp_path / "none.jpg")
    args = ["render", "--target", str(clip), "--output", str(out), "-q", "--source", missing]
    assert main(args) == 2  # a source photo that is not there: refused after the lock was taken
    capsys.readouterr()
    pack = tmp_path / "empty-pack"
    pack.mkdir()
    args = [
        "render", "--target", str(clip), "--output", str(out), "-q", "--source", str(clip),
        "--models-dir", str(pack), "--swapper", "inswapper_128",
    ]  # fmt: skip
    assert main(args) == 2  # no such model in the folder
    capsys.readouterr()
    assert not work_dir_for(out).exists() and not lock_path_for(work_dir_for(out)).exists()
    assert list(tmp_path.glob(".o*")) == []


def test_files_too_large_to_be_ffdesks_are_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A settings file, manifest or queue bigger than any ffdesk writes is refused from its size
    (a sparse file: nothing is read, no disk is used) and handled like a damaged one."""
    from ffdesk.runtime.env import _load_settings

    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.write(b'{"jobs": []}')
        f.truncate(jsontext.MAX_FILE_BYTES + 1)
    with pytest.raises(ValueError, match=f"{jsontext.MAX_FILE_BYTES + 1} bytes"):
        jsontext.read(big)
    data, why = _load_settings(big)
    assert data == {} and why is not None and "too large" in why

    queue_file = tmp_path / "queue.json"
    big.rename(queue_file)
    code = main(["queue", "list", "--queue", str(queue_file)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "more than a queue file holds" in err
    # a listing only reads: the file is left where it is, nothing beside it
    assert queue_file.exists() and not list(tmp_path.glob("queue.json.*"))
    from ffdesk.pipeline.queue import RenderQueue

    queue = RenderQueue(queue_file)  # what the app and `queue run` open: kept aside, not lost
    assert (
        queue.entries() == []
        and queue.warning is not None
        and "more than a queue file holds" in queue.warning
    )
    assert not queue_file.exists() and any(tmp_path.glob("queue.json.*"))


def test_a_home_of_nobody_is_a_path_like_any_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`~nosuchuser/...` saved as the models folder or given as a job's paths: every command still
    runs (Path.expanduser raised RuntimeError, a traceback in each, --version included); the path
    is kept as written, as a shell keeps it, and refused where it is used."""
    from ffdesk.runtime.env import RuntimeEnv, write_setting
    from ffdesk.userpath import expand_user

    nobody = "~nosuchuser-ffdesk/x"
    assert expand_user(nobody) == Path(nobody)
    assert expand_user("~") == Path.home()
    env = RuntimeEnv.from_system()
    env.settings_path.parent.mkdir(parents=True, exist_ok=True)
    assert write_setting(env.settings_path, "models_dir", nobody) is None
    assert RuntimeEnv.from_system().models_dir.name == "x"
    assert main(["--version"]) == 0
    assert main(["models", "list", "--no-verify"]) in (0, 2)
    code = main(["render", str(tmp_path / "clip.mp4"), "--source", nobody, "-o", "~nosuchuser-ffdesk/o.mp4"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err
