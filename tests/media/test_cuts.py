"""Hard cuts found in real footage: the editor's cuts of a real edit, clips cut together from real
shots, and real shots without a cut (a head turning fast, a car crossing the foreground)."""

from __future__ import annotations

import numpy as np
import pytest

from ffdesk.media.cuts import CutDetector, CutSettings, find_cuts
from ffdesk.types import Frame
from tests.media.shot_clips import BIKES_CUTS, CutClip, cut_together, frames_of, mirrored


@pytest.fixture(scope="module")
def carphone() -> list[Frame]:
    return frames_of("carphone_pristine.mp4")


@pytest.fixture(scope="module")
def bikes() -> list[Frame]:
    return frames_of("bikes.mp4")


@pytest.fixture(scope="module")
def bunny() -> list[Frame]:
    return frames_of("bigbuckbunny.mp4")


def _cases(carphone: list[Frame], bikes: list[Frame], bunny: list[Frame]) -> dict[str, CutClip]:
    """Each case: its frames and the true cuts."""
    return {
        "bikes (the editor's cuts)": CutClip(bikes, BIKES_CUTS),
        "carphone, bunny, bikes, carphone mirrored": cut_together(
            [carphone[:50], bunny[:40], bikes[40:75], mirrored(carphone[50:])], (256, 144)
        ),
        "carphone, then mirrored": cut_together([carphone[:60], mirrored(carphone[60:])], (176, 144)),
        "carphone (no cut)": CutClip(carphone, ()),
        "bunny (no cut)": CutClip(bunny, ()),
    }


def test_every_real_cut_is_found_and_nothing_else(
    carphone: list[Frame], bikes: list[Frame], bunny: list[Frame]
) -> None:
    true_positives = found_total = truth_total = 0
    for name, clip in _cases(carphone, bikes, bunny).items():
        found = find_cuts(clip.frames)
        assert found == list(clip.cuts), name
        true_positives += len(set(found) & set(clip.cuts))
        found_total += len(found)
        truth_total += len(clip.cuts)
    precision = true_positives / found_total
    recall = true_positives / truth_total
    print(f"cuts: {truth_total} true, {found_total} found; precision {precision:.2f}, recall {recall:.2f}")
    assert precision == recall == 1.0


def test_a_flash_of_a_few_frames_is_one_cut_not_two(carphone: list[Frame]) -> None:
    frames = list(carphone)
    for i in (60, 61):  # two frames washed out, then the shot goes on
        frames[i] = np.clip(frames[i].astype(np.int16) + 160, 0, 255).astype(np.uint8)
    assert find_cuts(frames) == [60]
    assert find_cuts(frames, CutSettings(min_shot_frames=1)) == [60, 62]


def test_a_restart_is_no_cut_but_a_cut_right_after_it_is(carphone: list[Frame], bikes: list[Frame]) -> None:
    detector = CutDetector()
    assert [detector.is_cut(f) for f in bikes[20:25]] == [False] * 5
    detector.restart()  # as at a jump: the next frame is compared with nothing
    assert not detector.is_cut(bikes[72])
    assert [detector.is_cut(f) for f in bikes[73:79]] == [False, False, False, True, False, False]


def test_a_picture_of_another_size_starts_a_shot(carphone: list[Frame], bikes: list[Frame]) -> None:
    assert find_cuts([*carphone[:10], *bikes[:10]]) == [10]


@pytest.mark.parametrize("bad", [{"threshold": 0.0}, {"min_shot_frames": 0}, {"width": 8}])
def test_bad_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="bad cut settings"):
        CutSettings(**bad)  # type: ignore[arg-type]
