"""Shared plumbing for benches: cached synthesized inputs, JSON output, timing helpers."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ffdesk.bench import history
from ffdesk.errors import MediaError, UserError
from ffdesk.media import atomic, named_output
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.userpath import stream_fd, stream_problem


def cache_dir(env: RuntimeEnv) -> Path:
    """Where benches keep their synthesized inputs between runs: the environment's
    `bench_cache` (`$FFDESK_BENCH_CACHE/bench`, else `<user cache>/ffdesk/bench`)."""
    folder = env.bench_cache
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def cached(path: Path, make: Callable[[Path], Any]) -> Path:
    """Create `path` with `make(tmp)` once (atomically); reuse it afterwards."""
    if path.exists():
        return path
    with atomic.replacing(path, durable=False) as tmp:
        make(tmp)
    return path


def json_output(text: str) -> Path:
    """`--json FILE`, checked as the command line is read, not after the bench has run: a file
    (not a folder) in a folder that is there and can be written."""
    path = Path(text).expanduser()
    if stream_fd(path) is not None:  # `-`, /dev/stdout: written through the open descriptor
        if (problem := stream_problem(path)) is not None:
            raise argparse.ArgumentTypeError(f"{text}: {problem}")
        return path
    if path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{path} is a folder; give a file in it, such as {path / 'figures.json'}"
        )
    try:
        atomic.check_writable_folder(path.parent)
    except MediaError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return path


def say_if_no_gpu(provider: str, env: RuntimeEnv) -> None:
    """The one line a render gives (on stderr) when `provider` asks for the GPU and this machine
    cannot give it: a bench whose renders run in child processes, or with no notes of its own,
    would otherwise measure the CPU without saying so."""
    from ffdesk.pipeline.plan import provider_missing

    for note in provider_missing(provider, env):
        print(f"warning: {note}", file=sys.stderr, flush=True)


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", type=json_output, default=None, metavar="FILE", help="write figures as JSON"
    )


def _write_json(path: Path, rec: dict[str, Any]) -> None:
    """The record at `path`, whole or not at all; a disk that fills is one line (`UserError`)."""
    try:
        named_output.write_named(path, json.dumps(rec, indent=2, default=str) + "\n")
    except OSError as exc:
        atomic.raise_if_disk_full(exc, path)
        raise UserError(f"--json {path}: cannot write the figures ({exc.strerror or exc})") from None


def median_ms(fn: Callable[[], Any], runs: int, warmup: int = 1) -> float:
    """Median milliseconds of `runs` calls of `fn`, after `warmup` untimed calls."""
    import numpy as np

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, runs)):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1000)


def core_scaling(
    threads: int | None = None, chunks: int = 60, work: Callable[[], None] | None = None
) -> float:
    """How many times one core's throughput `threads` threads (default: one per core) get from
    this machine right now: each hashes `chunks` MiB (SHA-256, which runs without the GIL), first
    one thread alone, then all at once. About the core count on an idle machine of its own; less
    where another process, or another machine on a shared host, is busy (load average shows only
    this machine's processes). Takes about `chunks` x 7 ms x 2 here. `work`: one thread's share
    instead of the hashing."""
    import hashlib
    import os
    import threading

    n = max(1, threads or os.cpu_count() or 1)
    data = bytes(1 << 20)

    def hashing() -> None:
        for _ in range(chunks):
            hashlib.sha256(data).digest()

    share = work or hashing

    def wall(count: int) -> float:
        pool = [threading.Thread(target=share) for _ in range(count)]
        t = time.perf_counter()
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        return time.perf_counter() - t

    one = wall(1)
    return round(n * one / max(wall(n), 1e-9), 2)


def timed_command(cmd: Sequence[str], env: dict[str, str] | None = None) -> float:
    """Wall seconds of a command; raises with its stderr tail when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {' | '.join(tail)}")
    return seconds


def finish(
    name: str,
    settings: dict[str, Any],
    figures: dict[str, Any],
    json_path: Path | None,
    env: RuntimeEnv,
    *,
    measured: bool = True,
) -> dict[str, Any]:
    """Record the run in the environment's bench history and write the JSON file if asked. A run
    that `measured` nothing (no device to measure on) writes its JSON only: the history keeps
    figures to compare."""
    if measured:
        rec = history.record(name, settings, figures, history.history_path(env))
    else:
        rec = history.run_record(name, settings, figures)
    if json_path is not None:
        _write_json(json_path, rec)
        if stream_fd(json_path) is None:
            print(f"figures written to {json_path}")
    return rec


def write_so_far(
    name: str, settings: dict[str, Any], figures: dict[str, Any], json_path: Path | None
) -> None:
    """The figures of a run not over yet, in the JSON file if asked (marked `"partial": true`; not
    in the history): a run stopped by a time limit still leaves what it measured. `finish`
    replaces it."""
    if json_path is not None and stream_fd(json_path) is None:  # a stream gets the whole record once
        _write_json(json_path, history.run_record(name, settings, {**figures, "partial": True}))


def with_article(word: str) -> str:
    """`word` after "a" or "an" as it is spelled ("a swapper", "an enhancer", "an inswapper_128"):
    the names a bench puts after an article are catalog names and kinds, read as written."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def which(program: str) -> str | None:
    return shutil.which(program)


def priority_line(state: str) -> str:
    """How the stage threads' priority was handled (`ffdesk.pipeline.helper_priority`)."""
    if state == "governed":
        return "idle while the rest of the machine is quiet (the encoder's threads go first)"
    return f"normal throughout ({state})"
