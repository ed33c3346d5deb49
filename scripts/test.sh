#!/usr/bin/env bash
# Set up (if needed) and run every check CI runs: ruff, mypy, the import contracts (layers, Qt-free core) and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export QT_QPA_PLATFORM=offscreen
echo "== ruff"; .venv/bin/ruff check ffdesk tests
echo "== k8s manifests"; .venv/bin/python packaging/k8s/validate.py
echo "== import contracts"; .venv/bin/lint-imports --no-cache
# mypy (one run: the tests import the package it checks) runs beside pytest, whose workers leave
# about a quarter of the cores idle while tests wait; its result is printed after pytest's
mypy_log=$(mktemp)
.venv/bin/mypy ffdesk tests >"$mypy_log" 2>&1 &
mypy_pid=$!
# (an interrupted or failed run stops mypy and removes its log too: a background job of a script
# ignores Ctrl-C)
trap 'kill "$mypy_pid" 2>/dev/null || true; rm -f "$mypy_log"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# one worker more than there are cores runs test files (a file's tests stay on one worker: its
# module fixtures run once): many tests wait on what they started (a Ray cluster, a child render,
# a clip camera playing in real time), and the extra worker fills those waits; a second extra one
# gained nothing steady (on 2 cores, the same hour: 3 workers 16 min 11 s, 4 workers 16 min 55 s;
# an hour before, 14 min 18 s and 12 min 37 s). FFDESK_TEST_WORKERS sets another count. Each test has
# pytest-timeout's limit and the whole run 40 minutes: a worker killed by a crash once left
# xdist's controller waiting for it with nothing running.
workers=${FFDESK_TEST_WORKERS:-$(($(nproc) + 1))}
echo "== pytest ($workers workers)"
pytest_rc=0
timeout -k 30 2400 .venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadfile "$@" || pytest_rc=$?
mypy_rc=0
wait "$mypy_pid" || mypy_rc=$?
echo "== mypy"; cat "$mypy_log"; rm -f "$mypy_log"
if [ "$pytest_rc" != 0 ] || [ "$mypy_rc" != 0 ]; then
  echo "failed: pytest exit $pytest_rc, mypy exit $mypy_rc" >&2
  exit 1
fi
echo "== gui smoke (Xvfb)"; bash scripts/gui_smoke.sh
