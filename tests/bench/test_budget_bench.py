"""`ffdesk bench budget`: renders under memory budgets, watched from another process.

Here on the CPU the watched figure is the render process's RSS; the NVML figures (per process,
or the device's over its use before) are checked on samples built from the telemetry tests'
stand-in for `pynvml`. The end-to-end run uses small stand-ins of the bench's five models."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ffdesk import cli
from ffdesk.bench import budget as bb
from ffdesk.bench.memory import PACK
from ffdesk.faces.tracking import TrackerSettings
from ffdesk.pipeline.stages.front import held_back
from ffdesk.pipeline.stages.models import HELD_FRAME_COPIES, frames_at_once
from ffdesk.telemetry.host import HostSample
from ffdesk.telemetry.nvml import Nvml
from ffdesk.telemetry.sampler import Sample
from tests.telemetry.fake_nvml import FakeDevice, FakeNvml

MiB = 2**20


def test_the_budgets_go_from_the_smallest_the_renderer_takes_to_all_resident() -> None:
    one_item = [700 * MiB, 300 * MiB, 200 * MiB]
    at_batch = [900 * MiB, 400 * MiB, 300 * MiB]
    steps = bb.budgets(500 * MiB, one_item, at_batch, 3)
    assert steps[0] == 500 * MiB + 770 * MiB  # the reservation and the largest on one item, plus 10%
    assert steps[-1] == 500 * MiB + 1600 * MiB  # everything resident at the batch
    assert steps == sorted(steps) and len(steps) == 3
    assert bb.budgets(0, [100 * MiB], [100 * MiB], 4) == [110 * MiB]  # one model: all resident
    assert bb.budgets(0, [], [], 3) == []


def _samples(readings: list[tuple[int | None, int, int]]) -> list[Sample]:
    """Samples of (the watched pid's GPU bytes or None: not listed, device used, RSS)."""
    fake = FakeNvml([FakeDevice()])
    nvml = Nvml(fake, pid=4242)
    out = []
    for i, (held, used, rss) in enumerate(readings):
        device = fake.devices[0]
        device.compute = [] if held is None else [(4242, held)]
        device.used = used
        out.append(Sample(t=float(i), wall_time=float(i), host=HostSample(pid=4242, process_rss_bytes=rss),
                          gpus=nvml.sample()))  # fmt: skip
    nvml.close()
    return out


def test_the_watched_figure_is_nvmls_for_the_process_else_the_devices_over_its_use_before() -> None:
    seen = _samples([(600 * MiB, 2000 * MiB, 1), (900 * MiB, 2300 * MiB, 2), (0, 1400 * MiB, 3)])
    assert bb.choose_source(seen, on_gpu=True) == "nvml-process"
    assert bb.watched_peak(seen, "nvml-process", None) == 900 * MiB
    # a PID namespace: NVML never names the render process; the device's use over before counts
    unseen = _samples([(None, 2000 * MiB, 1), (None, 2300 * MiB, 2)])
    assert bb.choose_source(unseen, on_gpu=True) == "nvml-device"
    assert bb.watched_peak(unseen, "nvml-device", 1400 * MiB) == 900 * MiB
    assert bb.choose_source(seen, on_gpu=False) == "rss"
    assert bb.watched_peak(seen, "rss", None) == 3
    # the kernel's high-water mark, where it keeps one, holds the peaks between samples
    kept = [replace(s, host=replace(s.host, process_rss_peak_bytes=9)) for s in seen]
    assert bb.watched_peak(kept, "rss", None) == 9


def test_a_budget_is_held_when_the_watched_peak_stays_within_it() -> None:
    def run(budget: int | None, peak: int | None) -> bb.BudgetRun:
        return bb.BudgetRun(budget, peak, 0, "rss", 0, 0, 1.0, 1, 0, 3)

    assert run(100, 100).held is True and run(100, 101).held is False
    assert run(None, 100).held is None and run(100, None).held is None


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ffdesk.runtime.standins import write_standins

    folder = tmp_path_factory.mktemp("budget-pack")
    write_standins(folder, list(PACK), realistic=False, dynamic_batch=True)
    return folder


def test_a_cpu_run_watches_every_render_from_outside(
    small_pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools

    # the bench's 720p clip 1 s long, not 6: its renders read 2 frames of it (6 s took 6 s to make)
    monkeypatch.setattr(bb, "face_clip", functools.partial(bb.face_clip, seconds=1.0))
    report = tmp_path / "budget.json"
    args = ["bench", "budget", "--frames", "2", "--steps", "2", "--batch", "2", "--provider", "cpu",
            "--models-dir", str(small_pack), "--json", str(report)]  # fmt: skip
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "RSS over the re-encode's" in out and "no budget: watched peak" in out
    rec: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    figures = rec["figures"]
    assert "partial" not in figures and figures["watched"] == "rss"
    assert set(figures["footprints_bytes"]) == set(PACK) and figures["reserved_bytes"] == 0  # the CPU's
    resident, *limited = figures["runs"]
    assert resident["budget_bytes"] is None and resident["held"] is None and resident["evictions"] == 0
    one_item, at_batch = (list(figures[k].values()) for k in ("one_item_bytes", "footprints_bytes"))
    reserved = figures["reserved_bytes"]
    held = figures["held_frames_bytes"]  # the fewest 720p frames segment order holds at once
    assert held == frames_at_once(2, 2, held_back(TrackerSettings())) * 1280 * 720 * 3 * HELD_FRAME_COPIES
    assert [r["budget_bytes"] for r in limited] == bb.budgets(reserved, one_item, at_batch, 2, held)
    for r in figures["runs"]:
        assert r["source"] == "rss" and r["samples"] > 0 and r["baseline_bytes"] > 50 * MiB
        assert r["watched_peak_bytes"] is not None and r["accounted_peak_bytes"] > 0 and r["fps"] > 0
        assert r["held"] is (
            None if r["budget_bytes"] is None else r["watched_peak_bytes"] <= r["budget_bytes"]
        )
    assert limited[0]["evictions"] > 0  # the smallest budget holds one model at a time
    assert figures["all_held"] is all(r["held"] for r in limited)
