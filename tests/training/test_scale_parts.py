"""The parts of multi-process training that need no second process: the batch split, the rank
environment, the torchrun command, the monitor's per-rank lines, allocator and AMP settings."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.training import control, launch
from ffdesk.training.dataset import BatchSpec, PairBatches
from ffdesk.training.dist import CommTimer, DistContext
from ffdesk.training.follow import MetricsFollower, summarise
from ffdesk.training.trainer import Trainer, amp_dtype, set_alloc_split
from tests.training.conftest import tiny_settings


def test_ranks_draw_disjoint_parts_that_make_the_one_process_batch(facesets: tuple[Path, Path]) -> None:
    a, b = facesets
    whole = PairBatches(a, b, BatchSpec(resolution=32, batch=4, seed=3), length=10)[7]
    parts = [PairBatches(a, b, BatchSpec(resolution=32, batch=4, seed=3, rank=r, world_size=2), length=10)[7]
             for r in range(2)]  # fmt: skip
    for side in ("a", "b"):
        for key in ("input", "target", "mask"):
            joined = torch.cat([p[side][key] for p in parts])
            assert torch.equal(joined, whole[side][key]), (side, key)
    assert not torch.equal(parts[0]["a"]["target"], parts[1]["a"]["target"])
    other_step = PairBatches(a, b, BatchSpec(resolution=32, batch=4, seed=3), length=10)[8]
    assert not torch.equal(other_step["a"]["target"], whole["a"]["target"])
    with pytest.raises(ValueError, match="does not split"):
        BatchSpec(resolution=32, batch=3, seed=0, rank=0, world_size=2)


def test_rank_environment() -> None:
    ctx = DistContext.from_env(
        {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "TORCHELASTIC_RESTART_COUNT": "2"}
    )
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.restart) == (1, 4, 1, 2)
    assert ctx.distributed and not ctx.is_main
    assert not DistContext.from_env({}).distributed
    with pytest.raises(UserError):
        DistContext.from_env({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(UserError):
        DistContext.from_env({"RANK": "x"})


def test_a_global_batch_that_does_not_split_is_refused(facesets: tuple[Path, Path], tmp_path: Path) -> None:
    trainer = Trainer(
        tiny_settings(facesets, tmp_path / "run", 2, batch=3), ctx=DistContext(rank=0, world_size=2)
    )
    with pytest.raises(UserError, match="multiple of 2"):
        trainer.check()
    assert not (tmp_path / "run").exists()  # checked before anything is written


def test_the_torchrun_command_and_its_environment(tmp_path: Path) -> None:
    from ffdesk.commands import train

    parser = argparse.ArgumentParser()
    train.register(parser.add_subparsers())
    teacher, student = str(tmp_path / "t"), str(tmp_path / "s")
    ns = parser.parse_args(["train", "distill", "--teacher", teacher, "--run", student, "--batch", "8",
                            "--nproc", "2", "--amp", "--alloc-split-mb", "128", "--lr-schedule", "cosine",
                            "--ddp-bucket-mb", "0.5"])  # fmt: skip
    argv = train.worker_argv(ns)
    assert argv[0] == "distill" and "--nproc" not in argv and "--amp" in argv
    assert argv[argv.index("--run-dir") + 1] == str((tmp_path / "s").resolve())
    again = parser.parse_args(["train", *argv])
    assert (again.teacher, again.run, again.batch, again.alloc_split_mb) == (
        (tmp_path / "t").resolve(), (tmp_path / "s").resolve(), 8, 128)  # fmt: skip
    assert (again.lr_schedule, again.ddp_bucket_mb) == ("cosine", 0.5)
    plan = launch.plan(2, 3, argv, base_env={"PATH": "/bin"})
    assert plan.command[1:3] == ("-m", "torch.distributed.run")
    assert plan.command[plan.command.index("--nproc-per-node") :][:2] == ("--nproc-per-node", "2")
    assert plan.command[plan.command.index("--max-restarts") + 1] == "3"
    assert plan.env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert plan.env["PYTHONPATH"].split(os.pathsep)[0] == str(Path(train.__file__).resolve().parents[2])
    kept = launch.plan(
        2, 0, argv, base_env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0", "GLOO_SOCKET_IFNAME": "eth1"}
    )
    assert kept.env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0" and kept.env["GLOO_SOCKET_IFNAME"] == "eth1"
    assert launch.in_torchrun({"LOCAL_RANK": "0"}) and not launch.in_torchrun({})


def test_the_monitor_shows_each_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    ranks = [{"rank": r, "pid": 10 + r, "samples_per_s": 12.5 + r, "allreduce_s": 0.1,
              "allreduce_share": 0.04, "gpu_memory_bytes": (r + 1) * 2**30, "gpu_power_w": 250.0 + r}
             for r in range(2)]  # fmt: skip
    rec = {"step": 10, "time": 1.0, "loss": 1.0, "losses": {}, "samples_per_s": 27.0, "world_size": 2,
           "allreduce_share": 0.04, "ranks": ranks}  # fmt: skip
    (run / control.METRICS).write_text(json.dumps(rec) + "\n")
    control.write_status(run, "running", 10, 100, world_size=2, ranks=ranks)
    summary = summarise(run, MetricsFollower(run / control.METRICS).poll())
    assert summary.world_size == 2 and [r.samples_per_s for r in summary.ranks] == [12.5, 13.5]
    assert main(["monitor", str(run), "--once"]) == 0
    out = capsys.readouterr().out
    assert "2 processes, all-reduce share of a step 4%" in out
    assert "rank 1: samples/s 13.5  all-reduce 4%  GPU memory 2.0 GiB  power 251 W" in out


def test_allocator_split_and_amp_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,max_split_size_mb:64")
    set_alloc_split(256)
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True,max_split_size_mb:256"
    with pytest.raises(UserError):
        set_alloc_split(5)
    cpu = torch.device("cpu")
    assert amp_dtype(cpu) == torch.bfloat16 and amp_dtype(cpu, "fp16") == torch.float16


def test_the_all_reduce_timer_counts_overlapping_buckets_once() -> None:
    t = CommTimer()
    t.add(0.0, 1.0)
    t.add(0.5, 1.5)  # overlaps the first: only 0.5 s more
    t.add(2.0, 2.25)
    assert t.seconds == pytest.approx(1.75) and t.calls == 3


def test_the_exposed_all_reduce_is_what_the_backward_pass_waits_after_its_last_bucket() -> None:
    t = CommTimer()
    t.launched(1.0)
    t.launched(1.5)  # the last bucket of the step: the backward pass's own work is done
    t.backward_done(1.75)
    t.backward_done(9.0)  # a step whose buckets were not launched adds nothing
    t.launched(3.0)
    t.backward_done(2.5)  # clocks of different threads never make it negative
    assert t.exposed == pytest.approx(0.25)
    t.add(0.0, 1.0)
    t.reset()
    assert (t.seconds, t.exposed, t.calls) == (0.0, 0.0, 0)


def test_a_run_trains_each_step_at_its_scheduled_rate(facesets: tuple[Path, Path], tmp_path: Path) -> None:
    from ffdesk.training.schedule import lr_at

    settings = tiny_settings(facesets, tmp_path / "run", 6, lr_schedule="cosine")
    Trainer(settings).run()
    recs = [json.loads(line) for line in (tmp_path / "run" / control.METRICS).read_text().splitlines()]
    assert [r["lr"] for r in recs] == pytest.approx([lr_at(k - 1, 6, 1e-3, "cosine") for k in (2, 4, 6)])
    assert recs[0]["lr"] > recs[-1]["lr"]


def test_the_cosine_schedule_warms_up_then_decays_to_its_floor() -> None:
    from ffdesk.training.schedule import FLOOR, lr_at

    rates = [lr_at(i, 100, 1e-3, "cosine") for i in range(100)]
    assert rates[0] == pytest.approx(1e-3 / 5) and rates[4] == pytest.approx(1e-3)  # 5 warm-up steps
    assert all(a >= b for a, b in zip(rates[4:], rates[5:], strict=False))
    assert rates[-1] == pytest.approx(1e-3 * FLOOR)
    assert {lr_at(i, 100, 1e-3, "constant") for i in range(100)} == {1e-3}


def test_a_worker_leaves_without_the_interpreters_teardown(tmp_path: Path) -> None:
    """A torchrun worker ends through `leave_rank`: its exit code and all its buffered output
    arrive, and nothing of the interpreter's teardown runs (where gloo's threads crashed it)."""
    marker = tmp_path / "teardown-ran"
    script = (
        "import atexit, pathlib, sys\n"
        "from ffdesk.training.launch import leave_rank\n"
        f"atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text('x'))\n"
        "sys.stdout.write('o' * 200_000)\n"
        "sys.stderr.write('last words')\n"
        "leave_rank(3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert proc.stdout == "o" * 200_000 and proc.stderr == "last words"
    assert not marker.exists()


def test_ffdesk_under_torchrun_keeps_its_exit_code_and_output(tmp_path: Path) -> None:
    env = {**os.environ, "LOCAL_RANK": "0", "PYTHONPATH": str(Path(launch.__file__).resolve().parents[2])}
    run = [sys.executable, "-m", "ffdesk", "train", "--src", str(tmp_path / "none"), "--dst", str(tmp_path),
           "--run", str(tmp_path / "run"), "--steps", "1"]  # fmt: skip
    proc = subprocess.run(run, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("ffdesk: error: ") and proc.stderr.count("\n") == 1
