"""Farm scenarios on a real local Ray cluster, run by tests/farm/test_farm.py (all of them on one
cluster) in a network namespace that has only loopback (so Ray's nodes are on 127.0.0.1 and nothing
leaves the machine).

    python tests/farm/scenario.py WORKDIR RAYDIR SCENARIO [SCENARIO ...]

Starts a head (no CPU: it only plans and joins) and two worker nodes of one CPU each, with token
authentication on (a fresh token in the environment), runs each SCENARIO on the clip in
WORKDIR/SCENARIO/clip.mp4 ("queue": on the saved queue WORKDIR/queue/queue.json), stops every
Ray process it started, then prints one JSON line with what each saw. RAYDIR: a short folder for
Ray's sessions and sockets, which the caller removes once every process of the namespace is gone.
The tests make their assertions on that line and on the files left in the scenarios' folders. It
runs in its own PID namespace too, so the worker processes it finds (and kills) are its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def start_cluster(ray_dir: Path, tries: int = 3, workers: int = 2) -> tuple[Any, str]:
    """A head without CPUs plus `workers` one-CPU worker nodes, with token authentication on (a
    fresh token in the environment); (cluster, address). Ray gives a node 30 s to register; on a
    machine too busy for that the cluster is started again."""
    os.environ["RAY_TMPDIR"] = str(ray_dir)
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(16)
    from ray.cluster_utils import Cluster

    for attempt in range(tries):
        cluster = None
        try:
            cluster = Cluster(
                initialize_head=True,
                head_node_args={"num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 << 20},
            )
            for _ in range(workers):
                cluster.add_node(num_cpus=1, object_store_memory=80 << 20)
            cluster.wait_for_nodes()
            return cluster, str(cluster.address)
        except Exception:
            if cluster is not None:
                cluster.shutdown()
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def worker_pids() -> list[int]:
    import psutil

    pids = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if cmd.startswith("ray::FarmWorker"):
            pids.append(int(proc.info["pid"]))
    return sorted(pids)


def manifest_segments(output: Path) -> int:
    from ffdesk.pipeline.resume import MANIFEST_NAME, work_dir_for

    try:
        data = json.loads((work_dir_for(output) / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return 0
    return len(data.get("segments", []))


def wait_until(check: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return False


def render_and_status(address: str, work: Path) -> dict[str, Any]:
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import run_farm_render
    from ffdesk.pipeline import events as ev
    from ffdesk.pipeline.job import RenderJob

    events: list[Any] = []
    job = RenderJob(target=work / "clip.mp4", output=work / "farm.mov", encoder="prores", segment_frames=8)
    report = run_farm_render(job, parse_farm(address), events.append)
    status = subprocess.run(
        [sys.executable, "-m", "ffdesk", "farm", "status", address, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    return {
        "report": report.to_json_dict(),
        "progress": [e.frames_done for e in events if isinstance(e, ev.Progress)],
        "started": [e.total_frames for e in events if isinstance(e, ev.Started)],
        "status_rc": status.returncode,
        "status": json.loads(status.stdout) if status.returncode == 0 else status.stderr,
    }


def kill_worker(address: str, work: Path) -> dict[str, Any]:
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import FarmOptions, run_farm_render
    from ffdesk.pipeline.job import RenderJob

    job = RenderJob(target=work / "clip.mp4", output=work / "killed.mov", encoder="prores", segment_frames=8)
    result: dict[str, Any] = {}

    def render() -> None:
        try:
            result["report"] = run_farm_render(
                job, parse_farm(address), options=FarmOptions(stand_in="wait:60")
            ).to_json_dict()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            result["error"] = f"{type(exc).__name__}: {exc}"

    thread = threading.Thread(target=render, name="farm-render")
    thread.start()
    killed = None
    if wait_until(lambda: manifest_segments(job.output) >= 1 and len(worker_pids()) >= 2, 180):
        time.sleep(0.15)  # into the next segment
        killed = worker_pids()[0]
        os.kill(killed, signal.SIGKILL)
    thread.join(300)
    return {**result, "killed": killed}


def kill_driver(address: str, work: Path) -> dict[str, Any]:
    output = work / "driver.mov"
    cmd = [
        sys.executable, "-m", "ffdesk", "render", "--target", str(work / "clip.mp4"), "--output", str(output),
        "--encoder", "prores", "--segment-frames", "8", "--farm", address, "-q",
        "--report", str(work / "driver-report.json"),
    ]  # fmt: skip
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    recorded = wait_until(lambda: manifest_segments(output) >= 2, 240)
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    at_kill = manifest_segments(output)
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    report = json.loads((work / "driver-report.json").read_text()) if second.returncode == 0 else None
    return {
        "recorded_before_kill": recorded,
        "segments_at_kill": at_kill,
        "first_rc": first.returncode,
        "second_rc": second.returncode,
        "second_stderr": second.stderr[-2000:],
        "report": report,
    }


def _pack_job(work: Path, output: str) -> Any:
    from tests.farm.conftest import pack_job, write_pack

    return pack_job(work / "clip.mp4", write_pack(work / "pack"), work / output)


def _events(events: list[Any]) -> dict[str, Any]:
    from dataclasses import asdict

    from ffdesk.pipeline import events as ev

    return {
        "progress": [e.frames_done for e in events if isinstance(e, ev.Progress)],
        "worker_progress": [asdict(e) for e in events if isinstance(e, ev.WorkerProgress)],
    }


def pack_render(address: str, work: Path) -> dict[str, Any]:
    """A model-pack job on both workers: each keeps the pack loaded for its segments."""
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import run_farm_render

    events: list[Any] = []
    report = run_farm_render(_pack_job(work, "farm.mov"), parse_farm(address), events.append)
    return {"report": report.to_json_dict(), **_events(events)}


def ship_render(address: str, work: Path) -> dict[str, Any]:
    """The same job with the clip shipped: the workers are told a path that exists nowhere."""
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import FarmOptions, run_farm_render

    job = _pack_job(work, "shipped.mov")
    report = run_farm_render(job, parse_farm(address), options=FarmOptions(ship_source=True))
    return {"report": report.to_json_dict()}


def matte_clip(address: str, work: Path) -> dict[str, Any]:
    """`ffdesk render --farm ADDR --matte clip` of a model-pack job: the matte clip beside the
    output, said in the report."""
    from tests.farm.conftest import pack_render_args, write_pack

    args = pack_render_args(work / "clip.mp4", write_pack(work / "pack"), work / "farm.mov")
    report = work / "farm-report.json"
    command = [sys.executable, "-m", "ffdesk", *args, "--matte", "clip", "--farm", address, "-q"]
    done = subprocess.run(
        [*command, "--report", str(report)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    return {
        "rc": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr[-3000:],
        "report": json.loads(report.read_text()) if done.returncode == 0 else None,
    }


def progress_and_metrics(address: str, work: Path) -> dict[str, Any]:
    """Slow stand-in segments: progress between segments, and each worker's metrics scraped
    over loopback while it renders."""
    import urllib.request

    import ray

    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.board import read_board
    from ffdesk.farm.head import FarmOptions, run_farm_render
    from ffdesk.pipeline import events as ev
    from ffdesk.pipeline.job import RenderJob

    events: list[Any] = []
    scraped: dict[str, str] = {}

    def on_event(event: Any) -> None:
        events.append(event)
        if isinstance(event, ev.WorkerProgress) and event.frames_done > 0 and len(scraped) < 2:
            for row in (read_board(ray) or {}).get("workers", {}).values():
                url = row.get("metrics_url")
                if url and url not in scraped:
                    scraped[url] = urllib.request.urlopen(url, timeout=10).read().decode()

    job = RenderJob(target=work / "clip.mp4", output=work / "slow.mov", encoder="prores", segment_frames=24)
    options = FarmOptions(stand_in="wait:40")
    report = run_farm_render(job, parse_farm(address), on_event, options=options)
    return {"report": report.to_json_dict(), "scraped": scraped, **_events(events)}


def too_small(address: str, work: Path) -> dict[str, Any]:
    """A model-pack job under a budget no worker's pool can hold its swapper in: refused before
    any segment is handed out, naming the worker."""
    from dataclasses import replace

    from ffdesk.errors import UserError
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import run_farm_render

    job = replace(_pack_job(work, "small.mov"), memory_budget=256 << 10)
    try:
        run_farm_render(job, parse_farm(address))
    except UserError as exc:
        return {"refused": str(exc), "segments": manifest_segments(job.output), "output": job.output.exists()}
    return {"refused": None}


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> dict[str, Any]:
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ffdesk", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return {"rc": done.returncode, "stderr": done.stderr, "seconds": time.monotonic() - t0}


def token_places(address: str, work: Path) -> dict[str, Any]:
    """`farm status` from a process whose environment names no token mode: with the token in
    the address, in the token file, a wrong one."""
    token = os.environ["RAY_AUTH_TOKEN"]
    home = work / "home"
    bare = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    bare["HOME"] = str(home)
    out = {
        "in_address": _cli("farm", "status", f"{token}@{address}", env=bare),
        "wrong": _cli("farm", "status", f"wrong{token[:8]}@{address}", env=bare),
        "none": _cli("farm", "status", address, env=bare),
    }
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(token)
    out["file"] = _cli("farm", "status", address, env=bare)
    return out


def scratch_left(address: str, work: Path) -> dict[str, Any]:
    """The scratch folders that a finished render's workers left behind on their node."""
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import run_farm_render
    from ffdesk.farm.scratch import PREFIX
    from ffdesk.pipeline.job import RenderJob

    job = RenderJob(target=work / "clip.mp4", output=work / "scratch.mov", encoder="prores", segment_frames=8)
    report = run_farm_render(job, parse_farm(address))
    assert report.farm is not None
    pids = {w.pid for w in report.farm.workers}
    left = []
    for lock in Path(tempfile.gettempdir()).glob(f"{PREFIX}*.lock"):
        with contextlib.suppress(OSError, ValueError):
            if json.loads(lock.read_text()).get("pid") in pids and lock.with_suffix("").exists():
                left.append(str(lock.with_suffix("")))
    return {"pids": sorted(pids), "left": left}


