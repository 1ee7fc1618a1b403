"""Comparisons of policies on the frozen arena cases (docs/arena.md §10.3, §11 gate G5).

- ``paired_comparison(left, right)``: the per-case paired difference ``left − right`` of a score (e.g.
  regret), its 95% ``mean_ci`` (``analysis.intervals.normal_mean_interval``), half-width, and how many
  cases each side wins or ties. A promotion gate asks whether the interval lies entirely below 0.
- ``optimal_rate_table(outcomes, ...)``: per policy (and per slice of the cases), n, mean reward, mean
  regret, optimal count and rate with its Wilson interval (``analysis.intervals.wilson_interval``).

Both take plain sequences / records, so they are usable on model-run outcomes as well as baselines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

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
