"""The farm's board keeps one row a worker slot: a slot whose worker ended with one render and
that renders the next is shown rendering (`farm status` said "ended with its render" while its
worker rendered the second job)."""

from __future__ import annotations

from ffdesk.farm.board import FarmBoard


def test_a_slot_rendering_again_is_no_longer_ended() -> None:
    board = FarmBoard()
    board.worker("127.0.0.1/cpu1", {"pid": 797, "rendering": "segment 3"})
    board.worker("127.0.0.1/cpu1", {"pid": 797, "rendering": None, "ended": True})  # the first render ends
    assert board.workers["127.0.0.1/cpu1"]["ended"] is True
    board.worker("127.0.0.1/cpu1", {"pid": 812, "rendering": "segment 0"})  # the next render's worker
    row = board.workers["127.0.0.1/cpu1"]
    assert "ended" not in row and row["pid"] == 812 and row["rendering"] == "segment 0"
