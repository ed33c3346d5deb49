"""The GPU memory a process holds is read from the card it runs on, as CUDA numbers it: a farm
worker or a training rank given one GPU of several sees it as device 0."""

from __future__ import annotations

from typing import Any

import pytest

from ffdesk import hw
from ffdesk.hw import nvidia

UUIDS = ("GPU-aa11", "GPU-bb22", "GPU-cc33", "GPU-dd44")


class FourGpus:
    """pynvml with four cards; process 42 holds (index + 1) MiB on card `index`."""

    def __init__(self, *, uuid_bytes: bool = False, names: tuple[str, ...] = ("NVIDIA A40",) * 4) -> None:
        self.uuid_bytes = uuid_bytes
        self.names = names

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        return None

    def nvmlShutdown(self) -> None:  # noqa: N802
        return None

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(UUIDS)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        if not 0 <= i < len(UUIDS):
            raise RuntimeError("NVMLError_InvalidArgument")
        return i

    def nvmlDeviceGetUUID(self, handle: int) -> str | bytes:  # noqa: N802
        return UUIDS[handle].encode() if self.uuid_bytes else UUIDS[handle]

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        return self.names[handle]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:  # noqa: N802
        return [type("P", (), {"pid": 42, "usedGpuMemory": (handle + 1) * 2**20})()]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:  # noqa: N802
        return type("M", (), {"used": 100 * 2**20})()


@pytest.fixture
def nv(monkeypatch: pytest.MonkeyPatch) -> FourGpus:
    fake = FourGpus()
    monkeypatch.setattr(nvidia, "load_pynvml", lambda: fake)
    return fake


def card_of(device_id: int, visible: str | None) -> int | None:
    """Which card (NVML index) the process's memory was read from; None: not told."""
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    used = hw.process_gpu_memory(device_id, pid=42, flags=hw.DriverFlags(), environ=environ)
    return None if used is None else used // 2**20 - 1


@pytest.mark.parametrize(
    ("device_id", "visible", "card"),
    [
        (0, None, 0),  # every card visible: CUDA's numbers are NVML's
        (2, None, 2),
        (0, "3", 3),  # a farm worker given the fourth card calls it device 0
        (1, "3,1", 1),
        (0, "3,1", 3),
        (0, " 2 ", 2),
        (0, "GPU-cc33", 2),  # by UUID
        (0, "GPU-dd", 3),  # a UUID's prefix, as CUDA takes it
        (1, "GPU-bb22,GPU-aa11", 0),
        (1, "3", None),  # past the list
        (0, "", None),  # no card visible
        (1, "1,-1,2", None),  # CUDA reads the list up to its first invalid entry
        (0, "MIG-5f0e", None),  # a MIG instance: NVML's per-process figures are not its own
        (0, "GPU-ffff", None),  # a UUID no card has
    ],
)
def test_the_card_read_is_the_one_cuda_calls_device_n(
    nv: FourGpus, device_id: int, visible: str | None, card: int | None
) -> None:
    assert card_of(device_id, visible) == card


def test_uuids_given_as_bytes_by_older_pynvml_are_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvidia, "load_pynvml", lambda: FourGpus(uuid_bytes=True))
    assert card_of(0, "GPU-bb") == 1


@pytest.mark.parametrize(("listed_here", "expected"), [(False, 100 * 2**20), (True, 0)])
def test_a_process_not_listed_on_its_card(
    nv: FourGpus, monkeypatch: pytest.MonkeyPatch, listed_here: bool, expected: int
) -> None:
    """In a container NVML lists the host's process numbers, never this process's: the card's
    used memory is read instead (it moves with the process). Where the processes listed are
    this machine's own, one not among them holds nothing there yet (no CUDA context): 0, not
    the whole card's use, which a measurement before and after its first model would mix with
    its own figure."""
    import psutil

    monkeypatch.setattr(psutil, "pid_exists", lambda pid: listed_here)
    used = hw.process_gpu_memory(0, pid=7, flags=hw.DriverFlags(), environ={"CUDA_VISIBLE_DEVICES": "2"})
    assert used == expected
    # plain Docker and WSL2 list no process at all, this one never: the card's use is the figure
    monkeypatch.setattr(FourGpus, "nvmlDeviceGetComputeRunningProcesses", lambda self, handle: [])
    used = hw.process_gpu_memory(0, pid=7, flags=hw.DriverFlags(), environ={"CUDA_VISIBLE_DEVICES": "2"})
    assert used == 100 * 2**20


def test_the_budget_asks_cuda_itself_where_nvml_cannot_tell_the_card(
    nv: FourGpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a MIG instance visible, NVML's answer would be another device's: the budget's probe
    falls back to CUDA's own free/total for the device (torch), not to a wrong card."""
    import torch

    from ffdesk.runtime import memprobe

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-5f0e")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (6 * 2**20, 10 * 2**20))
    assert memprobe.gpu_used_bytes(0, hw.DriverFlags()) == 4 * 2**20


@pytest.mark.parametrize(
    ("device_id", "environ", "card"),
    [
        (0, {}, None),  # CUDA's default order puts the fastest first: not NVML's PCI order
        (0, {"CUDA_VISIBLE_DEVICES": "2"}, None),
        (0, {"CUDA_VISIBLE_DEVICES": "GPU-cc33"}, 2),  # a UUID names one card whatever the order
        (1, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, 1),
        (0, {"CUDA_VISIBLE_DEVICES": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, 2),
    ],
)
def test_on_a_machine_of_two_gpu_models_a_number_is_read_as_nvmls_only_in_pci_order(
    monkeypatch: pytest.MonkeyPatch, device_id: int, environ: dict[str, str], card: int | None
) -> None:
    """CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID: with an RTX 4090 and
    a T4, CUDA's device 0 may be NVML's card 1. Where the numbers may differ NVML cannot tell the
    card (None: the caller asks CUDA), rather than reading another card's memory."""
    names = ("Tesla T4", "NVIDIA GeForce RTX 4090", "Tesla T4", "Tesla T4")
    monkeypatch.setattr(nvidia, "load_pynvml", lambda: FourGpus(names=names))
    used = hw.process_gpu_memory(device_id, pid=42, flags=hw.DriverFlags(), environ=environ)
    assert (None if used is None else used // 2**20 - 1) == card
