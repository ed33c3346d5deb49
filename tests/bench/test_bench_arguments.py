"""A bench's --json file is checked as the command line is read: one line and exit 2 before
anything runs (onto a folder it failed after the whole bench had run); its numbers are checked
with every command's, in tests/test_command_numbers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffdesk import cli
from ffdesk.runtime.env import RuntimeEnv


def test_a_json_file_that_cannot_be_written_is_refused_before_the_bench(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, says in (
        (tmp_path, f"{tmp_path} is a folder; give a file in it"),
        (tmp_path / "missing" / "f.json", "missing: output folder does not exist"),
    ):
        assert cli.main(["bench", "live", "--seconds", "1", "--json", str(path)]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir())


def test_live_seconds_that_are_not_a_number_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    source = Path(__file__).resolve().parents[2] / "resources" / "sample" / "grace_hopper.jpg"
    assert cli.main(["live", "--source", str(source), "--camera", "file:none.mp4", "--seconds", "nan"]) == 2
    assert "--seconds must be a number more than 0, not nan" in capsys.readouterr().err


def test_a_bench_asked_for_the_gpu_on_a_machine_without_one_says_so(
    run_env: RuntimeEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bench memory` and `bench budget` run their renders in child processes, whose notes are not
    shown: asked for `--provider cuda` where there is none, they measured the CPU silently."""
    from ffdesk.bench.common import say_if_no_gpu
    from ffdesk.runtime import sessions

    monkeypatch.setattr(sessions, "cuda_missing", lambda _flags=None: "no NVIDIA GPU found")
    say_if_no_gpu("cpu", run_env)
    say_if_no_gpu("auto", run_env)
    assert capsys.readouterr().err == ""
    say_if_no_gpu("cuda", run_env)
    err = capsys.readouterr().err
    assert err == "warning: --provider cuda: no NVIDIA GPU found; the models run on the CPU\n"
    monkeypatch.setattr(sessions, "cuda_missing", lambda _flags=None: None)  # a GPU: nothing said
    say_if_no_gpu("cuda", run_env)
    assert capsys.readouterr().err == ""
