#!/usr/bin/env bash
# Set up (if needed) and run the main job: make a sample clip and swap the bundled sample face onto it
# with the embedded models, and print where the output is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/ffdesk sample --out "${1:-sample_out}"
