"""Error types the front ends map to exit codes.

`UserError` (bad input, usage, a budget too small, a full disk) becomes exit 2 with its one-line
message; `Busy` (another process holds the output, the queue or the training run) exit 75, so a
script can tell "try again later" from "this job is wrong"; `Cancelled` becomes exit 130;
`Terminated` (SIGTERM) exit 143; anything else is an internal error (exit 1).
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; its message is one line shown as-is."""


class Busy(UserError):
    """Another process holds what this command needs (an output it renders, a queue it runs, a
    training run); the same command later may succeed. Exit 75 (sysexits' EX_TEMPFAIL)."""


BUSY_EXIT = 75


class MediaError(UserError):
    """A clip or image that cannot be read or written."""


class DiskFull(MediaError):
    """No space (or no inode) left while writing `path`; `hint` says how much a finish needs."""

    def __init__(self, path: object, reason: str, hint: str = "") -> None:
        self.path, self.reason, self.hint = path, reason, hint
        line = f"disk full while writing {path} ({reason})"
        super().__init__(f"{line}; {hint}" if hint else line)


class Terminated(BaseException):
    """SIGTERM, raised on the main thread as Ctrl-C raises KeyboardInterrupt (a BaseException for
    the same reason: `except Exception` does not swallow it); exit 143."""


class Cancelled(Exception):
    """The render was cancelled; nothing half-written is left at the output path."""
