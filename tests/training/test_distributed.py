"""`ffdesk train --nproc 2` on the CPU (gloo, two processes, tiny model, SGD), bound to loopback.

Each run goes through torchrun inside a network namespace that has only loopback (as root with
`unshare -n`), with MASTER_ADDR=127.0.0.1 and GLOO_SOCKET_IFNAME=lo.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ffdesk.training import control
from ffdesk.training.model import ModelConfig, SwapAutoencoder
from ffdesk.training.trainer import Trainer
from tests.training.conftest import tiny_settings

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6


def _loopback_prefix() -> list[str]:
    try:
        ok = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip("unshare -n is not permitted here (needs root or user namespaces)")
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def _train_cmd(facesets: tuple[Path, Path], run: Path, steps: int, *extra: str) -> list[str]:
    a, b = facesets
    return [sys.executable, "-m", "ffdesk", "train", "--src", str(a), "--dst", str(b), "--run", str(run),
            "--steps", str(steps), "--resolution", "64", "--batch", "4", "--model-size", "tiny",
            "--workers", "0", "--lr", "1e-3", "--optimizer", "sgd", "--log-every", "2",
            "--preview-every", "10", "--save-every", "10", "--no-export", "-q", "--nproc", "2",
            *extra]  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
            "GLOO_SOCKET_IFNAME": "lo"}  # fmt: skip


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / control.CHECKPOINT, weights_only=True)["model"]


def _assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-5, msg=name)


def _wait_for_metrics(proc: subprocess.Popen[str], run: Path) -> None:
    """Until the run has logged its first metrics (its ranks train), for up to 90 s."""
    deadline = time.monotonic() + 90
    while not (run / control.METRICS).exists() or not (run / control.METRICS).read_text():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.1)


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / control.METRICS).read_text().splitlines()]


def test_two_processes_equal_one_with_the_same_global_batch(
    facesets: tuple[Path, Path], tmp_path: Path
) -> None:
    prefix = _loopback_prefix()
    ddp = tmp_path / "ddp"
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = subprocess.run([*prefix, *_train_cmd(facesets, ddp, STEPS)], env={**_env(), "TMPDIR": str(temp)},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    left = [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")]  # (torch's cache)
    assert not left, f"the run left folders in the temporary folder: {left}"
    status = control.read_json(ddp / control.STATUS)
    assert status is not None and status["state"] == "done" and status["world_size"] == 2
    assert status["replica_max_diff"] <= 1e-5  # both ranks hold the same weights
    assert [r["rank"] for r in status["ranks"]] == [0, 1]
    recs = _records(ddp)
    assert [r["step"] for r in recs] == [2, 4, 6]  # rank 0 alone writes metrics
    assert all(r["world_size"] == 2 and len(r["ranks"]) == 2 for r in recs)
    assert all(0 <= r["allreduce_share"] <= 1 and r["ranks"][1]["samples_per_s"] > 0 for r in recs)
    for r in recs:  # the record's share is the rank that waited least; the rest is waiting
        shares = [x["allreduce_share"] for x in r["ranks"]]
        assert r["allreduce_share"] == min(shares) and r["sync_wait_share"] == max(shares) - min(shares)
        assert all(0 <= x["allreduce_in_flight_share"] <= 1 for x in r["ranks"])

    single = tmp_path / "single"
    Trainer(tiny_settings(facesets, single, STEPS, optimizer="sgd")).run()
    _assert_same(_weights(ddp), _weights(single))

    # resumed with another world size (one process), the global batch stays: still the same run
    Trainer(tiny_settings(facesets, ddp, STEPS + 4, optimizer="sgd", resume=True)).run()
    Trainer(tiny_settings(facesets, single, STEPS + 4, optimizer="sgd", resume=True)).run()
    _assert_same(_weights(ddp), _weights(single))


@pytest.mark.slow
def test_a_killed_rank_is_restarted_from_the_checkpoint(facesets: tuple[Path, Path], tmp_path: Path) -> None:
    prefix = _loopback_prefix()
    run, steps = tmp_path / "run", 20  # (the pause lands before the end on a loaded machine too)
    cmd = [*prefix, *_train_cmd(facesets, run, steps, "--max-restarts", "1")]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        sent = False
        while True:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the run did not pause"
            status = control.read_json(run / control.STATUS) or {}
            if not sent and status.get("step", 0) >= 2:
                control.send(run, "pause")  # a fixed point to kill at: the pause writes a checkpoint
                sent = True
            if status.get("state") == "paused":
                break
            time.sleep(0.05)
        paused_at = status["step"]
        assert 2 <= paused_at < steps
        os.kill(status["ranks"][1]["pid"], signal.SIGKILL)  # rank 1 lost mid-run
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert f"resumed at step {paused_at} (restart 1)" in err
    assert control.read_json(run / control.STATUS)["state"] == "done"  # type: ignore[index]
    assert [r["step"] for r in _records(run)] == list(range(2, steps + 1, 2))  # none repeated or lost
    straight = tmp_path / "straight"
    Trainer(tiny_settings(facesets, straight, steps, optimizer="sgd")).run()
    _assert_same(_weights(run), _weights(straight))


def test_ctrl_c_stops_every_rank_after_a_checkpoint_and_unused_mask_heads_do_not_break_ddp(
    facesets: tuple[Path, Path], tmp_path: Path
) -> None:
    """Two things of one DDP launch (each launch starts three interpreters): Ctrl-C stops every
    rank after a checkpoint, and with `--mask-weight 0` the mask heads, given no gradient, neither
    break DDP's reduction (it would fail at the second step, before any metrics) nor change."""
    prefix = _loopback_prefix()
    run = tmp_path / "run"
    cmd = [*prefix, *_train_cmd(facesets, run, 100_000, "--mask-weight", "0")]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        _wait_for_metrics(proc, run)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process gets it
        _out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    assert "continue with --resume" in err
    status = control.read_json(run / control.STATUS)
    assert status is not None and status["state"] == "interrupted"
    ckpt = torch.load(run / control.CHECKPOINT, weights_only=True)
    assert ckpt["step"] == status["step"] >= 2
    # the unused mask heads: no mask loss logged, and the heads frozen (never updated)
    assert set(_records(run)[-1]["losses"]) == {"l1_a", "dssim_a", "l1_b", "dssim_b"}
    torch.manual_seed(0)
    fresh = SwapAutoencoder(ModelConfig.tiny(64)).state_dict()["decoder_a.mask.weight"]
    torch.testing.assert_close(ckpt["model"]["decoder_a.mask.weight"], fresh)


