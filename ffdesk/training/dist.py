"""torch.distributed for training: who this process is, the collectives the loop needs, and
the time the gradient all-reduce takes.

A process started by `torchrun` (or by `ffdesk train --nproc N`, which starts torchrun) finds
`RANK`, `WORLD_SIZE` and `LOCAL_RANK` in its environment; one started any other way is rank 0 of 1
and never touches torch.distributed. GPUs talk over NCCL (one GPU per local rank), CPUs over gloo.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as tdist

from ffdesk.errors import UserError


@dataclass(frozen=True)
class DistContext:
    """This process's place in the training job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    restart: int = 0
    """How many times torchrun restarted the job (TORCHELASTIC_RESTART_COUNT)."""

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> DistContext:
        e = os.environ if env is None else env
        try:
            world = int(e.get("WORLD_SIZE", "1"))
            rank = int(e.get("RANK", "0"))
            local = int(e.get("LOCAL_RANK", str(rank)))
            restart = int(e.get("TORCHELASTIC_RESTART_COUNT", "0"))
        except ValueError:
            raise UserError("RANK, WORLD_SIZE and LOCAL_RANK must be whole numbers") from None
        if world < 1 or not 0 <= rank < world:
            raise UserError(f"RANK {rank} is not within WORLD_SIZE {world}")
        return cls(rank=rank, world_size=world, local_rank=local, restart=restart)


def device_for(ctx: DistContext, requested: torch.device) -> torch.device:
    """One GPU per local rank; CPU ranks share the CPU."""
    if ctx.distributed and requested.type == "cuda":
        count = torch.cuda.device_count()
        if ctx.local_rank >= count:
            raise UserError(f"local rank {ctx.local_rank} has no GPU (this machine has {count})")
        return torch.device("cuda", ctx.local_rank)
    return requested


def init(ctx: DistContext, device: torch.device) -> None:
    """Join the process group (a no-op for one process)."""
    if not ctx.distributed or tdist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    tdist.init_process_group(backend=backend, rank=ctx.rank, world_size=ctx.world_size)


def close(ctx: DistContext) -> None:
    if ctx.distributed and tdist.is_initialized():
        tdist.destroy_process_group()


def max_ints(ctx: DistContext, values: list[int], device: torch.device) -> list[int]:
    """The element-wise maximum over all ranks (every rank gets it)."""
    if not ctx.distributed:
        return values
    t = torch.tensor(values, dtype=torch.int64, device=device)
    tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
    return [int(v) for v in t.tolist()]


def gather_floats(ctx: DistContext, values: list[float], device: torch.device) -> list[list[float]]:
    """Every rank's `values` (NaN for none), in rank order, on every rank."""
    if not ctx.distributed:
        return [values]
    t = torch.tensor(values, dtype=torch.float64, device=device)
    out = [torch.empty_like(t) for _ in range(ctx.world_size)]
    tdist.all_gather(out, t)
    return [o.tolist() for o in out]


def broadcast_max_diff(ctx: DistContext, params: list[torch.Tensor], device: torch.device) -> float:
    """The largest difference between this rank's parameters and rank 0's, over all ranks."""
    if not ctx.distributed:
        return 0.0
    flat = torch.cat([p.detach().reshape(-1).to(device, torch.float32) for p in params])
    ref = flat.clone()
    tdist.broadcast(ref, src=0)
    diff = torch.tensor([float((flat - ref).abs().max())], dtype=torch.float64, device=device)
    tdist.all_reduce(diff, op=tdist.ReduceOp.MAX)
    return float(diff.item())


@dataclass
class CommTimer:
    """The gradient all-reduce's times over a logging window (the comm hook's state).

    - `exposed`: time each backward pass went on after its last gradient bucket was launched
      (from that launch to the end of the backward call): the communication the backward pass
      could not hide, what all-reduce adds to a step on this rank. It includes waiting for a rank
      that reaches the all-reduce later; the rank that arrives last waits for no one.
    - `seconds`: wall time with some bucket's all-reduce in flight (the union of the buckets'
      launch-to-done spans), overlapped with the backward pass or not: an upper bound.
    """

    process_group: Any = None
    seconds: float = 0.0
    exposed: float = 0.0
    calls: int = 0
    busy_until: float = 0.0
    last_launch: float | None = None

    def add(self, start: float, end: float) -> None:
        if end > self.busy_until:
            self.seconds += end - max(start, self.busy_until)
            self.busy_until = end
        self.calls += 1

    def launched(self, t: float) -> None:
        self.last_launch = t

    def backward_done(self, t: float) -> None:
        """The backward pass returned at `t` (DDP waits there for every bucket)."""
        if self.last_launch is not None:
            self.exposed += max(0.0, t - self.last_launch)
            self.last_launch = None

    def reset(self) -> None:
        self.seconds, self.exposed, self.calls = 0.0, 0.0, 0


def timed_allreduce_hook(state, bucket):  # type: ignore[no-untyped-def]
    """DDP's default hook (average the bucket over ranks) with its time recorded in `state`.

    Unannotated: DDP refuses a hook whose `bucket` annotation is not `dist.GradBucket`, and this
    module's annotations are strings."""
    t0 = time.perf_counter()
    state.launched(t0)
    group = state.process_group
    world = tdist.get_world_size(group)
    buf = bucket.buffer()
    buf.div_(world)
    fut = tdist.all_reduce(buf, group=group, async_op=True).get_future()

    def done(f: torch.futures.Future[Any]) -> torch.Tensor:
        state.add(t0, time.perf_counter())
        value = f.value()
        return value[0] if isinstance(value, list) else value

    return fut.then(done)
