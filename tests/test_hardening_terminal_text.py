"""Text from files printed on a terminal: escape sequences and line breaks in a name or a message
are shown as escapes, never sent (`ffdesk queue list` printed a job's `message` and `target`
from the queue file raw: `\\x1b]0;TITLE\\x07` set the terminal's title, `\\x1b[31m` its colour)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import RenderQueue
from ffdesk.terminal_text import terminal_line


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\x1b]0;TITLE\x07b", "a\\x1b]0;TITLE\\x07b"),  # OSC: sets the window title
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # CSI: colours
        ("a\x9b31mb", "a\\x9b31mb"),  # the C1 CSI, one character
        ("line\nnext\rover\tcol", "line\\nnext\\rover\\tcol"),
        ("bs\x08\x7f\x00", "bs\\x08\\x7f\\x00"),
        ("evil\u202egnp.exe", "evil\\u202egnp.exe"),  # a right-to-left override
        ("sep\u2028x", "sep\\u2028x"),
        ("bytes\udc9b\udcff", "bytes\\x9b\\xff"),  # a name's undecodable bytes (surrogateescape)
        ("café 日本語 Ελληνικά עברית", "café 日本語 Ελληνικά עברית"),  # kept as it is
        ("emoji 👩‍💻 nbsp\u00a0", "emoji 👩‍💻 nbsp\u00a0"),
        ("", ""),
    ],
)
def test_terminal_line(text: str, shown: str) -> None:
    assert terminal_line(text) == shown
    assert terminal_line(Path("/x") / text) == "/x" + ("/" + shown if shown else "")


def test_queue_list_shows_escapes_from_the_queue_file_without_sending_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "queue.json"
    queue = RenderQueue(path)
    entry = queue.add(RenderJob(target=tmp_path / "\x1b[31mt\nx.mp4", output=tmp_path / "out\x07.mp4"))
    queue.update(entry.id, state="failed", message="\x1b]0;QTITLE\x07\x1b[31mred\nsecond line")
    assert main(["queue", "list", "--queue", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    (line,) = out.splitlines()
    assert line.endswith(
        f"\\x1b[31mt\\nx.mp4 -> {tmp_path}/out\\x07.mp4  (\\x1b]0;QTITLE\\x07\\x1b[31mred\\nsecond line)"
    )
    # --json is data, not a terminal line: kept as the file holds it
    assert main(["queue", "list", "--queue", str(path), "--json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)["jobs"]
    assert job["message"] == "\x1b]0;QTITLE\x07\x1b[31mred\nsecond line"


def test_a_refusal_naming_a_file_with_an_escape_is_one_plain_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clip = tmp_path / "a\x1b]0;TITLE\x07\nb.mp4"
    clip.write_bytes(b"not a clip")
    assert main(["probe", str(clip)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and err.count("\n") == 1, err
    assert "a\\x1b]0;TITLE\\x07\\nb.mp4" in err


def test_a_render_and_probe_show_an_escape_in_the_outputs_name_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    photo = tmp_path / "g.jpg"
    shutil.copy(Path(__file__).resolve().parents[1] / "resources" / "sample" / "grace_hopper.jpg", photo)
    named = tmp_path / "o\x1b]0;PWNED\x07ut.png"
    assert main(["render", "-t", str(photo), "-s", str(photo), "-o", str(named), "-q"]) == 0
    assert main(["probe", str(named)]) == 0
    said = capsys.readouterr()
    for text in (said.out, said.err):
        assert "\x1b" not in text and "\x07" not in text, text
    assert "o\\x1b]0;PWNED\\x07ut.png" in said.out


def test_farm_status_lines_show_a_boards_escapes_as_text() -> None:
    from ffdesk.farm.slots import NodeResources
    from ffdesk.farm.status import FarmStatus

    row = {"slot": "x\x1b]0;PWNED\x07", "pid": 1, "num_cpus": 1}
    status = FarmStatus("HEAD:6379", (NodeResources("n1", "10.0.0.2", 2, 0, 0.0),), {}, (row,), ())
    from ffdesk.commands.farm import status_text

    assert "\x1b" not in status_text(status) and "x\\x1b]0;PWNED\\x07" in status_text(status)
