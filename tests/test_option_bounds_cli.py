"""Input a command-line fuzzer found passing the parser and failing later (a traceback, a hang, an
exit 0 with nothing said, a clip blamed for a number): each is now one line and exit 2."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from ffdesk.cli import main
from ffdesk.commands import telemetry
from ffdesk.telemetry.sampler import Sampler

pytestmark = pytest.mark.timeout(60)

SEQUENCE = ["render", "-t", "frames_%04d.png", "-o", "out.mp4"]


@pytest.fixture(autouse=True)
def _in_a_scratch_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative paths (and an empty one, which old code took as the current folder) land here."""
    monkeypatch.chdir(tmp_path)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def test_bench_startup_refuses_a_missing_clip_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It started the app for a minute, then exited 0 without a word."""
    assert (
        main(["bench", "startup", "--clip", str(tmp_path / "nope.mp4"), "--runs", "1", "--scrubs", "1"]) == 2
    )
    assert "nope.mp4: file not found" in _one_line(capsys)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["telemetry", "--interval", "1e10"], "argument --interval: must be more than 0 and at most 3600"),
        (["telemetry", "--once", "--pid", "18446744073709551616"], "argument --pid: must be from 1 to"),
        ([*SEQUENCE, "--metrics-port", "-1"], "argument --metrics-port: must be at least 0"),
        ([*SEQUENCE, "--metrics-port", "70000"], "argument --metrics-port: must be from 0 to 65535"),
        (["models", "standins", "--out", "x", "--cost-ms", "nan"], "argument --cost-ms: must be"),
        (["models", "standins", "--out", "x", "--cost-ms", "inf"], "argument --cost-ms: must be"),
        (["models", "standins", "--out", "x", "--cost-ms", "1e308"], "argument --cost-ms: must be from 0 to"),
        (["models", "standins", "--out", "x", "--cost-ms", "-1"], "argument --cost-ms: must be at least 0"),
        (["bench", "pipeline", "--cost-ms", "nan"], "argument --cost-ms: must be"),
        ([*SEQUENCE, "--fps", "1e-6"], "argument --fps: must be at least 1/60 (one frame a minute)"),
        ([*SEQUENCE, "--fps", "1e-9"], "argument --fps: must be at least 1/60"),
        ([*SEQUENCE, "--fps", "0.0001"], "argument --fps: must be at least 1/60"),
        ([*SEQUENCE, "--fps", "1/100"], "argument --fps: must be at least 1/60"),
        ([*SEQUENCE, "--max-pixels", "2147483648"], "more than FFmpeg's limit of 2147483647 pixels"),
        ([*SEQUENCE, "--max-pixels", "3000M"], "more than FFmpeg's limit of 2147483647 pixels"),
        (["train", "--run", "", "--src", "a", "--dst", "b"], "argument --run/--run-dir: an empty path"),
        (["train", "--run", "r", "--src", "", "--dst", "b"], "argument --src: an empty path"),
        (["models", "standins", "--out", ""], "argument --out: an empty path"),
        (["models", "list", "--models-dir", ""], "argument --models-dir: an empty path"),
        (["monitor", "", "--once"], "argument RUN_DIR: an empty path"),
        ([*SEQUENCE, "--swapper", ""], "argument --swapper: an empty name"),
        (["bench", "processors", "--only", "foo"], "unknown processor 'foo'"),
    ],
)
def test_a_value_out_of_bounds_is_one_line_as_the_line_is_read(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    line = _one_line(capsys)
    assert line.startswith("ffdesk: error: ") and says in line, line


def test_the_largest_pixel_limit_ffmpeg_takes_is_taken() -> None:
    from ffdesk.runtime.env import parse_max_pixels

    assert parse_max_pixels("2147483647") == 2**31 - 1


def test_a_pixel_limit_over_ffmpegs_in_the_environment_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FFDESK_MAX_PIXELS", "2147483648")
    assert main(["probe", "clip.mp4"]) == 2
    assert "FFDESK_MAX_PIXELS: '2147483648' is more than FFmpeg's limit" in _one_line(capsys)


def test_a_frame_a_minute_is_a_frame_rate() -> None:
    from ffdesk.commands.argtypes import frame_rate

    assert frame_rate("1/60") == pytest.approx(1 / 60)
    assert frame_rate("0.0166667") == pytest.approx(1 / 60, rel=1e-5)


def test_a_frame_number_wider_than_ten_digits_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`%99999999999d` ran out of memory writing the first frame's name (MemoryError)."""
    frames = tmp_path / "dir"
    frames.mkdir()
    for i in (1, 2):
        (frames / f"frame_{i}.png").write_bytes(b"")
    for field in ("%99999999999d", "%099999999999d", "%011d"):
        argv = ["render", "-t", str(frames / f"frame_{field}.png"), "-o", str(tmp_path / "o.mp4")]
        assert main([*argv, "-s", str(tmp_path / "face.jpg")]) == 2
        line = _one_line(capsys)
        assert "asks for frame numbers of more than 10 digits" in line or "face.jpg" in line, line


def test_a_pattern_wider_than_ten_digits_is_refused_where_it_is_read(tmp_path: Path) -> None:
    from ffdesk.errors import MediaError
    from ffdesk.media.sequence import ImageSequence, find_sequence

    (tmp_path / "frame_1.png").write_bytes(b"")
    for field in ("%99999999999d", "%099999999999d", "%011d"):
        with pytest.raises(MediaError, match="more than 10 digits"):
            find_sequence(tmp_path / f"frame_{field}.png")
        with pytest.raises(MediaError, match="more than 10 digits"):
            ImageSequence(tmp_path / f"frame_{field}.png", 1, 1).first_frame  # noqa: B018
    assert find_sequence(tmp_path / "frame_%d.png") is not None
    assert ImageSequence(tmp_path / "f_%010d.png", 1, 1).first_frame.name == "f_0000000001.png"


