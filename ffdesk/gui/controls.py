"""Render controls: mode, precision, batch, memory budget with resident models, models, faces, output.

Controls the chosen swap does not read (`ffdesk.gui.applies`) are disabled, with the reason in a
note under them; things the swap ignores that no control shows (extra source photos) are said in
the notes above the form.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from PySide6.QtCore import QEvent, QObject, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen, QResizeEvent, QValidator
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ffdesk.errors import UserError
from ffdesk.gui.accessible import add_row, on_window
from ffdesk.gui.applies import Applicability, Control, ModelFacts, what_applies
from ffdesk.gui.budget_need import EMBEDDED_MODELS, BudgetNeed
from ffdesk.gui.mask_controls import MaskControls
from ffdesk.gui.models import ClipInfo, ResidencyModel, SessionModel
from ffdesk.gui.processors import PROCESSOR_KINDS, usable_processor_models
from ffdesk.gui.wording import in_controls_words
from ffdesk.pipeline.job import MATTES
from ffdesk.types import VIDEO_PRESETS, EncoderName, FaceSelection, Mode, Precision
from ffdesk.units import format_bytes
from ffdesk.userpath import not_a_file

MODEL_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f")
MODEL_KINDS: tuple[Control, ...] = ("swapper", "recognizer", "detector", "enhancer", "parser")
"""The model pickers, by catalog kind (each a `Settings` field of the same name)."""
PICKER_LABELS = {"parser": "Region mask"}
EMBEDDED = "embedded (default)"
NOTE_COLOUR = "#8a6d3b"
"""The notes' text (darkened where the window's background needs it to stay legible)."""
NEED_COLOUR = "#edc948"
"""The budget bar's mark at what the chosen models need."""
SHORT_COLOUR = "#e15759"
"""The budget bar's handle below that need."""
FOLDER_MENU = "File > Models folder…"
MIN_WIDTH = 220
"""The narrowest the Controls panel gets (a small screen, large text): its fields go under their
labels there, and the rows of boxes onto more lines; what is still wider scrolls sideways."""
BAR_WIDTH = 160
"""The budget bar's width beside its number where the panel has room."""
HINT = "click to set a budget"
SHORT_HINT = "set a budget"
"""What a budget bar too narrow for `HINT` says (a narrow panel, large text)."""
BAR_LEAST = 90
"""The narrowest the budget bar gets where its `SHORT_HINT` is wider (large text)."""


def colour_for(index: int) -> QColor:
    return QColor(MODEL_COLOURS[index % len(MODEL_COLOURS)])


@dataclass(frozen=True)
class FolderScan:
    """What a models folder offers: the usable catalog models by kind, and which of the swapper
    values asked about name a model made by `ffdesk train`."""

    folder: Path | None
    models: dict[str, list[str]] = field(default_factory=dict)
    trained: frozenset[str] = frozenset()


def usable_models_in(models_dir: Path | None) -> dict[str, list[str]]:
    """Catalog models of each picker's kind whose file in the models folder passes verification
    (its contract, and its `.hash` when it has one), and the processors' models it can run
    (`usable_processor_models`); none without a folder. Reads every file: call it off the GUI
    thread."""
    out: dict[str, list[str]] = {k: [] for k in (*MODEL_KINDS, *PROCESSOR_KINDS)}
    if models_dir is None:
        return out
    try:
        from ffdesk.runtime import catalog as cat
        from ffdesk.runtime.files import usable_models

        catalog = cat.load_catalog()
        found = usable_models(catalog, models_dir)
        processors = usable_processor_models(catalog, found, models_dir)
    except Exception:  # noqa: BLE001 - an unreadable folder or catalog means only the embedded models
        return out
    for kind in MODEL_KINDS:
        out[kind] = sorted(found.get(kind, []))
    out.update(processors)
    return out


def trained_among(values: tuple[str, ...], models_dir: Path | None) -> frozenset[str]:
    """The swapper values that name a model made by `ffdesk train` (reads their contracts: call
    it off the GUI thread)."""
    from ffdesk.pipeline.stages.trained import is_trained_swapper

    found = set()
    for value in values:
        try:
            if is_trained_swapper(value, models_dir):
                found.add(value)
        except Exception:  # noqa: BLE001 - a damaged contract: not offered; a render says why
            continue
    return frozenset(found)


