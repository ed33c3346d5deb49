"""A Python child for the hostile-input tests: its own user folders, a time limit (a child still
waiting on a named pipe when it ends fails the test) and, where asked, a memory cap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_child(
    args: list[str], tmp_path: Path, *, seconds: float, memory: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`python args...` in `tmp_path`; `memory`: the child's address-space cap in bytes."""
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }

    def capped() -> None:  # pragma: no cover - runs in the child
        import resource

        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    try:
        return subprocess.run(
            [sys.executable, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=seconds,
            preexec_fn=capped,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} still ran after {seconds} s (waiting on a named pipe?)")
