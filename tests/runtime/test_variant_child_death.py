"""The process that makes a variant dies (the out-of-memory killer) or the user interrupts its
wait: the render ends in one line, at once, and leaves neither that process nor its inputs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
import pytest

from ffdesk.commands.interrupt import stop_signals, terminate_raises
from ffdesk.errors import Cancelled, Terminated, UserError
from ffdesk.runtime import precision as prec
from tests.runtime.conftest import made

WHAT = "w.onnx: its INT8 variant"
ROOT = Path(__file__).resolve().parents[2]


def _works_long(*_inputs: object) -> None:
    """Stands for the quantization: works (sleeps) far longer than any test waits."""
    time.sleep(120)


def _same_as_sent(value: dict[str, object], expected: list[object]) -> None:
    """In the variant's process: `value` arrived as it was sent (types, dtype, shape, contents)."""
    crop, blob, buf = value["crop"], value["blob"], value["buf"]
    assert isinstance(crop, np.ndarray) and isinstance(blob, bytes) and isinstance(buf, bytearray)
    got = [crop.dtype.str, crop.shape, float(crop.sum()), blob[:4], len(blob), bytes(buf[-3:]), value["tag"]]
    if got != expected:
        raise AssertionError(f"{got} != {expected}")


def _spawned(timeout: float = 30.0) -> int:
    """The pid of the variant's process as soon as it exists (before it has read anything: a
    process started by `multiprocessing`'s spawn method)."""
    me, end = psutil.Process(), time.monotonic() + timeout
    while time.monotonic() < end:
        for child in me.children():
            with contextlib.suppress(psutil.Error):
                if any("spawn_main" in part for part in child.cmdline()):
                    return child.pid
        time.sleep(0.005)
    raise AssertionError("no variant process started")


def _at_work(folder: Path, then: Callable[[int], None], seen: list[int]) -> threading.Thread:
    """A thread that waits for the variant's process to take its inputs from `folder` (the file
    gone: it is at work), then calls `then(pid)`; the pid goes to `seen`."""

    def watch() -> None:
        pid = _spawned()
        seen.append(pid)
        end = time.monotonic() + 30
        while _left(folder) and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.3)
        then(pid)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _left(folder: Path) -> list[str]:
    """What is in `folder` (but `multiprocessing`'s own temporary folders, and the digests of the
    models a cache folder there remembers)."""
    return sorted(p.name for p in made(folder) if not p.name.startswith("pymp-"))


@pytest.fixture()
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system's temporary folder, for this test: where the variant's inputs go by default."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# Run in a process of its own with a time limit: before the fix, the parent blocked for good
# writing the inputs into the start-up pipe of a process already dead (no signal ended it).
DIES_AT_ONCE = textwrap.dedent(
    """
    import os, signal, threading, time
    import numpy as np, psutil
    from ffdesk.errors import UserError
    from ffdesk.runtime import precision as prec
    from tests.runtime.test_variant_child_death import _works_long

    def kill_the_variant_process():  # as the out-of-memory killer would, before it reads anything
        me = psutil.Process()
        while True:
            for child in me.children():
                with __import__("contextlib").suppress(psutil.Error):
                    if any("spawn_main" in part for part in child.cmdline()):
                        os.kill(child.pid, signal.SIGKILL)
                        killed.append(child.pid)
                        return
            time.sleep(0.005)

    # One thread prints, after the killer is done: two threads' prints interleave word by word.
    killed = []
    killer = threading.Thread(target=kill_the_variant_process, daemon=True)
    killer.start()
    crops = [{"target": np.full((8, 3, 128, 128), i, np.float32)} for i in range(8)]  # 12 MiB
    t0 = time.monotonic()
    try:
        # (work that outlasts the killer however busy the machine: a quick one could be done
        # before the killer found its process, and the test ended with nothing said)
        prec._in_own_process("w.onnx: its INT8 variant", _works_long, crops)
    except UserError as exc:
        took = time.monotonic() - t0
        killer.join(5)
        print("killed", *killed, flush=True)
        print(f"after {took:.1f} s: {exc}", flush=True)
    """
)


