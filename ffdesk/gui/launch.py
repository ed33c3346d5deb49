"""Opening a render's output with the desktop's programs: the file in its player, or its folder
with the file selected.

Every attempt ends in a `LaunchResult`, one line for the status area, so a missing or failing
launcher is told to the user rather than only to stderr. A launcher that starts is watched for a
few seconds: one that exits with an error then (`xdg-open` with no program for the file type)
is reported through a callback; one still running (it waits on the player) counts as opened.
The programs are found and started through injectable functions, so tests run none.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from PySide6.QtCore import QObject, QTimer

FILE_MANAGER = "org.freedesktop.FileManager1"
"""The D-Bus service a file manager offers to show (select) files in their folder."""
WATCH_MS = 4000
POLL_MS = 200


@dataclass(frozen=True)
class LaunchResult:
    """What opening something did: `ok`, and the line the status area shows."""

    ok: bool
    message: str


class Running(Protocol):
    """A started launcher process: `poll()` is its exit status, None while it runs."""

    def poll(self) -> int | None: ...


Spawn = Callable[[Sequence[str], IO[bytes]], Running]
"""Start a program (argv) with its stderr going to the given file; OSError when it cannot start."""
Which = Callable[[str], str | None]
ShowItems = Callable[[Path], bool]
"""Ask the desktop's file manager to show a file selected in its folder (False: none offers it)."""
Report = Callable[[LaunchResult], None]


def spawn_detached(argv: Sequence[str], stderr: IO[bytes]) -> Running:
    """Start `argv` in its own session (closing the window does not end the player it opens)."""
    return subprocess.Popen(  # noqa: S603 - a fixed launcher and a path, no shell
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True
    )


def opener_command(
    target: Path, *, which: Which = shutil.which, platform: str = sys.platform
) -> list[str] | None:
    """The command that opens `target` (a file or folder) with the desktop's program for it:
    `open` on macOS, `start` on Windows, `xdg-open` (else `gio open`) elsewhere; None when
    there is none."""
    if platform == "darwin":
        return ["open", str(target)] if which("open") else None
    if platform.startswith("win"):
        return ["cmd", "/c", "start", "", str(target)]  # explorer's own exit status means nothing
    if which("xdg-open"):
        return ["xdg-open", str(target)]
    if which("gio"):
        return ["gio", "open", str(target)]
    return None


def what_opens(target: Path) -> str:
    """How a status line names what was to be opened: ".mp4 files", "folders", "this file"."""
    if target.is_dir():
        return "folders"
    return f"{target.suffix} files" if target.suffix else "this file"


def show_items_over_dbus(path: Path) -> bool:
    """Ask `org.freedesktop.FileManager1` on the session bus to show `path` selected; False when
    there is no session bus or no file manager offers (or can be started to offer) the service."""
    from PySide6.QtCore import QUrl
    from PySide6.QtDBus import QDBusConnection, QDBusMessage

    bus = QDBusConnection.sessionBus()
    names = bus.interface() if bus.isConnected() else None
    if names is None:
        return False
    offered = names.isServiceRegistered(FILE_MANAGER).value() or FILE_MANAGER in (
        names.activatableServiceNames().value() or []
    )
    if not offered:
        return False
    call = QDBusMessage.createMethodCall(
        FILE_MANAGER, "/org/freedesktop/FileManager1", FILE_MANAGER, "ShowItems"
    )
    call.setArguments([[QUrl.fromLocalFile(str(path)).toString()], ""])
    return bool(bus.send(call))


class DesktopLauncher(QObject):
    """Opens outputs and their folders; each call returns its `LaunchResult` at once, and a
    launcher that fails within `watch_ms` after it started is reported later through `report`."""

    def __init__(
        self,
        report: Report,
        parent: QObject | None = None,
        *,
        spawn: Spawn = spawn_detached,
        which: Which = shutil.which,
        show_items: ShowItems = show_items_over_dbus,
        platform: str = sys.platform,
        watch_ms: int = WATCH_MS,
    ) -> None:
        super().__init__(parent)
        self._report = report
        self._spawn = spawn
        self._which = which
        self._show_items = show_items
        self._platform = platform
        self._watch_ms = watch_ms

    def open_file(self, path: Path) -> LaunchResult:
        """Open `path` with the system's program for its type (a video in the player)."""
        if not path.exists():
            return LaunchResult(False, f"{path.name} is not there (moved or deleted?): {path}")
        return self._launch(path, f"opening {path.name}")

    def reveal(self, path: Path) -> LaunchResult:
        """Show `path` in its folder: selected, where the file manager offers that over D-Bus;
        else the folder opened. A missing `path` opens the folder it would be in, if that exists."""
        folder = path.parent
        if not folder.is_dir():
            return LaunchResult(False, f"{folder} is not there (moved or deleted?)")
        if path.exists() and self._show_items(path):
            return LaunchResult(True, f"showing {path.name} in {folder.name or folder}")
        return self._launch(folder, f"opening the folder {folder}")

    def _launch(self, target: Path, done: str) -> LaunchResult:
        argv = opener_command(target, which=self._which, platform=self._platform)
        if argv is None:
            return LaunchResult(
                False, f"no program to open {what_opens(target)}: install xdg-utils (xdg-open)"
            )
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed when the watch ends
        try:
            process = self._spawn(argv, errors)
        except OSError as exc:
            errors.close()
            return LaunchResult(
                False, f"no program to open {what_opens(target)}: {argv[0]}: {exc.strerror or exc}"
            )
        _ExitWatch(self, process, errors, argv[0], what_opens(target), self._report, self._watch_ms)
        return LaunchResult(True, done)


class _ExitWatch(QObject):
    """Polls one launcher until it exits or `watch_ms` pass; an exit with an error is reported
    with the last line it wrote to stderr. Deletes itself when done."""

    def __init__(
        self,
        parent: QObject,
        process: Running,
        errors: IO[bytes],
        program: str,
        what: str,
        report: Report,
        watch_ms: int,
    ) -> None:
        super().__init__(parent)
        self._process, self._errors, self._program, self._what = process, errors, program, what
        self._report = report
        self._left = max(1, watch_ms // POLL_MS)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._poll)
        self._timer.start()

    def _poll(self) -> None:
        status = self._process.poll()
        self._left -= 1
        if status is None and self._left > 0:
            return
        self._timer.stop()
        if status:
            self._report(LaunchResult(False, f"no program to open {self._what}: {self._why(status)}"))
        self._errors.close()
        self.deleteLater()

    def _why(self, status: int) -> str:
        self._errors.seek(0)
        lines = [ln.strip() for ln in self._errors.read(64 * 1024).decode("utf-8", "replace").splitlines()]
        last = next((ln for ln in reversed(lines) if ln), "")
        return f"{self._program} exited with status {status}" + (f" ({last[:160]})" if last else "")
