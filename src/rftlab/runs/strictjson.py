"""Strict JSON: no ``NaN``/``Infinity`` constants (Python's ``json`` accepts them, JSON does not), the
one-line errors a spec or summary file gets when it is missing, unreadable or not JSON, and the one rule
for non-finite numbers in ``--json`` output.

    raw = read_json_file(path, "gate spec", GateSpecError)   # "gate spec <path> does not exist", ...
    json.loads(text, parse_constant=refuse_constant)          # "non-finite number NaN"
    print(json_output(result))                                # every --json: NaN and ±inf become null

**The ``--json`` rule.** Every ``rftlab ... --json`` prints ``json_output(value)``: indented strict JSON in
which a NaN or an infinity is ``null`` (``json_ready``). A reader tells "no value" from a number without
parsing non-standard literals. Tuples become lists, numpy scalars Python numbers, keys strings, and any
other object its ``str``.

**Records keep their encoding.** A gate evaluation recorded in a run folder (GS1's ``gate.json``) has
always written a non-finite observed value as the text ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``
(``nonfinite_as_text``). The study keeps writing it that way, so old records read back and new ones are
the same bytes. That is a storage encoding, never used for ``--json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
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


def _walk(value: Any, nonfinite: Callable[[float], Any]) -> Any:
    """``value`` as plain JSON data, each non-finite float replaced by ``nonfinite(value)``."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if type(value).__module__ == "numpy" and hasattr(value, "item"):  # a numpy scalar (numpy is not imported)
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else nonfinite(value)
    if isinstance(value, dict):
        return {str(k): _walk(v, nonfinite) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, nonfinite) for v in value]
    return value


def json_ready(value: Any) -> Any:
    """``value`` for ``--json`` output: every NaN or infinity becomes ``None`` (JSON ``null``)."""
    return _walk(value, lambda _: None)


def json_plain(value: Any) -> Any:
    """``value`` as plain JSON data with its non-finite floats kept (the caller encodes them)."""
    return _walk(value, lambda x: x)


def _as_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def nonfinite_as_text(value: Any) -> Any:
    """``value`` with every non-finite float written as ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``: the
    encoding of gate records in a run folder (see the module docstring), not of ``--json`` output."""
    return _walk(value, _as_text)


def json_output(value: Any) -> str:
    """The text every ``--json`` prints: ``json_ready(value)``, indented, strict."""
    return json.dumps(json_ready(value), indent=2, allow_nan=False, default=str)
