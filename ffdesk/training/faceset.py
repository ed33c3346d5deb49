"""Building facesets: find, align and crop faces in clips and photos, keep the good ones.

Each face is detected and meshed (468 points) with the embedded models, aligned with a five-point
template to a square crop, given a hull mask from its mesh, and dropped when it is tiny, blurred
(low variance of the Laplacian) or a near-duplicate of a face already kept (64-bit difference
hash within a few bits). Inputs already extracted (same path, size and mtime) are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import cv2
import numpy as np
import numpy.typing as npt

from ffdesk.errors import UserError
from ffdesk.faces.types import Face
from ffdesk.media.atomic import listed
from ffdesk.media.images import IMAGE_SUFFIXES
from ffdesk.training.store import FaceRecord, FacesetWriter
from ffdesk.types import Frame
from ffdesk.units import counted
from ffdesk.userpath import expand_user, not_a_file

if TYPE_CHECKING:
    from ffdesk.media.probe import MediaInfo

VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v", ".mpg", ".mpeg", ".mts"})
MESH_POINTS = 468


@dataclass(frozen=True)
class ExtractSettings:
    size: int = 256
    template: str = "arcface_128"
    min_face: float = 48.0
    """Faces whose box is smaller than this (pixels, longer side) are dropped as tiny."""
    blur_threshold: float = 40.0
    """Minimum variance of the Laplacian of the crop (at 128 px, grey); lower means blurred."""
    dedup_bits: int = 4
    """Faces whose difference hash is within this many bits of a kept face are duplicates."""
    every: int = 1
    """Use every n-th frame of a clip."""
    max_faces_per_frame: int = 1
    max_pixels: int | None = None
    """The most pixels an input image or frame may have (None: the readers' default)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "min_face": self.min_face,
            "blur_threshold": self.blur_threshold,
            "dedup_bits": self.dedup_bits,
            "every": self.every,
            "max_faces_per_frame": self.max_faces_per_frame,
            "alignment": {"template": self.template, "size": self.size},
        }


@dataclass
class ExtractStats:
    sources: int = 0
    skipped_sources: int = 0
    frames: int = 0
    faces_found: int = 0
    kept: int = 0
    tiny: int = 0
    blurred: int = 0
    duplicates: int = 0
    damaged: int = 0
    """Inputs that could not be read (to their end): skipped with a warning, as a render
    conceals a damaged frame; a clip's frames read before the damage are kept."""

    def line(self) -> str:
        skipped = f"; skipped {counted(self.damaged, 'damaged input')}" if self.damaged else ""
        return (
            f"{counted(self.kept, 'face')} kept from {counted(self.frames, 'frame')} of "
            f"{counted(self.sources, 'input')} "
            f"({self.skipped_sources} already extracted); dropped {self.tiny} tiny, "
            f"{self.blurred} blurred, {self.duplicates} duplicate{skipped}"
        )


class FaceFinder(Protocol):
    """What extraction needs from a face analyser."""

    def detect(self, image: Frame) -> list[Face]: ...

    def landmarks(self, image: Frame, face: Face) -> Face: ...


class ExtractProgress(Protocol):
    """Told the number of frames to read, then called after each frame."""

    def start(self, total_frames: int | None) -> None: ...

    def frame(self, source: Path, stats: ExtractStats) -> None: ...


def _probed(path: Path, max_pixels: int | None) -> MediaInfo | None:
    """What the probe reads of clip `path` (once a clip: the progress bar's count and the
    truncation warning both come from it); None for a photo, or a clip the probe cannot read
    (its decoding then says why)."""
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return None
    from ffdesk.media.probe import probe

    try:
        return probe(path, max_pixels=max_pixels)
    except Exception:  # noqa: BLE001 - the decoding that follows reports what is wrong
        return None


def _frames_expected(path: Path, every: int, info: MediaInfo | None) -> int | None:
    """Frames of `path` (probed as `info`) the extraction reads, every `every`th; None: unknown."""
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return 1
    if info is None or info.video is None or not info.video.frame_count:
        return None
    return -(-info.video.frame_count // every)


def _cut_short(info: MediaInfo | None) -> list[str]:
    """The probe's line for a clip cut off before its end (a copy or download that stopped), as a
    render warns of it: its frames decode without an error up to the cut, so nothing else would
    say that the faces of the rest are missing. Nothing for a photo, or a clip the probe cannot
    read."""
    if info is None:
        return []
    return [
        w.replace("rendering the frames that are there", "extracting the frames that are there")
        for w in info.warnings
        if "truncated" in w
    ]


def find_inputs(paths: Sequence[Path]) -> list[Path]:
    """Images and clips named, or found (sorted, recursively) in the folders named."""
    out: list[Path] = []
    for p in paths:
        p = expand_user(p)
        if p.is_dir():
            out.extend(
                sorted(
                    f
                    for f in p.rglob("*")
                    if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES | VIDEO_SUFFIXES
                )
            )
        elif p.is_file():
            if p.suffix.lower() not in IMAGE_SUFFIXES | VIDEO_SUFFIXES:
                raise UserError(f"{p}: not an image or clip ffdesk can read")
            out.append(p)
        else:
            raise UserError(f"{p}: no such file or folder")
    return [p.resolve() for p in out]


def difference_hash(crop: Frame) -> int:
    """64-bit dHash of the grey crop: which of two neighbouring pixels is brighter, on 9x8."""
    grey = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_RGB2GRAY)
    small = cv2.resize(grey, (9, 8), interpolation=cv2.INTER_AREA).astype(np.int16)
    bits = (small[:, 1:] > small[:, :-1]).flatten()
    return int(np.packbits(bits).view(">u8")[0])


