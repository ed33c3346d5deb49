"""How commands (and `bench` subcommands) add their parsers: one module each, found by name."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any


def register_modules(sub: Any, package: str, names: Sequence[str]) -> None:
    """Let each module `package.name` that exists add its parser(s) with `register(sub)`."""
    for name in names:
        try:
            module = importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{package}.{name}":
                continue
            raise
        module.register(sub)
