"""`ffdesk farm status ADDR`: the render farm's nodes, workers and jobs."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ffdesk.commands.registry import needs_subcommand
from ffdesk.terminal_text import terminal_line

if TYPE_CHECKING:
    from ffdesk.farm.status import FarmStatus


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("farm", help="the render farm (Ray): its state")
    farm = parser.add_subparsers(dest="farm_command", parser_class=type(parser))
    status = farm.add_parser("status", help="nodes, workers (what each renders) and finished jobs")
    status.add_argument("address", metavar="ADDR", help="HEAD:PORT of the Ray head (or auto: RAY_ADDRESS)")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(func=run_status)

    needs_subcommand(parser, farm)


def run_status(args: argparse.Namespace) -> int:
    from ffdesk.farm.ray_support import require_ray

    require_ray("farm status")
    from ffdesk.errors import UserError
    from ffdesk.farm.address import parse_farm
    from ffdesk.farm.status import farm_status

    farm = parse_farm(args.address, what="farm address")
    if farm.address is None:  # it would start a Ray of its own just to find it has run nothing
        raise UserError(
            f"farm address {args.address!r}: no running farm to ask (RAY_ADDRESS is not set); "
            "give the head's HOST:PORT"
        )
    status = farm_status(farm)
    if args.json:
        print(json.dumps(status.as_dict(), indent=2, default=str))
    else:
        print(status_text(status))
    return 0


def status_text(status: FarmStatus) -> str:
    """`farm status`'s lines for a terminal: what the farm's board says (anyone who can reach the
    farm can write it) with its control characters shown as visible escapes."""
    from ffdesk.farm.status import status_lines

    return "\n".join(terminal_line(line) for line in status_lines(status))
