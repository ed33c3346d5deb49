"""A face map with a model pack on the device pixel path (`--pixels device`, here torch's CPU
device): two people of a two-shot, each with their own source photo. The device path runs (it is
not turned off for the map), gives the host path's frames within rounding and the same faces to
each person, puts each person's own source on them, and never brings a crop or a mask back; the
faces of different people share the swapper's calls, each with its own source, through sub-pixel
tiles, chunks and padding alike."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
import torch

from ffdesk.media.images import read_image
from ffdesk.pipeline.engine import run_render
from ffdesk.pipeline.job import FaceMapping, Pixels, RenderJob
from ffdesk.pipeline.report import RenderReport
from ffdesk.pipeline.stages.device_models import DeviceModels
from ffdesk.pipeline.stages.device_redraw import DeviceFrames
from ffdesk.runtime.device import DevicePixels
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.runtime.resources import resource_path
from ffdesk.runtime.standins import write_standins
from ffdesk.swap.onnx_swapper import SwapperSpec
from tests.faces.two_shot import two_shot

ASTRONAUT = Path(resource_path("sample", "astronaut.jpg"))
HOPPER = Path(resource_path("sample", "grace_hopper.jpg"))
SWAPPED = (FaceMapping(ASTRONAUT, (HOPPER,)), FaceMapping(HOPPER, (ASTRONAUT,)))
"""Each person gets the other's face."""
ONE_FACE = (FaceMapping(ASTRONAUT, (HOPPER,)), FaceMapping(HOPPER, (HOPPER,)))
"""Both people get Grace Hopper's face."""
DEVICE_KINDS_UP = {"frame", "affines", "constant", "source"}
DEVICE_KINDS_DOWN = {"regions", "mask-boxes", "quality"}
"""What may cross on the device path: frames and a few numbers up, changed regions and a few
numbers down (never a crop or a mask)."""


@dataclass(frozen=True)
class Renders:
    """The renders the tests below look at (made once for all of them)."""

    host: RenderReport
    device: RenderReport
    one_face: RenderReport
    folders: dict[str, Path]


def _render(
    env: RuntimeEnv, pack: Path, clip: Path, out: Path, pixels: Pixels, face_map: Any, **extra: Any
) -> RenderReport:
    settings: dict[str, Any] = {"precision": "fp32", "batch": 4, "provider": "cpu", **extra}
    job = RenderJob(
        target=clip, output=out, models_dir=pack, encoder="png", resume=False, pixels=pixels,
        swapper="inswapper_128", recognizer="arcface_w600k_r50", face_map=face_map, **settings,
    )  # fmt: skip
    return run_render(job, env=env)


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pack")
    write_standins(folder, ["inswapper_128", "arcface_w600k_r50"], dynamic_batch=True)
    return folder


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_shot(tmp_path_factory.mktemp("clip") / "two.mp4", frames=6)


@pytest.fixture(scope="module")
def renders(pack: Path, clip: Path, tmp_path_factory: pytest.TempPathFactory) -> Renders:
    root = tmp_path_factory.mktemp("face-map")
    env = RuntimeEnv.in_folder(root / "env")
    folders = {name: root / name for name in ("host", "device", "one-face")}
    host = _render(env, pack, clip, folders["host"], "host", SWAPPED)
    device = _render(env, pack, clip, folders["device"], "device", SWAPPED)
    one_face = _render(env, pack, clip, folders["one-face"], "device", ONE_FACE)
    return Renders(host, device, one_face, folders)


def _frames(folder: Path) -> list[np.ndarray]:
    return [read_image(p) for p in sorted(folder.glob("*.png"))]


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def _path(report: RenderReport) -> str | None:
    """Where the render's pixels stayed ("host" or "device")."""
    return report.models.pixels.path if report.models is not None and report.models.pixels else None


def _people(report: RenderReport) -> dict[str, tuple[tuple[str, ...], int]]:
    assert report.faces is not None and report.faces.people is not None
    return {p.person: (p.sources, p.faces) for p in report.faces.people}


def test_a_face_map_keeps_the_pixels_on_the_device(renders: Renders) -> None:
    for report in (renders.device, renders.one_face):
        assert report.models is not None and report.models.pixels is not None
        assert report.models.pixels.path == "device" and report.models.pixels.device == "cpu"
    assert _path(renders.host) == "host"


