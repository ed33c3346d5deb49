"""`ffdesk bench <name>`: benchmarks that print figures and keep a local history."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

BENCH_MODULES = (
    "io", "encode", "embedded", "memory", "precision", "pipeline", "preview", "training", "compare",
)  # fmt: skip


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("bench", help="run a benchmark and print its figures")
    benches = parser.add_subparsers(dest="bench", parser_class=type(parser))
    for name in BENCH_MODULES:
        try:
            module = importlib.import_module(f"ffdesk.bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ffdesk.bench.{name}":
                continue
            raise
        module.register(benches)

    def usage(_args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=usage)
