"""Keep credentials off the disk: every byte the run store writes is checked against the environment.

A variable is a credential when its name ends in ``_KEY``, ``_TOKEN`` or ``_SECRET``, or contains
``PASSWORD`` (case-insensitive; ``FIREWORKS_API_KEY``, ``TINKER_API_KEY``, ``HF_TOKEN``, ``OPENAI_API_KEY``,
``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD_FILE``...). Its value is looked for in the *serialised bytes* of a
file, in every form a serialiser can give it: raw UTF-8, JSON-escaped (ASCII and UTF-8, with and without
escaped ``/``), CSV-quoted, Python ``repr``, URL-encoded, Latin-1 and UTF-16. So a key holding ``"``, ``\\`` or non-ASCII characters is
found whether it was written verbatim, by ``json.dumps`` or by pandas.

Minimum length: values shorter than :data:`MIN_SECRET_LENGTH` (8) characters are not checked. Every
provider this project talks to issues keys of 20+ characters, while short values in such variables are
placeholders (``OPENAI_API_KEY=dummy`` is required offline by eval-protocol; ``x``, ``1``, ``none``,
``test``) that occur in ordinary data, so matching them would refuse legitimate writes ("dummy" in a model
name) without protecting anything. A real credential of fewer than 8 characters does not exist here.

Launchers call :func:`assert_no_secrets` on every payload before it touches the disk.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from rftlab.runs.errors import SecretLeakError

MIN_SECRET_LENGTH = 8
CREDENTIAL_NAME_RE = re.compile(r"(_KEY|_TOKEN|_SECRET)$|PASSWORD", re.IGNORECASE)

__all__ = [
    "CREDENTIAL_NAME_RE",
    "MIN_SECRET_LENGTH",
    "SecretLeakError",
    "assert_file_has_no_secrets",
    "assert_no_secrets",
    "credential_values",
    "secret_forms",
]


def credential_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{variable name: value}`` of every credential-looking variable with a value of 8+ characters."""
    env = os.environ if environ is None else environ
    return {
        name: value
        for name, value in env.items()
        if CREDENTIAL_NAME_RE.search(name) and len(value) >= MIN_SECRET_LENGTH
    }


def _url_forms(value: str) -> list[str]:
    forms = []
    for quote in (urllib.parse.quote, urllib.parse.quote_plus):
        for errors in ("surrogateescape", "surrogatepass"):
            try:
                forms.append(quote(value, safe="", errors=errors))
                break
            except UnicodeEncodeError:
                continue
    return forms


def secret_forms(value: str) -> set[bytes]:
    """The byte strings under which ``value`` can appear in a serialised file."""
    texts = {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        *_url_forms(value),
        value.replace('"', '""'),  # CSV quoting
    }
    texts |= {t.replace("/", "\\/") for t in list(texts)}  # pandas and some JSON writers escape '/'
    forms = {t.encode("utf-8", "surrogatepass") for t in texts if t}
    try:
        forms.add(value.encode("utf-8", "surrogateescape"))  # an undecodable byte in the environment
    except UnicodeEncodeError:
        pass
    for encoding in ("latin-1", "utf-16-le"):
        try:
            forms.add(value.encode(encoding))
        except UnicodeEncodeError:
            pass
    return forms


def _needles(environ: Mapping[str, str] | None) -> list[tuple[str, bytes]]:
    return [
        (name, form) for name, value in credential_values(environ).items() for form in secret_forms(value)
    ]


def _refuse(name: str, where: str) -> SecretLeakError:
    return SecretLeakError(
        f"refusing to write {where}: it contains the value of the credential variable ${name}; "
        "credentials stay in the environment (nothing was written)"
    )


def assert_no_secrets(data: bytes | str, where: str, environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`SecretLeakError` (naming the variable, never its value) if ``data`` contains the value
    of a credential environment variable in any serialised form. ``where`` names the destination."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    for name, needle in _needles(environ):
        if needle in data:
            raise _refuse(name, where)


def assert_file_has_no_secrets(
    path: str | Path, where: str | None = None, environ: Mapping[str, str] | None = None, chunk: int = 1 << 20
) -> None:
    """:func:`assert_no_secrets` over a file of any size (read in overlapping chunks)."""
    needles = _needles(environ)
    if not needles:
        return
    overlap = max(len(n) for _, n in needles) - 1
    where = where or str(path)
    tail = b""
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            window = tail + block
            for name, needle in needles:
                if needle in window:
                    raise _refuse(name, where)
            tail = window[-overlap:] if overlap else b""
