#!/usr/bin/env bash
# Set up (if needed) and run every check CI runs: ruff, mypy, the import contracts (layers, Qt-free core) and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export QT_QPA_PLATFORM=offscreen
echo "== ruff"; .venv/bin/ruff check ffdesk tests
echo "== mypy"; .venv/bin/mypy ffdesk tests  # one run: the tests import the package it has just checked
echo "== k8s manifests"; .venv/bin/python packaging/k8s/validate.py
echo "== import contracts"; .venv/bin/lint-imports --no-cache
# one worker more than there are cores runs test files (a file's tests stay on one worker: its
# module fixtures run once): many tests wait on what they started (a Ray cluster, a child render,
# a clip camera playing in real time), and the extra worker fills those waits (on 2 cores: 3
# workers 10 min 53 s; 2 workers 14 min 3 s, with 60 fuzz cases more, since marked slow); each
# test has pytest-timeout's limit, and the
# whole run 40 minutes (8 here): a worker killed by a crash once left xdist's controller waiting
# for it with nothing running
workers=$(( $(nproc) + 1 ))
echo "== pytest"; timeout -k 30 2400 .venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadfile "$@"
echo "== gui smoke (Xvfb)"; bash scripts/gui_smoke.sh
