"""An environment whose Python cannot import a package, as on a machine where it is not installed:
a `sitecustomize` on PYTHONPATH whose import hook refuses it."""

from __future__ import annotations

import os
from pathlib import Path

HIDE = """
import sys
from importlib.abc import MetaPathFinder


class Hide(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {module!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Hide())
"""


def env_without(module: str, folder: Path) -> dict[str, str]:
    """This process's environment, with `module` (top-level name) hidden from Python; the hook
    lives in `folder` (made)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(HIDE.format(module=module), encoding="utf-8")
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}
