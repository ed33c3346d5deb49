"""The face-mask rows of the controls: which masks, the box's blur and padding, the areas.

FaceFusion's mask settings (`--mask`, `--mask-blur`, `--mask-padding`, `--mask-areas`); the
region mask is the "Region mask" model picker. Each row is a plain widget the controls view
places in its form and notes; `settings_of` and `show` move values between them and `Settings`.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QSpinBox, QWidget

from ffdesk.gui.fitting import FlowLayout
from ffdesk.gui.models import Settings

TYPES = ("box", "occlusion", "area")
"""The masks ticked here (the region mask has its own picker)."""
AREAS = ("upper-face", "lower-face", "mouth")
SIDES = ("top", "right", "bottom", "left")


def _row(boxes: list[QWidget]) -> QWidget:
    """`boxes` left to right, onto more lines in a narrow panel (large text) rather than past its
    edge."""
    row = QWidget()
    layout = FlowLayout(row, spacing=-1)  # (the style's spacing, as a row of boxes has)
    for box in boxes:
        layout.addWidget(box)
    return row


def _names(text: str) -> set[str]:
    return {n.strip() for n in text.split(",") if n.strip()}


class MaskControls(QObject):
    """The mask widgets; `edited` when the user changes one."""

    edited = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.types = {t: QCheckBox(t.capitalize()) for t in TYPES}
        self.types["box"].setToolTip("fade the face out towards the crop's edges (no mask ticked: the box)")
        self.types["occlusion"].setToolTip("keep what covers the face (XSeg, xseg_1 from the models folder)")
        self.types["area"].setToolTip("paste only the face areas ticked below (from the face's landmarks)")
        self.blur = QDoubleSpinBox()
        self.blur.setRange(0.0, 1.0)
        self.blur.setSingleStep(0.05)
        self.blur.setToolTip("how soft the box's edge is, 0-1")
        self.padding = {side: QSpinBox() for side in SIDES}
        for side, spin in self.padding.items():
            spin.setRange(0, 100)
            spin.setPrefix(f"{side[0].upper()} ")
            spin.setSuffix(" %")
            spin.setToolTip(f"the box's {side} edge moved in by this share of the face's crop")
            spin.setAccessibleName(f"Mask padding {side}")  # (the row's label names none of the four)
        self.areas = {a: QCheckBox(a) for a in AREAS}
        for a, box in self.areas.items():
            box.setToolTip(f"the area mask keeps the {a.replace('-', ' ')}")
        self.types_row = _row(list(self.types.values()))
        self.padding_row = _row(list(self.padding.values()))
        self.areas_row = _row(list(self.areas.values()))
        for check in (*self.types.values(), *self.areas.values()):
            check.toggled.connect(self._edited)
        self.blur.valueChanged.connect(self._edited)
        for spin in self.padding.values():
            spin.valueChanged.connect(self._edited)
        self._showing = False

    def rows(self) -> dict[str, QWidget]:
        """The widget of each row, by the `Settings` field (and control) it shows."""
        return {
            "mask_types": self.types_row,
            "mask_blur": self.blur,
            "mask_padding": self.padding_row,
            "mask_areas": self.areas_row,
        }

    def show(self, s: Settings) -> None:
        """Settings → widgets (without `edited`)."""
        self._showing = True
        try:
            chosen = _names(s.mask_types)
            for t, box in self.types.items():
                box.setChecked(t in chosen)
            self.blur.setValue(s.mask_blur)
            for spin, value in zip(self.padding.values(), s.mask_padding, strict=True):
                spin.setValue(value)
            areas = _names(s.mask_areas) or set(AREAS)  # none named: every area
            for a, box in self.areas.items():
                box.setChecked(a in areas)
        finally:
            self._showing = False

    def settings_of(self) -> dict[str, Any]:
        """Widgets → the `Settings` fields they hold."""
        areas = [a for a, box in self.areas.items() if box.isChecked()]
        return {
            "mask_types": ",".join(t for t, box in self.types.items() if box.isChecked()),
            "mask_blur": round(self.blur.value(), 2),
            "mask_padding": tuple(spin.value() for spin in self.padding.values()),
            "mask_areas": "" if len(areas) in (0, len(AREAS)) else ",".join(areas),
        }

    def _edited(self, *_args: object) -> None:
        if not self._showing:
            self.edited.emit()
