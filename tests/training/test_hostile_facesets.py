"""Facesets whose shards disagree with their index (fewer rows, another element type, another
crop size, cut off, missing) or whose index is damaged: opening one for training, adding to it
or `ffdesk faceset info` ends in one line naming the shard and what disagrees (exit 2), before
any training step, never an IndexError or training on crops of the wrong size."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
from numpy.lib.format import open_memmap

from ffdesk.cli import main
from ffdesk.errors import UserError
from ffdesk.training.dataset import BatchSpec, PairBatches
from ffdesk.training.faceset import MESH_POINTS
from ffdesk.training.store import INDEX_NAME, FaceRecord, Faceset, FacesetWriter, shard_path
from ffdesk.training.synth import CONTOUR_POINTS, synth_face
from ffdesk.training.trainer import Trainer
from tests.training.conftest import tiny_settings

SIZE = 32
POINTS = CONTOUR_POINTS + 5


def _faceset(folder: Path, points: int = POINTS) -> Path:
    """Two shards of 3 synthesized faces each at 32 px, `points` face points each."""
    writer = FacesetWriter(folder, size=SIZE, points=points, shard_faces=4)
    rng = np.random.default_rng(0)
    for source in ("a.png", "b.png"):
        for i in range(3):
            f = synth_face(0, SIZE, rng)
            marks = f.points if points == POINTS else rng.uniform(0, SIZE, (points, 2)).astype(np.float32)
            writer.add(f.crop, f.mask, marks, int(rng.integers(1 << 62)), FaceRecord(source, i, 1.0, 100.0))
        writer.source_done(source, {"size": 1, "mtime_ns": 1})
    writer.commit()
    assert len(Faceset(folder).index.shards) == 2
    return folder


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The faceset the cases copy (read-only)."""
    return _faceset(tmp_path_factory.mktemp("clean") / "fs")


def _copy(clean: Path, dest: Path) -> Path:
    shutil.copytree(clean, dest)
    return dest


def _rewrite(path: Path, data: np.ndarray) -> None:
    """Replace a shard array with `data` (a well-formed .npy of another shape or type)."""
    path.unlink()
    mm = open_memmap(path, mode="w+", dtype=data.dtype, shape=data.shape)
    mm[...] = data
    mm.flush()
    del mm


def _edit_index(folder: Path, change: Callable[[dict], None]) -> None:
    path = folder / INDEX_NAME
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _one_line(exc: BaseException, *parts: str) -> str:
    line = str(exc)
    assert "\n" not in line, line
    for part in parts:
        assert part in line, line
    return line


SECOND = "shard-000002"


@pytest.mark.parametrize(
    ("array", "make", "expected"),
    [
        ("faces", lambda a: a[:2], "holds 2 rows, index.json lists 3 faces"),
        ("masks", lambda a: a[:1], "holds 1 rows, index.json lists 3 faces"),
        ("landmarks", lambda a: a.astype(np.float64), "holds float64 values, index.json says 3x37x2 float32"),
        ("faces", lambda a: a.astype(np.float32), "holds float32 values, index.json says 3x32x32x3 uint8"),
        ("faces", lambda a: a[:, :16, :16], "holds 3x16x16x3 uint8, index.json says 3x32x32x3 uint8"),
        ("masks", lambda a: np.zeros((3, 64, 64), np.uint8), "holds 3x64x64 uint8, index.json says 3x32x32"),
        ("hashes", lambda a: a.astype(np.int64), "holds int64 values, index.json says 3 uint64"),
    ],
)
def test_a_shard_that_disagrees_with_its_index_is_named(
    clean: Path, tmp_path: Path, array: str, make: Callable[[np.ndarray], np.ndarray], expected: str
) -> None:
    folder = _copy(clean, tmp_path / "fs")
    path = shard_path(folder, SECOND, array)
    _rewrite(path, make(np.load(path)))
    with pytest.raises(UserError) as info:
        Faceset(folder)
    _one_line(info.value, f"{path}: ", expected)
    with pytest.raises(UserError, match=expected):  # adding to it is refused too
        FacesetWriter(folder, size=SIZE, points=POINTS)


