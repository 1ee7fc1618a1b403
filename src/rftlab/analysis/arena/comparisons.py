"""Comparisons of policies on the frozen arena cases (docs/arena.md §10.3, §11 gate G5).

- ``paired_comparison(left, right)``: the per-case paired difference ``left − right`` of a score (e.g.
  regret), its 95% ``mean_ci`` (``analysis.intervals.normal_mean_interval``), half-width, and how many
  cases each side wins or ties. A promotion gate asks whether the interval lies entirely below 0.
- ``optimal_rate_table(outcomes, ...)``: per policy (and per slice of the cases), n, mean reward, mean
  regret, optimal count and rate with its Wilson interval (``analysis.intervals.wilson_interval``).
- ``regret_share(policy, regrets, baseline, regrets)``: the share of a baseline's mean regret (all-WAIT's)
  that a policy still leaves, with a percentile bootstrap interval over cases.

Both take plain sequences / records, so they are usable on model-run outcomes as well as baselines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

import numpy as np

from rftlab.analysis.display import interval
from rftlab.analysis.intervals import normal_mean_interval, wilson_interval
from rftlab.analysis.paired import sign_test

Z95 = 1.96


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """``left − right`` per case: mean, 95% ``mean_ci`` [low, high], half-width, and the case counts where
    the difference is negative (``left_lower``), zero (``ties``) or positive (``right_lower``)."""

    left: str
    right: str
    n: int
    mean: float
    low: float
    high: float
    left_lower: int
    ties: int
    right_lower: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def excludes_zero(self) -> bool:
        return self.high < 0 or self.low > 0

    @property
    def below_zero(self) -> bool:
        """The whole interval is below 0: ``left`` is lower (better, for regret) — gate G5's test."""
        return self.high < 0


def paired_comparison(
    left: Sequence[float],
    right: Sequence[float],
    *,
    names: tuple[str, str] = ("left", "right"),
    z: float = Z95,
) -> PairedComparison:
    """Paired per-case differences ``left[i] − right[i]`` (same cases, same order) summarised."""
    if len(left) != len(right):
        raise ValueError(f"paired comparison needs the same cases: {len(left)} vs {len(right)} values")
    diff = [float(a) - float(b) for a, b in zip(left, right, strict=True)]
    mean, low, high = normal_mean_interval(diff, z)
    signs = sign_test(diff)  # a float-rounding difference is a tie (paired.TIE_TOLERANCE)
    return PairedComparison(
        names[0], names[1], len(diff), mean, low, high, signs.negative, signs.ties, signs.positive
    )


def neighbour_comparisons(
    per_case: Mapping[str, Sequence[float]], order: Sequence[str], z: float = Z95
) -> dict[tuple[str, str], PairedComparison]:
    """``paired_comparison`` of each neighbouring pair in ``order`` (``per_case[name]`` aligned by case)."""
    return {
        (a, b): paired_comparison(per_case[a], per_case[b], names=(a, b), z=z)
        for a, b in zip(order[:-1], order[1:], strict=True)
    }


@dataclass(frozen=True, slots=True)
class RateRow:
    """One policy (in one slice): outcomes counted, mean reward and regret, optimal count and rate, and the
    Wilson interval of the rate."""

    policy: str
    slice: str
    n: int
    mean_reward: float
    mean_regret: float
    optimal: int
    optimal_rate: float
    wilson_low: float
    wilson_high: float


