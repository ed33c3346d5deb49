"""Architecture contracts (pyproject's [tool.importlinter]): imports only go down the layers, the
core never imports Qt. Run here so the test command alone enforces them, as `lint-imports` does."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return subprocess.run([exe, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold() -> None:
    run = _lint(ROOT)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 kept, 0 broken" in run.stdout


def test_the_contracts_catch_a_core_module_that_imports_qt_or_a_front_end(tmp_path: Path) -> None:
    """The same contracts on a copy of the package with two offending modules added."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "ffdesk", copy / "ffdesk", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    (copy / "ffdesk" / "media" / "_offender.py").write_text("def f():\n    import pyqtgraph\n")
    (copy / "ffdesk" / "runtime" / "_upward.py").write_text("from ffdesk.pipeline import engine\n")
    run = _lint(copy)
    assert run.returncode != 0
    assert "ffdesk.media._offender -> pyqtgraph" in run.stdout
    assert "ffdesk.runtime._upward -> ffdesk.pipeline.engine" in run.stdout
