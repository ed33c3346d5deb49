"""Dropping files on the window: a visible hint while they hover, and always a copy, never a move."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from ffdesk.gui.main_window import drop_hint

MOVE_OR_COPY = Qt.DropAction.MoveAction | Qt.DropAction.CopyAction


def _mime(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def test_the_hint_says_what_the_drop_does() -> None:
    assert (
        drop_hint([Path("a.mp4"), Path("b.jpg"), Path("c.png")])
        == "Drop to open a.mp4 and add 2 source photos"
    )
    assert drop_hint([Path("face.jpg")]) == "Drop to add 1 source photo"
    assert drop_hint([]) == ""


def test_a_proposed_move_is_taken_as_a_copy(
    window: Any, qtbot: Any, tiny_clip: Path, face_photo: Path
) -> None:
    mime = _mime(tiny_clip, face_photo)
    enter = QDragEnterEvent(
        QPoint(50, 50), MOVE_OR_COPY, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    enter.setDropAction(Qt.DropAction.MoveAction)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted() and enter.dropAction() == Qt.DropAction.CopyAction
    assert window.preview_view.canvas.drop_hint == "Drop to open tiny.mp4 and add 1 source photo"
    QApplication.sendEvent(window, QDragLeaveEvent())
    assert window.preview_view.canvas.drop_hint == ""

    drop = QDropEvent(
        QPointF(50, 50), MOVE_OR_COPY, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    drop.setDropAction(Qt.DropAction.MoveAction)
    window.dropEvent(drop)  # Qt routes a drop only to the target of a real drag's enter
    assert drop.isAccepted() and drop.dropAction() == Qt.DropAction.CopyAction
    assert window.session.clip is not None and window.session.clip.path == tiny_clip.resolve()
    assert [s.path for s in window.session.sources] == [face_photo.resolve()]
    assert tiny_clip.is_file() and face_photo.is_file()
    assert window.preview_view.canvas.drop_hint == ""


def test_text_without_files_is_not_taken(window: Any) -> None:
    mime = QMimeData()
    mime.setText("hello")
    enter = QDragEnterEvent(
        QPoint(5, 5), MOVE_OR_COPY, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(window, enter)
    assert not enter.isAccepted()
    assert window.preview_view.canvas.drop_hint == ""
