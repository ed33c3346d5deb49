"""The device pixel path on a real CUDA device (marked `gpu`; skipped where torch sees no CUDA
device or ONNX Runtime cannot use it): the same frames as the host path on the CPU, the same
crossings, and ONNX Runtime's outputs left on the card."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.sessions import create_session, cuda_usable
from ffdesk.runtime.standins import write_standins
from tests.pipeline.test_device_host_syncs import HIDDEN_PER_BATCH
from tests.real_clips import carphone

from .helpers import write_full_pack
from .test_device_pixels import DEVICE_KINDS_DOWN, _frames, _psnr, _render

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or not cuda_usable(),
        reason="needs a CUDA device usable by torch and ONNX Runtime",
    ),
]


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_full_pack(tmp_path_factory.mktemp("pack"))


def test_onnx_runtime_reads_and_writes_device_tensors_in_place(pack: Path) -> None:
    from ffdesk.runtime.sessions import SessionOptions

    session = create_session(pack / "xseg_1.onnx", SessionOptions(device="cuda"))
    assert session.device_type == "cuda"
    x = torch.rand(4, 256, 256, 3, device="cuda")
    (y,) = session.run_torch({"input": x}).values()
    assert y.is_cuda and y.shape == (4, 256, 256, 1)
    ref = session.run({"input": x.cpu().numpy()})
    np.testing.assert_allclose(y.cpu().numpy(), next(iter(ref.values())), atol=1e-5)


def test_the_cuda_path_gives_the_cpu_host_paths_frames(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path
) -> None:
    clip = carphone()
    host = _render(run_env, pack, clip, tmp_path / "host", "host")
    assert host.faces is not None
    with _synchronizing_ops() as syncs:
        device = _render(run_env, pack, clip, tmp_path / "device", "device", provider="cuda")
    assert device.models is not None and device.models.pixels is not None and device.faces is not None
    pixels = device.models.pixels
    assert pixels.path == "device" and pixels.device.startswith("cuda")
    assert all(m.provider == "CUDAExecutionProvider" for m in device.models.models)
    assert {t.kind for t in pixels.transfers if t.direction == "down"} <= DEVICE_KINDS_DOWN
    assert pixels.copies("up", "frame") == device.faces.frames_with_faces == host.faces.frames_with_faces
    assert pixels.copies("up", "model-io") == 0
    late = {m.key: m.late_shapes for m in device.models.models}
    assert not any(late.values()), late  # every shape the frames met was warmed up before them
    for x, y in zip(_frames(tmp_path / "host"), _frames(tmp_path / "device"), strict=True):
        assert _psnr(x, y) > 40.0
    # torch's own word for every operation that made a thread wait for the card (printed: -rA
    # shows it); those outside the counted crossings and the runtime's stream hand-overs are
    # hidden ones, at most HIDDEN_PER_BATCH a batch in each of the two model stages
    print("synchronizing operations by place:", dict(syncs.most_common()))
    hidden = sum(n for place, n in syncs.items() if not place.startswith(SYNC_PLACES))
    batches = -(-device.faces.frames_with_faces // 4)
    assert hidden <= 2 * HIDDEN_PER_BATCH * batches, syncs


SYNC_PLACES = ("device.py:", "sessions.py:")
"""Where the device path means to wait for the card: `DevicePixels`' counted crossings and
`run_torch`'s hand-overs between torch's stream and ONNX Runtime's."""


def caller_outside_torch(frame: Any) -> str:
    """file:line of the innermost frame from `frame` out that is neither the warnings module's
    nor torch's own code (`frame`: one inside the warnings module, as `showwarning` is called)."""
    torch_dir = str(Path(torch.__file__).parent)
    found = frame
    while found is not None and (
        found.f_globals.get("__name__") in ("warnings", "_py_warnings")
        or found.f_code.co_filename.startswith(torch_dir)
    ):
        found = found.f_back
    place = found or frame
    return f"{Path(place.f_code.co_filename).name}:{place.f_lineno}"


