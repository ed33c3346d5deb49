"""The timeline: scrubber with in/out range and markers, play/pause, frame step, in/out buttons."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

from ffdesk.gui.models import SessionModel

MARKER_COLOURS = {"noface": QColor(230, 80, 80), "flagged": QColor(240, 190, 40)}


class ScrubBar(QWidget):
    """Paints the clip as a bar: in/out range, markers, playhead. Press or drag to scrub."""

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setMinimumHeight(34)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        for sig in (model.positionChanged, model.rangeChanged, model.markersChanged, model.targetChanged):
            sig.connect(self.update)

    def x_of(self, index: int) -> float:
        last = max(1, self.model.last_index)
        return 6 + (self.width() - 12) * index / last

    def index_at(self, x: float) -> int:
        last = self.model.last_index
        if last <= 0:
            return 0
        return round((x - 6) / max(1.0, self.width() - 12) * last)

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        m = self.model
        track = QRectF(6, 10, self.width() - 12, self.height() - 20)
        p.fillRect(track, QColor(60, 60, 68))
        if m.clip is not None:
            lo = m.in_point if m.in_point is not None else 0
            hi = m.out_point if m.out_point is not None else m.last_index
            if m.in_point is not None or m.out_point is not None:
                p.fillRect(
                    QRectF(self.x_of(lo), track.top(), self.x_of(hi) - self.x_of(lo), track.height()),
                    QColor(70, 120, 190),
                )
            for index, kind in m.markers.items():
                x = self.x_of(index)
                p.fillRect(QRectF(x - 1, track.bottom() - 5, 3, 5), MARKER_COLOURS.get(kind, QColor("white")))
            x = self.x_of(m.position)
            p.setPen(QPen(QColor(255, 255, 255), 2))
            p.drawLine(int(x), 2, int(x), self.height() - 2)
        p.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        self.model.set_position(self.index_at(event.position().x()))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.model.set_position(self.index_at(event.position().x()))


class TimelineView(QWidget):
    """Transport buttons around the scrub bar. Playback advances the model at the clip's fps;
    previews are coalesced downstream, so a slow preview drops frames instead of lagging."""

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.bar = ScrubBar(model)
        self.play = QPushButton("▶")
        self.play.setToolTip("Play / pause (Space)")
        self.back = QPushButton("◀|")
        self.back.setToolTip("Previous frame (Left)")
        self.fwd = QPushButton("|▶")
        self.fwd.setToolTip("Next frame (Right)")
        self.mark_in = QPushButton("In")
        self.mark_in.setToolTip("Set in point (I)")
        self.mark_out = QPushButton("Out")
        self.mark_out.setToolTip("Set out point (O)")
        self.clear_range = QPushButton("×")
        self.clear_range.setToolTip("Clear in/out points")
        self.label = QLabel("")
        for b in (self.play, self.back, self.fwd, self.mark_in, self.mark_out, self.clear_range):
            b.setFixedWidth(44)
            b.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.play.clicked.connect(lambda: model.set_playing(not model.playing))
        self.back.clicked.connect(lambda: model.step(-1))
        self.fwd.clicked.connect(lambda: model.step(1))
        self.mark_in.clicked.connect(lambda: model.set_in(model.position))
        self.mark_out.clicked.connect(lambda: model.set_out(model.position))
        self.clear_range.clicked.connect(self._clear_range)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for w in (self.play, self.back, self.fwd):
            layout.addWidget(w)
        layout.addWidget(self.bar, 1)
        for b in (self.mark_in, self.mark_out, self.clear_range):
            layout.addWidget(b)
        layout.addWidget(self.label)
        self.timer = QTimer(self)
        self.timer.timeout.connect(self._tick)
        model.playingChanged.connect(self._on_playing)
        model.rangeChanged.connect(self._sync)
        model.targetChanged.connect(self._sync)
        self._sync()

    def _clear_range(self) -> None:
        self.model.set_in(None)
        self.model.set_out(None)

    def _on_playing(self, playing: bool) -> None:
        self.play.setText("❚❚" if playing else "▶")
        if playing and self.model.clip is not None:
            self.timer.start(max(1, round(1000 / self.model.clip.fps)))
        else:
            self.timer.stop()

    def _tick(self) -> None:
        m = self.model
        end = m.out_point if m.out_point is not None else m.last_index
        if m.position >= end:
            m.set_position(m.in_point or 0)
        else:
            m.step(1)

    def _sync(self) -> None:
        m = self.model
        enabled = m.clip is not None
        for b in (self.play, self.back, self.fwd, self.mark_in, self.mark_out, self.clear_range):
            b.setEnabled(enabled)
        if m.clip is None:
            self.label.setText("")
            return
        lo = m.clip.timecode(m.in_point) if m.in_point is not None else "start"
        hi = m.clip.timecode(m.out_point) if m.out_point is not None else "end"
        self.label.setText(f"{lo} → {hi}")
