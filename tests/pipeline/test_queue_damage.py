"""A damaged render queue is kept aside once and rewritten; a large queue reads in seconds."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ffdesk.errors import DiskFull
from ffdesk.pipeline import queue as queue_module
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.job_json import fields_from_dict, fields_to_dict
from ffdesk.pipeline.queue import FORMAT_VERSION, RenderQueue, job_to_dict

BAD = {"id": "zz", "fps": "fast", "job": {"target": "/t.mp4", "output": "/o.mp4"}}


def _job(i: int) -> RenderJob:
    """A job unlike its neighbours (paths, mode, quality, trim, masks): not all defaults."""
    return RenderJob(
        target=Path(f"/clips/shoot{i % 97}/clip{i}.mp4"),
        output=Path(f"/renders/out{i}.mp4"),
        sources=(Path(f"/faces/face{i % 7}.jpg"),),
        mode="preview" if i % 2 else "final",
        quality=50 + i % 50,
        start=1.5 if i % 3 == 0 else None,
        masks=("box",) if i % 5 == 0 else (),
        swapper="inswapper_128" if i % 4 == 0 else None,
        batch=1 + i % 8,
    )


def _write_queue(path: Path, n: int, extra: Sequence[Any] = ()) -> None:
    jobs: list[Any] = [
        {
            "id": f"{i:012x}",
            "state": "running" if i == 1 else "queued",
            "added": 1.7e9 + i,
            "job": job_to_dict(_job(i)),
        }
        for i in range(n)
    ]
    jobs[1:1] = list(extra)
    path.write_text(json.dumps({"version": FORMAT_VERSION, "jobs": jobs}, indent=1))


def _corrupt(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.corrupt"))


def test_a_partly_damaged_queue_is_kept_aside_once_and_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    _write_queue(path, 3, [BAD, "not an entry"])
    damaged = path.read_bytes()
    first = RenderQueue(path)
    assert [e.id for e in first.entries()] == [f"{i:012x}" for i in range(3)]
    assert first.warning is not None and first.warning.startswith("queue.json: 2 job(s) could not be read")
    assert "kept the file as queue.json.corrupt and loaded the other 3" in first.warning
    assert _corrupt(tmp_path) == ["queue.json.corrupt"]
    assert (tmp_path / "queue.json.corrupt").read_bytes() == damaged  # the damaged bytes, as they were
    stored = json.loads(path.read_text())["jobs"]
    assert [j["id"] for j in stored] == [f"{i:012x}" for i in range(3)]  # rewritten with the readable jobs
    assert stored[1]["state"] == "interrupted"  # the process that ran it is gone
    for _ in range(2):
        again = RenderQueue(path)
        assert again.warning is None and again.entries() == first.entries()
        assert _corrupt(tmp_path) == ["queue.json.corrupt"]  # a clean read makes no new copy


def test_a_wholly_damaged_queue_is_moved_aside_once(tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    path.write_bytes(b"\x00\xff{garbage")
    assert RenderQueue(path).entries() == [] and not path.exists()
    second = RenderQueue(path)
    assert second.warning is None and second.entries() == []
    assert _corrupt(tmp_path) == ["queue.json.corrupt"]


def test_a_queue_that_cannot_be_kept_aside_is_not_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "queue.json"
    _write_queue(path, 2, [BAD])
    damaged = path.read_bytes()

    def refuse(*_a: object, **_k: object) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(queue_module, "keep_aside", refuse)
    q = RenderQueue(path)
    assert len(q.entries()) == 2
    assert q.warning is not None and "could not keep it aside (Permission denied)" in q.warning
    assert path.read_bytes() == damaged  # its bytes are not lost


def test_a_rewrite_that_fails_is_said_and_the_queue_still_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "queue.json"
    _write_queue(path, 2, [BAD])

    def full(*_a: object, **_k: object) -> None:
        raise DiskFull(path, "No space left on device")

    monkeypatch.setattr(queue_module, "write_json_atomic", full)
    q = RenderQueue(path)
    assert len(q.entries()) == 2
    assert q.warning is not None and "kept the file as queue.json.corrupt" in q.warning
    assert "; could not rewrite it (" in q.warning and "\n" not in q.warning


def test_the_codec_resolves_field_types_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost the issue measured: `typing.get_type_hints` for every job read."""
    import typing

    fields_from_dict(RenderJob, fields_to_dict(_job(0)))  # warm
    calls = 0
    real = typing.get_type_hints

    def counting(*a: Any, **k: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*a, **k)

    monkeypatch.setattr(typing, "get_type_hints", counting)
    for i in range(50):
        assert fields_from_dict(RenderJob, fields_to_dict(_job(i))) == _job(i)
    assert calls == 0


def _time_read(path: Path, n: int) -> float:
    _write_queue(path, n)
    t0 = time.perf_counter()
    q = RenderQueue(path)
    seconds = time.perf_counter() - t0
    entries = q.entries()
    assert len(entries) == n and q.warning is None
    assert entries[-1].job == _job(n - 1) and entries[1].state == "interrupted"
    return seconds


@pytest.mark.slow
def test_ten_thousand_jobs_are_read_whole(tmp_path: Path) -> None:
    # 0.44 s on the quiet 2-core development machine, where it took 8 s before the codec was
    # built once per class (test_the_codec_resolves_field_types_once_per_class proves why); the
    # time is printed, not asserted: a loaded machine took 10.8 s
    print(f"10,000 jobs read in {_time_read(tmp_path / 'queue.json', 10_000):.2f} s")


@pytest.mark.slow
def test_a_hundred_thousand_jobs_read_in_seconds(tmp_path: Path) -> None:
    # 4.0 s on the quiet 2-core development machine, where it took 82 s before
    assert _time_read(tmp_path / "queue.json", 100_000) < 12.0


def test_the_shortcut_for_default_values_keeps_every_check(tmp_path: Path) -> None:
    """Stored values equal to a field's default skip decoding; equal values of another type
    (1 for True, True for 1, {} for an empty list, 0 for a choice) are still refused."""
    base = fields_to_dict(_job(1))
    for field, value in [("resume", 1), ("batch", True), ("masks", {}), ("swapper", False), ("mode", 0)]:
        entry = {"id": "a", "job": dict(base, **{field: value})}
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps({"version": FORMAT_VERSION, "jobs": [entry]}))
        q = RenderQueue(path)
        assert q.entries() == [] and q.warning is not None and field in q.warning, (field, q.warning)
    assert fields_from_dict(RenderJob, dict(base, resume=True, masks=[])) == _job(1)
