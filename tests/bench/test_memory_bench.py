"""`ffdesk bench memory`: every model resident against a budget of the N largest, with small
stand-ins of the bench's five models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ffdesk import cli
from ffdesk.bench.memory import PACK
from ffdesk.faces.tracking import TrackerSettings
from ffdesk.pipeline.stages.front import held_back
from ffdesk.pipeline.stages.models import HELD_FRAME_COPIES, frames_at_once


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ffdesk.runtime.standins import write_standins

    folder = tmp_path_factory.mktemp("memory-pack")
    write_standins(folder, list(PACK), realistic=False, dynamic_batch=True)
    return folder


@pytest.fixture(scope="module")
def _bench_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("memory-bench-cache")


@pytest.fixture(autouse=True)
def _one_short_clip(_bench_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's 720p clip is made once for the module (its cache shared, as between a user's
    runs) and 1 s long, not 6: the renders here read at most 4 frames of it (the 6 s clip took
    6 s to make, in every test)."""
    import functools

    from ffdesk.bench import memory

    monkeypatch.setenv("FFDESK_BENCH_CACHE", str(_bench_cache))
    monkeypatch.setattr(memory, "face_clip", functools.partial(memory.face_clip, seconds=1.0))


def test_the_one_model_budget_is_the_largest_model_on_one_item(small_pack: Path, tmp_path: Path) -> None:
    """The budget holds the largest model as a call of one face needs it: at the render's batch
    its runtime holds more, which is what a tight budget makes it give up."""
    report = tmp_path / "memory.json"
    args = ["bench", "memory", "--frames", "4", "--batch", "2", "--budget-models", "1", "--headroom", "0.1",
            "--provider", "cpu", "--models-dir", str(small_pack), "--json", str(report)]  # fmt: skip
    assert cli.main(args) == 0
    figures: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))["figures"]
    one_item, at_batch = figures["models_mib"], figures["models_at_batch_mib"]
    assert set(one_item) == set(PACK) and set(at_batch) == set(PACK)
    assert all(one_item[n] <= at_batch[n] for n in PACK)
    # beside the fewest frames segment order holds at once on the CPU (windows of 2 frames of 720p)
    floor = frames_at_once(2, 2, held_back(TrackerSettings())) * 1280 * 720 * 3 * HELD_FRAME_COPIES / 2**20
    assert figures["budget_mib"] == pytest.approx(max(one_item.values()) * 1.1 + floor, abs=0.2)
    assert 0 < figures["frames_held_mib"] <= figures["budget_mib"] - max(one_item.values())
    assert figures["within_budget"] is True and figures["reserved_mib"] == 0  # nothing reserved on the CPU
    resident = figures["all_resident"]["peak_model_mib"]
    # the models' share of the budget (the frames held beside it are not model memory)
    assert figures["budget_models_mib"] == pytest.approx(max(one_item.values()) * 1.1, abs=0.2)
    least = 1 - figures["budget_models_mib"] / resident
    assert figures["guaranteed_reduction"] == pytest.approx(least, abs=2e-3)
    assert figures["peak_model_reduction"] >= figures["guaranteed_reduction"] - 2e-3  # the budget held
    assert figures["on_demand"]["evictions"] > 0 and figures["all_resident"]["evictions"] == 0


