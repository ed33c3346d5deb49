"""ffdesk as a script calls it: figures and reports to standard output or through a link, exit
codes a scheduler can act on, a terminal that cannot print every character, an ignored Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ffdesk import cli
from ffdesk.errors import BUSY_EXIT
from ffdesk.media.named_output import write_named
from ffdesk.userpath import stream_fd
from tests.real_clips import carphone

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "resources" / "sample" / "grace_hopper.jpg"


def _render(tmp_path: Path, *extra: str, name: str = "out.mp4", end: str = "0.2") -> list[str]:
    return ["render", "-q", "-t", str(carphone()), "-s", str(SOURCE), "-o", str(tmp_path / name),
            "--end", end, *extra]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "fd"),
    [("-", 1), ("/dev/stdout", 1), ("/dev/stderr", 2), ("/dev/fd/7", 7), ("/proc/self/fd/9", 9),
     ("/dev//stdout", 1), ("//dev/stdout", 1), ("./-", None), ("out.json", None), ("/dev/null", None),
     ("/proc/1/fd/1", None)],
)  # fmt: skip
def test_the_paths_that_name_a_descriptor(path: str, fd: int | None) -> None:
    assert stream_fd(path) == fd


def _ffdesk(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """ffdesk in a process of its own: its stdout is descriptor 1, as a script meets it."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "ffdesk", *argv], text=True, timeout=240, cwd=ROOT, **kw
    )


def test_a_report_to_stdout_is_json_alone_and_the_result_line_goes_to_stderr(tmp_path: Path) -> None:
    done = _ffdesk(_render(tmp_path, "--report", "-"), capture_output=True)
    assert done.returncode == 0, done.stderr
    # before: a file named "-" in the working folder, and "wrote ..." on stdout
    assert json.loads(done.stdout)["frames_out"] >= 5
    assert "wrote " in done.stderr and (tmp_path / "out.mp4").is_file() and not (ROOT / "-").exists()


