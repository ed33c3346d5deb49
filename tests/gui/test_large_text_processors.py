"""At 200% text the Processors panel needs no sideways scrolling: each processor's model list
goes under its name where the panel is too narrow for both (and beside it where it is not)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QScrollArea

from tests.gui.test_large_text import ROOM, _with_work


def test_at_200_percent_the_processors_panel_does_not_scroll_sideways(
    window: Any, qtbot: Any, tiny_clip: Path, tmp_path: Path
) -> None:
    _with_work(window, qtbot, tiny_clip, tmp_path, size=QSize(ROOM.width() // 2, ROOM.height() // 2))
    dock = window.docks["Processors"]
    dock.raise_()
    scroll = dock.widget().findChild(QScrollArea) or dock.widget()
    assert isinstance(scroll, QScrollArea)
    qtbot.waitUntil(lambda: scroll.viewport().width() > 0)
    assert scroll.horizontalScrollBar().maximum() == 0, "the processors scroll sideways"
    from ffdesk.gui.processor_controls import ProcessorBox

    shown = [b for b in dock.widget().findChildren(ProcessorBox) if b.isVisible()]
    assert shown
    for box in shown:  # the model list is under the name, whole, within the box
        assert box.model.geometry().top() > box.on.geometry().top()
        assert box.model.width() >= box.model.minimumSizeHint().width()
        assert box.contentsRect().contains(box.model.geometry().translated(box.model.parentWidget().pos()))


def test_with_room_the_model_list_stays_beside_the_name(window: Any, qtbot: Any) -> None:
    from ffdesk.gui.processor_controls import ProcessorBox

    window.show()
    qtbot.waitExposed(window)
    box = window.docks["Processors"].widget().findChild(ProcessorBox)
    box.resize(600, box.height())
    box.setFixedWidth(600)
    qtbot.waitUntil(lambda: box.width() == 600)
    header = box.model.parentWidget()
    header.layout().setGeometry(header.rect())
    name, models = box.on.geometry(), box.model.geometry()
    assert models.left() > name.right()  # on the same line, to its right
    assert models.top() <= name.bottom() and name.top() <= models.bottom()
