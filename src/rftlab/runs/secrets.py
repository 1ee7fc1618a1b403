"""Keep credentials off the disk and off the terminal: every byte the project writes, and every error text
it prints, is checked against the environment.

A variable is a credential when its name ends in ``_KEY``, ``_TOKEN`` or ``_SECRET``, or contains
``PASSWORD`` (case-insensitive; ``FIREWORKS_API_KEY``, ``TINKER_API_KEY``, ``HF_TOKEN``, ``OPENAI_API_KEY``,
``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD_FILE``...). Its value is looked for in every form a serialiser, a
logger or a transport can give it (:func:`secret_forms`):

- raw UTF-8, Latin-1 and UTF-16;
- JSON-escaped (ASCII and UTF-8, with and without escaped ``/``), **double-escaped** (a JSON string
  holding JSON, as in a job description quoted inside an error body) and triple-escaped (that error text
  inside a JSON record such as ``provider/firectl_calls.jsonl``);
- Python ``repr`` of the text and of its bytes, also of each JSON-escaped form (a JSON error body
  printed inside a Python ``str`` of a dict); CSV-quoted;
- the shortened forms tools print as "safe": eval-protocol's ``********`` followed by the last 4
  characters, and the first 6 and last 4 characters joined by ``...`` or ``…``;
- URL-encoded (``quote``, ``quote_plus``, ``/`` kept or escaped, upper- or lower-case hex);
- **base64** (standard and URL-safe alphabets) of the value and of its JSON-escaped form, at all three
  alignments: inside a longer base64 text the value starts at byte offset 0, 1 or 2 modulo 3, and each
  alignment gives different characters. The form kept is the run of whole 4-character groups that
  depends only on the value's bytes, so it is found whatever surrounds it.

:func:`assert_no_secrets` (and :func:`assert_file_has_no_secrets`) refuse a write holding any form;
:func:`redact_text` replaces every form in a text by ``***`` before it is printed (firectl, eval-protocol
and endpoint error text, every ``rftlab: error:`` line). A password in a URL's user-info
(``https://user:pw@host``) is masked by :func:`redact_text` and :func:`redact_url` too, and
:func:`url_credential_problem` says why a URL must not be recorded at all.

Minimum length: values shorter than :data:`MIN_SECRET_LENGTH` (8) characters are not checked. Every
provider this project talks to issues keys of 20+ characters, while short values in such variables are
placeholders (``OPENAI_API_KEY=dummy`` is required offline by eval-protocol; ``x``, ``1``, ``none``,
``test``) that occur in ordinary data, so matching them would refuse legitimate writes ("dummy" in a model
name) without protecting anything. A real credential of fewer than 8 characters does not exist here.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path

from rftlab.runs.errors import SecretLeakError

MIN_SECRET_LENGTH = 8
MIN_BASE64_FORM = 8  # shorter base64 runs would mask ordinary words
JSON_DEPTH = 3  # escaped once, twice (JSON in a JSON string) and three times (that, inside a JSONL record)
MASK = "***"
CREDENTIAL_NAME_RE = re.compile(r"(_KEY|_TOKEN|_SECRET)$|PASSWORD", re.IGNORECASE)
_B64_CHARS = "A-Za-z0-9+/_-"
_URL_USERINFO_RE = re.compile(
    r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,30}://)(?P<user>[^/\s:@]{0,256}):(?P<pw>[^/\s@]{1,1024})@"
)
_CREDENTIAL_PARAM_RE = re.compile(r"key|token|secret|password|auth|signature", re.IGNORECASE)

__all__ = [
    "CREDENTIAL_NAME_RE",
    "MASK",
    "MIN_SECRET_LENGTH",
    "SecretLeakError",
    "assert_file_has_no_secrets",
    "assert_no_secrets",
    "credential_values",
    "redact_text",
    "redact_url",
    "secret_forms",
    "url_credential_problem",
]


def credential_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{variable name: value}`` of every credential-looking variable with a value of 8+ characters."""
    env = os.environ if environ is None else environ
    return {
        name: value
        for name, value in env.items()
        if CREDENTIAL_NAME_RE.search(name) and len(value) >= MIN_SECRET_LENGTH
    }


# -- the forms ---------------------------------------------------------------------------------------
def _url_forms(value: str) -> set[str]:
    forms = set()
    for quote in (urllib.parse.quote, urllib.parse.quote_plus):
        for safe in ("", "/"):
            for errors in ("surrogateescape", "surrogatepass"):
                try:
                    text = quote(value, safe=safe, errors=errors)
                except UnicodeEncodeError:
                    continue
                forms |= {text, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)}
                break
    return forms


def _json_escaped(text: str) -> set[str]:
    return {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}


def _utf8(text: str) -> bytes | None:
    try:
        return text.encode("utf-8", "surrogatepass")
    except UnicodeEncodeError:
        return None


