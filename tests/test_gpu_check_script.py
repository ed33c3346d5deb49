"""`scripts/gpu_check.sh` on a machine without an NVIDIA GPU (CI, the development machine): it
ends in seconds with every GPU step recorded as skipped ("no GPU"), writes steps.tsv and
summary.json, and nothing in it fails or prints a traceback. Its limits fit its 8 minutes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hidden_package import env_without

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
GPU_STEPS = (
    "nvidia-smi", "gpu-tests", "standins", "bench-gpu", "memory-cuda", "precision-cuda", "live-cuda",
    "processors-cuda",
)  # fmt: skip
"""The steps that need a GPU, in the script's order (`machine` runs everywhere)."""
LIMIT_S = 240
"""The most the script may take here (it takes a few seconds)."""
WHOLE_RUN_S = 8 * 60


def has_nvidia_gpu() -> bool:
    """Whether nvidia-smi lists a GPU (the script's own test for one)."""
    if shutil.which("nvidia-smi") is None:
        return False
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    return any(line.startswith("GPU ") for line in listed.stdout.splitlines())


def read_steps(tsv: Path) -> list[dict[str, str]]:
    header, *rows = tsv.read_text(encoding="utf-8").splitlines()
    names = header.split("\t")
    return [dict(zip(names, row.split("\t"), strict=True)) for row in rows]


def test_without_a_gpu_every_gpu_step_is_skipped(tmp_path: Path) -> None:
    if has_nvidia_gpu():
        pytest.skip("this machine has an NVIDIA GPU: the script would run its 8 minutes")
    out = tmp_path / "check"
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.run(  # OUTDIR relative to the caller's folder, not the script's
        ["bash", str(SCRIPT), "check"], capture_output=True, text=True, timeout=LIMIT_S, env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr

    steps = read_steps(out / "steps.tsv")
    assert [s["step"] for s in steps] == ["nvidia-smi", "machine", *GPU_STEPS[1:]]
    for s in steps:
        if s["step"] in GPU_STEPS:
            assert (s["result"], s["exit"]) == ("skipped", "-") and s["note"].startswith("no GPU"), s
        else:
            assert (s["result"], s["exit"]) == ("ok", "0"), s
    for log in out.glob("*.log"):
        assert "Traceback" not in log.read_text(encoding="utf-8", errors="replace"), log

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["gpu"] is False and summary["no_gpu_reason"].startswith("no GPU")
    assert summary["ok"] is True and summary["seconds"] < LIMIT_S
    assert [(s["step"], s["result"]) for s in summary["steps"]] == [(s["step"], s["result"]) for s in steps]
    assert not any(s["traceback"] for s in summary["steps"])
    machine = summary["machine"]
    assert machine == json.loads((out / "machine.json").read_text(encoding="utf-8"))
    assert "CPUExecutionProvider" in machine["onnxruntime"]["providers"]
    assert machine["ffdesk"]["cuda_usable"] is False and machine["torch"]["cuda_is_available"] is False
    assert machine["imports"] == {"missing": {}}


def test_a_missing_package_fails_the_machine_step_naming_what_to_bundle(tmp_path: Path) -> None:
    """The GPU machine lacks some of ffdesk's packages: the machine step says which to bundle."""
    if has_nvidia_gpu():
        pytest.skip("this machine has an NVIDIA GPU: the script would run its 8 minutes")
    env = {**env_without("scenedetect", tmp_path / "hide"), "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "check")],
        capture_output=True, text=True, timeout=LIMIT_S, env=env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    machine = next(s for s in read_steps(tmp_path / "check" / "steps.tsv") if s["step"] == "machine")
    assert (machine["result"], machine["exit"]) == ("failed", "1"), machine
    assert machine["note"] == (
        "missing packages: scenedetect (bundle them: ../shared/tools/gpu-bundle scenedetect-headless==0.7.2)"
    )
    summary = json.loads((tmp_path / "check" / "summary.json").read_text(encoding="utf-8"))
    assert list(summary["machine"]["imports"]["missing"]) == ["scenedetect"]


def test_the_step_limits_fit_the_budget_and_the_budget_fits_eight_minutes() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    budget = int(re.search(r"^BUDGET_S=(\d+)$", text, re.MULTILINE).group(1))  # type: ignore[union-attr]
    kill_after = int(re.search(r"^KILL_AFTER_S=(\d+)$", text, re.MULTILINE).group(1))  # type: ignore[union-attr]
    calls = re.findall(r'^(?:step|when "\$\w+") ([\w-]+) (\d+) ', text, re.MULTILINE)
    assert [name for name, _ in calls] == ["nvidia-smi", "machine", *GPU_STEPS[1:]]
    assert sum(int(limit) for _, limit in calls) <= budget
    assert budget + kill_after + 5 <= WHOLE_RUN_S  # + 5 s for the summary
    for name, limit in calls:  # the header's table says the same limits
        assert re.search(rf"^#   {re.escape(name)} +{limit} ", text, re.MULTILINE), name
