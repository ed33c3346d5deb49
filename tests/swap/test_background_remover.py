"""FaceFusion's background remover, model by model: the catalog's facts, how a frame is fed and
a matte read, the despill and fill against FaceFusion's formulas, and the 15 stand-ins (their
contracts, and mattes that follow a real picture: carphone's man, not the car's corners)."""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.runtime.catalog import load_catalog
from ffdesk.swap import background_remover as br
from tests.real_clips import carphone

IMAGENET = ((123.675, 116.28, 103.53), (58.395, 57.12, 57.375))
FACEFUSION = {
    "ben_2": (1024, "unit"), "birefnet_general": (1024, "unit"), "birefnet_portrait": (1024, "unit"),
    "corridor_key_1024": (1024, "imagenet"), "corridor_key_2048": (2048, "imagenet"),
    "isnet_general": (1024, "half"), "modnet": (512, "halfhalf"), "ormbg": (1024, "unit"),
    "rmbg_1.4": (1024, "half"), "rmbg_2.0": (1024, "imagenet"), "silueta": (320, "imagenet"),
    "u2net_cloth": (768, "imagenet"), "u2net_general": (320, "imagenet"), "u2net_human": (320, "imagenet"),
    "u2netp": (320, "imagenet"),
}  # fmt: skip
"""FaceFusion 3.8's model set: each model's size and its mean / standard deviation."""
NORMS = {
    "unit": ((0.0,), (255.0,)),
    "half": ((127.5,), (255.0,)),
    "halfhalf": ((127.5,), (127.5,)),
    "imagenet": IMAGENET,
}


def _specs() -> dict[str, br.BackgroundRemoverSpec]:
    return {m.name: br.background_remover_spec(m) for m in load_catalog().by_kind("background_remover")}


@pytest.fixture(scope="module")
def frames() -> list[np.ndarray]:
    """Frames 0 and 90 of carphone (RGB)."""
    with av.open(str(carphone())) as c:
        every = [f.to_ndarray(format="rgb24") for _, f in zip(range(91), c.decode(video=0), strict=False)]
    return [every[0], every[90]]


def test_the_catalog_holds_facefusions_fifteen_with_their_feeding() -> None:
    specs = _specs()
    assert set(specs) == set(FACEFUSION)
    for name, (size, norm) in FACEFUSION.items():
        spec = specs[name]
        assert (spec.size, (spec.mean, spec.std)) == (size, NORMS[norm]), name
        assert spec.input_name == "input"
        assert spec.screen_hint == name.startswith("corridor_key")
        assert spec.read == ("argmax" if name == "u2net_cloth" else "clip")


