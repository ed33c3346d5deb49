"""`ffdesk queue list|run`: the desktop app's saved render queue, on the command line.

`run` renders the queued jobs in order (with `--resume`, the interrupted, failed and cancelled
ones too, each from where it stopped), here or on a farm (`--farm`), keeping every job's state
and progress in the queue file as the app does. A job that fails is marked failed with its one
line and the queue goes on; Ctrl-C stops the running job, which stays resumable ("interrupted").
Exit status: 0 when every job run is done, 2 when one failed, 130 after Ctrl-C. A queue the
desktop app has open is not run (the app runs it), as two runners would render its jobs twice.

`list` only reads: a damaged queue is said in one line and left as it is (`run`, which writes
the queue, keeps it aside as the app does). A `--queue` file that is not a render queue at all
(another program's JSON, a clip) is refused by both in one line, before anything is made or moved.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ffdesk.commands.interrupt import stop_signals
from ffdesk.commands.progress import Mode, progress_mode
from ffdesk.commands.registry import needs_subcommand
from ffdesk.commands.runtime_env import runtime_env
from ffdesk.errors import Busy, Cancelled, Terminated, UserError
from ffdesk.pipeline import events as ev
from ffdesk.pipeline.job import RenderJob
from ffdesk.pipeline.queue import (
    RESUMABLE,
    JobProgress,
    QueueEntry,
    QueueInUse,
    RenderQueue,
    default_queue_path,
    not_a_queue,
)
from ffdesk.terminal_text import terminal_line
from ffdesk.units import counted

if TYPE_CHECKING:
    from ffdesk.farm.address import FarmAddress
    from ffdesk.pipeline.report import RenderReport

Render = Callable[[RenderJob, ev.EventCallback, threading.Event], "RenderReport"]

INTERRUPTED_NOTE = "interrupted; `ffdesk queue run --resume` continues where it stopped"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "queue", help="the saved render queue (the desktop app's): list it, run it here or on a farm"
    )
    queue = parser.add_subparsers(dest="queue_command", parser_class=type(parser))
    listing = queue.add_parser("list", help="the jobs, their states and progress")
    _queue_file_arg(listing)
    listing.add_argument("--json", action="store_true", help="print the jobs as JSON")
    listing.set_defaults(func=run_list)
    run = queue.add_parser("run", help="render every queued job in order")
    _queue_file_arg(run)
    run.add_argument(
        "--resume",
        action="store_true",
        help="also run the interrupted, failed and cancelled jobs (each resumes where it stopped)",
    )
    run.add_argument(
        "--farm",
        default=None,
        metavar="ADDR",
        help="render on a Ray farm: HEAD:PORT (or TOKEN@HEAD:PORT), or auto (RAY_ADDRESS, else a local Ray)",
    )
    run.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress (else a bar on a terminal, a line every 30 s in a log)",
    )
    run.set_defaults(func=run_queue)
    add = queue.add_parser(
        "add",
        help="check a render and queue it: ffdesk render's options (not --farm: `queue run --farm` "
        "picks where)",
    )
    from ffdesk.commands.render import add_job_options

    add_job_options(add)
    _queue_file_arg(add)
    # what `job_from_args` reads of a render on this machine's options: their defaults
    add.set_defaults(
        func=run_add, farm=None, farm_storage="shared", farm_metrics_port="0", farm_metrics_host="local"
    )
    add.set_defaults(metrics_port=None, metrics_host="127.0.0.1")
    clear = queue.add_parser("clear", help="take the finished jobs off the queue (their outputs stay)")
    _queue_file_arg(clear)
    clear.set_defaults(func=run_clear)

    needs_subcommand(parser, queue)


def _queue_file_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--queue",
        type=Path,
        default=None,
        metavar="FILE",
        help="the queue file (default: the desktop app's, queue.json in the user data folder)",
    )


def queue_path(args: argparse.Namespace) -> Path:
    """The file `--queue` names, else the desktop app's. `UserError` for a folder, one `--queue`
    names that is not there, and for a
    `--queue` file that is not a render queue at all (`not_a_queue`): named by mistake, it is
    left as it is (never kept aside as a damaged queue, no lock file made beside it)."""
    path: Path = args.queue if args.queue is not None else default_queue_path(runtime_env(args))
    if path.is_dir():
        raise UserError(f"--queue {path}: is a folder, not a queue file")
    if args.queue is not None and not path.exists():  # a name mistyped is not an empty queue
        raise UserError(f"--queue {path}: no such file (the app makes one as it queues a first job)")
    if args.queue is not None and (why := not_a_queue(path)) is not None:
        raise UserError(f"--queue {path}: not a render queue ({why}); it is left as it is")
    return path


def open_queue(path: Path, *, read_only: bool = False) -> RenderQueue:
    """The queue at `path`; a note on stderr when it was damaged. `read_only`: a listing's, which
    changes nothing on disk; `UserError` when not one of its jobs could be read."""
    queue = RenderQueue(path, read_only=read_only)
    if queue.warning and read_only and not queue.entries():
        raise UserError(queue.warning)
    if queue.warning:
        print(terminal_line(f"ffdesk: warning: {queue.warning}"), file=sys.stderr)
    return queue


# ---- list ----------------------------------------------------------------------------------


def entry_line(number: int, e: QueueEntry) -> str:
    """One job as `queue list` prints it: what the queue file says of it (its message, its paths)
    shown as a terminal line (`terminal_line`: an ESC in a name is no colour change)."""
    frames = f"{e.frames_done}/{e.frames_total} {e.fraction * 100:3.0f}%" if e.frames_total else ""
    note = f"  ({e.message})" if e.message and e.state != "done" else ""
    line = f"{number:>3}  {e.id}  {e.state:<11} {frames:>16}  {e.job.target.name} -> {e.job.output}{note}"
    return terminal_line(line)


def run_add(args: argparse.Namespace) -> int:
    """Check the job as `ffdesk render` checks it, then append it to the queue (made where
    `--queue` names a file not there yet), while no other process has the queue open."""
    from ffdesk.commands.render import job_from_args
    from ffdesk.pipeline.engine import check_paths

    job = job_from_args(args)
    check_paths(job)
    path = args.queue if args.queue is not None and not args.queue.exists() else queue_path(args)
    if path.is_dir():
        raise UserError(f"--queue {path}: is a folder, not a queue file")
    held = QueueInUse.take(path, "ffdesk queue add")
    if isinstance(held, str):
        raise Busy(f"{path} is in use by {held}: add the job there, or once it is closed")
    try:
        queue = open_queue(path)
        entry = queue.add(job)
        ahead = sum(1 for e in queue.entries() if e.state == "queued" and e.id != entry.id)
        others = _outputs_of_others(queue, entry)
        same = _jobs_writing(queue, entry)
    finally:
        held.release()
    place = f"{counted(ahead, 'job')} queued before it" if ahead else "first in line"
    print(terminal_line(f"queued {entry.job.target.name} -> {entry.job.output} ({place}; {path})"))
    out = entry.job.output
    if same:  # (as `claim_output` renames each in turn when it runs)
        from ffdesk.pipeline.output_names import free_output

        mine = out.expanduser().resolve()
        taken = set(others) - {mine}  # (the jobs with this output claim their names in turn)
        then = out
        for _ in range(same + 1):  # the jobs queued with this output before it, then this one
            then = free_output(out, taken)
            taken.add(then.expanduser().resolve())
        who = "another job in the queue writes" if same == 1 else f"{same} other jobs in the queue write"
        print(
            terminal_line(
                f"ffdesk: warning: {who} {out.name} too: this one, run after them, writes "
                f"{then.name} (or the next free name) instead"
            ),
            file=sys.stderr,
        )
    return 0


def run_clear(args: argparse.Namespace) -> int:
    """Drop the finished jobs, in the queue file only while no other process has it open (the
    app or a `queue run` would write its own list back over the change)."""
    path = queue_path(args)
    held = QueueInUse.take(path, "ffdesk queue clear")
    if isinstance(held, str):
        raise Busy(f"{path} is in use by {held}: clear it there, or once it is closed")
    try:
        gone = open_queue(path).remove_done()
    finally:
        held.release()
    said = f"took {counted(gone, 'finished job')} off {path}" if gone else f"no finished jobs in {path}"
    print(terminal_line(said))
    return 0


def run_list(args: argparse.Namespace) -> int:
    queue = open_queue(queue_path(args), read_only=True)
    entries = queue.entries()
    if args.json:
        rows = [
            {
                "id": e.id,
                "state": e.state,
                "frames_done": e.frames_done,
                "frames_total": e.frames_total,
                "target": str(e.job.target),
                "output": str(e.job.output),
                "message": e.message,
            }
            for e in entries
        ]
        print(json.dumps({"queue": str(queue.path), "jobs": rows}, indent=2))
        return 0
    if not entries:
        print(terminal_line(f"no jobs in {queue.path}"))
        return 0
    for i, e in enumerate(entries, 1):
        print(entry_line(i, e))
    return 0


# ---- run -----------------------------------------------------------------------------------


@contextlib.contextmanager
def rendering(args: argparse.Namespace, farm: FarmAddress | None) -> Iterator[tuple[Render, str]]:
    """How each job is rendered, and where (for the summary): here, or on `farm`, joined once
    for the whole queue (a farm that does not answer: `UserError`)."""
    if farm is None:
        from ffdesk.pipeline.engine import run_render

        env = runtime_env(args)
        yield (lambda job, emit, cancel: run_render(job, emit, cancel, env=env)), ""
        return
    from ffdesk.farm.address import connected
    from ffdesk.farm.head import run_farm_render

    with connected(farm):
        yield (
            (lambda job, emit, cancel: run_farm_render(job, farm, emit, cancel)),
            f" on the farm at {farm.label}",
        )


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def run_one(
    queue: RenderQueue, entry: QueueEntry, render: Render, cancel: threading.Event, shown: Mode
) -> str:
    """Render one entry, keeping its row in the queue; its final state."""
    from ffdesk.commands.progress import TerminalProgress
    from ffdesk.commands.render import write_report

    progress = JobProgress(queue, entry.id)
    progress.start()
    bar = TerminalProgress(mode=shown)

    def emit(event: ev.Event) -> None:
        progress.on_event(event)
        bar(event)

    try:
        report = render(entry.job, emit, cancel)
    except (Cancelled, KeyboardInterrupt, Terminated):
        progress.stopped("interrupted", INTERRUPTED_NOTE)
        return "interrupted"
    except UserError as exc:
        return _failed(progress, entry, _one_line(exc))
    except Exception as exc:  # noqa: BLE001 - one job's crash must not cost the rest of the queue
        return _failed(progress, entry, f"internal error: {type(exc).__name__}: {_one_line(exc)}")
    finally:
        bar.close()
    progress.done()
    if entry.job.report is not None:
        write_report(entry.job.report, report)
    resumed = report.video.resumed_frames if report.video is not None else 0
    after = f", resumed after {resumed} frames" if resumed else ""
    figures = f"{report.frames_out} frames, {report.fps:.1f} frames/s{after}"
    print(terminal_line(f"done   {entry.job.target.name} -> {report.output} ({figures})"))
    return "done"


def _failed(progress: JobProgress, entry: QueueEntry, message: str) -> str:
    progress.failed(message)
    job = entry.job
    named = message.startswith((job.target.name, str(job.target)))
    print(
        terminal_line(f"ffdesk: error: {message if named else f'{job.target.name}: {message}'}"),
        file=sys.stderr,
    )
    return "failed"


def run_queue(args: argparse.Namespace) -> int:
    farm = None
    if args.farm is not None:
        from ffdesk.farm.ray_support import require_ray

        require_ray()  # before anything else: without Ray, one line and exit 2
        from ffdesk.farm.address import parse_farm

        farm = parse_farm(args.farm)
    path = queue_path(args)
    held = QueueInUse.take(path, "ffdesk queue run")
    if isinstance(held, str):
        raise Busy(f"{path} is in use by {held}: run the queue there, or once it is closed")
    try:
        return _run_held(args, open_queue(path), farm)
    finally:
        held.release()


def _run_held(args: argparse.Namespace, queue: RenderQueue, farm: FarmAddress | None) -> int:
    if args.resume:
        for e in queue.entries():
            if e.state in RESUMABLE:
                queue.resume(e.id)
    if queue.next_queued() is None:
        waiting = sum(1 for e in queue.entries() if e.state in RESUMABLE)
        hint = f"; --resume runs the {waiting} interrupted, failed or cancelled" if waiting else ""
        print(terminal_line(f"nothing queued in {queue.path}{hint}"))
        return 0
    t0 = time.perf_counter()
    before = frozenset(e.id for e in queue.entries() if e.state in RESUMABLE)
    with rendering(args, farm) as (render, where):
        outcomes = run_all(queue, render, shown=progress_mode(args.quiet))
    parts = [f"{outcomes[s]} {s}" for s in ("done", "failed", "interrupted") if outcomes[s]]
    left = sum(1 for e in queue.entries() if e.state == "queued")
    if left:
        parts.append(f"{left} still queued")
    took = time.perf_counter() - t0
    untouched = _left_waiting(queue, before)
    print(terminal_line(f"queue: {', '.join(parts)}{where} in {took:.1f} s ({queue.path}){untouched}"))
    if outcomes["interrupted"]:
        return 130
    return 2 if outcomes["failed"] else 0


def _left_waiting(queue: RenderQueue, before: frozenset[str]) -> str:
    """What the summary adds for the jobs interrupted, failed or cancelled before this run (ids
    `before`), which a plain `queue run` leaves as they are: "; 1 interrupted from before, not
    run: --resume runs it"."""
    states = Counter(e.state for e in queue.entries() if e.id in before and e.state in RESUMABLE)
    if not states:
        return ""
    kinds = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    them = "it" if sum(states.values()) == 1 else "them"
    return f"; {kinds} from before, not run: --resume runs {them}"


