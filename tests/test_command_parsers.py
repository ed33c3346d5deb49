"""A command line is parsed by its command's parser alone (the other commands' parsers, hundreds
of options and the modules behind them, are not made at every start), and that parser is the
one the whole command line has: the same options, defaults and subcommands."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from ffdesk import cli


def _command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:  # noqa: SLF001 - argparse has no public accessor
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            found = action.choices[name]
            assert isinstance(found, argparse.ArgumentParser)
            return found
    raise AssertionError(f"no {name}")


def _described(parser: argparse.ArgumentParser) -> list[str]:
    """Every option of `parser` and of its subcommands, with its default and help, in order."""
    lines = [parser.prog, parser.format_help()]
    for action in parser._actions:  # noqa: SLF001
        lines.append(f"{action.option_strings} {action.dest} {action.default!r} {action.nargs!r}")
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                lines.extend(_described(sub))
    return lines


@pytest.fixture(scope="module")
def whole() -> argparse.ArgumentParser:
    return cli.build_parser()


@pytest.mark.parametrize("command", cli.COMMAND_MODULES)
def test_each_commands_parser_alone_is_the_one_of_the_whole_command_line(
    whole: argparse.ArgumentParser, command: str
) -> None:
    alone = cli.parser_for([command, "--help"])
    assert cli._available(alone) == {command}  # noqa: SLF001
    assert _described(_command_parser(alone, command)) == _described(_command_parser(whole, command))


def _imported_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; {code}; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(done.stdout.split())


def test_a_command_line_makes_only_its_commands_parser() -> None:
    modules = _imported_after("from ffdesk.cli import parser_for; parser_for(['probe', 'clip.mp4'])")
    assert "ffdesk.commands.probe" in modules
    assert not {"ffdesk.commands.bench", "ffdesk.commands.train", "ffdesk.commands.live"} & modules
    # --version needs no command at all
    modules = _imported_after("from ffdesk.cli import parser_for; parser_for(['--version'])")
    assert not {f"ffdesk.commands.{c}" for c in cli.COMMAND_MODULES} & modules


def test_version_help_and_a_mistyped_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip().startswith("ffdesk ")
    assert cli.main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert all(c in listed for c in cli.COMMAND_MODULES)
    assert cli.main(["rendr", "-t", "a.mp4"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'rendr'" in err and "'render'" in err and "'live'" in err