@pytest.mark.timeout(120)
def test_a_process_killed_before_it_reads_its_inputs_is_one_line_at_once(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT)}
    try:
        run = subprocess.run(
            [sys.executable, "-c", DIES_AT_ONCE],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"still waiting on a dead variant process after 60 s: {exc.stdout!r} {exc.stderr!r}")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("killed "), run.stdout
    said = lines[-1]
    assert said.endswith(f": {WHAT}: the process making it ended before it was done (out of memory?)"), said
    assert float(said.split()[1]) < 20, said  # at once (the machine may be busy)
    assert _left(scratch) == []  # its inputs' file removed


@pytest.mark.timeout(60)
def test_a_process_killed_at_work_is_one_line_and_leaves_no_inputs(scratch: Path) -> None:
    crops = [{"target": np.ones((8, 3, 128, 128), np.float32)} for _ in range(4)]
    seen: list[int] = []
    _at_work(scratch, lambda pid: os.kill(pid, signal.SIGKILL), seen)
    t0 = time.monotonic()
    with pytest.raises(UserError, match=r"^w\.onnx: its INT8 variant: the process making it ended before"):
        prec._in_own_process(WHAT, _works_long, crops)
    assert time.monotonic() - t0 < 30
    assert seen and _gone(seen[0])
    assert _left(scratch) == []


def _kill_when(variants: Path, at_work: bool) -> None:
    """Kill the variant's process as it starts, or once it is at work: its files (beyond its
    inputs) appear in its work folder."""
    pid = _spawned()
    end = time.monotonic() + 60
    while at_work and time.monotonic() < end:
        made = [p for p in variants.glob(".int8-*/*") if not p.name.startswith(".variant-inputs-")]
        if made:
            break
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("at_work", [False, True], ids=["as-it-starts", "at-work"])
def test_an_int8_variant_whose_process_is_killed_is_one_line_and_leaves_nothing(
    standins_dir: Path, tmp_path: Path, at_work: bool
) -> None:
    """As the out-of-memory killer on a render node: the variant's process dies as it starts,
    before it has read its inputs (a render's calibration crops, 3 MiB), or while it works; the
    render goes on to its one line, and the variants folder keeps nothing of it (neither the
    inputs, nor the model it prepared, nor the variant half-written)."""
    rng = np.random.default_rng(5)
    feeds = [
        {"target": rng.random((1, 3, 128, 128), np.float32), "source": rng.random((1, 512), np.float32)}
        for _ in range(16)
    ]
    variants = tmp_path / "variants"
    variants.mkdir()
    threading.Thread(target=_kill_when, args=(variants, at_work), daemon=True).start()
    t0 = time.monotonic()
    with pytest.raises(UserError, match=r"^inswapper_128\.onnx: its INT8 variant: the process making it"):
        prec.make_int8(standins_dir / "inswapper_128.onnx", feeds, cache_dir=variants)
    assert time.monotonic() - t0 < 60
    assert _left(variants) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("where", "signum", "raised"),
    [
        ("command", signal.SIGTERM, Terminated),  # `terminate_raises`: any command but a render
        ("command", signal.SIGINT, KeyboardInterrupt),  # Python's own Ctrl-C
        ("render", signal.SIGTERM, Cancelled),  # a render's cancel, before any frame
        ("render", signal.SIGINT, Cancelled),
    ],
)
def test_an_interrupt_while_waiting_kills_the_process(
    scratch: Path, where: str, signum: int, raised: type[BaseException]
) -> None:
    cancel = threading.Event()
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    seen: list[int] = []
    crops = [{"target": np.ones((8, 3, 128, 128), np.float32)}]
    handlers = stop_signals(cancel) if where == "render" else terminate_raises()
    t0 = time.monotonic()
    with pytest.raises(raised), handlers:
        _at_work(scratch, lambda _pid: os.kill(os.getpid(), signum), seen)
        prec._in_own_process(WHAT, _works_long, crops)
    assert time.monotonic() - t0 < 30  # not the two minutes the process would take
    assert seen and _gone(seen[0])  # killed, not left computing
    assert _left(scratch) == []
    assert cancel.is_set() == (where == "render")  # the render's own handler ran too
    assert {s: signal.getsignal(s) for s in before} == before


