"""The manifest of a resumable render: which segments are finished, written atomically.

A render writes its video in segments into a work folder beside the output. After each finished
segment the manifest is rewritten (temp file, fsync, rename), so after a crash, `kill -9` or a power cut
it names exactly the segments that are complete on disk. Anything else in the folder is debris from
the interrupted segment and is deleted on resume.

Each recorded segment carries its size and CRC32 (a PNG segment, a folder, those of its frames in
order). Resume checks every segment against them before reusing it: the first one that is missing
or does not match (a disk that lost a file's tail, a copy gone wrong) is rendered again, with every
segment after it, and the render says so. A manifest from before these checks existed names
segments that cannot be checked: they are rendered again too.

One render at a time owns a work folder: `Manifest.open` takes an exclusive lock on it
(`ffdesk.pipeline.lock`, a file beside the folder, so starting over never loses it) and holds it
until `close()` or `discard()`; a second render of the same output is refused in one line.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from ffdesk import jsontext
from ffdesk.media.atomic import clear_folder, refuse_link, remove_folder, write_text_atomic
from ffdesk.pipeline.lock import OutputLock

MANIFEST_NAME = "manifest.json"
_PARTS_SUFFIX = ".ffdesk-parts"
_LOCK_SUFFIX = ".ffdesk-lock"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Segment:
    """One finished segment: `frames` frames, source pts from `first_pts` to `last_pts`."""

    number: int
    file: str
    frames: int
    first_pts: int
    last_pts: int
    size: int | None = None
    """Bytes on disk (for a PNG segment, its frames together); None: not recorded, not checkable."""
    crc32: int | None = None
    """zlib.crc32 of those bytes, in frame order for a PNG segment."""

    @classmethod
    def from_json(cls, data: object) -> Segment:
        """A segment as stored in the manifest; `ValueError` for anything else."""
        if not isinstance(data, dict) or set(data) - {f.name for f in fields(cls)}:
            raise ValueError("not a segment record")
        seg = cls(**data)
        ints = (seg.number, seg.frames, seg.first_pts, seg.last_pts)
        optional = (seg.size, seg.crc32)
        if not all(type(v) is int for v in ints) or not all(v is None or type(v) is int for v in optional):
            raise ValueError("not a segment record")
        name = seg.file
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
            raise ValueError("not a segment file name")
        return seg


def segment_check(path: Path) -> tuple[int, int]:
    """(size, CRC32) of a segment file, or of a PNG segment folder's files in name order (streamed)."""
    files = (
        sorted((p for p in path.iterdir() if p.is_file()), key=lambda p: p.name) if path.is_dir() else [path]
    )
    size = 0
    crc = 0
    for file in files:
        with file.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                size += len(chunk)
                crc = zlib.crc32(chunk, crc)
    return size, crc


def _segment_size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    return path.stat().st_size


def check_segment(folder: Path, segment: Segment) -> str | None:
    """None when `segment` is on disk as recorded, else why not (for a note)."""
    path = folder / segment.file
    if segment.size is None or segment.crc32 is None:
        return "has no recorded size and checksum (written by an older ffdesk)"
    try:
        size = _segment_size(path)
        if size != segment.size:
            return f"failed its check (size {size}, expected {segment.size})"
        _, crc = segment_check(path)
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"could not be read ({exc.strerror or type(exc).__name__})"
    if crc != segment.crc32:
        return f"failed its check (crc32 {crc:08x}, expected {segment.crc32:08x})"
    return None


def work_dir_for(output: Path) -> Path:
    """The hidden folder beside `output` that holds its segments and manifest."""
    return output.parent / f".{output.name}{_PARTS_SUFFIX}"


def lock_path_for(folder: Path) -> Path:
    """The lock file of work folder `folder`: beside it, so it outlives the folder's removal."""
    name = folder.name
    if name.endswith(_PARTS_SUFFIX):
        return folder.with_name(name[: -len(_PARTS_SUFFIX)] + _LOCK_SUFFIX)
    return folder.with_name(name + _LOCK_SUFFIX)


def output_for(folder: Path) -> Path:
    """The output whose work folder is `folder` (the folder itself for one not named that way)."""
    name = folder.name
    if name.startswith(".") and name.endswith(_PARTS_SUFFIX):
        return folder.with_name(name[1 : -len(_PARTS_SUFFIX)])
    return folder


