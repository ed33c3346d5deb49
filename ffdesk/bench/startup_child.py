"""The measured process of `ffdesk bench startup`: start the app on a clip, time it, print JSON.

    python -m ffdesk.bench.startup_child CLIP PHOTO SCRUBS

Times are from the process's start (as the kernel recorded it), so they include the interpreter
and every import, as a user's launch does.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _since_start() -> float:
    import psutil

    return time.time() - psutil.Process().create_time()


def main(argv: list[str]) -> int:
    clip, photo, scrubs = Path(argv[0]), Path(argv[1]), int(argv[2])
    from ffdesk.gui.app import application
    from ffdesk.gui.main_window import MainWindow
    from ffdesk.runtime.env import RuntimeEnv

    app = application()
    window = MainWindow(
        env=RuntimeEnv.from_system(), telemetry=True, autostart=False, confirm_close=lambda: True
    )
    window.show()
    window.open_clip(clip)
    app.processEvents()
    window_s = _since_start()
    session = window.session
    if not _wait(app, lambda: session.preview is not None, 60):
        raise SystemExit("no first picture in 60 s")
    first_picture_s = _since_start()

    window.add_source(photo)
    _wait(app, lambda: bool(session.sources) and not session.sources[0].pending, 60)
    _wait(app, lambda: session.preview is not None and bool(session.preview.stage_ms), 60)
    times: list[float] = []
    last = max(1, session.last_index)
    for k in range(scrubs):
        target = (k * 7919 + last // 3) % last
        if target == session.position:
            target = (target + 1) % last
        t0 = time.perf_counter()
        session.set_position(target)
        if _wait(app, lambda t=target: session.preview is not None and session.preview.index == t, 30):
            times.append((time.perf_counter() - t0) * 1000)
    window.shutdown()
    print(json.dumps({"window_s": window_s, "first_picture_s": first_picture_s, "scrub_ms": times}))
    return 0


def _wait(app: object, done: object, timeout_s: float) -> bool:
    from PySide6.QtWidgets import QApplication

    assert isinstance(app, QApplication) and callable(done)
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        app.processEvents()
        time.sleep(0.002)
    return True


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
