"""The ``rftlab`` command line.

Each command family lives in its own module of this package and exposes ``register(subparsers)``,
which adds its sub-commands; a sub-command stores its handler as ``func`` (returning an exit code).

Errors: a handler raises :class:`UsageError` for bad input (``rftlab: error: ...``, exit 2). As a backstop,
``main`` turns the run store's refusals (a damaged run, an unwritable output, a credential about to be
written), unreadable files (``OSError``) and undecodable bytes (``UnicodeDecodeError``) into the same
one-line message and exit 2, naming the file, instead of a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

# Command modules, in the order they appear in ``rftlab --help``.
COMMAND_MODULES: list[str] = [
    "runs",
    "spectrum",
    "stats",
    "gates",
    "arena",
    "endpoint",
    "arm",
    "gs1",
    "fireworks",
    "poker",
    "serve",
    "view",
    "plan",
]
ROOT_HELP = "run store root (default: the project's runs/ folder, or $RFTLAB_RUNS_ROOT when set)"


class UsageError(Exception):
    """Bad input from the user: printed as ``rftlab: error: ...`` with exit code 2."""


def print_json(value: Any) -> None:
    """Print ``value`` as ``--json`` output: indented strict JSON, a NaN or an infinity as ``null``
    (``rftlab.runs.strictjson.json_output``, the one rule of every ``--json``)."""
    from rftlab.runs.strictjson import json_output

    print(json_output(value))


def add_root_argument(parser: argparse.ArgumentParser) -> None:
    """``--root``: the run store. Left unset it means ``rftlab.runs.paths.runs_root()`` (resolved in
    ``main``), so every command finds the project's store from any working directory."""
    parser.add_argument("--root", default=None, help=ROOT_HELP)


def build_parser() -> argparse.ArgumentParser:
    from rftlab import __version__

    parser = argparse.ArgumentParser(
        prog="rftlab",
        description="Reinforcement fine-tuning research tools: environments, run store, statistics, gates.",
    )
    parser.add_argument("--version", action="version", version=f"rftlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"rftlab.cli.{name}").register(subparsers)
    return parser


def _os_error_message(exc: OSError) -> str:
    """A file error names the file; any other ``OSError`` (a library's "cannot load X" or a network
    failure) keeps its own message, whole."""
    if exc.filename is None:
        text = " ".join(str(exc).split()) or exc.__class__.__name__
        return f"{exc.__class__.__name__}: {text}"
    reason = exc.strerror or exc.__class__.__name__
    other = f" -> {exc.filename2}" if getattr(exc, "filename2", None) else ""
    return f"{exc.filename}{other}: {reason}; check the path and its permissions"


def _error(message: str) -> int:
    """One ``rftlab: error:`` line, scrubbed of every encoded form of every credential in the
    environment (a backstop: firectl, eval-protocol and endpoint text is redacted where it is read)."""
    from rftlab.runs.secrets import redact_text

    print(f"rftlab: error: {redact_text(message)}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from rftlab.runs.errors import RunStoreError
    from rftlab.runs.paths import runs_root

    if hasattr(args, "root") and args.root is None:
        args.root = str(runs_root())

    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        return _error(str(exc))
    except BrokenPipeError:  # e.g. `rftlab ... | head`
        # Keep the interpreter's final flush of stdout from raising again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except RunStoreError as exc:
        return _error(str(exc))
    except UnicodeEncodeError:
        return _error(
            "some text could not be printed in this terminal's encoding; set PYTHONIOENCODING=utf-8"
        )
    except UnicodeDecodeError as exc:
        return _error(
            f"an input file is not UTF-8 text (byte {exc.start + 1}: {exc.object[exc.start : exc.start + 1]!r}); "
            "convert it to UTF-8"
        )
    except OSError as exc:
        return _error(_os_error_message(exc))
    except RecursionError:
        return _error("an input is nested too deeply to be read; check the file")
    except KeyboardInterrupt:
        print("rftlab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
