"""The deep swapper in a render: a real clip (carphone) whose face becomes the stand-in's person
(dark glasses, red lips) with no source photo, as far as the morph value says; every pixel outside
the pasted faces stays exactly as rendered without it (PNG output); FaceFusion's folder layout
(`<scope>/<name>.dfm`); bad model files and settings are one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.images import read_image
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.files import write_sidecar
from ffdesk.runtime.standins import write_standin, write_standins
from ffdesk.swap.deep_swapper import sized_contract
from tests.pipeline.barred_clip import bar_moved, barred_clip
from tests.real_clips import carphone

DEFAULT = "iperov/elon_musk_224"
FIRST_SECOND = ("--end", "1")
"""The clip's first 30 frames (of 120), for the renders that compare settings or models."""


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two contracts' stand-ins, and the AMP one where FaceFusion keeps its default model."""
    folder = tmp_path_factory.mktemp("deep_pack")
    write_standins(folder, ["dfl_amp", "dfl_saehd"], dynamic_batch=True)
    (folder / "iperov").mkdir()
    shutil.copy(folder / "dfl_amp.dfm", folder / "iperov" / "elon_musk_224.dfm")
    shutil.copy(folder / "dfl_amp.hash", folder / "iperov" / "elon_musk_224.hash")
    return folder


def render(out: Path, *extra: str, target: Path | None = None) -> list[np.ndarray]:
    args = ["render", "--target", str(target or carphone()), "--output", str(out), "--encoder", "png"]
    assert main([*args, "--no-resume", "-q", *extra]) == 0
    return [read_image(p) for p in sorted(out.glob("*.png"))]


def deep(tmp: Path, pack: Path, *extra: str) -> list[np.ndarray]:
    tmp.mkdir(parents=True, exist_ok=True)
    return render(tmp / "frames", "--models-dir", str(pack), "--deep-swapper", *extra)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    return render(tmp_path_factory.mktemp("plain") / "frames")


@pytest.fixture(scope="module")
def swapped(tmp_path_factory: pytest.TempPathFactory, pack: Path) -> list[np.ndarray]:
    return deep(tmp_path_factory.mktemp("deep"), pack)  # FaceFusion's default model


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.any(a != b, axis=2)


def moved(frames: list[np.ndarray], plain: list[np.ndarray]) -> float:
    return float(
        np.mean([np.abs(f.astype(int) - p.astype(int)).mean() for f, p in zip(frames, plain, strict=True)])
    )


def dark(frame: np.ndarray, where: np.ndarray, below: int = 45) -> int:
    """How many pixels of `where` are dark (every channel under `below`)."""
    return int((frame.max(axis=2)[where] < below).sum())


def test_every_face_becomes_the_models_person_and_nothing_else_changes(
    swapped: list[np.ndarray], plain: list[np.ndarray]
) -> None:
    assert len(swapped) == len(plain) == 120
    masks = [changed(a, b) for a, b in zip(swapped, plain, strict=True)]
    assert sum(bool(m.any()) for m in masks) >= 110  # the face is found on nearly every frame
    glasses = 0
    for frame, before, m in zip(swapped, plain, masks, strict=True):
        if not m.any():
            continue
        # the face's part of the 176 x 144 frame: the car's window (left), the door (right) and the
        # suit (bottom rows) are bit-identical
        assert 0.03 * m.size < m.sum() < 0.3 * m.size
        assert not m[:, :25].any() and not m[:, 130:].any() and not m[120:].any()
        glasses += dark(frame, m) > dark(before, m) + 20  # the person's dark glasses
    assert glasses >= 100


