"""Canonical JSON and SHA-256 hashing of specs and input files.

A spec's identity is the SHA-256 of its canonical JSON: keys sorted, no insignificant whitespace, UTF-8,
non-finite floats refused. Two specs that serialise to the same canonical JSON are the same spec.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any


def to_jsonable(spec: Any) -> Any:
    """Turn a pydantic model, a dataclass or plain JSON data into plain JSON data."""
    if hasattr(spec, "model_dump"):  # pydantic v2
        return spec.model_dump(mode="json")
    if dataclasses.is_dataclass(spec) and not isinstance(spec, type):
        return dataclasses.asdict(spec)
    return spec


def canonical_json(spec: Any) -> str:
    """The canonical JSON text of ``spec`` (sorted keys, compact separators, ``allow_nan=False``)."""
    return json.dumps(
        to_jsonable(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def spec_sha256(spec: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``spec``."""
    return hashlib.sha256(canonical_json(spec).encode("utf-8")).hexdigest()


def file_sha256(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """SHA-256 (hex) of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()
