#!/usr/bin/env bash
# Run the model benches on a GPU machine, on CUDA and on TensorRT, and write their JSON to OUTDIR.
#
#   scripts/gpu_bench.sh OUTDIR
#
# Budget: under 8 minutes in all. Each step has its own time limit; a step that fails or runs
# out of time is recorded in OUTDIR/steps.tsv and the script goes on with the next one.
# Uses .venv/bin/python (or $PYTHON). Stand-ins are written on the first run and cached.
set -uo pipefail

OUT=${1:?usage: scripts/gpu_bench.sh OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-.venv/bin/python}
export FFDESK_BENCH_HISTORY="$OUT/history.jsonl"
START=$(date +%s)

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUT/gpu.csv" 2>&1 || true
"$PY" - >"$OUT/providers.json" 2>&1 <<'EOF' || true
import json, onnxruntime as ort
from ffdesk.runtime.sessions import cuda_usable, gpu_count
print(json.dumps({"available": ort.get_available_providers(), "cuda_usable": cuda_usable(), "gpus": gpu_count()}))
EOF

printf 'step\tseconds\texit\n' >"$OUT/steps.tsv"
step() {  # step NAME LIMIT_S COMMAND...
    local name=$1 limit=$2
    shift 2
    local left=$((470 - ($(date +%s) - START)))
    if ((left < 20)); then
        printf '%s\t0\tskipped (time)\n' "$name" >>"$OUT/steps.tsv"
        return
    fi
    ((limit > left)) && limit=$left
    local t0=$(date +%s)
    echo "== $name (limit ${limit}s)"
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    printf '%s\t%s\t%s\n' "$name" "$(($(date +%s) - t0))" "$rc" >>"$OUT/steps.tsv"
    tail -n 12 "$OUT/$name.log"
}

# Stand-ins first (CPU work, cached for the steps below).
step standins 120 "$PY" -c "
from ffdesk.bench.memory import realistic_pack, face_clip
from ffdesk.bench.pipeline import MODELS
realistic_pack(('inswapper_128', 'arcface_w600k_r50', 'gfpgan_1.4', 'xseg_1', 'bisenet_resnet_34'))
face_clip()
"

step pipeline-cuda 70 "$PY" -m ffdesk bench pipeline --realistic --provider cuda --frames 100 \
    --json "$OUT/pipeline-cuda.json"
step memory-cuda 70 "$PY" -m ffdesk bench memory --provider cuda --frames 16 \
    --json "$OUT/memory-cuda.json"
step precision-cuda 80 "$PY" -m ffdesk bench precision --provider cuda --runs 10 \
    --json "$OUT/precision-cuda.json"
# TensorRT builds an engine per model on first use (cached for later runs): the longest steps.
step pipeline-tensorrt 110 "$PY" -m ffdesk bench pipeline --realistic --provider tensorrt --frames 100 \
    --json "$OUT/pipeline-tensorrt.json"
step precision-tensorrt 60 "$PY" -m ffdesk bench precision --provider tensorrt --runs 10 \
    --models inswapper_128 --json "$OUT/precision-tensorrt.json"

echo "total $(($(date +%s) - START)) s; JSON and logs in $OUT"
cat "$OUT/steps.tsv"
