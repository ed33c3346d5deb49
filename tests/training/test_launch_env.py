"""What `ffdesk train --nproc N` gives its workers besides the user's environment."""

from __future__ import annotations

from ffdesk.training.launch import worker_env


def test_workers_get_one_thread_each_unless_the_user_says_otherwise() -> None:
    """torchrun sets the same itself, printing four lines of advice at every start."""
    assert worker_env({})["OMP_NUM_THREADS"] == "1"
    assert worker_env({"OMP_NUM_THREADS": "6"})["OMP_NUM_THREADS"] == "6"
