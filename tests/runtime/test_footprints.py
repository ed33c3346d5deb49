"""The footprint store keeps a model's last measurements and gives the largest: a CPU footprint is
the process's growth while other threads work too, so one run's figure can be tens of percent
under the next; a figure too large drops out after `KEPT` more."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from ffdesk.runtime.footprints import KEPT, MEASURED_AS, FootprintStore

MiB = 2**20
ROOT = Path(__file__).resolve().parents[2]


def test_the_largest_of_the_last_measurements_is_the_figure_and_it_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "footprints.json"
    store = FootprintStore(path)
    key = FootprintStore.key("crc32:abc", "fp32", "CPUExecutionProvider", 8)
    for n in (120, 166, 130):
        store.put(key, n * MiB, 1.0)
    assert store.get(key) == 166 * MiB
    again = FootprintStore(path)  # the next run plans with the same figure
    assert again.get(key) == 166 * MiB
    assert again.curve("crc32:abc", "fp32", "CPUExecutionProvider") == {8: 166 * MiB}
    for n in range(KEPT):  # the large one drops out once KEPT smaller ones came after it
        again.put(key, (118 + n) * MiB, 1.0)
    assert again.get(key) == (118 + KEPT - 1) * MiB
    record = json.loads(path.read_text())[key]
    assert record["recent"] == [(118 + n) * MiB for n in range(KEPT)] and record["v"] == MEASURED_AS


def test_a_record_without_its_recent_measurements_reads_as_its_figure(tmp_path: Path) -> None:
    path = tmp_path / "footprints.json"
    path.write_text(json.dumps({"k": {"bytes": 5 * MiB, "load_ms": 1.0, "at": 1, "v": MEASURED_AS}}))
    store = FootprintStore(path)
    assert store.get("k") == 5 * MiB
    store.put("k", 3 * MiB, 1.0)  # the earlier figure still counts among the last
    assert store.get("k") == 5 * MiB
    assert json.loads(path.read_text())["k"]["recent"] == [5 * MiB, 3 * MiB]


def test_the_same_measurement_again_still_pushes_an_old_large_one_out(tmp_path: Path) -> None:
    """On a GPU a model measures the same each time: those repeats drop an outlier too, and once
    the record holds nothing else the file is not written again."""
    path = tmp_path / "footprints.json"
    store = FootprintStore(path)
    store.put("k", 9 * MiB, 1.0)
    for _ in range(KEPT):
        store.put("k", 4 * MiB, 1.0)
    assert store.get("k") == 4 * MiB
    written = path.stat().st_mtime_ns
    path.write_text(path.read_text())  # the same text, a new time
    before = path.stat().st_mtime_ns
    store.put("k", 4 * MiB, 1.0)
    assert path.stat().st_mtime_ns == before and before >= written


def test_two_stores_on_one_file_keep_each_others_records(tmp_path: Path) -> None:
    """Two processes (two renders on one workstation) read the file before either wrote: each
    write folds into the file as it is then, so neither loses what the other recorded, and each
    learns the other's records."""
    path = tmp_path / "footprints.json"
    first, second = FootprintStore(path), FootprintStore(path)
    assert first.get("a") is None and second.get("b") is None  # both have read the empty file
    first.put("a", 7 * MiB, 1.0)
    second.put("b", 9 * MiB, 1.0)
    on_disk = json.loads(path.read_text())
    assert on_disk["a"]["bytes"] == 7 * MiB and on_disk["b"]["bytes"] == 9 * MiB
    assert second.cached("a") == 7 * MiB
    first.put("shared", 100 * MiB, 1.0)
    second.put("shared", 120 * MiB, 1.0)  # the same model measured in both: both measurements count
    assert json.loads(path.read_text())["shared"]["recent"] == [100 * MiB, 120 * MiB]
    assert second.get("shared") == 120 * MiB and FootprintStore(path).get("shared") == 120 * MiB


