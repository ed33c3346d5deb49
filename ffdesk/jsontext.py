"""JSON read from files a user (or anyone who can write a shared folder) may have changed.

Python's JSON parser recurses once per level of nesting: about a thousand levels of `[` exhaust
the interpreter's stack and raise `RecursionError`, which is not a `ValueError`, so every reader
that guards against a damaged file with `except ValueError` crashed instead (and the crash log's
writer with it). `loads` turns that, and any structure nested deeper than `MAX_DEPTH`, into a
`ValueError` such readers already handle.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64
"""Deeper than any file ffdesk writes (its deepest, a render report, has 5 levels)."""


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`; `ValueError` for malformed text and for nesting deeper than `MAX_DEPTH`."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None
    if depth(data) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return data


def depth(data: Any) -> int:
    """How deeply lists and objects nest in `data` (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            return level
        stack.extend((child, level) for child in children)
    return deepest
