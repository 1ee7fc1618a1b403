"""Loading per-item evaluation files and per-epoch metric files for the statistics layer.

A per-item file (``eval.jsonl``) holds one JSON object per line with an ``item_id`` and either
``correct`` (0/1 or true/false) or ``score`` (a number in [0, 1]); ``correct`` wins when both are
present. Two such files are *paired* by ``item_id``: the item is the replication unit of every
noninferiority bound, so a missing or duplicated item is an error, never silently dropped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard, TypeVar

import numpy as np


class AnalysisInputError(ValueError):
    """Bad input to the analysis layer (unreadable file, malformed line, unpaired items, ...).

    The only exception the readers of this module raise on bad files, whatever their bytes.
    """


def _open_error(path: Path, exc: OSError) -> AnalysisInputError:
    if isinstance(exc, FileNotFoundError):
        return AnalysisInputError(f"{path}: file not found")
    if isinstance(exc, IsADirectoryError):
        return AnalysisInputError(f"{path}: is a folder, not a file")
    if isinstance(exc, PermissionError):
        return AnalysisInputError(f"{path}: permission denied (make the file readable)")
    return AnalysisInputError(f"{path}: cannot read ({exc.strerror or exc})")


def _decode_line(path: Path, line_number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AnalysisInputError(
            f"{path} line {line_number}: byte {raw[exc.start]:#04x} at column {exc.start + 1} is not "
            "UTF-8 (save the file as UTF-8)"
        ) from None


def _loads(text: str, where: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AnalysisInputError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") from None
    except RecursionError:
        raise AnalysisInputError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's digit limit
        raise AnalysisInputError(f"{where}: not valid JSON ({exc})") from None


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line; a bad line names its number.

    Missing, unreadable (permissions), directory, non-UTF-8 and malformed input all raise
    ``AnalysisInputError`` naming the file (and the line when there is one).
    """
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise _open_error(path, exc) from None
    with handle:
        line_number = 0
        while True:
            try:
                raw = handle.readline()
            except OSError as exc:
                raise _open_error(path, exc) from None
            if not raw:
                return
            line_number += 1
            line = _decode_line(path, line_number, raw)
            if not line.strip():
                continue
            obj = _loads(line, f"{path} line {line_number}")
            if not isinstance(obj, dict):
                raise AnalysisInputError(
                    f"{path} line {line_number}: expected a JSON object, got {type(obj).__name__}"
                )
            yield line_number, obj


MAX_INT_DIGITS = 4300  # Python's default limit on integer-string conversion


@dataclass(frozen=True)
class _HugeInt:
    """An integer literal too long to convert, kept so that the field holding it can be named."""

    digits: int


def _parse_int(text: str) -> int | _HugeInt:
    digits = len(text.lstrip("-"))
    return _HugeInt(digits) if digits > MAX_INT_DIGITS else int(text)


def _is_huge(value: object) -> TypeGuard[_HugeInt]:
    return isinstance(value, _HugeInt)


_Found = TypeVar("_Found")


def _find(
    value: object, bad: Callable[[object], TypeGuard[_Found]], where: str = ""
) -> tuple[str, _Found] | None:
    """``(dotted path, value)`` (``eval.n_examples``, ``arms[1].name``) of the first value or key that
    ``bad`` accepts, depth first; ``None`` when there is none."""
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{where}.{key}" if where else str(key)
            if bad(key):
                return here, key
            if (found := _find(item, bad, here)) is not None:
                return found
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            if (found := _find(item, bad, f"{where}[{i}]")) is not None:
                return found
        return None
    return (where or "the top-level value", value) if bad(value) else None