def trained_label(value: str) -> str:
    """How the swapper picker names a trained model: its run folder's name."""
    path = Path(value)
    return f"trained: {path.parent.name if path.suffix.lower() == '.onnx' else path.name}"


class ModelFolderScan(QObject):
    """Verifies the models folder on a plain thread and hands a `FolderScan` to the GUI thread
    (`done`, queued because this object lives on the GUI thread)."""

    done = Signal(object)
    """FolderScan: the usable models by kind and the trained swappers among those asked about."""

    def __init__(
        self, models_dir: Path | None = None, swappers: tuple[str, ...] = (), parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self._thread = threading.Thread(
            target=self._run, args=(models_dir, swappers), name="ffdesk-model-scan", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self, models_dir: Path | None, swappers: tuple[str, ...]) -> None:
        self.done.emit(
            FolderScan(models_dir, usable_models_in(models_dir), trained_among(swappers, models_dir))
        )

    def wait(self, timeout: float | None = None) -> None:
        """Let a scan in flight finish (its result is then dropped if nobody listens)."""
        if self._thread.is_alive():
            self._thread.join(timeout)


BUDGET_TIP = 'Memory budget for models, in MiB or GiB ("2 GiB"); "no limit" at 0'
_BUDGET_TEXT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*(g|gb|gib|m|mb|mib)?\s*$", re.IGNORECASE)


def parse_budget_mb(text: str) -> int | None:
    """A budget as typed: "2048", "2048 MiB", "2 GiB", "1.5G" (MiB without a unit); "no limit"
    and "0" are 0; None for anything else."""
    if text.strip().lower() in ("no limit", "none", "off"):
        return 0
    m = _BUDGET_TEXT.match(text)
    if m is None:
        return None
    number, unit = float(m.group(1)), (m.group(2) or "m").lower()
    return round(number * 1024) if unit.startswith("g") else round(number)


class BudgetInput(QSpinBox):
    """The memory budget typed in MiB (or GiB: "2 GiB", "1.5G"); 0 shows as "no limit"."""

    def __init__(self, maximum_mb: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRange(0, max(1, maximum_mb))
        self.setSingleStep(256)
        self.setSpecialValueText("no limit")
        self.setKeyboardTracking(False)  # one change when typing ends, not one per digit
        self.setAccelerated(True)
        self.setToolTip(BUDGET_TIP)

    def textFromValue(self, value: int) -> str:  # noqa: N802 - Qt override
        return f"{value} MiB"  # a unit the user can type over (a suffix would stay behind the typing)

    def valueFromText(self, text: str) -> int:  # noqa: N802 - Qt override
        mb = parse_budget_mb(text)
        return self.value() if mb is None else min(mb, self.maximum())

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        if parse_budget_mb(text) is not None:
            return QValidator.State.Acceptable, text, pos
        return QValidator.State.Intermediate, text, pos


class BudgetBar(QWidget):
    """A memory-budget slider drawn over the resident models as stacked bars.

    The bar spans 0..`maximum_mb`; coloured segments are the models resident now (from a
    `ResidencyModel`); the white handle is the budget, red where it is below what the chosen
    models need (`set_need`: a dashed mark at that amount). Press or drag to set it.
    """

    valueChanged = Signal(int)

    def __init__(self, residency: ResidencyModel, maximum_mb: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.residency = residency
        self.maximum_mb = max(1, maximum_mb)
        self.value_mb = 0
        self.need_mb: float | None = None
        """What the chosen models need (None: not known, or nothing counted)."""
        self._need_text = ""
        self.setMinimumSize(min(self.fontMetrics().horizontalAdvance(SHORT_HINT) + 12, BAR_LEAST), 30)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setToolTip(
            "Memory budget; coloured bars are the models resident now "
            "(on the CPU also the frames renders hold)"
        )
        self.setAccessibleName("Memory budget and resident models")
        residency.changed.connect(self._on_residency)
        self._describe()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """As wide as `BAR_WIDTH` where there is room (narrower, down to its `SHORT_HINT` or
        `BAR_LEAST`, in a narrow panel: large text)."""
        return QSize(BAR_WIDTH, 30)

    def hint_text(self) -> str:
        """What the bar says while no budget is set: `HINT`, or `SHORT_HINT` where that does not
        fit, or nothing where neither does (its tooltip and what a screen reader says stay)."""
        room = self.width() - 12
        return next((t for t in (HINT, SHORT_HINT) if self.fontMetrics().horizontalAdvance(t) <= room), "")

    def _on_residency(self) -> None:
        models = self.residency.models
        resident = "\n".join(f"{n}: {format_bytes(b)}" for n, b in models) or "no model resident"
        self.setToolTip("\n".join(t for t in (resident, self._need_text) if t))
        self._describe()
        self.update()

    def _describe(self) -> None:
        """What a screen reader says of the bar: the budget, then what the tooltip lists."""
        budget = f"budget {self.value_mb} MiB" if self.value_mb else "no budget set"
        resident = "; ".join(f"{n}: {format_bytes(b)}" for n, b in self.residency.models)
        text = "; ".join(t for t in (budget, resident or "no model resident", self._need_text) if t)
        if text != self.accessibleDescription():
            self.setAccessibleDescription(text)

    def set_need(self, need_bytes: int | None, text: str = "") -> None:
        """Mark what the chosen models need (`need_bytes`; None: no mark), said by `text` in
        the tooltip."""
        self.need_mb = None if need_bytes is None else need_bytes / 2**20
        self._need_text = text
        self._on_residency()

    @property
    def short(self) -> bool:
        """Whether the budget set is below the need marked."""
        return self.value_mb > 0 and self.need_mb is not None and self.value_mb < self.need_mb

    def set_value(self, mb: int) -> None:
        mb = max(0, min(int(mb), self.maximum_mb))
        if mb != self.value_mb:
            self.value_mb = mb
            self._describe()
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
            p.drawText(track, Qt.AlignmentFlag.AlignCenter, self.hint_text())
        if self.value_mb > 0:
            x = self._x(self.value_mb)
            p.fillRect(QRectF(x, 6, self.width() - 2 - x, 18), QColor(0, 0, 0, 110))
            if self.need_mb is not None:
                need = self._x(min(self.need_mb, self.maximum_mb))
                p.setPen(QPen(QColor(NEED_COLOUR), 2, Qt.PenStyle.DashLine))
                p.drawLine(int(need), 4, int(need), 26)
            p.setPen(QPen(QColor(SHORT_COLOUR if self.short else "#ffffff"), 3))
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


def note_style() -> str:
    """The notes' look: italic, in `NOTE_COLOUR` made legible on the window's background."""
    return f"color: {on_window(NOTE_COLOUR)}; font-style: italic"


def _note_label() -> QLabel:
    note = QLabel()
    note.setStyleSheet(note_style())
    note.setWordWrap(True)
    note.setVisible(False)
    return note


def _with_note(field: QWidget | QLayout, note: QLabel) -> QWidget:
    """`field` with its note under it (the note is shown only when it says something)."""
    box = QWidget()
    column = QVBoxLayout(box)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(1)
    if isinstance(field, QLayout):
        column.addLayout(field)
    else:
        column.addWidget(field)
    column.addWidget(note)
    return box


def _fill_models(combo: QComboBox, kind: str, names: list[str], trained: list[str]) -> None:
    """The picker of one model kind: the embedded default (none for an enhancer or a region mask),
    then `names`, then the `trained` swappers; each item's data is its setting's value."""
    combo.clear()
    combo.addItem(EMBEDDED if kind in ("swapper", "recognizer", "detector") else "none", "")
    for name in names:
        combo.addItem(name, name)
    for value in trained:
        combo.addItem(trained_label(value), value)
        combo.setItemData(combo.count() - 1, value, Qt.ItemDataRole.ToolTipRole)


def matte_problem(matte: str, encoder: str, clip: ClipInfo | None) -> str:
    """Why a render would refuse `matte` with the output format `encoder` ("" when it would not):
    said under the control, before anything is queued. An image target's output is an image of
    its own kind (PNG for an alpha matte), which can carry one."""
    from ffdesk.media.matte import check_matte

    if clip is not None and clip.is_image:
        return ""
    try:
        check_matte(matte, encoder)
    except UserError as exc:
        return in_controls_words(str(exc))
    return ""


def picker_note(kind: str, offered: bool, checked: bool) -> str:
    """Why a model picker offers nothing but its default ("" when it offers models)."""
    if offered:
        return ""
    if not checked:
        return "checking the models folder…"
    return f"no {PICKER_LABELS.get(kind, kind).lower()} in the models folder — {FOLDER_MENU}"


class WholeCombo(QComboBox):
    """A drop-down list never narrower than its usual width (its choices' text): in a narrow panel
    (large text) the form puts it under its label rather than cutting its text."""

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return super().minimumSizeHint().expandedTo(self.sizeHint())


def _combo(choices: tuple[str, ...] | list[str]) -> QComboBox:
    c = WholeCombo()
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
        need: BudgetNeed | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """`models`: the pickers' choices by kind; when not given, the models folder `models_dir`
        (the runtime environment's) is verified in the background and the pickers offer only what
        passes, staying at the embedded models until then. `need`: what the chosen models need of
        the memory budget (the budget's note says when it is below that; None: nothing said)."""
        super().__init__(parent)
        self.model = model
        self.need = need
        self._syncing = False
        self._models_known = models is not None
        self._models: dict[str, list[str]] = dict(models or {})
        self._models_dir = models_dir
        self._facts = _catalog_facts()
        self._offered: set[str] = set()
        """Trained swappers the user chose (checked then), kept over a rescan still in flight."""
        self.applicability: Applicability = what_applies(model.settings, 0, self._facts)
        self.mode = _combo(get_args(Mode))
        self.precision = _combo(get_args(Precision))
        self.precision.setToolTip(
            "The model pack's precision. auto on a GPU: FP32 and FP16 are timed once for the swapper, "
            "the enhancer and each mask model, and each runs the faster unless its faces drift from "
            "FP32's (the choice is remembered); on a CPU a preview takes INT8, a final render FP32"
        )
        self.batch = QSpinBox()
        self.batch.setRange(1, 64)
        self.budget = BudgetBar(residency, memory_total_mb)
        self.budget_input = BudgetInput(self.budget.maximum_mb)
        self.face_selection = _combo(get_args(FaceSelection))
        self.encoder = _combo(get_args(EncoderName))
        self.matte = _combo(MATTES)
        self.matte.setToolTip(
            "The swapped faces' matte: alpha writes it as the output's alpha channel (prores, png; "
            "times the clip's own alpha where it has one); clip writes a grey clip beside the output "
            "(NAME-matte). A clip with an alpha channel keeps it in prores and png either way"
        )
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
        self.masks = MaskControls(self)
        self.output_dir = QLineEdit()
        self.output_dir.setPlaceholderText("beside the clip")
        self.model_choice: dict[str, QComboBox] = {k: WholeCombo() for k in MODEL_KINDS}
        self.control_notes: dict[Control, QLabel] = {}
        """The note under each control whose effect depends on the swap (and each model picker)."""
        self.notes = QLabel()
        """What the chosen swap ignores that no control shows (extra source photos)."""
        self.notes.setObjectName("controlsNotes")
        self.notes.setStyleSheet(note_style())
        self.notes.setWordWrap(True)
        self.notes.setVisible(False)
        self._build_form()
        self._fill_pickers()
        self._connect()
        if models is not None:
            model.set_folder_models(models)
        model.settingsChanged.connect(self.sync)
        model.sourcesChanged.connect(self._show_applicability)
        model.targetChanged.connect(self._show_applicability)  # an image target takes an alpha matte
        self.sync()
        if need is not None:
            need.changed.connect(self._show_need)
            self._show_need()
        self._scans: list[ModelFolderScan] = []
        if models is None:
            self.rescan(models_dir)

    @property
    def scan(self) -> ModelFolderScan | None:
        """The latest models-folder scan (None when the models were given)."""
        return self._scans[-1] if self._scans else None

    def form_width(self) -> int:
        """How wide the panel is with the whole form in view, each field beside its label (no
        horizontal scroll bar)."""
        bar = self._scroll.verticalScrollBar().sizeHint().width()
        return self._form.sizeHint().width() + bar + 2 * self._scroll.frameWidth()

    def side_by_side_width(self) -> int:
        """The least width of the form with every field beside its label and none narrower than
        its least width (narrower, the fields go under their labels: `_place_fields`)."""
        form = self._form.layout()
        assert isinstance(form, QFormLayout)
        labels, fields = [0], [0]
        for row in range(form.rowCount()):
            label = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
            field = form.itemAt(row, QFormLayout.ItemRole.FieldRole)
            if label is not None and field is not None and not field.isEmpty():
                labels.append(label.sizeHint().width())
                fields.append(field.minimumSize().width())
        m = form.contentsMargins()
        return m.left() + max(labels) + form.horizontalSpacing() + max(fields) + m.right()

    def _place_fields(self, width: int) -> None:
        """Each field beside its label where the form is as wide as `side_by_side_width` (a long
        row under its label), else every field under its label: Qt's form would otherwise keep a
        field beside its label narrower than its text (a narrow panel, large text)."""
        form = self._form.layout()
        assert isinstance(form, QFormLayout)
        policy = (
            QFormLayout.RowWrapPolicy.WrapLongRows
            if width >= self.side_by_side_width()
            else QFormLayout.RowWrapPolicy.WrapAllRows
        )
        if form.rowWrapPolicy() != policy:
            form.setRowWrapPolicy(policy)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if watched is self._form and event.type() == QEvent.Type.Resize and isinstance(event, QResizeEvent):
            self._place_fields(event.size().width())
        return False

    # -- assembly -------------------------------------------------------------------------
    def _noted(self, name: Control, field: QWidget | QLayout) -> QWidget:
        note = _note_label()
        self.control_notes[name] = note
        return _with_note(field, note)

    def _build_form(self) -> None:
        inner = QWidget()
        form = QFormLayout(inner)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # a narrow panel: fields under labels
        add_row(form, "Mode", self.mode)
        add_row(form, "Precision", self._noted("precision", self.precision))
        add_row(form, "Batch", self.batch)
        budget_row = QHBoxLayout()
        budget_row.addWidget(self.budget, 1)
        budget_row.addWidget(self.budget_input)
        self.budget_note = _note_label()
        """Why a render would refuse the budget: below what the chosen models need."""
        self.budget_note.setObjectName("budgetNote")
        add_row(form, "Memory budget", _with_note(budget_row, self.budget_note))
        for kind in MODEL_KINDS:
            add_row(
                form, PICKER_LABELS.get(kind, kind.capitalize()), self._noted(kind, self.model_choice[kind])
            )
            if kind == "enhancer":
                add_row(form, "Enhancer weight", self._noted("enhancer_weight", self.enhancer_weight))
                add_row(form, "Enhancer blend", self._noted("enhancer_blend", self.enhancer_blend))
        add_row(form, "Mask regions", self._noted("mask_regions", self.mask_regions))
        rows = self.masks.rows()
        add_row(form, "Masks", self._noted("mask_types", rows["mask_types"]))
        add_row(form, "Mask blur", self._noted("mask_blur", rows["mask_blur"]))
        add_row(form, "Mask padding", self._noted("mask_padding", rows["mask_padding"]))
        add_row(form, "Mask areas", self._noted("mask_areas", rows["mask_areas"]))
        add_row(form, "Faces", self.face_selection)
        add_row(form, "Output format", self.encoder)
        self.matte_note = _note_label()
        """Why the matte cannot be written with the output format (the queue would refuse it)."""
        add_row(form, "Matte", _with_note(self.matte, self.matte_note))
        add_row(form, "Quality", self.quality)
        add_row(form, "Encoder speed", self.video_preset)
        self.browse = QPushButton("…")
        self.browse.setFixedWidth(30)
        self.browse.setAccessibleName("Choose the output folder")
        self.browse.setToolTip("choose the output folder")
        out_row = QHBoxLayout()
        out_row.addWidget(self.output_dir, 1)
        out_row.addWidget(self.browse)
        add_row(form, "Output folder", out_row)
        scroll = QScrollArea()
        scroll.setWidget(inner)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        # The form whole where the dock is as wide as `form_width()` (the window's first layout
        # makes it so where the screen has room); narrower, on a small screen, it scrolls.
        scroll.setMinimumWidth(MIN_WIDTH)
        self._form = inner
        self._scroll = scroll
        inner.installEventFilter(self)  # (its width decides where the fields go: `_place_fields`)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.notes)
        layout.addWidget(scroll, 1)

    def _connect(self) -> None:
        self.browse.clicked.connect(self._browse)
        combos = (self.mode, self.precision, self.face_selection, self.encoder, self.matte, self.video_preset)
        for c in combos:
            c.currentIndexChanged.connect(self._push)
        for combo in self.model_choice.values():
            combo.currentIndexChanged.connect(self._push)
        for s in (self.batch, self.quality, self.enhancer_blend, self.enhancer_weight):
            s.valueChanged.connect(self._push)
        self.mask_regions.editingFinished.connect(self._push)
        self.masks.edited.connect(self._push)
        self.output_dir.editingFinished.connect(self._push)
        self.budget.valueChanged.connect(self._push_budget)
        self.budget_input.valueChanged.connect(self._push_budget)

    # -- the models folder ------------------------------------------------------------------
    def rescan(self, models_dir: Path | None) -> None:
        """Verify `models_dir` in the background and offer what passes (the pickers keep the
        settings' choices until the result is in)."""
        self._models_dir = models_dir
        values = {self.model.settings.swapper, *self._facts.trained}
        asked = tuple(sorted(v for v in values if v))
        scan = ModelFolderScan(models_dir, asked, self)
        scan.done.connect(self._on_scan)
        self._scans.append(scan)
        scan.start()

    def _on_scan(self, result: FolderScan) -> None:
        if result.folder != self._models_dir:
            return  # an older folder's scan, finished after the user chose another
        self._facts = self._facts.with_trained(result.trained | self._offered)
        self.set_models(result.models)

    def offer_trained(self, value: str) -> None:
        """Offer `value` (a model made by `ffdesk train`, already checked) as a swapper."""
        self._offered.add(value)
        self._facts = self._facts.with_trained(self._facts.trained | {value})
        self._fill_pickers()
        self.sync()

    def set_models(self, models: dict[str, list[str]]) -> None:
        """Offer exactly these models (by kind) in the pickers; the settings' choices are kept."""
        self._models = dict(models)
        self._models_known = True
        self._fill_pickers()
        self.sync()
        self._push()  # a saved choice whose file is gone or fails verification is not kept
        self.model.set_folder_models(models)  # the processors' models: the session says which run

    def _fill_pickers(self) -> None:
        was, self._syncing = self._syncing, True
        try:
            for kind, combo in self.model_choice.items():
                trained = sorted(self._facts.trained) if kind == "swapper" else []
                _fill_models(combo, kind, self._models.get(kind, []), trained)
        finally:
            self._syncing = was

    def stop(self) -> None:
        """Wait for the models-folder scans still in flight (window shutdown)."""
        for scan in self._scans:
            scan.wait()

    # -- model <-> widgets ------------------------------------------------------------------
    def sync(self) -> None:
        """Model → widgets."""
        s = self.model.settings
        self._syncing = True
        try:
            self.mode.setCurrentText(s.mode)
            self.precision.setCurrentText(s.precision)
            self.batch.setValue(s.batch)
            self.budget.set_value(s.memory_budget_mb)
            self.budget_input.setValue(s.memory_budget_mb)
            self.face_selection.setCurrentText(s.face_selection)
            self.encoder.setCurrentText(s.encoder)
            self.matte.setCurrentText(s.matte)
            self.quality.setValue(s.quality)
            self.video_preset.setCurrentText(s.video_preset)
            self.enhancer_weight.setValue(s.enhancer_weight)
            self.enhancer_blend.setValue(s.enhancer_blend)
            if self.mask_regions.text() != s.mask_regions:
                self.mask_regions.setText(s.mask_regions)
            self.masks.show(s)
            if self.output_dir.text() != s.output_dir:
                self.output_dir.setText(s.output_dir)
            for kind, combo in self.model_choice.items():
                combo.setCurrentIndex(max(0, combo.findData(getattr(s, kind))))
        finally:
            self._syncing = False
        self._show_applicability()

    def _show_applicability(self) -> None:
        """Disable what the chosen swap does not read and say why under it; say in the notes
        what it ignores that no control shows."""
        photos = len(self.model.usable_sources())
        self.applicability = what_applies(self.model.settings, photos, self._facts)
        # A folder with no usable model at all is said once, above the form; each picker then
        # says only that it has nothing to offer.
        no_models = self._models_known and all(c.count() <= 1 for c in self.model_choice.values())
        for name, note in self.control_notes.items():
            widget = self._control(name)
            combo = self.model_choice.get(name)
            empty = picker_note(name, combo.count() > 1, self._models_known) if combo is not None else ""
            if empty and no_models:
                empty = "none in the models folder"
            why = self.applicability.reason(name)
            text = empty or (why.reason if why is not None else "")
            widget.setEnabled(not empty and (why is None or why.editable))
            note.setText(text)
            note.setVisible(bool(text))
        matte = matte_problem(self.model.settings.matte, self.model.settings.encoder, self.model.clip)
        self.matte_note.setText(matte)
        self.matte_note.setVisible(bool(matte))
        notes = list(self.applicability.notes)
        if no_models:
            notes.insert(0, f"{self._no_models()}: the embedded swap runs — {FOLDER_MENU}")
        self.notes.setText("\n".join(notes))
        self.notes.setVisible(bool(notes))

    def _show_need(self) -> None:
        """Mark on the bar what the chosen models need of the budget, and say under it when the
        budget set is below that (a render would refuse it before its first frame)."""
        need = self.need.need if self.need is not None else None
        text = self.need.shortfall() if self.need is not None else ""
        if need is None:
            self.budget.set_need(None)
        else:
            least = format_bytes(need.bytes)
            said = (
                f"{EMBEDDED_MODELS} need more than {least} (a render holds its frames beside them)"
                if need.embedded
                else f"the chosen models need at least {least} ({need.name}, the largest)"
            )
            self.budget.set_need(need.bytes, said)
        self.budget_note.setText(text)
        self.budget_note.setVisible(bool(text))
        self.budget_input.setToolTip(text or BUDGET_TIP)

    def _no_models(self) -> str:
        """Why the pickers have nothing to offer: a models folder that is a file, or no model."""
        if self._models_dir is not None:
            try:
                not_a_file(self._models_dir, "the models folder")
            except UserError as exc:
                return str(exc)
        return "no usable model in the models folder"

    def _control(self, name: Control) -> QWidget:
        widgets: dict[str, QWidget] = {
            "precision": self.precision,
            "enhancer_weight": self.enhancer_weight,
            "enhancer_blend": self.enhancer_blend,
            "mask_regions": self.mask_regions,
            **self.masks.rows(),
            **self.model_choice,
        }
        return widgets[name]

    def _push(self, *_args: object) -> None:
        """Widgets → model."""
        if self._syncing:
            return
        # Until the models folder is verified the pickers cannot show the saved choices: keep them.
        models = {
            kind: str(combo.currentData() or "")
            for kind, combo in self.model_choice.items()
            if self._models_known
        }
        self.model.update_settings(
            mode=self.mode.currentText(),
            precision=self.precision.currentText(),
            batch=self.batch.value(),
            face_selection=self.face_selection.currentText(),
            encoder=self.encoder.currentText(),
            matte=self.matte.currentText(),
            quality=self.quality.value(),
            video_preset=self.video_preset.currentText(),
            enhancer_weight=round(self.enhancer_weight.value(), 2),
            enhancer_blend=self.enhancer_blend.value(),
            mask_regions=self.mask_regions.text().strip(),
            **self.masks.settings_of(),
            output_dir=self.output_dir.text().strip(),
            **models,
        )

    def _push_budget(self, mb: int) -> None:
        """The bar or the box → the one budget setting (the other follows through `sync`)."""
        if not self._syncing:
            self.model.update_settings(memory_budget_mb=int(mb))

    def _browse(self) -> None:
        from PySide6.QtWidgets import QFileDialog

        folder = QFileDialog.getExistingDirectory(self, "Output folder", self.output_dir.text())
        if folder:
            self.output_dir.setText(folder)
            self._push()


def _catalog_facts() -> ModelFacts:
    """What the bundled catalog says of its models (no facts when it cannot be read)."""
    try:
        from ffdesk.runtime.catalog import load_catalog

        return ModelFacts.from_catalog(load_catalog())
    except Exception:  # noqa: BLE001 - a damaged catalog: the render says so; the controls stay usable
        return ModelFacts()