def test_sigterm_to_the_command_alone_stops_torchrun_and_every_rank(
    facesets: tuple[Path, Path], tmp_path: Path
) -> None:
    """A scheduler stopping `ffdesk train --nproc 2` signals its main process only: torchrun and
    the ranks used to go on training, orphaned. They stop after a checkpoint, as at Ctrl-C, and
    the run's temporary folders go with them."""
    import psutil

    prefix = _loopback_prefix()
    run, temp = tmp_path / "run", tmp_path / "temp"
    temp.mkdir()
    cmd = [*prefix, *_train_cmd(facesets, run, 100_000)]
    proc = subprocess.Popen(cmd, env={**_env(), "TMPDIR": str(temp)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        _wait_for_metrics(proc, run)
        os.kill(proc.pid, signal.SIGTERM)  # the command's process alone
        _out, err = proc.communicate(timeout=90)
        left = [p for p in psutil.process_iter(["cmdline"]) if str(run) in " ".join(p.info["cmdline"] or [])]
        deadline = time.monotonic() + 30
        while left and time.monotonic() < deadline:  # (the ranks end as torchrun reaps them)
            time.sleep(0.2)
            left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert not left, f"still running after the command ended: {[p.pid for p in left]}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for p in psutil.process_iter(["cmdline"]):  # (whatever is left, not left to the next test)
            if str(run) in " ".join(p.info["cmdline"] or []):
                p.kill()
    assert proc.returncode == 130, err[-3000:]  # (interrupted, resumable: as at Ctrl-C)
    assert "continue with --resume" in err
    status = control.read_json(run / control.STATUS)
    assert status is not None and status["state"] == "interrupted", status
    left_in_temp = [p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")]
    assert not left_in_temp, left_in_temp
