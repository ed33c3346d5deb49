"""The reference face from the keyboard: R picks the next face of the shown frame left to right,
Shift+R the one before, as a click on the face does; nothing changes on a frame without one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from ffdesk.faces.types import Face
from ffdesk.gui.models import ClipInfo, SessionModel
from ffdesk.pipeline.preview import PreviewResult

CLIP = ClipInfo(path=Path("c.mp4"), width=200, height=100, fps=25.0, frame_count=50, duration_s=2.0)


def _face(x1: float) -> Face:
    return Face(bbox=(x1, 20.0, x1 + 30.0, 70.0), score=0.9, kps=np.zeros((5, 2), np.float32))


def _result(faces: tuple[Face, ...]) -> PreviewResult:
    frame = np.zeros((100, 200, 3), np.uint8)
    return PreviewResult(0, 0.0, frame, frame, faces, scale=1.0, ms=1.0)


# found in the detector's order, not left to right: the middle face, then the right, then the left
FACES = (_face(80.0), _face(150.0), _face(10.0))


def test_r_steps_through_the_faces_left_to_right_and_wraps() -> None:
    m = SessionModel()
    m.set_clip(CLIP)
    assert m.settings.face_selection != "reference"
    m.set_preview(_result(FACES))
    picked = [m.step_reference_face(1) for _ in range(4)]
    assert picked == [2, 0, 1, 2]  # left, middle, right, left again
    assert m.settings.face_selection == "reference"
    assert m.reference_rank() == 0  # jobs name it by its place from the left
    assert [m.step_reference_face(-1) for _ in range(3)] == [1, 0, 2]  # right, middle, left


def test_going_left_first_picks_the_rightmost_face_and_a_frame_without_faces_changes_nothing() -> None:
    m = SessionModel()
    m.set_clip(CLIP)
    m.set_preview(_result(FACES))
    assert m.step_reference_face(-1) == 1
    m.set_preview(_result(()))
    assert m.step_reference_face(1) is None
    assert m.reference_face == 1 and m.settings.face_selection == "reference"


def test_the_keys_pick_the_face_in_the_window_and_the_picture_says_so(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    window.show()
    qtbot.waitExposed(window)
    window.windowHandle().requestActivate()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    s = window.session
    s.set_clip(CLIP)
    canvas = window.preview_view.canvas
    canvas.setFocus()
    qtbot.waitUntil(canvas.hasFocus)
    s.set_preview(_result(FACES))
    QTest.keyClick(canvas, Qt.Key.Key_R)
    assert s.reference_face == 2
    QTest.keyClick(canvas, Qt.Key.Key_R)
    assert s.reference_face == 0
    assert "face 1 chosen" in canvas.accessibleDescription()
    QTest.keyClick(canvas, Qt.Key.Key_R, Qt.KeyboardModifier.ShiftModifier)
    assert s.reference_face == 2
    assert "face 3 chosen" in canvas.accessibleDescription()