def test_on_a_gpu_the_budget_holds_the_reservation_beside_the_models(
    small_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renderer refuses a budget that cannot hold the device's own fixed cost (the CUDA
    context), the device pixel path's frames on the card and the largest model: the bench's
    budget is those costs plus the models'."""
    from dataclasses import replace

    from ffdesk.bench import memory
    from ffdesk.pipeline.report import PixelFigures

    real = memory.render_in_process
    budgets: list[int] = []
    context, frames_on_card = 547 * 2**20, 96 * 2**20

    def as_on_a_gpu(clip: Path, pack: Path, out: Path, frames: int, extra: list[str]) -> Any:
        if "--memory-budget" in extra:
            budgets.append(int(extra[extra.index("--memory-budget") + 1]))
        report = real(clip, pack, out, frames, extra)
        assert report.models is not None
        pixels = PixelFigures("device", "cuda:0", device_bytes=frames_on_card)
        return replace(report, models=replace(report.models, reserved_bytes=context, pixels=pixels))

    monkeypatch.setattr(memory, "render_in_process", as_on_a_gpu)
    report = tmp_path / "memory.json"
    args = ["bench", "memory", "--frames", "2", "--batch", "2", "--budget-models", "1", "--provider", "cpu",
            "--models-dir", str(small_pack), "--json", str(report)]  # fmt: skip
    assert cli.main(args) == 0
    figures: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))["figures"]
    (budget,) = budgets
    largest = max(figures["models_mib"].values()) * 2**20
    assert budget == pytest.approx(context + frames_on_card + largest, abs=2**18)
    assert figures["reserved_mib"] == 547.0


def test_a_run_stopped_in_its_on_demand_render_keeps_the_all_resident_figures(
    small_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ffdesk.bench import memory
    from ffdesk.errors import Cancelled

    real = memory.render_in_process

    def stopped_on_demand(clip: Path, pack: Path, out: Path, frames: int, extra: list[str]) -> Any:
        if "--memory-budget" in extra:
            raise Cancelled("time is up")
        return real(clip, pack, out, frames, extra)

    monkeypatch.setattr(memory, "render_in_process", stopped_on_demand)
    report = tmp_path / "memory.json"
    args = ["bench", "memory", "--frames", "2", "--batch", "2", "--provider", "cpu",
            "--models-dir", str(small_pack), "--json", str(report)]  # fmt: skip
    assert cli.main(args) == 130
    figures: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))["figures"]
    assert figures["partial"] is True and figures["all_resident"]["fps"] > 0
    assert set(figures["all_resident"]["models_at_batch_mib"]) == set(PACK)


@pytest.mark.parametrize("bench", ["memory", "budget"])
@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("missing", "--models-dir: xseg_1.onnx is not in "),
        ("cut off", "xseg_1.onnx: truncated or not an ONNX model"),
    ],
)
def test_a_pack_file_missing_or_damaged_is_one_line_before_any_render(
    small_pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], bench: str, damage: str, said: str
) -> None:
    """The benches' renders found a missing or damaged file of `--models-dir` in processes of
    their own, and their refusal came back as an internal error (RuntimeError, a crash log)."""
    import shutil

    pack = Path(shutil.copytree(small_pack, tmp_path / "pack"))
    xseg = pack / "xseg_1.onnx"
    if damage == "missing":
        xseg.unlink()
    else:
        xseg.write_bytes(xseg.read_bytes()[:300])
    report = tmp_path / "b.json"
    args = [
        "bench",
        bench,
        "--frames",
        "2",
        "--provider",
        "cpu",
        "--models-dir",
        str(pack),
        "--json",
        str(report),
    ]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not report.exists()


def test_a_render_that_refuses_its_input_is_its_own_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bench's render that exits 2 said why in one line, which came back as an internal error
    with three lines of its output; it is that line now (exit 2)."""
    import subprocess

    from ffdesk.bench import memory
    from ffdesk.errors import UserError

    said = "ffdesk: error: memory budget 1.0 MiB is smaller than inswapper_128 (6.6 MiB)"
    done = subprocess.CompletedProcess([], 2, "", f"note: something first\n{said}\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: done)
    with pytest.raises(UserError, match=r"^the bench's render: memory budget 1\.0 MiB is smaller than"):
        memory.render_clip(tmp_path / "clip.mp4", tmp_path / "out.mp4", 2, [])
    crashed = subprocess.CompletedProcess([], 1, "", "ffdesk: internal error: KeyError\n")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: crashed)
    with pytest.raises(RuntimeError, match=r"render failed \(1\)"):
        memory.render_clip(tmp_path / "clip.mp4", tmp_path / "out.mp4", 2, [])
