"""Workers per node: one per GPU slot (fractional GPUs), one per CPU share on CPU-only nodes."""

from __future__ import annotations

from ffdesk.farm.slots import GIB, NodeResources, SlotRules, plan_slots


def test_gpu_nodes_get_a_worker_per_gpu_share_with_its_part_of_the_memory() -> None:
    nodes = [
        NodeResources("a", "10.0.0.1", cpus=16, gpus=2, gpu_memory_gb=48),
        NodeResources("b", "10.0.0.2", cpus=8, gpus=0),
    ]
    slots = plan_slots(nodes, SlotRules(gpus_per_worker=0.5, cpus_per_worker=4), budget_bytes=None)
    gpu = [s for s in slots if s.num_gpus]
    cpu = [s for s in slots if not s.num_gpus]
    assert len(gpu) == 4 and all(s.num_gpus == 0.5 and s.num_cpus == 0 for s in gpu)
    assert all(s.budget_bytes == 12 * GIB for s in gpu)
    assert len(cpu) == 2 and all(s.num_cpus == 4 and s.node_id == "b" for s in cpu)
    assert len({s.name for s in slots}) == 6


def test_without_declared_memory_the_job_budget_holds_and_a_cap_spreads_over_nodes() -> None:
    nodes = [NodeResources("a", "h1", cpus=4, gpus=0), NodeResources("b", "h2", cpus=4, gpus=0)]
    slots = plan_slots(nodes, SlotRules(max_workers=3), budget_bytes=2 * GIB)
    assert [s.node_id for s in slots] == ["a", "b", "a"]
    assert all(s.budget_bytes == 2 * GIB for s in slots)


def test_nodes_on_one_address_get_distinct_names_and_empty_nodes_none() -> None:
    nodes = [
        NodeResources("x", "127.0.0.1", cpus=1, gpus=0),
        NodeResources("y", "127.0.0.1", cpus=1, gpus=0),
        NodeResources("head", "127.0.0.1", cpus=0, gpus=0),
    ]
    slots = plan_slots(nodes, SlotRules(), budget_bytes=None)
    assert len(slots) == 2 and len({s.name for s in slots}) == 2
    assert {s.node_id for s in slots} == {"x", "y"}