class Manifest:
    """Finished segments of one render, keyed to the job's output fingerprint."""

    def __init__(self, folder: Path, fingerprint: str, segments: list[Segment] | None = None) -> None:
        self.folder = folder
        self.fingerprint = fingerprint
        self.segments: list[Segment] = list(segments or [])
        self._lock: OutputLock | None = None

    @classmethod
    def open(cls, folder: Path, fingerprint: str, resume: bool) -> tuple[Manifest, str | None]:
        """Lock `folder` for this render, then open or start the manifest in it.

        Returns the manifest and, when earlier work was discarded, a one-line reason for the user.
        Files in the folder that the manifest does not name are removed. Raises `UserError`
        ("OUTPUT is being rendered by process PID ...") while another live render holds the
        folder; the lock is held until `close()` or `discard()`.
        """
        lock = OutputLock.acquire(lock_path_for(folder), str(output_for(folder)))
        try:
            manifest, note = cls._open_locked(folder, fingerprint, resume)
        except BaseException:
            lock.release()
            raise
        manifest._lock = lock
        return manifest, note

    @classmethod
    def _open_locked(cls, folder: Path, fingerprint: str, resume: bool) -> tuple[Manifest, str | None]:
        note: str | None = None
        refuse_link(folder, "the render's work folder")
        existing = cls._read(folder)
        if existing is not None and not resume:
            note = "starting over (--no-resume): discarded an interrupted render's segments"
            existing = None
        elif existing is not None and existing.fingerprint != fingerprint:
            note = "settings or input changed since the interrupted render: starting over"
            existing = None
        elif existing is not None:
            note = existing._keep_checked_prefix()
        manifest = existing or cls(folder, fingerprint)
        if existing is None and folder.exists():
            remove_folder(folder)
        folder.mkdir(parents=True, exist_ok=True)
        refuse_link(folder, "the render's work folder")  # not swapped for one meanwhile
        manifest._remove_debris()
        manifest.save()
        return manifest, note

    @classmethod
    def _read(cls, folder: Path) -> Manifest | None:
        path = folder / MANIFEST_NAME
        try:
            data = jsontext.loads(path.read_text(encoding="utf-8"))
            segments = [Segment.from_json(s) for s in data["segments"]]
            return cls(folder, str(data["fingerprint"]), segments)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _keep_checked_prefix(self) -> str | None:
        """Drop the first segment that fails its check and every one after it; say so."""
        for i, segment in enumerate(self.segments):
            problem = check_segment(self.folder, segment)
            if problem is None:
                continue
            after = len(self.segments) - i - 1
            redo = f"rendering it and the {after} after it again" if after else "rendering it again"
            self.segments = self.segments[:i]
            return f"segment {segment.number} {problem}: {redo}"
        return None

    def _remove_debris(self) -> None:
        clear_folder(self.folder, {s.file for s in self.segments} | {MANIFEST_NAME})

    @property
    def frames_done(self) -> int:
        return sum(s.frames for s in self.segments)

    @property
    def next_pts(self) -> int | None:
        """The pts after the last finished frame, or None when nothing is finished."""
        return self.segments[-1].last_pts + 1 if self.segments else None

    def next_segment_file(self, suffix: str) -> str:
        return f"seg{len(self.segments):05d}{suffix}"

    def add(self, segment: Segment) -> None:
        """Record a finished segment durably, with its size and CRC32 (read back from disk)."""
        if segment.size is None or segment.crc32 is None:
            size, crc = segment_check(self.folder / segment.file)
            segment = replace(segment, size=size, crc32=crc)
        self.segments.append(segment)
        self.save()

    def save(self) -> None:
        """Rewrite the manifest atomically; a full disk leaves the previous one and is a `MediaError`."""
        data = {"fingerprint": self.fingerprint, "segments": [asdict(s) for s in self.segments]}
        write_text_atomic(self.folder / MANIFEST_NAME, json.dumps(data))

    @property
    def locked(self) -> bool:
        """Whether this manifest still holds its work folder's lock."""
        return self._lock is not None and self._lock.held

    def close(self) -> None:
        """Release the work folder's lock, keeping its segments for a later resume. Idempotent."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def discard(self) -> None:
        """Remove the work folder (after the output is in place) and release its lock."""
        remove_folder(self.folder)
        self.close()

    def __enter__(self) -> Manifest:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
