"""Where the bundled resources (embedded models, sample media, catalog data) live at run time."""

from __future__ import annotations

import site
import sys
import sysconfig
from pathlib import Path

from ffdesk.errors import UserError
from ffdesk.runtime.env import moved_resources_dir

_MARKER = "models"
_SHARE = ("share", "ffdesk", "resources")
"""Where a wheel puts them, under its install's data folder."""


class ResourcesMissing(UserError):
    """The resources folder is nowhere ffdesk looks (an install that left them out, or put them
    somewhere unusual)."""


def resources_dir(moved: Path | None = None) -> Path:
    """The `resources/` folder: `moved` (a runtime environment's `resources_dir`; by default
    `$FFDESK_RESOURCES`), else a PyInstaller bundle's, else the repository's (source checkout or
    editable install), else the copy a wheel installs under its data folder's
    `share/ffdesk/resources` (a virtual environment's or prefix's, `pip install --user`'s,
    `--target`'s, a distribution's `/usr/local`, or wherever the install's record says).
    `moved` is returned even where it holds nothing (what is missing is said where it is read);
    otherwise `ResourcesMissing` names the folders looked in."""
    if moved is None:
        moved = moved_resources_dir()
    candidates = [Path(moved)] if moved else []
    bundle = getattr(sys, "_MEIPASS", None)  # a PyInstaller one-folder app
    if bundle:
        candidates.append(Path(bundle) / "resources")
    beside = Path(__file__).resolve().parents[2]  # ffdesk/runtime/ -> the folder holding the package
    candidates += [beside / "resources", beside.joinpath(*_SHARE)]  # a checkout; `pip --target`
    candidates += [Path(p).joinpath(*_SHARE) for p in dict.fromkeys((sys.prefix, sys.base_prefix))]
    for folder in candidates:
        if (folder / _MARKER).is_dir():
            return folder
    if moved:
        return Path(moved)
    more = _installed_copies()
    for folder in more:
        if (folder / _MARKER).is_dir():
            return folder
    looked = ", ".join(str(p) for p in dict.fromkeys([*candidates, *more]))
    raise ResourcesMissing(
        f"ffdesk's resources (embedded models, sample photos, model catalog) are not installed "
        f"where it looks ({looked}): reinstall ffdesk, or set FFDESK_RESOURCES to the folder that holds them"
    )


def _installed_copies() -> list[Path]:
    """Where else an installed wheel's data may have landed: the user scheme's data folder, every
    install scheme's, and the folder the install's own record names."""
    found = [Path(site.getuserbase()).joinpath(*_SHARE)]
    for scheme in sysconfig.get_scheme_names():
        try:
            found.append(Path(sysconfig.get_path("data", scheme)).joinpath(*_SHARE))
        except (KeyError, ValueError):
            continue
    try:
        from importlib import metadata

        dist = metadata.distribution("ffdesk")
        for file in dist.files or ():
            if file.parts[-2:] == ("resources", "catalog.toml") and "share" in file.parts:
                found.append(Path(str(dist.locate_file(file))).resolve().parent)
                break
    except (metadata.PackageNotFoundError, OSError, ValueError):
        pass
    return list(dict.fromkeys(found))


def resource_path(*parts: str) -> Path:
    """A path inside the resources folder, e.g. `resource_path("models", "face_mesh_468.onnx")`."""
    return resources_dir().joinpath(*parts)
