"""The timeline: a timecode ruler over the scrub bar (in/out range with draggable handles,
markers, playhead), the transport buttons, and playback that shows the frames it counts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from PySide6.QtCore import QObject, QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter, QPaintEvent, QPen, QPolygonF
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from ffdesk.gui.fitting import ShrinkingLabel
from ffdesk.gui.models import SessionModel
from ffdesk.gui.people_view import person_colour, seen_runs
from ffdesk.gui.transport import CLEAR_RANGE_KEY, LOOP_KEY, PlaybackClock, entry_frame, tick_ms

MARKER_COLOURS = {"noface": QColor(230, 80, 80), "flagged": QColor(240, 190, 40)}
HANDLE_COLOUR = QColor(250, 210, 90)
CHAPTER_COLOUR = QColor(200, 150, 255)
CHAPTER_HOVER_PX = 5
"""How near a chapter's mark (pixels either side) the pointer shows its title."""
MARGIN = 6
"""Pixels left and right of the track (the first and last frame's playhead stays visible)."""
RULER_H = 16
TRACK_TOP = 19
TRACK_H = 18
HANDLE_GRAB_PX = 6
"""How near a handle (pixels either side) a press grabs it."""
PICTURE_WAIT_S = 0.5
"""How long playback waits for the picture it asked for before moving on without it."""
_NICE_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)
_NICE_FRAMES = (1, 2, 5, 10)

Handle = Literal["in", "out"]


def ruler_step(last: int, fps: float, width_px: float, label_px: float) -> int:
    """Frames between labelled ticks: the smallest round step (1, 2, 5, 10 frames, then whole
    seconds and minutes) whose labels, `label_px` wide, fit side by side in `width_px`."""
    fps_int = max(1, round(fps))
    steps = [f for f in _NICE_FRAMES if f < fps_int] + [s * fps_int for s in _NICE_SECONDS]
    px_per_frame = width_px / max(1, last)
    for step in steps:
        if step * px_per_frame >= label_px:
            return step
    return steps[-1]


def minor_step(step: int, px_per_frame: float, min_px: float = 5.0) -> int:
    """Frames between the unlabelled ticks inside a `step` (0: none fits)."""
    for parts in (5, 4, 2):
        if step % parts == 0 and step // parts * px_per_frame >= min_px:
            return step // parts
    return 0