def test_a_report_to_dev_stdout_appends_to_the_redirected_log(tmp_path: Path) -> None:
    """`>> job.log` with `--report /dev/stdout`: the log keeps what it held and gains the report
    (it was replaced by a new file holding the report alone)."""
    log = tmp_path / "job.log"
    log.write_text("EARLIER\n")
    inode = log.stat().st_ino
    with log.open("a") as out:
        done = _ffdesk(_render(tmp_path, "--report", "/dev/stdout"), stdout=out, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith("EARLIER\n") and log.stat().st_ino == inode
    assert json.loads(text.removeprefix("EARLIER\n"))["frames_out"] >= 5
    assert "wrote " in done.stderr


def test_a_report_through_a_link_replaces_its_target_and_the_link_stays(tmp_path: Path) -> None:
    (tmp_path / "target.json").write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to("target.json")
    write_named(link, '{"a": 1}\n')
    assert link.is_symlink() and json.loads((tmp_path / "target.json").read_text()) == {"a": 1}


def test_a_named_pipe_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "figures.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        write_named(fifo, "figures\n")
        assert reader.communicate(timeout=30)[0] == "figures\n" and fifo.is_fifo()
    finally:
        reader.kill()
        reader.wait()


def test_bench_figures_to_stdout_leave_stdout_to_the_json(tmp_path: Path) -> None:
    argv = ["bench", "encode", "--frames", "4", "--height", "360", "--no-ffmpeg", "--json", "-"]
    done = _ffdesk(argv, capture_output=True, env={**os.environ, "FFDESK_BENCH_CACHE": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bench"] == "encode"  # before: a file named "-"
    assert "frames/s" in done.stderr and "figures written" not in done.stderr + done.stdout


def test_what_is_printed_meanwhile_goes_to_stderr(tmp_path: Path) -> None:
    script = (
        "import subprocess, sys\n"
        "from ffdesk.media.named_output import figures_to_stdout, write_named\n"
        "with figures_to_stdout('-') as kept:\n"
        "    subprocess.run([sys.executable, '-c', 'print(\"child line\")'], check=True)\n"
        "    print('own line')\n"
        "    write_named(kept, '{}\\n')\n"
        "print('after')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "{}\nafter\n" and "child line" in done.stderr and "own line" in done.stderr


def test_report_and_telemetry_log_both_on_stdout_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(_render(tmp_path, "--report", "-", "--telemetry-log", "/dev/stdout")) == 2
    assert "give each its own path" in capsys.readouterr().err
    assert not (tmp_path / "out.mp4").exists()


def test_a_finished_render_on_an_ascii_terminal_exits_0(tmp_path: Path) -> None:
    """The result line names a file with an é: on an ASCII stdout it was an internal error (exit
    1) after the output had been written."""
    ascii_out = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = _ffdesk(_render(tmp_path, name="café.mp4"), capture_output=True, env=ascii_out)
    assert done.returncode == 0, done.stderr
    assert "caf\\xe9.mp4" in done.stdout and (tmp_path / "café.mp4").is_file()


@pytest.mark.parametrize("group", ["queue", "models", "bench", "farm", "faceset"])
def test_a_group_command_alone_is_one_line_on_stderr(group: str, capfd: pytest.CaptureFixture[str]) -> None:
    assert cli.main([group]) == 2
    out, err = capfd.readouterr()
    assert out == ""  # before: the help text on stdout, nothing on stderr
    (line,) = err.strip().splitlines()
    assert line.startswith(f"ffdesk: error: {group}: name one of ")


def test_a_mistyped_queue_or_models_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ["queue", "list", "--queue", str(tmp_path / "nosuch.json"), "--json"],
        ["queue", "run", "--queue", str(tmp_path / "nosuch.json")],
        ["models", "list", "--models-dir", str(tmp_path / "nosuch"), "--json"],
        ["models", "verify", "--models-dir", str(tmp_path / "nosuch")],
    ):
        assert cli.main(argv) == 2, argv  # before: an empty listing, exit 0
        assert "no such" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no lock file left beside the name


def test_an_output_another_render_holds_exits_75(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ffdesk.pipeline.lock import OutputLock
    from ffdesk.pipeline.resume import lock_path_for, work_dir_for

    output = tmp_path / "out.mp4"
    lock = OutputLock.acquire(lock_path_for(work_dir_for(output)), str(output))
    try:
        assert cli.main(_render(tmp_path)) == BUSY_EXIT  # before: 2, as for a bad job
    finally:
        lock.release()
    assert "is being rendered by process" in capsys.readouterr().err
    assert cli.main(_render(tmp_path)) == 0


def test_a_render_started_with_ctrl_c_ignored_keeps_ignoring_it(tmp_path: Path) -> None:
    """A script's background job runs with SIGINT ignored (so the terminal's Ctrl-C is not its
    own); ffdesk put its own handler in, and the job stopped at a Ctrl-C meant for the shell."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ffdesk", *_render(tmp_path, end="3")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    try:
        for _ in range(1200):  # until the render has begun writing (its handlers are in by then)
            if any(tmp_path.iterdir()) or proc.poll() is not None:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "cancelled" not in err and (tmp_path / "out.mp4").is_file()


def test_no_overwrite_refuses_a_file_at_the_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    delivered = tmp_path / "out.mp4"
    delivered.write_bytes(b"delivered")
    assert cli.main(_render(tmp_path, "-n")) == 2
    assert "is already there (--no-overwrite)" in capsys.readouterr().err
    assert delivered.read_bytes() == b"delivered"
    assert cli.main(_render(tmp_path)) == 0  # without it a finished render replaces the file
    assert delivered.stat().st_size > 1000


def test_a_descriptor_that_is_not_open_is_refused_before_the_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It rendered the whole clip, then failed to write the report."""
    assert cli.main(_render(tmp_path, "--report", "/dev/fd/97")) == 2
    assert "--report /dev/fd/97: descriptor 97 is not open" in capsys.readouterr().err
    assert not (tmp_path / "out.mp4").exists()
    assert cli.main(_render(tmp_path, "--report", "/dev/stdin")) == 2
    assert "standard input is not an output" in capsys.readouterr().err


def test_figures_to_stdout_with_stderr_or_stdout_closed(tmp_path: Path) -> None:
    bench = ["bench", "encode", "--frames", "4", "--height", "360", "--no-ffmpeg", "--json", "-"]
    env = {**os.environ, "FFDESK_BENCH_CACHE": str(tmp_path)}
    done = _ffdesk(bench, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    no_stderr = subprocess.run(  # `2>&-`: an internal error (exit 1) before
        ["bash", "-c", 'exec "$0" -m ffdesk "$@" 2>&-', sys.executable, *bench],
        stdout=subprocess.PIPE, text=True, timeout=240, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0 and no_stderr.returncode == 0
    assert json.loads(no_stderr.stdout)["bench"] == "encode"
    no_stdout = subprocess.run(
        ["bash", "-c", 'exec "$0" -m ffdesk "$@" >&-', sys.executable, *bench],
        stderr=subprocess.PIPE, text=True, timeout=240, cwd=ROOT, env=env,
    )  # fmt: skip
    assert no_stdout.returncode == 2 and "standard output is closed" in no_stdout.stderr


def test_stdout_comes_back_when_the_command_fails() -> None:
    script = (
        "import sys\n"
        "from ffdesk.media.named_output import figures_to_stdout\n"
        "try:\n"
        "    with figures_to_stdout('-'):\n"
        "        raise RuntimeError\n"
        "except RuntimeError:\n"
        "    print('back on stdout')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "back on stdout\n" and done.stderr == ""


def test_a_telemetry_log_to_stdout_is_its_json_lines_alone(tmp_path: Path) -> None:
    done = _ffdesk(_render(tmp_path, "--telemetry-log", "-"), capture_output=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(isinstance(json.loads(line), dict) for line in lines)
    assert "wrote " in done.stderr
