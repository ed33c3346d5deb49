"""Enhancers, masks and detectors of a FaceFusion folder through `ffdesk render`, chosen by name."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.runtime import sessions

from . import helpers
from .helpers import PHOTO, frames, model_names, render_args

ENHANCERS = (
    "gfpgan_1.2",
    "gfpgan_1.3",
    "gpen_bfr_256",
    "gpen_bfr_512",
    "gpen_bfr_1024",
    pytest.param("gpen_bfr_2048", marks=pytest.mark.slow),  # 9 s: its 2048 px stand-in on the CPU
    "restoreformer_plus_plus",
    "codeformer",  # three outputs
)


def _record(monkeypatch: pytest.MonkeyPatch, name: str) -> list[dict[str, np.ndarray]]:
    real = sessions.OrtSession.run
    feeds: list[dict[str, np.ndarray]] = []

    def run(self: sessions.OrtSession, inputs: Any) -> Any:
        if self.name == name and np.asarray(inputs["input"]).std() > 0:  # a face, not a warm-up run
            feeds.append({k: np.asarray(v).copy() for k, v in inputs.items()})
        return real(self, inputs)

    monkeypatch.setattr(sessions.OrtSession, "run", run)
    return feeds


FRAMES = 4
"""Frames of the clip each render here takes: its face is found in every one, and a 2048-pixel
enhancer's stand-in takes most of a second a face on the CPU."""
render = partial(helpers.render, frames=FRAMES)


@pytest.mark.parametrize("enhancer", ENHANCERS)
def test_each_enhancer_runs_at_its_own_size(
    ff_pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enhancer: str
) -> None:
    from ffdesk.runtime.catalog import load_catalog

    feeds = _record(monkeypatch, enhancer)
    report = render(ff_pack, face_clip, tmp_path / "f", "--swapper", "inswapper_128", "--enhancer", enhancer)
    assert enhancer in model_names(report)
    assert report["stages"]["enhance"]["frames"] > 0
    side = load_catalog().get(enhancer).resolution
    assert feeds and all(f["input"].shape[1:] == (3, side, side) for f in feeds)
    if enhancer == "codeformer":
        assert {(f["weight"].dtype.name, tuple(f["weight"].tolist())) for f in feeds} == {("float64", (0.5,))}
    else:
        assert all("weight" not in f for f in feeds)