def sigterm_head(address: str, work: Path) -> dict[str, Any]:
    """SIGTERM to `ffdesk render --farm` once two segments are in: it stops, keeping them; the
    same command then resumes."""
    output = work / "term.mov"
    cmd = [
        sys.executable, "-m", "ffdesk", "render", "--target", str(work / "clip.mp4"), "--output", str(output),
        "--encoder", "prores", "--segment-frames", "8", "--farm", address, "-q",
    ]  # fmt: skip
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    recorded = wait_until(lambda: manifest_segments(output) >= 2, 240)
    first.send_signal(signal.SIGTERM)
    _, first_err = first.communicate(timeout=60)
    kept = manifest_segments(output)
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    return {
        "recorded": recorded,
        "first_rc": first.returncode,
        "first_stderr": first_err,
        "kept": kept,
        "second_rc": second.returncode,
        "second_stderr": second.stderr[-2000:],
    }


def faceless_source(address: str, work: Path) -> dict[str, Any]:
    """The embedded swap with a source photo that has no face: refused before any segment."""
    import cv2
    import numpy as np

    from ffdesk.errors import UserError
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.head import run_farm_render
    from ffdesk.pipeline.job import RenderJob
    from ffdesk.pipeline.resume import work_dir_for

    photo = work / "grey.png"
    cv2.imwrite(str(photo), np.full((160, 160, 3), 128, np.uint8))
    job = RenderJob(
        target=work / "clip.mp4",
        output=work / "faceless.mov",
        encoder="prores",
        segment_frames=8,
        sources=(photo,),
    )
    t0 = time.monotonic()
    try:
        run_farm_render(job, parse_farm(address))
    except UserError as exc:
        refused: str | None = str(exc)
    else:
        refused = None
    return {
        "refused": refused,
        "seconds": time.monotonic() - t0,
        "work_dir": work_dir_for(job.output).exists(),
        "output": job.output.exists(),
    }


