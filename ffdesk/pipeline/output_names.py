"""Where a render of a clip writes: a name of its own, never a file that is already there.

Each render of one clip gets its own output: a preview draft is named as one
(`CLIP-ffdesk-preview.mp4`), a final render plainly (`CLIP-ffdesk.mp4`), and when that name is
taken (a file or folder is there, a render's work folder is there, or another job of the queue
that may still write will write there) the next free number is added (`CLIP-ffdesk-2.mp4`, ...).
Front ends pick the name when they queue a job; the engine itself writes where it is told.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ffdesk.media.atomic import same_file
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import QueueEntry
from ffdesk.pipeline.resume import work_dir_for
from ffdesk.types import Mode

OUTPUT_TAG = "-ffdesk"
PREVIEW_TAG = "-preview"
MAX_NUMBER = 9999
"""The highest number tried before giving up on a folder (`OutputNamesExhausted`)."""

Occupied = Callable[[Path], bool]
"""Whether something is already at a path (or a render of it has begun)."""


class OutputNamesExhausted(ValueError):
    """Every numbered name up to `MAX_NUMBER` is taken."""


def on_disk(path: Path) -> bool:
    """Whether a file, folder or link is at `path`, or a render's work folder for it is."""
    return path.exists() or path.is_symlink() or work_dir_for(path).exists()


def base_output(clip: Path, mode: Mode, folder: Path, suffix: str) -> Path:
    """The unnumbered output of a render of `clip` in `mode`: CLIP-ffdesk[-preview]SUFFIX in
    `folder` (`suffix` "" for an output that is a folder of frames)."""
    stem = f"{clip.stem}{OUTPUT_TAG}{PREVIEW_TAG if mode == 'preview' else ''}"
    return folder / f"{stem}{suffix}"


def numbered(base: Path, number: int) -> Path:
    """`base` with `-N` before its suffix (`number` 1 is `base` itself)."""
    if number <= 1:
        return base
    return base.with_name(f"{base.stem}-{number}{base.suffix}")


def free_output(base: Path, taken: Iterable[Path] = (), occupied: Occupied = on_disk) -> Path:
    """`base`, or the first `numbered` form of it that is neither in `taken` (outputs other jobs
    will write) nor `occupied`. Compared as absolute paths."""
    held = {_absolute(p) for p in taken}
    for number in range(1, MAX_NUMBER + 1):
        candidate = numbered(base, number)
        if _absolute(candidate) not in held and not occupied(candidate):
            return candidate
    raise OutputNamesExhausted(f"{base.parent}: every name from {base.name} to -{MAX_NUMBER} is taken")


def render_output(
    clip: Path,
    mode: Mode,
    folder: Path,
    suffix: str,
    taken: Iterable[Path] = (),
    occupied: Occupied = on_disk,
) -> Path:
    """The output a new render of `clip` in `mode` writes: `base_output`, numbered when taken."""
    return free_output(base_output(clip, mode, folder, suffix), taken, occupied)


def pending_outputs(entries: Iterable[QueueEntry]) -> frozenset[Path]:
    """The outputs queue jobs may still write: every entry not done (a queued or running one,
    and a cancelled, interrupted or failed one, which a resume finishes at the same path)."""
    return frozenset(_absolute(e.job.output) for e in entries if e.state != "done")


def _absolute(path: Path) -> Path:
    return path.expanduser().resolve()


def output_in_the_way(job: RenderJob) -> bool:
    """Whether a file, folder or link is at the job's output (the engine would replace it)."""
    return job.output.exists() or job.output.is_symlink()


@dataclass(frozen=True)
class OutputClaim:
    """What a queue runner does with a job about to start: run `job` (its output renamed when
    `note` says so), or, with `job` None, fail it with `note`."""

    job: RenderJob | None
    note: str = ""


def claim_output(job: RenderJob, taken: Iterable[Path] = ()) -> OutputClaim:
    """A queued job about to start, with an output nothing is at: a file that appeared at its
    output after it was queued is never replaced. A job with nothing rendered yet writes the next
    free name; one with finished segments keeps its name (they are kept in the work folder under
    that name), so it is refused with one line. `taken`: outputs other queue jobs will write."""
    out = job.output
    if any(same_file(out, inp) for inp in job.files_read()):  # never a new name beside an input
        return OutputClaim(None, f"output {out.name} is one of the job's inputs; choose another path")
    if not output_in_the_way(job):
        return OutputClaim(job)
    if work_dir_for(out).exists():
        return OutputClaim(
            None, f"{out.name} is already there and is not replaced; move it away, then resume"
        )
    try:
        new = free_output(out, taken)
    except OutputNamesExhausted as exc:
        return OutputClaim(None, str(exc))
    return OutputClaim(
        replace(job, output=new), f"{out.name} appeared after the job was queued; writing {new.name}"
    )
