"""`ffdesk bench <name>`: benchmarks that print figures and keep a local history."""

from __future__ import annotations

import argparse
from typing import Any

from ffdesk.commands.registry import needs_subcommand, register_modules

BENCH_MODULES = (
    "io", "encode", "embedded", "memory", "precision", "pipeline", "preview", "training", "compare",
    "quality", "farm", "gpu", "startup", "live", "processors", "budget",
)  # fmt: skip


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("bench", help="run a benchmark and print its figures")
    benches = parser.add_subparsers(dest="bench", parser_class=type(parser))
    register_modules(benches, "ffdesk.bench", BENCH_MODULES)

    needs_subcommand(parser, benches)
