"""The memory probe gives back what it can after an unload: on a GPU, torch's cached blocks too."""

from __future__ import annotations

import sys
from pathlib import Path
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


_GIVEN_BACK = """
import ctypes, sys
from pathlib import Path
import numpy as np
from ffdesk.runtime import memprobe
from ffdesk.runtime.footprints import FootprintStore
from ffdesk.runtime.residency import ResidencyManager

fn = ctypes.CDLL("libc.so.6").mallinfo2
fn.restype = memprobe._MallInfo2
budget = None if sys.argv[1] == "none" else 512 << 20
with ResidencyManager(budget, "cpu", footprints=FootprintStore(Path(sys.argv[2]))):
    np.ones(24 << 20, np.uint8)  # freed at once: raises glibc's threshold to 24 MiB
    before = fn().hblkhd
    block = np.ones(2 << 20, np.uint8)
    print(fn().hblkhd - before)
"""


@pytest.mark.parametrize("budget", ["512MiB", "none"])
def test_a_cpu_budget_has_large_blocks_given_back_when_freed(tmp_path: Path, budget: str) -> None:
    # glibc raises its threshold for blocks mapped on their own each time one is freed (up to
    # 32 MiB), so later weights, activations and frames came from its arenas and stayed there
    # once freed. A fresh process: what an arena already has free is used first, whatever the
    # threshold.
    import subprocess

    try:
        ctypes_ok = (
            subprocess.run(
                [sys.executable, "-c", "import ctypes; ctypes.CDLL('libc.so.6').mallinfo2"],
                capture_output=True,
            ).returncode
            == 0
        )
    except OSError:
        ctypes_ok = False
    if not ctypes_ok:
        pytest.skip("glibc only")
    out = subprocess.run(
        [sys.executable, "-c", _GIVEN_BACK, budget, str(tmp_path / "f.json")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    mapped = int(out.split()[-1])
    if budget == "none":  # no budget of this process's own: glibc as it is
        assert mapped < 1 << 20
    else:  # a 2 MiB frame: a block of its own, given back when freed
        assert mapped >= 2 << 20
