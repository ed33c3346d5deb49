"""How commands (and `bench` subcommands) add their parsers: one module each, found by name."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

from ffdesk.errors import UserError


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


def needs_subcommand(parser: argparse.ArgumentParser, subparsers: Any) -> None:
    """`ffdesk NAME` alone (a command that is a group of subcommands) is a usage error: one line
    on stderr naming them, exit 2, nothing on stdout (a script reading it meets no help text)."""
    names = ", ".join(subparsers.choices)
    command = parser.prog.removeprefix("ffdesk").strip()

    def usage(_args: argparse.Namespace) -> int:
        raise UserError(f"{command}: name one of {names} (ffdesk {command} --help says what each does)")

    parser.set_defaults(func=usage)