def rate_frame(rows: Sequence[RateRow], labels: Mapping[str, str], with_slice: bool = False) -> Any:
    """``optimal_rate_table`` rows as a DataFrame for a report (policy names through ``labels``, the
    optimal count as ``k/n``, the Wilson interval as text; the slice column with ``with_slice``)."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                **({"slice": r.slice} if with_slice else {}),
                "policy": labels[r.policy],
                "n": r.n,
                "mean reward": r.mean_reward,
                "mean regret": r.mean_regret,
                "optimal": f"{r.optimal}/{r.n}",
                "optimal rate": r.optimal_rate,
                "Wilson 95%": interval(r.wilson_low, r.wilson_high),
            }
            for r in rows
        ]
    )


def optimal_rate_table(
    outcomes: Iterable[Any],
    *,
    slices: Sequence[tuple[str, Callable[[Any], bool]]] = (("all", lambda o: True),),
    z: float = Z95,
) -> list[RateRow]:
    """Per slice and policy (first-seen order): the rows of a Wilson table. ``outcomes`` have ``policy``,
    ``reward``, ``regret`` and ``optimal`` attributes (e.g. ``policies.arena.CaseOutcome``); ``slices``
    are ``(name, predicate)`` pairs selecting outcomes."""
    outcomes = list(outcomes)
    rows: list[RateRow] = []
    for name, keep in slices:
        chosen = [o for o in outcomes if keep(o)]
        for policy in dict.fromkeys(o.policy for o in chosen):
            part = [o for o in chosen if o.policy == policy]
            n = len(part)
            k = sum(1 for o in part if o.optimal)
            low, high = wilson_interval(k, n, z)
            rows.append(
                RateRow(
                    policy,
                    name,
                    n,
                    fmean(o.reward for o in part),
                    fmean(o.regret for o in part),
                    k,
                    k / n,
                    low,
                    high,
                )
            )
    return rows


@dataclass(frozen=True, slots=True)
class RegretShare:
    """``mean(policy regret) / mean(baseline regret)`` over the same cases, with a percentile bootstrap
    interval over cases (both regrets of a case drawn together): the share of the baseline's regret the
    policy still leaves (1 − share is the part of the gap to the optimum it closes)."""

    policy: str
    baseline: str
    n: int
    share: float
    low: float
    high: float
    reps: int
    seed: int
    level: float


def regret_share(
    policy: str,
    policy_regret: Sequence[float],
    baseline: str,
    baseline_regret: Sequence[float],
    *,
    reps: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> RegretShare:
    """``RegretShare`` of ``policy`` against ``baseline`` (e.g. all-WAIT), one regret per case for each, in
    the same case order. Each replication draws the cases with replacement (``rng.integers``, ``rng =
    numpy.random.default_rng(seed)``) and takes the ratio of the two means over the drawn cases; ``low`` and
    ``high`` are the ``(1 ∓ level)/2`` quantiles of the ratios. A ratio of regrets, unlike a ratio to the
    oracle's reward, does not depend on where reward 0 sits. ``ValueError`` when the lists differ in
    length, a regret is negative or not finite, or the baseline has no regret to share."""
    left = np.asarray([float(v) for v in policy_regret])
    right = np.asarray([float(v) for v in baseline_regret])
    if len(left) != len(right) or len(left) < 2:
        raise ValueError("regret_share needs one regret per case for both policies, on at least two cases")
    if not (np.all(np.isfinite(left)) and np.all(np.isfinite(right))) or min(left.min(), right.min()) < -1e-9:
        raise ValueError("regret_share needs finite, non-negative regrets (oracle reward minus reward)")
    if right.mean() <= 0:
        raise ValueError(f"{baseline} has no regret on these cases: there is no share to take")
    if reps < 2 or not 0.0 < level < 1.0:
        raise ValueError(f"need reps >= 2 and level in (0, 1), got reps={reps}, level={level}")
    draws = np.random.default_rng(seed).integers(0, len(left), size=(reps, len(left)))
    denominators = right[draws].sum(axis=1)
    ratios = np.divide(
        left[draws].sum(axis=1), denominators, out=np.full(reps, np.nan), where=denominators > 0
    )
    low, high = np.nanquantile(ratios, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return RegretShare(policy, baseline, len(left), float(left.mean() / right.mean()), float(low), float(high),
                       reps, seed, level)  # fmt: skip
