"""The persisted render queue: add, reorder, cancel, resume, and survival across a restart."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import RenderQueue, job_from_dict, job_to_dict
from tests.farm.test_job_json import every_field_changed


def _job(tmp_path: Path, name: str, **kw: object) -> RenderJob:
    return RenderJob(target=tmp_path / f"{name}.mp4", output=tmp_path / f"{name}-out.mp4", **kw)  # type: ignore[arg-type]


def test_job_round_trips_through_json(tmp_path: Path) -> None:
    job = _job(
        tmp_path,
        "a",
        sources=(tmp_path / "face.jpg",),
        mode="preview",
        precision="int8",
        start=1.5,
        end=3.0,
        masks=("occlusion",),
        provider="tensorrt",
        swap_scale=4,
        models_dir=tmp_path / "models",
    ).resolved()
    again = job_from_dict(json.loads(json.dumps(job_to_dict(job))))
    assert again == job


def test_a_job_with_every_field_changed_survives_the_queue_file(tmp_path: Path) -> None:
    job = every_field_changed()
    path = tmp_path / "queue.json"
    entry = RenderQueue(path).add(job)
    back = RenderQueue(path).get(entry.id).job
    assert back == job.resolved()
    assert (back.provider, back.swap_scale) == (job.provider, job.swap_scale) != ("auto", 1)


def test_a_queue_file_written_with_extra_pairs_keeps_its_provider_and_swap_scale(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    old_job = {"target": "/t.mp4", "output": "/o.mp4", "swapper": "inswapper_128", "extra": []}
    jobs = [
        {
            "id": "a",
            "state": "queued",
            "job": {**old_job, "extra": [["provider", "cpu"], ["swap_scale", "2"]]},
        },
        {"id": "b", "state": "done", "job": {**old_job, "extra": [["swap_scale", "4"]]}},
        {"id": "c", "state": "queued", "job": old_job},
    ]
    path.write_text(json.dumps({"version": 1, "jobs": jobs}))
    q = RenderQueue(path)
    assert q.warning is None
    got = {e.id: (e.job.provider, e.job.swap_scale, e.job.swapper) for e in q.entries()}
    assert got == {
        "a": ("cpu", 2, "inswapper_128"),
        "b": ("auto", 4, "inswapper_128"),
        "c": ("auto", 1, "inswapper_128"),
    }
    q.update("a", message="saved again")  # the next save writes the fields, not the pairs
    stored = json.loads(path.read_text())["jobs"][0]["job"]
    assert "extra" not in stored and (stored["provider"], stored["swap_scale"]) == ("cpu", 2)


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ([["provider", "gpu"]], 'provider is "gpu"'),
        ([["swap_scale", "3"]], "swap_scale is 3"),
        ([["swap_scale", "two"]], "swap scale must be 1, 2 or 4, not 'two'"),
        ([["colour", "red"]], "unknown extra setting 'colour'"),
    ],
)
def test_an_old_job_with_a_bad_extra_pair_is_kept_aside(
    tmp_path: Path, extra: list[list[str]], reason: str
) -> None:
    path = tmp_path / "queue.json"
    good = {"id": "ok", "job": {"target": "/t.mp4", "output": "/o.mp4"}}
    bad = {"id": "bad", "job": {"target": "/t.mp4", "output": "/o.mp4", "extra": extra}}
    path.write_text(json.dumps({"version": 1, "jobs": [good, bad]}))
    q = RenderQueue(path)
    assert [e.id for e in q.entries()] == ["ok"]
    assert q.warning is not None and reason in q.warning, q.warning


def test_add_reorder_and_persist(tmp_path: Path) -> None:
    path = tmp_path / "q" / "queue.json"
    q = RenderQueue(path)
    a, b, c = (q.add(_job(tmp_path, n)) for n in "abc")
    q.move(c.id, 0)
    assert [e.id for e in q.entries()] == [c.id, a.id, b.id]
    q.move(c.id, 99)
    assert [e.id for e in q.entries()] == [a.id, b.id, c.id]
    q.update(b.id, frames_done=5, frames_total=10)

    again = RenderQueue(path)
    assert [e.id for e in again.entries()] == [a.id, b.id, c.id]
    assert again.get(b.id).fraction == pytest.approx(0.5)
    assert again.get(a.id).job.target == (tmp_path / "a.mp4").resolve()
    assert again.next_queued() is not None and again.next_queued().id == a.id  # type: ignore[union-attr]


def test_cancel_then_resume_sets_resume_flag(tmp_path: Path) -> None:
    q = RenderQueue(tmp_path / "queue.json")
    e = q.add(_job(tmp_path, "a", resume=False))
    q.update(e.id, state="running")
    assert q.cancel(e.id).state == "cancelled"
    assert q.next_queued() is None
    resumed = q.resume(e.id)
    assert resumed.state == "queued" and resumed.job.resume is True
    # resuming a queued job changes nothing
    assert q.resume(e.id) == resumed


def test_a_running_job_comes_back_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    q = RenderQueue(path)
    e = q.add(_job(tmp_path, "a"))
    q.update(e.id, state="running", frames_done=3, frames_total=9)
    again = RenderQueue(path)  # as after a crash
    got = again.get(e.id)
    assert got.state == "interrupted" and got.frames_done == 3
    assert again.resume(e.id).state == "queued"


_HOLDS = """
import sys, time
from pathlib import Path
from ffdesk.pipeline.queue import QueueInUse
held = QueueInUse.take(Path(sys.argv[1]), "ffdesk queue run")
print("held", flush=True)
sys.stdin.readline()
"""


def test_a_job_another_process_runs_now_reads_as_running(tmp_path: Path) -> None:
    """`ffdesk queue list` beside a `queue run` showed its running job as "interrupted"."""
    import subprocess
    import sys

    from ffdesk.pipeline.queue import QueueInUse

    path = tmp_path / "queue.json"
    q = RenderQueue(path)
    e = q.add(_job(tmp_path, "a"))
    q.update(e.id, state="running", frames_done=3, frames_total=9)
    root = Path(__file__).resolve().parents[2]
    runner = subprocess.Popen(
        [sys.executable, "-c", _HOLDS, str(path)],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert runner.stdout is not None and runner.stdout.readline().strip() == "held"
        assert QueueInUse.held_by_another(path)
        assert RenderQueue(path).get(e.id).state == "running"
    finally:
        runner.communicate("\n", timeout=60)
    assert not QueueInUse.held_by_another(path)
    held = QueueInUse.take(path, "ffdesk queue run")  # this process runs it: what ran before died
    try:
        assert not isinstance(held, str) and not QueueInUse.held_by_another(path)
        assert RenderQueue(path).get(e.id).state == "interrupted"
    finally:
        assert not isinstance(held, str)
        held.release()


def test_running_job_cannot_be_removed_and_listeners_fire(tmp_path: Path) -> None:
    calls: list[int] = []
    q = RenderQueue(tmp_path / "queue.json", on_change=lambda: calls.append(1))
    e = q.add(_job(tmp_path, "a"))
    q.update(e.id, state="running")
    with pytest.raises(ValueError):
        q.remove(e.id)
    with pytest.raises(ValueError):
        q.update(e.id, state="exploded")
    q.update(e.id, state="done")
    q.remove(e.id)
    assert q.entries() == [] and len(calls) == 4


def test_corrupt_file_gives_empty_queue_and_bad_entries_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    path.write_text("{not json")
    assert RenderQueue(path).entries() == []
    q = RenderQueue(path)
    q.add(_job(tmp_path, "a"))
    data = json.loads(path.read_text())
    data["jobs"].append({"id": "broken"})
    path.write_text(json.dumps(data))
    assert len(RenderQueue(path).entries()) == 1


def test_update_without_persist_stays_in_memory_until_the_next_save(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    q = RenderQueue(path)
    e = q.add(_job(tmp_path, "a"))
    q.update(e.id, persist=False, frames_done=7)
    assert q.get(e.id).frames_done == 7
    assert RenderQueue(path).get(e.id).frames_done == 0
    q.update(e.id, message="x")
    assert RenderQueue(path).get(e.id).frames_done == 7


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "not JSON"),
        (bytes(range(256)), "not text"),
        (b"[]", "not a render queue"),
        (b'{"jobs": 5}', "not a render queue"),
        (b'{"jobs": ["x"]}', "not an object"),
        (b'{"jobs": [{"id": "a", "job": {"target": 5, "output": "/o.mp4"}}]}', "target is 5"),
        (b'{"jobs": [{"id": "a", "frames_done": "3", "job": {"target": "/t.mp4", "output": "/o.mp4"}}]}',
         'frames_done is "3"'),
        (b'{"jobs": [{"id": "a", "job": {"target": "/t.mp4", "output": "/o.mp4", "batch": "x"}}]}', "batch"),
        (b'{"jobs": [{"id": "a", "job": {"target": "/t.mp4", "output": "/o.mp4", "extra": [[1]]}}]}',
         "extra"),
        (b'{"jobs": [{"id": "a", "job": {"target": "/t.mp4"}}]}', "no output"),
    ],
    ids=["bad-json", "binary", "a-list", "jobs-int", "job-str", "target-int", "frames-str", "batch-str",
         "extra-bad", "no-output"],
)  # fmt: skip
def test_a_corrupt_queue_is_kept_aside_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, raw: bytes, reason: str
) -> None:
    path = tmp_path / "queue.json"
    path.write_bytes(raw)
    caplog.set_level(logging.INFO, logger="ffdesk.pipeline.queue")
    q = RenderQueue(path)
    assert q.entries() == []
    assert q.warning is not None and reason in q.warning, q.warning
    assert q.warning.startswith("queue.json was damaged (") and "kept it as queue.json.corrupt" in q.warning
    assert (tmp_path / "queue.json.corrupt").read_bytes() == raw
    # logged for a log that is set up; each front end says it itself (`warning`), once
    assert any(r.levelname == "INFO" and "queue.json" in r.getMessage() for r in caplog.records)
    q.add(_job(tmp_path, "a"))  # the app carries on with a fresh queue; the damaged one stays aside
    assert len(RenderQueue(path).entries()) == 1 and RenderQueue(path).warning is None
    assert (tmp_path / "queue.json.corrupt").read_bytes() == raw


@pytest.mark.parametrize("cut", [0.5, 0.75, 0.95])
def test_a_queue_file_cut_off_part_way_keeps_its_whole_jobs(tmp_path: Path, cut: float) -> None:
    # a file that stops short (a copy or a disk that gave out) lost every job, not just the last
    path = tmp_path / "queue.json"
    q = RenderQueue(path)
    added = [q.add(_job(tmp_path, name)) for name in "abcd"]
    raw = path.read_bytes()
    path.write_bytes(raw[: int(len(raw) * cut)])
    again = RenderQueue(path)
    kept = again.entries()
    assert 1 <= len(kept) < 4 and [e.id for e in kept] == [e.id for e in added[: len(kept)]]
    assert kept == q.entries()[: len(kept)]
    assert again.warning is not None and "the file ends early" in again.warning, again.warning
    assert f"kept the file as queue.json.corrupt and loaded the other {len(kept)}" in again.warning
    assert (tmp_path / "queue.json.corrupt").read_bytes() == raw[: int(len(raw) * cut)]
    assert [e.id for e in RenderQueue(path).entries()] == [e.id for e in kept]  # rewritten whole


@pytest.mark.parametrize(
    "raw", [b'{"jobs": [', b'{"version": 1, "jobs": [{"id": "a"', b'{"other": [{"id": "a"}, ', b"[{}, {"]
)
def test_a_cut_file_with_no_whole_job_is_an_empty_queue(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "queue.json"
    path.write_bytes(raw)
    q = RenderQueue(path)
    assert q.entries() == [] and q.warning is not None and "was damaged (not JSON" in q.warning


def test_the_readable_jobs_of_a_damaged_queue_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    q = RenderQueue(path)
    a, b = q.add(_job(tmp_path, "a")), q.add(_job(tmp_path, "b"))
    data = json.loads(path.read_text())
    data["jobs"].insert(1, {"id": "zz", "fps": "fast", "job": {"target": "/t.mp4", "output": "/o.mp4"}})
    path.write_text(json.dumps(data))
    again = RenderQueue(path)
    assert [e.id for e in again.entries()] == [a.id, b.id]
    assert again.warning is not None and again.warning.startswith("queue.json: 1 job(s) could not be read")
    assert "fps" in again.warning and "kept the file as queue.json.corrupt" in again.warning
    assert json.loads((tmp_path / "queue.json.corrupt").read_text()) == data
    path.write_text("{")
    RenderQueue(path)
    assert (tmp_path / "queue.json.1.corrupt").read_text() == "{"  # an earlier one is not overwritten


def test_a_face_map_is_checked_field_by_field() -> None:
    """A job's `face_map` holds `FaceMapping` objects: the queue file's JSON objects for them are
    checked like the job's own fields (no missing or unknown key, each value of its type)."""
    from ffdesk.pipeline.job import FaceMapping
    from ffdesk.pipeline.queue import fits

    hint = tuple[FaceMapping, ...]
    assert fits([{"person": 1, "sources": ["/a.jpg"]}, {"person": "/who.jpg", "sources": []}], hint)
    assert not fits([{"person": 1}], hint)  # no sources
    assert not fits([{"person": 1, "sources": ["/a.jpg"], "age": 3}], hint)  # a key it lacks
    assert not fits([{"person": True, "sources": []}], hint)  # a bool is no index
    assert not fits([{"person": 1, "sources": "/a.jpg"}], hint)  # not a list
    assert not fits(["1=/a.jpg"], hint)
