"""Render controls: mode, precision, batch, memory budget with resident models, models, faces, output."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import get_args

from PySide6.QtCore import QObject, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QWidget,
)

from ffdesk.gui.models import ResidencyModel, SessionModel
from ffdesk.types import VIDEO_PRESETS, EncoderName, FaceSelection, Mode, Precision
from ffdesk.units import format_bytes

MODEL_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f")
MODEL_KINDS = ("swapper", "recognizer", "detector", "enhancer")
EMBEDDED = "embedded (default)"


def colour_for(index: int) -> QColor:
    return QColor(MODEL_COLOURS[index % len(MODEL_COLOURS)])


def usable_models_in(models_dir: Path | None) -> dict[str, list[str]]:
    """Catalog models of each kind whose file in the models folder passes verification (its
    contract, and its `.hash` when it has one); none without a folder. Reads every file: call
    it off the GUI thread."""
    out: dict[str, list[str]] = {k: [] for k in MODEL_KINDS}
    if models_dir is None:
        return out
    try:
        from ffdesk.runtime import catalog as cat
        from ffdesk.runtime.files import usable_models

        found = usable_models(cat.load_catalog(), models_dir)
    except Exception:  # noqa: BLE001 - an unreadable folder or catalog means only the embedded models
        return out
    for kind in out:
        out[kind] = sorted(found.get(kind, []))
    return out


class ModelFolderScan(QObject):
    """Verifies the models folder on a plain thread and hands the usable models to the GUI thread
    (`done`, queued because this object lives on the GUI thread)."""

    done = Signal(object)
    """dict[str, list[str]]: usable catalog names by kind."""

    def __init__(self, models_dir: Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread = threading.Thread(
            target=self._run, args=(models_dir,), name="ffdesk-model-scan", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self, models_dir: Path | None) -> None:
        self.done.emit(usable_models_in(models_dir))

    def wait(self, timeout: float | None = None) -> None:
        """Let a scan in flight finish (its result is then dropped if nobody listens)."""
        if self._thread.is_alive():
            self._thread.join(timeout)


class BudgetBar(QWidget):
    """A memory-budget slider drawn over the resident models as stacked bars.

    The bar spans 0..`maximum_mb`; coloured segments are the models resident now (from a
    `ResidencyModel`); the white handle is the budget. Press or drag to set it.
    """

    valueChanged = Signal(int)

    def __init__(self, residency: ResidencyModel, maximum_mb: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.residency = residency
        self.maximum_mb = max(1, maximum_mb)
        self.value_mb = 0
        self.setMinimumSize(160, 30)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setToolTip("Memory budget for models; coloured bars are the models resident now")
        residency.changed.connect(self._on_residency)

    def _on_residency(self) -> None:
        self.setToolTip(
            "\n".join(f"{n}: {format_bytes(b)}" for n, b in self.residency.models) or "no model resident"
        )
        self.update()

    def set_value(self, mb: int) -> None:
        mb = max(0, min(int(mb), self.maximum_mb))
        if mb != self.value_mb:
            self.value_mb = mb
            self.update()
            self.valueChanged.emit(mb)

    def _x(self, mb: float) -> float:
        return 2 + (self.width() - 4) * mb / self.maximum_mb

    def segments(self) -> list[tuple[str, QRectF]]:
        """(model, rectangle) of each resident model's bar, left to right."""
        out, start = [], 0.0
        for name, size in self.residency.models:
            mb = size / 2**20
            out.append((name, QRectF(self._x(start), 6, self._x(start + mb) - self._x(start), 18)))
            start += mb
        return out

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        p.fillRect(QRectF(2, 6, self.width() - 4, 18), QColor(55, 55, 62))
        for i, (_name, rect) in enumerate(self.segments()):
            p.fillRect(rect, colour_for(i))
        if self.value_mb == 0 and not self.residency.models:
            p.setPen(QColor(150, 150, 160))
            track = QRectF(2, 6, self.width() - 4, 18)
            p.drawText(track, Qt.AlignmentFlag.AlignCenter, "click to set a budget")
        if self.value_mb > 0:
            x = self._x(self.value_mb)
            p.fillRect(QRectF(x, 6, self.width() - 2 - x, 18), QColor(0, 0, 0, 110))
            p.setPen(QPen(QColor(255, 255, 255), 3))
            p.drawLine(int(x), 2, int(x), 28)
        p.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        self._set_from(event.position().x())

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._set_from(event.position().x())

    def _set_from(self, x: float) -> None:
        frac = (x - 2) / max(1.0, self.width() - 4)
        self.set_value(round(max(0.0, min(1.0, frac)) * self.maximum_mb / 64) * 64)


