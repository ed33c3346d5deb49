"""argparse types for numbers a command takes: out of range or not a number is one line (exit 2)
as the command line is read, before any work."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path


def whole_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `low` (and at most `high`, when given)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {value}")
        _at_most(value, low, high, str(value))
        return value

    return parse


def number_from(low: float, *, above: bool = False, high: float | None = None) -> Callable[[str], float]:
    """An argparse type: a finite number of at least `low` (more than `low` where `above`; at most
    `high`, when given); NaN and infinity are refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < low or (above and value == low):
            raise argparse.ArgumentTypeError(
                f"must be {'more than' if above else 'at least'} {low:g}, not {text}"
            )
        _at_most(value, low, high, text, above=above)
        return value

    return parse


def byte_size(text: str) -> int:
    """An argparse type: a size in bytes as `ffdesk.units.parse_size` reads it ("6GiB", "512MB"),
    more than zero; refused as an argparse error, so the message names the option."""
    from ffdesk.errors import UserError
    from ffdesk.units import parse_size

    try:
        value = parse_size(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size '{text}' must be more than zero")
    return value


def _at_most(value: float, low: float, high: float | None, said: str, *, above: bool = False) -> None:
    """Refuse a value over `high`, naming the range as it is: `above` keeps `low` itself out of
    it ("more than 0 and at most 1000", not "from 0 to 1000")."""
    if high is not None and value > high:
        shown = f"more than {_shown(low)} and at most" if above else f"from {_shown(low)} to"
        raise argparse.ArgumentTypeError(f"must be {shown} {_shown(high)}, not {said}")


def _shown(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def number_between(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a finite number from `low` to `high`."""
    return number_from(low, high=high)


def whole_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`."""
    return whole_at_least(low, high)


MIN_FRAME_RATE = 1 / 60
"""The slowest frame rate an image sequence is given: one frame a minute. Slower is no video an
editor makes (a slide show holds a picture for seconds, not hours); FFmpeg's muxer refused
1e-6 (PatchWelcomeError, an internal error) and 0.0001 wrote three frames as an 8-hour file."""


def frame_rate(text: str) -> float:
    """An argparse type: frames a second, from one a minute (`MIN_FRAME_RATE`, 1/60) to 1000, as a
    number (23.976) or a fraction (24000/1001, as FFmpeg writes one)."""
    numerator, slash, denominator = text.partition("/")
    if not slash:
        value = number_from(0, above=True, high=1000)(text)
    else:
        try:
            value = float(numerator) / float(denominator)
        except (ValueError, ZeroDivisionError):
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a frame rate (25, 23.976, 24000/1001)"
            ) from None
        value = number_from(0, above=True, high=1000)(repr(value))
    if value < MIN_FRAME_RATE * (1 - 1e-3):  # (1/60 typed as 0.01666 is one a minute too)
        raise argparse.ArgumentTypeError(f"must be at least 1/60 (one frame a minute), not {text}")
    return value


def given_path(text: str) -> Path:
    """An argparse type for a file or folder the user names: an empty one ('') is refused, where
    `Path('')` is the current folder (`train --run ''` wrote its checkpoint there)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names nothing (. is the current folder)")
    return Path(text)


MAX_COST_MS = 1000.0
"""The most a stand-in model may be padded to cost a face (`--cost-ms`): a second, above any real
model's per-face time on a CPU; far more calibrated for ever or wrote a model the size of a disk
(nan and inf failed deep inside with a traceback)."""

standin_cost_ms = number_between(0, MAX_COST_MS)
"""An argparse type: a stand-in's cost in milliseconds a face, finite, 0 to `MAX_COST_MS`."""
