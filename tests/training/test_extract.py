"""Faceset extraction on public-domain photos with the embedded face models."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import matplotlib
import numpy as np
import pytest
import skimage.data

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.training.faceset import ExtractSettings, blur_score, difference_hash, extract
from ffdesk.training.store import Faceset


def _write(path: Path, rgb: np.ndarray) -> Path:
    assert cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    return path


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("photos")
    astronaut = skimage.data.astronaut()
    hopper = cv2.imread(str(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"))
    _write(folder / "a_astronaut.png", astronaut)
    assert hopper is not None
    cv2.imwrite(str(folder / "b_hopper.jpg"), hopper)
    _write(
        folder / "c_astronaut_smaller.png", cv2.resize(astronaut, (420, 420), interpolation=cv2.INTER_AREA)
    )
    _write(folder / "d_astronaut_blurred.png", cv2.GaussianBlur(astronaut, (0, 0), 4))
    (folder / "notes.txt").write_text("not an image")
    return folder


def test_extract_keeps_sharp_distinct_faces_and_skips_on_rerun(photos: Path, tmp_path: Path) -> None:
    out = tmp_path / "faceset"
    settings = ExtractSettings(size=128)
    stats = extract([photos], out, settings)
    assert (stats.sources, stats.kept, stats.duplicates, stats.blurred) == (4, 2, 1, 1), stats.line()
    fs = Faceset(out)
    assert len(fs) == 2
    assert fs.face(0).shape == (128, 128, 3) and fs.mask(0).shape == (128, 128)
    assert fs.landmarks(0).shape == (468, 2)
    assert [Path(f["source"]).name for f in fs.index.faces] == ["a_astronaut.png", "b_hopper.jpg"]
    for i in range(2):
        mask = fs.mask(i) > 127
        assert 0.25 < mask.mean() < 0.8  # the face hull covers the middle of the crop, not all of it
        assert mask[64, 64] and not mask[2, 2]
        lm = fs.landmarks(i)
        assert (lm > 0).all() and (lm < 128).all()
    assert fs.index.settings["alignment"] == {"template": "arcface_128", "size": 128}

    again = extract([photos], out, settings)
    assert (again.skipped_sources, again.sources, again.kept) == (4, 0, 0)
    os.utime(photos / "a_astronaut.png", ns=(1, 1))  # a changed input is read again
    changed = extract([photos], out, settings)
    assert (changed.sources, changed.duplicates, len(Faceset(out))) == (1, 1, 2)


def test_tiny_faces_are_dropped(photos: Path, tmp_path: Path) -> None:
    """A faceset of nothing but dropped faces is not made: it would only fail at training."""
    small = _write(tmp_path / "small.png", cv2.resize(skimage.data.astronaut(), (200, 200)))
    with pytest.raises(
        UserError, match=r"no face kept from .*small\.png \(1 frame read; 1 face found, dropped 1 tiny"
    ):
        extract([small], tmp_path / "fs", ExtractSettings(size=64, min_face=80))
    assert not (tmp_path / "fs").exists()


def test_blur_and_hash_measures() -> None:
    img = skimage.data.astronaut()[100:300, 150:350]
    assert blur_score(cv2.GaussianBlur(img, (0, 0), 3)) < 0.2 * blur_score(img)
    near = difference_hash(cv2.resize(cv2.resize(img, (150, 150)), (200, 200)))
    far = difference_hash(img[::-1])
    same = difference_hash(img)
    assert bin(near ^ same).count("1") <= 4 < bin(far ^ same).count("1")


def test_cli_reports_a_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["faceset", "extract", "--from", str(tmp_path / "nope"), "--out", str(tmp_path / "fs"), "-q"])
    assert rc == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_cli_refuses_a_file_as_the_faceset_folder(
    photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out` naming a file (the clip itself, say) was an internal error (FileExistsError)."""
    photo = next(p for p in sorted(photos.iterdir()) if p.is_file())
    kept = photo.read_bytes()
    rc = main(["faceset", "extract", "--from", str(photo), "--out", str(photo), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "a file, not a faceset folder" in err and len(err.strip().splitlines()) == 1, err
    assert photo.read_bytes() == kept


def test_cli_extracts_a_clip_and_skips_it_on_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ffdesk.media.synth import synth_clip

    clip = tmp_path / "clip.mp4"
    synth_clip(
        clip, width=256, height=192, fps=25, frames=6, face_image=skimage.data.astronaut()[30:260, 130:320]
    )
    out = tmp_path / "fs"
    assert main(["faceset", "extract", "--from", str(clip), "--out", str(out), "--size", "64", "-q"]) == 0
    first = capsys.readouterr().out
    fs = Faceset(out)
    kept = f"{len(fs)} face" + ("" if len(fs) == 1 else "s")
    assert 1 <= len(fs) <= 6 and f"{kept} kept from 6 frames of 1 input " in first
    assert {f["frame"] for f in fs.index.faces} <= set(range(6))
    assert main(["faceset", "extract", "--from", str(clip), "--out", str(out), "--size", "64"]) == 0
    said = capsys.readouterr()
    assert "0 faces kept from 0 frames of 0 inputs (1 already extracted)" in said.out
    assert said.err == ""  # stderr is not a terminal here: no progress bar drawn into it
    assert main(["faceset", "extract", "--from", str(clip), "--out", str(out), "--size", "128", "-q"]) == 2