def blur_score(crop: Frame) -> float:
    """Variance of the Laplacian of the grey crop at 128 px (sharp faces score in the hundreds)."""
    grey = cv2.cvtColor(np.ascontiguousarray(crop), cv2.COLOR_RGB2GRAY)
    grey = cv2.resize(grey, (128, 128), interpolation=cv2.INTER_AREA)
    return float(cv2.Laplacian(grey, cv2.CV_64F).var())


def hull_mask(points: npt.ArrayLike, size: int) -> npt.NDArray[np.uint8]:
    """255 inside the convex hull of the (crop-pixel) points, 0 outside."""
    mask = np.zeros((size, size), np.uint8)
    hull = cv2.convexHull(np.round(np.asarray(points)[:, :2]).astype(np.int32))
    cv2.fillConvexPoly(mask, hull, 255, cv2.LINE_AA)
    return mask


def _frames(path: Path, every: int, max_pixels: int | None = None) -> Iterator[tuple[int, Frame]]:
    from ffdesk.media.decode import VideoReader
    from ffdesk.media.images import read_image

    if path.suffix.lower() in IMAGE_SUFFIXES:
        yield 0, read_image(path, max_pixels=max_pixels)
        return
    with VideoReader(path, max_pixels=max_pixels) as reader:
        for i, frame in enumerate(reader):
            if i % every == 0:
                yield i, frame.image


