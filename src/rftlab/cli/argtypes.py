"""Argument types: the constraint of each single option, declared once as an argparse ``type=``.

Each helper is a callable that argparse gives the option's text. It validates the text with a pydantic
``TypeAdapter`` over an ``Annotated`` type and returns the value. A bad value raises
``argparse.ArgumentTypeError``, which names the constraint and the value. Argparse then prints the
usage line and ``rftlab arena solve: error: argument --seed: must be a non-negative integer, got '-1'``,
and exits 2.

Why argparse and not typer or tyro: the CLI already is argparse, with one ``register(subparsers)`` per
family. ``tests/cli/test_cli_help.py`` walks those parsers. A switch would rewrite every command and
add no check that a ``type=`` cannot make.

Text parses as pydantic parses a string in lax mode. An integer may carry blanks, a sign and ``_``
separators, and ``"7.0"`` is 7. A number is finite: ``nan`` and ``inf`` are refused. A shown value is
cut to 200 characters and scrubbed of credentials (``rftlab.runs.secrets.redact_text``).

Checks that relate two options, or that need a study's spec, stay in the handlers: they are logic.
A bound that lives in a module too slow to import for ``--help`` goes through :func:`deferred`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar
from urllib.parse import urlparse

from pydantic import (
    AfterValidator,
    DirectoryPath,
    Field,
    FilePath,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)

T = TypeVar("T")
SHOWN_CHARS = 200


@dataclass(frozen=True, eq=False)
class ArgType(Generic[T]):
    """An argparse ``type=``: ``annotation`` validates the text, ``constraint`` says what it must be.

    The adapter is built on first use, so ``rftlab --help`` pays for none of them."""

    annotation: Any
    constraint: str

    @cached_property
    def adapter(self) -> TypeAdapter[T]:
        return TypeAdapter(self.annotation)

    def __call__(self, text: str) -> T:
        try:
            return self.adapter.validate_python(text)
        except ValidationError as exc:
            message = f"must be {self.constraint}, got {shown(text)}{_reason(exc)}"
            raise argparse.ArgumentTypeError(message) from None


def _reason(exc: ValidationError) -> str:
    """What a validator of this module said (`` (exists and is not a folder)``), else nothing."""
    error = exc.errors()[0].get("ctx", {}).get("error")
    return f" ({error})" if isinstance(error, ValueError) and str(error) else ""


def shown(text: str) -> str:
    """``text`` as an error message quotes it: cut to 200 characters, credentials replaced by ``***``."""
    from rftlab.runs.secrets import redact_text

    safe = redact_text(text)  # before the cut, which could split a credential and hide it from the scrub
    return repr(safe if len(safe) <= SHOWN_CHARS else safe[: SHOWN_CHARS - 3] + "...")


def _with_note(constraint: str, note: str) -> str:
    return f"{constraint} ({note})" if note else constraint


def integer(ge: int | None = None, le: int | None = None, note: str = "") -> ArgType[int]:
    """An integer with ``ge <= value <= le`` (either bound may be absent)."""
    if ge is not None and le is not None:
        text = f"an integer from {ge} to {le}"
    elif ge == 0:
        text = "a non-negative integer"
    elif ge == 1:
        text = "a positive integer"
    elif ge is not None:
        text = f"an integer >= {ge}"
    elif le is not None:
        text = f"an integer <= {le}"
    else:
        text = "an integer"
    return ArgType(Annotated[int, Field(ge=ge, le=le)], _with_note(text, note))


def _interval(gt: float | None, ge: float | None, lt: float | None, le: float | None) -> str:
    low = f"({gt:g}" if gt is not None else f"[{ge:g}" if ge is not None else None
    high = f"{lt:g})" if lt is not None else f"{le:g}]" if le is not None else None
    if low is not None and high is not None:
        return f" in {low}, {high}"
    if low is not None:
        return f" > {gt:g}" if gt is not None else f" >= {ge:g}"
    if high is not None:
        return f" < {lt:g}" if lt is not None else f" <= {le:g}"
    return ""


def number(
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    unit: str = "",
    note: str = "",
) -> ArgType[float]:
    """A finite number within the given bounds; ``unit`` (``"seconds"``) is named in the message."""
    what = f"a finite number of {unit}" if unit else "a finite number"
    annotation = Annotated[float, Field(gt=gt, ge=ge, lt=lt, le=le, allow_inf_nan=False)]
    return ArgType(annotation, _with_note(what + _interval(gt, ge, lt, le), note))


def _member_of(options: tuple[str, ...]) -> Callable[[str], str]:
    def check(text: str) -> str:
        if text not in options:
            raise ValueError("")
        return text

    return check


def one_of(values: Iterable[str]) -> ArgType[str]:
    """One of ``values``, exactly as written."""
    options = tuple(values)
    return ArgType(
        Annotated[str, AfterValidator(_member_of(options))], f"one of {', '.join(map(repr, options))}"
    )


def _not_blank(text: str) -> str:
    if not text.strip():  # Python's idea of blank, control separators included
        raise ValueError("")
    return text


def nonblank(max_length: int) -> ArgType[str]:
    """A name with a non-blank character and at most ``max_length`` characters."""
    annotation = Annotated[str, StringConstraints(max_length=max_length), AfterValidator(_not_blank)]
    return ArgType(annotation, f"a non-empty name of at most {max_length} characters")


def existing_file(what: str = "file") -> ArgType[Path]:
    """The path of an existing regular file."""
    return ArgType(FilePath, f"an existing {what}")


def existing_dir(note: str = "") -> ArgType[Path]:
    """The path of an existing folder."""
    return ArgType(DirectoryPath, _with_note("an existing folder", note))


def _not_a_file(path: Path) -> Path:
    if path.exists() and not path.is_dir():
        raise ValueError("exists and is not a folder")
    return path


def folder() -> ArgType[Path]:
    """A folder to write into: an existing folder or a path that does not exist yet."""
    return ArgType(Annotated[Path, AfterValidator(_not_a_file)], "a folder or a new path")


def _suffix_in(suffixes: tuple[str, ...]) -> Callable[[str], str]:
    def check(text: str) -> str:
        if Path(text).suffix.lower() not in suffixes:
            raise ValueError("")
        return text

    return check


def file_suffix(suffixes: Iterable[str]) -> ArgType[str]:
    """A file name ending in one of ``suffixes`` (any case): ``.png``, ``.svg`` ..."""
    options = tuple(s.lower() for s in suffixes)
    *first, last = options
    listed = f"{', '.join(first)} or {last}" if first else last
    return ArgType(Annotated[str, AfterValidator(_suffix_in(options))], f"a {listed} file")


def _http(text: str) -> str:
    url = urlparse(text)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValueError("")
    return text


def http_url(example: str) -> ArgType[str]:
    """An ``http://`` or ``https://`` URL with a host (the text is kept as given)."""
    return ArgType(Annotated[str, AfterValidator(_http)], f"an http(s) URL such as {example}")


