"""What keeps the device path right on CUDA, where copies and ONNX Runtime's runs are
asynchronous and the orders below matter; on torch's CPU device every copy is synchronous and
none of it shows. Fakes record the calls: no GPU is needed, and nothing here runs on one.

- A pinned staging buffer is written again only after the copy that last read it finished.
- That copy's event is recorded on the stream the copy went to (the current stream of the
  pixels' device, which need not be the thread's current device).
- `OrtSession.run_torch` on CUDA: torch's stream is synchronised before ONNX Runtime (which runs
  on a stream of its own) sees the inputs, and ONNX Runtime's outputs are copied into torch's
  memory, and the copies finished, before its arena can take them back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch

from ffdesk.runtime import device as device_mod
from ffdesk.runtime.catalog import Dim
from ffdesk.runtime.device import DevicePixels
from ffdesk.runtime.sessions import CUDA, IOInfo, OrtSession, ShapeLog


class _Event:
    def __init__(self, log: list[str], name: str = "event") -> None:
        self.log = log
        self.name = name

    def record(self, stream: object = None) -> None:
        self.log.append(f"{self.name} recorded on {stream}")

    def synchronize(self) -> None:
        self.log.append(f"{self.name} waited")


def _staging(buffers: list[Any]) -> device_mod._Staging:
    """A `_Staging` over `buffers` (no pinned memory, which needs CUDA)."""
    staging = device_mod._Staging.__new__(device_mod._Staging)
    staging.buffers = buffers
    staging.events = [None] * len(buffers)
    staging.next = 0
    return staging


def test_a_staging_buffer_is_written_again_only_after_its_copy_finished() -> None:
    log: list[str] = []
    staging = _staging(["b0", "b1"])
    assert staging.take() == ("b0", 0)
    staging.events[0] = _Event(log, "copy from b0")
    assert staging.take() == ("b1", 1)
    assert log == []  # b1 was never read by a copy
    assert staging.take() == ("b0", 0)
    assert log == ["copy from b0 waited"]


class _PinnedBuffer:
    def __init__(self, log: list[str], shape: tuple[int, ...]) -> None:
        self.log = log
        self.host = np.zeros(shape, np.float32)

    def numpy(self) -> np.ndarray:
        return self.host

    def to(self, device: torch.device, non_blocking: bool = False) -> str:
        self.log.append(f"copy to {device} non_blocking={non_blocking}")
        return "device copy"


def test_an_upload_records_its_event_on_the_stream_of_the_device_it_copies_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[str] = []
    monkeypatch.setattr(torch.cuda, "Event", lambda: _Event(log))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: f"the stream of {device}")
    pixels = DevicePixels(torch.device("cuda", 1))
    buffers = [_PinnedBuffer(log, (2, 3)) for _ in range(2)]
    pixels._staging[((2, 3), "float32")] = _staging(buffers)  # type: ignore[arg-type]
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert pixels.upload(host, "affines") == "device copy"  # type: ignore[comparison-overlap]
    np.testing.assert_array_equal(buffers[0].host, host)
    assert log == ["copy to cuda:1 non_blocking=True", "event recorded on the stream of cuda:1"]
    assert pixels.transfers.copies("up", "affines") == 1


class _Stream:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def synchronize(self) -> None:
        self.log.append("torch's stream synchronised")


class _DeviceTensor:
    """A tensor on cuda:0 as `run_torch` sees it."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log = log
        self.name = name
        self.device = torch.device("cuda", 0)
        self.shape = (2, 3)

    def detach(self) -> _DeviceTensor:
        return self

    def contiguous(self) -> _DeviceTensor:
        self.log.append(f"{self.name} made contiguous")
        return self


class _OrtOutput:
    """An output in ONNX Runtime's arena, as `torch.from_dlpack` hands it over."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log = log
        self.name = name

    def clone(self) -> str:
        self.log.append(f"{self.name} copied into torch's memory")
        return f"copy of {self.name}"


class _Binding:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def bind_ortvalue_input(self, name: str, value: object) -> None:
        self.log.append(f"bind input {name} ({value})")

    def bind_output(self, name: str, device_type: str, device_id: int) -> None:
        self.log.append(f"bind output {name} on {device_type}:{device_id}")

    def get_outputs(self) -> list[str]:
        return ["ort y"]


class _OrtSessionOnCuda:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def io_binding(self) -> _Binding:
        return _Binding(self.log)

    def run_with_iobinding(self, binding: _Binding) -> None:
        self.log.append("ONNX Runtime runs (and synchronises its own stream)")


def _session_on_cuda(log: list[str]) -> OrtSession:
    session = OrtSession.__new__(OrtSession)
    session.name = "fake"
    session._session = _OrtSessionOnCuda(log)  # type: ignore[assignment]
    session.provider = CUDA
    shape: tuple[Dim, ...] = (-1, 3)
    session.inputs = (IOInfo("x", shape, "float32"),)
    session.outputs = (IOInfo("y", shape, "float32"),)
    session.shape_log = ShapeLog()
    return session


def test_run_torch_on_cuda_syncs_before_binding_and_copies_outputs_before_letting_them_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[str] = []
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: _Stream(log))
    monkeypatch.setattr(ort.OrtValue, "from_dlpack", lambda t: f"OrtValue of {t.name}")
    monkeypatch.setattr(torch, "from_dlpack", lambda v: _OrtOutput(log, v))
    session = _session_on_cuda(log)
    assert session.device_type == "cuda"
    out = session.run_torch({"x": _DeviceTensor(log, "x")})  # type: ignore[dict-item]
    assert out == {"y": "copy of ort y"}  # type: ignore[comparison-overlap]
    assert log == [
        "x made contiguous",
        "torch's stream synchronised",  # the inputs' kernels done before ONNX Runtime reads them
        "bind input x (OrtValue of x)",
        "bind output y on cuda:0",
        "ONNX Runtime runs (and synchronises its own stream)",
        "ort y copied into torch's memory",
        "torch's stream synchronised",  # the copies done before the arena's blocks are let go
    ]
