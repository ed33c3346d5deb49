"""The memory probe gives back what it can after an unload: on a GPU, torch's cached blocks too."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from ffdesk.runtime import memprobe


class FakeCuda:
    def __init__(self, initialized: bool) -> None:
        self.initialized = initialized
        self.calls: list[str] = []

    def is_initialized(self) -> bool:
        return self.initialized

    def synchronize(self) -> None:
        self.calls.append("synchronize")

    def empty_cache(self) -> None:
        self.calls.append("empty_cache")


@pytest.mark.parametrize(("device", "initialized", "expected"), [
    ("cuda", True, ["synchronize", "empty_cache"]),  # the device pixel path's tensors were freed
    ("cuda", False, []),  # torch never touched the GPU: nothing cached, and no context made now
    ("cpu", True, []),
])  # fmt: skip
def test_an_unload_on_the_gpu_gives_back_torchs_cached_blocks(
    monkeypatch: pytest.MonkeyPatch, device: str, initialized: bool, expected: list[str]
) -> None:
    cuda = FakeCuda(initialized)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    memprobe.ProcessMemoryProbe(device).release_freed()  # type: ignore[arg-type]
    assert cuda.calls == expected


def test_without_torch_loaded_nothing_imports_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    memprobe.ProcessMemoryProbe("cuda").release_freed()
    assert "torch" not in sys.modules


def test_a_cuda_error_while_releasing_is_not_the_renders_end(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda(True)

    def broken() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    cuda.synchronize = broken  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    memprobe.ProcessMemoryProbe("cuda").release_freed()