def _fill_models(combo: QComboBox, kind: str, names: list[str], *, checked: bool) -> None:
    """The picker of one model kind: the embedded default (no enhancer) and then `names`;
    `checked`: whether the models folder has been verified yet."""
    combo.clear()
    combo.addItems([EMBEDDED if kind != "enhancer" else "none", *names])
    combo.setEnabled(bool(names))
    if not checked:
        combo.setToolTip("checking the models folder…")
    elif names:
        combo.setToolTip(f"{kind} models in the models folder that pass verification")
    else:
        combo.setToolTip(f"no {kind} model in the models folder passes verification")


def _combo(choices: tuple[str, ...] | list[str]) -> QComboBox:
    c = QComboBox()
    c.addItems(list(choices))
    return c


class ControlsView(QWidget):
    """Widgets bound to `SessionModel.settings` both ways."""

    def __init__(
        self,
        model: SessionModel,
        residency: ResidencyModel,
        *,
        memory_total_mb: int,
        models: dict[str, list[str]] | None = None,
        models_dir: Path | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """`models`: the pickers' choices by kind; when not given, the models folder `models_dir`
        (the runtime environment's) is verified in the background and the pickers offer only what
        passes, staying at the embedded models until then."""
        super().__init__(parent)
        self.model = model
        self._syncing = False
        self._models_known = models is not None
        self.mode = _combo(get_args(Mode))
        self.precision = _combo(get_args(Precision))
        self.batch = QSpinBox()
        self.batch.setRange(1, 64)
        self.budget = BudgetBar(residency, memory_total_mb)
        self.budget_label = QLabel()
        self.budget_label.setMinimumWidth(70)
        self.budget_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.face_selection = _combo(get_args(FaceSelection))
        self.encoder = _combo(get_args(EncoderName))
        self.quality = QSpinBox()
        self.quality.setRange(0, 100)
        self.video_preset = _combo(("auto", *VIDEO_PRESETS))
        self.video_preset.setToolTip(
            "H.264/H.265 speed: auto is medium for final renders, veryfast for previews; "
            "faster presets make bigger files"
        )
        self.enhancer_weight = QDoubleSpinBox()
        self.enhancer_weight.setRange(0.0, 1.0)
        self.enhancer_weight.setSingleStep(0.05)
        self.enhancer_weight.setToolTip("CodeFormer's fidelity weight: 0 restores most, 1 keeps most")
        self.enhancer_blend = QSpinBox()
        self.enhancer_blend.setRange(0, 100)
        self.enhancer_blend.setSuffix(" %")
        self.enhancer_blend.setToolTip("how much of the enhanced face is pasted over the swapped one")
        self.mask_regions = QLineEdit()
        self.mask_regions.setPlaceholderText("every region")
        self.mask_regions.setToolTip("face-parser regions the region mask keeps, e.g. skin,nose,upper-lip")
        self.output_dir = QLineEdit()
        self.output_dir.setPlaceholderText("beside the clip")
        self.model_choice: dict[str, QComboBox] = {}
        present = models if models is not None else {}
        form = QFormLayout(self)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Mode", self.mode)
        form.addRow("Precision", self.precision)
        form.addRow("Batch", self.batch)
        budget_row = QHBoxLayout()
        budget_row.addWidget(self.budget, 1)
        budget_row.addWidget(self.budget_label)
        form.addRow("Memory budget", budget_row)
        for kind in MODEL_KINDS:
            combo = QComboBox()
            _fill_models(combo, kind, present.get(kind, []), checked=self._models_known)
            self.model_choice[kind] = combo
            form.addRow(kind.capitalize(), combo)
            combo.currentIndexChanged.connect(self._push)
        form.addRow("Enhancer weight", self.enhancer_weight)
        form.addRow("Enhancer blend", self.enhancer_blend)
        form.addRow("Mask regions", self.mask_regions)
        form.addRow("Faces", self.face_selection)
        form.addRow("Output format", self.encoder)
        form.addRow("Quality", self.quality)
        form.addRow("Encoder speed", self.video_preset)
        self.browse = QPushButton("…")
        self.browse.setFixedWidth(30)
        out_row = QHBoxLayout()
        out_row.addWidget(self.output_dir, 1)
        out_row.addWidget(self.browse)
        form.addRow("Output folder", out_row)
        self.browse.clicked.connect(self._browse)
        for c in (self.mode, self.precision, self.face_selection, self.encoder, self.video_preset):
            c.currentIndexChanged.connect(self._push)
        for s in (self.batch, self.quality, self.enhancer_blend, self.enhancer_weight):
            s.valueChanged.connect(self._push)
        self.mask_regions.editingFinished.connect(self._push)
        self.budget.valueChanged.connect(self._push)
        self.output_dir.editingFinished.connect(self._push)
        model.settingsChanged.connect(self.sync)
        self.sync()
        self.scan: ModelFolderScan | None = None
        if models is None:
            self.scan = ModelFolderScan(models_dir, self)
            self.scan.done.connect(self.set_models)
            self.scan.start()

    def set_models(self, models: dict[str, list[str]]) -> None:
        """Offer exactly these models (by kind) in the pickers; the settings' choices are kept."""
        self._syncing = True
        try:
            for kind, combo in self.model_choice.items():
                _fill_models(combo, kind, models.get(kind, []), checked=True)
        finally:
            self._syncing = False
        self._models_known = True
        self.sync()
        self._push()  # a saved choice whose file is gone or fails verification is not kept

    def stop(self) -> None:
        """Wait for a models-folder scan still in flight (window shutdown)."""
        if self.scan is not None:
            self.scan.wait()

    def sync(self) -> None:
        """Model → widgets."""
        s = self.model.settings
        self._syncing = True
        try:
            self.mode.setCurrentText(s.mode)
            self.precision.setCurrentText(s.precision)
            self.batch.setValue(s.batch)
            self.budget.set_value(s.memory_budget_mb)
            self.budget_label.setText(f"{s.memory_budget_mb} MiB" if s.memory_budget_mb else "no limit")
            self.face_selection.setCurrentText(s.face_selection)
            self.encoder.setCurrentText(s.encoder)
            self.quality.setValue(s.quality)
            self.video_preset.setCurrentText(s.video_preset)
            self.enhancer_weight.setValue(s.enhancer_weight)
            self.enhancer_blend.setValue(s.enhancer_blend)
            if self.mask_regions.text() != s.mask_regions:
                self.mask_regions.setText(s.mask_regions)
            if self.output_dir.text() != s.output_dir:
                self.output_dir.setText(s.output_dir)
            for kind, combo in self.model_choice.items():
                name = getattr(s, kind)
                idx = combo.findText(name) if name else 0
                combo.setCurrentIndex(max(0, idx))
        finally:
            self._syncing = False

    def _push(self, *_args: object) -> None:
        """Widgets → model."""
        if self._syncing:
            return
        # Until the models folder is verified the pickers cannot show the saved choices: keep them.
        models = {
            kind: (combo.currentText() if combo.currentIndex() > 0 else "")
            for kind, combo in self.model_choice.items()
            if self._models_known
        }
        self.model.update_settings(
            mode=self.mode.currentText(),
            precision=self.precision.currentText(),
            batch=self.batch.value(),
            memory_budget_mb=self.budget.value_mb,
            face_selection=self.face_selection.currentText(),
            encoder=self.encoder.currentText(),
            quality=self.quality.value(),
            video_preset=self.video_preset.currentText(),
            enhancer_weight=round(self.enhancer_weight.value(), 2),
            enhancer_blend=self.enhancer_blend.value(),
            mask_regions=self.mask_regions.text().strip(),
            output_dir=self.output_dir.text().strip(),
            **models,
        )

    def _browse(self) -> None:
        from PySide6.QtWidgets import QFileDialog

        folder = QFileDialog.getExistingDirectory(self, "Output folder", self.output_dir.text())
        if folder:
            self.output_dir.setText(folder)
            self._push()
