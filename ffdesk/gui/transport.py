"""Transport: the playback clock, J/K/L shuttle, points of interest, and the window's keys.

The clock and the key logic are plain functions and classes (testable without a window); the
shortcuts are window-wide `QAction`s that step aside while a text field or number box has the
focus, so typing "j" in a field types a j (and for the keys a control the keyboard chose uses
itself: `keyboard.keys_taken`); Return in such a field (after it took the value) or Esc
gives the keys back, as does a click on the picture. Help > Keyboard shortcuts lists every key from
the actions themselves, so the list cannot drift from what the keys do.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QMessageBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ffdesk import __version__
from ffdesk.gui.keyboard import EVERY_KEY, belongs, keys_taken
from ffdesk.gui.models import SessionModel

MAX_SHUTTLE = 8.0
"""The fastest J/L shuttle, times real time."""
BIG_STEP = 10
"""Frames a Ctrl+arrow moves."""
CLEAR_RANGE_KEY = "Alt+X"
"""Clears the in and out points (as in DaVinci Resolve; the timeline's × button does the same)."""
LOOP_KEY = "Ctrl+/"
"""Turns looping playback on or off (as in DaVinci Resolve; the timeline's ⟲ button does the same)."""
_EPS = 1e-9


# -- the playback clock -------------------------------------------------------------------------
def loop_into(frame: int, lo: int, hi: int, *, forward: bool) -> int:
    """`frame` wrapped into `lo`..`hi` once playback runs past the end it is heading for (a frame
    before the range when playing forward, or after it backwards, is on its way in and kept)."""
    span = hi - lo + 1
    if forward and frame > hi:
        return lo + (frame - hi - 1) % span
    if not forward and frame < lo:
        return hi - (lo - 1 - frame) % span
    return frame


def entry_frame(position: int, rate: float, lo: int, hi: int) -> int:
    """Where playback starts from `position`: at or past the range's end in the playing
    direction it starts over at the other end (play on the last frame plays the range again)."""
    if rate > 0 and position >= hi:
        return lo
    if rate < 0 and position <= lo:
        return hi
    return position


class PlaybackClock:
    """The frame wall-clock time says should be showing: `rate` x `fps` frames a second from the
    frame it was started at, looped within a range. `now` (seconds, monotonic) is injectable."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._origin = 0
        self._t0 = 0.0
        self.rate = 0.0
        self.fps = 25.0

    def start(self, frame: int, rate: float, fps: float) -> None:
        """Count from `frame` at `rate` times real time (negative: backwards) from now on."""
        self._origin, self._t0, self.rate, self.fps = frame, self._now(), rate, fps

    def due(self, lo: int, hi: int, *, loop: bool = True) -> int | None:
        """The frame to show now, looped within `lo`..`hi`; without `loop`, None once playback
        has run past the end it is heading for (`hi` forwards, `lo` backwards)."""
        raw = self._origin + (self._now() - self._t0) * self.rate * self.fps
        forward = self.rate >= 0
        frame = math.floor(raw + _EPS) if forward else math.ceil(raw - _EPS)
        if loop:
            return loop_into(frame, lo, hi, forward=forward)
        if (forward and frame > hi) or (not forward and frame < lo):
            return None
        return frame


def tick_ms(rate: float, fps: float) -> int:
    """How often playback looks at the clock: twice a frame at `rate`, within 4..20 ms."""
    per_frame = 1000.0 / max(1e-6, abs(rate) * fps)
    return max(4, min(20, round(per_frame / 2)))


# -- shuttle and points of interest -------------------------------------------------------------
def shuttle_rate(rate: float, direction: int) -> float:
    """The rate after J (-1), K (0) or L (+1): L plays forward, again while playing forward
    doubles the speed up to `MAX_SHUTTLE`; J the same backwards; K stops."""
    if direction == 0:
        return 0.0
    if rate * direction > 0:
        return direction * min(abs(rate) * 2, MAX_SHUTTLE)
    return float(direction)


def points_of_interest(
    last: int, in_point: int | None, out_point: int | None, markers: Iterable[int]
) -> tuple[int, ...]:
    """The frames Up/Down jump between: start, in, out, markers (and chapters) and end, in order."""
    points = {0, last, *markers}
    points.update(p for p in (in_point, out_point) if p is not None)
    return tuple(sorted(p for p in points if 0 <= p <= last))


def next_point(points: Iterable[int], position: int, direction: int) -> int:
    """The nearest point after `position` (`direction` 1) or before it (-1); `position` when none."""
    ahead = [p for p in points if (p - position) * direction > 0]
    if not ahead:
        return position
    return min(ahead) if direction > 0 else max(ahead)


# -- the window's keys --------------------------------------------------------------------------
@dataclass(frozen=True)
class Shortcut:
    """A window-wide key: its key sequences (portable text, e.g. "Shift+Left"), what it does."""

    keys: tuple[str, ...]
    does: str
    run: Callable[[], object]
    moves: bool = True
    """It moves the playhead, plays, or sets a point: it waits while the transport is held (a
    live session shows the camera, not the clip)."""


def _seek(session: SessionModel, index: int) -> None:
    """Move to `index`, stopping playback (as stepping does in an editor)."""
    session.set_rate(0.0)
    session.set_position(index)


def _jump(session: SessionModel, direction: int) -> None:
    s = session
    chapters = [first for first, _ in s.clip.chapter_frames()] if s.clip is not None else []
    points = points_of_interest(s.last_index, s.in_point, s.out_point, [*s.markers, *chapters])
    _seek(s, next_point(points, s.position, direction))


def _one_second(session: SessionModel) -> int:
    return max(1, round(session.clip.fps)) if session.clip is not None else 1


def transport_shortcuts(session: SessionModel) -> tuple[Shortcut, ...]:
    """The window's plain keys, in the order the help lists them."""
    s = session
    return (
        Shortcut(("Space",), "Play / pause", lambda: s.set_playing(not s.playing)),
        Shortcut(("L",), "Play forward; again while playing: faster (2×, 4×, 8×)", lambda: _shuttle(s, 1)),
        Shortcut(("J",), "Play backward; again while playing: faster (2×, 4×, 8×)", lambda: _shuttle(s, -1)),
        Shortcut(("K",), "Stop", lambda: s.set_rate(0.0)),
        Shortcut(("Left", ","), "Previous frame", lambda: _seek(s, s.position - 1)),
        Shortcut(("Right", "."), "Next frame", lambda: _seek(s, s.position + 1)),
        Shortcut(("Shift+Left",), "One second back", lambda: _seek(s, s.position - _one_second(s))),
        Shortcut(("Shift+Right",), "One second forward", lambda: _seek(s, s.position + _one_second(s))),
        Shortcut(("Ctrl+Left",), f"{BIG_STEP} frames back", lambda: _seek(s, s.position - BIG_STEP)),
        Shortcut(("Ctrl+Right",), f"{BIG_STEP} frames forward", lambda: _seek(s, s.position + BIG_STEP)),
        Shortcut(("Home",), "First frame", lambda: _seek(s, 0)),
        Shortcut(("End",), "Last frame", lambda: _seek(s, s.last_index)),
        Shortcut(("Up",), "Previous point: start, in, out, marker, chapter, end", lambda: _jump(s, -1)),
        Shortcut(("Down",), "Next point: start, in, out, marker, chapter, end", lambda: _jump(s, 1)),
        Shortcut(("I",), "Set the in point here", lambda: s.set_in(s.position)),
        Shortcut(("O",), "Set the out point here", lambda: s.set_out(s.position)),
        Shortcut((CLEAR_RANGE_KEY,), "Clear the in and out points", lambda: s.set_range(None, None)),
        Shortcut(
            ("R",), "Reference face: the next face, left to right", lambda: s.step_reference_face(1), False
        ),
        Shortcut(
            ("Shift+R",), "Reference face: the face before it", lambda: s.step_reference_face(-1), False
        ),
        Shortcut((LOOP_KEY,), "Loop playback on or off", lambda: s.set_loop(not s.loop), False),
        Shortcut(("B",), "Before/after split on or off", lambda: s.set_show_before(not s.show_before), False),
        Shortcut(("P",), "Preview mode", lambda: s.update_settings(mode="preview"), False),
        Shortcut(("F",), "Final mode", lambda: s.update_settings(mode="final"), False),
    )


def _shuttle(session: SessionModel, direction: int) -> None:
    session.set_rate(shuttle_rate(session.rate, direction))


def ends_on_return(widget: QWidget | None) -> bool:
    """Whether `widget` is a one-line field that takes its value on Return (a text field or
    number box, an editable list): the keys go back to the transport then."""
    if isinstance(widget, QComboBox):
        return widget.isEditable()
    return isinstance(widget, QLineEdit | QAbstractSpinBox)


class TypingGuard(QObject):
    """Turns the window's plain-key actions off while a widget that takes typing has the focus,
    and those a control uses itself while it has it (`keys_taken`: Space for a button the
    keyboard chose, the arrows for a list; a disabled action leaves its key to the focused
    widget), and on again when it leaves. Return in a one-line field, once the field has taken
    its value, gives the keys back (`leave`): the value stays as typed, not selected, so Space
    plays rather than replacing it. `actions`: by their first key."""

    def __init__(self, window: QWidget, actions: Mapping[str, QAction], leave: Callable[[], None]) -> None:
        super().__init__(window)
        self._window = window
        self._actions = dict(actions)
        self._leave = leave
        self._field: QWidget | None = None
        """The one-line field with the focus, watched for Return."""
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.focusChanged.connect(self._on_focus)
        self._follow(window.focusWidget())

    @Slot(QWidget, QWidget)
    def _on_focus(self, _old: QWidget | None, now: QWidget | None) -> None:
        field, self._field = self._field, None
        if field is not None:
            with contextlib.suppress(RuntimeError):  # (a field deleted with the focus on it)
                field.removeEventFilter(self)
        if now is None:
            self._follow(None)  # (a focused control went, or the window lost the focus)
        elif belongs(now, self._window):
            self._follow(now)
            if ends_on_return(now):
                self._field = now
                now.installEventFilter(self)

    def _follow(self, focused: QWidget | None) -> None:
        taken = keys_taken(focused)
        for key, action in self._actions.items():
            action.setEnabled(taken is not EVERY_KEY and key not in taken)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if (
            watched is self._field
            and isinstance(event, QKeyEvent)
            and event.type() == QEvent.Type.KeyPress
            and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        ):
            QTimer.singleShot(0, self, self._leave)  # after the field has taken the value
        return False


def install_shortcuts(
    window: QMainWindow,
    session: SessionModel,
    *,
    home: QWidget | None = None,
    held: Callable[[], bool] | None = None,
    on_held: Callable[[], None] | None = None,
) -> dict[str, QAction]:
    """Add the transport keys to `window` (by first key), with Esc (and Return in a one-line
    field) to leave a text field: the keys go to `home` (the picture; default the window).
    While `held()` says so, the keys that move the playhead do nothing but call `on_held`."""
    actions: dict[str, QAction] = {}
    for shortcut in transport_shortcuts(session):
        action = QAction(shortcut.does, window)
        action.setShortcuts([QKeySequence(k) for k in shortcut.keys])
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        run = shortcut.run
        if shortcut.moves and held is not None:
            run = _unless_held(run, held, on_held)
        action.triggered.connect(run)
        window.addAction(action)
        actions[shortcut.keys[0]] = action

    def leave() -> None:
        _leave_field(window, home or window)

    TypingGuard(window, actions, leave)
    esc = QAction("Leave a text field, number box or control (the keys above work again)", window)
    esc.setShortcut(QKeySequence("Esc"))
    esc.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    esc.triggered.connect(leave)
    window.addAction(esc)
    actions["Esc"] = esc
    return actions


def _unless_held(
    run: Callable[[], object], held: Callable[[], bool], on_held: Callable[[], None] | None
) -> Callable[[], None]:
    def guarded() -> None:
        if not held():
            run()
        elif on_held is not None:
            on_held()

    return guarded


def _leave_field(window: QMainWindow, home: QWidget) -> None:
    focused = QApplication.focusWidget()
    if focused is None or (focused is not home and keys_taken(focused)):
        home.setFocus(Qt.FocusReason.ShortcutFocusReason)


# -- help ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyRow:
    """One line of the shortcuts list."""

    keys: str
    does: str


def key_rows(window: QMainWindow) -> tuple[KeyRow, ...]:
    """Every key of `window`: its own actions (the transport), then each menu's, as they are now."""
    rows = [_row(a, a.text()) for a in window.actions() if a.shortcuts()]
    for top in window.menuBar().actions():
        menu = top.menu()
        if isinstance(menu, QMenu):
            title = _plain(top.text())
            rows.extend(
                _row(a, f"{title} › {_plain(a.text())}") for a in _menu_actions(menu) if a.shortcuts()
            )
    return tuple(rows)


def _menu_actions(menu: QMenu) -> list[QAction]:
    found: list[QAction] = []
    for action in menu.actions():
        sub = action.menu()
        found.extend(_menu_actions(sub) if isinstance(sub, QMenu) else [action])
    return found


def _row(action: QAction, does: str) -> KeyRow:
    keys = " or ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts())
    return KeyRow(keys, does)


def _plain(text: str) -> str:
    """A menu text without its mnemonic marks and trailing ellipsis."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").strip()


class ShortcutsDialog(QDialog):
    """Help › Keyboard shortcuts: every key the window answers, in a table."""

    def __init__(self, rows: tuple[KeyRow, ...], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.table = QTableWidget(len(rows), 2)
        self.table.setTabKeyNavigation(False)  # Tab goes on to Close
        self.table.setHorizontalHeaderLabels(["Key", "Does"])
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        for i, row in enumerate(rows):
            self.table.setItem(i, 0, QTableWidgetItem(row.keys))
            self.table.setItem(i, 1, QTableWidgetItem(row.does))
        note = QLabel(
            "Stepping and jumping stop playback; I and O work while playing. Plain keys type "
            "into a text field or number box while it has the focus: press Return (once the "
            "value is typed) or Esc, or click the picture or the timeline, to give them back to "
            "the transport. While live, the keys that move the playhead wait until Stop."
        )
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.resize(560, 600)


def about_text() -> str:
    return (
        f"<b>ffdesk {__version__}</b><p>A desktop face-swap studio for video editors: GPU memory, "
        f"power and time as budgets you can see and set.</p><p>Qt for Python {pyside_version}.</p>"
    )


def build_help_menu(window: QMainWindow) -> QMenu:
    """Help › Keyboard shortcuts (lists the window's keys when opened) and Help › About."""
    menu = window.menuBar().addMenu("&Help")
    dialogs: list[ShortcutsDialog] = []

    def show_keys() -> None:
        for old in dialogs:
            old.close()
            old.deleteLater()
        dialogs[:] = [ShortcutsDialog(key_rows(window), window)]
        dialogs[0].show()

    keys = menu.addAction("&Keyboard shortcuts", show_keys)
    keys.setObjectName("helpShortcuts")
    about = menu.addAction("&About ffdesk", lambda: QMessageBox.about(window, "About ffdesk", about_text()))
    about.setObjectName("helpAbout")
    return menu
