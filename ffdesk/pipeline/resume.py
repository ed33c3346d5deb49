"""The manifest of a resumable render: which segments are finished, written atomically.

A render writes its video in segments into a work folder beside the output. After each finished
segment the manifest is rewritten (temp file, fsync, rename), so after a crash, `kill -9` or a power cut
it names exactly the segments that are complete on disk. Anything else in the folder is debris from
the interrupted segment and is deleted on resume. A render the user cancels is not interrupted
that way: it closes the segment it was writing at the frame reached and records it, so the
resume loses no finished frame.

Each recorded segment carries its size and CRC32 (a PNG segment, a folder, those of its frames in
order). Resume checks every segment against them before reusing it: the first one that is missing
or does not match (a disk that lost a file's tail, a copy gone wrong) is rendered again, with every
segment after it, and the render says so. A manifest from before these checks existed names
segments that cannot be checked: they are rendered again too.

The checksums do not cover the manifest's own numbers, which say where the render resumes (the
frames done, the pts after the last one): a manifest edited with its checksums kept could skip
or repeat frames. So the numbers are checked too, against each other (segment i is number i in
`seg0000i.EXT`, a plain name inside the folder; each holds at least one frame, its pts rise and
leave room for its frames, it starts after the previous one ends, and together they stay within
the render's frames where the caller knows them) and against the files (the frames each holds
and the time of its first and last, read from its packets: the recorded pts must be those times
in one time base, the source's, for every segment). The first segment that disagrees is treated
as a damaged one.

One render at a time owns a work folder: `Manifest.open` takes an exclusive lock on it
(`ffdesk.pipeline.lock`, a file beside the folder, so starting over never loses it) and holds it
until `close()` or `discard()`; a second render of the same output is refused in one line.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from fractions import Fraction
from pathlib import Path
from typing import ClassVar

from ffdesk import jsontext
from ffdesk.errors import MediaError
from ffdesk.media.atomic import clear_folder, refuse_link, remove_folder, write_text_atomic
from ffdesk.media.matte import matte_file
from ffdesk.media.segments import SegmentContents, segment_contents
from ffdesk.media.stale_parts import remove_stale_partials
from ffdesk.pipeline.lock import OutputLock

MANIFEST_NAME = "manifest.json"
_PARTS_SUFFIX = ".ffdesk-parts"
_LOCK_SUFFIX = ".ffdesk-lock"
_CHUNK = 1 << 20
_SEGMENT_NAME = re.compile(r"seg([0-9]{5,})(\.[A-Za-z0-9]{1,8})?")
"""How a render names segment i: seg00000.mp4, seg00001.mp4, ... (a PNG segment: a folder, no suffix)."""
_REQUIRED = frozenset({"number", "file", "frames", "first_pts", "last_pts"})


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
    matte: str | None = None
    """The segment's matte clip beside it (`ffdesk.pipeline.matte.matte_file`), for a render that
    writes one; None: none. Checked as the segment is, by its own size and CRC32."""
    matte_size: int | None = None
    matte_crc32: int | None = None

    @classmethod
    def from_json(cls, data: object) -> Segment:
        """A segment as stored in the manifest; `ValueError` saying what is wrong for anything
        else ("names '../x', not a file of its own folder"), to follow "segment N" in a note."""
        if not isinstance(data, dict) or set(data) - {f.name for f in fields(cls)} or _REQUIRED - set(data):
            raise ValueError("is not a segment record")
        name = data["file"]
        if not isinstance(name, str):
            raise ValueError("has no file name")
        if not is_plain_name(name):
            raise ValueError(f"names {name[:60]!r}, not a file of its own folder")
        matte = data.get("matte")
        if matte is not None and (not isinstance(matte, str) or not is_plain_name(matte)):
            raise ValueError(f"names the matte {str(matte)[:60]!r}, not a file of its own folder")
        seg = cls(**data)
        ints = (seg.number, seg.frames, seg.first_pts, seg.last_pts)
        optional = (seg.size, seg.crc32, seg.matte_size, seg.matte_crc32)
        if not all(type(v) is int for v in ints) or not all(v is None or type(v) is int for v in optional):
            raise ValueError("has numbers that are not whole numbers")
        return seg


def is_plain_name(name: str) -> bool:
    """Whether `name` names an entry of the work folder itself: no folder part ("/", "\\"), not
    hidden, ".." or empty, no NUL."""
    return bool(name) and not name.startswith(".") and not any(c in name for c in "/\\\0")


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
    """None when `segment` (and its matte, where it has one) is on disk as recorded, else why
    not (for a note)."""
    problem = _check_file(folder / segment.file, segment.size, segment.crc32)
    if problem is None and segment.matte is not None:
        problem = _check_file(folder / segment.matte, segment.matte_size, segment.matte_crc32)
        return None if problem is None else f"matte {problem}"
    return problem


def _check_file(path: Path, recorded_size: int | None, recorded_crc: int | None) -> str | None:
    if recorded_size is None or recorded_crc is None:
        return "has no recorded size and checksum (written by an older ffdesk)"
    try:
        size = _segment_size(path)
        if size != recorded_size:
            return f"failed its check (size {size}, expected {recorded_size})"
        _, crc = segment_check(path)
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"could not be read ({exc.strerror or type(exc).__name__})"
    if crc != recorded_crc:
        return f"failed its check (crc32 {crc:08x}, expected {recorded_crc:08x})"
    return None


def first_disagreement(
    folder: Path,
    segments: Sequence[Segment],
    *,
    frames: int | None = None,
    time_base: Fraction | None = None,
) -> tuple[int, str] | None:
    """The first of `segments` that cannot be reused, and why (to follow "segment N"), or None.

    In order, each segment's numbers are checked against those before it (`numbers_problem`),
    then its bytes (`check_segment`), then what the file holds against its record: the frame
    count, and the first and last frame's times against its pts (`pts_disagreement`, over the
    segments that passed the rest). `frames`: the render's frames where known exactly;
    `time_base`: the source's pts time base where known."""
    found: tuple[int, str] | None = None
    contents: list[SegmentContents | None] = []
    done = 0
    for i, segment in enumerate(segments):
        problem = numbers_problem(i, segment, segments[0], segments[i - 1] if i else None)
        if problem is None and frames is not None and done + segment.frames > frames:
            problem = f"takes the render past its {frames} frames ({done + segment.frames})"
        problem = problem or check_segment(folder, segment)
        held: SegmentContents | None = None
        if problem is None:
            try:
                held = segment_contents(folder / segment.file)
            except (MediaError, OSError) as exc:
                problem = f"cannot be read back ({exc})"
        if problem is None and held is not None and held.frames != segment.frames:
            problem = f"holds {held.frames} frames, not the {segment.frames} recorded"
        if problem is not None:
            found = (i, problem)
            break
        contents.append(held)
        done += segment.frames
    earlier = pts_disagreement(segments[: len(contents)], contents, time_base)
    return earlier if earlier is not None else found


