"""How many workers each node gets: one per GPU slot, or per `num_cpus` on CPU-only nodes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

GIB = 1 << 30
GPU_MEMORY_RESOURCE = "gpu_memory_gb"
"""A node's declared GPU memory (GiB, over all its GPUs): split between its GPU workers as their
model budgets, so a model pack too big for a card is refused before any work."""


@dataclass(frozen=True)
class NodeResources:
    """One alive Ray node as the farm sees it."""

    node_id: str
    address: str
    cpus: float
    gpus: float
    gpu_memory_gb: float | None = None

    @classmethod
    def from_ray(cls, node: Mapping[str, Any]) -> NodeResources:
        """From one entry of `ray.nodes()`."""
        res = node.get("Resources") or {}
        memory = res.get(GPU_MEMORY_RESOURCE)
        return cls(
            node_id=str(node["NodeID"]),
            address=str(node.get("NodeManagerAddress", "?")),
            cpus=float(res.get("CPU", 0.0)),
            gpus=float(res.get("GPU", 0.0)),
            gpu_memory_gb=float(memory) if memory is not None else None,
        )


@dataclass(frozen=True)
class Slot:
    """One worker to start: where, what it reserves, its model budget (None: unlimited)."""

    name: str
    node_id: str
    address: str
    num_cpus: float
    num_gpus: float
    budget_bytes: int | None


@dataclass(frozen=True)
class SlotRules:
    """`gpus_per_worker`: the share of a GPU each worker takes (0.5: two workers a card).
    `cpus_per_worker`: CPUs a worker takes on a node without GPUs. `max_workers`: a cap."""

    gpus_per_worker: float = 1.0
    cpus_per_worker: float = 1.0
    max_workers: int | None = None


def plan_slots(nodes: Sequence[NodeResources], rules: SlotRules, budget_bytes: int | None) -> list[Slot]:
    """Workers for `nodes`: each GPU node gets floor(GPUs / gpus_per_worker) workers of
    `num_gpus=gpus_per_worker` (and no CPU reservation), each CPU-only node floor(CPUs /
    cpus_per_worker) of `num_cpus=cpus_per_worker`. A GPU worker's budget is its share of the
    node's `gpu_memory_gb` where declared, else `budget_bytes` (the job's)."""
    if not 0 < rules.gpus_per_worker <= 1 and not rules.gpus_per_worker.is_integer():
        raise ValueError("gpus_per_worker must be a fraction of one GPU or a whole number")
    slots: list[Slot] = []
    for node in sorted(nodes, key=lambda n: (n.address, n.node_id)):
        if node.gpus > 0:
            count = math.floor(node.gpus / rules.gpus_per_worker + 1e-9)
            share = node.gpu_memory_gb * rules.gpus_per_worker / node.gpus if node.gpu_memory_gb else None
            budget = int(share * GIB) if share else budget_bytes
            for i in range(count):
                name = f"{node.address}/gpu{i}"
                slots.append(Slot(name, node.node_id, node.address, 0.0, rules.gpus_per_worker, budget))
        elif node.cpus > 0:
            count = math.floor(node.cpus / rules.cpus_per_worker + 1e-9)
            for i in range(count):
                name = f"{node.address}/cpu{i}"
                slots.append(Slot(name, node.node_id, node.address, rules.cpus_per_worker, 0.0, budget_bytes))
    if rules.max_workers is not None:
        slots = _spread(slots, rules.max_workers)
    return _unique_names(slots)


def _spread(slots: list[Slot], limit: int) -> list[Slot]:
    """At most `limit` slots, taken round-robin over the nodes (not all from the first)."""
    by_node: dict[str, list[Slot]] = {}
    for s in slots:
        by_node.setdefault(s.node_id, []).append(s)
    picked: list[Slot] = []
    while len(picked) < limit and any(by_node.values()):
        for queue in by_node.values():
            if queue and len(picked) < limit:
                picked.append(queue.pop(0))
    return picked


def _unique_names(slots: list[Slot]) -> list[Slot]:
    """Nodes that share an address (a test cluster on one machine) get numbered slot names."""
    nodes_at: dict[str, list[str]] = {}
    for s in slots:
        ids = nodes_at.setdefault(s.address, [])
        if s.node_id not in ids:
            ids.append(s.node_id)
    out = []
    for s in slots:
        ids = nodes_at[s.address]
        if len(ids) > 1:
            host, _, rest = s.name.partition("/")
            s = replace(s, name=f"{host}#{ids.index(s.node_id) + 1}/{rest}")
        out.append(s)
    return out