def test_a_cut_off_or_missing_shard_is_named(clean: Path, tmp_path: Path) -> None:
    folder = _copy(clean, tmp_path / "fs")
    path = shard_path(folder, SECOND, "faces")
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 100)
    with pytest.raises(UserError) as info:
        Faceset(folder)
    _one_line(info.value, f"{path}: cut off (")
    with open(path, "r+b") as f:
        f.truncate(5)
    with pytest.raises(UserError) as info:
        Faceset(folder)
    _one_line(info.value, f"{path}: unreadable faceset shard")
    path.unlink()
    with pytest.raises(UserError) as info:
        Faceset(folder)
    _one_line(info.value, f"{path}: missing (the faceset index lists it)")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["shards"][1].update(count=5), "holds 3 rows, index.json lists 5 faces"),
        (lambda d: d.update(size=64), "holds 3x32x32x3 uint8, index.json says 3x64x64x3 uint8"),
        (lambda d: d.update(points=468), "holds 3x37x2 float32, index.json says 3x468x2 float32"),
        (lambda d: d.update(size=65536), "damaged faceset index (size 65536 is not a whole number 8..4096)"),
        (lambda d: d.update(size="32"), "damaged faceset index (size '32' is not a whole number"),
        (lambda d: d.pop("points"), "damaged faceset index (no 'points')"),
        (lambda d: d["shards"][0].update(name="../../etc/x"), "shards[0] name '../../etc/x' (shard-N)"),
        (lambda d: d["shards"][1].update(name="shard-000001"), "shard shard-000001 listed twice"),
        (lambda d: d["shards"][0].update(count=-1), "shard-000001 count -1 is not a whole number"),
        (lambda d: d.update(shards=[1, 2]), "shards[0] is not a table"),
    ],
)
def test_a_damaged_or_edited_index_is_one_line(
    clean: Path, tmp_path: Path, change: Callable[[dict], None], expected: str
) -> None:
    folder = _copy(clean, tmp_path / "fs")
    _edit_index(folder, change)
    with pytest.raises(UserError) as info:
        Faceset(folder)
    _one_line(info.value, expected)


def test_an_index_that_is_not_a_table(clean: Path, tmp_path: Path) -> None:
    folder = _copy(clean, tmp_path / "fs")
    (folder / INDEX_NAME).write_text("[1, 2, 3]")
    with pytest.raises(UserError, match="not an ffdesk faceset index"):
        Faceset(folder)


