"""`ffdesk bench gpu`: renders watched from outside through NVML, and their models timed alone.

No GPU here: the no-GPU line is checked as it is, every other path runs on the CPU (`--allow-cpu`,
or NVML replaced by the telemetry tests' stand-in for `pynvml`), with tiny stand-ins and clips.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from ffdesk import cli
from ffdesk.bench import gpu
from ffdesk.telemetry.host import HostSample
from ffdesk.telemetry.nvml import Nvml
from ffdesk.telemetry.sampler import Sample
from tests.telemetry.fake_nvml import FakeDevice, FakeNvml

TINY = ["--allow-cpu", "--frames", "4", "--batch", "2", "--height", "144", "--model-runs", "1"]
STAGES = {"decode", "swap", "encode"}


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Small stand-ins of the bench's five models, any batch."""
    from ffdesk.runtime.standins import write_standins

    folder = tmp_path_factory.mktemp("gpu-pack")
    names = [m.name for m in gpu.FULL_PACK]
    write_standins(folder, names, realistic=False, dynamic_batch=True)
    return folder


def _figures(path: Path) -> dict[str, Any]:
    rec = json.loads(path.read_text(encoding="utf-8"))
    assert rec["bench"] == "gpu"
    figures: dict[str, Any] = rec["figures"]
    return figures


def test_no_gpu_is_one_line_and_exit_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FFDESK_NO_NVML", "1")
    assert cli.main(["bench", "gpu"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "ffdesk bench gpu: no NVIDIA GPU here (NVML disabled by FFDESK_NO_NVML); nothing to measure"
    ]
    assert out.err == ""
    report = tmp_path / "gpu.json"
    assert cli.main(["bench", "gpu", "--json", str(report)]) == 0
    assert _figures(report) == {"gpu": None, "reason": "no NVIDIA GPU: NVML disabled by FFDESK_NO_NVML"}
    # nothing measured, nothing in the history `ffdesk bench history` compares runs from
    history = Path(os.environ["FFDESK_BENCH_HISTORY"])
    assert not history.exists() or "gpu" not in history.read_text(encoding="utf-8")


def test_a_gpu_onnx_runtime_cannot_use_is_no_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gpu, "Nvml", functools.partial(Nvml, FakeNvml()))
    monkeypatch.setattr(gpu, "cuda_usable", lambda flags=None: False)
    assert cli.main(["bench", "gpu"]) == 0
    line = capsys.readouterr().out.strip()
    assert line == (
        "ffdesk bench gpu: no NVIDIA GPU here (ONNX Runtime here has no CUDA provider it can use);"
        " nothing to measure"
    )


def test_unknown_render_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "gpu", "--renders", "full,fastest"]) == 2
    assert "unknown render fastest" in capsys.readouterr().err


