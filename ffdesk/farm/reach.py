"""A farm's head is asked whether it answers before Ray joins it.

Ray's own connect retries for minutes against a head that is not there; a queue (on the command
line or in the desktop app) must instead fail that job in seconds, with one line, and go on.
"""

from __future__ import annotations

import socket

from ffdesk.errors import UserError
from ffdesk.farm.address import FarmAddress

REACH_TIMEOUT_S = 5.0


def check_reachable(farm: FarmAddress, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Nothing when the head's port takes a connection within `timeout_s` (or the farm is a Ray
    started on this machine); else `UserError`: "cannot reach the farm at HOST:PORT: why"."""
    if farm.address is None:
        return
    host, _, port = farm.address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except TimeoutError:
        reason = f"no answer within {timeout_s:g} s"
    except OSError as exc:
        reason = (exc.strerror or str(exc) or type(exc).__name__).lower()
    raise UserError(f"cannot reach the farm at {farm.label}: {reason}")
