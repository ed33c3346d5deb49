"""The People dock: the people of the open clip as cards, and the photos each one gets.

"Find people" makes one pass over the clip (its in/out range when set) on a background thread
(`ffdesk.faces.people.find_people`, with the recognizer of the models folder the session uses),
then shows a card per person: their best face, where they appear, and their source photos
(dropped on the card or chosen; several are averaged). A person without a photo is left
untouched. The mapping lives in the session (`SessionModel.person_photos`), so the preview and
queued jobs follow it (`RenderJob.face_map`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QDragEnterEvent, QDragMoveEvent, QDropEvent, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ffdesk.gui.accessible import on_window
from ffdesk.gui.models import ClipInfo, SessionModel, StatusLog
from ffdesk.gui.preview_view import to_qimage
from ffdesk.media.images import IMAGE_SUFFIXES

if TYPE_CHECKING:
    from ffdesk.faces.people import People, Person

THUMB = 72
PHOTO_FILTER = f"Images ({' '.join(f'*{s}' for s in sorted(IMAGE_SUFFIXES))})"
PERSON_COLOURS = (
    (66, 165, 245),
    (255, 167, 38),
    (102, 187, 106),
    (236, 64, 122),
    (171, 71, 188),
    (38, 198, 218),
    (212, 225, 87),
    (141, 110, 99),
)
"""Each person's colour (cards and timeline bands), by index, repeating."""

Span = tuple[float | None, float | None]
PhotoChooser = Callable[[QWidget, str], list[Path]]
"""Asks for photos (parent, dialog title) -> the chosen files (none: cancelled)."""


def person_colour(index: int) -> QColor:
    return QColor(*PERSON_COLOURS[index % len(PERSON_COLOURS)])


def person_name(person: int | Path) -> str:
    """How the app names a person: "person N" counted from 1 (`--map` counts from 0), or the
    file name of a photo of them."""
    return f"person {person + 1}" if isinstance(person, int) else Path(person).name


def seen_runs(frames: Sequence[int], stride: int) -> list[tuple[int, int]]:
    """The (first, last) frames of each stretch a person is seen in: sampled frames at most
    `stride` apart are one stretch, and each stands for the `stride` frames from it."""
    runs: list[tuple[int, int]] = []
    step = max(1, stride)
    for frame in sorted(frames):
        if runs and frame - runs[-1][1] <= 1:
            runs[-1] = (runs[-1][0], frame + step - 1)
        else:
            runs.append((frame, frame + step - 1))
    return runs


def photos_among(paths: Sequence[Path]) -> list[Path]:
    return [p for p in paths if p.suffix.lower() in IMAGE_SUFFIXES]


def appearance_text(person: Person) -> str:
    """Which frames a person is seen in, counted from 1 as the preview counts them ("frame 21 /
    30"), and how many faces of theirs the pass saw."""
    faces = f"{person.faces} face{'s' if person.faces != 1 else ''}"
    return f"frames {person.frames[0] + 1}–{person.frames[-1] + 1}\n{faces}"


def timecode_text(person: Person, clip: ClipInfo | None) -> str:
    """When a person is first and last seen ("" without a clip)."""
    return "" if clip is None else f"{clip.timecode(person.frames[0])} → {clip.timecode(person.frames[-1])}"


def choose_photos_dialog(parent: QWidget, title: str) -> list[Path]:
    names, _ = QFileDialog.getOpenFileNames(parent, title, str(Path.home()), PHOTO_FILTER)
    return [Path(n) for n in names]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class PeopleFinder(QObject):
    """Finds the people of one clip at a time on a plain thread; results come back as queued
    signals of this QObject (which lives on the GUI thread). Starting another pass, or `stop`,
    ends the one in flight and drops its results."""

    progress = Signal(int, int, int)
    """(pass, frames looked at, frames the pass will look at)"""
    finished = Signal(int, object, object, str)
    """(pass, span, People or None, a one-line error or "")"""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.current = 0
        """The number of the latest pass (a signal of an earlier one is stale)."""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, path: Path, span: Span, models_dir: Path | None) -> None:
        """Find the people of `span` of `path`, recognized with `models_dir`'s recognizer."""
        self.stop()
        self._stop = threading.Event()
        self.current += 1
        self._thread = threading.Thread(
            target=self._run,
            args=(self.current, path, span, models_dir, self._stop),
            name="ffdesk-people",
            daemon=True,
        )
        self._thread.start()

    def _run(
        self, number: int, path: Path, span: Span, models_dir: Path | None, stop: threading.Event
    ) -> None:
        from ffdesk.faces.people import ClipRange, find_people, recognizer_for
        from ffdesk.faces.scan import lower_priority

        lower_priority()

        def tell(done: int, total: int) -> None:
            if not stop.is_set():
                self.progress.emit(number, done, total)

        try:
            people = find_people(
                path, recognizer_for(models_dir), span=ClipRange(*span), on_progress=tell, cancel=stop
            )
        except Exception as exc:  # noqa: BLE001 - any failure is one line in Status
            if not stop.is_set():
                self.finished.emit(number, span, None, _one_line(exc))
            return
        if not stop.is_set():
            self.finished.emit(number, span, people, "")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the pass in flight and wait for its thread (its results are dropped)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None


