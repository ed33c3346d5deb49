"""Starting N training processes on this machine under torchrun (`ffdesk train --nproc N`).

`ffdesk train --nproc N ...` checks its input, then runs

    python -m torch.distributed.run --standalone --nnodes 1 --nproc-per-node N
        --max-restarts R -m ffdesk train ...(the same options, without --nproc)

and waits for it. The workers find their rank in the environment torchrun gives them. Several
machines start the same `ffdesk train` command under torchrun themselves (see the README).

Environment set for torchrun and its workers (a value the user set is kept):

- `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`: with torch 2.13's default (the rendezvous store
  shared with the workers), a restart after a lost process can hang in the rendezvous;
- `GLOO_SOCKET_IFNAME=lo` on Linux: on one machine the CPU processes talk over loopback, whatever
  the host name resolves to;
- `PYTHONPATH` led by the folder ffdesk is imported from, so the workers import the same ffdesk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

ELASTIC_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


@dataclass(frozen=True)
class LaunchPlan:
    command: tuple[str, ...]
    env: Mapping[str, str]


def in_torchrun(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a worker started by torchrun (or another launcher that sets ranks)."""
    e = os.environ if env is None else env
    return "LOCAL_RANK" in e or "TORCHELASTIC_RUN_ID" in e


def leave_rank(code: int) -> NoReturn:
    """End a torchrun worker with `code` once its work is written, without the interpreter's
    teardown.

    torch 2.13's gloo worker threads outlive `destroy_process_group` (the process group stays
    referenced from C++), and the thread that ran a collective drops its last reference to the
    collective's tensors a moment after the caller has its result. When the process is by then
    finalizing, releasing those tensors takes the GIL, which ends the thread with a forced
    unwind through a destructor: `std::terminate` ("terminate called without an active
    exception"), SIGABRT, and torchrun calls a finished run failed. It hit about one two-process
    run in fifty on two busy cores, on the rank that ends first. Every file a run writes is
    written (atomically) before this; only the standard streams and logging need flushing."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream: nothing to keep
            stream.flush()
    os._exit(code)


def default_nproc() -> int:
    """One process per GPU there is, else one."""
    import torch

    return max(1, torch.cuda.device_count()) if torch.cuda.is_available() else 1


def worker_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    for key, value in ELASTIC_ENV.items():
        env.setdefault(key, value)
    # torchrun's own choice for several processes a machine, given so that it does not print
    # four lines of advice about it at every start
    env.setdefault("OMP_NUM_THREADS", "1")
    if sys.platform.startswith("linux"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root, *[p for p in paths if p != root]])
    return env


def plan(nproc: int, max_restarts: int, train_argv: Sequence[str], base_env: Mapping[str, str] | None = None
         ) -> LaunchPlan:  # fmt: skip
    command = (
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
        "--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts),
        "-m", "ffdesk", "train", *train_argv,
    )  # fmt: skip
    return LaunchPlan(command=command, env=worker_env(base_env))


def run(p: LaunchPlan) -> int:
    """Run torchrun and wait. torchrun and its workers are a process group of their own, to
    which this process passes Ctrl-C and SIGTERM (each once), whether they came to this process
    alone (`kill PID`, a scheduler stopping its main process: torchrun and the workers used to
    train on, orphaned) or to the terminal's whole group; the workers save first. A signal this
    process was started ignoring (a script's background job and Ctrl-C) stays ignored, for
    torchrun and its workers too (inherited through exec)."""
    import signal

    passed = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in passed}
    child: list[subprocess.Popen[bytes]] = []

    def pass_on(signum: int, _frame: object) -> None:
        if child and child[0].poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(child[0].pid, signum)

    for signum in passed:
        if previous[signum] != signal.SIG_IGN:
            signal.signal(signum, pass_on)
    try:
        # torchrun's workers' log folders (empty unless asked to keep their output) in one that
        # goes with the run, not a `torchelastic_*` folder left in the temporary folder each time
        with tempfile.TemporaryDirectory(prefix="ffdesk-torchrun-") as logs:
            proc = subprocess.Popen(with_log_dir(p.command, logs), env=dict(p.env), start_new_session=True)
            child.append(proc)
            try:
                return proc.wait()
            finally:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def with_log_dir(command: Sequence[str], folder: str) -> list[str]:
    """`command` (torchrun's) with `--log-dir folder` among torchrun's own options, unless it
    names one already."""
    if "--log-dir" in command or "torch.distributed.run" not in command:
        return list(command)
    at = list(command).index("torch.distributed.run") + 1
    return [*command[:at], "--log-dir", folder, *command[at:]]
