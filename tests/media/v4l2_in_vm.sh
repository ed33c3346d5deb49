#!/usr/bin/env bash
# Run inside the VM of scripts/v4l2_vm.sh (vivid loaded): the tests that need a real V4L2 device.
set -uo pipefail
PY=${PYTHON:-.venv/bin/python}
exec "$PY" -m pytest -q -p no:cacheprovider -o addopts="" tests/media/test_v4l2_device.py "$@"
