"""Benchmarks: one module per bench, each exposing `register(subparsers)` like the commands.

Every bench prints its figures, writes JSON with `--json FILE`, and appends a record to the local
history (see `history.py`) so `ffdesk bench compare` can show the change since the previous run.
"""
