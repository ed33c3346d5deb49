"""A clip's chapters (as FFmpeg's MP4 and Matroska muxers write them, from an editor's chapter
list) show on the timeline: a flag on the ruler where each starts, its title under the pointer
and in the timeline's description, and Up/Down stop at them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from ffdesk.gui.models import ClipInfo
from ffdesk.media.probe import Chapter, probe

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs the ffmpeg program")

CHAPTER_LIST = """;FFMETADATA1
[CHAPTER]
TIMEBASE=1/1000
START=0
END=1000
title=Intro
[CHAPTER]
TIMEBASE=1/1000
START=1000
END=1500
title=The  interview
[CHAPTER]
TIMEBASE=1/1000
START=1500
END=2000
title=Outro
[CHAPTER]
TIMEBASE=1/1000
START=9000
END=10000
title=Past the end
"""


@pytest.fixture(scope="module", params=["mp4", "mkv"])
def chaptered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two seconds at 24 frames/s with three chapters, and a fourth past its end (a clip cut
    shorter than its edit's chapter list)."""
    folder = tmp_path_factory.mktemp("chapters")
    (folder / "chapters.txt").write_text(CHAPTER_LIST)
    out = folder / f"clip.{request.param}"
    subprocess.run(
        [
            *("ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=96x64:rate=24:duration=2"),
            *("-i", str(folder / "chapters.txt"), "-map", "0", "-map_metadata", "1", "-map_chapters", "1"),
            *("-c:v", "libx264", "-pix_fmt", "yuv420p", str(out)),
        ],
        check=True,
        timeout=60,
    )
    return out


def test_probe_and_the_clip_read_the_chapters(chaptered: Path) -> None:
    assert probe(chaptered).chapters == (
        Chapter(0.0, "Intro"),
        Chapter(1.0, "The interview"),
        Chapter(1.5, "Outro"),
    )  # the one past the end left out, and MP4's chapters (its list and its track) each once
    clip = ClipInfo.probe(chaptered)
    assert clip.chapter_frames() == ((0, "Intro"), (24, "The interview"), (36, "Outro"))
    assert clip.chapter_at(23) == (1, "Intro") and clip.chapter_at(30) == (2, "The interview")
    assert clip.chapter_at(47) == (3, "Outro")


def test_a_chapter_without_a_title_is_there_untitled(tmp_path: Path) -> None:
    (tmp_path / "chapters.txt").write_text(";FFMETADATA1\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=500\nEND=1000\n")
    out = tmp_path / "untitled.mkv"
    subprocess.run(
        [
            *("ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=96x64:rate=24:duration=1"),
            *("-i", str(tmp_path / "chapters.txt"), "-map", "0", "-map_metadata", "1", "-map_chapters", "1"),
            *("-c:v", "libx264", "-pix_fmt", "yuv420p", str(out)),
        ],
        check=True,
        timeout=60,
    )
    assert probe(out).chapters == (Chapter(0.5, ""),)
    assert ClipInfo.probe(out).chapter_at(20) == (1, "")


def test_the_timeline_shows_the_chapters_and_up_down_stop_at_them(qtbot, window, chaptered: Path) -> None:  # type: ignore[no-untyped-def]
    from ffdesk.gui.timeline import CHAPTER_COLOUR, TRACK_TOP

    assert window.open_clip(chaptered)
    window.show()
    qtbot.waitExposed(window)
    window.windowHandle().requestActivate()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    s = window.session
    bar = window.timeline.bar
    s.set_position(0)
    window.preview_view.canvas.setFocus()
    qtbot.waitUntil(window.preview_view.canvas.hasFocus)
    stops = []
    for _ in range(3):
        QTest.keyClick(window.preview_view.canvas, Qt.Key.Key_Down)
        stops.append(s.position)
    assert stops == [24, 36, 47]  # two chapters, then the end
    s.set_position(30)
    assert "chapter 2 of 3, The interview" in bar.accessibleDescription()
    x = bar.x_of(24)
    assert bar.chapter_near(x + 2) == (2, "The interview") and bar.chapter_near(bar.x_of(12)) is None
    at = QPointF(x, 5)
    move = QMouseEvent(
        QEvent.Type.MouseMove,
        at,
        bar.mapToGlobal(at),
        Qt.MouseButton.NoButton,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(bar, move)
    assert bar.toolTip() == "chapter 2: The interview"
    shown = bar.grab().toImage()
    flag = shown.pixelColor(round(x) + 1, TRACK_TOP - 6)
    assert (flag.red(), flag.green(), flag.blue()) == (
        CHAPTER_COLOUR.red(),
        CHAPTER_COLOUR.green(),
        CHAPTER_COLOUR.blue(),
    )
