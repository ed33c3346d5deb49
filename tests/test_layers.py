"""Architecture contracts: core never imports Qt, and imports only go downward."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "ffdesk"
CORE = ("pipeline", "runtime", "faces", "swap", "media", "telemetry", "training")
QT_MODULES = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "shiboken6", "superqt", "qtpy")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _core_files() -> list[Path]:
    return sorted(p for pkg in CORE for p in (ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_qt(path: Path) -> None:
    bad = {n for n in _imports(path) if n.split(".")[0] in QT_MODULES}
    assert not bad, f"{path.relative_to(ROOT)} imports Qt: {sorted(bad)}"


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_front_ends(path: Path) -> None:
    bad = {
        n
        for n in _imports(path)
        if n.startswith(("ffdesk.gui", "ffdesk.cli", "ffdesk.commands", "ffdesk.bench"))
    }
    assert not bad, f"{path.relative_to(ROOT)} imports a front end: {sorted(bad)}"


def test_the_checker_sees_a_qt_import(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("from PySide6.QtCore import QObject\nimport numpy\n")
    assert "PySide6.QtCore" in _imports(f)
