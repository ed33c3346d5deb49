"""What `ffdesk farm status` prints for a worker: its share, budget, work, model loads, metrics."""

from __future__ import annotations

from ffdesk.farm.slots import NodeResources
from ffdesk.farm.status import FarmStatus, status_lines


def test_a_worker_line_says_its_model_loads_and_where_its_metrics_are() -> None:
    row = {
        "slot": "10.0.0.2/gpu0",
        "pid": 41,
        "num_gpus": 0.5,
        "budget_bytes": 12 << 30,
        "rendering": "cut.mov segment 3 (frames 360-479)",
        "segments": 3,
        "frames": 360,
        "model_loads": 4,
        "peak_model_bytes": 3 << 30,
        "metrics_url": "http://10.0.0.2:40123/metrics",
    }
    idle = {**row, "slot": "10.0.0.2/gpu1", "rendering": None, "metrics_url": None, "model_loads": 0}
    node = NodeResources("n1", "10.0.0.2", 16, 1, 24.0)
    lines = status_lines(FarmStatus("HEAD:6379", (node,), {}, (row, idle), ()))
    busy, rest = lines[2], lines[3]
    assert busy == (
        "  worker 10.0.0.2/gpu0 (pid 41, 0.5 GPU, budget 12.0 GiB): cut.mov segment 3 (frames 360-479); "
        "3 segments, 360 frames, 4 model loads, peak models 3.0 GiB, metrics http://10.0.0.2:40123/metrics"
    )
    assert rest.endswith("idle; 3 segments, 360 frames, 0 model loads, peak models 3.0 GiB")


def test_a_worker_stopped_with_its_render_is_not_shown_idle() -> None:
    # after a render, its stopped workers were listed "idle" with metrics endpoints that were gone
    row = {
        "slot": "10.0.0.2/gpu0",
        "pid": 41,
        "num_gpus": 1,
        "rendering": None,
        "segments": 2,
        "frames": 240,
        "model_loads": 1,
        "peak_model_bytes": 1 << 30,
        "metrics_url": "http://10.0.0.2:40123/metrics",
        "ended": True,
    }
    node = NodeResources("n1", "10.0.0.2", 16, 1, 24.0)
    line = status_lines(FarmStatus("HEAD:6379", (node,), {}, (row,), ()))[2]
    assert line == (
        "  worker 10.0.0.2/gpu0 (pid 41, 1 GPU, budget unlimited): ended with its render; "
        "2 segments, 240 frames, 1 model loads, peak models 1.0 GiB"
    )


def test_a_job_whose_head_went_silent_while_rendering_is_said_stopped_with_its_workers() -> None:
    # a head killed mid-render never posts its end: the job and its worker stayed "rendering"
    from ffdesk.farm.board import FarmBoard

    board = FarmBoard()
    board.job_started({"id": "j1", "target": "/clips/a.mov", "output": "/out/a.mov", "segments": 4})
    board.job_update("j1", {"segments_done": 1})
    board.worker("n/cpu0", {"slot": "n/cpu0", "pid": 7, "rendering": "a.mov segment 1", "job": "j1"})
    board.progress_of("j1")  # the head reads its workers' progress while it renders
    heard = board.jobs[0]["heard"]
    snap = board.snapshot()
    status = FarmStatus("HEAD:6379", (), {}, tuple(snap["workers"].values()), tuple(snap["jobs"]))
    fresh = status_lines(status, now=heard + 5)
    assert fresh[-1] == "  job /clips/a.mov -> /out/a.mov: rendering, 1 of 4 segments"
    assert fresh[-2].endswith("): a.mov segment 1; 0 segments, 0 frames, 0 model loads, peak models 0 B")
    late = status_lines(status, now=heard + 600)
    assert late[-1] == (
        "  job /clips/a.mov -> /out/a.mov: stopped: its head has not been heard from for 10 min "
        "(the same render command resumes it), 1 of 4 segments"
    )
    assert "stopped with its render's head (it was rendering a.mov segment 1)" in late[-2]
    board.job_update("j1", {"state": "finished"})  # a finished job is never silent
    done = status_lines(FarmStatus("H", (), {}, (), tuple(board.snapshot()["jobs"])), now=heard + 600)
    assert done[-1].endswith(": finished, 1 of 4 segments")


def test_a_worker_restarting_after_a_loss_names_no_pid() -> None:
    # the killed process's pid stayed listed until the restarted worker returned a segment
    row = {"slot": "n/cpu0", "pid": 0, "num_cpus": 1, "rendering": "a.mov segment 2", "losses": 1}
    line = status_lines(FarmStatus("HEAD:6379", (), {}, (row,), ()))[-1]
    assert line.startswith("  worker n/cpu0 (pid - (restarting), 1 CPU, budget unlimited): a.mov segment 2;")


def test_a_board_ffdesk_did_not_write_is_named_not_read() -> None:
    """Anyone on the farm can name an actor as ffdesk's board: what it returns is checked (a
    status that crashed on an int where a worker's table should be)."""
    from ffdesk.farm.status import board_problem

    good = {"workers": {"a": {"slot": "x", "heard": 1.5, "budget_bytes": 10}}, "jobs": [{"id": "j"}]}
    assert board_problem(good) is None
    assert board_problem(7) == "is int, not a table"
    assert (
        board_problem({"workers": {"a": 1}, "jobs": []}) == "lists its workers in a form ffdesk cannot read"
    )
    assert board_problem({"workers": {}, "jobs": "x"}) == "lists its jobs in a form ffdesk cannot read"
    assert board_problem({"workers": {}, "jobs": [{"heard": "soon"}]}) == "gives heard as str"
    assert (
        board_problem({"workers": {"a": {"budget_bytes": True}}, "jobs": []}) == "gives budget_bytes as bool"
    )
