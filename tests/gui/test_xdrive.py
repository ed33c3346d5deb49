"""scripts/xdrive.py notices an app that exits before its window appears (bad arguments, a crash)
and says so in one line with what the app wrote to stderr, instead of waiting for a window."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "xdrive.py"


def _xdrive() -> ModuleType:
    spec = importlib.util.spec_from_file_location("xdrive", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_app_that_exits_at_once_is_one_line_with_its_stderr() -> None:
    xdrive = _xdrive()
    said = "usage: ffdesk gui [-h] [CLIP]\nffdesk: error: unrecognized arguments: --bogus\n"
    app = subprocess.Popen(
        [sys.executable, "-c", f"import sys; sys.stderr.write({said!r}); sys.exit(2)"], stderr=subprocess.PIPE
    )
    assert app.stderr is not None
    stderr = xdrive.StderrTail(app.stderr)
    app.wait(30)
    assert xdrive.wait_for_window({}, app, "ffdesk", timeout_s=5.0) is None
    assert stderr.last_line() == "ffdesk: error: unrecognized arguments: --bogus"
