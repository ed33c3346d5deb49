"""A label cut by a narrow window ends in "…" ("1079 m" would read as minutes)."""

from __future__ import annotations

import numpy as np

from ffdesk.gui.fitting import ShrinkingLabel


def _ink_columns(label: ShrinkingLabel) -> int:
    image = label.grab().toImage()
    width, height = image.width(), image.height()
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(height, image.bytesPerLine())[:, : width * 4]
    grey = pixels.reshape(height, width, 4)[..., :3].astype(int).sum(axis=2)
    return int((np.ptp(grey, axis=0) > 60).sum())


def test_a_narrow_label_ends_its_text_in_an_ellipsis(qtbot) -> None:  # type: ignore[no-untyped-def]
    label = ShrinkingLabel("0000 ms")
    qtbot.addWidget(label)
    label.setText("1079 ms")
    label.resize(label.sizeHint())
    label.show()
    assert label.shown_text() == "1079 ms" and label.toolTip() == "1079 ms"
    whole = _ink_columns(label)
    cut = label.fontMetrics().horizontalAdvance("1079 m")
    label.resize(cut, label.height())
    assert label.shown_text().endswith("…") and label.toolTip() == "1079 ms"
    assert 0 < _ink_columns(label) < whole  # drawn, shorter
