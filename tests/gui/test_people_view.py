"""The People dock: find the people of a clip, put a photo on one of them, and the job, the
preview, the timeline and the queue follow."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from ffdesk.faces.analyser import FaceAnalyser
from ffdesk.gui.people_view import seen_runs
from ffdesk.gui.queue_view import source_text
from ffdesk.pipeline.job import FaceMapping
from ffdesk.runtime.resources import resource_path
from tests.faces.two_shot import two_shot

GRACE = resource_path("sample", "grace_hopper.jpg").resolve()
FIND_S = 60_000


@pytest.fixture(autouse=True)
def _pass_at_the_tests_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass's thread lowers its own priority (nice 10: it yields to the window). With the test
    workers keeping every core busy it got a few percent of one, and finding the people of 6
    frames took 20-30 s and once more than `FIND_S`: here it runs at the test's priority, which
    changes when the pass ends, not what it finds."""
    from ffdesk.faces import scan

    monkeypatch.setattr(scan, "lower_priority", lambda: None)


@pytest.fixture(scope="module")
def two_people(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The astronaut on the left, Grace Hopper on the right, 6 frames."""
    return two_shot(tmp_path_factory.mktemp("people") / "two.mp4", frames=6)


def find_people(window: Any, qtbot: Any) -> Any:
    view = window.people_view
    assert view.start()
    qtbot.waitUntil(lambda: window.session.people is not None, timeout=FIND_S)
    # the pass's thread sends its people, then ends: it may not have ended when they are shown
    qtbot.waitUntil(lambda: not view.finder.running, timeout=10000)
    return window.session.people


def drop(card: Any, paths: list[Path]) -> QDropEvent:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    event = QDropEvent(
        QPointF(5, 5),
        Qt.DropAction.CopyAction | Qt.DropAction.MoveAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    event.setDropAction(Qt.DropAction.MoveAction)
    card.dropEvent(event)
    return event


def test_the_two_people_get_a_card_and_a_band_each(window: Any, qtbot: Any, two_people: Path) -> None:
    assert window.open_clip(two_people)
    bar_height = window.timeline.bar.minimumHeight()
    people = find_people(window, qtbot)
    view = window.people_view
    assert [c.index for c in view.cards] == [0, 1] == [p.index for p in people.people]
    assert view.cards[0].title.text() == "<b>person 1</b>"
    assert view.cards[1].where.text() == "frames 1–6\n6 faces"  # as the preview counts them
    assert view.cards[1].when.text() == "00:00:00:00 → 00:00:00:05"
    assert "leave untouched" in view.cards[0].photos.text()
    assert not view.cards[0].clear.isEnabled()
    assert window.timeline.bar.minimumHeight() > bar_height  # room for the two bands
    assert any("2 people found" in e.text for e in window.status.entries)
    assert window.session.build_job().face_map == ()  # no photo given: nobody is mapped


def test_a_photo_on_person_one_maps_that_person_only(
    window: Any, qtbot: Any, two_people: Path, face_photo: Path, tmp_path: Path
) -> None:
    assert window.open_clip(two_people)
    window.add_source(face_photo)
    find_people(window, qtbot)
    view = window.people_view
    asked: list[str] = []

    def chooser(_parent: Any, title: str) -> list[Path]:
        asked.append(title)
        return [GRACE]

    view.choose_photos = chooser
    view.cards[0].choose.click()
    assert asked == ["Photos to put on person 1"]
    job = window.session.build_job()
    people = window.session.people
    seen = (tuple(float(v) for v in people.people[0].centroid), people.recognizer)
    assert job.face_map == (FaceMapping(0, (GRACE,), *seen),)  # what the pass saw: no pass again
    assert job.sources == ()  # the Sources photo is not put on anyone else
    assert "grace_hopper.jpg" in view.cards[0].photos.text() and view.cards[0].clear.isEnabled()

    # a second photo dropped on the card is added (taken as a copy); a clip dropped there is not
    second = tmp_path / "grace2.jpg"
    shutil.copy(GRACE, second)
    assert drop(view.cards[0], [second, two_people]).dropAction() == Qt.DropAction.CopyAction
    assert window.session.build_job().face_map == (FaceMapping(0, (GRACE, second.resolve()), *seen),)
    assert "(averaged)" in view.cards[0].photos.text()

    window.add_to_queue()
    entry = window.queue.entries()[-1]
    assert source_text(entry, window.queue.reencodes_only(entry.job)) == "1 person mapped"
    assert not any("only re-encodes" in e.text for e in window.status.entries)

    view.cards[0].clear.click()
    assert window.session.build_job().face_map == ()
    assert window.session.build_job().sources == (face_photo.resolve(),)


def _change(a: np.ndarray, b: np.ndarray, box: tuple[float, float, float, float]) -> float:
    x1, y1, x2, y2 = (round(v) for v in box)
    x1, y1 = max(0, x1), max(0, y1)
    return float(np.abs(a[y1:y2, x1:x2].astype(np.int16) - b[y1:y2, x1:x2].astype(np.int16)).mean())


@pytest.mark.slow
def test_the_preview_swaps_the_mapped_person_only(
    window: Any, qtbot: Any, two_people: Path, analyser: FaceAnalyser
) -> None:
    assert window.open_clip(two_people)
    find_people(window, qtbot)
    results: list[Any] = []
    window.session.previewChanged.connect(results.append)
    window.session.set_person_photos(0, [GRACE])

    def left_face_changed() -> bool:
        r = results[-1] if results else None
        if r is None:
            return False
        faces = sorted(analyser.analyse(r.original), key=lambda f: f.bbox[0])
        return len(faces) == 2 and _change(r.original, r.processed, faces[0].bbox) > 5.0

    qtbot.waitUntil(left_face_changed, timeout=FIND_S)
    r = results[-1]
    left, right = sorted(analyser.analyse(r.original), key=lambda f: f.bbox[0])
    assert _change(r.original, r.processed, right.bbox) < 1.0  # Grace Hopper is left untouched
    assert not any("preview:" in e.text for e in window.status.entries)


def test_another_clip_cancels_the_pass(window: Any, qtbot: Any, two_people: Path, tiny_clip: Path) -> None:
    assert window.open_clip(two_people)
    view = window.people_view
    assert view.start() and view.finder.running
    assert view.find_button.text() == "Stop"
    assert window.open_clip(tiny_clip)
    assert not view.finder.running and view.find_button.text() == "Find people"
    qtbot.wait(300)
    assert window.session.people is None and view.cards == []
    assert not any("found (People)" in e.text for e in window.status.entries)


def test_a_failed_pass_is_one_status_line(window: Any, qtbot: Any, two_people: Path, tmp_path: Path) -> None:
    clip = tmp_path / "gone.mp4"
    shutil.copy(two_people, clip)
    assert window.open_clip(clip)
    clip.write_bytes(b"not a clip any more")
    before = len(window.status.entries)
    assert window.people_view.start()
    qtbot.waitUntil(lambda: not window.people_view.finder.running, timeout=FIND_S)
    qtbot.waitUntil(lambda: window.people_view.find_button.text() == "Find people", timeout=FIND_S)
    new = [e for e in window.status.entries[before:] if "people" in e.text]
    assert len(new) == 1 and new[0].level == "warning"
    assert "could not find the people" in new[0].text and "Traceback" not in new[0].text
    assert window.session.people is None


def test_a_changed_range_asks_for_another_pass_and_the_photos_follow_their_person(
    window: Any, qtbot: Any, two_people: Path
) -> None:
    assert window.open_clip(two_people)
    find_people(window, qtbot)
    s = window.session
    s.set_person_photos(1, [GRACE])
    s.set_range(3, None)
    assert "Find people again" in window.people_view.note.text()
    first = s.people
    window.people_view.start()
    qtbot.waitUntil(lambda: s.people is not first, timeout=FIND_S)
    assert s.people_span == s.span_s() and s.person_photos == {1: (GRACE,)}
    assert s.people.people[1].frames[0] == 3
    assert "1 of 2 mapped" in window.people_view.note.text()


def test_seen_runs() -> None:
    assert seen_runs([0, 1, 2, 7], 1) == [(0, 2), (7, 7)]
    assert seen_runs([0, 3, 6, 15], 3) == [(0, 8), (15, 17)]
    assert seen_runs([], 2) == []


@pytest.mark.slow
def test_live_swaps_the_mapped_person_only(
    window: Any, qtbot: Any, two_people: Path, face_photo: Path, analyser: FaceAnalyser
) -> None:
    """The people the clip's pass found are told apart on a camera too (here the clip played
    as one): the mapped person gets the photo, the other keeps their face, and the Sources
    photo goes on nobody."""
    assert window.open_clip(two_people)
    window.add_source(face_photo)
    find_people(window, qtbot)
    window.session.set_person_photos(0, [GRACE])
    live = window.live_view
    live.use_clip(two_people)
    plan = live.plan()
    assert plan is not None and plan.sources == () and [e.person for e in plan.face_map] == [0]
    assert any("live swaps only the person mapped in People" in e.text for e in window.status.entries)
    assert live.start()
    qtbot.waitUntil(lambda: "frames/s" in live.figures.text(), timeout=FIND_S)  # live frames shown

    def only_the_left_face_changed() -> bool:
        shown = window.session.preview
        if shown is None:
            return False
        faces = sorted(analyser.analyse(shown.original), key=lambda f: f.bbox[0])
        if len(faces) != 2:
            return False
        left, right = (_change(shown.original, shown.processed, f.bbox) for f in faces)
        return left > 5.0 and right == 0.0

    qtbot.waitUntil(only_the_left_face_changed, timeout=FIND_S)
    live.stop_button.click()
    qtbot.waitUntil(lambda: not live.running, timeout=20000)
    # the capture thread ends after the frame it is reading (a clip's frame decoded on a loaded
    # machine can outlast the session's 5 s wait for it)
    qtbot.waitUntil(lambda: not any(t.name == "ffdesk-capture" for t in threading.enumerate()), timeout=30000)
    assert [e.text for e in window.status.entries if e.level == "error"] == []
