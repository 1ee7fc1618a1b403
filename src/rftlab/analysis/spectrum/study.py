"""Summaries of the spectrum-memory study's runs (the numbers ``notebooks/02_memory.py`` shows).

The replication unit of a training curve is the epoch (``docs/statistics.md`` §1): per-epoch means are
the points of a trend; inside an epoch the band (row) is the unit, so per-epoch standard errors are taken
over the rows' group means. ``compare_epochs`` reproduces the seed's epoch-0 vs final-epoch comparison
on per-rollout values (Welch t and Mann–Whitney U) and repeats it on per-row means, the unit that is
actually independent (the candidates of a row share a band).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats as sps


def carry_of(record: Mapping[str, Any]) -> float | None:
    """A rollout's carry-rate: the env's (echo arms), else the policy's carry of its notepad list."""
    value = record.get("carry_rate")
    if value is None:
        value = record.get("memory_carry_rate")
    return None if value is None else float(value)


def _value(record: Mapping[str, Any], metric: str) -> float | None:
    if metric == "carry":
        return carry_of(record)
    v = record.get(metric)
    return None if v is None else float(v)


def row_means(records: Sequence[Mapping[str, Any]], metric: str) -> np.ndarray:
    """Per-row (band) means of ``metric`` over the row's candidates, rows with no defined value skipped."""
    groups: dict[Any, list[float]] = {}
    for r in records:
        v = _value(r, metric)
        if v is not None:
            groups.setdefault(r["row_id"], []).append(v)
    return np.array([np.mean(v) for v in groups.values()], dtype=np.float64)


def epoch_point(records: Sequence[Mapping[str, Any]], metric: str) -> tuple[float, float]:
    """``(mean, s.e.)`` of an epoch's metric; the s.e. is over row means."""
    m = row_means(records, metric)
    if m.size == 0:
        return float("nan"), float("nan")
    se = float(m.std(ddof=1) / np.sqrt(m.size)) if m.size > 1 else float("nan")
    return float(m.mean()), se


def epoch_series(rollouts_by_epoch: Sequence[Sequence[Mapping[str, Any]]], metrics: Sequence[str]) -> dict:
    """``{metric: {"mean": [...], "se": [...]}}`` over epochs (0, 1, ...)."""
    out: dict[str, dict[str, list[float]]] = {}
    for metric in metrics:
        points = [epoch_point(recs, metric) for recs in rollouts_by_epoch]
        out[metric] = {"mean": [p[0] for p in points], "se": [p[1] for p in points]}
    return out


def residual_sd(values: Sequence[float]) -> float:
    """Standard deviation of a per-epoch series around its OLS line (ddof = 2)."""
    y = np.asarray(values, dtype=np.float64)
    x = np.arange(y.size, dtype=np.float64)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    return float(np.sqrt(np.sum(resid**2) / (y.size - 2)))


def compare_epochs(
    first: Sequence[Mapping[str, Any]], last: Sequence[Mapping[str, Any]], metric: str
) -> dict[str, Any]:
    """Epoch-0 vs final-epoch comparison of a per-rollout metric: Welch t and Mann–Whitney U (two-sided)
    on per-rollout values (as the seed did) and on per-row means (the independent unit)."""
    out: dict[str, Any] = {"metric": metric}
    a = np.array([v for r in first if (v := _value(r, metric)) is not None])
    b = np.array([v for r in last if (v := _value(r, metric)) is not None])
    for unit, (x, y) in (("rollout", (a, b)), ("row", (row_means(first, metric), row_means(last, metric)))):
        if x.size < 2 or y.size < 2:
            continue
        welch = sps.ttest_ind(y, x, equal_var=False)
        both_constant = np.ptp(np.concatenate([x, y])) == 0
        mwu_p = 1.0 if both_constant else float(sps.mannwhitneyu(y, x, alternative="two-sided").pvalue)
        out[unit] = {
            "n_first": int(x.size),
            "n_last": int(y.size),
            "mean_first": float(x.mean()),
            "mean_last": float(y.mean()),
            "diff": float(y.mean() - x.mean()),
            "welch_t": float(welch.statistic) if np.isfinite(welch.statistic) else 0.0,
            "welch_p": float(welch.pvalue) if np.isfinite(welch.pvalue) else 1.0,
            "mannwhitney_p": mwu_p,
        }
    return out
