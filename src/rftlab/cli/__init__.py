"""The ``rftlab`` command line.

Each command family lives in its own module of this package and exposes ``register(subparsers)``,
which adds its sub-commands; a sub-command stores its handler as ``func`` (returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Command modules, in the order they appear in ``rftlab --help``.
COMMAND_MODULES: list[str] = ["runs", "spectrum", "stats", "gates", "arena", "fireworks", "poker"]


class UsageError(Exception):
    """Bad input from the user: printed as ``rftlab: error: ...`` with exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rftlab",
        description="Reinforcement fine-tuning research tools: environments, run store, statistics, gates.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"rftlab.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"rftlab: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `rftlab ... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
