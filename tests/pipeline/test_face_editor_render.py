"""The face editor in a render of a real clip (carphone) with LivePortrait stand-ins: each
setting changes the face, where it should, and nothing outside the pasted face box; the editor
needs its three extra files, named in one line when missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.images import read_image
from ffdesk.runtime.standins import write_standins
from tests.real_clips import carphone

PARTS = ("feature_extractor", "motion_extractor", "generator", "eye_retargeter", "lip_retargeter", "stitcher")
END = "0.2"
"""The first fifth of a second of carphone: 6 frames, each of them checked."""


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("live_portrait_pack")
    write_standins(folder, [f"live_portrait_{p}" for p in PARTS])
    return folder


def render(out: Path, *extra: str) -> list[np.ndarray]:
    out.mkdir(parents=True, exist_ok=True)
    args = ["render", "--target", str(carphone()), "--output", str(out / "f"), "--encoder", "png"]
    assert main([*args, "--end", END, "--no-resume", "-q", *extra]) == 0
    return [read_image(p) for p in sorted((out / "f").glob("*.png"))]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    return render(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def unedited(tmp_path_factory: pytest.TempPathFactory, pack: Path) -> list[np.ndarray]:
    return render(
        tmp_path_factory.mktemp("unedited"), "--models-dir", str(pack), "--face-editor", "live_portrait"
    )


def edited(tmp: Path, pack: Path, *edits: str) -> list[np.ndarray]:
    args = ["--models-dir", str(pack), "--face-editor", "live_portrait"]
    for e in edits:
        args += ["--face-edit", e]
    return render(tmp, *args)


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.any(a != b, axis=2)


def test_without_settings_the_face_is_only_redrawn(
    plain: list[np.ndarray], unedited: list[np.ndarray]
) -> None:
    assert len(unedited) == len(plain) == 6
    for a, b in zip(unedited, plain, strict=True):
        m = changed(a, b)
        assert m.any() and m.sum() < 0.6 * m.size
        assert not m[:, :8].any() and not m[132:].any()  # the frame's left and bottom edges
        assert np.abs(a.astype(int) - b.astype(int))[m].mean() < 4


@pytest.mark.parametrize(
    ("edit", "least", "rows"),
    [
        ("mouth_smile=1", 2.0, (60, 110)),
        ("lip_open_ratio=1", 8.0, (60, 110)),
        ("eye_open_ratio=1", 1.0, (15, 65)),
        ("head_yaw=0.6", 8.0, (20, 110)),
    ],
)
def test_each_setting_changes_the_face_where_it_should(
    tmp_path: Path,
    pack: Path,
    plain: list[np.ndarray],
    unedited: list[np.ndarray],
    edit: str,
    least: float,
    rows: tuple[int, int],
) -> None:
    """Against the unedited redraw: the face changes on every frame, most within the setting's
    rows (the mouth's, the eyes', the whole face's); against the clip: nothing outside the box."""
    frames = edited(tmp_path, pack, edit)
    for f, u, p in zip(frames, unedited, plain, strict=True):
        diff = np.abs(f.astype(int) - u.astype(int)).sum(axis=2)
        assert diff.sum() / 3 / max(1, int((diff > 0).sum())) > least / 4
        inside = diff[rows[0] : rows[1]].sum() / diff.sum()
        assert inside > 0.6, (edit, inside)
        outside = changed(f, p)
        assert not outside[:, :8].any() and not outside[132:].any()
    spread = np.mean(
        [np.abs(f.astype(int) - u.astype(int)).max() for f, u in zip(frames, unedited, strict=True)]
    )
    assert spread > least


def test_settings_of_opposite_sign_differ(tmp_path: Path, pack: Path) -> None:
    smile = edited(tmp_path / "a", pack, "mouth_smile=0.8")
    frown = edited(tmp_path / "b", pack, "mouth_smile=-0.8")
    assert all(changed(a, b).any() for a, b in zip(smile, frown, strict=True))


def test_the_editor_names_a_missing_file_of_its_own(
    tmp_path: Path, pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "models"
    shutil.copytree(pack, folder)
    (folder / "live_portrait_stitcher.onnx").unlink()
    out = tmp_path / "out"
    out.mkdir()
    args = ["render", "--target", str(carphone()), "--output", str(out / "f"), "--encoder", "png", "-q"]
    args += ["--no-resume", "--models-dir", str(folder), "--face-editor", "live_portrait"]
    assert main([*args, "--face-edit", "head_yaw=0.5"]) != 0
    err = capsys.readouterr().err.strip()
    assert "live_portrait_stitcher not found" in err and len(err.splitlines()) == 1, err
    assert not any(out.rglob("*.png"))
    # the expression restorer does without it
    assert main([*args[:-2], "--expression-restorer", "live_portrait", "--end", "0.2"]) == 0
