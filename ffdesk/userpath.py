"""`~` in paths a user typed or saved.

`Path.expanduser` raises `RuntimeError` for `~name` when there is no user `name` (and for `~`
when no home folder can be found). A models folder saved as `~nosuchuser/x` in the settings then
made every command, `--version` included, crash twice (the crash-log writer reads the settings
too). A shell leaves such a word as it is; so does `expand_user`, and the path is then refused
where it is used, as any path that is not there.
"""

from __future__ import annotations

import os
from pathlib import Path

from ffdesk.errors import UserError


def expand_user(path: str | os.PathLike[str]) -> Path:
    """`Path(path).expanduser()`, or `Path(path)` as it is when its `~` names no known home."""
    p = Path(path)
    try:
        return p.expanduser()
    except RuntimeError:  # "Could not determine home directory."
        return p


def not_a_file(folder: Path, what: str, kind: str = "folder") -> None:
    """`UserError` (one line) when `folder`, which `what` names and where a `kind` goes (made if
    missing), is a file: "--out clip.mp4 is a file, not a folder"."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{what} {folder} is a file, not a {kind}")
