"""The runtime environment a command runs with: built once by `ffdesk.cli.main` for the call."""

from __future__ import annotations

import argparse

from ffdesk.runtime.env import RuntimeEnv

ATTRIBUTE = "runtime_env"


def runtime_env(args: argparse.Namespace) -> RuntimeEnv:
    """The environment `ffdesk.cli.main` attached to `args` (built now for a handler called
    without it)."""
    env = getattr(args, ATTRIBUTE, None)
    return env if isinstance(env, RuntimeEnv) else RuntimeEnv.from_system()
