"""The no-face ticks come from a scan of the whole clip, not from the frames already visited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ffdesk.media.synth import synth_clip


@pytest.fixture(autouse=True)
def _scan_at_the_tests_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan thread lowers its own priority (nice 10: it yields to the window). With the test
    workers keeping every core busy it got a few percent of one, and a scan of 2 s of CPU took
    over 30 s (3 runs of 3 under load): here it runs at the test's priority, which changes when
    the scan ends, not what it finds."""
    from ffdesk.gui import face_scan

    monkeypatch.setattr(face_scan, "lower_priority", lambda: None)


@pytest.fixture(scope="module")
def faceless_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clips") / "pattern.mp4"
    synth_clip(path, width=160, height=96, fps=10.0, frames=20)
    return path


def test_every_faceless_frame_is_marked_without_visiting_it(
    window: Any, qtbot: Any, faceless_clip: Path
) -> None:
    assert window.open_clip(faceless_clip)
    with qtbot.waitSignal(window.face_scanner.finished, timeout=30000):
        pass
    s = window.session
    assert s.position == 0
    assert sorted(s.markers) == list(range(20))
    assert set(s.markers.values()) == {"noface"}
    assert any("no face found in 20 of 20" in e.text for e in window.status.entries)


def test_a_clip_with_a_face_gets_no_ticks(window: Any, qtbot: Any, tiny_clip: Path) -> None:
    assert window.open_clip(tiny_clip)
    with qtbot.waitSignal(window.face_scanner.finished, timeout=30000):
        pass
    qtbot.waitUntil(lambda: window.session.preview is not None, timeout=30000)
    assert window.session.markers == {}  # no source: the preview finds no face, and says nothing of it


def test_opening_another_clip_drops_the_first_scan(
    window: Any, qtbot: Any, faceless_clip: Path, tiny_clip: Path
) -> None:
    assert window.open_clip(faceless_clip)
    assert window.open_clip(tiny_clip)
    with qtbot.waitSignal(
        window.face_scanner.finished, timeout=30000, check_params_cb=lambda path, *_: path == tiny_clip
    ):
        pass
    assert window.session.markers == {}  # nothing of the first clip's scan reached the second
