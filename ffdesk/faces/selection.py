"""Which of the tracked faces in a frame get swapped: the largest, all, one reference face, or
the people of a face map (each with its own source).

A choice sticks to its track: once a face is chosen, the same track ID stays chosen while it is
in the picture, so two faces of similar size never trade places from frame to frame. With a face
map, each track is judged once, on its first frame, and keeps the person it was taken for.

By reference, one person is in a frame once: the faces seen beside the face taken for the
reference are other people, and none of them is taken for it later (after the reference person
leaves the picture), however close its appearance.
"""

from __future__ import annotations

from collections.abc import Sequence

from ffdesk.faces.appearance import Appearance, appearance_of, distance
from ffdesk.faces.people import Targets
from ffdesk.faces.tracking import largest
from ffdesk.faces.types import Face
from ffdesk.types import FaceSelection, Frame

REFERENCE_MATCH = 0.38
"""Largest appearance distance at which a new track is taken for the reference face. Between the
same person's faces and two people's: one face through real footage's turns and light stays
within 0.34 of its first frame (carphone, 120 frames), while the two bundled portraits sit
0.43-0.45 apart at any size and place (which 0.45 took for one person, so the other was swapped
whenever the reference person was out of the picture)."""


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
        self._others: list[Appearance] = []
        """The faces seen beside the face taken for the reference: other people."""
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
                if self.mode == "reference":
                    self._note_others(image, faces, f)
                return [f]
        if self.mode == "largest":
            best = largest(faces)
            self._chosen = best.track_id if best else None
            return [best] if best else []
        return self._match_reference(image, faces)

    def _match_reference(self, image: Frame, faces: Sequence[Face]) -> list[Face]:
        """The face of this frame taken for the reference (none when no track matches): the
        closest within `REFERENCE_MATCH` that is closer to the reference than to every face seen
        beside it before. Each track is judged once, so the cost stays small: one not taken on the
        frame it is judged is never taken later."""
        assert self.reference is not None
        judged: list[tuple[float, Face, Appearance]] = []
        for f in faces:
            if f.landmarks is None or f.track_id in self._rejected:
                continue
            seen = appearance_of(image, f)
            judged.append((distance(self.reference, seen), f, seen))
        matches = [(d, f, a) for d, f, a in judged if d <= REFERENCE_MATCH and self._nearer_reference(d, a)]
        best = min(matches, key=lambda m: m[0]) if matches else None
        for _, f, seen in judged:
            if f.track_id is None or (best is not None and f is best[1]):
                continue
            self._rejected.add(f.track_id)
            if best is not None:  # in the same frame as the reference: someone else
                self._others.append(seen)
        if best is None:
            return []
        self._chosen = best[1].track_id
        return [best[1]]

    def _note_others(self, image: Frame, faces: Sequence[Face], chosen: Face) -> None:
        """Faces that come into the picture beside the reference face are other people: judged
        once, as they come, and never taken for it later."""
        for f in faces:
            if f is chosen or f.track_id is None or f.track_id in self._rejected or f.landmarks is None:
                continue
            self._rejected.add(f.track_id)
            self._others.append(appearance_of(image, f))

    def _nearer_reference(self, d: float, seen: Appearance) -> bool:
        """Whether a face `d` from the reference is nearer to it than to every other person seen."""
        return all(d < distance(other, seen) for other in self._others)
