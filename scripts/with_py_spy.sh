#!/usr/bin/env bash
# Run a command while py-spy samples it and its subprocesses from beside it:
#
#   bash scripts/with_py_spy.sh PROFILE COMMAND...
#
# PROFILE (speedscope JSON: open it at https://www.speedscope.app) gets every thread's Python
# stacks, idle ones too (a stage thread waiting on the card shows where it waits), sampled 50
# times a second without stopping the process (--nonblocking), so the figures COMMAND prints are
# its own; py-spy's own lines go to PROFILE.log. py-spy is $PY_SPY, else the one on PATH, else
# the one in the GPU bundle's unpacked wheels (../shared/tools/gpu-bundle ... py-spy==0.4.3).
# py-spy attaches to COMMAND's process rather than starting it, so where it is missing or may not
# trace (no ptrace), COMMAND runs as it would without it and only PROFILE is missing. Where
# COMMAND is stopped (`timeout` at a step's limit), py-spy still writes PROFILE once it has gone.
# The exit status is COMMAND's.
set -uo pipefail

PROFILE=${1:?usage: bash scripts/with_py_spy.sh PROFILE COMMAND...}
shift
[ $# -gt 0 ] || { echo "with_py_spy: no command given"; exit 2; }
BUNDLE_SITE=${GPU_BUNDLE_SITE:-/tmp/gpu-site}

spy=${PY_SPY:-$(command -v py-spy || true)}
if [ -z "$spy" ]; then  # a wheel unpacked as a folder keeps its scripts without their x bit
    found=$(find "$BUNDLE_SITE" -path '*.data/scripts/py-spy' -type f 2>/dev/null | head -n 1)
    if [ -n "$found" ]; then
        spy=$(mktemp -d)/py-spy && install -m 755 "$found" "$spy" || spy=""
    fi
fi

"$@" &
pid=$!
sampler=""
if [ -n "$spy" ]; then
    # in a session of its own: `timeout` ending the step's process group at its limit would end
    # py-spy with COMMAND, before it wrote anything; alone, it writes once COMMAND has gone
    detach=()
    if command -v setsid >/dev/null; then detach=(setsid); fi
    "${detach[@]}" "$spy" record --pid "$pid" --subprocesses --nonblocking --idle --threads --rate 50 \
        --format speedscope -o "$PROFILE" >"$PROFILE.log" 2>&1 &
    sampler=$!
else
    echo "py-spy not found: no profile" >"$PROFILE.log"
fi
wait "$pid"
rc=$?
if [ -n "$sampler" ]; then  # py-spy writes PROFILE once the process it follows has ended
    for _ in $(seq 1 40); do
        kill -0 "$sampler" 2>/dev/null || break
        sleep 0.25
    done
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
fi
exit "$rc"
