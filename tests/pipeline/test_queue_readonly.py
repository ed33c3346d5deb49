"""`ffdesk queue list` only reads its queue file, and a `--queue` file that is not a render queue at
all is refused by `list` and `run` alike, before anything is made or moved beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import RenderQueue, job_to_dict, not_a_queue

GOOD = {"id": "aaaaaaaaaaaa", "job": job_to_dict(RenderJob(target=Path("/t.mp4"), output=Path("/o.mp4")))}


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{bad", "not JSON: "),
        ('{"jobs":[{"x":1}]}', "a job entry has no id"),
        ('{"version": 1, "jobs": [', "not JSON: "),  # a queue cut off before its first job
    ],
)
def test_listing_a_damaged_queue_says_what_is_wrong_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert main(["queue", "list", "--queue", str(path)]) == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert line.startswith("ffdesk: error: ") and said in line, line
    assert "started an empty queue" not in line and "corrupt" not in line, line
    assert captured.out == ""
    assert path.read_text() == text  # the user's file, as it was
    assert _files(tmp_path) == ["bad.json"]  # nothing kept aside, no lock file


def test_listing_a_partly_damaged_queue_lists_what_it_can_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "q.json"
    text = json.dumps({"version": 1, "jobs": [GOOD, {"x": 1}]})
    path.write_text(text)
    assert main(["queue", "list", "--queue", str(path)]) == 0
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert line == (
        "ffdesk: warning: q.json: 1 job(s) could not be read (a job entry has no id); "
        "read the other 1 and left the file as it is"
    )
    assert "aaaaaaaaaaaa" in captured.out
    assert path.read_text() == text and _files(tmp_path) == ["q.json"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"weights": 1}', 'a JSON object without a "jobs" list'),
        ("[1, 2]", 'JSON a list, not an object with "jobs"'),
        ("{bad", "not JSON: "),
        ("", "an empty file"),
    ],
)
@pytest.mark.parametrize("command", ["run", "list"])
def test_a_file_that_is_not_a_queue_at_all_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str, command: str
) -> None:
    path = tmp_path / "model.json"
    path.write_text(text)
    assert main(["queue", command, "--queue", str(path)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"ffdesk: error: --queue {path}: not a render queue ("), line
    assert said in line and line.endswith("; it is left as it is"), line
    assert path.read_text() == text
    assert _files(tmp_path) == ["model.json"]  # no model.json.lock, no model.json.corrupt


def test_running_a_queue_with_bad_jobs_still_keeps_it_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "q.json"
    path.write_text('{"jobs":[{"x":1}]}')
    assert main(["queue", "run", "--queue", str(path)]) == 0
    captured = capsys.readouterr()
    assert "kept it as q.json.corrupt" in captured.err and "nothing queued" in captured.out
    assert (tmp_path / "q.json.corrupt").read_text() == '{"jobs":[{"x":1}]}'


def test_the_apps_queue_still_keeps_a_damaged_file_aside_with_its_warning(tmp_path: Path) -> None:
    """The app opens its queue as before (`RenderQueue(path)`): the same warning, the same copy."""
    path = tmp_path / "queue.json"
    path.write_text("[1, 2]")
    queue = RenderQueue(path)
    assert queue.warning == (
        "queue.json was damaged (not a render queue); kept it as queue.json.corrupt and started an "
        "empty queue"
    )
    assert queue.entries() == [] and (tmp_path / "queue.json.corrupt").exists()


def test_a_queue_opened_read_only_cannot_be_changed(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"version": 1, "jobs": [GOOD]}))
    queue = RenderQueue(path, read_only=True)
    with pytest.raises(ValueError, match="read only"):
        queue.remove("aaaaaaaaaaaa")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (json.dumps({"version": 1, "jobs": [GOOD]}), None),
        ('{"other": 2, "jobs": []}', None),  # keys in another order: still a queue
        ('{"version": 1, "jobs": [{"id": "a"', None),  # cut off: a damaged queue, not another file
        ("null", 'JSON null, not an object with "jobs"'),
        ('"text"', 'JSON a string, not an object with "jobs"'),
    ],
)
def test_what_is_not_a_queue(tmp_path: Path, text: str, why: str | None) -> None:
    path = tmp_path / "q.json"
    path.write_text(text)
    assert not_a_queue(path) == why
    assert not_a_queue(tmp_path / "missing.json") is None
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    assert not_a_queue(tmp_path / "binary.json") == "not text"


def test_a_queue_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    # an editor on Windows (Notepad) saves UTF-8 with a BOM: it was "not a render queue"
    path = tmp_path / "q.json"
    RenderQueue(tmp_path / "plain.json").add(
        RenderJob(target=tmp_path / "a.mp4", output=tmp_path / "a-out.mp4")
    )
    path.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "plain.json").read_bytes())
    assert not_a_queue(path) is None
    queue = RenderQueue(path, read_only=True)
    assert queue.warning is None and len(queue.entries()) == 1
