"""The face record every layer passes around."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ffdesk.types import Points


@dataclass(frozen=True)
class Face:
    """One face found in one image, in that image's pixel coordinates."""

    bbox: tuple[float, float, float, float]
    """x1, y1, x2, y2."""
    score: float
    kps: Points
    """5 x 2 keypoints: right eye, left eye (as seen in the image: smaller x first), nose tip,
    mouth corner with smaller x, mouth corner with larger x (the insightface/arcface order).
    "Smaller x" holds for an upright face; on a turned face the points keep their meaning."""
    landmarks: Points | None = None
    """468 x 3 face-mesh points (x, y in pixels; z relative), when computed."""
    track_id: int | None = None
    embedding: npt.NDArray[np.float32] | None = None
    turn: int = 0
    """Quarter turns (clockwise) away from upright in which the face was found: by the detector
    in a turned copy of the frame, or by the mesh when the detection's own orientation was wrong.
    0 for a face found upright."""

    @property
    def size(self) -> float:
        """The longer side of the box in pixels."""
        x1, y1, x2, y2 = self.bbox
        return max(x2 - x1, y2 - y1)

    @property
    def area(self) -> float:
        x1, y1, x2, y2 = self.bbox
        return max(0.0, x2 - x1) * max(0.0, y2 - y1)
