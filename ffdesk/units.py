"""Parsing of sizes and times typed by users."""

from __future__ import annotations

import math
import re

from ffdesk.errors import UserError

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?)(b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(text: str) -> int:
    """Bytes from "6GiB", "512MB", "1.5G", "4096" (K/M/G/T are binary unless written kB/MB/GB)."""
    m = _SIZE.match(str(text))
    if not m and str(text).strip().startswith("-"):
        raise UserError(f"size '{text}' must be more than zero")
    if not m:
        raise UserError(f"cannot read size '{text}' (examples: 6GiB, 512MiB, 1.5G)")
    number, unit, binary, b = m.groups()
    base = 1000 if (unit and b and not binary) else 1024
    value = float(number) * base ** _POWERS[unit.lower()]
    if not math.isfinite(value):
        raise UserError(f"size '{text}' is too large")
    if 0 < value < 1:
        raise UserError(f"size '{text}' is less than one byte (examples: 6GiB, 512MiB, 1.5G)")
    return int(value)


def format_bytes(n: int | float | None) -> str:
    """Human-readable binary size: 1.5 GiB."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def parse_time(text: str) -> float:
    """Seconds from "12.5", "1:02.5" or "00:01:02.5"."""
    parts = str(text).strip().split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UserError(f"cannot read time '{text}' (examples: 12.5, 1:02.5, 00:01:02.5)") from None
    if len(values) > 3 or any(v < 0 for v in values):
        raise UserError(f"cannot read time '{text}' (examples: 12.5, 1:02.5, 00:01:02.5)")
    seconds = 0.0
    for v in values:
        seconds = seconds * 60 + v
    if not math.isfinite(seconds):  # nan, inf: no point of a clip
        raise UserError(f"cannot read time '{text}' (examples: 12.5, 1:02.5, 00:01:02.5)")
    return seconds