def test_a_dead_sampler_thread_ends_telemetry(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its thread died (OverflowError of a long wait) and the command waited for ever."""

    def dying_wait(seconds: float) -> bool:
        raise OverflowError("timeout value is too large")

    def sampler(**kwargs: Any) -> Sampler:
        return Sampler(wait=dying_wait, **kwargs)

    monkeypatch.setattr(telemetry, "Sampler", sampler)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # (the thread's own report)
    assert main(["telemetry", "--json", "--count", "3", "--interval", "0.02"]) == 1
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: telemetry sampling stopped: OverflowError" in err, err


def test_a_sampler_takes_an_interval_longer_than_a_lock_can_wait() -> None:
    sampler = Sampler(interval_s=1e10, source=_Source())
    sampler.start()
    try:
        deadline = threading.Event()
        deadline.wait(0.3)
        assert sampler.running and sampler.failure is None
    finally:
        sampler.stop()


class _Source:
    no_gpu_reason: str | None = None

    def sample(self) -> Any:
        from ffdesk.telemetry.sampler import SystemProbe

        probe = SystemProbe()
        try:
            return probe.sample()
        finally:
            probe.close()

    def close(self) -> None:
        pass


def _run(folder: Path, metrics: bytes, settings: str | None = None) -> Path:
    folder.mkdir()
    (folder / "metrics.jsonl").write_bytes(metrics)
    if settings is not None:
        (folder / "run.json").write_text(settings)
    return folder


@pytest.mark.parametrize(
    ("metrics", "settings"),
    [
        (bytes(range(256)) * 4, None),
        (b'{"step":[1],"loss":{"a":1}}\n', None),
        (b'{"step":1,"loss":"x","losses":[1],"ranks":5,"world_size":"x","time":"t"}\n', None),
        (b'{"step":3,"loss":0.5}\n', '{"steps":"many"}'),
        (b'{"loss":0.5}\n{"step":2}\n', '{"steps":10}'),
    ],
)
def test_monitor_reads_a_damaged_run(
    tmp_path: Path, metrics: bytes, settings: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", metrics, settings)
    assert main(["monitor", str(run), "--once"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "internal error" not in captured.err, captured.err
    assert f"run {run}" in captured.out


def test_monitor_reads_a_damaged_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "run", b'{"step":1,"loss":0.5}\n', '{"steps":"many"}')
    status = {"state": "done", "step": "x", "steps_goal": "y", "time": "z", "world_size": [2], "ranks": {}}
    (run / "status.json").write_text(json.dumps(status))
    assert main(["monitor", str(run), "--once"]) == 0
    assert "internal error" not in capsys.readouterr().err


GOOD = json.dumps({"bench": "io", "figures": {"mb_per_s": 100.0}})


@pytest.mark.parametrize(
    "damaged",
    [bytes(range(128, 256)), b'{"figures":5}', b"[1]", b'{"bench":"io"}', b'{"bench":"io","figures":[1]}'],
)
def test_bench_compare_skips_a_damaged_history_entry_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damaged: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bench-history.jsonl"
    second = json.dumps({"bench": "io", "figures": {"mb_per_s": 110.0}})
    path.write_bytes(b"\n".join([GOOD.encode(), damaged, second.encode(), damaged]) + b"\n")
    monkeypatch.setenv("FFDESK_BENCH_HISTORY", str(path))
    assert main(["bench", "compare"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == f"ffdesk: warning: skipped 2 damaged entries of {path}", captured.err
    assert "mb_per_s" in captured.out and "+10.0%" in captured.out


def test_bench_compare_of_a_history_of_damage_only_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bench-history.jsonl"
    path.write_bytes(b'{"figures":5}\n')
    monkeypatch.setenv("FFDESK_BENCH_HISTORY", str(path))
    assert main(["bench", "compare"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"ffdesk: warning: skipped 1 damaged entry of {path}",
                     f"ffdesk: error: no benchmark history yet at {path}"]  # fmt: skip


def test_train_refuses_one_faceset_as_both_src_and_dst(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It trained; every --resume then said "--src and --dst are swapped"."""
    faceset = tmp_path / "fs1"
    faceset.mkdir()
    argv = ["train", "--src", str(faceset), "--dst", str(faceset), "--run", str(tmp_path / "R")]
    assert main([*argv, "--steps", "1"]) == 2
    assert "--src and --dst are the same faceset" in _one_line(capsys)
    assert not (tmp_path / "R").exists()


def test_a_run_on_one_faceset_is_not_called_swapped() -> None:
    from ffdesk.training import trainer

    s = type("S", (), {"src": Path("fs1"), "dst": Path("fs1")})()
    trainer._refuse_other_facesets(s, "fs1", "fs1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "-t", "", "-o", "o.mp4"],
        ["render", "-t", "a.mp4", "-o", ""],
        ["render", "-t", "a.mp4", "-o", "o.mp4", "--models-dir", ""],
        ["live", "-s", "", "--camera", "file:a.mp4"],
        ["faces", ""],
        ["faceset", "extract", "--from", "a.mp4", "--out", ""],
        ["sample", "--out", ""],
        ["probe", ""],
    ],
)
def test_an_empty_path_is_refused_where_a_file_or_folder_is_named(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert "an empty path names nothing" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["probe", "a.png"], ["live", "--camera", "file:a.mp4", "-s", "f.jpg"]])
@pytest.mark.parametrize("rate", ["nan", "0", "1e-9"])
def test_probe_and_live_take_a_frame_rate_as_render_does(
    command: list[str], rate: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--fps", rate]) == 2
    assert "--fps" in capsys.readouterr().err
