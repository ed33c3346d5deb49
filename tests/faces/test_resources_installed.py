"""Where an installed copy of ffdesk finds its resources: a wheel puts them under its install's
data folder, which is not beside the package for `pip install --user` (the user base's `share`)
or `pip install --target DIR` (DIR/share). A copy that finds none says where it looked, in one
line, rather than failing later on a path that cannot exist."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ffdesk"
SHARE = Path("share", "ffdesk", "resources")


def _installed(folder: Path) -> Path:
    """The package copied into `folder` (as an install without its data), and `folder`."""
    shutil.copytree(PACKAGE, folder / "ffdesk", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _data(folder: Path) -> Path:
    """A resources folder under `folder`'s share/, as a wheel's data files make it."""
    resources = folder / SHARE
    (resources / "models").mkdir(parents=True)
    return resources


def _python(args: list[str], lib: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("FFDESK_RESOURCES", "PYTHONPATH")}
    environ.update(PYTHONPATH=str(lib), **env)
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


FOUND = ["-c", "from ffdesk.runtime.resources import resources_dir; print(resources_dir())"]


def test_pip_install_target_puts_them_in_the_target_folder(tmp_path: Path) -> None:
    target = _installed(tmp_path / "target")
    resources = _data(target)
    done = _python(FOUND, target, tmp_path, PYTHONUSERBASE=str(tmp_path / "nobody"))
    assert done.stdout.strip() == str(resources), done.stderr


def test_pip_install_user_puts_them_in_the_user_base(tmp_path: Path) -> None:
    lib = _installed(tmp_path / "lib")
    resources = _data(tmp_path / "userbase")
    done = _python(FOUND, lib, tmp_path, PYTHONUSERBASE=str(tmp_path / "userbase"))
    assert done.stdout.strip() == str(resources), done.stderr


def test_an_install_without_them_says_where_it_looked_in_one_line(tmp_path: Path) -> None:
    if (Path(sys.prefix) / SHARE / "models").is_dir():
        pytest.skip("this environment has an installed copy of the resources")
    lib = _installed(tmp_path / "lib")
    done = _python(["-m", "ffdesk", "models", "list"], lib, tmp_path, PYTHONUSERBASE=str(tmp_path / "nobody"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("ffdesk: error: ffdesk's resources (embedded models")
    assert str(lib / "resources") in lines[0] and str(tmp_path / "nobody" / SHARE) in lines[0]
    assert "FFDESK_RESOURCES" in lines[0]
