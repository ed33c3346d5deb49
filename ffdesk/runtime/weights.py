"""External-data copies of large ONNX models, so a CPU session holds its weights once.

Given a model whose weights are embedded in the .onnx file (how FaceFusion and most exporters
ship them), ONNX Runtime keeps the parsed file beside the weights it initialises: loading a
322 MiB GFPGAN-sized model left the process 562 MiB larger, and it peaked at 666 MiB above where
it started. Loaded from a copy whose weights sit in a side file (ONNX's external data), the same
model left it 352 MiB larger, peaked at 456 MiB, and loaded in a third of the time.

`external_copy` makes such a copy once per model file (by its size and time) in a cache folder and
returns its path; the conversion runs in a child process (`python -m ffdesk.runtime.weights SRC
DIR`), so parsing the whole model never swells the render's own memory. The copy is built in a
temporary folder and renamed into place, so a crash, a full disk or two renders converting the
same model at once never leave a half-written copy where it is looked for. Anything that stops a
copy being made (too little space, an unparsable file, a conversion that fails) returns None: the
caller loads the original file, as before.

The cache holds one copy per model file: a copy's name also says which file it is of (a hash of
the file's path), and once a changed file (a model updated in place) has its new copy, the copies
of its earlier versions are removed, with the temporary folders of conversions whose process is
gone (a crash, a kill). Deleting the whole folder is always safe: copies are made again as needed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

MIN_BYTES = 64 * 2**20
"""Models smaller than this load as they are (the second copy costs little, the copy a file)."""
MODEL_NAME = "model.onnx"
DATA_NAME = "model.onnx.data"
CONVERT_TIMEOUT_S = 900.0


def copy_dir(src: Path, cache: Path) -> Path:
    """Where the external-data copy of `src` lives in `cache` (it may not exist): named by the
    file's size and modification time, read from its metadata, so finding the copy on each load
    never reads the model itself (a changed file gets a new copy)."""
    return _named(Path(src), Path(src).stat(), cache)


def _named(src: Path, st: os.stat_result, cache: Path) -> Path:
    return Path(cache) / f"{_of_file(src)}.{st.st_size:x}.{st.st_mtime_ns:x}"


def _of_file(src: Path) -> str:
    """The part of a copy's name that says which file it is of: its name, and a hash of its path
    (two packs' models of the same name are different files)."""
    where = hashlib.blake2b(str(Path(src).absolute()).encode(), digest_size=4).hexdigest()
    return f"{Path(src).stem}.{where}"


def external_copy(src: Path, cache: Path, *, min_bytes: int | None = None) -> Path | None:
    """The .onnx of `src`'s external-data copy in `cache`, made now unless there; None when `src`
    is smaller than `min_bytes` (default `MIN_BYTES`; its weights may already be external) or no
    copy can be made."""
    src = Path(src)
    try:
        st = src.stat()
    except OSError:
        return None
    size = st.st_size
    if size < (MIN_BYTES if min_bytes is None else min_bytes):
        return None
    final = _named(src, st, cache)
    if _complete(final):
        return final / MODEL_NAME
    try:
        cache.mkdir(parents=True, exist_ok=True)
        if shutil.disk_usage(cache).free < size + 64 * 2**20:
            return None
    except OSError:
        return None
    tmp = cache / f".{final.name}.{os.getpid()}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        done = subprocess.run(
            [sys.executable, "-m", "ffdesk.runtime.weights", str(src), str(tmp)],
            capture_output=True,
            timeout=CONVERT_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0 or not _complete(tmp):
            return None
        try:
            os.rename(tmp, final)
        except OSError:  # another process put its copy there first
            if not _complete(final):
                return None
        _drop_superseded(final)
        return final / MODEL_NAME
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def discard(model: Path) -> None:
    """Remove the copy whose .onnx is `model` (it would not load); a folder holding anything but
    a copy's two files is left alone."""
    folder = Path(model).parent
    if Path(model).name == MODEL_NAME and _only_a_copy(folder):
        shutil.rmtree(folder, ignore_errors=True)


def _drop_superseded(copy: Path) -> None:
    """Remove the copies of earlier versions of the file that `copy` (a copy's folder) is of (and
    its copy under the name used before names carried the path's hash), and the temporary folders
    of its conversions whose process has ended. A copy some render still loads from stays readable
    to it (the system frees a removed file once nobody has it open), and one that fails to load
    falls back to the model file."""
    copy = Path(copy)
    parts = copy.name.rsplit(".", 3)
    if len(parts) != 4:
        return  # not a copy's name
    stem, where, size, mtime = parts
    prefix = f"{stem}.{where}."  # `_of_file` and the dot after it
    legacy = f"{stem}.{size}.{mtime}"  # the same file's copy as named before the path's hash
    try:
        entries = list(copy.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if entry == copy or not entry.is_dir():
            continue
        earlier = (name.startswith(prefix) or name == legacy) and _complete(entry) and _only_a_copy(entry)
        abandoned = name.startswith("." + prefix) and name.endswith(".partial") and not _alive(name)
        if earlier or abandoned:
            shutil.rmtree(entry, ignore_errors=True)


def _only_a_copy(folder: Path) -> bool:
    """Whether `folder` holds nothing but a copy's two files (so removing it loses nothing else)."""
    try:
        return {p.name for p in folder.iterdir()} <= {MODEL_NAME, DATA_NAME}
    except OSError:
        return False


def _alive(partial_name: str) -> bool:
    """Whether the process that named a temporary folder `.NAME.PID.partial` is still running."""
    try:
        pid = int(partial_name.rsplit(".", 2)[-2])
    except ValueError:
        return True  # not one of ours: leave it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


def _complete(folder: Path) -> bool:
    return (folder / MODEL_NAME).is_file() and (folder / DATA_NAME).is_file()


def convert(src: Path, folder: Path) -> None:
    """Write `src` with its weights in one side file: `folder`/model.onnx and model.onnx.data."""
    import onnx

    model = onnx.load(str(src))
    onnx.save_model(
        model,
        str(folder / MODEL_NAME),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=DATA_NAME,
        size_threshold=1024,
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m ffdesk.runtime.weights MODEL.onnx FOLDER", file=sys.stderr)
        return 2
    try:
        convert(Path(argv[0]), Path(argv[1]))
    except Exception as exc:  # noqa: BLE001 - one line for the parent, which falls back
        print(f"cannot convert {argv[0]}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
