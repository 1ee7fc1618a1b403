"""Paired comparisons over shared units (deals, cases, items): the exact sign test and a seeded bootstrap.

docs/statistics.md §6. Two arms are played on the **same** units, and each unit gives one difference
``a − b``. The replication unit is the shared unit (a poker deal, an arena case), never a rollout inside it.

- ``sign_test(differences)``: how many units favour each side and how many tie (``|d| <= TIE_TOLERANCE``:
  float rounding of equal results is a tie, not a win), with the exact two-sided
  binomial p-value of "either side is equally likely to win a non-tied unit". It uses only the signs, so
  one huge pot cannot carry it, and it says plainly when a mean difference rests on a handful of units.
- ``sign_flip_p_value(differences, trials=100_000, seed=0)``: the sign-flip randomisation test of the mean
  (each trial keeps or negates every difference by one bit of ``random.Random(seed).getrandbits(1)``, in
  order; ``p = (count + 1)/(trials + 1)`` over trials with ``|mean| ≥ |observed| − 1e-12``; 1 when the
  observed mean is 0), as docs/arena.md §10.6 specifies for the arena comparison. The bits are the top
  bits of the generator's 32-bit outputs (what ``getrandbits(1)`` returns), read in blocks from numpy's
  ``MT19937`` put in ``Random(seed)``'s state, so 100,000 trials over 60 differences take a fraction of a
  second; ``sign_flip_p_values`` serves several series of one length from one draw. The tests check the
  result against the literal one-bit-at-a-time loop.
- ``bootstrap_mean_interval(values, reps=, seed=)``: the percentile bootstrap of the mean over units
  (``numpy.random.default_rng(seed)``; the seed is part of the result), optionally stratified (units
  resampled within their stratum, so a design with fixed stratum sizes keeps them). It makes no normality
  assumption, which is what heavy-tailed per-unit results need; at small n (about 20 units or fewer) a
  percentile interval is still too narrow, so read it beside the sign test.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from rftlab.analysis.display import MISSING

DEFAULT_REPS = 10_000

SIGN_FLIP_TRIALS = 100_000
SIGN_FLIP_SEED = 0
SIGN_FLIP_TOLERANCE = 1e-12
_CHUNK_TRIALS = 8_192
_CHUNK_WORDS = 1 << 22  # 32-bit words per draw: 16 MiB of bits, whatever the number of units


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def sign_flip_p_value(
    diffs: Sequence[float],
    trials: int = SIGN_FLIP_TRIALS,
    seed: int = SIGN_FLIP_SEED,
    tolerance: float = SIGN_FLIP_TOLERANCE,
) -> float:
    """Two-sided sign-flip randomisation p-value of the mean of ``diffs`` (see the module docstring)."""
    return sign_flip_p_values([diffs], trials=trials, seed=seed, tolerance=tolerance)[0]


def _twister_of(rng: random.Random) -> np.random.MT19937:
    """numpy's Mersenne Twister in ``rng``'s state: ``random_raw(m)`` gives the ``m`` 32-bit outputs that
    ``rng.getrandbits(32·m)`` concatenates (and whose top bits ``m`` calls of ``getrandbits(1)`` return),
    without building a big integer."""
    _, internal, _ = rng.getstate()
    twister = np.random.MT19937()
    twister.state = {
        "bit_generator": "MT19937",
        "state": {"key": np.asarray(internal[:-1], dtype=np.uint32), "pos": internal[-1]},
    }
    return twister


def _flip_inputs(series: Sequence[Sequence[float]], trials: int) -> list[list[float]]:
    rows = [[float(d) for d in diffs] for diffs in series]
    if not rows or not rows[0]:
        raise ValueError("sign_flip_p_value needs at least one difference")
    if any(len(row) != len(rows[0]) for row in rows):
        raise ValueError("sign_flip_p_values needs series of equal length")
    if not all(math.isfinite(v) for row in rows for v in row):
        raise ValueError("sign_flip_p_value needs finite differences")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a positive integer, got {trials!r}")
    return rows


def sign_flip_p_values(
    series: Sequence[Sequence[float]],
    trials: int = SIGN_FLIP_TRIALS,
    seed: int = SIGN_FLIP_SEED,
    tolerance: float = SIGN_FLIP_TOLERANCE,
) -> list[float]:
    """``sign_flip_p_value`` of each series (all of one length), from one shared draw of the bits.

    Each series' p-value is the one a fresh ``random.Random(seed)`` gives it alone: the series see the same
    bits, so they are drawn once. A block holds at most ``_CHUNK_WORDS`` words, whatever the length.
    """
    rows = _flip_inputs(series, trials)
    n = len(rows[0])
    observed = [_mean(row) for row in rows]
    active = [i for i, m in enumerate(observed) if m != 0]
    counts = dict.fromkeys(active, 0)
    matrix = np.asarray([rows[i] for i in active], dtype=np.float64).T  # (n, active series)
    totals = matrix.sum(axis=0)
    thresholds = np.array([abs(observed[i]) for i in active]) - tolerance
    twister = _twister_of(random.Random(seed))
    per_block = max(1, min(_CHUNK_TRIALS, _CHUNK_WORDS // n))
    done = 0
    while active and done < trials:
        block = min(per_block, trials - done)
        words = block * n
        negate = (twister.random_raw(words) >> 31).astype(np.float64).reshape(block, n)  # the top bits
        # bit 1 negates (the opposite choice gives the same |mean|): sum = total - 2 * sum of the negated
        means = (totals - 2.0 * (negate @ matrix)) / n  # (block, active series)
        hits = np.count_nonzero(np.abs(means) >= thresholds, axis=0)
        for i, hit in zip(active, hits, strict=True):
            counts[i] += int(hit)
        done += block
    return [(counts[i] + 1) / (trials + 1) if i in counts else 1.0 for i in range(len(rows))]


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

    def to_dict(self) -> dict[str, float | int]:
        return {
            "positive": self.positive,
            "negative": self.negative,
            "ties": self.ties,
            "p_value": self.p_value,
        }


TIE_TOLERANCE = 1e-12
"""A difference within this of zero is a tie: the arena gate spec's encoding of a strict inequality
(``data/specs/arena_gates.json``, ``strictly_below_zero``), far below any difference the studies' units can
produce (arena rewards are multiples of 0.05, poker results whole chips in big blinds) but far above the
rounding left by summing them (``4.0`` vs ``4.000000000000001``)."""


def sign_test(differences: Sequence[float], tie_tolerance: float = TIE_TOLERANCE) -> SignTest:
    """Exact two-sided sign test of ``P(d > 0) = P(d < 0)`` over the non-tied units.

    A unit ties when ``|d| <= tie_tolerance`` (float rounding of equal results is no win). ``p = min(1,
    2·P(X ≤ min(k₊, k₋)))`` with ``X ~ Binomial(k₊ + k₋, 1/2)``; 1.0 when every unit ties. A difference that
    is not finite is refused (``ValueError``): it has no sign to count.
    """
    values = [float(d) for d in differences]
    if any(not math.isfinite(d) for d in values):
        raise ValueError("sign_test needs finite differences")
    if not tie_tolerance >= 0:
        raise ValueError(f"tie_tolerance must be >= 0, got {tie_tolerance!r}")
    positive = sum(1 for d in values if d > tie_tolerance)
    negative = sum(1 for d in values if d < -tie_tolerance)
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


def format_p(p: float | None, trials: int | None = None) -> str:
    """A p-value for a table: 4 decimals, or ``< 1e-4`` style when smaller (with ``trials``, the smallest
    randomisation p-value ``1/(trials+1)`` is written as ``≤ 1/(trials+1)``); ``–`` when there is none."""
    if p is None:
        return MISSING
    if trials is not None and p <= 1 / (trials + 1) + 1e-15:
        return f"≤ {1 / (trials + 1):.0e}"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


WILCOXON_EXACT_MAX = 50
"""Largest number of non-tied units for which ``wilcoxon_signed_rank`` uses the exact null distribution
(when no two ``|d|`` tie); larger samples, or tied magnitudes, use the normal approximation."""


@dataclass(frozen=True)
class SignedRankTest:
    """Wilcoxon's signed-rank test over the non-tied units: the rank sums of the positive and negative
    differences (ranks of ``|d|``, ties averaged), how many units were ranked and dropped as ties, the
    two-sided p-value and how it was computed (``"exact"`` or ``"normal"``)."""

    positive_rank_sum: float
    negative_rank_sum: float
    ranked: int
    zeros: int
    p_value: float
    method: str


def _magnitude_ranks(magnitudes: np.ndarray, tie_tolerance: float) -> tuple[np.ndarray, list[int]]:
    """Average ranks of ``magnitudes`` (1 = smallest), values within ``tie_tolerance`` of their sorted
    neighbour sharing a rank; and the sizes of the tied groups."""
    order = np.argsort(magnitudes, kind="stable")
    ordered = magnitudes[order]
    ranks = np.empty(len(magnitudes))
    groups: list[int] = []
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or ordered[i] - ordered[i - 1] > tie_tolerance:
            ranks[order[start:i]] = (start + 1 + i) / 2.0  # mean of the ranks start+1..i
            groups.append(i - start)
            start = i
    return ranks, groups


def _exact_signed_rank_p(w_plus: float, n: int) -> float:
    """Two-sided exact p of the rank sum ``w_plus`` of n untied ranks 1..n: the null counts every one of
    the 2**n sign assignments equally (a subset-sum count)."""
    total = n * (n + 1) // 2
    counts = np.zeros(total + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[: total + 1 - rank].copy()
    probabilities = counts / 2.0**n
    w = int(round(w_plus))
    lower = float(probabilities[: w + 1].sum())
    upper = float(probabilities[w:].sum())
    return min(1.0, 2.0 * min(lower, upper))


def wilcoxon_signed_rank(
    differences: Sequence[float], tie_tolerance: float = TIE_TOLERANCE, exact_max: int = WILCOXON_EXACT_MAX
) -> SignedRankTest:
    """Wilcoxon's signed-rank test of "the differences are symmetric about 0", beside the sign test.

    Units with ``|d| <= tie_tolerance`` are dropped (Wilcoxon's treatment of zeros, as the sign test drops
    ties). The rest are ranked by ``|d|`` (average ranks; magnitudes within ``tie_tolerance`` tie) and
    ``W+`` is the sum of the positive units' ranks. The two-sided p-value is exact (all ``2**n`` sign
    assignments) when at most ``exact_max`` units are ranked and no magnitudes tie; otherwise it is the
    normal approximation with the tie-corrected variance ``n(n+1)(2n+1)/24 − Σ(t³ − t)/48`` and no
    continuity correction (what ``scipy.stats.wilcoxon`` does by default). Unlike the sign test it uses the
    sizes of the differences through their ranks — a stack-sized pot counts as the largest rank, not as
    its 100 BB — so it sits between the sign test and the mean. 1.0 when every unit ties.
    """
    values = np.asarray([float(d) for d in differences], dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError("wilcoxon_signed_rank needs finite differences")
    if not tie_tolerance >= 0:
        raise ValueError(f"tie_tolerance must be >= 0, got {tie_tolerance!r}")
    kept = values[np.abs(values) > tie_tolerance]
    zeros = len(values) - len(kept)
    n = len(kept)
    if n == 0:
        return SignedRankTest(0.0, 0.0, 0, zeros, 1.0, "exact")
    ranks, groups = _magnitude_ranks(np.abs(kept), tie_tolerance)
    w_plus = float(ranks[kept > 0].sum())
    w_minus = float(ranks[kept < 0].sum())
    if n <= exact_max and max(groups) == 1:
        return SignedRankTest(w_plus, w_minus, n, zeros, _exact_signed_rank_p(w_plus, n), "exact")
    from scipy.stats import norm

    variance = n * (n + 1) * (2 * n + 1) / 24.0 - sum(t**3 - t for t in groups) / 48.0
    if variance <= 0:
        return SignedRankTest(w_plus, w_minus, n, zeros, 1.0, "normal")
    z = (w_plus - n * (n + 1) / 4.0) / math.sqrt(variance)
    return SignedRankTest(w_plus, w_minus, n, zeros, min(1.0, float(2.0 * norm.sf(abs(z)))), "normal")


@dataclass(frozen=True)
class EquivalenceReading:
    """What a two-sided interval ``[low, high]`` at ``level`` says about "the difference is negligible".

    ``resolved`` is the smallest symmetric margin the interval lies strictly inside: equivalence within
    ``±m`` is shown (the two one-sided tests of TOST, each at ``(1 − level)/2``) for every ``m > resolved``
    and for none below it, so differences smaller than ``resolved`` cannot be told from 0 at this size.
    """

    low: float
    high: float
    level: float

    @property
    def resolved(self) -> float:
        return max(abs(self.low), abs(self.high))

    @property
    def tost_alpha(self) -> float:
        return (1.0 - self.level) / 2.0

    def within(self, margin: float) -> bool:
        """Whether equivalence within ``±margin`` is shown: ``−margin < low`` and ``high < margin``."""
        if not margin > 0:
            raise ValueError(f"an equivalence margin must be > 0, got {margin!r}")
        return -margin < self.low and self.high < margin


def equivalence_reading(low: float, high: float, level: float = 0.95) -> EquivalenceReading:
    """``EquivalenceReading`` of an interval already computed (a bootstrap, a t interval)."""
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"need a finite interval with low <= high, got [{low}, {high}]")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return EquivalenceReading(float(low), float(high), float(level))


def paired_t_interval(differences: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: Student's t two-sided interval at ``level`` of the mean paired difference
    over units (``n − 1`` degrees of freedom; statsmodels' ``DescrStatsW.tconfint_mean``); a constant
    sample gives a zero-width interval."""
    from statsmodels.stats.weightstats import DescrStatsW

    x = np.asarray([float(d) for d in differences], dtype=float)
    if len(x) < 2 or not np.all(np.isfinite(x)):
        raise ValueError("paired_t_interval needs at least two finite differences")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    mean = float(x.mean())
    if float(x.std()) == 0.0:
        return mean, mean, mean
    low, high = DescrStatsW(x).tconfint_mean(alpha=1.0 - level)
    return mean, float(low), float(high)
