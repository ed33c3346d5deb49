"""At 200% text the Training and Live tabs need no sideways scrolling: their rows of controls and
figures wrap where the panel is too narrow for one line (and stay on one line where it is not)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSize
from PySide6.QtWidgets import QScrollArea

from tests.gui.test_large_text import ROOM, _with_work


@pytest.mark.parametrize("tab", ["Training", "Live"])
def test_at_200_percent_the_tab_does_not_scroll_sideways(
    window: Any, qtbot: Any, tiny_clip: Path, tmp_path: Path, tab: str
) -> None:
    _with_work(window, qtbot, tiny_clip, tmp_path, size=QSize(ROOM.width() // 2, ROOM.height() // 2))
    dock = window.docks[tab]
    dock.raise_()
    scroll = dock.widget()
    assert isinstance(scroll, QScrollArea)
    qtbot.waitUntil(lambda: scroll.isVisible() and scroll.viewport().width() > 0)
    content = scroll.widget()
    assert content is not None
    need = content.minimumSizeHint().width()
    assert scroll.horizontalScrollBar().maximum() == 0, (
        f"the {tab} tab scrolls sideways: {need} wide in {scroll.viewport().width()}"
    )


def test_with_room_the_live_size_row_is_one_line_and_its_boxes_share_it(window: Any, qtbot: Any) -> None:
    live = window.live_view
    window.show()
    qtbot.waitExposed(window)
    window.docks["Live"].raise_()
    qtbot.waitUntil(live.isVisible)
    row = live.size_box.parentWidget()
    row.setFixedWidth(600)
    row.layout().setGeometry(row.rect())
    size, fps, loop = (w.geometry() for w in (live.size_box, live.fps, live.loop))
    assert max(abs(size.center().y() - r.center().y()) for r in (fps, loop)) < 8
    assert size.right() < fps.left() and fps.right() < loop.left()  # one line, in order
    # the room the three leave is the two boxes', shared, as the row's QHBoxLayout shared it
    assert size.width() > live.size_box.sizeHint().width() and fps.width() > live.fps.sizeHint().width()
    assert loop.width() == live.loop.sizeHint().width()
    assert abs(loop.right() - (row.width() - 1)) <= 1
