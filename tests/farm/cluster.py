"""Running farm scenarios (scenario.py) on a real local Ray cluster, in network and PID
namespaces of their own that have only loopback: Ray's node address is 127.0.0.1, nothing leaves
the machine, and every process the scenarios start ends with them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

SCENARIO = Path(__file__).with_name("scenario.py")
ROOT = Path(__file__).resolve().parents[2]


def namespace_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe_run = subprocess.run(
        ["unshare", "-n", "-p", "-f", "--mount-proc", "sh", "-c", "ip link set lo up"], capture_output=True
    )
    return probe_run.returncode == 0


def run_scenarios(work: Path, names: tuple[str, ...], timeout_s: float = 1200) -> dict[str, Any]:
    """Run `names` (each on the clip in `work/NAME/clip.mp4`) on one cluster; their results."""
    ray_dir = Path(tempfile.mkdtemp(prefix="ffr", dir="/tmp"))  # short: Ray's socket paths
    command = f"ip link set lo up && exec {sys.executable} {SCENARIO} {work} {ray_dir} {' '.join(names)}"
    try:
        done = subprocess.run(
            ["unshare", "-n", "-p", "-f", "--mount-proc", "--kill-child", "sh", "-c", command],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=ROOT,
        )
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)  # the namespace's processes are all gone now
    lines = [line for line in done.stdout.splitlines() if line.startswith("SCENARIO-RESULT ")]
    assert lines, f"the farm scenarios printed no result (rc {done.returncode}): {done.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("SCENARIO-RESULT "))
    skip_if_overloaded(result.get("error"))
    assert "error" not in result, result["error"]
    assert result["node_addresses"] == ["127.0.0.1"]
    return result


def skip_if_overloaded(error: str | None) -> None:
    """Ray gives a starting node 30 s to register (not configurable): on a machine running far
    more than it has cores for, the cluster cannot start at all (three tries). That says nothing
    about the farm, so the tests are skipped then, saying why; on a machine with room they run."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    if error and "timed out during startup" in error and load > 4:
        pytest.skip(f"Ray could not start its nodes: this machine is overloaded (load {load:.0f} a core)")