def test_training_refuses_before_any_step(
    clean: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _copy(clean, tmp_path / "good")
    bad = _copy(clean, tmp_path / "bad")
    path = shard_path(bad, SECOND, "faces")
    _rewrite(path, np.load(path)[:, :16, :16])
    run = tmp_path / "run"
    with pytest.raises(UserError, match="holds 3x16x16x3 uint8"):
        Trainer(tiny_settings((good, bad), run, 4, resolution=64)).run()
    assert not run.exists() or not any(run.rglob("*.pt"))
    argv = ["train", "--src", str(good), "--dst", str(bad), "--run", str(run), "--steps", "2",
            "--resolution", "64", "--batch", "2", "--workers", "0", "--model-size", "tiny", "-q"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}: holds 3x16x16x3 uint8" in err[0]
    assert not any(run.rglob("*.pt"))


def test_faceset_commands_refuse_in_one_line(
    clean: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _copy(clean, tmp_path / "fs")
    assert main(["faceset", "info", str(folder)]) == 0
    assert "6 faces from 2 inputs (2 shards), 32 px crops" in capsys.readouterr().out
    path = shard_path(folder, SECOND, "landmarks")
    _rewrite(path, np.load(path)[:2])
    assert main(["faceset", "info", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"ffdesk: error: {path}: holds 2 rows, index.json lists 3 faces"]
    # adding to a faceset (of the face mesh's points, as extraction stores) is refused too
    meshed = _faceset(tmp_path / "meshed", MESH_POINTS)
    path = shard_path(meshed, SECOND, "masks")
    _rewrite(path, np.load(path)[:, :8, :8])
    photo = tmp_path / "photo.png"
    cv2.imwrite(str(photo), np.zeros((64, 64, 3), np.uint8))
    argv = ["faceset", "extract", "--from", str(photo), "--out", str(meshed), "--size", str(SIZE), "-q"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"ffdesk: error: {path}: holds 3x8x8 uint8, index.json says 3x32x32 uint8"
    )


# ---- fuzzer --------------------------------------------------------------------------------


def _damage(rng: random.Random, folder: Path) -> str:
    """One random damage to a faceset's shards or index; returns what was done."""
    kind = rng.choice(
        ["truncate", "rows", "dtype", "size", "delete", "index-field", "index-bytes", "garbage"]
    )
    shard = rng.choice(["shard-000001", SECOND])
    array = rng.choice(["faces", "masks", "landmarks", "hashes"])
    path = shard_path(folder, shard, array)
    if kind == "truncate":
        with open(path, "r+b") as f:
            f.truncate(rng.randrange(path.stat().st_size))
    elif kind == "rows":
        data = np.load(path)
        _rewrite(
            path, data[: rng.randrange(len(data))] if rng.random() < 0.5 else np.concatenate([data, data])
        )
    elif kind == "dtype":
        other = rng.choice([np.float16, np.int32, np.uint16, np.float64, np.int8])
        with np.errstate(over="ignore", invalid="ignore"):  # hashes do not fit: that is the point
            _rewrite(path, np.load(path).astype(other))
    elif kind == "size":
        data = np.load(path)
        side = rng.choice([8, 16, 31, 33, 64])
        shape = (
            (data.shape[0], side, side, 3)[: data.ndim] if array in ("faces", "masks") else (len(data), side)
        )
        _rewrite(path, np.zeros(shape, data.dtype))
    elif kind == "delete":
        path.unlink()
    elif kind == "index-field":
        field = rng.choice(["size", "points", "count", "name", "shards"])
        values: list[object] = [0, -1, 1, 7, 16, 64, 1 << 40, "x", None, [], {}, 3.5, True, "../x", "shard-9"]
        value = rng.choice(values)

        def change(d: dict) -> None:
            if field in ("count", "name"):
                d["shards"][rng.randrange(2)][field] = value
            else:
                d[field] = value

        _edit_index(folder, change)
    elif kind == "index-bytes":
        data = bytearray((folder / INDEX_NAME).read_bytes())
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(32, 127)
        (folder / INDEX_NAME).write_bytes(bytes(data))
    else:
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))
    return f"{kind} {shard}.{array}"


def test_fuzzed_facesets_open_whole_or_say_why(clean: Path, tmp_path: Path) -> None:
    """30 seeded damages: opening either fails in one `UserError` line, or gives a faceset whose
    every face, mask and point set reads back at the size its index says (and a training batch
    draws from it)."""
    rng = random.Random(1204)
    refused = 0
    for case in range(30):
        folder = _copy(clean, tmp_path / f"case{case}")
        what = _damage(rng, folder)
        try:
            fs = Faceset(folder)
        except UserError as exc:
            assert "\n" not in str(exc), (what, exc)
            refused += 1
            continue
        assert fs.size == SIZE and fs.index.points == POINTS, what
        for i in range(len(fs)):
            assert fs.face(i).shape == (SIZE, SIZE, 3) and fs.face(i).dtype == np.uint8, what
            assert fs.mask(i).shape == (SIZE, SIZE), what
            assert fs.landmarks(i).shape == (POINTS, 2), what
        batch = PairBatches(folder, folder, BatchSpec(resolution=SIZE, batch=2, seed=case), length=1)[0]
        assert tuple(batch["a"]["input"].shape) == (2, SIZE, SIZE, 3), what
    assert refused >= 20