def numbers_problem(i: int, segment: Segment, first: Segment, previous: Segment | None) -> str | None:
    """Why the record in place `i` cannot be the render's segment i, judged by its numbers and
    those of the segment before it (`previous`) alone, or None. Its file must be named as the
    render names it (seg0000i plus the first segment's suffix)."""
    if segment.number != i:
        return f"is recorded as number {segment.number}"
    named = _SEGMENT_NAME.fullmatch(first.file)
    expected = f"seg{i:05d}{(named.group(2) or '') if named else ''}"
    if segment.file != expected:
        return f"names the file {segment.file[:60]!r} where {expected!r} belongs"
    if segment.matte is not None and segment.matte != matte_file(expected):
        return f"names the matte {segment.matte[:60]!r} where {matte_file(expected)!r} belongs"
    a, b, n = segment.first_pts, segment.last_pts, segment.frames
    if n < 1:
        return f"records {n} frames"
    if b < a:
        return f"ends at pts {b}, before it starts (pts {a})"
    if b - a < n - 1:
        return f"records {n} frames between pts {a} and {b}: more than fit"
    if previous is not None and a <= previous.last_pts:
        return f"starts at pts {a}, not after the previous segment's last frame (pts {previous.last_pts})"
    return None


def pts_disagreement(
    segments: Sequence[Segment], contents: Sequence[SegmentContents | None], time_base: Fraction | None
) -> tuple[int, str] | None:
    """The first segment whose recorded pts are not its frames' times in the source's time base,
    and why, or None.

    The render writes the source's pts into each segment, so for every segment the first and
    last frame's times (pts times the file's own time base, exact fractions) are its recorded
    pts times one and the same time base. Where the caller does not give it, each segment gives
    its own from its times (which must agree within the segment, be positive, and be a whole
    multiple of the file's time base, as a muxer makes it); the one most segments give is taken
    when more than half of them give it, else the first segment that gives one is not trusted.
    Segments without times (PNG frames, a file FFmpeg does not recognise) are not judged here."""
    own: list[Fraction | None] = []
    for i, (segment, held) in enumerate(zip(segments, contents, strict=True)):
        ratio, problem = _own_time_base(segment, held, time_base)
        if problem is not None:
            return i, problem
        own.append(ratio)
    given = [r for r in own if r is not None]
    if not given:
        return None
    chosen = time_base
    if chosen is None:
        ratio, count = Counter(given).most_common(1)[0]
        if 2 * count <= len(given) and len(set(given)) > 1:
            first = next(i for i, r in enumerate(own) if r is not None)
            return (
                first,
                "has pts that disagree with the other segments' (no one time base fits most of them)",
            )
        chosen = ratio
    for i, ratio in enumerate(own):
        held = contents[i]
        if ratio is not None and ratio != chosen and held is not None:
            return i, _pts_mismatch(segments[i], held, chosen)
    return None


