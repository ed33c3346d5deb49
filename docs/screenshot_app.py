"""Drive the desktop app for the README screenshot: open a clip and a source, queue a render.

/work/shared/tools/xshot docs/screenshot.png 40 .venv/bin/python docs/screenshot_app.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import cv2
from PySide6.QtCore import QTimer

from ffdesk.gui.app import application
from ffdesk.gui.main_window import MainWindow, open_settings
from ffdesk.media.images import read_image
from ffdesk.media.synth import synth_clip

ROOT = Path(__file__).resolve().parents[1]
work = Path(tempfile.mkdtemp(prefix="ffdesk-shot-"))
clip = work / "interview.mp4"
face = cv2.resize(read_image(ROOT / "resources/sample/astronaut.jpg")[0:300, 120:400], (280, 300))
synth_clip(clip, width=1280, height=720, fps=25.0, frames=100, face_image=face, gop=25)
app = application()
window = MainWindow(settings=open_settings(work / "gui.ini"), queue_path=work / "queue.json")
window.resize(1600, 1000)
window.move(0, 0)
window.show()
window.add_source(ROOT / "resources/sample/grace_hopper.jpg")
window.open_clip(clip)
window.session.set_split(0.36)
window.session.update_settings(output_dir=str(work), mode="final")
window.session.set_in(10)
window.session.set_out(80)
QTimer.singleShot(3000, window.add_to_queue)
QTimer.singleShot(4000, lambda: window.session.set_position(24))
sys.exit(app.exec())