class ScrubBar(QWidget):
    """The clip as a bar under a timecode ruler: in/out range, markers, playhead. Press or drag
    to scrub; drag the in/out handles (the cursor changes over them) to set the range."""

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.setMinimumHeight(TRACK_TOP + TRACK_H + 4)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # a click here takes the keys back from a field
        self.ruler_font = QFont(self.font())
        self.ruler_font.setPointSizeF(max(6.0, self.font().pointSizeF() * 0.8))
        self._dragging: Handle | None = None
        self._dragged = False
        for sig in (model.positionChanged, model.rangeChanged, model.markersChanged, model.targetChanged):
            sig.connect(self.update)
            sig.connect(self.describe)
        model.playingChanged.connect(self.describe)  # (said once playback stops, not each frame)
        model.peopleChanged.connect(self._fit_people)
        self.setAccessibleName("Timeline")  # (a screen reader finds no text in a drawn bar)
        self.describe()

    def describe(self) -> None:
        """Say the position and the in/out range to a screen reader (a few words a change)."""
        m = self.model
        if m.playing:
            return
        clip = m.clip
        if clip is None:
            text = "no clip open"
        else:
            lo = clip.timecode(m.in_point) if m.in_point is not None else "the start"
            hi = clip.timecode(m.out_point) if m.out_point is not None else "the end"
            text = (
                f"frame {m.position + 1} of {clip.frame_count}, {clip.timecode(m.position)}; "
                f"in at {lo}, out at {hi}"
            )
            if m.markers:
                text += f"; {len(m.markers)} marker{'' if len(m.markers) == 1 else 's'}"
            chapter = clip.chapter_at(m.position)
            if chapter is not None:
                number, title = chapter
                text += f"; chapter {number} of {len(clip.chapters)}" + (f", {title}" if title else "")
        if text != self.accessibleDescription():
            self.setAccessibleDescription(text)

    # -- geometry -------------------------------------------------------------------------
    def x_of(self, index: int) -> float:
        last = max(1, self.model.last_index)
        return MARGIN + (self.width() - 2 * MARGIN) * index / last

    def index_at(self, x: float) -> int:
        last = self.model.last_index
        if last <= 0:
            return 0
        index = round((x - MARGIN) / max(1.0, self.width() - 2 * MARGIN) * last)
        return max(0, min(last, index))

    def track(self) -> QRectF:
        return QRectF(MARGIN, TRACK_TOP, self.width() - 2 * MARGIN, TRACK_H)

    def handle_x(self, handle: Handle) -> float:
        lo, hi = self.model.play_range
        return self.x_of(lo if handle == "in" else hi)

    def handle_at(self, x: float, y: float) -> Handle | None:
        """The handle a press at (`x`, `y`) grabs: the nearer one within `HANDLE_GRAB_PX`, on the
        track (the ruler above it scrubs); when both are as near, the one on the press's side."""
        if self.model.clip is None or y < TRACK_TOP - 3:
            return None
        near = {h: abs(x - self.handle_x(h)) for h in ("in", "out")}
        best = min(near.values())
        if best > HANDLE_GRAB_PX:
            return None
        if near["in"] == near["out"]:
            return "in" if x <= self.handle_x("in") else "out"
        return "in" if near["in"] < near["out"] else "out"

    # -- painting -------------------------------------------------------------------------
    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        m = self.model
        track = self.track()
        p.fillRect(track, QColor(60, 60, 68))
        if m.clip is not None:
            self._paint_ruler(p)
            lo, hi = m.play_range
            if m.in_point is not None or m.out_point is not None:
                p.fillRect(
                    QRectF(self.x_of(lo), track.top(), self.x_of(hi) - self.x_of(lo), track.height()),
                    QColor(70, 120, 190),
                )
            for index, kind in m.markers.items():
                x = self.x_of(index)
                p.fillRect(QRectF(x - 1, track.bottom() - 5, 3, 5), MARKER_COLOURS.get(kind, QColor("white")))
            self._paint_people(p)
            self._paint_chapters(p)
            self._paint_handle(p, "in", set_=m.in_point is not None)
            self._paint_handle(p, "out", set_=m.out_point is not None)
            x = self.x_of(m.position)
            p.setPen(QPen(QColor(255, 255, 255), 2))
            p.drawLine(QPointF(x, RULER_H - 4), QPointF(x, self.height() - 2))
        p.end()

    def _paint_ruler(self, p: QPainter) -> None:
        clip = self.model.clip
        assert clip is not None
        last = self.model.last_index
        p.setFont(self.ruler_font)
        metrics = p.fontMetrics()
        label_px = metrics.horizontalAdvance("00:00:00:00") + 12
        width = self.width() - 2 * MARGIN
        step = ruler_step(last, clip.fps, width, label_px)
        minor = minor_step(step, width / max(1, last)) or step
        p.setPen(QColor(150, 150, 160))
        for frame in range(0, last + 1, minor):
            x = self.x_of(frame)
            major = frame % step == 0
            p.drawLine(QPointF(x, TRACK_TOP - (9 if major else 4)), QPointF(x, TRACK_TOP - 1))
            text = clip.timecode(frame)
            if major and x + 3 + metrics.horizontalAdvance(text) <= self.width():
                p.drawText(QPointF(x + 3, metrics.ascent()), text)

    def _paint_chapters(self, p: QPainter) -> None:
        """A flag on the ruler where each chapter starts, over the track's top edge (its title
        where the pointer rests on it, and in the description)."""
        clip = self.model.clip
        assert clip is not None
        p.setPen(QPen(CHAPTER_COLOUR, 1.5))
        p.setBrush(CHAPTER_COLOUR)
        top = TRACK_TOP - 9  # among the ruler's ticks, under its timecodes
        for first, _title in clip.chapter_frames():
            x = self.x_of(first)
            p.drawLine(QPointF(x, top), QPointF(x, TRACK_TOP + 4))
            p.drawPolygon(QPolygonF([QPointF(x, top), QPointF(x + 6, top + 3), QPointF(x, top + 6)]))

    def chapter_near(self, x: float) -> tuple[int, str] | None:
        """The chapter whose mark is within `CHAPTER_HOVER_PX` of `x` (its number from 1, its
        title), the nearest; None where none is."""
        clip = self.model.clip
        if clip is None:
            return None
        near = [
            (abs(self.x_of(first) - x), number, title)
            for number, (first, title) in enumerate(clip.chapter_frames(), start=1)
            if abs(self.x_of(first) - x) <= CHAPTER_HOVER_PX
        ]
        return min(near)[1:] if near else None

    def _paint_handle(self, p: QPainter, handle: Handle, *, set_: bool) -> None:
        """A bracket at the range's end ("[" in, "]" out) with a grab tab under the track."""
        x = self.handle_x(handle)
        top, bottom = TRACK_TOP - 2, TRACK_TOP + TRACK_H + 2
        colour = HANDLE_COLOUR if set_ else QColor(170, 170, 180)
        inward = 4 if handle == "in" else -4
        p.setPen(QPen(colour, 2))
        p.drawLine(QPointF(x, top), QPointF(x, bottom))
        p.drawLine(QPointF(x, top), QPointF(x + inward, top))
        p.drawLine(QPointF(x, bottom), QPointF(x + inward, bottom))
        p.setBrush(colour)
        p.setPen(Qt.PenStyle.NoPen)
        tab = QPolygonF([QPointF(x, bottom), QPointF(x + inward, bottom), QPointF(x, bottom + 4)])
        p.drawPolygon(tab)

    # -- people --------------------------------------------------------------------------
    PEOPLE_TOP = TRACK_TOP + TRACK_H + 7
    """Top of the first person's band (under the handles' tabs)."""
    BAND_H, BAND_STEP, MAX_BANDS = 3, 4, 8

    def _fit_people(self) -> None:
        """Room under the track for one band per person found (up to `MAX_BANDS`; more share)."""
        people = self.model.people
        bands = min(len(people.people), self.MAX_BANDS) if people is not None else 0
        extra = self.PEOPLE_TOP - (TRACK_TOP + TRACK_H) + bands * self.BAND_STEP if bands else 4
        self.setMinimumHeight(TRACK_TOP + TRACK_H + extra)
        self.update()

    def _paint_people(self, p: QPainter) -> None:
        """A thin band per person under the track, in the colour of their card, over the frames
        they were seen in."""
        people = self.model.people
        if people is None:
            return
        last = self.model.last_index
        for person in people.people:
            y = self.PEOPLE_TOP + (person.index % self.MAX_BANDS) * self.BAND_STEP
            for first, end in seen_runs(person.frames, people.stride):
                x0, x1 = self.x_of(min(first, last)), self.x_of(min(end, last))
                p.fillRect(QRectF(x0, y, max(2.0, x1 - x0), self.BAND_H), person_colour(person.index))

    # -- mouse ----------------------------------------------------------------------------
    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.button() != Qt.MouseButton.LeftButton:
            return
        pos = event.position()
        self._dragging = self.handle_at(pos.x(), pos.y())
        self._dragged = False
        if self._dragging is None:
            self.model.set_position(self.index_at(pos.x()))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        pos = event.position()
        if not event.buttons() & Qt.MouseButton.LeftButton:
            over = self.handle_at(pos.x(), pos.y()) is not None
            self.setCursor(Qt.CursorShape.SizeHorCursor if over else Qt.CursorShape.ArrowCursor)
            chapter = self.chapter_near(pos.x()) if pos.y() < TRACK_TOP + 4 else None
            self.setToolTip(f"chapter {chapter[0]}: {chapter[1] or '(no title)'}" if chapter else "")
        elif self._dragging is not None:
            self._dragged = True
            self._drag_to(self._dragging, self.index_at(pos.x()))
        else:
            self.model.set_position(self.index_at(pos.x()))

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if self._dragging is not None and not self._dragged:  # a click on a handle scrubs there
            self.model.set_position(self.index_at(event.position().x()))
        self._dragging = None

    def _drag_to(self, handle: Handle, index: int) -> None:
        """Move a handle to `index`, never past the other one."""
        m = self.model
        lo, hi = m.play_range
        if handle == "in":
            m.set_in(min(index, hi))
        else:
            m.set_out(max(index, lo))


