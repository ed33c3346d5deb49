"""Error types the front ends map to exit codes.

`UserError` (bad input, usage, a budget too small, a full disk) becomes exit 2 with its one-line
message; `Cancelled` becomes exit 130; anything else is an internal error (exit 1).
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; its message is one line shown as-is."""


class MediaError(UserError):
    """A clip or image that cannot be read or written."""


class Cancelled(Exception):
    """The render was cancelled; nothing half-written is left at the output path."""
