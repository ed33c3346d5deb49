"""FaceFusion's four face masks on real faces (the astronaut and Grace Hopper photos): the box
with its blur and padding, landmark areas, their host and device versions, and the command
line's mask settings reaching the job."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import cv2
import numpy as np
import pytest
import torch

from ffdesk.errors import UserError
from ffdesk.faces.align import warp_face
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.faces.types import Face
from ffdesk.pipeline.job import RenderJob, upgrade_legacy_fields
from ffdesk.pipeline.stages.device_models import DeviceModels
from ffdesk.pipeline.stages.device_redraw import DeviceFrames
from ffdesk.runtime.device import DevicePixels
from ffdesk.swap import areas as ar
from ffdesk.swap import masks as mk
from ffdesk.swap.device_ops import DeviceOps
from tests.faces import photos

SIZE = 256


def _facefusion_box(size: int, blur: float, padding: tuple[int, int, int, int]) -> np.ndarray:
    """FaceFusion 3.8's create_box_mask, re-derived from its code: a border of
    max(int(size * blur / 2) // 2, 1) pixels or the side's padding percent of the crop (whichever
    is wider) is zeroed, then the mask is blurred with sigma int(size * blur / 2) / 4."""
    amount = int(size * 0.5 * blur)
    area = max(amount // 2, 1)
    rows, cols = np.mgrid[0:size, 0:size]
    top, right, bottom, left = (max(area, int(size * p / 100)) for p in padding)
    inside = (rows >= top) & (rows < size - bottom) & (cols >= left) & (cols < size - right)
    mask = inside.astype(np.float32)
    return cv2.GaussianBlur(mask, (0, 0), amount * 0.25) if amount > 0 else mask


@pytest.fixture(scope="module")
def faces() -> list[tuple[np.ndarray, Face]]:
    analyser = FaceAnalyser()
    out = []
    for image in (photos.astronaut(), photos.grace_hopper()):
        out.append((image, max(analyser.analyse(image), key=lambda f: f.area)))
    return out


@pytest.mark.parametrize(
    ("blur", "padding"),
    [(0.3, (0, 0, 0, 0)), (0.0, (0, 0, 0, 0)), (0.5, (10, 20, 30, 5)), (1.0, (0, 60, 0, 0))],
)
def test_the_box_is_facefusions(blur: float, padding: tuple[int, int, int, int]) -> None:
    np.testing.assert_allclose(
        mk.box_mask(SIZE, blur, padding), _facefusion_box(SIZE, blur, padding), atol=1e-6
    )


def test_padding_moves_the_box_edge_by_its_percent() -> None:
    hard = mk.box_mask(SIZE, 0.0, (10, 0, 30, 0))
    rows = np.flatnonzero(hard[:, SIZE // 2] > 0)
    assert rows[0] == int(SIZE * 0.10) and rows[-1] == SIZE - int(SIZE * 0.30) - 1
    cols = np.flatnonzero(hard[SIZE // 2] > 0)
    assert cols[0] == 1 and cols[-1] == SIZE - 2  # no padding: FaceFusion's one-pixel border
    # with a blur, the half-way level moves down by the padding (less the blur's own border)
    plain, padded = mk.box_mask(SIZE, 0.3), mk.box_mask(SIZE, 0.3, (20, 0, 0, 0))
    half = [int(np.argmax(m[:, SIZE // 2] >= 0.5)) for m in (plain, padded)]
    assert half[1] - half[0] == int(SIZE * 0.2) - int(SIZE * 0.5 * 0.3) // 2


def test_blur_softens_the_edge_as_a_gaussian_of_size_times_blur_over_eight() -> None:
    assert set(np.unique(mk.box_mask(SIZE, 0.0))) == {0.0, 1.0}
    widths = []
    for blur in (0.2, 0.4, 0.8):
        column = mk.box_mask(SIZE, blur)[:, SIZE // 2]
        ramp = int(np.argmax(column >= 0.9)) - int(np.argmax(column >= 0.1))
        sigma = int(SIZE * 0.5 * blur) * 0.25
        assert abs(ramp - 2 * 1.2816 * sigma) <= 1.5, (blur, ramp, sigma)  # a step's 10-90% width
        widths.append(ramp)
    assert widths[0] < widths[1] < widths[2]


@pytest.mark.parametrize(
    ("text", "padding"),
    [("5", (5, 5, 5, 5)), ("5,10", (5, 10, 5, 10)), ("5 10 15", (5, 10, 15, 10)), ("1,2,3,4", (1, 2, 3, 4))],
)
def test_padding_takes_one_to_four_numbers_as_facefusion_does(
    text: str, padding: tuple[int, int, int, int]
) -> None:
    assert mk.parse_padding(text) == padding


@pytest.mark.parametrize("text", ["", "1,2,3,4,5", "x", "2.5", "101", "-1"])
def test_bad_padding_is_a_one_line_error(text: str) -> None:
    with pytest.raises(ValueError, match="mask padding") as info:
        mk.parse_padding(text)
    assert "\n" not in str(info.value)


def test_mask_types_default_to_the_box_and_refuse_unknown_ones() -> None:
    assert mk.mask_types(()) == ("box",)
    assert mk.mask_types(("region=bisenet_resnet_18", "area", "occlusion=many")) == (
        "occlusion",
        "area",
        "region",
    )
    with pytest.raises(ValueError, match="'hat'"):
        mk.mask_types(("box", "hat"))


def _crop_points(face: Face, m: np.ndarray) -> np.ndarray:
    assert face.landmarks is not None
    return ar.points_68(face.landmarks) @ m[:, :2].T + m[:, 2]


def test_the_68_points_sit_where_the_68_point_scheme_puts_them(faces: list[tuple[np.ndarray, Face]]) -> None:
    for _, face in faces:
        assert face.landmarks is not None
        p = ar.points_68(face.landmarks)
        assert p.shape == (68, 2)
        # the subject's right (image left) before the left; brows above eyes above nose tip above
        # mouth above chin; the jaw's middle point lowest of all
        assert p[0, 0] < p[8, 0] < p[16, 0] and p[36, 0] < p[45, 0] and p[48, 0] < p[54, 0]
        assert p[17:27, 1].mean() < p[36:48, 1].mean() < p[30, 1] < p[48:68, 1].mean() < p[8, 1]
        assert p[8, 1] == p[:, 1].max()


def test_area_masks_cover_their_landmarks(faces: list[tuple[np.ndarray, Face]]) -> None:
    for image, face in faces:
        crop, m = warp_face(image, face.kps, "arcface_128", SIZE)
        pts = _crop_points(face, m)
        eyes = np.stack([pts[36:42].mean(0), pts[42:48].mean(0)])
        mouth = pts[60:68].mean(0)
        chin = pts[8] + (pts[57] - pts[8]) * 0.3  # above the chin's edge, below the lip

        def at(mask: np.ndarray, xy: np.ndarray) -> float:
            return float(mask[int(round(xy[1])), int(round(xy[0]))])

        upper, lower, lips = (ar.area_masks([face], [m], SIZE, (a,))[0] for a in ar.AREAS)
        assert min(at(upper, e) for e in eyes) > 0.9 and at(upper, chin) < 0.05 and at(upper, mouth) < 0.05
        assert at(lower, mouth) > 0.9 and at(lower, chin) > 0.9 and max(at(lower, e) for e in eyes) < 0.05
        assert (
            at(lips, mouth) > 0.75 and at(lips, pts[30]) < 0.05
        )  # a closed mouth is thin and max(at(lips, e) for e in eyes) < 0.05
        every = ar.area_masks([face], [m], SIZE, ())[0]
        np.testing.assert_array_equal(every, ar.area_masks([face], [m], SIZE, tuple(ar.AREAS))[0])
        assert np.all(every >= np.maximum(lower, lips) - 1e-6)
        # softened as FaceFusion softens its masks: 0 and 1 away from the edge, a ramp across it
        assert every.min() == 0.0 and every.max() == 1.0 and float(((every > 0) & (every < 1)).mean()) > 0.02


def test_a_face_without_a_mesh_hides_nothing() -> None:
    face = Face(bbox=(0, 0, 10, 10), score=1.0, kps=np.zeros((5, 2), np.float32))
    out = ar.area_masks([face], [np.eye(2, 3)], 64, ("mouth",))
    assert out.shape == (1, 64, 64) and np.all(out == 1.0)


def test_unknown_areas_are_refused() -> None:
    with pytest.raises(ValueError, match="'nose'"):
        ar.check_areas(("mouth", "nose"))


def test_the_device_masks_are_the_hosts(faces: list[tuple[np.ndarray, Face]]) -> None:
    pixels = DevicePixels(torch.device("cpu"))
    ops = DeviceOps(pixels)
    for blur, padding in ((0.3, (0, 0, 0, 0)), (0.6, (10, 5, 25, 0))):
        np.testing.assert_array_equal(
            ops.box_mask(SIZE, blur, padding).numpy(), mk.box_mask(SIZE, blur, padding)
        )
    job = SimpleNamespace(mask_areas=("lower-face", "mouth"), mask_blur=0.3)
    models = DeviceModels(cast(Any, SimpleNamespace(job=job)), DeviceFrames(pixels), cap=4)
    affines = [warp_face(image, face.kps, "arcface_128", SIZE)[1] for image, face in faces]
    chosen = [face for _, face in faces]
    host = ar.area_masks(chosen, affines, SIZE, job.mask_areas)
    device = models.areas(chosen, affines, SIZE).numpy()
    assert np.abs(device - host).max() < 1e-5
    assert pixels.transfers.copies("up", "area-masks") == 1  # one small copy for the batch


def test_mask_settings_reach_the_job_from_the_command_line(tmp_path: Path) -> None:
    from ffdesk.cli import build_parser
    from ffdesk.commands.render import job_from_args

    args = build_parser().parse_args(
        ["render", "--target", str(tmp_path / "a.mp4"), "--output", str(tmp_path / "b.mp4"),
         "--mask", "box,area,occlusion=xseg_2", "--mask-blur", "0.5", "--mask-padding", "10,20",
         "--mask-areas", "upper-face,mouth"]
    )  # fmt: skip
    job = job_from_args(args)
    assert job.masks == ("box", "area", "occlusion=xseg_2")
    assert job.mask_blur == 0.5 and job.mask_padding == (10, 20, 10, 20)
    assert job.mask_areas == ("upper-face", "mouth")
    plain = job_from_args(build_parser().parse_args(["render", "--target", "a", "--output", "b"]))
    assert (plain.masks, plain.mask_blur, plain.mask_padding, plain.mask_areas) == ((), 0.3, (0, 0, 0, 0), ())


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--mask-blur", "1.5"),
        ("--mask-padding", "1,2,3,4,5"),
        ("--mask-areas", "nose"),
        ("--mask", "box,hat"),
    ],
)
def test_bad_mask_flags_are_one_line(capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    from ffdesk.cli import main

    assert main(["render", "--target", "a.mp4", "--output", "b.mp4", flag, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err


def test_a_stored_job_from_before_keeps_its_box() -> None:
    old = {"target": "a.mp4", "output": "b.mp4", "masks": ["occlusion"]}
    assert upgrade_legacy_fields(old)["masks"] == ["box", "occlusion"]
    new = {**old, "mask_blur": 0.3}
    assert upgrade_legacy_fields(new)["masks"] == ["occlusion"]
    # a job that leaves the box out renders differently from one that kept it: never resumed as one
    a = RenderJob(target=Path("a.mp4"), output=Path("b.mp4"), masks=("occlusion",))
    b = RenderJob(target=Path("a.mp4"), output=Path("b.mp4"), masks=("box", "occlusion"))
    assert a.output_fingerprint() != b.output_fingerprint()
    with pytest.raises(UserError, match="--mask-blur"):
        RenderJob(target=Path("a.mp4"), output=Path("b.mp4"), mask_blur=-0.1)


@pytest.mark.timeout(120)
def test_a_render_with_every_setting_gives_the_same_frames_on_host_and_device(
    run_env: Any, tmp_path: Path
) -> None:
    from ffdesk.media.images import read_image
    from ffdesk.pipeline.engine import run_render
    from ffdesk.runtime.standins import write_standins
    from tests.modelpacks.helpers import PHOTO
    from tests.real_clips import carphone

    pack = tmp_path / "pack"
    pack.mkdir()
    write_standins(pack, ["inswapper_128", "arcface_w600k_r50"], dynamic_batch=True)

    def render(name: str, pixels: str, **masks: Any) -> list[np.ndarray]:
        job = RenderJob(
            target=carphone(), output=tmp_path / name, sources=(Path(PHOTO),), models_dir=pack,
            swapper="inswapper_128", recognizer="arcface_w600k_r50", precision="fp32", provider="cpu",
            encoder="png", end=0.4, resume=False, pixels=cast(Any, pixels), **masks,
        )  # fmt: skip
        report = run_render(job, env=run_env)
        assert report.faces is not None and report.faces.faces_swapped > 0
        return [read_image(p) for p in sorted((tmp_path / name).glob("*.png"))]

    settings = {
        "masks": ("box", "area"),
        "mask_blur": 0.6,
        "mask_padding": (0, 10, 20, 10),
        "mask_areas": ("lower-face",),
    }
    host, device = render("host", "host", **settings), render("device", "device", **settings)
    assert len(host) == len(device) > 0
    for a, b in zip(host, device, strict=True):
        assert np.percentile(np.abs(a.astype(int) - b.astype(int)), 99.9) <= 2
    # the area mask changes what is pasted: the box alone redraws more of the face
    plain = render("plain", "host")
    changed = [
        float(np.abs(a.astype(int) - p.astype(int)).max(-1).mean()) for a, p in zip(host, plain, strict=True)
    ]
    assert np.median(changed) > 0.5, changed
