"""Partial files a killed writer left beside its output, found and removed.

An output is written at a hidden temp path beside it (`atomic.temp_path_for`:
`.STEM.partial-XXXXXXXX.SUFFIX`, eight hex digits) and renamed into place when it is complete;
a writer that fails removes its own. A writer killed outright (`kill -9`, a power cut) cannot,
and nothing else would: its partial file stays beside the output forever, as large as the
recording or render had grown.

Whether a partial is stale is not written in its name, so the caller decides: it removes the
partials of an output while it holds that output's lock (`ffdesk.pipeline.lock`, the lock every
ffdesk writer of a video output holds while its partial exists), when no other writer of the
output can be running.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ffdesk.media.atomic import remove_folder

_TOKEN = re.compile(r"[0-9a-f]{8}")
"""The random part of a temp path's name (`secrets.token_hex(4)`)."""


def partials_of(final: Path) -> list[Path]:
    """The partial files (or folders) beside `final` that a writer of `final` names as it writes
    (`atomic.temp_path_for`), sorted; links named so are not among them (ffdesk makes none)."""
    final = Path(final)
    prefix, suffix = f".{final.stem}.partial-", final.suffix
    found = []
    try:
        entries = list(os.scandir(final.parent))
    except OSError:
        return []
    for entry in entries:
        name = entry.name
        if not name.startswith(prefix) or not name.endswith(suffix):
            continue
        if not _TOKEN.fullmatch(name[len(prefix) : len(name) - len(suffix)]):
            continue
        try:
            if entry.is_symlink():
                continue
        except OSError:
            continue
        found.append(Path(entry.path))
    return sorted(found)


def remove_stale_partials(final: Path) -> list[Path]:
    """Remove the partials of `final` (`partials_of`) and return those removed. Call it only
    while holding the output's lock and before writing a partial of one's own: every partial
    there is then a dead writer's."""
    removed = []
    for path in partials_of(final):
        try:
            if path.is_dir():
                remove_folder(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue  # gone meanwhile: nothing to remove
        except OSError:
            continue  # not ours to remove (another user's, a read-only folder): left as it is
        if not path.exists():
            removed.append(path)
    return removed
