"""Which of the tracked faces in a frame get swapped: the largest, all, one reference face, or
the people of a face map (each with its own source).

A choice sticks to its track: once a face is chosen, the same track ID stays chosen while it is
in the picture, so two faces of similar size never trade places from frame to frame. With a face
map, each track is judged once, on its first frame, and keeps the person it was taken for.
"""

from __future__ import annotations

from collections.abc import Sequence

from ffdesk.faces.appearance import Appearance, appearance_of, distance
from ffdesk.faces.people import Targets
from ffdesk.faces.tracking import largest
from ffdesk.faces.types import Face
from ffdesk.types import FaceSelection, Frame

REFERENCE_MATCH = 0.45
"""Largest appearance distance at which a new track is taken for the reference face."""


class FaceSelector:
    """Picks the faces to swap, frame after frame (in order; not thread-safe)."""

    def __init__(
        self,
        mode: FaceSelection = "largest",
        reference: Appearance | None = None,
        people: Targets | None = None,
    ) -> None:
        """`people`: the face map's people; when given, they alone are swapped (`mode` aside)."""
        if mode == "reference" and reference is None:
            raise ValueError("reference selection needs a reference appearance")
        self.mode = mode
        self.reference = reference
        self.people = people
        self._chosen: int | None = None
        self._rejected: set[int] = set()
        self._person_of: dict[int, int | None] = {}

    def pick(self, image: Frame, faces: Sequence[Face]) -> list[tuple[Face, int]]:
        """The faces of this frame to swap, each with its face-map entry (0 without a map)."""
        if self.people is None:
            return [(f, 0) for f in self.select(image, faces)]
        unknown = [f for f in faces if f.track_id is None or f.track_id not in self._person_of]
        found = dict(zip(map(id, unknown), self.people.match(image, unknown), strict=True))
        picked = []
        for f in faces:
            if f.track_id is not None and f.track_id in self._person_of:
                person = self._person_of[f.track_id]
            else:
                person = found[id(f)]
                if f.track_id is not None and f.landmarks is not None:
                    self._person_of[f.track_id] = person
            if person is not None:
                picked.append((f, person))
        return picked

    def select(self, image: Frame, faces: Sequence[Face]) -> list[Face]:
        """The faces of this frame to swap."""
        if self.people is not None:
            return [f for f, _ in self.pick(image, faces)]
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
