"""`faceset extract` of inputs with no face, and `faceset info` in words.

A clip with no face in it made an empty faceset ("0 faces kept", exit 0): the problem only showed
when training on it. `faceset info` printed "1 inputs" and the alignment as a Python dict."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ffdesk.cli import main
from ffdesk.runtime.resources import resource_path
from ffdesk.training.store import INDEX_NAME

PHOTO = resource_path("sample", "grace_hopper.jpg")


@pytest.fixture(scope="module")
def noface(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six frames of a moving pattern, no face in them."""
    from ffdesk.media.synth import synth_clip

    clip = tmp_path_factory.mktemp("clips") / "noface.mp4"
    synth_clip(clip, width=160, height=96, fps=25, frames=6)
    return clip


def _extract(inputs: Path, out: Path) -> int:
    return main(["faceset", "extract", "--from", str(inputs), "--out", str(out), "--size", "64", "-q"])


def test_a_clip_with_no_face_is_refused_and_leaves_no_folder(
    noface: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "faces_none"
    assert _extract(noface, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"ffdesk: error: no face found in {noface.resolve()} (6 frames read)"], err
    assert not out.exists()
    mine = tmp_path / "made_by_me"
    mine.mkdir()  # a folder the user made stays, with nothing written in it
    assert _extract(noface, mine) == 2
    assert mine.is_dir() and not any(mine.iterdir())


def test_extending_a_faceset_with_no_new_face_warns_and_leaves_it_as_it_was(
    noface: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    photos = tmp_path / "photos"
    photos.mkdir()
    shutil.copy(PHOTO, photos / "hopper.jpg")
    out = tmp_path / "faces"
    assert _extract(photos, out) == 0
    capsys.readouterr()
    index = (out / INDEX_NAME).read_bytes()
    assert _extract(noface, out) == 0
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"ffdesk: warning: no face found in {noface.resolve()} (6 frames read); {out} left as it was (1 face)"
    ]
    assert "0 faces kept from 6 frames of 1 input" in captured.out
    assert (out / INDEX_NAME).read_bytes() == index


def test_faceset_info_reads_as_prose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    photos = tmp_path / "photos"
    photos.mkdir()
    shutil.copy(PHOTO, photos / "hopper.jpg")
    out = tmp_path / "faces"
    assert _extract(photos, out) == 0
    capsys.readouterr()
    assert main(["faceset", "info", str(out)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"{out}: 1 face from 1 input (1 shard), 64 px crops aligned to the arcface_128 five-point template"
    )
