"""Boot the VM of scripts/v4l2_vm.sh and run the real-device tests in it (slow: about a minute
of an emulated machine; skips where no kit has been made or QEMU is missing).

    bash scripts/v4l2_vm.sh make /tmp/v4l2-kit     # once (or FFDESK_V4L2_KIT=KIT)
    .venv/bin/python -m pytest -m slow tests/media/test_v4l2_vm.py
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KIT = Path(os.environ.get("FFDESK_V4L2_KIT", "/tmp/v4l2-kit"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (KIT / "vmlinuz").is_file(), reason=f"no VM kit in {KIT} (v4l2_vm.sh make)"),
    pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="QEMU is missing"),
]


def test_the_camera_code_holds_on_a_real_v4l2_driver() -> None:
    run = subprocess.run(
        ["bash", "scripts/v4l2_vm.sh", "run", str(KIT), "tests/media/v4l2_in_vm.sh", "400"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=460,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) >= 12 and "skipped" not in run.stdout, run.stdout[-2000:]
