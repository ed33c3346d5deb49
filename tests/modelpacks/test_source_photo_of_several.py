"""A source photo of several faces: the render says which one it took (the largest, counted from
the left as `--source-face` counts), with the embedded models and with a pack alike; a further
source photo with no face is refused by both (a pack's render took it silently before)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from ffdesk.cli import main
from ffdesk.media.encode import write_image
from ffdesk.runtime.resources import resource_path
from ffdesk.types import Frame
from tests.faces import photos

from .helpers import FRAMES

TARGET = str(resource_path("sample", "grace_hopper.jpg"))


def _scaled(image: Frame, height: int) -> Frame:
    h, w = image.shape[:2]
    return np.ascontiguousarray(
        cv2.resize(image, (round(w * height / h), height), interpolation=cv2.INTER_AREA)
    )


def group_photo(path: Path, *, big_on_left: bool) -> Path:
    """The astronaut at full height beside Grace Hopper at half, on a grey canvas: the largest
    face is the astronaut's, 0 from the left or 1."""
    big, small = _scaled(photos.astronaut(), 400), _scaled(photos.grace_hopper(), 200)
    padded = np.full((400, small.shape[1], 3), 128, np.uint8)
    padded[100:300] = small
    tiles = [big, padded] if big_on_left else [padded, big]
    write_image(path, np.ascontiguousarray(np.hstack(tiles)))
    return path


def _render(tmp_path: Path, *extra: str) -> int:
    return main(["render", "-t", TARGET, "-o", str(tmp_path / "out.png"), "-q", *extra])


@pytest.mark.parametrize(("big_on_left", "place"), [(True, 0), (False, 1)])
def test_the_embedded_render_says_which_face_of_a_group_photo_it_took(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], big_on_left: bool, place: int
) -> None:
    group = group_photo(tmp_path / "group.png", big_on_left=big_on_left)
    assert _render(tmp_path, "-s", str(group)) == 0
    err = capsys.readouterr().err
    assert (
        f"warning: group.png has 2 faces: took the largest, {place} from the left; "
        "--source-face N picks another" in err
    )
    assert _render(tmp_path, "-s", str(group), "--source-face", str(1 - place)) == 0  # chosen: no word
    assert "group.png has" not in capsys.readouterr().err


def test_a_portrait_gets_no_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _render(tmp_path, "-s", TARGET) == 0
    assert "faces: took the largest" not in capsys.readouterr().err


def test_a_pack_render_says_it_too_and_refuses_a_second_photo_without_a_face(
    ff_pack: Path, face_clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = group_photo(tmp_path / "group.png", big_on_left=False)
    common = ["render", "-t", str(face_clip), "--end", str(FRAMES / 25), "-q", "--no-resume"]
    common += ["--models-dir", str(ff_pack), "--swapper", "inswapper_128", "--encoder", "png"]
    assert main([*common, "-o", str(tmp_path / "a"), "-s", str(group)]) == 0
    assert "group.png has 2 faces: took the largest, 1 from the left" in capsys.readouterr().err
    empty = tmp_path / "landscape.png"
    write_image(empty, photos.background(320, 240))
    assert main([*common, "-o", str(tmp_path / "b"), "-s", TARGET, "-s", str(empty)]) == 2
    assert capsys.readouterr().err.strip().endswith("no face found in landscape.png")
    assert not (tmp_path / "b").exists()
