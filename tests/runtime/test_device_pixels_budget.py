"""The device pixel path's memory under a GPU budget: what torch's allocator holds for the frames,
crops and masks on the card counts against the budget beside the models and the CUDA context,
and no part of a model's measured footprint.

No GPU here: a pool that believes it is on a GPU (device "cuda", the CPU's memory readings, no
CUDA context to prime) runs a model-pack render whose pixels stay on torch's CPU device, and
`DevicePixels.held_bytes` (on a card, `torch.cuda.memory_reserved`) reads a fake allocator that
holds the frames uploaded so far and a fixed working set."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ffdesk.errors import UserError
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import Pixels, RenderJob
from ffdesk.pipeline.report import RenderReport
from ffdesk.pipeline.stages.models import ModelRender
from ffdesk.runtime import device, memprobe
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.memprobe import ProcessMemoryProbe
from ffdesk.runtime.residency import ResidencyManager
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standins
from tests.real_clips import carphone

MiB = 2**20
GiB = 2**30
CARPHONE_FRAME = 176 * 144 * 3
"""One carphone frame on the device, as uploaded (RGB, one byte a channel)."""
FRAMES = 12
"""The frames of carphone each render takes."""
WORKING = 40 * MiB
"""What the fake allocator holds beside the frames once a model has run on the device."""


class FakeAllocator:
    """torch's allocator on a card, as `DevicePixels.held_bytes` reads it: the frames uploaded
    so far (a caching allocator keeps their blocks) and, once the models have run, a working set."""

    def __init__(self) -> None:
        self.readings: list[int] = []

    def held(self, pixels: device.DevicePixels) -> int:
        frames = pixels.transfers.copies("up", "frame") * CARPHONE_FRAME
        ran = pixels.transfers.copies("up", "source") > 0
        reading = frames + (WORKING if ran else 0)
        self.readings.append(reading)
        return reading


@dataclass
class Holds:
    """Every figure a render planned its pixels at on the card (`hold_device`), and every
    reading of torch it gave the pool (`note_torch`), in order."""

    values: list[int]
    torch: list[int]


class StillCard:
    """A card's memory readings that never move: the reservation and each model's footprint
    come out as their estimates, the same from run to run (the CPU's RSS swings by tens of MiB)."""

    def used(self) -> tuple[int | None, ...]:
        return (0,)

    def host_available(self) -> int:
        return 64 * GiB

    def release_freed(self) -> None:
        return None


def _card_pool(budget: int | None, env: RuntimeEnv) -> ResidencyManager:
    """A pool that counts as a GPU's: its reservation (nothing to prime here) and the pixels'
    hold apply as on a card, while its models run on the CPU."""
    return ResidencyManager(budget, "cuda", probe=StillCard(), env=env, prime_device=lambda: None)


def _job(pack: Path, out: Path, pixels: Pixels, **extra: Any) -> RenderJob:
    settings: dict[str, Any] = {
        "precision": "fp32",
        "batch": 4,
        "provider": "cpu",
        "end": FRAMES / 29.97 - 0.01,
        **extra,
    }
    return RenderJob(
        target=carphone(), output=out, models_dir=pack, encoder="png", resume=False, pixels=pixels,
        sources=(Path(resource_path("sample", "grace_hopper.jpg")),), swapper="inswapper_128",
        recognizer="arcface_w600k_r50", **settings,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pack")
    write_standins(folder, ["inswapper_128", "arcface_w600k_r50"], dynamic_batch=True)
    return folder


@pytest.fixture()
def allocator(monkeypatch: pytest.MonkeyPatch) -> FakeAllocator:
    fake = FakeAllocator()
    monkeypatch.setattr(device.DevicePixels, "held_bytes", lambda self: fake.held(self))
    return fake


@pytest.fixture()
def holds(monkeypatch: pytest.MonkeyPatch) -> Holds:
    seen = Holds([], [])
    hold, note = ResidencyManager.hold_device, ResidencyManager.note_torch

    def held(self: ResidencyManager, nbytes: int) -> None:
        seen.values.append(nbytes)
        hold(self, nbytes)

    def noted(self: ResidencyManager, nbytes: int) -> None:
        seen.torch.append(nbytes)
        note(self, nbytes)

    monkeypatch.setattr(ResidencyManager, "hold_device", held)
    monkeypatch.setattr(ResidencyManager, "note_torch", noted)
    return seen


def _env(tmp_path: Path) -> RuntimeEnv:
    return RuntimeEnv.in_folder(tmp_path / "env")


def _render(job: RenderJob, tmp_path: Path, pool: ResidencyManager) -> RenderReport:
    try:
        return run_render(job, env=_env(tmp_path), share=pool.share("render"))
    finally:
        pool.close()


# ---- the probe ---------------------------------------------------------------------------------


def test_a_models_footprint_on_a_gpu_leaves_out_what_torch_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memprobe, "gpu_used_bytes", lambda device_id, flags=None: 1500 * MiB)
    monkeypatch.setattr(memprobe, "torch_reserved_bytes", lambda device_id=0: 400 * MiB)
    assert ProcessMemoryProbe("cuda").used() == (1100 * MiB,)
    monkeypatch.setattr(memprobe, "gpu_used_bytes", lambda device_id, flags=None: None)
    assert ProcessMemoryProbe("cuda").used() == (None,)


def test_torch_is_read_only_where_it_runs_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    class Cuda:
        started = False

        def is_initialized(self) -> bool:
            return self.started

        def memory_reserved(self, device_id: int) -> int:
            return 300 * MiB

    class Torch:
        cuda = Cuda()

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert memprobe.torch_reserved_bytes(0) == 0  # not imported: never imported for this
    monkeypatch.setitem(sys.modules, "torch", Torch())
    assert memprobe.torch_reserved_bytes(0) == 0  # no CUDA started: none started for this
    Torch.cuda.started = True
    assert memprobe.torch_reserved_bytes(0) == 300 * MiB


# ---- the residency manager ---------------------------------------------------------------------


def test_the_pixels_on_a_gpu_count_against_its_budget(tmp_path: Path) -> None:
    pool = _card_pool(800 * MiB, _env(tmp_path))  # the CUDA context's guess (600 MiB) and the model fit
    try:
        pool.register("m", lambda: None, 150 * MiB, name="big_model")  # type: ignore[arg-type,return-value]
        assert pool.plan(["m"]).fits_all
        pool.hold_device(80 * MiB)
        assert pool.held_bytes() == 80 * MiB
        with pytest.raises(UserError) as refused:
            pool.plan(["m"])
        line = str(refused.value)
        assert "the frames and faces on the device (80.0 MiB)" in line and "big_model" in line, line
        pool.hold_device(0)
        assert pool.held_bytes() == 0 and pool.plan(["m"]).fits_all
    finally:
        pool.close()


def test_torchs_reading_is_the_processs_counted_once_beside_the_renders_plans(tmp_path: Path) -> None:
    pool = _card_pool(None, _env(tmp_path))
    render, preview = (ResidencyManager(share=pool.share(name)) for name in ("render", "preview"))
    try:
        render.hold_device(100 * MiB)
        preview.hold_device(50 * MiB)
        assert pool.held_bytes() == 150 * MiB  # each render plans its own frames
        render.note_torch(400 * MiB)  # what torch holds: both renders' pixels, once
        assert pool.held_bytes() == 400 * MiB
        preview.note_torch(120 * MiB)  # the latest reading, whoever read it
        assert pool.held_bytes() == 150 * MiB
        render.close()
        assert pool.held_bytes() == 120 * MiB
    finally:
        preview.close()
        pool.close()


def test_a_budget_is_judged_by_the_plans_not_by_torchs_cache(tmp_path: Path) -> None:
    pool = _card_pool(800 * MiB, _env(tmp_path))
    try:
        pool.register("m", lambda: None, 150 * MiB, name="big_model")  # type: ignore[arg-type,return-value]
        pool.note_torch(300 * MiB)  # torch's cache, mid-render: room is made for it, no refusal
        pool.plan(["m"])
        assert pool.held_bytes() == 300 * MiB  # counted all the same: idle models go for it
        pool.hold_device(80 * MiB)  # a plan is refused
        with pytest.raises(UserError):
            pool.plan(["m"])
    finally:
        pool.close()


def test_on_the_cpu_the_pixels_are_the_processs_memory_already(tmp_path: Path) -> None:
    pool = ResidencyManager(200 * MiB, "cpu", probe=ProcessMemoryProbe("cpu"), env=_env(tmp_path))
    try:
        pool.hold_device(80 * MiB)
        pool.note_torch(80 * MiB)
        assert pool.held_bytes() == 0
    finally:
        pool.close()


# ---- a render ----------------------------------------------------------------------------------


def test_a_render_counts_its_frames_and_faces_on_the_card(
    pack: Path, tmp_path: Path, allocator: FakeAllocator, holds: Holds
) -> None:
    report = _render(
        _job(pack, tmp_path / "out", "device", memory_budget=8 * GiB),
        tmp_path,
        _card_pool(8 * GiB, _env(tmp_path)),
    )
    models = report.models
    assert models is not None and models.pixels is not None and models.pixels.path == "device"
    order = models.order
    assert order is not None and order.order == "batch" and "within the budget" in order.reason, order
    # before any model: the frames a render of batch 4 holds at once on the card (a window in
    # the swap stage's hands, the tracking's, the decoder's and the encoder's); then the working
    # set the preparation made torch hold beside them; raised only
    planned = order.held_bytes
    assert planned > 0 and planned % CARPHONE_FRAME == 0, planned
    assert holds.values == [planned, planned + WORKING], holds.values
    # during the frames, torch's readings go to the pool (the process's, counted once)
    most = max(allocator.readings)
    assert models.pixels.device_bytes == most == FRAMES * CARPHONE_FRAME + WORKING
    assert max(holds.torch) == most and holds.torch[-1] == 0  # at the end: handed back


def test_the_host_path_on_a_card_holds_no_pixels_there(
    pack: Path, tmp_path: Path, allocator: FakeAllocator, holds: Holds
) -> None:
    report = _render(
        _job(pack, tmp_path / "out", "host", memory_budget=8 * GiB),
        tmp_path,
        _card_pool(8 * GiB, _env(tmp_path)),
    )
    models = report.models
    assert models is not None and models.pixels is not None and models.pixels.path == "host"
    assert models.order is not None and models.order.held_bytes == 0
    assert models.pixels.device_bytes == 0 and not holds.values and not holds.torch and not allocator.readings


def test_a_budget_without_room_for_the_frames_on_the_card_is_refused_before_a_frame(
    pack: Path, tmp_path: Path, allocator: FakeAllocator
) -> None:
    env = _env(tmp_path)
    sizing = _card_pool(8 * GiB, env)
    ctx = ModelRender(_job(pack, tmp_path / "sizing", "device"), env=env, share=sizing.share("sizing"))
    # as a render reckons before its first load: each model's estimate beside the CUDA context's
    largest = max(ctx.manager.expected_bytes(key) for key in ctx.keys.values())
    largest += ctx.manager.expected_reservation()
    ctx.close()
    sizing.close()
    events: list[ev.Event] = []
    pool = _card_pool(largest + 3 * CARPHONE_FRAME, env)
    job = _job(pack, tmp_path / "out", "device", memory_budget=largest + 3 * CARPHONE_FRAME)
    with pytest.raises(UserError) as refused:
        run_render(job, events.append, env=env, share=pool.share("render"))
    pool.close()
    line = str(refused.value)
    assert "frames a render of it holds at once on the device" in line and "--memory-budget" in line, line
    assert "the device's own 600.0 MiB (the CUDA context)" in line, line
    assert not any(isinstance(e, ev.Progress) for e in events)
    assert not allocator.readings  # nothing went to the device
    # the same budget on the host path: the card holds no frames, and the models fit
    host = _card_pool(largest + 3 * CARPHONE_FRAME, env)
    done = _render(
        _job(pack, tmp_path / "host", "host", memory_budget=largest + 3 * CARPHONE_FRAME), tmp_path, host
    )
    assert done.frames_out == FRAMES