class PersonCard(QFrame):
    """One person: their face, number and colour, where they appear, and their photos (drop
    photos on the card, or Choose…; Clear leaves them untouched)."""

    def __init__(self, view: PeopleView, person: Person, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view = view
        self.index = person.index
        model = view.model
        colour = person_colour(person.index)
        self.setAcceptDrops(True)
        self.setObjectName("personCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet(f"#personCard {{ border: 2px solid {colour.name()}; border-radius: 4px; }}")
        self.image = QLabel()
        self.image.setFixedSize(THUMB, THUMB)
        self.image.setPixmap(
            QPixmap.fromImage(to_qimage(person.thumbnail)).scaled(
                THUMB, THUMB, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
            )
        )
        self.title = QLabel(f"<b>{person_name(person.index)}</b>")
        self.title.setStyleSheet(f"color: {colour.name()}")
        self.title.setToolTip(f"ffdesk render --map {person.index}=FACE.jpg names this person")
        self.where = QLabel(appearance_text(person))
        self.when = QLabel(timecode_text(person, model.clip))
        self.photos = QLabel()
        self.photos.setWordWrap(True)
        self.choose = QPushButton("Choose…")
        self.choose.setToolTip("the photos of the face to put on this person (several are averaged)")
        self.choose.clicked.connect(self.choose_photos)
        self.clear = QPushButton("Clear")
        self.clear.setToolTip("leave this person untouched")
        self.clear.clicked.connect(lambda: model.set_person_photos(self.index, ()))
        self.choose.setAccessibleName(f"Choose photos for {person_name(person.index)}")
        self.clear.setAccessibleName(f"Clear the photos of {person_name(person.index)}")
        buttons = QHBoxLayout()
        buttons.addWidget(self.choose)
        buttons.addWidget(self.clear)
        buttons.addStretch(1)
        about = QVBoxLayout()
        about.addWidget(self.title)
        about.addWidget(self.where)
        about.addStretch(1)
        top = QHBoxLayout()  # narrow enough for the dock: what is wide goes under the picture
        top.addWidget(self.image)
        top.addLayout(about, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.when)
        layout.addWidget(self.photos)
        layout.addLayout(buttons)
        self.sync()

    def sync(self) -> None:
        photos = self.view.model.person_photos.get(self.index, ())
        self.clear.setEnabled(bool(photos))
        if not photos:
            self.photos.setText("<i>leave untouched</i> — drop a photo here or Choose…")
            self.photos.setToolTip("")
            return
        names = ", ".join(p.name for p in photos)
        self.photos.setText(f"→ {names}" + (" (averaged)" if len(photos) > 1 else ""))
        self.photos.setToolTip("\n".join(str(p) for p in photos))

    def add_photos(self, paths: Sequence[Path]) -> None:
        """Add photos to this person's (images only; the rest are ignored)."""
        photos = [p.expanduser().resolve() for p in photos_among(paths)]
        if photos:
            model = self.view.model
            model.set_person_photos(self.index, (*model.person_photos.get(self.index, ()), *photos))

    def choose_photos(self) -> None:
        self.add_photos(self.view.choose_photos(self, f"Photos to put on {person_name(self.index)}"))

    # A drop is always taken as a copy: a file manager offering Move must never lose the user's file.
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt override
        if photos_among(_local_paths(event)):
            event.setDropAction(Qt.DropAction.CopyAction)
            event.accept()
        else:
            event.ignore()

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:  # noqa: N802 - Qt override
        if photos_among(_local_paths(event)):
            event.setDropAction(Qt.DropAction.CopyAction)
            event.accept()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt override
        photos = photos_among(_local_paths(event))
        if photos:
            event.setDropAction(Qt.DropAction.CopyAction)
            event.accept()
            self.add_photos(photos)


def _local_paths(event: QDropEvent | QDragEnterEvent | QDragMoveEvent) -> list[Path]:
    mime = event.mimeData()
    return [Path(u.toLocalFile()) for u in mime.urls() if u.isLocalFile()] if mime.hasUrls() else []


class PeopleView(QWidget):
    """Find people (with progress, stoppable), then a card per person."""

    def __init__(
        self,
        model: SessionModel,
        status: StatusLog,
        models_dir: Callable[[], Path | None],
        parent: QWidget | None = None,
        *,
        choose_photos: PhotoChooser = choose_photos_dialog,
    ) -> None:
        """`models_dir`: the models folder the session uses now (its ArcFace recognizes, when it
        has one); `choose_photos`: how Choose… asks for photos."""
        super().__init__(parent)
        self.model = model
        self.status = status
        self.models_dir = models_dir
        self.choose_photos = choose_photos
        self.finder = PeopleFinder(self)
        self.finder.progress.connect(self._on_progress)
        self.finder.finished.connect(self._on_finished)
        self.cards: list[PersonCard] = []
        self.find_button = QPushButton("Find people")
        self.find_button.setToolTip("look through the clip (its in/out range when set) for the people in it")
        self.find_button.clicked.connect(self._find_or_stop)
        self.bar = QProgressBar()
        self.bar.setVisible(False)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet(f"color: {on_window('gray')}")
        self._box = QWidget()
        self._list = QVBoxLayout(self._box)
        self._list.setContentsMargins(0, 0, 0, 0)
        self._list.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # the cards wrap
        scroll.setWidget(self._box)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.find_button)
        layout.addWidget(self.bar)
        layout.addWidget(self.note)
        layout.addWidget(scroll, 1)
        model.targetChanged.connect(self._on_target)
        model.peopleChanged.connect(self._on_people)
        model.rangeChanged.connect(self._sync_note)
        self._shown: People | None = None
        self._looking_at: Path | None = None
        """The clip of the pass in flight."""
        self._on_target()

    # -- the pass -------------------------------------------------------------------------
    def start(self) -> bool:
        """Find the people of the open clip (its in/out range); False when none can be looked at."""
        m = self.model
        if m.clip is None or m.player:
            return False
        self.finder.start(m.clip.path, m.span_s(), self.models_dir())
        self._looking_at = m.clip.path
        self.find_button.setText("Stop")
        self.bar.setRange(0, 0)
        self.bar.setVisible(True)
        self.note.setText(f"looking for people in {m.clip.path.name}…")
        return True

    def stop(self) -> None:
        """Stop a pass in flight (its results are dropped)."""
        self.finder.stop()
        self._looking_at = None
        self.find_button.setText("Find people")
        self.bar.setVisible(False)

    def _find_or_stop(self) -> None:
        if self.finder.running:
            self.stop()
            self._sync_note()
        else:
            self.start()

    def _on_progress(self, number: int, done: int, total: int) -> None:
        if number == self.finder.current:
            self.bar.setRange(0, total)
            self.bar.setValue(done)

    def _on_finished(self, number: int, span: Span, people: People | None, error: str) -> None:
        if number != self.finder.current or self._looking_at is None:
            return  # a pass stopped (or of another clip) that had already sent its result
        path = self._looking_at
        self.stop()
        if people is None:
            self.status.post("warning", f"{path.name}: could not find the people ({error})")
            self._sync_note()
            return
        self.model.set_people(people, span)
        count = len(people.people)
        self.status.post(
            "info", f"{path.name}: {count} {'person' if count == 1 else 'people'} found (People)"
        )

    # -- the cards ------------------------------------------------------------------------
    def _on_target(self) -> None:
        """Another clip: the pass of the last one is stopped."""
        self.stop()
        m = self.model
        self.find_button.setEnabled(m.clip is not None and not m.player)
        self._on_people()

    def _on_people(self) -> None:
        if self.model.people is not self._shown:
            self._rebuild()
        for c in self.cards:
            c.sync()
        self._sync_note()

    def _rebuild(self) -> None:
        for c in self.cards:
            self._list.removeWidget(c)
            c.deleteLater()
        self.cards = []
        people = self.model.people
        self._shown = people
        for i, person in enumerate(people.people if people is not None else ()):
            card = PersonCard(self, person)
            self._list.insertWidget(i, card)
            self.cards.append(card)

    def _sync_note(self) -> None:
        m = self.model
        if self.finder.running:
            return
        if m.clip is None or m.player:
            self.note.setText("open a clip to find the people in it")
        elif m.people is None:
            self.note.setText("who goes where: Find people, then give each one a photo")
        elif not m.people.people:
            self.note.setText("no one found in the clip")
        elif m.people_span != m.span_s():
            self.note.setText("the in/out range changed: Find people again to keep the numbers right")
        else:
            mapped = len(m.person_photos)
            self.note.setText(
                f"{mapped} of {len(m.people.people)} mapped; the others are left untouched"
                if mapped
                else "no one mapped yet: the Sources photos go on the faces as usual"
            )