def _undecodable(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and any("\udc80" <= ch <= "\udcff" for ch in value)


def _decode_json_text(raw: bytes, path: Path, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        where = f"{what} {path} line {line}"
        try:  # inside a string, the bytes decode as lone surrogates: name the field that holds them
            found = _find(
                json.loads(raw.decode("utf-8", "surrogateescape"), parse_int=_parse_int), _undecodable
            )
        except (ValueError, RecursionError):
            found = None
        where += f", field {found[0]}" if found else ""
        raise AnalysisInputError(
            f"{where}: byte {raw[exc.start]:#04x} is not UTF-8 (save the file as UTF-8)"
        ) from None


def read_json_file(path: str | Path, what: str = "file") -> object:
    """Parse one JSON document; every failure is an ``AnalysisInputError`` naming ``what`` and the file
    (and, for a non-UTF-8 string or an integer of more than ``MAX_INT_DIGITS`` digits, the field).

    ``NaN``/``Infinity`` literals are parsed (as Python floats) so that validation can name the field
    that holds them; callers decide whether a non-finite value is a bad spec or a failing value.
    """
    path = Path(path)
    return parse_json_bytes(read_file_bytes(path, what), path, what)


def read_file_bytes(path: Path, what: str = "file") -> bytes:
    """The bytes of ``path``; an ``AnalysisInputError`` naming ``what`` and the file when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        error = _open_error(path, exc)
        raise AnalysisInputError(f"{what} {error}") from None


def parse_json_bytes(raw: bytes, path: Path, what: str = "file") -> object:
    """``read_json_file`` on bytes already read from ``path`` (so a caller can hash the same bytes)."""
    text = _decode_json_text(raw, path, what)
    try:
        value = json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise AnalysisInputError(f"{what} {path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise AnalysisInputError(f"{what} {path}: JSON nested too deeply") from None
    except ValueError as exc:
        raise AnalysisInputError(f"{what} {path}: not valid JSON ({exc})") from None
    try:
        huge = _find(value, _is_huge)
    except RecursionError:
        raise AnalysisInputError(f"{what} {path}: JSON nested too deeply") from None
    if huge is not None:
        raise AnalysisInputError(
            f"{what} {path}: field {huge[0]} is an integer of {huge[1].digits} digits (at most {MAX_INT_DIGITS})"
        )
    return value


def _is_number(value: object) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def _short(value: object, limit: int = 60) -> str:
    """``repr`` of a value, cut to ``limit`` characters (a huge integer's repr would itself fail)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "<a huge integer>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _item_value(path: Path, line_number: int, obj: dict, field: str | None) -> float:
    if field is not None:
        if field not in obj:
            raise AnalysisInputError(f"{path} line {line_number}: no {field!r} field")
        value = obj[field]
        if isinstance(value, bool):
            return float(value)
        if not _is_number(value):
            raise AnalysisInputError(
                f"{path} line {line_number}: {field}={_short(value)} is not a finite number"
            )
        return float(value)
    if "correct" in obj:
        value = obj["correct"]
        if isinstance(value, bool) or (_is_number(value) and value in (0, 1)):
            return float(value)
        raise AnalysisInputError(
            f"{path} line {line_number}: correct={_short(value)} must be 0 or 1 (use 'score' for partial credit)"
        )
    if "score" in obj:
        value = obj["score"]
        if not _is_number(value):
            raise AnalysisInputError(
                f"{path} line {line_number}: score={_short(value)} is not a finite number"
            )
        return float(value)
    raise AnalysisInputError(f"{path} line {line_number}: needs a 'correct' (0/1) or 'score' ([0, 1]) field")


def load_item_outcomes(
    path: str | Path, bounds: tuple[float, float] = (0.0, 1.0), field: str | None = None
) -> dict[str, float]:
    """Per-item outcomes of one arm, keyed by ``str(item_id)``.

    ``field`` selects the value column; by default ``correct`` then ``score``. Values outside the
    declared ``bounds`` are an error naming the line, because every finite-sample bound relies on them.
    """
    path = Path(path)
    low, high = bounds
    outcomes: dict[str, float] = {}
    duplicates: list[str] = []
    for line_number, obj in iter_jsonl(path):
        if "item_id" not in obj:
            raise AnalysisInputError(f"{path} line {line_number}: no 'item_id' field")
        raw_id = obj["item_id"]
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
            raise AnalysisInputError(
                f"{path} line {line_number}: item_id={_short(raw_id)} must be a string or an integer"
            )
        item_id = str(raw_id)
        value = _item_value(path, line_number, obj, field)
        if not low <= value <= high:
            raise AnalysisInputError(
                f"{path} line {line_number}: item {item_id!r} has value {value} outside the declared "
                f"bounds [{low}, {high}]"
            )
        if item_id in outcomes:
            duplicates.append(item_id)
        outcomes[item_id] = value
    if not outcomes:
        raise AnalysisInputError(f"{path}: file is empty (no per-item records)")
    if duplicates:
        shown = ", ".join(repr(i) for i in sorted(set(duplicates))[:10])
        raise AnalysisInputError(f"{path}: duplicated item_id(s) {shown} ({len(duplicates)} duplicate rows)")
    return outcomes


def item_sort_key(item_id: str) -> tuple[int, int | str]:
    """Sort numeric item ids numerically, then other ids as strings."""
    try:
        return (0, int(item_id))
    except ValueError:
        return (1, item_id)


@dataclass(frozen=True)
class PairedItems:
    """Two arms' outcomes on the same items, aligned by ``item_id`` (sorted; numeric ids numerically)."""

    item_ids: tuple[str, ...]
    treatment: np.ndarray
    baseline: np.ndarray

    @property
    def n(self) -> int:
        return len(self.item_ids)

    @property
    def differences(self) -> np.ndarray:
        """Per-item difference ``d_i = y_i^B - y_i^A`` (treatment minus baseline)."""
        return self.treatment - self.baseline

    @property
    def is_binary(self) -> bool:
        """True when both arms are 0/1 correctness (the case the Tango score test covers)."""
        both = np.concatenate([self.treatment, self.baseline])
        return bool(np.all((both == 0) | (both == 1)))


def pair_outcomes(
    treatment: dict[str, float],
    baseline: dict[str, float],
    treatment_name: str = "treatment",
    baseline_name: str = "baseline",
) -> PairedItems:
    """Join two arms by item id; items present in only one arm are an error naming them."""
    only_treatment = sorted(set(treatment) - set(baseline), key=item_sort_key)
    only_baseline = sorted(set(baseline) - set(treatment), key=item_sort_key)
    if only_treatment or only_baseline:
        parts = []
        for name, missing in ((treatment_name, only_treatment), (baseline_name, only_baseline)):
            if missing:
                shown = ", ".join(repr(i) for i in missing[:10])
                more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
                parts.append(f"{len(missing)} item(s) only in {name}: {shown}{more}")
        raise AnalysisInputError("items are not paired: " + "; ".join(parts))
    ids = tuple(sorted(treatment, key=item_sort_key))
    return PairedItems(
        item_ids=ids,
        treatment=np.array([treatment[i] for i in ids], dtype=float),
        baseline=np.array([baseline[i] for i in ids], dtype=float),
    )


def load_paired_items(
    treatment_path: str | Path,
    baseline_path: str | Path,
    bounds: tuple[float, float] = (0.0, 1.0),
    field: str | None = None,
) -> PairedItems:
    """Load two per-item files and join them by ``item_id``."""
    return pair_outcomes(
        load_item_outcomes(treatment_path, bounds, field),
        load_item_outcomes(baseline_path, bounds, field),
        treatment_name=str(treatment_path),
        baseline_name=str(baseline_path),
    )


def load_metric_series(
    path: str | Path, metric: str, x: str | None = None
) -> tuple[np.ndarray, np.ndarray, str, int]:
    """One metric of a ``metrics.jsonl`` as an (x, y) series, one point per distinct x.

    ``x`` defaults to ``epoch`` when the rows carry it, else ``step``. Rows without the metric (or with
    ``null``) are skipped; several rows at the same x (per-step logs inside an epoch) are averaged so the
    replication unit stays the epoch/step point. Returns ``(x, y, x_name, n_rows_used)``.
    """
    path = Path(path)
    rows = [(line_number, obj) for line_number, obj in iter_jsonl(path)]
    if not rows:
        raise AnalysisInputError(f"{path}: file is empty (no metric rows)")
    if x is None:
        x = "epoch" if any("epoch" in obj for _, obj in rows) else "step"
    points: dict[float, list[float]] = {}
    for line_number, obj in rows:
        value = obj.get(metric)
        if value is None:
            continue
        if not _is_number(value) and not isinstance(value, bool):
            raise AnalysisInputError(
                f"{path} line {line_number}: {metric}={_short(value)} is not a finite number"
            )
        if x not in obj or not _is_number(obj[x]):
            raise AnalysisInputError(f"{path} line {line_number}: has {metric!r} but no numeric {x!r}")
        points.setdefault(float(obj[x]), []).append(float(value))
    if not points:
        known = sorted({k for _, obj in rows for k in obj})
        shown = ", ".join(repr(k) for k in known[:20]) + (", ..." if len(known) > 20 else "")
        raise AnalysisInputError(f"{path}: no row has metric {metric!r} (fields seen: {shown})")
    xs = np.array(sorted(points), dtype=float)
    ys = np.array([float(np.mean(points[v])) for v in xs], dtype=float)
    return xs, ys, x, sum(len(v) for v in points.values())


def validation_message(exc: Exception, limit: int = 3) -> str:
    """One line for a ``pydantic.ValidationError`` (``field.path: message; ...``, the first ``limit``
    errors), else ``str(exc)``."""
    from pydantic import ValidationError  # here, not at the top: reading JSON does not load pydantic

    if not isinstance(exc, ValidationError):
        return " ".join(str(exc).split())
    errors = exc.errors()
    parts = []
    for error in errors[:limit]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    more = len(errors) - limit
    text = "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
    return " ".join(text.split())  # field names from the input may hold newlines: keep it one line