def test_enhancer_weight_and_blend_are_passed(
    ff_pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feeds = _record(monkeypatch, "codeformer")
    base = ("--swapper", "inswapper_128", "--enhancer", "codeformer", "--enhancer-weight", "0.25")
    render(ff_pack, face_clip, tmp_path / "none", *base, "--enhancer-blend", "0")
    assert feeds and {float(f["weight"][0]) for f in feeds} == {0.25}
    render(ff_pack, face_clip, tmp_path / "all", *base, "--enhancer-blend", "100")
    render(ff_pack, face_clip, tmp_path / "swap", "--swapper", "inswapper_128")
    swap, none, every = frames(tmp_path / "swap"), frames(tmp_path / "none"), frames(tmp_path / "all")

    def gap(a: list[np.ndarray], b: list[np.ndarray]) -> float:
        return float(
            np.mean([np.abs(x.astype(int) - y.astype(int)).mean() for x, y in zip(a, b, strict=True)])
        )

    # blend 0 keeps the swapped face (up to resampling); blend 100 replaces it with the enhancer's
    assert gap(swap, none) < 0.25 * gap(swap, every)


@pytest.mark.parametrize(
    "bad", [("--enhancer-weight", "1.5"), ("--enhancer-blend", "101"), ("--mask-regions", "hat")]
)
def test_bad_enhancer_and_region_settings_are_one_line(
    ff_pack: Path, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: tuple[str, str]
) -> None:
    args = render_args(ff_pack, face_clip, tmp_path / "o.mp4", "--swapper", "inswapper_128", *bad)
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and bad[0] in err[0], err


@pytest.mark.timeout(90)
def test_masks_are_chosen_by_name(
    ff_pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = _record(monkeypatch, "bisenet_resnet_18")
    masks = "occlusion=xseg_2,region=bisenet_resnet_18"
    report = render(ff_pack, face_clip, tmp_path / "a", "--swapper", "inswapper_128", "--mask", masks)
    used = model_names(report)
    assert {"xseg_2", "bisenet_resnet_18"} <= used and not {"xseg_1", "bisenet_resnet_34"} & used
    assert parsed and parsed[0]["input"].shape[1:] == (3, 512, 512)  # the three-output parser ran
    report = render(
        ff_pack, face_clip, tmp_path / "b", "--swapper", "inswapper_128", "--mask", "occlusion=xseg_3"
    )
    assert "xseg_3" in model_names(report)
    # the defaults are FaceFusion's: xseg_1 and bisenet_resnet_34
    report = render(
        ff_pack, face_clip, tmp_path / "c", "--swapper", "inswapper_128", "--mask", "box,occlusion,region",
        "--mask-regions", "skin,nose,glasses",
    )  # fmt: skip
    assert {"xseg_1", "bisenet_resnet_34"} <= model_names(report)


def test_region_choice_changes_the_mask(
    ff_pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.swap import masks

    seen: list[tuple[int, ...]] = []
    real = masks.RegionMasker.__init__

    def init(self: masks.RegionMasker, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        seen.append(self.classes)

    monkeypatch.setattr(masks.RegionMasker, "__init__", init)
    render(ff_pack, face_clip, tmp_path / "a", "--swapper", "inswapper_128", "--mask", "region")
    assert set(seen[-1]) == {1, 2, 3, 4, 5, 6, 10, 11, 12, 13}  # every region, glasses too
    render(
        ff_pack, face_clip, tmp_path / "b", "--swapper", "inswapper_128", "--mask", "region",
        "--mask-regions", "skin,lips",
    )  # fmt: skip
    assert seen[-1] == (1, 12, 13)


def test_yunet_detects_in_the_render(ff_pack: Path, face_clip: Path, tmp_path: Path) -> None:
    report = render(
        ff_pack, face_clip, tmp_path / "f", "--swapper", "inswapper_128", "--detector", "yunet_2023_mar"
    )
    assert "yunet_2023_mar" in model_names(report)
    assert report["stages"]["detect"]["frames"] > 0


def test_the_enhanced_face_keeps_the_occlusion_mask(
    ff_pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feeds = _record(monkeypatch, "xseg_2")
    render(ff_pack, face_clip, tmp_path / "a", "--swapper", "inswapper_128", "--mask", "occlusion=xseg_2")
    swap_only = sum(len(f["input"]) for f in feeds)
    feeds.clear()
    render(
        ff_pack, face_clip, tmp_path / "b", "--swapper", "inswapper_128", "--mask", "occlusion=xseg_2",
        "--enhancer", "gpen_bfr_256",
    )  # fmt: skip
    assert swap_only > 0 and sum(len(f["input"]) for f in feeds) == 2 * swap_only  # swap and enhance


def test_occlusion_many_takes_the_minimum_of_every_xseg(
    ff_pack: Path, face_clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.pipeline.stages import models as stage_models
    from ffdesk.swap import masks

    combined: list[tuple[int, np.ndarray, np.ndarray]] = []
    real = stage_models.ModelRender.occlusion_masks

    def occlusion(self: stage_models.ModelRender, crops: np.ndarray) -> np.ndarray:
        out = real(self, crops)
        raws = [
            np.stack(self.run(r, stage_models._occlusion(self.masks[r]), list(crops))) for r in self.occluders
        ]
        combined.append((len(raws), out, masks.soften(np.minimum.reduce(raws))))
        return out

    monkeypatch.setattr(stage_models.ModelRender, "occlusion_masks", occlusion)
    report = render(
        ff_pack, face_clip, tmp_path / "f", "--swapper", "inswapper_128", "--mask", "occlusion=many"
    )
    assert {"xseg_1", "xseg_2", "xseg_3"} <= model_names(report)
    assert combined and all(n == 3 for n, _, _ in combined)
    for _, got, want in combined:
        np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize(
    ("given", "warning"),
    [
        (
            ("--mask-regions", "skin,nose"),
            "--mask-regions skin,nose picks the region mask's parts, and --mask makes no region mask: "
            "add it (--mask box,region)",
        ),
        (
            ("--mask", "box,occlusion", "--mask-areas", "mouth"),
            "--mask-areas mouth picks the area mask's parts, and --mask makes no area mask: "
            "add it (--mask box,occlusion,area)",
        ),
    ],
)
def test_a_masks_parts_without_that_mask_are_one_warning(
    ff_pack: Path,
    face_clip: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    given: tuple[str, ...],
    warning: str,
) -> None:
    """A pack swap reads the region mask's parts (`--mask-regions`) and the area mask's
    (`--mask-areas`) only with that mask in `--mask`: given without it, they changed nothing and
    nothing said so."""
    args = render_args(ff_pack, face_clip, tmp_path / "o.mp4", "--swapper", "inswapper_128", *given)
    assert main([*args, "--end", "0.08"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert f"ffdesk: warning: {warning}" in err, err
    # with the mask asked for (the last --mask given is the one argparse keeps), nothing to say
    out = tmp_path / "p.mp4"
    with_mask = render_args(
        ff_pack, face_clip, out, "--swapper", "inswapper_128", *given, "--mask", "box,region,area"
    )
    assert main([*with_mask, "--end", "0.08"]) == 0
    assert "makes no" not in capsys.readouterr().err


def test_a_farm_render_names_a_masks_parts_without_that_mask_too(
    ff_pack: Path, face_clip: Path, tmp_path: Path, run_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A farm's segments render on its workers, whose warnings the command does not show: the
    command names the parts of a mask `--mask` does not make before it sends the job out."""
    from ffdesk.commands.render import _say_farm_ignores
    from ffdesk.pipeline.job import RenderJob

    job = RenderJob(
        target=face_clip, output=tmp_path / "o.mp4", sources=(Path(PHOTO),), swapper="inswapper_128",
        models_dir=ff_pack, mask_regions=("skin",),
    )  # fmt: skip
    _say_farm_ignores(job, run_env)
    assert "--mask-regions skin picks the region mask's parts" in capsys.readouterr().err