def test_a_tiny_cpu_run_gives_every_figure_but_the_gpus(
    pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "gpu.json"
    assert cli.main(["bench", "gpu", *TINY, "--models-dir", str(pack), "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "--allow-cpu: on the CPU, GPU figures empty" in out
    assert "render full-720-medium: 144p, full pack, x264 medium" in out
    assert "models-alone ceiling" in out and "efficiency" in out
    figures = _figures(report)
    assert figures["gpu"] is None and figures["reason"].startswith("no NVIDIA GPU")
    assert "partial" not in figures
    renders = {r["name"]: r for r in figures["renders"]}
    assert list(renders) == ["full", "swap", "full-720-medium"]
    for render in renders.values():
        assert render["error"] is None and render["provider"] == "cpu"
        assert render["frames"] == 4 and render["fps"] > 0 and render["height"] == 144
        # the models' preparation is timed apart and left out of the render's own rate
        assert render["prepare_seconds"] > 0 and render["seconds"] > 0
        assert set(render["stage_ms_per_frame"]) >= STAGES
        assert set(render["stage_cpu_ms_per_frame"]) == set(render["stage_ms_per_frame"])
        assert all(ms is not None and ms >= 0 for ms in render["stage_ms_per_frame"].values())
        for key in ("gpu_util_mean_pct", "process_gpu_memory_peak_bytes", "gpu_memory_used_peak_bytes"):
            assert render[key] is None
        assert render["power_mean_w"] is None and render["energy_j"] is None
        assert render["energy_per_frame_j"] is None and render["energy_source"] is None
        assert render["samples"] > 0 and render["process_cpu_mean_pct"] is not None
        assert render["model_providers"] == ["CPUExecutionProvider"]
        assert render["pixels"] == "auto" and render["pixels_used"] == "host"  # auto: the host on a CPU
        for model in render["models_alone"]:
            assert model["error"] is None and model["ms_per_call"] > 0 and model["batch"] == 2
            assert model["ms_per_face"] == pytest.approx(model["ms_per_call"] / 2)
            # the per-face models are timed with ONNX Runtime's memory pattern on too, and what
            # each way holds is read; the recogniser (once a source photo) is not
            per_face = model["role"] != "recognizer"
            assert (model["pattern_ms_per_call"] is not None and model["pattern_ms_per_call"] > 0) == per_face
            assert model["held_bytes"] is not None
            assert (model["pattern_held_bytes"] is not None) == per_face
        assert render["models_alone_ceiling_fps"] > 0
        assert render["efficiency"] == pytest.approx(
            render["fps"] / render["models_alone_ceiling_fps"], rel=0.01
        )
    assert "enhance" in renders["full"]["stage_ms_per_frame"]
    assert "enhance" not in renders["swap"]["stage_ms_per_frame"]
    # on the CPU nothing is warmed: models meet their shapes in the frames, counted by model key
    # (the quality check's FP32 swapper is inswapper_128 too, not to be merged with the FP16 one)
    late = renders["full"]["late_shapes"]
    assert late.get("inswapper_128@fp16", 0) > 0 and all("@" in key for key in late), late
    full = {m["name"]: m for m in renders["full"]["models_alone"]}
    assert set(full) == {m.name for m in gpu.FULL_PACK}
    assert full["inswapper_128"]["precision"] == "fp16" and full["gfpgan_1.4"]["precision"] == "fp32"
    assert [m["name"] for m in renders["swap"]["models_alone"]] == ["inswapper_128", "arcface_w600k_r50"]
    per_face = sum(
        full[m]["ms_per_face"] for m in ("inswapper_128", "gfpgan_1.4", "xseg_1", "bisenet_resnet_34")
    )
    assert renders["full"]["models_alone_ceiling_fps"] == pytest.approx(1000 / per_face, rel=0.01)


def test_a_run_stopped_between_renders_leaves_the_renders_it_measured(
    pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`scripts/gpu_check.sh` stops a bench at its time limit: the JSON file holds each render
    measured before then, marked partial."""
    from ffdesk.errors import Cancelled

    measure = gpu.measure_render
    calls: list[str] = []

    def stopped_at_the_second(config: gpu.RenderConfig, *args: Any, **kwargs: Any) -> gpu.RenderResult:
        calls.append(config.name)
        if len(calls) == 2:
            raise Cancelled("time is up")
        return measure(config, *args, **kwargs)

    monkeypatch.setattr(gpu, "measure_render", stopped_at_the_second)
    report = tmp_path / "gpu.json"
    # swap runs first (the renders run in their listed order), then full-720-medium is stopped
    renders = "swap,full-720-medium"
    args = ["bench", "gpu", *TINY, "--renders", renders, "--models-dir", str(pack), "--json", str(report)]
    assert cli.main(args) == 130
    assert calls == ["swap", "full-720-medium"]
    figures = _figures(report)
    assert figures["partial"] is True
    assert [(r["name"], r["error"]) for r in figures["renders"]] == [("swap", None)]
    assert figures["renders"][0]["fps"] > 0


def test_a_run_stopped_in_its_first_render_leaves_the_models_alone_timings(
    pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timing the models alone makes the variants and pays the cuDNN searches: minutes on a first
    GPU run. A time limit in the first render still leaves those timings."""
    from ffdesk.errors import Cancelled

    def stopped(config: gpu.RenderConfig, *args: Any, **kwargs: Any) -> gpu.RenderResult:
        raise Cancelled("time is up")

    monkeypatch.setattr(gpu, "measure_render", stopped)
    report = tmp_path / "gpu.json"
    args = ["bench", "gpu", *TINY, "--renders", "swap", "--models-dir", str(pack), "--json", str(report)]
    assert cli.main(args) == 130
    figures = _figures(report)
    assert figures["partial"] is True and figures["renders"] == []
    alone = {m["name"]: m for m in figures["models_alone"]}
    assert set(alone) == {"inswapper_128", "arcface_w600k_r50"}
    assert all(m["error"] is None and m["ms_per_call"] > 0 for m in alone.values())


class _RenderOnGpu(FakeNvml):
    """A GPU whose only process is whatever child this process has (the render): 1 GiB."""

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses")
        return [SimpleNamespace(pid=c.pid, usedGpuMemory=2**30) for c in psutil.Process().children()]


def test_gpu_figures_are_sampled_outside_the_render(
    pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = _RenderOnGpu(energy_step_mj=500)
    monkeypatch.setattr(gpu, "Nvml", functools.partial(Nvml, fake))
    monkeypatch.setattr(gpu, "cuda_usable", lambda flags=None: True)
    report = tmp_path / "gpu.json"
    args = [*TINY[1:], "--renders", "swap", "--models-dir", str(pack), "--json", str(report)]
    assert cli.main(["bench", "gpu", *args]) == 0
    out = capsys.readouterr().out
    assert "no NVIDIA GPU" not in out
    assert "note: --provider cuda asked, but the models ran on the CPU" in out
    assert "GPU busy, mean       87.0 %" in out
    figures = _figures(report)
    assert figures["reason"] is None
    assert figures["gpu"] == {
        "name": "NVIDIA Fake 4090",
        "memory_total_bytes": 24 * 2**30,
        "power_limit_w": 450.0,
        "count": 1,
    }
    (render,) = figures["renders"]
    assert render["provider"] == "cuda" and render["samples"] > 0
    assert render["gpu_util_mean_pct"] == 87.0 and render["power_mean_w"] == 215.5
    assert render["process_gpu_memory_peak_bytes"] == 2**30
    assert render["gpu_memory_used_peak_bytes"] == 3 * 2**30
    assert render["energy_source"] == "nvml_total_energy" and render["energy_j"] > 0
    assert render["energy_per_frame_j"] == pytest.approx(render["energy_j"] / 4)
    assert fake.calls["nvmlDeviceGetPcieThroughput"] <= 4  # read once per NVML start, not every tick


def _samples(fake: FakeNvml, readings: list[tuple[float, int, int, int]]) -> list[Sample]:
    """Samples at times t of a GPU reading (util %, power mW, the watched pid's bytes)."""
    nvml = Nvml(fake, pid=4242)
    out = []
    device = fake.devices[0]
    for t, util, power_mw, held in readings:
        device.util_gpu, device.power_mw, device.compute = util, power_mw, [(4242, held)]
        host = HostSample(pid=4242, process_cpu_pct=150.0)
        out.append(Sample(t=t, wall_time=t, host=host, gpus=nvml.sample()))
    nvml.close()
    return out


def test_figures_cover_the_renders_span_and_integrate_power_without_an_energy_counter() -> None:
    fake = FakeNvml([FakeDevice()], fail={"nvmlDeviceGetTotalEnergyConsumption"})
    samples = _samples(
        fake,
        [
            (0.0, 0, 50_000, 600),  # loading, before the render's span
            (1.0, 40, 100_000, 2000),
            (2.0, 60, 300_000, 3000),
            (3.0, 0, 60_000, 0),  # after it: the process let go of its memory
        ],
    )
    figures = gpu.watch_figures(samples, start=0.5, end=2.5)
    assert figures.samples == 2
    assert figures.gpu_util_mean_pct == 50.0 and figures.power_mean_w == 200.0
    assert figures.energy_source == "power_integral" and figures.energy_j == pytest.approx(200.0)
    assert figures.process_gpu_memory_peak_bytes == 3000  # over the process's life
    assert figures.process_cpu_mean_pct == 150.0
    assert gpu.watch_figures([], 0.0, 1.0) == gpu.WatchFigures(samples=0)


def test_a_render_never_seen_on_the_gpu_has_no_process_memory_figure() -> None:
    """Not 0 bytes: NVML may list the process under another pid (a container's)."""
    fake = FakeNvml([FakeDevice()], energy_step_mj=1000)
    figures = gpu.watch_figures(_samples(fake, [(0.0, 5, 60_000, 0), (1.0, 5, 60_000, 0)]), 0.0, 1.0)
    assert figures.process_gpu_memory_peak_bytes is None
    assert figures.gpu_memory_used_peak_bytes == 3 * 2**30
    assert figures.energy_source == "nvml_total_energy" and figures.energy_j == 1.0


def test_a_failing_render_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "no-models"
    empty.mkdir()
    assert cli.main(["bench", "gpu", *TINY, "--renders", "swap", "--models-dir", str(empty)]) == 1
    out = capsys.readouterr()
    failed = [line for line in out.err.splitlines() if "render swap failed" in line]
    assert len(failed) == 1 and "inswapper_128" in failed[0] and "not found" in failed[0]
    assert "Traceback" not in out.err + out.out
    assert all(line.startswith("ffdesk bench gpu: ") for line in out.err.splitlines())


def test_published_batch_one_files_are_timed_and_rendered_through_their_batch_free_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With FaceFusion's shapes (batch fixed at 1) and the faces batched (the device path here,
    a GPU there), the models alone are timed as the render loads them, and the render's line
    says what each batch-1 file did."""
    from ffdesk.runtime.standins import write_standins

    folder = tmp_path / "published"
    write_standins(folder, [m.name for m in gpu.FULL_PACK])  # batch 1, as FaceFusion's files
    report = tmp_path / "gpu.json"
    args = [
        *TINY,
        "--renders",
        "swap",
        "--pixels",
        "device",
        "--models-dir",
        str(folder),
        "--json",
        str(report),
    ]
    assert cli.main(["bench", "gpu", *args]) == 0
    out = capsys.readouterr().out
    assert "  batch-1 file         inswapper_128: its batch freed (a checked copy)\n" in out, out
    (render,) = _figures(report)["renders"]
    assert render["model_batch_notes"] == ["inswapper_128: its batch freed (a checked copy)"]
    swapper = next(m for m in render["models_alone"] if m["name"] == "inswapper_128")
    assert (swapper["batch"], swapper["note"], swapper["error"]) == (2, "its batch-free copy", None)
    recognizer = next(m for m in render["models_alone"] if m["name"] == "arcface_w600k_r50")
    # once a source: as the render runs it, and the row says why its batch is not the render's
    assert (recognizer["batch"], recognizer["note"]) == (1, "its file fixes the batch at 1")