def _own_time_base(
    segment: Segment, held: SegmentContents | None, time_base: Fraction | None
) -> tuple[Fraction | None, str | None]:
    """The time base that turns `segment`'s recorded pts into its frames' times (None where its
    pts are all 0 or the file gives no times), or why none can."""
    if held is None or held.first_s is None or held.last_s is None:
        return None, None
    pairs = ((segment.first_pts, held.first_s), (segment.last_pts, held.last_s))
    ratios = {t / p for p, t in pairs if p != 0}
    fits = all(t == 0 for p, t in pairs if p == 0) and len(ratios) <= 1 and all(r > 0 for r in ratios)
    ratio = next(iter(ratios)) if ratios else None
    if fits and ratio is not None and time_base is None and held.time_base:
        fits = (ratio / held.time_base).denominator == 1  # the muxer's ticks divide the source's
    if fits and time_base is not None and ratio is not None and ratio != time_base:
        fits = False
    if not fits:
        return None, _pts_mismatch(segment, held, time_base)
    return ratio, None


def _pts_mismatch(segment: Segment, held: SegmentContents, time_base: Fraction | None) -> str:
    """One line: the recorded pts against the frames' own (in `time_base` where it gives whole
    numbers, else as seconds)."""
    recorded = f"records pts {segment.first_pts}-{segment.last_pts}"
    first, last = held.first_s, held.last_s
    assert first is not None and last is not None
    if time_base:
        a, b = first / time_base, last / time_base
        if a.denominator == 1 and b.denominator == 1:
            return f"{recorded} where its frames have pts {a}-{b}"
    return f"{recorded}, which are not its frames' times ({float(first):.3f}-{float(last):.3f} s)"


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


def claim_output(output: Path, *, writing: str = "rendered") -> tuple[OutputLock, list[Path]]:
    """Take the lock every ffdesk writer of `output` holds while it writes it (a render, its
    matte clip's, a live recording), then remove the partial files beside `output` that writers
    killed outright left (kill -9, a power cut: nothing else removes them); with the lock held no
    other writer of `output` runs, so each is a dead one's. The lock and what was removed;
    `UserError` ("OUTPUT is being rendered by process PID ...", "recorded" for a live session's
    recording: `writing`, kept in the lock for the next writer to be told) while another holds it."""
    lock = OutputLock.acquire(lock_path_for(work_dir_for(output)), str(output), writing)
    try:
        return lock, remove_stale_partials(output)
    except BaseException:
        lock.release()
        raise


