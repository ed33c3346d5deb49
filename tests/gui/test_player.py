"""A render's output shown as it is (not swapped again with the loaded sources), and what a new
clip resets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def test_the_player_shows_the_file_unprocessed(
    window: Any, qtbot: Any, tiny_clip: Path, face_photo: Path
) -> None:
    window.add_source(face_photo)
    qtbot.waitUntil(lambda: not window.session.sources[0].pending, timeout=30000)
    assert window.play_file(tiny_clip)
    qtbot.waitUntil(lambda: window.session.preview is not None, timeout=30000)
    result = window.session.preview
    assert result.stage_ms == {}  # no stage ran: nothing swapped
    assert np.array_equal(result.processed, result.original)
    assert window.windowTitle() == "ffdesk — tiny.mp4 (player)"
    assert not window.preview_view.player_label.isHidden()
    assert not window.face_scanner.running

    assert window.open_clip(tiny_clip)  # opened to edit: the sources apply again
    qtbot.waitUntil(
        lambda: window.session.preview is not None and window.session.preview.stage_ms != {}, timeout=30000
    )
    assert window.windowTitle() == "ffdesk — tiny.mp4"
    assert window.preview_view.player_label.isHidden()


def test_a_reference_face_does_not_carry_over_to_the_next_clip(window: Any, tiny_clip: Path) -> None:
    assert window.open_clip(tiny_clip)
    window.session.set_reference_face(0)
    assert window.session.settings.face_selection == "reference"
    assert window.open_clip(tiny_clip)
    assert window.session.settings.face_selection == "largest"
    assert window.session.reference_face is None
    assert any("back to the largest" in e.text for e in window.status.entries)
