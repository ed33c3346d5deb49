"""The scripts, the docs' screenshot script and the packaging import ffdesk's names as they are.

They run outside the test suite (the GUI smoke test in CI, the GPU check on a lent card, the
benches by hand), so a name moved inside the package would otherwise be found only when one of them
runs: this reads each `from ffdesk... import ...` in them (Python files and the Python embedded in
shell scripts) and checks that the module has the name.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FROM_IMPORT = re.compile(r"^\s*from (ffdesk[\w.]*) import (\([^)]*\)|[\w, ]+)", re.MULTILINE)


def _files() -> list[Path]:
    found = [p for d in ("scripts", "docs", "packaging") for p in sorted((ROOT / d).rglob("*"))]
    return [p for p in found if p.is_file() and p.suffix in {".py", ".sh", ""}]


def _imports(text: str) -> list[tuple[str, str]]:
    pairs = []
    for m in FROM_IMPORT.finditer(text):
        names = m.group(2).strip("()").replace("\n", ",").split(",")
        pairs += [(m.group(1), n.split(" as ")[0].strip()) for n in names if n.strip()]
    return pairs


def test_the_pattern_reads_single_line_and_parenthesised_imports() -> None:
    text = "from ffdesk.cli import main\n    from ffdesk.media.images import (\n  read_image,\n  x as y,\n)\n"
    assert _imports(text) == [
        ("ffdesk.cli", "main"),
        ("ffdesk.media.images", "read_image"),
        ("ffdesk.media.images", "x"),
    ]


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_ffdesk_name_a_script_imports_exists(path: Path) -> None:
    missing = []
    for module, name in _imports(path.read_text(encoding="utf-8", errors="replace")):
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    assert not missing, f"{path.name} imports names ffdesk does not have: {missing}"


def test_the_gui_smoke_script_is_among_them() -> None:
    assert ROOT / "scripts" / "gui_smoke.sh" in _files()
    assert ("ffdesk.media.images", "read_image") in _imports((ROOT / "scripts" / "gui_smoke.sh").read_text())
