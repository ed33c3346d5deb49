"""Holding fd 2: claimed lines are the caller's, the rest passes on in order, one thread at a time."""

from __future__ import annotations

import os
import threading
import time

import pytest

from ffdesk.held_stderr import hold_stderr


def test_claimed_lines_are_kept_and_the_rest_written_after(capfd: pytest.CaptureFixture[str]) -> None:
    with hold_stderr(lambda line: line.startswith(b"MINE")) as held:
        os.write(2, b"first\nMINE one\n")
        assert capfd.readouterr().err == ""  # nothing reaches stderr inside the block
        os.write(2, b"second\n")
        assert held.taken() == [b"MINE one\n"]
    assert capfd.readouterr().err == "first\nsecond\n"


def test_a_nested_hold_passes_its_unclaimed_lines_to_the_outer_one(capfd: pytest.CaptureFixture[str]) -> None:
    with hold_stderr(lambda line: line.startswith(b"OUTER")) as outer:
        with hold_stderr(lambda line: line.startswith(b"INNER")) as inner:
            os.write(2, b"INNER x\nOUTER y\nz\n")
        assert inner.taken() == [b"INNER x\n"]
        assert outer.taken() == [b"OUTER y\n"]
    assert capfd.readouterr().err == "z\n"


def test_another_threads_hold_waits_for_the_first(capfd: pytest.CaptureFixture[str]) -> None:
    inside = threading.Event()
    order: list[str] = []

    def other() -> None:
        inside.wait(10)
        with hold_stderr(lambda line: False):
            order.append("other")
            os.write(2, b"other\n")

    t = threading.Thread(target=other)
    t.start()
    with hold_stderr(lambda line: False):
        inside.set()
        time.sleep(0.2)
        order.append("first")
        os.write(2, b"first\n")
    t.join(10)
    assert order == ["first", "other"]
    assert capfd.readouterr().err == "first\nother\n"