@dataclass(frozen=True)
class JsonFile:
    """A JSON file given on the command line: its path and the value it holds."""

    path: Path
    value: object


def _read_json(path: Path) -> JsonFile:
    try:
        return JsonFile(path, json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ValueError(str(exc)) from None


def json_file() -> ArgType[JsonFile]:
    """A readable UTF-8 file holding one JSON value (read with ``json.loads``)."""
    return ArgType(Annotated[FilePath, AfterValidator(_read_json)], "a readable JSON file")


def _epoch_chunk(text: str) -> tuple[int, int]:
    epoch, _, chunk = text.partition(":")
    return int(epoch), int(chunk)


def epoch_chunk() -> ArgType[tuple[int, int]]:
    """``K:N`` as ``(K, N)``: two non-negative integers of ASCII digits, 20 characters at most."""
    pattern = StringConstraints(max_length=20, pattern=r"^[0-9]+:[0-9]+$")
    annotation = Annotated[str, pattern, AfterValidator(_epoch_chunk)]
    return ArgType(annotation, "EPOCH:CHUNK, two non-negative integers")


@dataclass(frozen=True, eq=False)
class Deferred(Generic[T]):
    """An argument type built when first called, from a module too slow to import for ``--help``.

    The module is imported only when the option is given, as its handler would import it anyway."""

    build: Callable[[], ArgType[T]]

    @cached_property
    def built(self) -> ArgType[T]:
        return self.build()

    def __call__(self, text: str) -> T:
        return self.built(text)


def deferred(build: Callable[[], ArgType[T]]) -> Deferred[T]:
    """``build()``'s argument type, made when it parses its first value."""
    return Deferred(build)


NON_NEGATIVE_INT = integer(ge=0)
POSITIVE_INT = integer(ge=1)
