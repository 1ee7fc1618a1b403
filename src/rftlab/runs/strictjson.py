"""Strict JSON: no ``NaN``/``Infinity`` constants (Python's ``json`` accepts them, JSON does not), and the
one-line errors a spec or summary file gets when it is missing, unreadable or not JSON.

    raw = read_json_file(path, "gate spec", GateSpecError)   # "gate spec <path> does not exist", ...
    json.loads(text, parse_constant=refuse_constant)          # "non-finite number NaN"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def refuse_constant(name: str) -> Any:
    """``parse_constant`` for ``json.loads``: refuse ``NaN``, ``Infinity`` and ``-Infinity``."""
    raise ValueError(f"non-finite number {name}")


def read_json_file(path: str | Path, label: str, error: type[Exception] = ValueError) -> Any:
    """The JSON value in ``path`` (UTF-8, strict); ``error`` with one line naming ``label`` and the path when
    the file is missing, cannot be read, or is not JSON (a non-finite constant, absurd nesting)."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse_constant)
    except FileNotFoundError:
        raise error(f"{label} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {label} {path}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise error(f"{label} {path} is not JSON: {exc}") from None