def test_the_morph_value_sets_how_far_the_face_moves(
    tmp_path: Path, pack: Path, swapped: list[np.ndarray], plain: list[np.ndarray]
) -> None:
    none = deep(tmp_path / "m0", pack, DEFAULT, "--deep-swapper-morph", "0", *FIRST_SECOND)
    some = deep(tmp_path / "m40", pack, DEFAULT, "--deep-swapper-morph", "40", *FIRST_SECOND)
    n = len(some)
    assert n == len(none) == 30
    distances = [moved(none, plain[:n]), moved(some, plain[:n]), moved(swapped[:n], plain[:n])]
    assert distances[0] < 0.3 * distances[1] and distances[1] < 0.6 * distances[2]
    for frame, before in zip(some, plain[:n], strict=True):  # the same faces' part of the frames
        m = changed(frame, before)
        assert not m[:, :25].any() and not m[:, 130:].any() and not m[120:].any()


def test_a_saehd_file_by_path_swaps_in_full_whatever_the_morph(
    tmp_path: Path,
    pack: Path,
    swapped: list[np.ndarray],
    plain: list[np.ndarray],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = str(pack / "dfl_saehd.dfm")
    full = deep(tmp_path / "a", pack, path, "--deep-swapper-morph", "0", *FIRST_SECOND)
    # and says so: the morph asked for was left out without a word
    assert "dfl_saehd takes no morph (only DeepFaceLab's AMP models do): --deep-swapper-morph 0 is" in (
        capsys.readouterr().err
    )
    n = len(full)
    assert moved(full, plain[:n]) > 0.7 * moved(swapped[:n], plain[:n])
    same = deep(tmp_path / "b", pack, "dfl_saehd", *FIRST_SECOND)
    assert all((a == b).all() for a, b in zip(full, same, strict=True))


def test_after_a_model_swap_the_deep_swapper_redraws_the_swapped_faces(
    tmp_path: Path, pack: Path, plain: list[np.ndarray]
) -> None:
    from ffdesk.runtime.resources import resource_path

    write_standins(pack, ["inswapper_128", "arcface_w600k_r50"], dynamic_batch=True)
    frames = render(
        tmp_path / "frames",
        *("--models-dir", str(pack), "--swapper", "inswapper_128", "--mask", "box,area"),
        *("--source", str(resource_path("sample", "astronaut.jpg")), "--deep-swapper", "dfl_amp"),
        *FIRST_SECOND,
    )
    n = len(frames)
    assert n == 30
    masks = [changed(a, b) for a, b in zip(frames, plain[:n], strict=True)]
    # the glasses are matched to the swapped face's colours: darker, not as dark
    glasses = sum(
        dark(f, m, 90) > dark(p, m, 90) + 20 for f, p, m in zip(frames, plain[:n], masks, strict=True)
    )
    assert glasses >= 25
    for m in masks:
        assert not m[:, :25].any() and not m[120:].any()


@pytest.fixture(scope="module")
def barred(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return barred_clip(tmp_path_factory.mktemp("barred"))


@pytest.fixture(scope="module")
def barred_renders(
    tmp_path_factory: pytest.TempPathFactory, pack: Path, barred: Path
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The barred clip rendered plain and deep-swapped under the box mask alone, with the pack's
    mask models replaced by ones whose masks follow the picture (skin kept, blue left out)."""
    from tests.modelpacks.helpers import content_masks

    content_masks(pack)
    tmp = tmp_path_factory.mktemp("barred_renders")
    plain = render(tmp / "plain", target=barred)
    box = render(tmp / "box", "--models-dir", str(pack), "--deep-swapper", "--mask", "box", target=barred)
    return plain, box


@pytest.mark.parametrize("mask", ["occlusion", "region"])
def test_alone_it_pastes_under_the_occlusion_and_region_masks_it_is_asked_for(
    tmp_path: Path,
    pack: Path,
    barred: Path,
    barred_renders: tuple[list[np.ndarray], list[np.ndarray]],
    capsys: pytest.CaptureFixture[str],
    mask: str,
) -> None:
    """Without a swapper model the deep swapper loads the mask models itself (an XSeg and a
    BiSeNet whose masks follow the picture: skin kept, blue left out): the bar in front of the
    mouth stays as it was, where under the box mask alone the face is drawn over it; and nothing
    is said about masks."""
    plain, box = barred_renders
    capsys.readouterr()
    masked = render(
        tmp_path / mask, "--models-dir", str(pack), "--deep-swapper", "--mask", f"box,{mask}", target=barred
    )
    assert "mask" not in capsys.readouterr().err
    assert len(masked) == len(box) == len(plain) == 30

    moved_box, moved_masked = bar_moved(box, plain), bar_moved(masked, plain)
    assert moved_box > 10.0 and moved_masked < 0.25 * moved_box, (moved_masked, moved_box)
    assert moved(masked, plain) > 0.3 * moved(box, plain)  # the face itself is still swapped


def test_a_photo_without_a_face_comes_out_unchanged(tmp_path: Path, pack: Path) -> None:
    from tests.faces.photos import background

    photo = tmp_path / "scene.png"
    cv2.imwrite(str(photo), background(320, 240)[:, :, ::-1])
    out = tmp_path / "out.png"
    args = ["render", "--target", str(photo), "--output", str(out), "-q", "--models-dir", str(pack)]
    assert main([*args, "--deep-swapper"]) == 0
    assert (read_image(out) == read_image(photo)).all()


def test_bad_models_and_settings_are_one_line(
    tmp_path: Path, pack: Path, plain: list[np.ndarray], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "models"
    shutil.copytree(pack, folder)
    custom = folder / "custom"
    custom.mkdir()
    data = (pack / "dfl_amp.dfm").read_bytes()
    (custom / "broken.dfm").write_bytes(data[: len(data) // 3])
    xseg = write_standin(load_catalog().get("xseg_1"), tmp_path)
    xseg.path.rename(custom / "mask.dfm")
    wide = write_standin(sized_contract(load_catalog().get("dfl_amp"), 320), tmp_path)
    (folder / "iperov" / "keanu_reeves_320.dfm").write_bytes(wide.path.read_bytes())
    (folder / "iperov" / "jackie_chan_224.dfm").write_bytes(wide.path.read_bytes())
    write_sidecar(folder / "iperov" / "jackie_chan_224.dfm")
    (folder / "iperov" / "emma_watson_224.dfm").write_bytes(data)
    (folder / "iperov" / "emma_watson_224.hash").write_text("00000000")
    cases = [
        (
            ["iperov/vin_diesel_224"],
            "iperov/vin_diesel_224.dfm: deep swapper model iperov/vin_diesel_224 not found",
        ),
        (["iperov/nobody_224"], "unknown deep swapper model 'iperov/nobody_224'"),
        (["custom/nobody"], "deep swapper model custom/nobody not found"),
        ([str(tmp_path / "gone.dfm")], "gone.dfm: model file not found"),
        (["custom/broken"], "broken.dfm: truncated or not an ONNX model"),
        (["custom/mask"], "mask.dfm: not a DeepFaceLab model"),
        (["iperov/jackie_chan_224"], "a 320-px model, but iperov/jackie_chan_224 takes 224 px"),
        (["iperov/emma_watson_224"], "emma_watson_224.dfm: hash mismatch"),
        (["xseg_1"], "xseg_1 is an occluder model, not a deep swapper"),
        (["--deep-swapper-morph", "101"], "(--deep-swapper-morph) must be a whole number from 0 to 100"),
    ]
    clip = str(carphone())
    for i, (extra, message) in enumerate(cases):
        out = tmp_path / f"out{i}"
        args = ["render", "--target", clip, "--output", str(out), "--encoder", "png", "--no-resume", "-q"]
        assert main([*args, "--models-dir", str(folder), "--deep-swapper", *extra]) != 0
        err = capsys.readouterr().err.strip()
        assert message in err and "Traceback" not in err, err
        assert len(err.splitlines()) == 1, err
        assert not out.exists() or not any(out.glob("*.png"))
    # a named model at the side its name says runs (FaceFusion's 320-px files)
    frames = render(
        tmp_path / "wide",
        *("--models-dir", str(folder), "--deep-swapper", "iperov/keanu_reeves_320", *FIRST_SECOND),
    )
    assert len(frames) == 30
    assert sum(bool(changed(a, b).any()) for a, b in zip(frames, plain[:30], strict=True)) >= 28