def test_a_record_this_version_does_not_read_is_kept_when_writing(tmp_path: Path) -> None:
    path = tmp_path / "footprints.json"
    newer = {"bytes": 5 * MiB, "load_ms": 1.0, "at": 1, "v": MEASURED_AS + 1}
    path.write_text(json.dumps({"newer": newer}))
    store = FootprintStore(path)
    assert store.get("newer") is None  # measured another way: not read
    store.put("k", 3 * MiB, 1.0)
    assert json.loads(path.read_text())["newer"] == newer


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            b'{\n "k": {"bytes": 5, "v": 2},\n "other',
            "is not JSON (Unterminated string starting at: line 3 column 2 (char 31))",
        ),
        (b"\xff\xfe not text", "is not text (damaged?)"),
        (b"[1, 2]", "is not a JSON object"),
    ],
    ids=["cut off", "not text", "not an object"],
)
def test_a_damaged_file_is_kept_aside_not_written_over(
    tmp_path: Path, text: bytes, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged footprints file was read as empty and written over at the next measurement
    without a word: what it held was lost. It is kept aside now, and one line says so."""
    path = tmp_path / "footprints.json"
    path.write_bytes(text)
    store = FootprintStore(path)
    assert store.get("k") is None
    with caplog.at_level(logging.WARNING):
        store.put("k", 3 * MiB, 1.0)
    assert (tmp_path / "footprints.json.corrupt").read_bytes() == text
    assert json.loads(path.read_text())["k"]["bytes"] == 3 * MiB
    assert [r.getMessage() for r in caplog.records] == [
        f"{path} {why}: kept it as footprints.json.corrupt and started a fresh one"
    ]


@pytest.mark.parametrize(
    "record",
    [
        {"bytes": -(10**12), "v": MEASURED_AS},
        {"bytes": True, "v": MEASURED_AS},
        {"bytes": 5 * MiB, "recent": [5 * MiB, -(10**12)], "v": MEASURED_AS},
        {"bytes": 5 * MiB, "recent": [True], "v": MEASURED_AS},
    ],
    ids=["negative", "true", "a negative among the recent", "true among the recent"],
)
def test_a_record_that_is_no_number_of_bytes_is_measured_again(
    tmp_path: Path, record: dict[str, object]
) -> None:
    """A negative footprint planned with made a 20 MiB budget hold every model, and the report
    gave models of -1000000000000 bytes and a peak model memory of 0; a JSON true counted as one
    byte. Such a record is not read: the model is measured again."""
    path = tmp_path / "footprints.json"
    path.write_text(json.dumps({"k": record}))
    store = FootprintStore(path)
    assert store.get("k") is None
    store.put("k", 3 * MiB, 1.0)
    assert store.get("k") == 3 * MiB
    assert json.loads(path.read_text())["k"]["recent"] == [3 * MiB]


_WRITER = """
import sys
from ffdesk.runtime.footprints import FootprintStore
store = FootprintStore(sys.argv[1])
store.get("warm")  # read the file once, as a render does before it measures
for n in range(int(sys.argv[3])):
    store.put(f"{sys.argv[2]}-{n}", n + 1, 1.0)
"""


def test_processes_writing_at_once_lose_no_record(tmp_path: Path) -> None:
    path = tmp_path / "footprints.json"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), f"p{i}", "25"], cwd=ROOT)
        for i in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    on_disk = json.loads(path.read_text())
    assert sorted(on_disk) == sorted(f"p{i}-{n}" for i in range(4) for n in range(25))


def test_a_full_disk_keeps_the_records_in_memory_and_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache's writer raises `DiskFull` on a full disk, which is no OSError: a render whose
    cache folder was full stopped at its first measurement ("disk full while writing
    footprints.json"), though the records are a cache the run can keep in memory."""
    from ffdesk.errors import DiskFull
    from ffdesk.media import atomic

    path = tmp_path / "footprints.json"
    FootprintStore(path).put("old", 5 * MiB, 1.0)
    before = path.read_bytes()

    def full(target: Path, *args: object, **kwargs: object) -> None:
        raise DiskFull(target, "No space left on device")

    monkeypatch.setattr(atomic, "write_text_atomic", full)
    store = FootprintStore(path)
    store.put("new", 3 * MiB, 1.0)
    assert store.get("new") == 3 * MiB and store.get("old") == 5 * MiB
    assert path.read_bytes() == before
