"""The footprint store keeps a model's last measurements and gives the largest: a CPU footprint is
the process's growth while other threads work too, so one run's figure can be tens of percent
under the next; a figure too large drops out after `KEPT` more."""

from __future__ import annotations

import json
from pathlib import Path

from ffdesk.runtime.footprints import KEPT, MEASURED_AS, FootprintStore

MiB = 2**20


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
