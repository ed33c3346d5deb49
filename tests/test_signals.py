"""SIGTERM and Ctrl-C: a stop that reports, a repeat that is the same request, and a command that
lets go of what it holds when SIGTERM ends it (temporary folders, child processes)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from ffdesk.commands.interrupt import REPEAT_S, stop_signals, terminate_raises
from ffdesk.errors import Terminated

ROOT = Path(__file__).resolve().parents[1]


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.01)  # Python runs the handler at its next instruction on the main thread


def test_sigterm_and_ctrl_c_set_the_stop_and_the_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    for signum in (signal.SIGTERM, signal.SIGINT):
        stop = threading.Event()
        with stop_signals(stop):
            _signal_self(signum)
            assert stop.is_set()
            _signal_self(signum)  # the same request delivered twice (GNU timeout): nothing more
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_second_ctrl_c_after_the_repeat_window_interrupts() -> None:
    stop = threading.Event()
    with stop_signals(stop), pytest.raises(KeyboardInterrupt):
        _signal_self(signal.SIGINT)
        time.sleep(REPEAT_S + 0.05)
        _signal_self(signal.SIGINT)


def test_sigterm_raises_terminated_and_a_second_sigterm_during_a_stop_goes_on_to_it() -> None:
    with terminate_raises():
        with pytest.raises(Terminated):
            _signal_self(signal.SIGTERM)
        _signal_self(signal.SIGTERM)  # again at once, while the first unwinds: ignored
    with terminate_raises():
        stop = threading.Event()
        with stop_signals(stop), pytest.raises(Terminated):
            _signal_self(signal.SIGTERM)  # a render stops at its next frame ...
            assert stop.is_set()
            time.sleep(REPEAT_S + 0.05)
            _signal_self(signal.SIGTERM)  # ... and a later SIGTERM does not wait for it


_TWICE = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from ffdesk.commands.interrupt import stop_signals, terminate_raises
    stop = threading.Event()
    with terminate_raises(), stop_signals(stop):
        for _ in range(int(sys.argv[1])):
            os.kill(os.getpid(), signal.SIGTERM)  # as GNU timeout does: the process, then its group
            time.sleep(float(sys.argv[2]))
        print("stopped" if stop.is_set() else "running", flush=True)
    """
)


def test_a_signal_delivered_twice_at_once_is_one_stop_and_a_third_later_ends_the_process() -> None:
    run = [sys.executable, "-c", _TWICE]
    twice = subprocess.run([*run, "2", "0.001"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (twice.returncode, twice.stdout.strip()) == (0, "stopped"), twice.stderr
    later = subprocess.run([*run, "3", str(REPEAT_S)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert later.returncode == 1 and "Terminated" in later.stderr  # raised, not swallowed


@pytest.mark.slow
def test_sigterm_ends_a_bench_with_its_children_and_temporary_folder(tmp_path: Path) -> None:
    """`ffdesk bench memory` runs its renders as child processes in a temporary folder: SIGTERM
    (a scheduler, `timeout`) ends it with one line, its render stopped and the folder gone."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    from ffdesk.bench.memory import PACK
    from ffdesk.runtime.standins import write_standins

    pack = tmp_path / "pack"  # small stand-ins: the realistic ones took 30 s to write
    write_standins(pack, list(PACK), realistic=False, dynamic_batch=True)
    cmd = [sys.executable, "-m", "ffdesk", "bench", "memory", "--frames", "2", "--models-dir", str(pack)]
    with _running(cmd, env) as proc:
        bench = psutil.Process(proc.pid)
        deadline = time.monotonic() + 240
        children: list[psutil.Process] = []
        while not children and time.monotonic() < deadline and proc.poll() is None:
            children = bench.children(recursive=True)
            time.sleep(0.05)
        assert children, "the bench started no render"
        folders = list(tmp_path.glob("ffdesk-bench-memory-*"))
        assert folders
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "ffdesk: stopped (SIGTERM)"
    assert "Traceback" not in err
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive
    assert not any(f.exists() for f in folders)


@contextlib.contextmanager
def _running(cmd: list[str], env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    """`cmd` started from the project's root, killed on the way out if it is still running."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[str], limit_s: float = 240) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)


def test_sigterm_stops_a_render_as_ctrl_c_does_and_a_rerun_resumes(tmp_path: Path) -> None:
    """A scheduler's SIGTERM keeps the frames encoded, lets go of the output's lock and leaves
    nothing at the output path; the same command again finishes the clip."""
    from ffdesk.cli import main
    from ffdesk.media.synth import synth_clip
    from ffdesk.pipeline.resume import work_dir_for

    clip = tmp_path / "long.mp4"
    synth_clip(clip, width=320, height=180, fps=25, frames=400, audio_streams=0)
    out = tmp_path / "out.mov"
    args = ["render", "--target", str(clip), "--output", str(out), "--encoder", "prores", "-q"]
    cmd = [sys.executable, "-m", "ffdesk", *args]
    with _running(cmd) as proc:
        _wait_for(lambda: work_dir_for(out).is_dir() and any(work_dir_for(out).glob("seg*")), proc)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)  # as GNU timeout sends it: to the process, then its group
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "ffdesk: cancelled" and "Traceback" not in err
    assert not out.exists()
    assert not [p.name for p in tmp_path.iterdir() if "lock" in p.name or "partial" in p.name]
    assert main(args) == 0
    import av

    with av.open(str(out)) as c:
        assert c.streams.video[0].frames == 400


def _datagram_came(watch: socket.socket) -> bool:
    try:
        return bool(watch.recv(65536))
    except TimeoutError:
        return False


def test_sigterm_ends_a_live_session_with_its_figures_and_a_whole_recording(tmp_path: Path) -> None:
    from ffdesk.media.synth import synth_clip

    clip = tmp_path / "cam.mp4"
    synth_clip(clip, width=320, height=240, fps=20, frames=400, audio_streams=0)
    rec = tmp_path / "rec.mp4"
    source = ROOT / "resources" / "sample" / "grace_hopper.jpg"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as watch:
        watch.bind(("127.0.0.1", 0))
        watch.settimeout(0.1)
        # The session streams to `watch` too: its first datagram is a frame through the outputs,
        # the recording (the last of them) given that frame in the same call, which the session
        # finishes before it ends. (A fixed second after the recording's file appeared was a race:
        # the models load after that, and a loaded machine took 0.3-1.1 s to a first frame; a
        # SIGTERM before it ends the session with no frame out and nothing recorded.)
        stream = f"udp://127.0.0.1:{watch.getsockname()[1]}"
        cmd = [sys.executable, "-m", "ffdesk", "live", "--source", str(source), "--camera", f"file:{clip}",
               "--record", str(rec), "--stream", stream]  # fmt: skip
        with _running(cmd) as proc:
            _wait_for(lambda: _datagram_came(watch), proc)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "frames out" in out and f"recorded {rec}" in out
    assert not list(tmp_path.glob(".rec.partial-*"))
    import av

    with av.open(str(rec)) as c:
        assert sum(1 for _ in c.decode(video=0)) > 0
