"""Who may use ``rftlab serve tinker``: the accepted API keys (``resolve_keys``, ``KeyCheck``), the
identity each key stands for (``owner_of``), the generated key file and the private storage folder
(``make_private``). The ``server`` module docstring gives the rules.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from rftlab.runs.atomic import atomic_write_bytes

from .serve_config import ServeConfig, ServeError

KEY_FILE = "api_key"
"""The generated key's file in the storage folder (mode 0600), when no key is given."""


def owner_of(key: str) -> str:
    """The identity a key stands for: a one-way digest (never the key), recorded with what it creates."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _check_key(key: str, where: str) -> str:
    if not key.startswith("tml-") or len(key) < 12 or any(c.isspace() for c in key):
        raise ServeError(
            f"{where}: a key must start with 'tml-', be 12 characters or more and hold no spaces"
        )
    return key


class KeyCheck:
    """The accepted keys of the module docstring, each one identity (the keys themselves are held only
    here). ``owner(given)`` is the identity of a sent key, ``None`` for any other."""

    def __init__(self, keys: Sequence[str], source: str) -> None:
        if not keys:
            raise ServeError(f"{source}: no key")
        if len(set(keys)) != len(keys):
            raise ServeError(f"{source}: a key is listed twice")
        self.source = source
        self._keys = [(_check_key(k, source).encode(), owner_of(k)) for k in keys]
        self.primary = self._keys[0][1]

    def owner(self, given: str | None) -> str | None:
        if not given:
            return None
        sent = given.encode()
        found = None
        for key, owner in self._keys:  # every key compared, in constant time
            if hmac.compare_digest(sent, key):
                found = owner
        return found

    def accepts(self, given: str | None) -> bool:
        return self.owner(given) is not None


def _private_file(path: Path, what: str) -> str:
    """The text of ``path``, which only its owner may read (else a ``ServeError`` saying so)."""
    try:
        info = path.stat()
        if info.st_mode & 0o077:
            raise ServeError(f"{what} {path} is readable by others: chmod 600 it")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServeError(f"{what} {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None


def stored_key(storage: Path) -> tuple[str, bool]:
    """``(key, generated)``: the key in ``storage/api_key``, made (random, mode 0600) when absent."""
    path = storage / KEY_FILE
    if path.exists():
        return _check_key(_private_file(path, "the key file").strip(), str(path)), False
    key = "tml-" + secrets.token_urlsafe(32)
    try:  # atomically (a kill never leaves an empty key file), private from its first byte, never via a link
        atomic_write_bytes(
            path, (key + "\n").encode("ascii"), check_secrets=False, mode=0o600, follow_symlinks=False
        )
    except OSError as exc:
        raise ServeError(f"cannot write the key file {path}: {exc.strerror or exc}") from None
    return key, True


def read_keys_file(path: str | os.PathLike[str]) -> list[str]:
    """The keys of a ``--keys-file``: one a line; blank lines and ``#`` comments are skipped."""
    text = _private_file(Path(path), "--keys-file")
    keys = [line.strip() for line in text.splitlines()]
    return [k for k in keys if k and not k.startswith("#")]


def resolve_keys(config: ServeConfig, storage: Path) -> tuple[KeyCheck, bool]:
    """The accepted keys, first found of: ``config.api_keys``, ``--keys-file``, ``$api_key_env``, the
    storage folder's key file (made when absent). Returns ``(keys, generated)``."""
    if config.api_keys:
        return KeyCheck(list(config.api_keys), "api_keys"), False
    if config.keys_file is not None:
        return KeyCheck(read_keys_file(config.keys_file), f"--keys-file {config.keys_file}"), False
    value = os.environ.get(config.api_key_env)
    if value:
        return KeyCheck([value], f"${config.api_key_env}"), False
    key, generated = stored_key(storage)
    return KeyCheck([key], f"the key file {storage / KEY_FILE}"), generated


def make_private(storage: Path) -> None:
    """``storage`` and everything under it: folders 0700, files 0600 (another local user lists nothing)."""
    storage.mkdir(parents=True, exist_ok=True)
    os.chmod(storage, 0o700)
    for folder, dirs, files in os.walk(storage):
        for names, mode in ((dirs, 0o700), (files, 0o600)):
            for name in names:
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    with contextlib.suppress(OSError):
                        os.chmod(path, mode)
    (storage / "tokenizers").mkdir(mode=0o700, exist_ok=True)