def test_a_frame_is_fed_resized_rgb_and_normalised() -> None:
    specs = _specs()
    frame = np.random.default_rng(0).integers(0, 256, (90, 160, 3), dtype=np.uint8)
    x = br.frame_input(frame, specs["modnet"])
    assert x.shape == (1, 3, 512, 512) and x.dtype == np.float32
    small = cv2.resize(frame, (512, 512), interpolation=cv2.INTER_LINEAR).astype(np.float64)
    assert np.allclose(x[0].transpose(1, 2, 0), (small / 255.0 - 0.5) / 0.5, atol=1e-5)
    x = br.frame_input(frame, specs["u2netp"])
    small = cv2.resize(frame, (320, 320), interpolation=cv2.INTER_LINEAR).astype(np.float64) / 255.0
    want = (small - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    assert np.allclose(x[0].transpose(1, 2, 0), want, atol=1e-4)


def test_corridor_key_gets_the_screen_hint_as_a_fourth_channel() -> None:
    spec = _specs()["corridor_key_1024"]
    frame = np.zeros((64, 64, 3), np.uint8)
    frame[:, :32] = (30, 220, 40)  # green screen on the left
    frame[:, 32:] = (200, 150, 120)  # skin on the right
    x = br.frame_input(frame, spec)
    assert x.shape == (1, 4, 1024, 1024)
    hint = x[0, 3]
    assert hint[:, :400].max() == 0.0 and hint[:, 624:].min() == 1.0
    # FaceFusion's formula on the frame itself: 1 - clip(2 (G - max(R, B)), 0, 1)
    rgb = frame.astype(np.float32) / 255
    direct = 1 - np.clip(2 * (rgb[..., 1] - np.maximum(rgb[..., 0], rgb[..., 2])), 0, 1)
    assert np.allclose(br.screen_hint(frame, 64), direct, atol=1e-6)


def test_the_matte_is_clipped_truncated_and_resized() -> None:
    spec = _specs()["modnet"]
    y = np.array([[[[-0.5, 0.2], [0.999, 1.7]]]], np.float32)
    matte = br.read_matte(y, spec, 2, 2)
    assert matte.tolist() == [[0, 51], [254, 255]]  # 0.999 x 255 = 254.7, truncated as FaceFusion does
    assert br.read_matte(y, spec, 4, 6).shape == (6, 4)
    with pytest.raises(ValueError, match="not one map"):
        br.read_matte(np.zeros((1, 2, 4, 4), np.float32), spec, 4, 4)


def test_cloth_scores_become_a_matte_of_every_class_but_the_background() -> None:
    spec = _specs()["u2net_cloth"]
    scores = np.zeros((1, 4, 2, 2), np.float32)
    scores[0, 0, 0, 0] = 5  # background
    scores[0, 1, 0, 1] = 5  # upper body
    scores[0, 2, 1, 0] = 5  # lower body
    scores[0, 3, 1, 1] = 5  # full body
    assert br.read_matte(scores, spec, 2, 2).tolist() == [[0, 255], [255, 255]]


def _facefusion_despill(bgr: np.ndarray, colour: tuple[int, int, int, int]) -> np.ndarray:
    """FaceFusion's apply_despill_color on a BGR frame, written out again from its formula."""
    frame = bgr.astype(np.float32)
    paint = np.zeros_like(frame)
    paint[..., 0], paint[..., 1], paint[..., 2] = colour[2], colour[1], colour[0]
    weight = paint / max(max(colour[:3]), 1)
    limit = np.minimum(frame, (np.roll(frame, 1, 2) + np.roll(frame, -1, 2)) * 0.5)
    return (frame + (limit - frame) * (colour[3] / 255.0) * weight).astype(np.uint8)


def test_despill_and_fill_follow_facefusions_formulas() -> None:
    rng = np.random.default_rng(4)
    frame = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    matte = rng.integers(0, 256, (40, 50), dtype=np.uint8)
    for colour in [(0, 255, 0, 255), (0, 200, 90, 128), (10, 20, 240, 30)]:
        got = br.despill(frame, colour)
        want = _facefusion_despill(frame[..., ::-1], colour)[..., ::-1]
        assert np.abs(got.astype(int) - want).max() <= 1, colour
    assert br.despill(frame, (0, 255, 0, 0)) is frame
    green = br.despill(np.array([[[40, 220, 60]]], np.uint8), (0, 255, 0, 255))
    assert green.tolist() == [[[40, 50, 60]]]  # green capped at the mean of red and blue
    fill = (0, 255, 0, 255)
    out = br.fill(frame, matte, fill)
    share = (1 - matte / 255.0)[..., None]
    want = (frame * (1 - share) + np.array(fill[:3]) * share).astype(np.uint8)
    assert np.abs(out.astype(int) - want).max() <= 1
    assert (out[matte == 0] == (0, 255, 0)).all() and (out[matte == 255] == frame[matte == 255]).all()
    half = br.fill(frame, np.zeros_like(matte), (255, 255, 255, 128))
    assert np.abs(half.astype(int) - (frame * (1 - 128 / 255) + 255 * 128 / 255)).max() <= 1
    assert br.fill(frame, matte, (0, 255, 0, 0)) is frame


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ffdesk.runtime.standins import write_standins

    folder = tmp_path_factory.mktemp("bg_pack")
    write_standins(folder, sorted(FACEFUSION))
    return folder


def _session(path: Path):  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_every_standin_keeps_its_contract(standins: Path) -> None:
    from ffdesk.runtime.files import verify

    for spec in load_catalog().by_kind("background_remover"):
        assert verify(spec, standins / spec.file, strict=True) == [], spec.name


@pytest.mark.parametrize("name", ["modnet", "u2netp", "u2net_cloth", "corridor_key_1024", "rmbg_2.0"])
def test_standin_mattes_follow_the_man_in_the_car(
    name: str, standins: Path, frames: list[np.ndarray]
) -> None:
    spec = _specs()[name]
    session = _session(standins / f"{name}.onnx")
    mattes = []
    for frame in frames:
        outputs = session.run(None, {"input": br.frame_input(frame, spec)})
        removal = br.finish_frame(frame, [y[0] for y in outputs], spec, (0, 255, 0, 255), (0, 0, 0, 0))
        matte = removal.matte
        assert matte.shape == (144, 176)
        assert matte[70:110, 70:110].mean() > 170  # his face and shirt
        for corner in (matte[:20, :20], matte[:20, -20:], matte[:20, 70:110]):
            assert corner.mean() < 20  # roof, window, roof above his head
        assert (removal.image[matte == 0] == (0, 255, 0)).all()  # the fill where the matte is 0
        if not spec.screen_hint:  # elsewhere the fill's share is 1 - matte / 255
            moved = np.abs(removal.image.astype(int) - frame).max(axis=2)
            assert (moved <= 256 - matte.astype(int)).all() and (moved[matte >= 240] <= 16).all()
        mattes.append(matte)
    assert np.abs(mattes[0].astype(int) - mattes[1]).mean() > 5  # he moved: so did the matte
    flat = np.full((144, 176, 3), 120, np.uint8)
    outputs = session.run(None, {"input": br.frame_input(flat, spec)})
    assert br.read_matte(outputs[0][0], spec, 176, 144).mean() < 40  # nothing stands out: background


def test_corridor_key_standin_drops_a_green_screen_and_gives_its_foreground(standins: Path) -> None:
    spec = _specs()["corridor_key_1024"]
    frame = np.full((144, 176, 3), (40, 200, 50), np.uint8)  # a green screen
    frame[40:130, 60:120] = (190, 140, 110)  # someone in front of it
    frame[60:80, 80:100] = (120, 160, 100)  # a greenish shirt
    outputs = _session(standins / "corridor_key_1024.onnx").run(None, {"input": br.frame_input(frame, spec)})
    removal = br.finish_frame(frame, [y[0] for y in outputs], spec, (0, 0, 0, 0), (0, 0, 0, 0))
    assert removal.matte[:30].max() < 10  # the screen is background even near the middle
    assert removal.matte[90:110, 75:105].mean() > 150
    shirt = removal.image[65:75, 85:95].reshape(-1, 3).astype(int)
    assert np.abs(shirt - (120, 120, 100)).max() <= 2  # the foreground: green capped at max(R, B)
