"""argparse types for numbers a command takes: out of range or not a number is one line (exit 2)
as the command line is read, before any work."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `low` (one line otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {value}")
        return value

    return parse


def number_from(low: float, *, above: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number of at least `low` (more than `low` where `above`); NaN
    and infinity are refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < low or (above and value == low):
            raise argparse.ArgumentTypeError(
                f"must be {'more than' if above else 'at least'} {low:g}, not {text}"
            )
        return value

    return parse


def number_between(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a finite number from `low` to `high`."""

    def parse(text: str) -> float:
        value = number_from(low)(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g}, not {text}")
        return value

    return parse


def whole_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`."""

    def parse(text: str) -> int:
        value = whole_at_least(low)(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, not {value}")
        return value

    return parse
