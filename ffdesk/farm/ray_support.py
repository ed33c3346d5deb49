"""Ray is an optional extra: import it only when a farm is used, with a one-line hint if absent."""

from __future__ import annotations

from types import ModuleType

from ffdesk.errors import UserError

INSTALL_HINT = "pip install 'ffdesk[farm]'"
NAMESPACE = "ffdesk"
"""The Ray namespace of every ffdesk actor (workers, the board)."""


def require_ray(what: str = "--farm") -> ModuleType:
    """The `ray` module; `UserError` (one line, exit 2) when it is not installed."""
    try:
        import ray
    except ImportError:
        raise UserError(f"{what} needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray
