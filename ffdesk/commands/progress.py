"""A render's progress as the command line shows it: a bar on a terminal, a plain line now and
then in a log (stderr sent to a file, a farm's or a scheduler's log), or nothing (`-q`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TextIO

from ffdesk.pipeline import events as ev

if TYPE_CHECKING:
    from ffdesk.pipeline.report import RenderReport

LOG_EVERY_S = 30.0
"""How often a render whose stderr is not a terminal says how far it is."""

Mode = Literal["bar", "lines", "off"]


def progress_mode(quiet: bool, stream: TextIO | None = None) -> Mode:
    """ "off" for `-q`, "bar" where `stream` (stderr) is a terminal, else "lines"."""
    if quiet:
        return "off"
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return "bar" if callable(isatty) and isatty() else "lines"


class TerminalProgress:
    """Turns engine events into a tqdm bar ("bar"), into a line every `every_s` seconds (None:
    `LOG_EVERY_S`) with frames done, frames/s and time left ("lines"), or into nothing but
    warnings ("off"). Warnings go to stderr in every mode."""

    def __init__(
        self,
        mode: Mode,
        *,
        every_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode: Mode = mode
        self.every_s = LOG_EVERY_S if every_s is None else every_s
        self.clock = clock
        self.bar: Any = None
        self._said_at = self._began = self.clock()
        self._said_finishing = False

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.Started) and self.mode == "bar":
            self._bar(event)
        elif isinstance(event, ev.Preparing) and self.mode != "off":
            self._line(f"preparing the models ({event.step}/{event.steps}): {event.what}")
        elif isinstance(event, ev.Progress):
            if self.bar is not None:
                self.bar.total = event.frames_total
                self.bar.update(event.frames_done - self.bar.n)
            elif self.mode == "lines":
                last = event.frames_total > 0 and event.frames_done >= event.frames_total
                self._line(progress_line(event), finishing=last)
        elif isinstance(event, ev.Warning):
            self.write(f"ffdesk: warning: {event.message}")

    def _bar(self, event: ev.Started) -> None:
        from tqdm import tqdm

        self.bar = tqdm(
            total=event.total_frames,
            initial=event.resumed_frames,
            unit="frame",
            dynamic_ncols=True,
            file=sys.stderr,
        )
        if event.resumed_frames:
            self.bar.write(f"resuming after {event.resumed_frames} finished frames")

    def _line(self, line: str, *, finishing: bool = False) -> None:
        """`line` on a terminal at once; in a log once `every_s` have passed since the last
        (a render shorter than that says nothing but its result, and errors stay one line), and
        the last frame's (`finishing`) once the render has run `every_s`, whenever the line
        before it was: what follows it, the encoder's last frames and the join, takes a while."""
        if self.mode == "bar":
            self.write(line)
            return
        now = self.clock()
        if finishing and not self._said_finishing and now - self._began >= self.every_s:
            self._said_finishing = True
            self._said_at = now
            self.write(line)
        elif now - self._said_at >= self.every_s:
            self._said_at = now
            self.write(line)

    def write(self, line: str) -> None:
        """`line` on stderr, above the bar where there is one; control characters of a file's name
        in it shown as visible escapes (`terminal_line`)."""
        from ffdesk.terminal_text import terminal_line

        line = terminal_line(line)
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def progress_line(event: ev.Progress) -> str:
    """ "frame 1200 of 14400 (8%), 24.1 frames/s, about 9 min left"; at the last frame
    "frame 14400 of 14400 (100%), 24.1 frames/s, finishing": what is left then (the encoder's
    last frames, the join) does not go at the frame rate, so no time is made up from it."""
    total = max(event.frames_total, 0)
    share = f" ({100 * event.frames_done // total}%)" if total else ""
    if total and event.frames_done >= total:
        left = ", finishing"
    elif event.eta_s is not None and event.eta_s >= 0:
        left = f", about {_duration(event.eta_s)} left"
    else:
        left = ""
    return f"frame {event.frames_done} of {total}{share}, {event.fps:.1f} frames/s{left}"


def _duration(seconds: float) -> str:
    """ "40 s", "9 min", "2 h 05 min"."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def finished_line(report: RenderReport) -> str:
    """The line a render ends with: "wrote OUT (120 frames, 6.6 frames/s)"; for a resumed render
    "wrote OUT (120 frames, 7 resumed and 113 rendered now at 6.6 frames/s)": its rate counts only
    the frames this run rendered, over this run's time, so it says which frames those are. An
    image says its time instead of a rate."""
    up = report.upscale
    size = f", {up.width}x{up.height} (x{up.scale} by {up.model})" if up is not None and up.width else ""
    if report.video is None:
        return f"wrote {report.output} (an image{size}, {report.seconds:.2f} s)"
    shots = f", {report.shots.shots} shots" if report.shots is not None and report.shots.cuts else ""
    return f"wrote {report.output} ({report.frames_out} frames{size}, {_rate(report)}{shots})"


def _rate(report: RenderReport) -> str:
    """The frames/s of the frames rendered now, and how many were resumed from before."""
    resumed = report.video.resumed_frames if report.video is not None else 0
    if resumed <= 0:
        return f"{report.fps:.1f} frames/s"
    if report.frames_processed <= 0:
        return "all resumed from before"
    return f"{resumed} resumed and {report.frames_processed} rendered now at {report.fps:.1f} frames/s"
