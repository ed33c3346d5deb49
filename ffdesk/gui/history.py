"""Undo and redo of the controls' settings and the in/out points.

`History` is plain logic over any immutable state: each step keeps the state before and after,
and a burst of changes to the same thing (a spin box arrow held down, typing in a field, a handle
dragged) within `coalesce_s` of each other is one step. `SettingsHistory` binds it to a
`SessionModel` and gives the Edit menu its Undo/Redo actions. Opening another clip starts a new
history: its in/out points are frames of the old clip.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Generic, TypeVar

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QKeySequence

from ffdesk.gui.models import SessionModel, Settings

COALESCE_S = 1.0
"""Changes of one thing closer together than this are one undo step."""
CAPACITY = 200

State = TypeVar("State")


@dataclass(frozen=True)
class Step(Generic[State]):
    """One undoable change: the state before and after, what changed (the label), and when."""

    before: State
    after: State
    label: str
    at: float


class History(Generic[State]):
    """Undo and redo stacks of `Step`s over the current state."""

    def __init__(self, state: State, *, coalesce_s: float = COALESCE_S, capacity: int = CAPACITY) -> None:
        self.state = state
        self.coalesce_s = coalesce_s
        self.capacity = capacity
        self._undo: list[Step[State]] = []
        self._redo: list[Step[State]] = []
        self._sealed = True
        """Whether the next change starts a new step (after an undo, redo or reset)."""

    def record(self, state: State, label: str, now: float) -> None:
        """The state became `state` by a change of `label` at `now` (seconds, monotonic)."""
        if state == self.state:
            return
        top = self._undo[-1] if self._undo else None
        if top is not None and not self._sealed and top.label == label and now - top.at <= self.coalesce_s:
            self._undo.pop()
            if top.before != state:  # a burst that ends where it began is no step at all
                self._undo.append(Step(top.before, state, label, now))
        else:
            self._undo.append(Step(self.state, state, label, now))
            del self._undo[: -self.capacity]
        self._redo.clear()
        self.state = state
        self._sealed = False

    def undo(self) -> State | None:
        """The state to go back to (None: nothing to undo)."""
        if not self._undo:
            return None
        step = self._undo.pop()
        self._redo.append(step)
        self.state, self._sealed = step.before, True
        return step.before

    def redo(self) -> State | None:
        """The state to go forward to again (None: nothing to redo)."""
        if not self._redo:
            return None
        step = self._redo.pop()
        self._undo.append(step)
        self.state, self._sealed = step.after, True
        return step.after

    def reset(self, state: State) -> None:
        """Forget every step; `state` is where the history begins."""
        self._undo.clear()
        self._redo.clear()
        self.state, self._sealed = state, True

    def remap(self, move: Callable[[State], State]) -> None:
        """Move every state kept (the current one and each step's) by `move`, recording nothing
        (the clip's frames counted anew: the same points, by another count)."""
        self.state = move(self.state)
        for steps in (self._undo, self._redo):
            steps[:] = [Step(move(st.before), move(st.after), st.label, st.at) for st in steps]

    @property
    def undo_label(self) -> str | None:
        return self._undo[-1].label if self._undo else None

    @property
    def redo_label(self) -> str | None:
        return self._redo[-1].label if self._redo else None


@dataclass(frozen=True)
class EditState:
    """What undo restores: the controls' settings and the in/out points."""

    settings: Settings
    in_point: int | None
    out_point: int | None

    @classmethod
    def of(cls, session: SessionModel) -> EditState:
        return cls(session.settings, session.in_point, session.out_point)


_NAMES = {
    "memory_budget_mb": "memory budget",
    "output_dir": "output folder",
    "mask_regions": "mask regions",
    "in_point": "in point",
    "out_point": "out point",
}


def change_label(before: EditState, after: EditState) -> str:
    """What changed from `before` to `after`, as the Edit menu says it ("batch", "in/out points")."""
    old, new = before.settings, after.settings
    changed = [f.name for f in fields(Settings) if getattr(old, f.name) != getattr(new, f.name)]
    changed += [name for name in ("in_point", "out_point") if getattr(before, name) != getattr(after, name)]
    if changed == ["in_point", "out_point"]:
        return "in/out points"
    if len(changed) == 1:
        return _NAMES.get(changed[0], changed[0].replace("_", " "))
    return "settings"


class SettingsHistory(QObject):
    """Records the session's settings and in/out changes as undo steps, and applies undo/redo."""

    changed = Signal()

    def __init__(
        self, session: SessionModel, parent: QObject | None = None, now: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(parent)
        self.session = session
        self._now = now
        self.history: History[EditState] = History(EditState.of(session))
        self._applying = False
        session.settingsChanged.connect(self._on_edit)
        session.rangeChanged.connect(self._on_edit)
        session.targetChanged.connect(self.clear)
        session.clockChanged.connect(self._on_clock)

    def _on_clock(self, moved: Callable[[int], int]) -> None:
        """The clip's frames are counted by its clock now: the in/out points kept move with them."""

        def move(state: EditState) -> EditState:
            in_point = None if state.in_point is None else moved(state.in_point)
            out_point = None if state.out_point is None else moved(state.out_point)
            return replace(state, in_point=in_point, out_point=out_point)

        self.history.remap(move)

    def _on_edit(self) -> None:
        if self._applying:
            return
        now = EditState.of(self.session)
        if now != self.history.state:
            self.history.record(now, change_label(self.history.state, now), self._now())
            self.changed.emit()

    def clear(self) -> None:
        """Start over from the session as it is now (a new clip, the restored settings)."""
        self.history.reset(EditState.of(self.session))
        self.changed.emit()

    def undo(self) -> None:
        self._apply(self.history.undo())

    def redo(self) -> None:
        self._apply(self.history.redo())

    def _apply(self, state: EditState | None) -> None:
        if state is None:
            return
        self._applying = True
        try:
            self.session.update_settings(**state.settings.to_dict())
            self.session.set_range(state.in_point, state.out_point)
        finally:
            self._applying = False
        self.changed.emit()

    @property
    def undo_text(self) -> str:
        label = self.history.undo_label
        return f"&Undo {label}" if label else "&Undo"

    @property
    def redo_text(self) -> str:
        label = self.history.redo_label
        return f"&Redo {label}" if label else "&Redo"


def undo_actions(history: SettingsHistory, parent: QObject) -> tuple[QAction, QAction]:
    """Edit › Undo (Ctrl+Z) and Redo (Ctrl+Shift+Z, Ctrl+Y), saying what they undo and disabled
    when there is nothing to undo or redo."""
    undo = QAction(parent)
    undo.setShortcuts([QKeySequence("Ctrl+Z")])
    undo.triggered.connect(history.undo)
    redo = QAction(parent)
    redo.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
    redo.triggered.connect(history.redo)

    def follow() -> None:
        undo.setText(history.undo_text)
        undo.setEnabled(history.history.undo_label is not None)
        redo.setText(history.redo_text)
        redo.setEnabled(history.history.redo_label is not None)

    history.changed.connect(follow)
    follow()
    return undo, redo
