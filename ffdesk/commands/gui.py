"""`ffdesk gui [CLIP]`: open the desktop app (plain `ffdesk` does the same)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ffdesk.commands.argtypes import given_path


def display_available() -> bool:
    """Whether a window can open: a display on Linux (or a Qt platform chosen explicitly)."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("gui", help="open the desktop app")
    parser.add_argument("clip", nargs="?", type=given_path, help="a clip (or image) to open as the target")
    parser.add_argument(
        "--source", action="append", type=given_path, default=[], help="a source-face photo (repeatable)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ffdesk.errors import UserError

    for p in [args.clip, *args.source]:
        if p is not None and not Path(p).exists():
            raise UserError(f"{p}: no such file")
    if not display_available():
        raise UserError(
            "no display for the desktop app (DISPLAY and WAYLAND_DISPLAY are unset); "
            "headless work runs with `ffdesk render`, or set QT_QPA_PLATFORM=offscreen"
        )
    try:
        from ffdesk.gui.app import run_gui
    except ImportError as exc:  # a system library Qt needs is missing
        raise UserError(f"the desktop app cannot start: {exc}") from exc
    from ffdesk.commands.runtime_env import runtime_env

    return run_gui(args.clip, tuple(args.source), env=runtime_env(args))
