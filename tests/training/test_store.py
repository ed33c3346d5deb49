"""Faceset storage: memory-mapped shards, atomic publishing, appends."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from ffdesk.errors import UserError
from ffdesk.training.store import FaceRecord, Faceset, FacesetWriter
from ffdesk.training.synth import synth_face


def _add(writer: FacesetWriter, n: int, seed: int, source: str) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    crops = []
    for i in range(n):
        f = synth_face(seed, 32, rng)
        writer.add(f.crop, f.mask, f.points, 1000 * seed + i, FaceRecord(source, i, 1.0, 100.0))
        crops.append(f.crop)
    return crops


def test_faces_round_trip_through_memory_maps(tmp_path: Path) -> None:
    w = FacesetWriter(tmp_path / "fs", size=32, points=37)
    crops = _add(w, 5, 0, "one.png")
    w.source_done("one.png", {"size": 1, "mtime_ns": 2})
    w.commit()
    fs = Faceset(tmp_path / "fs")
    assert len(fs) == 5
    assert np.array_equal(fs.face(3), crops[3])
    assert isinstance(fs._open()["faces"][0], np.memmap)
    # a pickled faceset (a DataLoader worker's copy) re-opens its own maps
    clone = pickle.loads(pickle.dumps(fs))
    assert clone._maps is None and np.array_equal(clone.face(4), crops[4])


def test_append_adds_a_shard_and_keeps_the_old_faces(tmp_path: Path) -> None:
    w = FacesetWriter(tmp_path / "fs", size=32, points=37)
    first = _add(w, 3, 0, "a.png")
    w.source_done("a.png", {"size": 1, "mtime_ns": 1})
    w.commit()
    w2 = FacesetWriter(tmp_path / "fs", size=32, points=37)
    assert w2.is_done("a.png", {"size": 1, "mtime_ns": 1})
    assert not w2.is_done("a.png", {"size": 1, "mtime_ns": 5})
    second = _add(w2, 2, 1, "b.png")
    w2.source_done("b.png", {"size": 1, "mtime_ns": 1})
    w2.commit()
    fs = Faceset(tmp_path / "fs")
    assert len(fs) == 5 and len(fs.index.shards) == 2
    assert np.array_equal(fs.face(0), first[0]) and np.array_equal(fs.face(4), second[1])
    assert [f["source"] for f in fs.index.faces] == ["a.png"] * 3 + ["b.png"] * 2


def test_unfinished_source_is_never_published(tmp_path: Path) -> None:
    w = FacesetWriter(tmp_path / "fs", size=32, points=37, shard_faces=2)
    _add(w, 2, 0, "a.png")
    w.source_done("a.png", {"size": 1, "mtime_ns": 1})  # a full shard: published
    _add(w, 3, 1, "clip.mp4")  # a shard fills mid-clip, then the process dies
    del w
    index = json.loads((tmp_path / "fs" / "index.json").read_text())
    assert index["count"] == 2 and list(index["sources"]) == ["a.png"]
    orphans = {p.name.split(".")[0] for p in (tmp_path / "fs").glob("shard-*.npy")}
    assert len(orphans) == 2  # the published shard and the one the crash left behind
    FacesetWriter(tmp_path / "fs", size=32, points=37)  # reopening removes the orphan
    assert {p.name.split(".")[0] for p in (tmp_path / "fs").glob("shard-*.npy")} == {"shard-000001"}
    assert len(Faceset(tmp_path / "fs")) == 2


def test_duplicates_are_found_by_hash_distance(tmp_path: Path) -> None:
    w = FacesetWriter(tmp_path / "fs", size=32, points=37)
    f = synth_face(0, 32, np.random.default_rng(0))
    w.add(f.crop, f.mask, f.points, 0b1011, FaceRecord("x", 0, 1.0, 1.0))
    assert w.is_duplicate(0b1001, max_distance=1)
    assert not w.is_duplicate(0b0100, max_distance=1)


def test_a_size_mismatch_is_a_user_error(tmp_path: Path) -> None:
    w = FacesetWriter(tmp_path / "fs", size=32, points=37)
    _add(w, 1, 0, "a.png")
    w.source_done("a.png", {"size": 1, "mtime_ns": 1})
    w.commit()
    with pytest.raises(UserError, match="32 px"):
        FacesetWriter(tmp_path / "fs", size=64, points=37)
    with pytest.raises(UserError, match="not a faceset"):
        Faceset(tmp_path / "nothing")
