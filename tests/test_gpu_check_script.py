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
    "nvidia-smi", "gpu-tests", "standins", "bench-gpu", "memory-cuda", "budget-cuda", "precision-cuda",
    "live-cuda", "processors-cuda",
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
    assert machine["imports"] == {"missing": {}, "tests_missing": {}}


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


CUDA_LISTED = """
import ffdesk.runtime.sessions as sessions

sessions.cuda_usable = lambda flags=None: True
"""
"""A machine whose ONNX Runtime lists CUDA and sees a GPU, but whose CUDA libraries do not load
(here: a CPU build asked for the CUDA provider): sessions run on the CPU."""


@pytest.mark.slow
def test_a_cuda_provider_that_runs_on_the_cpu_fails_the_machine_step(tmp_path: Path) -> None:
    """ONNX Runtime lists CUDA where cuDNN or the CUDA runtime then fail to load, and runs the
    session on the CPU: the machine step loads a model on CUDA through ffdesk, says so in one
    line and fails, and the benches would be skipped (they would measure the CPU)."""
    if has_nvidia_gpu():
        pytest.skip("this machine has an NVIDIA GPU: the script would run its 8 minutes")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(CUDA_LISTED, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(hook), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "check")],
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
        env=env,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    machine = json.loads((tmp_path / "check" / "machine.json").read_text(encoding="utf-8"))["ffdesk"]
    assert machine["cuda_usable"] is True and machine["cuda_runs"] is False, machine
    assert machine["cuda_session"]["providers"] == ["CPUExecutionProvider"]
    step = next(s for s in read_steps(tmp_path / "check" / "steps.tsv") if s["step"] == "machine")
    assert (step["result"], step["exit"]) == ("failed", "1"), step
    assert step["note"].startswith("ONNX Runtime lists CUDA but ran the session on"), step


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


