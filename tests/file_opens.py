"""Counting the opens of one file by Python's `open` (ffdesk's reads and Pillow's), for the tests
that prove a file is read once."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pytest


def count_opens(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[str]:
    """The modes `path` is opened with from now on (until `monkeypatch` is undone)."""
    opened: list[str] = []
    real_open = builtins.open
    wanted = Path(path).resolve()

    def counted(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | Path) and Path(file).resolve() == wanted:
            opened.append(mode)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counted)
    return opened
