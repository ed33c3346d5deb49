"""FaceFusion's expression restorer: a redrawn face takes back the expression of the face that
was there before (LivePortrait, `ffdesk.swap.live_portrait`).

Per face (FaceFusion's expression_restorer restore_expression / apply_restore): the face is cut
from the original frame and from the frame as drawn so far with the same five points, aligned to
arcface_128 at 512 px (`TEMPLATE`, `live_portrait.CROP_SIZE`). The motion extractor reads both
crops; the drawn crop's expression offsets are replaced by the original's where the chosen areas
say (`restrict_areas`: the upper face, the lower face; five keypoints always keep the drawn
face's), mixed with the drawn ones by the factor (0-100 mapped onto 0-1.2, `mix`), clipped, and
placed with the drawn crop's own pose (`restore_points`). The generator then draws the drawn
crop's appearance volume with its keypoints moved to the restored ones; FaceFusion pastes the
512-px result under the box mask (the job's blur, no padding), the occlusion mask too when the
render has one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ffdesk.swap import live_portrait as lp

TEMPLATE = "arcface_128"
"""The crop's alignment (FaceFusion's model 'template')."""
DEFAULT_FACTOR = 80
"""FaceFusion's --expression-restorer-factor default (percent)."""
FACTOR_TOP = 1.2
"""The mix a factor of 100 gives (FaceFusion maps 0-100 onto 0-1.2)."""
AREA_KEYPOINTS: dict[str, tuple[int, ...]] = {
    "upper-face": (1, 2, 6, 10, 11, 12, 13, 15, 16),
    "lower-face": (3, 7, 14, 17, 18, 19, 20),
}
"""The keypoints whose expression each area restores (FaceFusion's restrict_expression_areas)."""
KEPT_KEYPOINTS = (0, 4, 5, 8, 9)
"""Keypoints that always keep the drawn face's expression."""
AREAS = tuple(AREA_KEYPOINTS)
"""FaceFusion's areas, its default being both."""


def mix(factor: int) -> float:
    """The weight of the original expression for a factor 0-100 (0 to 1.2, linearly)."""
    return float(np.interp(float(factor), [0.0, 100.0], [0.0, FACTOR_TOP]))


def restrict_areas(drawn: lp.F32, original: lp.F32, areas: Sequence[str] = ()) -> lp.F32:
    """`original`'s expression ([1, 21, 3]) with the keypoints of the areas not chosen, and the
    always-kept ones, taken from `drawn`. `areas` empty: both areas."""
    chosen = set(areas or AREAS)
    out = np.array(original, np.float32, copy=True)
    keep = list(KEPT_KEYPOINTS)
    for area, points in AREA_KEYPOINTS.items():
        if area not in chosen:
            keep += points
    out[:, keep] = np.asarray(drawn, np.float32)[:, keep]
    return out


def restore_points(
    drawn: lp.Motion, original_expression: lp.F32, factor: int = DEFAULT_FACTOR, areas: Sequence[str] = ()
) -> tuple[lp.F32, lp.F32]:
    """The generator's keypoints ('source', 'target') for a drawn face whose original face had
    `original_expression`: the restored expression and the drawn one, both placed with the
    drawn face's pose."""
    weight = np.float32(mix(factor))
    wanted = restrict_areas(drawn.expression, original_expression, areas)
    wanted = wanted * weight + drawn.expression * (np.float32(1.0) - weight)
    turn = lp.rotation(drawn.pitch, drawn.yaw, drawn.roll)
    source = lp.place_points(drawn, turn, lp.limit_expression(wanted))
    target = lp.place_points(drawn, turn, drawn.expression)
    return source, target
