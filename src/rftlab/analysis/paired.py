"""Paired comparisons over shared units (deals, cases, items): the exact sign test and a seeded bootstrap.

docs/statistics.md §6. Two arms are played on the **same** units, and each unit gives one difference
``a − b``. The replication unit is the shared unit (a poker deal, an arena case), never a rollout inside it.

- ``sign_test(differences)``: how many units favour each side and how many tie, with the exact two-sided
  binomial p-value of "either side is equally likely to win a non-tied unit". It uses only the signs, so
  one huge pot cannot carry it, and it says plainly when a mean difference rests on a handful of units.
- ``bootstrap_mean_interval(values, reps=, seed=)``: the percentile bootstrap of the mean over units
  (``numpy.random.default_rng(seed)``; the seed is part of the result), optionally stratified (units
  resampled within their stratum, so a design with fixed stratum sizes keeps them). It makes no normality
  assumption, which is what heavy-tailed per-unit results need; at small n (about 20 units or fewer) a
  percentile interval is still too narrow, so read it beside the sign test.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_REPS = 10_000


@dataclass(frozen=True)
class SignTest:
    """Units where ``a − b`` is positive, negative or zero, and the exact two-sided p-value (ties dropped)."""

    positive: int
    negative: int
    ties: int
    p_value: float

    @property
    def n(self) -> int:
        return self.positive + self.negative + self.ties

    @property
    def untied(self) -> int:
        return self.positive + self.negative


def sign_test(differences: Sequence[float]) -> SignTest:
    """Exact two-sided sign test of ``P(d > 0) = P(d < 0)`` over the non-tied units.

    ``p = min(1, 2·P(X ≤ min(k₊, k₋)))`` with ``X ~ Binomial(k₊ + k₋, 1/2)``; 1.0 when every unit ties.
    A difference that is not finite is refused (``ValueError``): it has no sign to count.
    """
    values = [float(d) for d in differences]
    if any(not math.isfinite(d) for d in values):
        raise ValueError("sign_test needs finite differences")
    positive = sum(1 for d in values if d > 0)
    negative = sum(1 for d in values if d < 0)
    ties = len(values) - positive - negative
    untied = positive + negative
    if untied == 0:
        return SignTest(positive, negative, ties, 1.0)
    from scipy.stats import binom

    tail = float(binom.cdf(min(positive, negative), untied, 0.5))
    return SignTest(positive, negative, ties, min(1.0, 2.0 * tail))


@dataclass(frozen=True)
class BootstrapInterval:
    """A percentile bootstrap interval of a mean: the sample mean, ``[low, high]`` at ``level``, the
    bootstrap standard error, and what produced it (units, replications, seed, strata)."""

    mean: float
    low: float
    high: float
    se: float
    n: int
    reps: int
    seed: int
    level: float
    strata: int = 1


def bootstrap_mean_interval(
    values: Sequence[float],
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    level: float = 0.95,
    strata: Sequence[Hashable] | None = None,
) -> BootstrapInterval:
    """Percentile bootstrap interval of the mean of ``values`` (one value per unit).

    Each replication draws ``n`` units with replacement (``rng.integers``, ``rng =
    numpy.random.default_rng(seed)``) — within each stratum when ``strata`` (one label per value) is
    given, keeping every stratum's size — and takes the mean of the drawn values. ``low``/``high`` are
    the ``(1 − level)/2`` and ``(1 + level)/2`` quantiles of the replicated means (``numpy.quantile``,
    linear interpolation); ``se`` is their standard deviation. The same inputs and seed give the same
    interval. One value gives a zero-width interval at it.
    """
    x = np.asarray([float(v) for v in values], dtype=float)
    n = len(x)
    if n == 0:
        raise ValueError("bootstrap_mean_interval needs at least one value")
    if not np.all(np.isfinite(x)):
        raise ValueError("bootstrap_mean_interval needs finite values")
    if reps < 2:
        raise ValueError(f"reps must be >= 2, got {reps}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if strata is not None and len(strata) != n:
        raise ValueError(f"strata needs one label per value: {len(strata)} labels for {n} values")
    rng = np.random.default_rng(seed)
    groups = [np.arange(n)] if strata is None else _groups(strata)
    totals = np.zeros(reps)
    for members in groups:
        draws = rng.integers(0, len(members), size=(reps, len(members)))
        totals += x[members][draws].sum(axis=1)
    means = totals / n
    low, high = np.quantile(means, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return BootstrapInterval(
        mean=float(x.mean()),
        low=float(low),
        high=float(high),
        se=float(means.std(ddof=1)),
        n=n,
        reps=reps,
        seed=seed,
        level=level,
        strata=len(groups),
    )


def _groups(strata: Sequence[Hashable]) -> list[np.ndarray]:
    index: dict[Hashable, list[int]] = {}
    for i, label in enumerate(strata):
        index.setdefault(label, []).append(i)
    return [np.asarray(members) for members in index.values()]
