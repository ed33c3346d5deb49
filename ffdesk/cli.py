"""Command-line front end: `ffdesk <command> ...`.

Each command lives in its own module under `ffdesk.commands` and exposes
`register(subparsers) -> None`, which adds its parser and sets `func=handler(args) -> int`.
Exit codes: 0 done, 2 bad input or usage (one line on stderr), 75 busy (another process holds
the output, queue or training run: try again later), 130 cancelled, 143 stopped by SIGTERM, 1
internal error
(one-line summary; the traceback goes to a log file under the user's cache folder) or a package
ffdesk needs that is not installed (one line naming it and what to install).

`main` builds the runtime environment (`RuntimeEnv.from_system()`: user folders, settings,
`FFDESK_*` switches) once per call and hands it to the command as `args.runtime_env`.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

from ffdesk import __version__
from ffdesk.commands.registry import register_modules
from ffdesk.commands.runtime_env import ATTRIBUTE as ENV_ATTRIBUTE
from ffdesk.errors import BUSY_EXIT, Busy, Cancelled, Terminated, UserError
from ffdesk.media.named_output import figures_to_stdout
from ffdesk.runtime.env import RuntimeEnv
from ffdesk.userpath import stream_fd

COMMAND_MODULES = (
    "render",
    "models",
    "bench",
    "telemetry",
    "gui",
    "faceset",
    "train",
    "monitor",
    "sample",
    "probe",
    "faces",
    "farm",
    "queue",
    "live",
)

KEEP_SIGTERM = frozenset({"gui", "train"})
"""Commands SIGTERM reaches as it would without ffdesk's handler: the app's window (Qt's event loop
would meet an exception in a slot and go on) and training (torchrun's workers save a checkpoint
on it; a lone run's data workers are forked)."""


HINTED_COMMANDS = frozenset({"render"})
"""Commands whose refused command lines name ffdesk's equivalents of FaceFusion's options
(`ffdesk.commands.facefusion_names`)."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2; a render's names what
    ffdesk takes for the FaceFusion options (and space-separated lists) it refuses."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # printed after "ffdesk: error: ": a subcommand's name only ("render: ..."), never ffdesk twice
        command = self._command()
        raise UserError(f"{command}: {message}" if command else message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, with FaceFusion hints on a render's usage errors: an error of this parser
        gets them for the FaceFusion options of the command line; refused arguments (which the
        top parser would report without knowing the command) are reported here, with them,
        when there are any."""
        if self._command() not in HINTED_COMMANDS:
            return super().parse_known_args(args, namespace)
        from ffdesk.commands.facefusion_names import refusal_hints, with_hints

        given = list(sys.argv[1:] if args is None else args)
        known = self._option_strings()
        try:
            parsed, refused = super().parse_known_args(given, namespace)
        except UserError as exc:
            # argparse stopped before it had sorted out the refused: hint for the whole line
            # (a render takes no positional argument, so no value of it is read as one)
            raise UserError(with_hints(str(exc), refusal_hints(given, given, known))) from None
        hints = refusal_hints(given, refused, known)
        if refused and hints:
            # the top parser's own wording, which names no command
            raise UserError(with_hints(f"unrecognized arguments: {' '.join(refused)}", hints))
        return parsed, refused

    def _command(self) -> str:
        """The subcommand this parser reads ("render", "models list"); "" for ffdesk's own."""
        return self.prog.removeprefix("ffdesk").strip()

    def _option_strings(self) -> set[str]:
        return {s for action in self._actions for s in action.option_strings}


def build_parser(commands: Sequence[str] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """ffdesk's command line with the parsers of `commands` (each of `COMMAND_MODULES` adds the
    command of its name): by default every command's, which `ffdesk --help` lists."""
    parser = _Parser(prog="ffdesk", description="Face-swap studio for video editors.")
    parser.add_argument("--version", action="version", version=f"ffdesk {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    register_modules(sub, "ffdesk.commands", [c for c in commands if c in COMMAND_MODULES])
    return parser


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser `argv` needs: where it starts with a command this installation has, that
    command's alone (without making, and importing, the other commands' hundreds of options: a
    few tenths of a second of every command's start); `--version` none; else every command's
    (help, a mistyped command: the choices are listed)."""
    first = argv[0] if argv else None
    if first == "--version":
        return build_parser(())
    if first in COMMAND_MODULES:
        parser = build_parser((first,))
        if first in _available(parser):
            return parser
    return build_parser()


def log_dir(env: RuntimeEnv | None = None) -> Path:
    """Where crash logs go: the environment's `logs_dir` (`<user cache>/ffdesk/logs`)."""
    return (env or RuntimeEnv.from_system()).logs_dir


def _write_crash_log(env: RuntimeEnv | None) -> Path | None:
    try:
        folder = log_dir(env)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}.log"
        path.write_text(traceback.format_exc())
        return path
    except Exception:  # noqa: BLE001 - no folder for it (a read-only home, settings unreadable)
        return None


FIGURE_FILES = ("json", "report", "telemetry_log")
"""Options naming a file a command writes its figures, report or log to; `-` (or /dev/stdout)
sends them to standard output, and the command's other lines then go to stderr."""


@contextlib.contextmanager
def _figures_kept_apart(args: argparse.Namespace) -> Iterator[None]:
    """While inside, a figures file given as standard output (`--json -`, `--report -`) has that
    descriptor to itself: the command's own lines (and its child processes') go to stderr, so
    what reaches stdout parses (`named_output.figures_to_stdout`)."""
    named = [
        name
        for name in FIGURE_FILES
        if isinstance(value := getattr(args, name, None), (str, Path)) and stream_fd(value) == 1
    ]
    if not named:
        yield
        return
    with figures_to_stdout(getattr(args, named[0])) as kept:
        for name in named:
            setattr(args, name, kept)
        yield


def _readable_anywhere() -> None:
    """Lines whose characters the terminal's encoding lacks (a clip named `café.mp4` under
    LANG=C or PYTHONIOENCODING=ascii) print with escapes, never end a finished command in an
    internal error."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]


def _said(level: str, text: object) -> None:
    """`ffdesk: LEVEL: TEXT` on stderr, one terminal line: a file's name in a message (a clip, a
    model, a queue) may hold an ESC or a newline, shown as a visible escape (`terminal_line`)."""
    from ffdesk.terminal_text import terminal_line

    print(terminal_line(f"ffdesk: {level}: {text}"), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    _readable_anywhere()
    env: RuntimeEnv | None = None
    try:
        env = RuntimeEnv.from_system()
        if not args_list:
            has_gui = "gui" in _available(build_parser(["gui"]))
            args_list = ["gui"] if has_gui and _can_show_window() else ["--help"]
        parser = parser_for(args_list)
        args = parser.parse_args(args_list)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        setattr(args, ENV_ATTRIBUTE, env)
        if env.settings_note and not getattr(args, "rewrites_settings", False):
            _said("warning", env.settings_note)
        from ffdesk.commands.interrupt import terminate_raises

        own = getattr(args, "command", None) in KEEP_SIGTERM
        with contextlib.nullcontext() if own else terminate_raises(), _figures_kept_apart(args):
            return int(args.func(args) or 0)
    except Busy as exc:
        _said("error", exc)
        return BUSY_EXIT
    except UserError as exc:
        _said("error", exc)
        return 2
    except (Cancelled, KeyboardInterrupt):
        print("ffdesk: cancelled", file=sys.stderr)
        return 130
    except Terminated:
        print("ffdesk: stopped (SIGTERM)", file=sys.stderr)
        return 143
    except SystemExit as exc:  # --help / --version; a message: said, exit 1 (as Python does)
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        _said("error", exc.code)
        return 1
    except BrokenPipeError:
        # the reader went away (`ffdesk probe CLIP | head`): stop quietly, as command-line tools do
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        if (gone := _folder_gone(exc)) is not None:
            _said("error", gone)
            return 2
        if not is_place_error(exc):
            return _internal_error(exc, env)
        _said("error", place_error(exc))
        return 2
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "ffdesk":
            return _internal_error(exc, env)
        _said("error", missing_package(exc.name))
        return 1
    except RuntimeError as exc:
        if (loop := _link_loop(exc)) is None:
            return _internal_error(exc, env)
        _said("error", loop)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        return _internal_error(exc, env)


def _link_loop(exc: RuntimeError) -> str | None:
    """One line for the error Python 3.11's `Path.resolve` raises on a symbolic link loop."""
    text = str(exc)
    if not text.startswith("Symlink loop from "):
        return None
    return f"{text.removeprefix('Symlink loop from ').strip(chr(39))}: a loop of symbolic links"


def _folder_gone(exc: OSError) -> str | None:
    """One line for a relative path met while the current folder no longer exists (deleted
    under a shell that is still in it): `os.getcwd()` fails and the error names no file."""
    if not isinstance(exc, FileNotFoundError) or exc.filename is not None:
        return None
    try:
        os.getcwd()
    except FileNotFoundError:
        return "the current folder no longer exists (deleted?): cd to one that does, or give full paths"
    return None


PLACE_ERRNOS = frozenset(
    {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EISDIR}
)
"""What a file system says of a place the user chose (read-only, not allowed, full, a file where a
folder should be): one line (exit 2) wherever a command meets it, not an internal error."""


def is_place_error(exc: OSError) -> bool:
    """Whether `exc` is the file system's word on a place (`PLACE_ERRNOS`, or a folder made where
    a file is: mkdir's "File exists" for a path that is a file)."""
    if exc.errno in PLACE_ERRNOS:
        return True
    return exc.errno == errno.EEXIST and exc.filename is not None and os.path.isfile(exc.filename)


def place_error(exc: OSError) -> str:
    """One line for a file system error on a place the user chose: the path and the reason."""
    where = exc.filename if exc.filename is not None else "a file"
    name = os.path.basename(str(where))
    if name.startswith(".") and ".partial" in name and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        # a file ffdesk writes beside the one it makes, to move it into place when whole: the
        # user chose the folder, not that name
        return f"cannot write in {os.path.dirname(str(where)) or '.'} ({exc.strerror or exc})"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"disk full while writing {where} ({exc.strerror})"
    if exc.errno == errno.EEXIST:
        return f"{where} is a file where a folder is needed"
    return f"{where}: {exc.strerror or exc}"


def _internal_error(exc: BaseException, env: RuntimeEnv | None) -> int:
    log = _write_crash_log(env)
    if log is None:  # (no folder for the log: a read-only home) the details here, not lost
        traceback.print_exc(file=sys.stderr)
    where = f" (details in {log})" if log else " (details above: no crash log could be written)"
    print(f"ffdesk: internal error: {type(exc).__name__}: {exc}{where}", file=sys.stderr)
    return 1


def missing_package(module: str) -> str:
    """One line for a package ffdesk imports that is not installed: its requirement among
    ffdesk's own when one is named after it (scenedetect: scenedetect-headless==0.7.2)."""
    from importlib import metadata

    top = module.split(".")[0]
    wanted = top.lower().replace("_", "-")
    try:
        requirements = metadata.requires("ffdesk") or []
    except metadata.PackageNotFoundError:  # run from a source folder (PYTHONPATH), not installed
        requirements = []
    named = [r.split(";")[0].strip() for r in requirements if "extra ==" not in r and _applies(r)]
    match = next((r for r in named if r.lower().replace("_", "-").startswith(wanted)), None)
    how = (
        f"pip install '{match}'"
        if match
        else "reinstall ffdesk with its dependencies: pip install ffdesk, or in its source folder "
        "bash scripts/setup.sh"
    )
    return f"the package {top} that ffdesk needs is not installed ({how})"


def _applies(requirement: str) -> bool:
    """Whether a requirement's environment marker holds here (True when it cannot be read)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return True
    try:
        marker = Requirement(requirement).marker
    except ValueError:
        return True
    return marker is None or marker.evaluate()


def _can_show_window() -> bool:
    from ffdesk.commands.gui import display_available

    return display_available()


def _available(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:  # noqa: SLF001 - argparse has no public accessor
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return set(action.choices)
    return set()


if __name__ == "__main__":
    raise SystemExit(main())
