"""Which of the tracked faces in a frame get swapped: the largest, all, or one reference face.

A choice sticks to its track: once a face is chosen, the same track ID stays chosen while it is
in the picture, so two faces of similar size never trade places from frame to frame.
"""

from __future__ import annotations

from collections.abc import Sequence

from ffdesk.faces.appearance import Appearance, appearance_of, distance
from ffdesk.faces.tracking import largest
from ffdesk.faces.types import Face
from ffdesk.types import FaceSelection, Frame

REFERENCE_MATCH = 0.45
"""Largest appearance distance at which a new track is taken for the reference face."""


class FaceSelector:
    """Picks the faces to swap, frame after frame (in order; not thread-safe)."""

    def __init__(self, mode: FaceSelection = "largest", reference: Appearance | None = None) -> None:
        if mode == "reference" and reference is None:
            raise ValueError("reference selection needs a reference appearance")
        self.mode = mode
        self.reference = reference
        self._chosen: int | None = None
        self._rejected: set[int] = set()

    def select(self, image: Frame, faces: Sequence[Face]) -> list[Face]:
        """The faces of this frame to swap."""
        if self.mode == "all" or not faces:
            return list(faces)
        for f in faces:
            if f.track_id is not None and f.track_id == self._chosen:
                return [f]
        if self.mode == "largest":
            best = largest(faces)
            self._chosen = best.track_id if best else None
            return [best] if best else []
        return self._match_reference(image, faces)

    def _match_reference(self, image: Frame, faces: Sequence[Face]) -> list[Face]:
        assert self.reference is not None
        best: tuple[float, Face] | None = None
        for f in faces:
            if f.landmarks is None or f.track_id in self._rejected:
                continue
            d = distance(self.reference, appearance_of(image, f))
            if d <= REFERENCE_MATCH and (best is None or d < best[0]):
                best = (d, f)
            elif d > REFERENCE_MATCH and f.track_id is not None:
                self._rejected.add(f.track_id)  # judged once per track, so the cost stays small
        if best is None:
            return []
        self._chosen = best[1].track_id
        return [best[1]]