class Playback(QObject):
    """Moves the position to the frame the playback clock says, but only once the picture of the
    position it asked for last has arrived (`previewChanged` with that index; or after
    `PICTURE_WAIT_S`). The frames in between are skipped, so the frame counter and the picture
    agree and a clip plays in real time however long a preview takes: fewer pictures, not slow
    motion. Backwards (a negative rate) works the same; playback runs within in/out and stops
    at its end, or starts over there with the model's `loop`."""

    def __init__(
        self, model: SessionModel, now: Callable[[], float] = time.monotonic, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.model = model
        self._now = now
        self.clock = PlaybackClock(now)
        self.timer = QTimer(self)
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.timeout.connect(self.advance)
        self.asked: int | None = None
        """The position whose picture playback waits for (None: not waiting)."""
        self._asked_at = 0.0
        self._moving = False
        model.rateChanged.connect(self._on_rate)
        model.positionChanged.connect(self._on_position)
        model.previewChanged.connect(self._on_picture)

    def _on_rate(self, rate: float) -> None:
        m = self.model
        self.asked = None
        if rate == 0 or m.clip is None:
            self.timer.stop()
            return
        lo, hi = m.play_range
        start = entry_frame(m.position, rate, lo, hi)
        self.clock.start(start, rate, m.clip.fps)
        self._move(start)
        self.timer.start(tick_ms(rate, m.clip.fps))

    def _on_position(self, index: int) -> None:
        """Someone else moved the position (a scrub, a key) while playing: count on from there."""
        m = self.model
        if self._moving or not m.playing or m.clip is None:
            return
        self.clock.start(index, m.rate, m.clip.fps)
        self.asked, self._asked_at = index, self._now()

    def _on_picture(self, result: object) -> None:
        if self.asked is not None and getattr(result, "index", None) == self.asked:
            self.asked = None
            self.advance()

    def advance(self) -> None:
        """Show the frame that is due, unless the last one asked for is still on its way."""
        m = self.model
        if not m.playing or m.clip is None:
            return
        if self.asked is not None and self._now() - self._asked_at < PICTURE_WAIT_S:
            return
        lo, hi = m.play_range
        due = self.clock.due(lo, hi, loop=m.loop)
        if due is None:  # the end of the range, not looping: stop on its last frame
            if (m.rate > 0 and m.position < hi) or (m.rate < 0 and m.position > lo):
                self._move(hi if m.rate > 0 else lo)
            m.set_rate(0.0)  # (moved past it while playing, by a click or a key: stop there)
            return
        self._move(due)

    def _move(self, index: int) -> None:
        m = self.model
        if index == m.position:
            return
        self._moving = True
        try:
            m.set_position(index)
        finally:
            self._moving = False
        self.asked, self._asked_at = m.position, self._now()


RANGE_SAMPLE = "00:00:00:00 → 00:00:00:00"
"""The widest range label (sets its width, so the buttons never move as the text changes; a
narrow window cuts it)."""


class TimelineView(QWidget):
    """The ruler and scrub bar across the whole width; under it the transport buttons, the
    shuttle speed, the in/out buttons and the range label (fixed widths, so the bar's geometry
    never changes as their text does)."""

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.bar = ScrubBar(model)
        self.playback = Playback(model, parent=self)
        self.play = QPushButton("▶")
        self.play.setToolTip("Play / pause (Space; J/K/L shuttle)")
        self.back = QPushButton("◀|")
        self.back.setToolTip("Previous frame (Left)")
        self.fwd = QPushButton("|▶")
        self.fwd.setToolTip("Next frame (Right)")
        self.mark_in = QPushButton("In")
        self.mark_in.setToolTip("Set in point (I)")
        self.mark_out = QPushButton("Out")
        self.mark_out.setToolTip("Set out point (O)")
        self.clear_range = QPushButton("×")
        self.clear_range.setToolTip(f"Clear in/out points ({CLEAR_RANGE_KEY})")
        self.loop = QPushButton("⟲")
        self.loop.setCheckable(True)
        self.loop.setToolTip(f"Loop playback ({LOOP_KEY}); off: playback stops at the end")
        # Their keys are the window's (Help › Keyboard shortcuts); a screen reader says these.
        for button, name in (
            (self.play, "Play"),
            (self.back, "Previous frame"),
            (self.fwd, "Next frame"),
            (self.mark_in, "Set in point"),
            (self.mark_out, "Set out point"),
            (self.clear_range, "Clear in and out points"),
            (self.loop, "Loop playback"),
        ):
            button.setAccessibleName(name)
        self.rate_label = QLabel("")
        self.rate_label.setToolTip("Shuttle speed (J/L)")
        self.rate_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.rate_label.setFixedWidth(self.rate_label.fontMetrics().horizontalAdvance("◀ 8×") + 8)
        self.label = ShrinkingLabel(RANGE_SAMPLE)
        for b in (self.play, self.back, self.fwd, self.loop, self.mark_in, self.mark_out, self.clear_range):
            b.setFixedWidth(44)
            b.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.play.clicked.connect(lambda: model.set_playing(not model.playing))
        self.back.clicked.connect(lambda: model.step(-1))
        self.fwd.clicked.connect(lambda: model.step(1))
        self.mark_in.clicked.connect(lambda: model.set_in(model.position))
        self.mark_out.clicked.connect(lambda: model.set_out(model.position))
        self.clear_range.clicked.connect(lambda: model.set_range(None, None))
        self.loop.toggled.connect(model.set_loop)
        model.loopChanged.connect(self.loop.setChecked)
        self.loop.setChecked(model.loop)
        buttons = QHBoxLayout()
        for w in (self.play, self.back, self.fwd, self.loop, self.rate_label):
            buttons.addWidget(w)
        buttons.addStretch(1)
        for b in (self.mark_in, self.mark_out, self.clear_range):
            buttons.addWidget(b)
        buttons.addWidget(self.label)
        layout = QVBoxLayout(self)  # the bar has the whole width, whatever the labels say
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.bar)
        layout.addLayout(buttons)
        model.rateChanged.connect(self._on_rate)
        model.rangeChanged.connect(self._sync)
        model.targetChanged.connect(self._sync)
        self._sync()

    def _on_rate(self, rate: float) -> None:
        self.play.setText("❚❚" if rate else "▶")
        self.play.setAccessibleName("Pause" if rate else "Play")
        arrow = "◀" if rate < 0 else "▶"
        self.rate_label.setText("" if rate in (0.0, 1.0) else f"{arrow} {abs(rate):g}×")

    def _sync(self) -> None:
        m = self.model
        enabled = m.clip is not None
        for b in (self.play, self.back, self.fwd, self.loop, self.mark_in, self.mark_out, self.clear_range):
            b.setEnabled(enabled)
        if m.clip is None:
            self.label.setText("")
            return
        lo = m.clip.timecode(m.in_point) if m.in_point is not None else "start"
        hi = m.clip.timecode(m.out_point) if m.out_point is not None else "end"
        self.label.setText(f"{lo} → {hi}")
