"""Where the bundled resources (embedded models, sample media, catalog data) live at run time."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_MARKER = "models"


def resources_dir() -> Path:
    """The `resources/` folder: `$FFDESK_RESOURCES`, else a PyInstaller bundle's, else the
    repository's (source checkout or editable install), else the copy a wheel installs under
    `<prefix>/share/ffdesk/resources`."""
    env = os.environ.get("FFDESK_RESOURCES")
    candidates = [Path(env)] if env else []
    bundle = getattr(sys, "_MEIPASS", None)  # a PyInstaller one-folder app
    if bundle:
        candidates.append(Path(bundle) / "resources")
    candidates += [
        Path(__file__).resolve().parent.parent / "resources",
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