@pytest.mark.slow
def test_the_device_call_brings_everything_back_in_three_files(tmp_path: Path) -> None:
    """`scripts/gpu_device.sh`: a part before the last only stores itself; the last runs the check
    and leaves summary.json, steps.tsv and one archive of every log and JSON in $OUT (the device
    tool brings back at most 8 files)."""
    if has_nvidia_gpu():
        pytest.skip("this machine has an NVIDIA GPU: the script would run its 8 minutes")
    import tarfile

    part = tmp_path / "p1"
    part.mkdir()
    env_file = tmp_path / "gpu-env.sh"
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "GPU_ENV": str(env_file), "OUT": str(out),
           "GPU_CHECK_DIR": str(tmp_path / "check")}  # fmt: skip
    device = ROOT / "scripts" / "gpu_device.sh"
    (part / "go.sh").write_text("echo 'gpu-bundle: 1 of 3 parts here; bring the next one'\n")
    first = subprocess.run(
        ["bash", str(device), str(part)], capture_output=True, text=True, timeout=60, env=env
    )
    assert first.returncode == 0 and "bring the next one now" in first.stdout, first.stdout + first.stderr
    assert not out.exists()
    # the third part on a machine that holds only itself (given back after the first two): said
    # at once, not taken for a part stored
    bare = tmp_path / "p3"
    bare.mkdir()
    (bare / "go.sh").write_text("echo 'gpu-bundle: 1 of 3 parts here; bring the next one'\n")
    lost = subprocess.run(
        ["bash", str(device), str(bare)], capture_output=True, text=True, timeout=60, env=env
    )
    assert lost.returncode == 3 and "bring every part again from p1" in lost.stdout, lost.stdout

    (part / "go.sh").write_text(f"echo 'export FFDESK_SEEN_ENV=1' > {env_file}\n")  # the last part
    last = subprocess.run(
        ["bash", str(device), str(part)], capture_output=True, text=True, timeout=LIMIT_S, env=env
    )
    assert last.returncode == 0, last.stdout + last.stderr
    assert sorted(p.name for p in out.iterdir()) == ["gpu-check.tar.gz", "steps.tsv", "summary.json"]
    with tarfile.open(out / "gpu-check.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"check/steps.tsv", "check/summary.json", "check/machine.json", "check/machine.log"} <= names
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["ok"] is True


def _last_device_call_stopped(tmp_path: Path, check: str, extra_env: dict[str, str]) -> Path:
    """Run `scripts/gpu_device.sh`'s last call with `check` standing in for gpu_check.sh, bringing
    back every second, until it has brought an archive back (at most 30 s), then kill it as the
    device tool stops a call at its limit. The folder it brought files back to ($OUT)."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "gpu_device.sh", root / "scripts" / "gpu_device.sh")
    (root / "scripts" / "gpu_check.sh").write_text(check)
    part = tmp_path / "p3"
    part.mkdir()
    env_file = tmp_path / "gpu-env.sh"
    (part / "go.sh").write_text(f"echo ': the last part' > {env_file}\n")
    out = tmp_path / "out"
    env = {**os.environ, "GPU_ENV": str(env_file), "OUT": str(out), "GPU_CHECK_DIR": str(tmp_path / "check"),
           "BRING_EVERY_S": "1", **extra_env}  # fmt: skip
    call = subprocess.Popen(
        ["bash", str(root / "scripts" / "gpu_device.sh"), str(part)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = 30.0
        while not (out / "gpu-check.tar.gz").exists() and deadline > 0:
            subprocess.run(["sleep", "0.25"], check=True)
            deadline -= 0.25
    finally:
        os.killpg(call.pid, 9)
        call.wait(timeout=10)
    return out


def test_a_device_call_stopped_mid_check_has_already_brought_back_what_was_measured(
    tmp_path: Path,
) -> None:
    """The device tool kills a call at its limit (less than asked when little device time is
    left) and brings back only what is in $OUT by then: the check's files are copied there while
    it runs, not only at its end. A stand-in check writes its first step, then hangs."""
    import tarfile

    check = (
        'mkdir -p "$1"; printf "step\\tresult\\nmachine\\tok\\n" > "$1/steps.tsv"\n'
        'echo "{}" > "$1/machine.json"; echo "budget ${GPU_CHECK_BUDGET_S:-unset}" > "$1/budget.log"\n'
        "sleep 60\n"
    )
    out = _last_device_call_stopped(tmp_path, check, {"GPU_CHECK_BUDGET_S": "300"})
    assert (out / "steps.tsv").read_text(encoding="utf-8").splitlines()[1] == "machine\tok"
    with tarfile.open(out / "gpu-check.tar.gz") as tar:
        names = set(tar.getnames())
        budget = tar.extractfile("check/budget.log")
        assert budget is not None and budget.read().decode().strip() == "budget 300"
    assert {"check/steps.tsv", "check/machine.json"} <= names
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")], "a half-copied file was left"


def test_a_log_growing_while_it_is_packed_still_comes_back(tmp_path: Path) -> None:
    """A step's log grows while the archive is made: GNU tar then warns "file changed as we read
    it" and exits 1, its archive whole. The archive must still replace the last one (before, the
    copy was dropped: a call stopped mid-step brought back nothing of that step, or nothing)."""
    import tarfile

    check = (
        'mkdir -p "$1"; printf "step\\tresult\\n" > "$1/steps.tsv"\n'
        '(while :; do echo "a line of the step" >> "$1/step.log"; done) &\n'
        "sleep 60\n"
    )
    out = _last_device_call_stopped(tmp_path, check, {})
    assert (out / "gpu-check.tar.gz").exists(), "no archive while a log grew"
    with tarfile.open(out / "gpu-check.tar.gz") as tar:
        assert "check/step.log" in tar.getnames()


WITH_PY_SPY = ROOT / "scripts" / "with_py_spy.sh"
BUSY = (
    "import subprocess, sys, threading\n"
    "done = threading.Event()\n"
    "def work():\n"
    "    s = 0\n"
    "    while not done.is_set():\n"
    "        for i in range(100_000): s += i\n"
    "t = threading.Thread(target=work, name='stage'); t.start()\n"
    "subprocess.run([sys.executable, '-c', 'sum(range(30_000_000))'], check=True)\n"
    "done.set(); t.join(); print('measured'); sys.exit(3)\n"
)
"""A command with a second thread, busy as long as its subprocess runs (so a sampler slowed by a
loaded machine still finds it, by name), which prints its figure and exits 3."""


def _py_spy() -> Path:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).is_file():
        pytest.skip("py-spy is not installed here (the dev extra has it)")
    return Path(found)


def _profiled(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(WITH_PY_SPY), str(tmp_path / "p.json"), sys.executable, "-c", BUSY],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_py_spy_samples_every_thread_and_subprocess_and_leaves_the_command_as_it_is(tmp_path: Path) -> None:
    """The bundle's way: py-spy unpacked from its wheel as a folder (no x bit), found there."""
    site = tmp_path / "site" / "py_spy-0.4.3.data" / "scripts"
    site.mkdir(parents=True)
    (site / "py-spy").write_bytes(_py_spy().read_bytes())  # written without the x bit
    env = {**os.environ, "PATH": "/usr/bin:/bin", "GPU_BUNDLE_SITE": str(tmp_path / "site")}
    env.pop("PY_SPY", None)
    run = _profiled(tmp_path, env)
    assert (run.returncode, run.stdout) == (3, "measured\n"), run.stderr
    profile = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    names = [p["name"] for p in profile["profiles"]]
    processes = {n.split(" Thread")[0] for n in names}
    assert len(processes) == 2, names  # the command and its subprocess
    # the command's second thread ("stage"; py-spy names it, but on a loaded machine it once read
    # no thread's name at all: the command's threads are then counted)
    most = max(sum(n.startswith(f"{p} Thread") for n in names) for p in processes)
    assert any('"stage"' in n for n in names) or most >= 2, names
    assert "Samples:" in (tmp_path / "p.json.log").read_text(encoding="utf-8")


def test_without_py_spy_the_command_runs_alone(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/usr/bin:/bin", "GPU_BUNDLE_SITE": str(tmp_path / "none")}
    env.pop("PY_SPY", None)
    run = _profiled(tmp_path, env)
    assert (run.returncode, run.stdout) == (3, "measured\n"), run.stderr
    assert not (tmp_path / "p.json").exists()
    assert (tmp_path / "p.json.log").read_text(encoding="utf-8").strip() == "py-spy not found: no profile"


def test_a_command_stopped_at_its_limit_still_leaves_its_profile(tmp_path: Path) -> None:
    """`timeout` ends the whole process group of a step at its limit; py-spy, in a session of its
    own, writes what it sampled once the command has gone."""
    spy = _py_spy()
    env = {**os.environ, "PY_SPY": str(spy)}
    run = subprocess.run(
        ["timeout", "3", "bash", str(WITH_PY_SPY), str(tmp_path / "p.json"), sys.executable, "-c",
         "import time\nwhile True: sum(range(100_000))"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert run.returncode == 124, run.stderr
    deadline = 30.0
    log = tmp_path / "p.json.log"  # py-spy says so once the file is whole
    while (
        "Wrote speedscope file" not in (log.read_text(encoding="utf-8") if log.exists() else "")
        and deadline > 0
    ):
        subprocess.run(["sleep", "0.25"], check=True)
        deadline -= 0.25
    profile = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    assert profile["profiles"] and profile["shared"]["frames"]
