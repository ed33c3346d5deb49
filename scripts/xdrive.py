"""Drive the desktop app in a real X window, as a user would: keys, clicks, drags and screenshots.

    .venv/bin/python scripts/xdrive.py [--home DIR] [--size 1600x1000] \
        --do "sleep 4" --do "key space" --do "click 700 930" --do "shot /tmp/a.png" -- ARGS...

Starts Xvfb on a free display with openbox (so the window gets focus and a frame), runs
`ffdesk ARGS` (e.g. `gui clip.mp4`) with its settings, data and cache under `--home` (a new
temporary folder by default), waits for its window, does each action in turn, then ends them all.
The `--do` options go before `--`: what follows it is ffdesk's. An app that exits before its
window appears (bad arguments, a crash) is one line with the last line it wrote to stderr.
Actions: `sleep S`, `key KEY...` (xdotool key names: space, Home, shift+Right, ctrl+z),
`type TEXT`, `click X Y`, `drag X1 Y1 X2 Y2`, `move X Y`, `shot FILE` (the whole screen),
`geometry` (prints the window's position and size). Needs Xvfb, openbox, xdotool and
imagemagick (apt-get install -y xvfb openbox xdotool imagemagick x11-utils). Not part of the test suite:
a check to look at.
"""

from __future__ import annotations

import argparse
import collections
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

WINDOW_WAIT_S = 60.0
"""How long the app may take to show its window."""


def wait_for_window_manager(env: dict[str, str], timeout_s: float = 10.0) -> None:
    """Wait until the window manager has announced itself on the root window (EWMH's
    _NET_SUPPORTING_WM_CHECK, read with xprop), so the app's window is framed and placed as on a
    desktop; a window mapped before that comes up without a frame. Without xprop (x11-utils),
    a second's wait; gives up quietly after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            probe = subprocess.run(
                ["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
        except FileNotFoundError:
            time.sleep(1.0)
            return
        if probe.returncode == 0 and "window id" in probe.stdout:
            return
        time.sleep(0.1)


def free_display() -> int:
    for n in range(90, 140):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    raise SystemExit("xdrive: no free X display between :90 and :139")


def xdo(env: dict[str, str], *args: str) -> str:
    out = subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


class StderrTail:
    """The app's stderr, read on a thread: held back until its window is up (an app that exits
    before then is summed up in one line), passed through from then on."""

    def __init__(self, stream: IO[bytes], keep: int = 40) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)
        self._held: list[str] = []
        self._passing = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            with self._lock:
                self.lines.append(line)
                if self._passing:
                    print(line, file=sys.stderr, flush=True)
                else:
                    self._held.append(line)

    def pass_through(self) -> None:
        """Print what was held back, and every line from now on."""
        with self._lock:
            for line in self._held:
                print(line, file=sys.stderr)
            self._held, self._passing = [], True

    def last_line(self, wait_s: float = 2.0) -> str:
        """The last line that says something (after the stream has ended, or `wait_s`)."""
        self._thread.join(wait_s)
        with self._lock:
            said = [line.strip() for line in self.lines if line.strip()]
        return said[-1] if said else "(nothing on stderr)"


def wait_for_window(
    env: dict[str, str], app: subprocess.Popen[bytes], title: str, timeout_s: float = WINDOW_WAIT_S
) -> str | None:
    """The id of the app's first visible window named `title`; None when the app exited first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if app.poll() is not None:
            return None
        found = xdo(env, "search", "--onlyvisible", "--name", title).splitlines()
        if found:
            return found[0]
        time.sleep(0.2)
    raise SystemExit(f"xdrive: no window named {title!r} after {timeout_s:.0f} s")


def act(action: str, env: dict[str, str], window: str) -> None:
    word, *rest = shlex.split(action)
    if word == "sleep":
        time.sleep(float(rest[0]))
    elif word == "key":
        xdo(env, "key", "--delay", "60", *rest)
    elif word == "type":
        xdo(env, "type", "--delay", "30", " ".join(rest))
    elif word == "move":
        xdo(env, "mousemove", rest[0], rest[1])
    elif word == "click":
        xdo(env, "mousemove", rest[0], rest[1])
        time.sleep(0.1)
        xdo(env, "click", "1")
    elif word == "drag":
        x1, y1, x2, y2 = (int(v) for v in rest)
        xdo(env, "mousemove", str(x1), str(y1))
        xdo(env, "mousedown", "1")
        for k in range(1, 11):
            xdo(env, "mousemove", str(x1 + (x2 - x1) * k // 10), str(y1 + (y2 - y1) * k // 10))
            time.sleep(0.03)
        xdo(env, "mouseup", "1")
    elif word == "shot":
        subprocess.run(["import", "-window", "root", rest[0]], env=env, check=False, timeout=60)
        print(f"xdrive: saved {rest[0]}")
    elif word == "geometry":
        print(xdo(env, "getwindowgeometry", window))
    else:
        raise SystemExit(f"xdrive: unknown action {action!r}")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", type=Path, default=None, help="settings/data/cache folder (default: a new one)")
    p.add_argument("--size", default="1600x1000")
    p.add_argument("--do", action="append", default=[], help="an action (repeatable)")
    p.add_argument("--title", default="ffdesk", help="window title to wait for")
    p.add_argument("args", nargs="*", help="arguments of ffdesk (after --)")
    a = p.parse_args(argv)
    home = a.home or Path(tempfile.mkdtemp(prefix="xdrive."))
    n = free_display()
    env = dict(os.environ)
    env.update(
        DISPLAY=f":{n}",
        QT_QPA_PLATFORM="xcb",
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CACHE_HOME=str(home / "cache"),
    )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(
            subprocess.Popen(
                ["Xvfb", f":{n}", "-screen", "0", f"{a.size}x24", "-nolisten", "tcp"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        time.sleep(1.0)
        procs.append(
            subprocess.Popen(["openbox"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
        wait_for_window_manager(env)
        exe = Path(sys.executable).with_name("ffdesk")
        t0 = time.monotonic()
        app = subprocess.Popen([str(exe), *a.args], env=env, stderr=subprocess.PIPE)
        procs.append(app)
        assert app.stderr is not None
        stderr = StderrTail(app.stderr)
        win = wait_for_window(env, app, a.title)
        if win is None:
            said = stderr.last_line()
            print(f"xdrive: ffdesk exited ({app.returncode}) before its window appeared: {said}")
            return 1
        stderr.pass_through()
        print(f"xdrive: window after {time.monotonic() - t0:.1f} s on :{n}, home {home}")
        xdo(env, "windowactivate", "--sync", win)
        for action in a.do:
            if app.poll() is not None:
                print(f"xdrive: the app exited ({app.returncode}) before {action!r}: {stderr.last_line()}")
                return 1
            act(action, env, win)
        return 0
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