def test_the_device_path_gives_the_host_paths_frames_and_each_person_their_own_source(
    renders: Renders,
) -> None:
    assert _path(renders.device) == _path(renders.one_face) == "device"
    host, device, one_face = (_frames(renders.folders[n]) for n in ("host", "device", "one-face"))
    assert len(host) == len(device) == len(one_face) == renders.host.frames_out > 0
    for x, y in zip(host, device, strict=True):
        diff = np.abs(x.astype(int) - y.astype(int))
        assert _psnr(x, y) > 45.0 and np.percentile(diff, 99.9) <= 2, (_psnr(x, y), diff.max())
    # Grace Hopper's own face on her instead of the astronaut's: her half of the frame changes
    # (the stand-in swapper's source moves its output by a level or two), the astronaut's not
    width = host[0].shape[1]
    for x, y in zip(device, one_face, strict=True):
        changed = (x != y).any(-1)
        assert changed[:, width // 2 :].mean() > 0.02, changed.mean()
        assert not changed[:, : width // 3].any()


def test_no_face_crop_or_mask_crosses_to_the_host(renders: Renders) -> None:
    report = renders.device
    assert report.models is not None and report.models.pixels is not None and report.faces is not None
    pixels = report.models.pixels
    ups = {t.kind for t in pixels.transfers if t.direction == "up"}
    downs = {t.kind for t in pixels.transfers if t.direction == "down"}
    assert ups <= DEVICE_KINDS_UP, ups
    assert downs <= DEVICE_KINDS_DOWN and "regions" in downs, downs
    assert pixels.copies("up", "source") == 1  # both people's sources, once for the render
    assert pixels.copies("up", "frame") == report.faces.frames_with_faces
    swap = next(s for s in report.stages if s.name == "swap")
    assert pixels.copies("down", "regions") <= swap.calls


def test_each_person_has_the_host_paths_faces(renders: Renders) -> None:
    assert (_path(renders.host), _path(renders.device)) == ("host", "device")
    host, device = _people(renders.host), _people(renders.device)
    assert device == host
    assert host == {
        "astronaut.jpg": (("grace_hopper.jpg",), host["astronaut.jpg"][1]),
        "grace_hopper.jpg": (("astronaut.jpg",), host["grace_hopper.jpg"][1]),
    }
    assert all(faces > 0 for _, faces in host.values()), host
    assert renders.device.faces is not None
    assert sum(faces for _, faces in device.values()) == renders.device.faces.faces_swapped


def test_auto_precision_and_the_quality_check_take_each_faces_own_source(
    run_env: RuntimeEnv, pack: Path, clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--precision auto` times the swapper on the device with a face map too (the first person's
    photo, swapped to their own source); with FP16 picked, the quality guard re-renders its sampled
    faces with the FP32 swapper, each with its own person's source."""
    from ffdesk.pipeline.stages.models import ModelRender
    from ffdesk.runtime import precision as prec

    timed: list[str] = []
    real_time = ModelRender._time_variants

    def fp16_wins(self: ModelRender, keys: Any, role: str = "swapper", runs: int = 5) -> Any:
        timed.append(role)
        choice = real_time(self, keys, role, runs=1)
        fast = prec.VariantSpeed("fp16", 0.5 * min(s.ms_per_item for s in choice.speeds), 60.0)
        return prec.pick_fastest([*choice.speeds, fast], 30.0)

    checked: list[tuple[int, ...]] = []
    real_swap = DeviceModels.swap

    def swap(self: DeviceModels, crops: Any, key: str | None = None, slots: Any = None) -> Any:
        if key == self.ctx.fp32_swap_key != self.ctx.swap_key and slots is not None:
            checked.append(tuple(slots))
        return real_swap(self, crops, key, slots)

    monkeypatch.setattr(ModelRender, "_time_variants", fp16_wins)
    monkeypatch.setattr(DeviceModels, "swap", swap)
    report = _render(run_env, pack, clip, tmp_path / "auto", "device", SWAPPED, precision="auto")
    assert timed == ["swapper"]
    assert report.models is not None and report.models.pixels is not None
    assert report.models.pixels.path == "device"
    assert report.models.swapper_precision == "fp16" and report.models.precision_reason is not None
    quality = report.models.quality
    assert quality is not None and quality.checked_frames > 0 and quality.flags == ()
    # the sampled faces: both people of each checked frame, each with their own slot
    assert checked and all(slots.count(0) == slots.count(1) > 0 for slots in checked), checked


class _SourceOffset:
    """A swapper on torch tensors whose output is its target moved by the first number of each
    item's source: which source reached which item shows in the pixels."""

    device_type = "cpu"

    def __init__(self, batch_dynamic: bool) -> None:
        self.batch_dynamic = batch_dynamic
        self.batches: list[int] = []
        self.sources: set[int] = set()

    def run_torch(self, feeds: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        target, source = feeds["target"], feeds["source"]
        self.batches.append(int(target.shape[0]))
        self.sources |= {round(float(v) * 255.0) for v in source[:, 0]}
        return {"output": target + source[:, :1, None, None]}


class _Chunks:
    """The residency manager's `run_with_recovery` as far as `DeviceModels.call` sees it: one
    session, the items in consecutive chunks of at most `max_batch`."""

    def __init__(self, session: _SourceOffset) -> None:
        self.session = session

    def run_with_recovery(self, key: str, fn: Any, batch: Any, max_batch: int | None = None) -> list[Any]:
        items, step = list(batch), max_batch or len(batch)
        return [row for i in range(0, len(items), step) for row in fn(self.session, items[i : i + step])]


OFFSETS = (10, 40, 70)
"""The level each source slot moves a face by (`_SourceOffset`)."""


@pytest.mark.parametrize(
    ("tile", "limit", "slots", "dynamic"),
    [
        (2, 6, [0, 1, 1, 2, 0], True),  # 4 tiles a crop, chunks of 6 tiles: a crop split over two
        (1, 4, [1, 0, 1, 1, 0, 2, 1], True),  # chunks of 4 and 3, the 3 padded to 4
        (2, 8, [1, 0, 2], False),  # a file that fixes its batch at 1: one tile a call
    ],
)
def test_each_crop_takes_its_own_slots_source_through_tiles_and_chunks(
    tile: int, limit: int, slots: list[int], dynamic: bool
) -> None:
    pixels = DevicePixels(torch.device("cpu"))
    spec = SwapperSpec(size=8, mean=0.0, std=1.0, out_mean=0.0, out_std=1.0)
    session = _SourceOffset(dynamic)
    vectors = [np.full((1, 4), level / 255.0, np.float32) for level in OFFSETS]
    ctx = SimpleNamespace(
        swap_spec=spec,
        tile=tile,
        source_vectors=vectors,
        keys={},
        swap_key="swapper",
        manager=_Chunks(session),
    )
    models = DeviceModels(cast(Any, ctx), DeviceFrames(pixels), cap=4)
    models.caps["swapper"] = limit
    side = spec.size * tile
    crops = torch.from_numpy(np.random.default_rng(3).integers(0, 180, (len(slots), 3, side, side))).float()
    out = models.swap(crops, slots=slots)
    moved = (out - crops).flatten(1)
    for j, slot in enumerate(slots):
        assert torch.all(moved[j] == OFFSETS[slot]), (j, slot, moved[j].unique())
    assert session.sources <= {OFFSETS[s] for s in slots}  # the padding took a real source
    tiles = len(slots) * tile * tile
    assert sum(session.batches) >= tiles and (max(session.batches) == 1) is not dynamic
    plain = models.swap(crops)  # no slots: every crop takes the first
    assert torch.all((plain - crops) == OFFSETS[0])
    assert pixels.transfers.copies("up", "source") == 1  # every slot's source, once


def test_int8_calibration_takes_every_persons_source(
    pack: Path, clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An INT8 variant made for a face-map render is calibrated with each person's source in
    turn, not the first person's alone (its activation ranges cover every identity it will run)."""
    from ffdesk.runtime import precision as prec

    fed: list[Any] = []
    make = prec.make_int8

    def spy(src: Path, calibration: Any, **options: Any) -> Path:
        fed.append(calibration)
        return make(src, calibration, **options)

    monkeypatch.setattr(prec, "make_int8", spy)
    env = RuntimeEnv.in_folder(tmp_path / "env")
    report = _render(env, pack, clip, tmp_path / "out", "host", SWAPPED, precision="int8")
    assert report.frames_out == 6 and fed and fed[0]
    sources = {np.asarray(feed["source"], np.float32).tobytes() for feed in fed[0]}
    assert len(sources) == 2
