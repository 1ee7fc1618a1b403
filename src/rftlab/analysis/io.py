"""Loading per-item evaluation files and per-epoch metric files for the statistics layer.

A per-item file (``eval.jsonl``) holds one JSON object per line with an ``item_id`` and either
``correct`` (0/1 or true/false) or ``score`` (a number in [0, 1]); ``correct`` wins when both are
present. Two such files are *paired* by ``item_id``: the item is the replication unit of every
noninferiority bound, so a missing or duplicated item is an error, never silently dropped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class AnalysisInputError(ValueError):
    """Bad input to the analysis layer (unreadable file, malformed line, unpaired items, ...)."""


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line; a malformed line names its number."""
    path = Path(path)
    if not path.is_file():
        raise AnalysisInputError(f"{path}: file not found")
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise AnalysisInputError(f"{path} line {line_number}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise AnalysisInputError(
                    f"{path} line {line_number}: expected a JSON object, got {obj!r:.60}"
                )
            yield line_number, obj


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _item_value(path: Path, line_number: int, obj: dict, field: str | None) -> float:
    if field is not None:
        if field not in obj:
            raise AnalysisInputError(f"{path} line {line_number}: no {field!r} field")
        value = obj[field]
        if isinstance(value, bool):
            return float(value)
        if not _is_number(value):
            raise AnalysisInputError(f"{path} line {line_number}: {field}={value!r} is not a finite number")
        return float(value)
    if "correct" in obj:
        value = obj["correct"]
        if isinstance(value, bool) or value in (0, 1):
            return float(value)
        raise AnalysisInputError(
            f"{path} line {line_number}: correct={value!r} must be 0 or 1 (use 'score' for partial credit)"
        )
    if "score" in obj:
        value = obj["score"]
        if not _is_number(value):
            raise AnalysisInputError(f"{path} line {line_number}: score={value!r} is not a finite number")
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
        item_id = str(obj["item_id"])
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
            raise AnalysisInputError(f"{path} line {line_number}: {metric}={value!r} is not a finite number")
        if x not in obj or not _is_number(obj[x]):
            raise AnalysisInputError(f"{path} line {line_number}: has {metric!r} but no numeric {x!r}")
        points.setdefault(float(obj[x]), []).append(float(value))
    if not points:
        known = sorted({k for _, obj in rows for k in obj})
        raise AnalysisInputError(f"{path}: no row has metric {metric!r} (fields seen: {', '.join(known)})")
    xs = np.array(sorted(points), dtype=float)
    ys = np.array([float(np.mean(points[v])) for v in xs], dtype=float)
    return xs, ys, x, sum(len(v) for v in points.values())