def run_all(queue: RenderQueue, render: Render, *, shown: Mode) -> Counter[str]:
    """Run the queued entries in order until none is left or Ctrl-C or SIGTERM; how many ended how."""
    cancel = threading.Event()
    outcomes: Counter[str] = Counter()
    with stop_signals(cancel):
        while not cancel.is_set() and (entry := queue.next_queued()) is not None:
            claimed = claim(queue, entry)
            if claimed is None:
                outcomes["failed"] += 1
            else:
                outcomes[run_one(queue, claimed, render, cancel, shown)] += 1
    return outcomes


def claim(queue: RenderQueue, entry: QueueEntry) -> QueueEntry | None:
    """`entry` ready to run with an output nothing is at (`claim_output`): renamed when a file
    appeared at its output since it was queued (said on stderr), or failed (None) when it cannot
    be, a path of its that cannot be looked at (a link loop) included: the queue goes on."""
    from ffdesk.pipeline.output_names import claim_output

    try:
        got = claim_output(entry.job, _outputs_of_others(queue, entry))
    except UserError as exc:
        problem = _one_line(exc)
    except (OSError, RuntimeError) as exc:  # a path that cannot be looked at (a link loop: RuntimeError)
        problem = f"cannot check its paths ({_one_line(exc)})"
    except Exception as exc:  # noqa: BLE001 - one job's crash must not cost the rest of the queue
        problem = f"internal error: {type(exc).__name__}: {_one_line(exc)}"
    else:
        if got.job is not None:
            if got.job == entry.job:
                return entry
            print(terminal_line(f"ffdesk: warning: {got.note}"), file=sys.stderr)
            return queue.update(entry.id, job=got.job)
        problem = got.note
    queue.update(entry.id, state="failed", message=problem, eta_s=None, finished=time.time())
    print(terminal_line(f"ffdesk: error: {entry.job.target.name}: {problem}"), file=sys.stderr)
    return None


def _jobs_writing(queue: RenderQueue, entry: QueueEntry) -> int:
    """How many of the queue's other unfinished jobs write `entry`'s output (compared as
    absolute paths; an output that cannot be resolved is counted as no other's)."""

    def absolute(path: Path) -> Path | None:
        try:
            return path.expanduser().resolve()
        except (OSError, RuntimeError):
            return None

    mine = absolute(entry.job.output)
    if mine is None:
        return 0
    others = (e for e in queue.entries() if e.id != entry.id and e.state != "done")
    return sum(1 for e in others if absolute(e.job.output) == mine)


def _outputs_of_others(queue: RenderQueue, entry: QueueEntry) -> frozenset[Path]:
    """`pending_outputs` of the queue's other entries, less an output that cannot be resolved (a
    link loop): that job fails on its own turn, and costs no other job its run."""
    from ffdesk.pipeline.output_names import pending_outputs

    others = [e for e in queue.entries() if e.id != entry.id]
    try:
        return pending_outputs(others)
    except (OSError, RuntimeError):
        pass
    found: set[Path] = set()
    for other in others:
        with contextlib.suppress(OSError, RuntimeError):
            found |= pending_outputs([other])
    return frozenset(found)
