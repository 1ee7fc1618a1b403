"""A content-addressed cache for expensive deterministic computations (Monte Carlo design tables).

``cached_json(kind, key, compute)`` returns ``compute()``'s JSON result, stored under
``<run store>/.cache/<kind>/<sha256 of key>.json``; a later call with the same key reads it back instead of
computing. The key must name everything the result depends on: the inputs (a spec's SHA-256, sizes, seeds)
and the code (``rftlab.runs.codehash.closure_digest`` of the module that computes it), so a changed input
or a changed line of the code computing it is a new entry, never a stale read. Implementation settings
(progress output, where the cache lives) are not part of it.

An entry is written atomically and read strictly; one that cannot be read (cut, edited, not JSON, another
key inside) is recomputed and replaced, never trusted. ``RFTLAB_NO_CACHE=1`` turns reading off (entries are
still written), for a check that a cached result equals a fresh one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rftlab.runs.atomic import atomic_write_text
from rftlab.runs.hashing import canonical_json, spec_sha256
from rftlab.runs.paths import runs_root

CACHE_DIR = ".cache"
NO_CACHE_ENV = "RFTLAB_NO_CACHE"


def cache_path(kind: str, key: Mapping[str, Any], root: str | Path | None = None) -> Path:
    if not kind.replace("_", "").isalnum():
        raise ValueError(f"cache kind {kind!r} must be letters, digits and underscores")
    base = Path(root) if root is not None else runs_root()
    return base / CACHE_DIR / kind / f"{spec_sha256(dict(key))}.json"


def _read(path: Path, key: Mapping[str, Any]) -> Any | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != json.loads(canonical_json(dict(key))):
        return None
    return entry.get("value")


def cached_json(
    kind: str,
    key: Mapping[str, Any],
    compute: Callable[[], Any],
    root: str | Path | None = None,
    on_miss: Callable[[], None] | None = None,
) -> tuple[Any, bool]:
    """``(value, hit)``: the cached JSON value of ``key`` when there is a readable entry (and
    ``RFTLAB_NO_CACHE`` is not set), else ``compute()`` (``on_miss`` called first, e.g. to say it will
    take a while), stored for next time. ``value`` is always as JSON gives it back (tuples become lists,
    key order kept), so a hit and a miss return equal values."""
    path = cache_path(kind, key, root)
    if os.environ.get(NO_CACHE_ENV) != "1":
        value = _read(path, key)
        if value is not None:
            return value, True
    if on_miss is not None:
        on_miss()
    # the value keeps its key order (a table's columns), and reads back exactly as it is written
    value = json.loads(json.dumps(compute(), allow_nan=False, ensure_ascii=False))
    payload = {"key": json.loads(canonical_json(dict(key))), "value": value}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(payload, ensure_ascii=False) + "\n")
    return value, False
