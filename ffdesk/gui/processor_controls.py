"""The Processors panel: FaceFusion's other processors, each with an on/off, a model picker and
its options, bound to `SessionModel.settings` both ways.

The processors are listed in the order renders run them. A processor's options show while it is
on. One that is on but does not apply (its model file is missing, lip sync without a voice, the
frame enhancer in preview mode) has its name greyed and the reason under it
(`ffdesk.gui.processors.processor_states`); its options stay editable where they can be the fix
or where the other mode uses them, and are disabled otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ffdesk.gui.accessible import add_row, legible, on_window, plain, unseen_label
from ffdesk.gui.controls import note_style
from ffdesk.gui.fitting import BesideOrUnder
from ffdesk.gui.models import SessionModel
from ffdesk.gui.processors import (
    DEFAULTS,
    FOLDER_MENU,
    LABELS,
    PROCESSOR_KINDS,
    SUMMARIES,
    ProcessorState,
    clamp_rgba,
    face_edits_text,
    is_on,
    model_of,
    parse_face_edits,
    picker_items,
    processor_choices,
)
from ffdesk.pipeline.job import COLORIZER_SIZES, EXPRESSION_AREAS, FACE_EDITS

RGBA = tuple[int, int, int, int]
PickColour = Callable[[RGBA, str], RGBA | None]
"""Asks the user for a colour (the current one, the dialog's title); None: cancelled."""
PickFile = Callable[[str], str]
"""Asks the user for a file (starting from this path); "": cancelled."""
GREYED_COLOUR = "#8c8c8c"
"""A processor on but not applied: its name in grey (made darker where the window's background
needs it to stay legible: `greyed_style`)."""
MISSING_COLOUR = QColor(140, 140, 140)
"""A picker's model that is not in the models folder (made legible on the list's background)."""
EDIT_STEPS = 20
"""The face editor's sliders move in 1/20 (0.05) steps."""
AUDIO_FILTER = (
    "Audio or clips (*.wav *.mp3 *.m4a *.aac *.flac *.ogg *.opus *.mp4 *.mov *.mkv *.webm);;All files (*)"
)


def greyed_style() -> str:
    return f"color: {on_window(GREYED_COLOUR)}"


def catalog_names() -> dict[str, tuple[str, ...]]:
    """The models each processor's picker offers (`processor_choices` of the bundled catalog;
    none where it cannot be read)."""
    try:
        from ffdesk.runtime.catalog import load_catalog

        return processor_choices(load_catalog())
    except Exception:  # noqa: BLE001 - a damaged catalog: the render says so; the panel stays usable
        return {kind: () for kind in PROCESSOR_KINDS}


def dialog_colour(rgba: RGBA, title: str) -> RGBA | None:
    from PySide6.QtWidgets import QColorDialog

    colour = QColorDialog.getColor(
        QColor(*rgba), None, title, QColorDialog.ColorDialogOption.ShowAlphaChannel
    )
    if not colour.isValid():
        return None
    return (colour.red(), colour.green(), colour.blue(), colour.alpha())


def dialog_file(start: str) -> str:
    from PySide6.QtWidgets import QFileDialog

    name, _ = QFileDialog.getOpenFileName(None, "Voice for the lip syncer", start, AUDIO_FILTER)
    return str(name)


def swatch(rgba: RGBA, size: int = 16) -> QPixmap:
    """A square of the colour over a chequer board (so its alpha shows)."""
    pixmap = QPixmap(size, size)
    pixmap.fill(QColor(255, 255, 255))
    p = QPainter(pixmap)
    half = size // 2
    for x, y in ((0, 0), (half, half)):
        p.fillRect(x, y, half, half, QColor(190, 190, 190))
    p.fillRect(0, 0, size, size, QColor(*rgba))
    p.setPen(QColor(90, 90, 90))
    p.drawRect(0, 0, size - 1, size - 1)
    p.end()
    return pixmap


class ColourButton(QPushButton):
    """A colour with its alpha (R, G, B, A 0-255): a swatch and the numbers; a click asks for
    another (`changed` when the user picks one)."""

    changed = Signal()

    def __init__(self, title: str, pick: PickColour, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = title
        self._pick = pick
        self._rgba: RGBA = (0, 0, 0, 0)
        self.setAccessibleName(title)  # (its text is only the figures)
        self.clicked.connect(self._ask)
        self._show()

    def rgba(self) -> RGBA:
        return self._rgba

    def set_rgba(self, rgba: RGBA) -> None:
        """Show `rgba` (without `changed`)."""
        if rgba != self._rgba:
            self._rgba = rgba
            self._show()

    def _show(self) -> None:
        self.setIcon(QIcon(swatch(self._rgba)))
        self.setText(",".join(str(v) for v in self._rgba))
        self.setToolTip(f"{self.title}: R,G,B,A 0-255; click to choose")
        self.setAccessibleDescription(f"red, green, blue, alpha {self.text()} (0-255); press to choose")

    def _ask(self) -> None:
        picked = self._pick(self._rgba, self.title)
        if picked is not None and picked != self._rgba:
            self.set_rgba(picked)
            self.changed.emit()


class SliderSpin(QWidget):
    """A slider and a spin box over one whole-number range, moving together; `valueChanged`
    once per change."""

    valueChanged = Signal(int)

    def __init__(self, low: int, high: int, suffix: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(low, high)
        self.slider.setPageStep(10)
        self.spin = QSpinBox()
        self.spin.setRange(low, high)
        self.spin.setSuffix(suffix)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.slider, 1)
        row.addWidget(self.spin)
        self.slider.valueChanged.connect(self.spin.setValue)
        self.spin.valueChanged.connect(self._spun)

    def name_as(self, name: str) -> None:
        """Name the slider `name` and the number box beside it "`name` value" for a screen reader."""
        self.slider.setAccessibleName(name)
        self.spin.setAccessibleName(f"{name} value")

    def _spun(self, value: int) -> None:
        self.slider.setValue(value)
        self.valueChanged.emit(value)

    def value(self) -> int:
        return int(self.spin.value())

    def setValue(self, value: int) -> None:  # noqa: N802 - Qt naming, as the widgets it stands for
        self.spin.setValue(value)


class EditSlider(QWidget):
    """One face editor setting, -1..1 in 0.05 steps, with its value beside it."""

    valueChanged = Signal(float)

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(-EDIT_STEPS, EDIT_STEPS)
        self.slider.setPageStep(4)
        self.slider.setToolTip(f"{name.replace('_', ' ')}: -1 to 1, 0 leaves it as it is")
        self.readout = QLabel()
        self.readout.setMinimumWidth(self.readout.fontMetrics().horizontalAdvance("-0.00") + 4)
        self.readout.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.slider, 1)
        row.addWidget(self.readout)
        self.slider.valueChanged.connect(self._moved)
        self._moved(0)

    def value(self) -> float:
        return round(self.slider.value() / EDIT_STEPS, 2)

    def set_value(self, value: float) -> None:
        self.slider.setValue(round(value * EDIT_STEPS))

    def _moved(self, _steps: int) -> None:
        value = self.value()
        self.readout.setText(f"{value:+.2f}" if value else "0")
        self.valueChanged.emit(value)


class ProcessorBox(QFrame):
    """One processor: its on/off and model picker, the reason it does not apply, its options."""

    def __init__(self, kind: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = kind
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName(f"processor_{kind}")
        self.on = QCheckBox(LABELS[kind])
        self.on.setToolTip(SUMMARIES[kind])
        font = self.on.font()
        font.setBold(True)
        self.on.setFont(font)
        self.model = QComboBox()
        self.model.setToolTip(f"the {LABELS[kind].lower()}'s model (FaceFusion's default: {DEFAULTS[kind]})")
        unseen_label(f"{LABELS[kind]} model", self.model, self)
        self.model.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model.setMinimumContentsLength(12)
        self.model.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.note = QLabel()
        self.note.setStyleSheet(note_style())
        self.note.setWordWrap(True)
        self.note.setVisible(False)
        self.options = QWidget()
        self.form = QFormLayout(self.options)
        self.form.setContentsMargins(18, 0, 0, 0)
        self.form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # narrow: fields under labels
        header = QWidget()
        beside = BesideOrUnder(header)  # the model under the name where the panel is narrow (large text)
        beside.setContentsMargins(0, 0, 0, 0)
        beside.addWidget(self.on)
        beside.addWidget(self.model)
        column = QVBoxLayout(self)
        column.setContentsMargins(6, 4, 6, 4)
        column.setSpacing(2)
        column.addWidget(header)
        column.addWidget(self.note)
        column.addWidget(self.options)

    def add_option(self, text: str, field: QWidget) -> None:
        """A row of this processor's options, its control named for a screen reader with the
        processor's name before the label's ("Frame enhancer blend"; other processors have a
        Blend too)."""
        add_row(self.form, text, field, f"{LABELS[self.kind]} {plain(text).lower()}" if text else "")

    def fill(self, items: list[tuple[str, str, bool]], current: str) -> None:
        """Offer `items` (`picker_items`) and show `current` (without signals)."""
        was = self.model.blockSignals(True)
        missing_colour = legible(MISSING_COLOUR, self.model.palette().color(QPalette.ColorRole.Base))
        try:
            self.model.clear()
            for text, value, missing in items:
                self.model.addItem(text, value)
                if missing:
                    index = self.model.count() - 1
                    self.model.setItemData(index, missing_colour, Qt.ItemDataRole.ForegroundRole)
                    self.model.setItemData(
                        index,
                        f"{value}: not in the models folder — {FOLDER_MENU}",
                        Qt.ItemDataRole.ToolTipRole,
                    )
            self.model.setCurrentIndex(max(0, self.model.findData(current)))
        finally:
            self.model.blockSignals(was)

    def show_state(self, state: ProcessorState, fixes: tuple[QWidget, ...] = ()) -> None:
        """On/off, greyed name and reason, options shown while on; where it does not apply, the
        options other than `fixes` are disabled (those of the other mode stay editable)."""
        self.options.setVisible(state.on and self.form.rowCount() > 0)
        greyed = state.on and bool(state.reason)
        self.on.setStyleSheet(greyed_style() if greyed else "")
        self.on.setToolTip(f"{SUMMARIES[self.kind]}\n{state.reason}" if greyed else SUMMARIES[self.kind])
        text = state.reason or state.note
        self.note.setText(text)
        self.note.setVisible(state.on and bool(text))
        blocked = state.on and not state.in_job
        for row in range(self.form.rowCount()):
            item = self.form.itemAt(row, QFormLayout.ItemRole.FieldRole)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.setEnabled(not blocked or widget in fixes)


class ProcessorControls(QWidget):
    """FaceFusion's other processors, bound to `SessionModel.settings` both ways."""

    def __init__(
        self,
        model: SessionModel,
        *,
        catalog: Mapping[str, tuple[str, ...]] | None = None,
        pick_colour: PickColour = dialog_colour,
        pick_file: PickFile = dialog_file,
        parent: QWidget | None = None,
    ) -> None:
        """`catalog`: the models of each processor kind the pickers list (None: the bundled
        catalog's). Which of them the models folder holds comes from the session
        (`SessionModel.folder_models`, filled by the models-folder check)."""
        super().__init__(parent)
        self.model = model
        self._catalog = dict(catalog) if catalog is not None else catalog_names()
        self._pick_file = pick_file
        self._syncing = False
        self.states: dict[str, ProcessorState] = {}
        self.boxes = {kind: ProcessorBox(kind) for kind in PROCESSOR_KINDS}
        self._build_options(pick_colour)
        self._build()
        self._fill_pickers()
        self._connect()
        model.settingsChanged.connect(self.sync)
        model.targetChanged.connect(self._show_states)
        model.modelsChanged.connect(self._on_models)
        self.sync()

    # -- assembly -------------------------------------------------------------------------
    def _build_options(self, pick_colour: PickColour) -> None:
        b = self.boxes
        self.lip_audio = QLineEdit()
        self.lip_audio.setPlaceholderText("the clip's own audio")
        self.lip_audio.setClearButtonEnabled(True)
        self.lip_audio.setToolTip("the voice the mouths follow: an audio file or a clip's audio track")
        self.lip_audio_browse = QPushButton("…")
        self.lip_audio_browse.setFixedWidth(30)
        self.lip_audio_browse.setToolTip("choose an audio file")
        self.lip_audio_browse.setAccessibleName("Choose the lip syncer's audio file")
        audio_row = QWidget()
        row = QHBoxLayout(audio_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.lip_audio, 1)
        row.addWidget(self.lip_audio_browse)
        self.lip_audio_row = audio_row
        self.lip_weight = _fraction_spin("how strongly the voice drives the mouth (0.5 feeds it as it is)")
        self.voice_extractor = QComboBox()
        for value, label in VOICE_EXTRACTORS:
            self.voice_extractor.addItem(label, value)
        self.voice_extractor.setToolTip(
            "the model that takes the voice out of the track first, as FaceFusion does (auto: "
            "kim_vocal_2 when it is in the models folder, else the whole track)"
        )
        b["lip_syncer"].add_option("Audio", audio_row)
        b["lip_syncer"].add_option("Voice", self.voice_extractor)
        b["lip_syncer"].add_option("Weight", self.lip_weight)

        self.frame_enhancer_blend = _percent_spin("how much of the upscaled picture is mixed in")
        b["frame_enhancer"].add_option("Blend", self.frame_enhancer_blend)

        self.expression_factor = _percent_spin("how much of the target's expression comes back")
        self.expression_areas = {a: QCheckBox(a) for a in EXPRESSION_AREAS}
        for area, check in self.expression_areas.items():
            check.setToolTip(f"the {area.replace('-', ' ')} takes back the target's expression")
        b["expression_restorer"].add_option("Factor", self.expression_factor)
        b["expression_restorer"].add_option("Areas", _row(list(self.expression_areas.values())))

        self.face_sliders = {name: EditSlider(name) for name in FACE_EDITS}
        for name, slider in self.face_sliders.items():
            b["face_editor"].add_option(name.replace("_", " ").capitalize(), slider)
        self.face_reset = QPushButton("Reset")
        self.face_reset.setToolTip("every slider back to 0 (the face as it is)")
        b["face_editor"].add_option("", _row([self.face_reset]))

        self.deep_morph = _percent_spin("how far the faces morph to the model's person")
        b["deep_swapper"].add_option("Morph", self.deep_morph)

        self.age_direction = SliderSpin(-100, 100)
        self.age_direction.setToolTip("younger (-100) to older (100)")
        self.age_direction.name_as(f"{LABELS['age_modifier']} direction")
        b["age_modifier"].add_option("Direction", self.age_direction)

        self.background_fill = ColourButton("Background fill", pick_colour)
        self.background_despill = ColourButton("Despill colour", pick_colour)
        self.background_despill.setToolTip(
            "a screen's colour to take out of the edges (its alpha: how much; 0: none); click to choose"
        )
        b["background_remover"].add_option("Fill", _row([self.background_fill]))
        b["background_remover"].add_option("Despill", _row([self.background_despill]))

        self.colorizer_size = QComboBox()
        self.colorizer_size.addItems(list(COLORIZER_SIZES))
        self.colorizer_size.setToolTip("the size frames are fed to the colorizer at")
        self.colorizer_blend = _percent_spin("how much of the colorized frame is in the output")
        b["frame_colorizer"].add_option("Size", self.colorizer_size)
        b["frame_colorizer"].add_option("Blend", self.colorizer_blend)

    def _build(self) -> None:
        inner = QWidget()
        column = QVBoxLayout(inner)
        column.setContentsMargins(4, 4, 4, 4)
        intro = QLabel("They run in this order, after the face swap. Greyed: on but not applied now.")
        intro.setWordWrap(True)
        intro.setStyleSheet(greyed_style())
        column.addWidget(intro)
        for box in self.boxes.values():
            column.addWidget(box)
        column.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(inner)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)

    def _connect(self) -> None:
        for box in self.boxes.values():
            box.on.toggled.connect(self._push)
            box.model.currentIndexChanged.connect(self._push)
        for spin in (
            self.lip_weight,
            self.frame_enhancer_blend,
            self.expression_factor,
            self.deep_morph,
            self.age_direction,
            self.colorizer_blend,
        ):
            spin.valueChanged.connect(self._push)
        for check in self.expression_areas.values():
            check.toggled.connect(self._push)
        self.voice_extractor.currentIndexChanged.connect(self._push)
        for slider in self.face_sliders.values():
            slider.valueChanged.connect(self._push)
        self.face_reset.clicked.connect(self.reset_face_edits)
        self.lip_audio.editingFinished.connect(self._push)
        self.lip_audio.textChanged.connect(self._on_audio_text)
        self.lip_audio_browse.clicked.connect(self._browse_audio)
        self.background_fill.changed.connect(self._push)
        self.background_despill.changed.connect(self._push)
        self.colorizer_size.currentIndexChanged.connect(self._push)

    # -- the models folder ------------------------------------------------------------------
    def _on_models(self) -> None:
        self._fill_pickers()
        self._show_states()

    def _fill_pickers(self) -> None:
        usable = self.model.folder_models
        for kind, box in self.boxes.items():
            current = model_of(self.model.settings, kind)
            found = None if usable is None else usable.get(kind, ())
            box.fill(picker_items(kind, self._catalog.get(kind, ()), found, current), current)

    # -- model <-> widgets ------------------------------------------------------------------
    def sync(self) -> None:
        """Settings → widgets."""
        s = self.model.settings
        self._syncing = True
        try:
            for kind, box in self.boxes.items():
                box.on.setChecked(is_on(s, kind))
                current = model_of(s, kind)
                if box.model.findData(current) < 0:
                    self._fill_pickers()
                box.model.setCurrentIndex(max(0, box.model.findData(current)))
            if self.lip_audio.text() != s.lip_sync_audio:
                self.lip_audio.setText(s.lip_sync_audio)
            self.lip_weight.setValue(s.lip_sync_weight)
            self.voice_extractor.setCurrentIndex(max(0, self.voice_extractor.findData(s.voice_extractor)))
            self.frame_enhancer_blend.setValue(s.frame_enhancer_blend)
            self.expression_factor.setValue(s.expression_restorer_factor)
            areas = {a.strip() for a in s.expression_restorer_areas.split(",")} & set(EXPRESSION_AREAS)
            for area, check in self.expression_areas.items():
                check.setChecked(area in areas or not areas)  # none named: both
            edits = dict(parse_face_edits(s.face_edits))
            for name, slider in self.face_sliders.items():
                slider.set_value(edits.get(name, 0.0))
            self.deep_morph.setValue(s.deep_swapper_morph)
            self.age_direction.setValue(s.age_modifier_direction)
            self.background_fill.set_rgba(clamp_rgba(s.background_fill))
            self.background_despill.set_rgba(clamp_rgba(s.background_despill))
            self.colorizer_size.setCurrentText(s.frame_colorizer_size)
            self.colorizer_blend.setValue(s.frame_colorizer_blend)
        finally:
            self._syncing = False
        self._show_states()

    def _show_states(self) -> None:
        """Grey what is on but does not apply, with the reason; options shown while on."""
        self.states = self.model.processor_states()
        fixes: dict[str, tuple[QWidget, ...]] = {"lip_syncer": (self.lip_audio_row,)}
        for kind, box in self.boxes.items():
            box.show_state(self.states[kind], fixes.get(kind, ()))

    def _on_audio_text(self, text: str) -> None:
        if not text and not self._syncing and self.model.settings.lip_sync_audio:
            self._push()  # the clear button: back to the clip's own audio at once

    def _push(self, *_args: object) -> None:
        """Widgets → settings."""
        if self._syncing:
            return
        self.model.update_settings(**self.values())

    def values(self) -> dict[str, object]:
        """The `Settings` fields the widgets hold."""
        out: dict[str, object] = {}
        for kind, box in self.boxes.items():
            out[f"{kind}_on"] = box.on.isChecked()
            value = box.model.currentData()
            if value:
                out[kind] = str(value)
        areas = [a for a, check in self.expression_areas.items() if check.isChecked()]
        edits = {name: slider.value() for name, slider in self.face_sliders.items()}
        out.update(
            lip_sync_audio=self.lip_audio.text().strip(),
            lip_sync_weight=round(self.lip_weight.value(), 2),
            voice_extractor=str(self.voice_extractor.currentData() or "auto"),
            frame_enhancer_blend=self.frame_enhancer_blend.value(),
            expression_restorer_factor=self.expression_factor.value(),
            expression_restorer_areas="" if len(areas) in (0, len(EXPRESSION_AREAS)) else ",".join(areas),
            face_edits=face_edits_text(edits),
            deep_swapper_morph=self.deep_morph.value(),
            age_modifier_direction=self.age_direction.value(),
            background_fill=self.background_fill.rgba(),
            background_despill=self.background_despill.rgba(),
            frame_colorizer_size=self.colorizer_size.currentText(),
            frame_colorizer_blend=self.colorizer_blend.value(),
        )
        return out

    def reset_face_edits(self) -> None:
        """Every face editor slider back to 0 (one settings change)."""
        if self.model.settings.face_edits:
            self.model.update_settings(face_edits="")

    def _browse_audio(self) -> None:
        start = self.lip_audio.text().strip() or str(
            self.model.clip.path.parent if self.model.clip is not None else Path.home()
        )
        name = self._pick_file(start)
        if name:
            self.lip_audio.setText(name)
            self._push()


VOICE_EXTRACTORS = (
    ("auto", "auto (kim_vocal_2 when present)"),
    ("none", "none: the whole track"),
    ("kim_vocal_2", "kim_vocal_2"),
    ("kim_vocal_1", "kim_vocal_1"),
    ("uvr_mdxnet", "uvr_mdxnet"),
)
"""The lip syncer's voice extractor choices (`RenderJob.voice_extractor`)."""


def _fraction_spin(tip: str) -> QDoubleSpinBox:
    spin = QDoubleSpinBox()
    spin.setRange(0.0, 1.0)
    spin.setSingleStep(0.05)
    spin.setToolTip(tip)
    return spin


def _percent_spin(tip: str) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(0, 100)
    spin.setSuffix(" %")
    spin.setToolTip(tip)
    return spin


def _row(widgets: list[QWidget]) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    for widget in widgets:
        layout.addWidget(widget)
    layout.addStretch(1)
    return row