@contextmanager
def _synchronizing_ops() -> Iterator[Counter[str]]:
    """torch's CUDA sync debug mode for the block: every operation that synchronises the host
    with the card warns, on whichever thread; the warnings are counted by the file:line of the
    code that called the operation, outside torch (a warning from torch's C++ names the innermost
    Python frame, which for `stream.synchronize()` is torch's own streams.py, so the place is
    found from the stack as the warning is shown)."""
    import sys
    import warnings

    found: Counter[str] = Counter()

    def count(message: Warning | str, *_: object, **__: object) -> None:
        if "synchroniz" in str(message):
            found[caller_outside_torch(sys._getframe(1))] += 1

    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = count
            yield found
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_two_threads_on_one_session_each_get_their_own_outputs(pack: Path) -> None:
    """The swap and enhance stages run the same mask model from two threads. ONNX Runtime's arena
    takes an output's block back as soon as its tensor is let go, whatever torch still has queued
    on it: what each thread computes from its output, with the output let go at once, must come
    from its own run."""
    import threading

    from ffdesk.runtime.sessions import SessionOptions

    session = create_session(pack / "xseg_1.onnx", SessionOptions(device="cuda"))
    inputs = [torch.rand(4, 256, 256, 3, device="cuda") for _ in range(2)]

    def after(y: torch.Tensor) -> torch.Tensor:
        """The output read late: behind a product that keeps the device busy a while."""
        busy = torch.ones(2048, 2048, device=y.device)
        busy = busy @ busy @ busy
        return y * 2.0 + busy[0, 0] * 0.0

    # one thread first, the same numbers as the threads will get
    expected = [after(next(iter(session.run_torch({"input": x}).values()))).cpu() for x in inputs]
    wrong: list[str] = []

    def work(i: int) -> None:
        for round_ in range(60):
            z = after(next(iter(session.run_torch({"input": inputs[i]}).values())))  # the output let go
            if not np.allclose(z.cpu().numpy(), expected[i].numpy(), atol=1e-3):
                wrong.append(f"thread {i}, round {round_}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert not wrong, wrong[:5]


def test_processors_on_cuda_meet_no_new_shape_in_the_frames(run_env: RuntimeEnv, tmp_path: Path) -> None:
    """A frame colorizer (frames in batches of up to 4) and a frame enhancer (tiles in batches of
    up to 8) on CUDA: their calls padded to shapes warmed up before the first frame."""
    from ffdesk.pipeline.engine import run_render
    from ffdesk.pipeline.job import RenderJob

    folder = tmp_path / "pack"
    write_standins(folder, ["ddcolor", "real_esrgan_x2"], dynamic_batch=True)
    job = RenderJob(
        target=carphone(), output=tmp_path / "o.mp4", models_dir=folder, frame_colorizer="ddcolor",
        frame_enhancer="real_esrgan_x2", batch=4, end=0.46, provider="cuda",
    )  # fmt: skip
    report = run_render(job, env=run_env)
    assert report.frames_out == 14 and report.upscale is not None
    assert [(p.name, p.late_shapes) for p in report.processors] == [("frame_colorize", 0)]
    assert report.upscale.late_shapes == 0


def test_auto_precision_on_cuda_times_each_model_and_keeps_the_frames(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path
) -> None:
    """`--precision auto` on the card: the swapper, the enhancer and both mask models each timed in
    FP32 and FP16 before the first frame (four choices remembered), and the frames within rounding
    of the CPU's FP32 host path. Last in the file: the GPU check's time left runs it."""
    import json

    clip = carphone()
    host = _render(run_env, pack, clip, tmp_path / "host", "host")
    auto = _render(run_env, pack, clip, tmp_path / "auto", "device", provider="cuda", precision="auto")
    assert auto.models is not None and auto.models.pixels is not None
    assert auto.models.pixels.path == "device" and host.frames_out == auto.frames_out
    choices = json.loads(run_env.precision_choices_path.read_text(encoding="utf-8"))
    assert len(choices) == 4 and all("CUDA" in key or "cuda" in key for key in choices), list(choices)
    late = {m.key: m.late_shapes for m in auto.models.models}
    assert not any(late.values()), late  # the chosen variants warmed up too
    for x, y in zip(_frames(tmp_path / "host"), _frames(tmp_path / "auto"), strict=True):
        assert _psnr(x, y) > 35.0


def test_what_the_pixels_take_on_the_card_counts_against_the_budget(
    run_env: RuntimeEnv, pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.runtime.residency import ResidencyManager

    planned: list[int] = []
    readings: list[int] = []
    hold, note = ResidencyManager.hold_device, ResidencyManager.note_torch

    def held(self: ResidencyManager, nbytes: int) -> None:
        planned.append(nbytes)
        hold(self, nbytes)

    def noted(self: ResidencyManager, nbytes: int) -> None:
        readings.append(nbytes)
        note(self, nbytes)

    monkeypatch.setattr(ResidencyManager, "hold_device", held)
    monkeypatch.setattr(ResidencyManager, "note_torch", noted)
    report = _render(
        run_env, pack, carphone(), tmp_path / "budget", "device", provider="cuda", memory_budget=8 * 2**30
    )
    assert report.models is not None and report.models.pixels is not None
    pixels = report.models.pixels
    assert pixels.path == "device" and pixels.device.startswith("cuda")
    order = report.models.order
    assert order is not None and order.held_bytes > 0
    # planned before the first frame: the frames on the card, then the preparation's working set
    assert planned[0] == order.held_bytes and planned == sorted(planned)
    # torch's readings during the frames went to the pool; the most is the report's, and never
    # more than torch reserved
    assert max(readings) == pixels.device_bytes > 0
    assert pixels.device_bytes <= torch.cuda.max_memory_reserved()
