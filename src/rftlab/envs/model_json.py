"""Decoding JSON written by a model, shared by the envs' parsers.

``load_model_json(text)`` is ``json.loads`` that refuses what ``json.loads`` lets through silently or
crashes on: an object with a repeated key (ambiguous: which value did the model mean? ``json.loads``
keeps the last), and nesting too deep to decode (``RecursionError``). Both raise ``ValueError`` with a
short reason, like any other invalid JSON, so a parser has one error type to handle.
"""

from __future__ import annotations

import json
from typing import Any


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(f"duplicate key {key!r}")
            seen.add(key)
    return out


def duplicate_keys(text: str | bytes) -> tuple[str, ...]:
    """The object keys that repeat within one object of ``text`` (valid JSON), in order of repetition.
    For parsers whose spec keeps ``json``'s last-wins rule but must not let it pass silently."""
    found: list[str] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                found.append(key)
            seen.add(key)
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return tuple(found)


def load_model_json(text: str | bytes) -> Any:
    """``json.loads(text)``; ``ValueError`` for invalid JSON, a repeated object key or too-deep nesting."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise ValueError(f"JSON has a {exc}") from None
    except RecursionError:
        raise ValueError("JSON is nested too deeply") from None
