"""Processes ffdesk starts never import code from the current folder: a downloaded pack's or a
shared farm folder holding a `multiprocessing/` (or `ffdesk/`) folder is data, not code."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PARENT = textwrap.dedent(
    """
    import multiprocessing, os, sys
    import ffdesk  # sets what its children inherit

    if __name__ == "__main__":
        child = multiprocessing.get_context("spawn").Process(target=os.getpid)
        child.start()
        child.join(60)
        print("exit", child.exitcode)
    """
)


def test_a_spawned_child_does_not_import_a_planted_module_from_the_current_folder(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    planted = tmp_path / "pack" / "multiprocessing"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    env["PYTHONPATH"] = str(ROOT)
    # the parent itself is started as a console script is: its own folder first, not the pack's
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=planted.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and "exit 0" in run.stdout, run.stderr
    assert not marker.exists()


def test_a_value_the_user_set_stays() -> None:
    env = {**os.environ, "PYTHONSAFEPATH": "", "PYTHONPATH": str(ROOT)}
    code = "import os, ffdesk; print(repr(os.environ['PYTHONSAFEPATH']))"
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert run.stdout.strip() == "''", run.stderr