def _base64_runs(data: bytes) -> set[str]:
    """The base64 text of ``data`` at each of the three alignments (only whole 4-character groups that
    depend on ``data`` alone), in the standard and URL-safe alphabets."""
    runs = set()
    for skip in (0, 1, 2):
        chunk = data[skip:]
        chunk = chunk[: len(chunk) // 3 * 3]
        text = base64.b64encode(chunk).decode("ascii")
        if len(text) >= MIN_BASE64_FORM:
            runs |= {text, text.replace("+", "-").replace("/", "_")}
    return runs


def _repr_forms(text: str) -> set[str]:
    """``text`` inside a Python ``repr`` of the string and of its UTF-8 bytes (quotes dropped)."""
    cores = [repr(text)[1:-1]]
    raw = _utf8(text)
    if raw is not None:
        cores.append(repr(raw)[2:-1])
    # repr quotes with ' unless the text holds ' and no ": inside a longer repr, quoted with ', each '
    # of the text is escaped
    return {*cores, *(c.replace("'", "\\'") for c in cores if "\\'" not in c)}


def _partial_forms(value: str) -> set[str]:
    """The shortened forms tools print "safely": eval-protocol's ``'********' + key[-4:]``
    (``platform_api``), and the first 6 and last 4 characters joined by an ellipsis."""
    if len(value) < MIN_SECRET_LENGTH:
        return set()
    head, tail = value[:6], value[-4:]
    return {"*" * 8 + tail, f"{head}...{tail}", f"{head}\u2026{tail}"}


@functools.lru_cache(maxsize=256)
def _text_forms(value: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(textual forms, base64 forms)`` of ``value``."""
    texts = {value, value.replace('"', '""'), *_url_forms(value), *_partial_forms(value)}
    texts |= _repr_forms(value)
    layer = set(texts)
    for depth in range(JSON_DEPTH):  # JSON inside JSON inside JSON (an error body quoted in a log record)
        layer = {e for t in layer for e in _json_escaped(t)}
        if depth == 0:  # a JSON body printed inside a Python repr (then, maybe, in JSON again)
            layer |= {r for t in layer for r in _repr_forms(t)}
        texts |= layer
    texts |= {t.replace("/", "\\/") for t in list(texts)}  # pandas and some JSON writers escape '/'
    b64: set[str] = set()
    for source in {value, *_json_escaped(value)}:
        data = _utf8(source)
        if data is not None:
            b64 |= _base64_runs(data)
    return frozenset(t for t in texts if t), frozenset(b64)


def secret_forms(value: str) -> set[bytes]:
    """The byte strings under which ``value`` can appear in a serialised file (module docstring)."""
    texts, b64 = _text_forms(value)
    forms = {data for t in texts if (data := _utf8(t))}
    forms |= {t.encode("ascii") for t in b64}
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


# -- the write-time check ----------------------------------------------------------------------------
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


# -- terminal text -----------------------------------------------------------------------------------
def redact_url(url: str) -> str:
    """``url`` with the password of its user-info (``scheme://user:pw@host``) replaced by ``***``."""
    if "://" not in url or "@" not in url:
        return url
    return _URL_USERINFO_RE.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", url)


def _redact_value(text: str, value: str) -> str:
    texts, b64 = _text_forms(value)
    for form in sorted(texts, key=len, reverse=True):
        if form in text:
            text = text.replace(form, MASK)
    for form in b64:
        if form in text:
            # widen to the neighbouring base64 characters: no partial group of the key survives
            text = re.sub(f"[{_B64_CHARS}]{{0,3}}{re.escape(form)}[{_B64_CHARS}]{{0,3}}=*", MASK, text)
    return text


def redact_text(
    text: str, secrets: Iterable[str | None] = (), environ: Mapping[str, str] | None = None
) -> str:
    """``text`` with every form (module docstring) of every credential variable's value and of each
    explicit ``secrets`` value (4+ characters) replaced by ``***``, and URL passwords masked."""
    values = set(credential_values(environ).values())
    values |= {s for s in secrets if s and len(s) >= 4}
    for value in sorted(values, key=len, reverse=True):
        text = _redact_value(text, value)
    return redact_url(text)


def url_credential_problem(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Why ``url`` carries a credential (a user-info password, a query parameter named like a key, or the
    value of a credential variable), or ``None``. Callers refuse such a URL before it can be recorded."""
    if _URL_USERINFO_RE.search(url):
        return "it holds a password in its user-info (scheme://user:password@host)"
    try:
        query = urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query, keep_blank_values=True)
    except ValueError:
        query = []
    for name, _value in query:
        if _CREDENTIAL_PARAM_RE.search(name):
            return f"its query parameter {name!r} looks like a credential"
    for name, value in credential_values(environ).items():
        if _redact_value(url, value) != url:
            return f"it contains the value of the credential variable ${name}"
    return None