def _stat(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def extract(
    inputs: Sequence[Path],
    out: Path,
    settings: ExtractSettings = ExtractSettings(),
    finder: FaceFinder | None = None,
    progress: ExtractProgress | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> ExtractStats:
    """Add the faces of `inputs` to the faceset at `out`; returns what was kept and dropped.

    An input that cannot be read (a damaged or truncated file) is skipped, told to `on_warning`
    in one line and counted (`ExtractStats.damaged`); the others are extracted. When nothing at
    all could be read, or the extraction fails, a faceset folder this call made is removed
    again: nothing half-written is left at `out`."""
    from ffdesk.faces.align import TEMPLATES

    if settings.template not in TEMPLATES:
        raise UserError(f"--template {settings.template}: one of {', '.join(sorted(TEMPLATES))}")
    files = find_inputs(inputs)
    if not files:
        raise UserError("no images or clips found in " + ", ".join(str(p) for p in inputs))
    made = not expand_user(out).exists() and not expand_user(out).is_symlink()
    try:
        stats = _extract_into(_open_writer(out, settings), files, settings, finder, progress, on_warning)
    except BaseException:
        if made:
            _remove_unpublished(expand_user(out))
        raise
    return stats


def _extract_into(
    writer: FacesetWriter,
    files: Sequence[Path],
    settings: ExtractSettings,
    finder: FaceFinder | None,
    progress: ExtractProgress | None,
    on_warning: Callable[[str], None] | None,
) -> ExtractStats:
    """`extract` into an opened faceset; `UserError` when not one frame could be read."""
    if finder is None:
        from ffdesk.faces.analyser import FaceAnalyser

        finder = FaceAnalyser()
    stats = ExtractStats()
    todo = []
    for path in files:
        if writer.is_done(str(path), _stat(path)):
            stats.skipped_sources += 1
        else:
            todo.append(path)
    infos: dict[Path, MediaInfo | None] = {}
    if progress is not None or on_warning is not None:
        infos = {p: _probed(p, settings.max_pixels) for p in todo}
    if progress is not None:
        counts = [_frames_expected(p, max(1, settings.every), infos[p]) for p in todo]
        progress.start(None if None in counts else sum(c or 0 for c in counts))
    for path in todo:
        stats.sources += 1
        if on_warning is not None:
            for line in _cut_short(infos[path]):
                on_warning(line)
        damage = _extract_source(writer, finder, path, settings, stats, progress)
        if damage is not None:
            stats.damaged += 1
            if on_warning is not None:
                on_warning(f"{damage}; skipped")
    if stats.damaged and not stats.frames and not stats.skipped_sources:
        which = "the input" if stats.damaged == 1 else f"any of the {stats.damaged} inputs"
        raise UserError(f"nothing extracted: could not read {which} (damaged or unsupported)")
    if stats.frames and not stats.kept:  # (no frame read: each input's damage was said)
        _no_face_kept(writer, todo, stats, on_warning)
        return stats  # nothing published: the faceset is left as it was
    writer.commit()
    return stats


def _no_face_kept(
    writer: FacesetWriter, read: Sequence[Path], stats: ExtractStats, on_warning: Callable[[str], None] | None
) -> None:
    """Inputs read that gave no face to keep: `UserError` (one line) for a faceset that would be
    empty (it would only fail at training time), a warning for one that holds faces already."""
    names = listed([str(p) for p in read])
    frames = counted(stats.frames, "frame")
    if stats.faces_found:
        dropped = f"{stats.tiny} tiny, {stats.blurred} blurred, {stats.duplicates} duplicate"
        why = (
            f"no face kept from {names} ({frames} read; {counted(stats.faces_found, 'face')} found, "
            f"dropped {dropped}; see --min-face and --blur-threshold)"
        )
    else:
        why = f"no face found in {names} ({frames} read)"
    if not writer.index.count:
        raise UserError(why)
    if on_warning is not None:
        on_warning(f"{why}; {writer.folder} left as it was ({counted(writer.index.count, 'face')})")


def _extract_source(
    writer: FacesetWriter,
    finder: FaceFinder,
    path: Path,
    settings: ExtractSettings,
    stats: ExtractStats,
    progress: ExtractProgress | None,
) -> str | None:
    """Add the faces of one input; None when it was read to its end, else the one line saying
    why it could not be (it is then not marked extracted: a later run tries it again, and the
    faces kept from before the damage come back as duplicates)."""
    from ffdesk.errors import DiskFull, MediaError
    from ffdesk.media.images import PixelLimitError

    source, st = str(path), _stat(path)
    kept_here = frames_here = 0
    try:
        for index, image in _frames(path, max(1, settings.every), settings.max_pixels):
            frames_here += 1
            stats.frames += 1
            faces = sorted(finder.detect(image), key=lambda f: -f.area)[: settings.max_faces_per_frame]
            for face in faces:
                stats.faces_found += 1
                if _add_face(writer, finder, image, face, settings, stats, source, index):
                    kept_here += 1
                    stats.kept += 1
            if progress is not None:
                progress.frame(path, stats)
    except (PixelLimitError, DiskFull):
        raise  # the limit the user set, and a write: not the input's damage
    except MediaError as exc:
        return str(exc)
    writer.source_done(source, {**st, "faces": kept_here, "frames": frames_here})
    return None


def _remove_unpublished(folder: Path) -> None:
    """Remove the faceset folder an extraction made when it published nothing (no index): shards
    written before a failure are listed nowhere, and an empty folder would read as a faceset
    that is not one."""
    from ffdesk.media.atomic import remove_folder
    from ffdesk.training.store import INDEX_NAME

    if folder.is_dir() and not folder.is_symlink() and not (folder / INDEX_NAME).exists():
        remove_folder(folder)


def _open_writer(out: Path, settings: ExtractSettings) -> FacesetWriter:
    """The faceset at `out` opened for adding; `UserError` when it was aligned another way, or
    `out` is a file (a clip given as the faceset, say), not a folder."""
    not_a_file(out, "--out", "faceset folder")
    writer = FacesetWriter(out, size=settings.size, points=MESH_POINTS)
    saved = writer.index.settings.get("alignment")
    if saved and saved.get("template") != settings.template:
        raise UserError(f"{out}: faceset was aligned with {saved.get('template')}, not {settings.template}")
    writer.index.settings = settings.to_json()
    return writer


def _add_face(
    writer: FacesetWriter,
    finder: FaceFinder,
    image: Frame,
    face: Face,
    settings: ExtractSettings,
    stats: ExtractStats,
    source: str,
    frame: int,
) -> bool:
    """Align `face` and add it to `writer`; False (counted in `stats`) for a face too small, too
    blurred or already in the set, and for one without a mesh (no face mask without it)."""
    from ffdesk.faces.align import warp_face

    if face.size < settings.min_face:
        stats.tiny += 1
        return False
    meshed = finder.landmarks(image, face)
    crop, m = warp_face(image, meshed.kps, settings.template, settings.size)
    blur = blur_score(crop)
    if blur < settings.blur_threshold:
        stats.blurred += 1
        return False
    phash = difference_hash(crop)
    if writer.is_duplicate(phash, settings.dedup_bits):
        stats.duplicates += 1
        return False
    pts = meshed.landmarks if meshed.landmarks is not None else meshed.kps
    local = np.asarray(pts, np.float64)[:, :2] @ m[:, :2].T + m[:, 2]
    if len(local) != MESH_POINTS:
        return False
    record = FaceRecord(source=source, frame=frame, score=float(face.score), blur=blur)
    writer.add(crop, hull_mask(local, settings.size), local.astype(np.float32), phash, record)
    return True
