"""`ffdesk bench gpu`'s lines say what was measured: the batch each model alone was timed at,
"n/a" for the pixels' GPU memory where they stayed off a GPU, and `--allow-cpu` in its help."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffdesk import cli
from ffdesk.bench import gpu
from ffdesk.pipeline.report import PixelFigures

TINY = ["--allow-cpu", "--frames", "2", "--batch", "2", "--height", "144", "--model-runs", "2"]


def _timing(name: str, batch: int, ms: float | None = 1.0) -> gpu.ModelTiming:
    return gpu.ModelTiming(name, "swapper", "fp32", "CPUExecutionProvider", batch, ms)


def test_allow_cpu_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "gpu", "--help"]) == 0
    assert "--allow-cpu" in capsys.readouterr().out


def test_the_batches_line_names_each_batch_a_model_was_timed_at() -> None:
    asked = [_timing("a", 4), _timing("b", 4)]
    assert gpu.batches_line(asked, 4) == "models alone: timed at batch 4: a, b"
    mixed = [_timing("one", 1), _timing("a", 4), _timing("b", 1), _timing("failed", 4, None)]
    assert gpu.batches_line(mixed, 4) == (
        "models alone: timed at batch 4: a; at batch 1, as their files fix it: one, b"
    )
    assert (
        gpu.batches_line([_timing("one", 1)], 4)
        == "models alone: timed at batch 1, as its file fixes it: one"
    )
    assert gpu.batches_line([_timing("failed", 4, None)], 4) is None


def test_the_pixels_gpu_memory_is_read_only_where_they_stayed_on_a_gpu() -> None:
    assert gpu._gpu_pixel_bytes(PixelFigures("device", "cuda:0", (), 5 * 2**20)) == 5 * 2**20
    assert gpu._gpu_pixel_bytes(PixelFigures("device", "cpu")) is None
    assert gpu._gpu_pixel_bytes(PixelFigures("host", "")) is None
    assert gpu._gpu_pixel_bytes(None) is None
    assert gpu._pixel_memory(None) == "n/a"
    assert gpu._pixel_memory(5 * 2**20) == "5 MiB at most (torch's allocator)"


def test_a_cpu_run_of_batch_one_files_says_the_batch_it_timed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FaceFusion's shapes (batch fixed at 1) on the host path, where no batch-free copy is made:
    the models are timed at batch 1 and every line says so; the pixels' GPU memory is n/a."""
    from ffdesk.runtime.standins import write_standins

    folder = tmp_path / "published"
    write_standins(folder, [m.name for m in gpu.SWAP_PACK])
    report = tmp_path / "gpu.json"
    args = [
        *TINY,
        "--renders",
        "swap",
        "--pixels",
        "host",
        "--models-dir",
        str(folder),
        "--json",
        str(report),
    ]
    assert cli.main(["bench", "gpu", *args]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "models alone: inswapper_128, arcface_w600k_r50 in a fresh process ..." in lines, out
    assert "models alone: timed at batch 1, as their files fix it: inswapper_128, arcface_w600k_r50" in lines
    assert "at batch 2" not in out
    assert "  pixels' GPU memory   n/a" in lines, out
    rows = [line for line in lines if line.startswith(("  inswapper_128 ", "  arcface_w600k_r50 "))]
    assert len(rows) == 2 and all(row.endswith("(its file fixes the batch at 1)") for row in rows), rows
    (render,) = json.loads(report.read_text(encoding="utf-8"))["figures"]["renders"]
    assert render["pixel_bytes"] is None and render["pixels_used"] == "host"
    assert [(m["batch"], m["note"]) for m in render["models_alone"]] == [
        (1, "its file fixes the batch at 1")
    ] * 2