def queue_run(address: str, work: Path) -> dict[str, Any]:
    """`ffdesk queue run --farm` on the saved queue in WORK/queue.json."""
    command = [sys.executable, "-m", "ffdesk", "queue", "run", "--queue", str(work / "queue.json"), "-q"]
    done = subprocess.run(
        [*command, "--farm", address], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    return {"address": address, "rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-3000:]}


SCENARIOS = {
    "render": render_and_status,
    "kill-worker": kill_worker,
    "kill-driver": kill_driver,
    "pack": pack_render,
    "ship": ship_render,
    "matte": matte_clip,
    "progress": progress_and_metrics,
    "too-small": too_small,
    "token": token_places,
    "scratch": scratch_left,
    "sigterm": sigterm_head,
    "faceless": faceless_source,
    "queue": queue_run,
}


def main() -> int:
    work, ray_dir, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    home = Path(tempfile.mkdtemp(prefix="ffdesk-farm-home-"))
    os.environ["HOME"] = str(home)  # Ray's default token file stays out of the real home
    cluster = None
    out: dict[str, Any]
    try:
        cluster, address = start_cluster(ray_dir)
        out = {"node_addresses": sorted({n.node_ip_address for n in cluster.list_all_nodes()})}
        for name in names:
            try:
                out[name] = SCENARIOS[name](address, work / name)
            except BaseException as exc:  # noqa: BLE001 - the test reads the reason
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    except BaseException as exc:  # noqa: BLE001 - the test reads the reason
        out = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        if cluster is not None:
            import ray

            if ray.is_initialized():
                ray.shutdown()
            cluster.shutdown()
        shutil.rmtree(home, ignore_errors=True)
    print("SCENARIO-RESULT " + json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
