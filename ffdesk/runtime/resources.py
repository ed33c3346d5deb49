"""Where the bundled resources (embedded models, sample media, catalog data) live at run time."""

from __future__ import annotations

import sys
from pathlib import Path

from ffdesk.runtime.env import moved_resources_dir

_MARKER = "models"


def resources_dir(moved: Path | None = None) -> Path:
    """The `resources/` folder: `moved` (a runtime environment's `resources_dir`; by default
    `$FFDESK_RESOURCES`), else a PyInstaller bundle's, else the repository's (source checkout or
    editable install), else the copy a wheel installs under `<prefix>/share/ffdesk/resources`."""
    if moved is None:
        moved = moved_resources_dir()
    candidates = [Path(moved)] if moved else []
    bundle = getattr(sys, "_MEIPASS", None)  # a PyInstaller one-folder app
    if bundle:
        candidates.append(Path(bundle) / "resources")
    candidates += [
        Path(__file__).resolve().parents[2] / "resources",  # ffdesk/runtime/ -> the repository
        Path(sys.prefix) / "share" / "ffdesk" / "resources",
        Path(sys.base_prefix) / "share" / "ffdesk" / "resources",
    ]
    for folder in candidates:
        if (folder / _MARKER).is_dir():
            return folder
    return candidates[0]


def resource_path(*parts: str) -> Path:
    """A path inside the resources folder, e.g. `resource_path("models", "face_mesh_468.onnx")`."""
    return resources_dir().joinpath(*parts)
