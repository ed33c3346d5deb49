"""The before/after split's labels: on a dark backing (legible on a bright picture), and always in
the part of the picture in view (at 100% a picture larger than the pane is cut)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QRectF

from ffdesk.gui.models import ClipInfo, SessionModel
from ffdesk.gui.preview_view import PreviewCanvas
from ffdesk.pipeline.preview import PreviewResult


def _canvas(qtbot: Any, width: int, height: int) -> PreviewCanvas:
    """A 400 x 300 pane showing a white `width` x `height` picture, split in the middle."""
    model = SessionModel()
    model.set_clip(ClipInfo(Path("/clips/white.mp4"), width, height, 25.0, 10, 0.4))
    canvas = PreviewCanvas(model)
    qtbot.addWidget(canvas)
    canvas.resize(400, 300)
    canvas.show()
    qtbot.waitExposed(canvas)
    white = np.full((height, width, 3), 255, np.uint8)
    model.set_preview(PreviewResult(0, 0.0, white, white, (), scale=1.0, ms=1.0))
    return canvas


@pytest.mark.parametrize("fit", [True, False], ids=["fit", "100%"])
def test_the_labels_are_in_view_on_a_dark_backing(qtbot: Any, fit: bool) -> None:
    canvas = _canvas(qtbot, 1280, 720)
    canvas.model.set_zoom_fit(fit)
    boxes = canvas.split_labels()
    assert boxes is not None
    pane = QRectF(canvas.rect())
    image = canvas.grab().toImage()
    for box in boxes:
        assert pane.contains(box), box
        corner = image.pixelColor(int(box.left()) + 2, int(box.center().y()))
        assert corner.lightness() < 140, corner.name()  # not white: the backing, over the picture


def test_no_label_without_a_picture_in_view(qtbot: Any) -> None:
    canvas = _canvas(qtbot, 1280, 720)
    canvas.model.set_zoom_fit(False)
    canvas._pan.setX(5000)  # dragged all the way out of the pane
    assert canvas.split_labels() is None
