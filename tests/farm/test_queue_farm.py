"""`ffdesk queue run --farm ADDR` renders a saved two-job queue on a real local Ray cluster (a head
and one worker node, in a network namespace with only loopback, as in test_farm.py); each output
is the local render's, frame for frame, and the queue file says both are done.

Run as a script inside the namespace (`python test_queue_farm.py QUEUE RAYDIR`) it starts the
cluster, runs the command, stops every Ray process and prints one JSON line with what it saw.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.farm.scenario import start_cluster  # noqa: E402


def _queue_on_a_farm(queue: Path, ray_dir: Path) -> dict[str, Any]:
    """Start the cluster, run the command on it, stop every process of it."""
    home = Path(tempfile.mkdtemp(prefix="ffdesk-farm-home-"))
    os.environ["HOME"] = str(home)  # Ray's default token file stays out of the real home
    cluster = None
    try:
        # the scenarios' cluster less a node: one worker renders the queue too, in a third of the time
        cluster, address = start_cluster(ray_dir, workers=1)
        command = [sys.executable, "-m", "ffdesk", "queue", "run", "--queue", str(queue), "-q"]
        done = subprocess.run(
            [*command, "--farm", address], capture_output=True, text=True, timeout=600, cwd=ROOT
        )
        return {
            "address": address,
            "nodes": sorted({n.node_ip_address for n in cluster.list_all_nodes()}),
            "rc": done.returncode,
            "stdout": done.stdout,
            "stderr": done.stderr[-3000:],
        }
    except Exception as exc:  # noqa: BLE001 - the test reads the reason
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    print("QUEUE-RESULT " + json.dumps(_queue_on_a_farm(Path(sys.argv[1]), Path(sys.argv[2]))))
    raise SystemExit(0)


import pytest  # noqa: E402 - the script above runs without the test's imports

from ffdesk.media.synth import frame_index_of, synth_clip  # noqa: E402
from ffdesk.pipeline.engine import run_render  # noqa: E402
from ffdesk.pipeline.job import RenderJob  # noqa: E402
from ffdesk.pipeline.queue import RenderQueue  # noqa: E402
from ffdesk.runtime.env import RuntimeEnv  # noqa: E402
from tests.farm.cluster import namespace_works, skip_if_overloaded  # noqa: E402
from tests.farm.test_farm import assert_same_frames, frames_of  # noqa: E402

pytest.importorskip("ray")
pytestmark = [
    pytest.mark.skipif(not namespace_works(), reason="needs `unshare -n -p` (root) to keep Ray on loopback"),
    pytest.mark.timeout(900),
]


def test_queue_run_on_a_farm_renders_each_job_as_a_local_render(run_env: RuntimeEnv, tmp_path: Path) -> None:
    frames = {"one": 24, "two": 16}
    queue = RenderQueue(tmp_path / "queue.json")
    for name, count in frames.items():
        synth_clip(tmp_path / f"{name}.mp4", width=96, height=64, fps=25, frames=count, audio_streams=1)
        queue.add(
            RenderJob(
                target=tmp_path / f"{name}.mp4",
                output=tmp_path / f"{name}-farm.mov",
                encoder="prores",
                segment_frames=8,
            )
        )
    ray_dir = Path(tempfile.mkdtemp(prefix="ffq", dir="/tmp"))  # short: Ray's socket paths
    script = f"ip link set lo up && exec {sys.executable} {__file__} {queue.path} {ray_dir}"
    try:
        done = subprocess.run(
            ["unshare", "-n", "-p", "-f", "--mount-proc", "--kill-child", "sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=800,
            cwd=ROOT,
        )
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)  # the namespace's processes are all gone now
    lines = [line for line in done.stdout.splitlines() if line.startswith("QUEUE-RESULT ")]
    assert lines, f"the farm queue printed no result (rc {done.returncode}): {done.stderr[-3000:]}"
    result = json.loads(lines[-1].removeprefix("QUEUE-RESULT "))
    skip_if_overloaded(result.get("error"))
    assert "error" not in result, result["error"]
    assert result["nodes"] == ["127.0.0.1"]
    assert result["rc"] == 0, result["stderr"]
    summary = result["stdout"].strip().splitlines()[-1]
    assert summary.startswith(f"queue: 2 done on the farm at {result['address']} in "), result["stdout"]

    entries = RenderQueue(queue.path).entries()
    assert [e.state for e in entries] == ["done", "done"]
    for entry, (name, count) in zip(entries, frames.items(), strict=True):
        assert (entry.frames_done, entry.frames_total) == (count, count)
        local = tmp_path / f"{name}-local.mov"
        run_render(
            RenderJob(target=entry.job.target, output=local, encoder="prores", segment_frames=8), env=run_env
        )
        assert_same_frames(entry.job.output, local, count)
        assert [frame_index_of(f) for f in frames_of(entry.job.output)] == list(range(count))
