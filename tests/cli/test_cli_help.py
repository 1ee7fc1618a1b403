"""Every option and positional of every ``rftlab`` command has help text, help renders cleanly, and
``rftlab --version`` prints the package version."""

from __future__ import annotations

import argparse

import pytest

import rftlab
from rftlab.cli import build_parser, main


def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """``(command path, parser)`` for the parser and every sub-command under it."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*prefix, name))


PARSERS = list(walk(build_parser()))


def test_the_walk_finds_every_command():
    names = {" ".join(path) for path, _ in PARSERS}
    assert {"runs list", "arena audit", "gs1 decide", "fireworks upload-evaluator", "view"} <= names


@pytest.mark.parametrize(
    ("path", "parser"), PARSERS, ids=lambda x: " ".join(x) if isinstance(x, tuple) else ""
)
def test_every_option_has_help(path, parser):
    missing = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
            missing.append("/".join(action.option_strings) or action.dest)
    assert not missing, f"rftlab {' '.join(path)}: no help for {', '.join(missing)}"


@pytest.mark.parametrize(
    ("path", "parser"), PARSERS, ids=lambda x: " ".join(x) if isinstance(x, tuple) else ""
)
def test_help_renders_without_markup(path, parser):
    text = parser.format_help()
    assert "`" not in text, f"rftlab {' '.join(path)} --help shows raw backticks"


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"rftlab {rftlab.__version__}"