class Manifest:
    """Finished segments of one render, keyed to the job's output fingerprint."""

    keeps_cancelled_segment: ClassVar[bool] = True
    """Whether a render the user cancels closes the segment it was writing at the frame reached
    and records it here, so a resume continues from that frame (segments may then be shorter
    than the render's segment length; the next one ends on the grid again)."""

    def __init__(self, folder: Path, fingerprint: str, segments: list[Segment] | None = None) -> None:
        self.folder = folder
        self.fingerprint = fingerprint
        self.segments: list[Segment] = list(segments or [])
        self._lock: OutputLock | None = None
        self._records = len(self.segments)
        """How many segment records the file held (those after an unreadable one included)."""
        self._unreadable: str | None = None
        """Why the record after `segments` could not be read, if one could not."""

    @classmethod
    def open(
        cls,
        folder: Path,
        fingerprint: str,
        resume: bool,
        *,
        frames: int | None = None,
        time_base: Fraction | None = None,
    ) -> tuple[Manifest, str | None]:
        """Lock `folder` for this render, then open or start the manifest in it.

        Returns the manifest and, when earlier work was discarded, a one-line reason for the user.
        Files in the folder that the manifest does not name are removed. Raises `UserError`
        ("OUTPUT is being rendered by process PID ...") while another live render holds the
        folder; the lock is held until `close()` or `discard()`.

        `frames`: how many frames the render's range holds, where the caller knows it exactly
        (finished segments holding more are not reused); `time_base`: the time base of the
        source's pts, where known (else it is inferred from the segments themselves, as the one
        most of them agree on).
        """
        lock, _ = claim_output(output_for(folder))
        try:
            manifest, note = cls._open_locked(folder, fingerprint, resume, frames, time_base)
        except BaseException:
            lock.release()
            raise
        manifest._lock = lock
        return manifest, note

    @classmethod
    def _open_locked(
        cls,
        folder: Path,
        fingerprint: str,
        resume: bool,
        frames: int | None = None,
        time_base: Fraction | None = None,
    ) -> tuple[Manifest, str | None]:
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
            note = existing._keep_checked_prefix(frames, time_base)
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
        """The manifest in `folder`, None when there is none or it is not one at all. Its
        segment records are read up to the first that cannot be (kept as `_unreadable`)."""
        path = folder / MANIFEST_NAME
        try:
            data = jsontext.read(path)
            records = data["segments"]
            fingerprint = str(data["fingerprint"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(records, list):
            return None
        manifest = cls(folder, fingerprint)
        for record in records:
            try:
                manifest.segments.append(Segment.from_json(record))
            except (ValueError, TypeError) as exc:
                manifest._unreadable = str(exc) or "is not a segment record"
                break
        manifest._records = len(records)
        return manifest

    def _keep_checked_prefix(
        self, frames: int | None = None, time_base: Fraction | None = None
    ) -> str | None:
        """Drop the first segment that fails its check or whose numbers disagree (with the file
        on disk or the segments before it), and every one after it; say so in one line."""
        found = first_disagreement(self.folder, self.segments, frames=frames, time_base=time_base)
        if found is None and self._unreadable is not None:
            found = (len(self.segments), self._unreadable)
        if found is None:
            return None
        i, problem = found
        after = self._records - i - 1
        redo = f"rendering it and the {after} after it again" if after else "rendering it again"
        self.segments = self.segments[:i]
        self._records = len(self.segments)
        self._unreadable = None
        return f"segment {i} {problem}: {redo}"

    def _remove_debris(self) -> None:
        mattes = {s.matte for s in self.segments if s.matte is not None}
        clear_folder(self.folder, {s.file for s in self.segments} | mattes | {MANIFEST_NAME})

    @property
    def frames_done(self) -> int:
        return sum(s.frames for s in self.segments)

    @property
    def next_pts(self) -> int | None:
        """The pts after the last finished frame, or None when nothing is finished."""
        return self.segments[-1].last_pts + 1 if self.segments else None

    def next_segment_file(self, suffix: str) -> str:
        return f"seg{len(self.segments):05d}{suffix}"

    def replay_start(self, per_segment: int) -> tuple[int, int | None]:
        """Where a resume decodes from: (index, pts; pts None from the range's start).

        Frames of a segment depend on the frames before them in it (the face tracking restarts
        at each multiple of `per_segment`), so after a cancelled render closed a segment off that
        grid, the resume starts at the grid line before the frames done, plays the frames up to
        them through the stages that carry such state, and encodes from there. On the grid (or
        where no recorded segment starts at that line) it is the frame after the last done."""
        done = self.frames_done
        start = done - done % per_segment
        index = done
        for segment in reversed(self.segments):
            if index <= start:
                break
            index -= segment.frames
            if index == start:
                return start, segment.first_pts
        return done, self.next_pts

    def add(self, segment: Segment) -> None:
        """Record a finished segment durably, with its size and CRC32 (read back from disk)."""
        if segment.size is None or segment.crc32 is None:
            size, crc = segment_check(self.folder / segment.file)
            segment = replace(segment, size=size, crc32=crc)
        if segment.matte is not None and (segment.matte_size is None or segment.matte_crc32 is None):
            size, crc = segment_check(self.folder / segment.matte)
            segment = replace(segment, matte_size=size, matte_crc32=crc)
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