@pytest.mark.timeout(60)
def test_the_inputs_go_apart_from_the_start_up_pipe_and_come_back_as_they_were(tmp_path: Path) -> None:
    crop = np.linspace(0, 1, 3 * 128 * 128 * 16, dtype=np.float32).reshape(16, 3, 128, 128)
    blob, buf = b"ffd" + b"x" * 100_000, bytearray(b"y" * 5000 + b"end")
    value = {"crop": crop, "blob": blob, "buf": buf, "tag": "t"}
    payload, arrays = prec._set_apart((_same_as_sent, (value,)))
    assert len(payload) < 1024 and arrays[0] is crop and len(arrays) == 3
    expected = ["<f4", (16, 3, 128, 128), float(crop.sum()), b"ffdx", 100_003, b"end", "t"]
    prec._in_own_process(WHAT, _same_as_sent, value, expected, folder=tmp_path)  # as sent: no error
    with pytest.raises(AssertionError, match="!="):  # the check does run there
        prec._in_own_process(WHAT, _same_as_sent, value, [*expected[:-1], "other"], folder=tmp_path)
    assert _left(tmp_path) == []


def test_what_does_not_go_apart_stays_small() -> None:
    with pytest.raises(ValueError, match="start-up pipe"):
        prec._in_own_process(WHAT, len, list(range(100_000)))


@pytest.mark.timeout(60)
def test_signals_the_wait_found_ignored_stay_ignored(scratch: Path) -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        seen: list[int] = []

        def term_then_kill(pid: int) -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # ignored: the wait goes on
            time.sleep(0.3)
            os.kill(pid, signal.SIGKILL)

        _at_work(scratch, term_then_kill, seen)
        with pytest.raises(UserError, match="ended before it was done"):
            prec._in_own_process(WHAT, _works_long, [np.ones(4096)])
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen and _gone(seen[0])


# SIGTERM with its default action (the library used from a program of its own, `ffdesk train`)
# while the variant's process works: the process ends with the signal, its work folder gone first
TERMINATED_AT_WORK = textwrap.dedent(
    """
    import contextlib, os, signal, sys, threading, time
    from pathlib import Path
    import numpy as np, psutil
    from ffdesk.runtime import precision as prec

    variants = Path(sys.argv[2])

    def terminate_when_at_work():
        me = psutil.Process()
        while True:
            for child in me.children():
                with contextlib.suppress(psutil.Error):
                    if any("spawn_main" in part for part in child.cmdline()):
                        end = time.monotonic() + 60
                        while time.monotonic() < end and not [
                            p for p in variants.glob(".int8-*/*") if not p.name.startswith(".variant-inputs")
                        ]:
                            time.sleep(0.01)
                        os.kill(os.getpid(), signal.SIGTERM)
                        return
            time.sleep(0.01)

    threading.Thread(target=terminate_when_at_work, daemon=True).start()
    rng = np.random.default_rng(5)
    feeds = [
        {"target": rng.random((1, 3, 128, 128), np.float32), "source": rng.random((1, 512), np.float32)}
        for _ in range(16)
    ]
    prec.make_int8(Path(sys.argv[1]), feeds, cache_dir=variants)
    print("finished", flush=True)
    """
)


@pytest.mark.timeout(180)
def test_sigterm_of_the_default_action_ends_the_process_with_its_work_folder_gone(
    standins_dir: Path, tmp_path: Path
) -> None:
    variants = tmp_path / "variants"
    variants.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", TERMINATED_AT_WORK, str(standins_dir / "inswapper_128.onnx"), str(variants)],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stdout, done.stderr[-2000:])
    assert _left(variants) == []
