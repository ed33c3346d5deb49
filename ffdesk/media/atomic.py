"""Output that appears complete or not at all: write beside the final path, then rename into place."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from ffdesk.errors import DiskFull, MediaError
from ffdesk.units import format_bytes


def temp_path_for(final: Path) -> Path:
    """A hidden, unique path in the same folder as `final`, keeping its suffix (muxers read it)."""
    final = Path(final)
    return final.with_name(f".{final.stem}.partial-{secrets.token_hex(4)}{final.suffix}")


def check_writable_folder(folder: Path) -> None:
    """MediaError unless `folder` exists and this process can create files in it."""
    folder = Path(folder)
    if not folder.exists():
        raise MediaError(f"{folder}: output folder does not exist")
    if not folder.is_dir():
        raise MediaError(f"{folder}: output folder is not a folder")
    # a real write test: permission bits alone miss read-only mounts, ACLs and root's view
    probe = folder / f".ffdesk-write-test-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as exc:
        raise_if_disk_full(exc, folder)
        raise MediaError(f"{folder}: output folder is not writable ({exc.strerror or exc})") from exc
    os.close(fd)
    probe.unlink(missing_ok=True)


def refuse_link(path: Path, what: str) -> None:
    """`UserError` (one line) when `path` is a symbolic link: ffdesk never writes, locks or
    deletes through a link it did not make (in a shared folder anyone who can write there could
    point one at someone else's files)."""
    try:
        is_link = Path(path).is_symlink()
    except OSError:
        return
    if is_link:
        from ffdesk.errors import UserError

        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        raise UserError(
            f"{path}: {what} is a symbolic link (to {target}); ffdesk will not write or delete through "
            "it; remove the link and try again"
        )


def clear_folder(folder: Path, keep: set[str]) -> None:
    """Remove every entry of `folder` but the names in `keep`, without following links: a link
    inside is removed itself, never what it points at, and the folder is read through a handle
    opened without following a link (so it cannot be swapped for one half way)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(folder, flags)
    except OSError:
        return
    try:
        for entry in os.scandir(fd):
            if entry.name in keep:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.name, dir_fd=fd)
                else:
                    os.unlink(entry.name, dir_fd=fd)
            except OSError:
                pass  # what cannot be removed is left, as before
    finally:
        os.close(fd)


def remove_folder(folder: Path) -> None:
    """Remove a folder this process made and what is in it; a link at its path is left alone."""
    if Path(folder).is_symlink():
        return
    shutil.rmtree(folder, ignore_errors=True)


OwnEntry = Callable[[str], bool]
"""Whether a file of this name in an output folder is one its writer puts there itself (a PNG
render's frames: `ffdesk.media.encode.png_folder_entry`). A folder that holds only such files
may be replaced by a new output; one that holds anything else is the user's and never is."""

_SHOWN = 3
"""How many names a message lists before it says how many more there are."""


def foreign_entries(folder: Path, own: OwnEntry) -> list[str]:
    """The entries of `folder` that `own` does not claim, sorted; a subfolder is never claimed
    and is shown as `NAME/`. OSError when `folder` cannot be read."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                found.append(f"{entry.name}/")
            elif not own(entry.name):
                found.append(entry.name)
    return sorted(found)


def listed(names: Sequence[str]) -> str:
    """A few of `names` for a one-line message: "a.jpg, notes.txt, sub/ and 4 more"."""
    shown = ", ".join(names[:_SHOWN])
    more = len(names) - _SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def free_name_beside(final: Path, tag: str) -> Path:
    """A name beside `final` that nothing is at, for what cannot go to `final` itself:
    NAME-ffdesk-TAG, else NAME-ffdesk-TAG-2, -3, ..."""
    base = final.with_name(f"{final.name}-ffdesk-{tag}")
    candidate, number = base, 1
    while candidate.exists() or candidate.is_symlink():
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def atomic_output(final: Path, *, own: OwnEntry | None = None) -> Iterator[Path]:
    """Yield a temp path beside `final`; move it into place on success, remove it on failure.

    The caller writes a file or creates a folder at the yielded path. On success it replaces
    `final`. A folder written over a folder at `final` replaces it whole where `own` is None
    (a folder the caller owns, such as a work folder's segment); with `own`, only where that
    folder holds nothing but files `own` claims (an earlier output's, `_replace_folder`): one
    that holds anything else is left as it is, the new folder is kept beside it under a name
    of its own (`free_name_beside`) and a one-line MediaError says where. On any exception
    nothing is left at the temp path and `final` is untouched. An OSError "no space left"
    becomes a MediaError. Callers refuse an output equal to an input beforehand (see
    `same_file`), and an output folder that holds other files before they write anything.
    """
    final = Path(final)
    check_writable_folder(final.parent)
    tmp = temp_path_for(final)
    try:
        yield tmp
    except BaseException as exc:
        _remove(tmp)
        raise_if_disk_full(exc, final)
        if isinstance(exc, DiskFull) and exc.path == tmp:  # the user knows the output, not its temp name
            raise DiskFull(final, exc.reason, exc.hint) from exc
        raise
    try:
        if not tmp.exists():
            raise MediaError(f"{final}: nothing was written")
        if final.is_dir() and not final.is_symlink() and tmp.is_dir():
            _replace_folder(tmp, final, own)
        else:
            os.replace(tmp, final)
        fsync_dir(final.parent)
    except OSError as exc:
        _remove(tmp)
        raise_if_disk_full(exc, final)
        reason = exc.strerror or exc
        raise MediaError(f"{final}: cannot move the finished output into place ({reason})") from exc
    except BaseException:
        _remove(tmp)
        raise


def _replace_folder(tmp: Path, final: Path, own: OwnEntry | None) -> None:
    """Put folder `tmp` in place of folder `final` (os.replace cannot replace a non-empty folder,
    so the old one is moved aside first). With `own`, the old folder is checked for other files
    before it is moved aside and again after (a file put in it meanwhile is caught either way),
    and is deleted file by file, only the files `own` claims, then removed with rmdir, which
    refuses a folder that is not empty: nothing the user put there is ever deleted."""
    if own is None:
        old = temp_path_for(final)
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
        return
    _refuse_replace(tmp, final, foreign_entries(final, own))
    # set aside under a name of its own, not a partial's (`ffdesk.media.stale_parts` removes those)
    old = final.with_name(f".{final.name}.replaced-{secrets.token_hex(4)}")
    os.replace(final, old)
    try:
        others = foreign_entries(old, own)
        if not others:
            os.replace(tmp, final)
    except BaseException:  # Ctrl-C, a failed read: the old folder goes back where it was
        if not final.exists():
            os.replace(old, final)
        raise
    if others:
        os.replace(old, final)  # back as it was, before anything else is touched
        _refuse_replace(tmp, final, others)
    _drop_replaced(old, final, own)


def _refuse_replace(tmp: Path, final: Path, others: list[str]) -> None:
    """MediaError (one line) when folder `final` holds `others` (files its writer did not put
    there): the finished folder `tmp` is kept beside it under a name of its own, and said."""
    if not others:
        return
    kept = free_name_beside(final, "new")
    try:
        os.replace(tmp, kept)
    except OSError as exc:
        _remove(tmp)
        raise MediaError(
            f"{final}: not replaced, it holds other files now ({listed(others)}); the new output "
            f"could not be kept beside it ({exc.strerror or exc})"
        ) from exc
    fsync_dir(final.parent)
    raise MediaError(
        f"{final}: not replaced, it holds other files now ({listed(others)}); the new output is in {kept}"
    )


def _drop_replaced(old: Path, final: Path, own: OwnEntry) -> None:
    """Delete the folder `old` that the new output at `final` replaced: the files `own` claims,
    then the folder. Where it is not empty after that (a file was put in it in the instant
    between its check and now), it is moved beside `final` under a name of its own, and a
    MediaError says where (the new output is in place)."""
    with os.scandir(old) as entries:
        for entry in entries:
            if own(entry.name) and not entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
    try:
        os.rmdir(old)
        return
    except OSError:
        pass
    others = foreign_entries(old, own)
    if not others:  # only files that could not be deleted: removed as before
        shutil.rmtree(old, ignore_errors=True)
        return
    kept = free_name_beside(final, "previous")
    os.replace(old, kept)
    raise MediaError(
        f"{final}: the new output is in place; {listed(others)}, put in the old folder as it was "
        f"replaced, kept in {kept}"
    )


def fsync_dir(folder: Path) -> None:
    """Make a rename or new file in `folder` durable (a no-op where folders cannot be synced)."""
    if os.name == "nt":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def raise_if_disk_full(exc: BaseException, path: Path) -> None:
    """Re-raise an out-of-space OSError as MediaError "disk full while writing PATH"."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        _disk_full(exc, path)


def _disk_full(exc: OSError, path: Path) -> NoReturn:
    raise DiskFull(path, exc.strerror or "no space left") from exc


def same_file(a: Path, b: Path) -> bool:
    """True when `a` and `b` name the same file (same path after resolving, or same inode)."""
    a, b = Path(a), Path(b)
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def opened_is(fd: int, path: Path) -> bool:
    """Whether the file open at `fd` is the one named `path` now (not a link to it): a lock file
    its last holder removed, and another made, between its opening and its locking is not."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino)


def read_head(fd: int, size: int = 4096) -> bytes | None:
    """The first `size` bytes of the file open at `fd` (a lock file's record of its holder);
    None when it cannot be read."""
    try:
        return os.pread(fd, size, 0)
    except OSError:
        return None


def check_disk_space(folder: Path, need_bytes: int) -> None:
    """MediaError "not enough disk space in FOLDER: need X, have Y" when `folder` lacks room."""
    folder = Path(folder)
    try:
        have = shutil.disk_usage(folder).free
    except OSError as exc:
        raise MediaError(f"{folder}: cannot read free disk space ({exc.strerror or exc})") from exc
    if have < need_bytes:
        raise MediaError(
            f"not enough disk space in {folder}: need {format_bytes(need_bytes)}, have {format_bytes(have)}"
        )


@contextmanager
def replacing(path: Path, *, durable: bool = True) -> Iterator[Path]:
    """Yield a temp path beside `path` to write a file at; on success it replaces `path` (after an
    fsync when `durable`), on any error it is removed and `path` is untouched. The one way files
    (manifests, queues, checkpoints, sidecars, caches) are replaced in ffdesk; a full disk is
    `DiskFull` naming `path`."""
    path = Path(path)
    tmp = temp_path_for(path)
    try:
        yield tmp
        if durable:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        raise_if_disk_full(exc, path)
        raise
    if durable:
        fsync_dir(path.parent)


def write_bytes_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    with replacing(path, durable=durable) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: Path, text: str, *, durable: bool = True) -> None:
    with replacing(path, durable=durable) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 1, durable: bool = True) -> None:
    write_text_atomic(path, json.dumps(data, indent=indent), durable=durable)


def keep_aside(path: Path, copy: bool = False) -> Path:
    """Move (or `copy`) a damaged file to NAME.corrupt, or NAME.N.corrupt when that is taken, so
    it can be looked at later while a fresh one takes its place. Returns where it went; OSError
    when it cannot be kept."""
    path = Path(path)
    dest = path.with_name(f"{path.name}.corrupt")
    n = 1
    while dest.exists() and n < 1000:
        dest = path.with_name(f"{path.name}.{n}.corrupt")
        n += 1
    if copy:
        shutil.copy2(path, dest)
    else:
        os.replace(path, dest)
    return dest
