"""Rate gates and their operating characteristics (docs/statistics.md §4.1).

A *rate gate* passes when ``k`` successes out of ``n`` reach a threshold. Its declared rule decides on

- ``"point"``: the point estimate ``k / n ≥ threshold``, or
- ``"lower_bound"``: the lower end of the two-sided 95% Wilson interval ``≥ threshold`` (the rate is
  *established* to be at least the threshold),

and the gate refuses to decide below ``min_n`` observations: it then says ``INSUFFICIENT N``, never PASS.
A *count gate* allows at most ``m`` failures out of ``n`` (``unsupported_fact_responses ≤ 0``): it passes
iff the successes reach ``k_min = n − m``, so its operating characteristic is the same binomial tail,
reported at a few true *failure* rates (``count_gate``).

Because ``n`` is fixed once the data are known, the rule is equivalent to "pass iff ``k ≥ k_min``" for the
smallest passing ``k_min``, and the probability that a model whose true rate is ``p`` passes is the exact
binomial tail ``P(K ≥ k_min)``, ``K ~ Binomial(n, p)``. ``rate_gate`` reports the observed n, k, point
estimate, the Wilson and exact (Clopper–Pearson) lower bounds, the verdict, ``k_min`` and that probability
at the threshold and at a few other true rates. Nothing here is specific to one experiment family.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from rftlab.analysis.intervals import Z_95, wilson_interval

Rule = Literal["point", "lower_bound"]
RULES: tuple[str, ...] = ("point", "lower_bound")
PASS, FAIL, INSUFFICIENT = "PASS", "FAIL", "INSUFFICIENT N"
DEFAULT_TRUE_RATES: tuple[float, ...] = (0.9, 0.95, 0.97, 0.99, 0.995, 0.999)


def wilson_lower_bound(successes: int, n: int, z: float = Z_95) -> float:
    """Lower end of the two-sided Wilson score interval (docs/statistics.md §4), clipped to [0, k/n] (float
    rounding leaves about 1e-17 at k = 0)."""
    if successes == 0:
        return 0.0
    return min(successes / n, max(0.0, wilson_interval(successes, n, z)[0]))


def exact_lower_bound(successes: int, n: int, level: float = 0.95) -> float:
    """Lower end of the two-sided exact (Clopper–Pearson) interval at ``level``: the ``(1−level)/2``
    quantile of Beta(k, n − k + 1); 0 when k = 0."""
    _check_counts(successes, n)
    if successes == 0:
        return 0.0
    from scipy.stats import beta

    return float(beta.ppf((1 - level) / 2, successes, n - successes + 1))


def _check_counts(successes: int, n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if isinstance(successes, bool) or not isinstance(successes, int) or not 0 <= successes <= n:
        raise ValueError(f"successes must be an integer in [0, {n}], got {successes!r}")


def _check_threshold(threshold: float) -> None:
    if not isinstance(threshold, int | float) or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"a rate threshold must be a number in [0, 1], got {threshold!r}")


def passes(successes: int, n: int, threshold: float, rule: Rule = "point", z: float = Z_95) -> bool:
    """Whether ``successes`` of ``n`` pass the rule (``min_n`` aside)."""
    _check_counts(successes, n)
    _check_threshold(threshold)
    if rule == "point":
        # k/n >= t, decided on integers where possible so 0.995 * 200 = 199.0 is not lost to rounding
        return successes >= _point_k_min(n, threshold)
    if rule == "lower_bound":
        return wilson_lower_bound(successes, n, z) >= threshold
    raise ValueError(f"unknown rule {rule!r}; known: {', '.join(RULES)}")


def _point_k_min(n: int, threshold: float) -> int:
    """Smallest k with k/n ≥ threshold (exact for thresholds given as decimals up to 12 places)."""
    from fractions import Fraction

    t = Fraction(repr(float(threshold)))
    return math.ceil(t * n)


def min_successes_to_pass(n: int, threshold: float, rule: Rule = "point", z: float = Z_95) -> int | None:
    """``k_min``: the smallest number of successes out of ``n`` that passes, or ``None`` if even ``n`` of
    ``n`` fails (e.g. the Wilson lower bound of 52/52 is 0.931 < 0.995)."""
    _check_counts(0, n)
    _check_threshold(threshold)
    if rule == "point":
        k = _point_k_min(n, threshold)
        return k if k <= n else None
    if rule != "lower_bound":
        raise ValueError(f"unknown rule {rule!r}; known: {', '.join(RULES)}")
    if not passes(n, n, threshold, rule, z):
        return None
    lo, hi = 0, n  # the Wilson lower bound increases with k: bisect for the first passing k
    while lo < hi:
        mid = (lo + hi) // 2
        if passes(mid, n, threshold, rule, z):
            hi = mid
        else:
            lo = mid + 1
    return lo


def binomial_tail(k_min: int | None, n: int, p: float) -> float:
    """``P(K ≥ k_min)`` for ``K ~ Binomial(n, p)`` (0 when ``k_min`` is ``None``: nothing passes)."""
    if k_min is None or k_min > n:
        return 0.0
    if k_min <= 0:
        return 1.0
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a true rate must be in [0, 1], got {p!r}")
    from scipy.stats import binom

    return float(binom.sf(k_min - 1, n, p))


def pass_probability(n: int, true_rate: float, threshold: float, rule: Rule = "point") -> float:
    """Probability that a model whose true rate is ``true_rate`` passes at this ``n`` (the gate's
    operating characteristic)."""
    return binomial_tail(min_successes_to_pass(n, threshold, rule), n, true_rate)


@dataclass(frozen=True)
class RateGateResult:
    """One rate gate on observed data: counts, estimates, verdict and operating characteristic."""

    successes: int
    n: int
    threshold: float
    rule: str
    min_n: int
    point: float
    wilson_lower: float
    exact_lower: float
    verdict: str
    k_min: int | None
    pass_probability_at_threshold: float
    pass_probability: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    @property
    def decided_on(self) -> float:
        """The number the rule compares with the threshold."""
        return self.point if self.rule == "point" else self.wilson_lower

    def to_dict(self) -> dict:
        return {
            "successes": self.successes,
            "n": self.n,
            "threshold": self.threshold,
            "rule": self.rule,
            "min_n": self.min_n,
            "point": self.point,
            "wilson_lower_95": self.wilson_lower,
            "exact_lower_95": self.exact_lower,
            "verdict": self.verdict,
            "k_min": self.k_min,
            "pass_probability_at_threshold": self.pass_probability_at_threshold,
            "pass_probability": dict(self.pass_probability),
        }


def rate_gate(
    successes: int,
    n: int,
    threshold: float,
    rule: Rule = "point",
    min_n: int = 1,
    true_rates: Sequence[float] = DEFAULT_TRUE_RATES,
) -> RateGateResult:
    """Evaluate a rate gate on ``successes`` of ``n`` and compute its operating characteristic.

    ``n < min_n`` gives ``INSUFFICIENT N`` whatever ``successes`` is; otherwise PASS or FAIL by ``rule``.
    ``pass_probability`` maps each true rate (formatted ``"0.995"``) to ``P(pass)`` at this ``n``.
    """
    _check_counts(successes, n)
    _check_threshold(threshold)
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; known: {', '.join(RULES)}")
    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 1:
        raise ValueError(f"min_n must be a positive integer, got {min_n!r}")
    k_min = min_successes_to_pass(n, threshold, rule)
    if n < min_n:
        verdict = INSUFFICIENT
    else:
        verdict = PASS if passes(successes, n, threshold, rule) else FAIL
    return RateGateResult(
        successes=successes,
        n=n,
        threshold=float(threshold),
        rule=rule,
        min_n=min_n,
        point=successes / n,
        wilson_lower=wilson_lower_bound(successes, n),
        exact_lower=exact_lower_bound(successes, n),
        verdict=verdict,
        k_min=k_min,
        pass_probability_at_threshold=binomial_tail(k_min, n, threshold),
        pass_probability={f"{p:g}": binomial_tail(k_min, n, p) for p in true_rates},
    )


def count_gate(
    failures: int,
    n: int,
    max_failures: int = 0,
    min_n: int = 1,
    failure_rates: Sequence[float] = (0.001, 0.005, 0.01, 0.02),
) -> RateGateResult:
    """A gate allowing at most ``max_failures`` failures out of ``n`` (see the module docstring).

    The result's ``threshold`` is the success rate ``(n − max_failures)/n`` it implies at this ``n``;
    ``pass_probability`` maps each true failure rate ``q`` to ``P(failures ≤ max_failures)``, and
    ``pass_probability_at_threshold`` is the probability at ``q = max_failures / n``."""
    _check_counts(failures, n)
    if isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < 0:
        raise ValueError(f"max_failures must be a non-negative integer, got {max_failures!r}")
    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 1:
        raise ValueError(f"min_n must be a positive integer, got {min_n!r}")
    successes = n - failures
    k_min = max(0, n - max_failures)
    if n < min_n:
        verdict = INSUFFICIENT
    else:
        verdict = PASS if failures <= max_failures else FAIL
    return RateGateResult(
        successes=successes,
        n=n,
        threshold=k_min / n,
        rule="point",
        min_n=min_n,
        point=successes / n,
        wilson_lower=wilson_lower_bound(successes, n),
        exact_lower=exact_lower_bound(successes, n),
        verdict=verdict,
        k_min=k_min,
        pass_probability_at_threshold=binomial_tail(k_min, n, k_min / n),
        pass_probability={f"{q:g}": binomial_tail(k_min, n, 1 - q) for q in failure_rates},
    )


# ------------------------------------------------------------------ clustered replies (issue 31)
#
# The frozen arena evaluation asks every agent-case (one agent of one case) for 7 near-identical ACT
# replies (3 action orders of the generated condition and 4 other message conditions). Replies of one
# agent-case share the state, the agent and most of the prompt, so their failures can cluster; a bound
# that treats the 1,680 replies as independent then overstates what they establish. The functions below
# take the cluster (agent-case) as the unit.
#
# - ``cluster_robust_rate``: the reply rate ``p = Σy/Σm`` (a ratio estimator), its cluster-robust
#   (sandwich) variance ``G/(G−1)·Σ(y_c − p·m_c)²/(Σm)²`` and the design effect
#   ``deff = var_robust / (p(1−p)/Σm)``, which needs at least one failure and one success (else ``None``).
# - ``clustered_lower_bound``: the Wilson lower bound at the effective sample size ``n_eff = Σm / deff``
#   (Kish), with the worst case ``deff = m̄`` (every reply of a cluster shares its fate: ``n_eff`` is the
#   number of clusters) unless a design effect is given. The worst case is the only one that holds when
#   no failure is observed, because the data cannot estimate the clustering then.
# - ``clustered_pass_probability``: the exact probability that a rule passes when each cluster of ``m``
#   replies fails a beta-binomial number of times with mean rate ``1 − p`` and intra-cluster correlation
#   ``icc`` (0: independent replies; 1: all-or-nothing clusters), by convolving the clusters' failure
#   distributions. Rules: ``"independent_lower_bound"`` (the Wilson bound over all replies, the
#   registered G1/G4 rule) and ``"cluster_lower_bound"`` (the worst-case effective-n bound).

CLUSTER_RULES: tuple[str, ...] = ("independent_lower_bound", "cluster_lower_bound")


@dataclass(frozen=True)
class ClusteredRate:
    """A reply rate over clusters with its cluster-robust variance and design effect."""

    successes: int
    n: int
    clusters: int
    mean_cluster_size: float
    rate: float
    robust_variance: float
    independent_variance: float
    design_effect: float | None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _cluster_arrays(successes: Sequence[int], sizes: Sequence[int]) -> tuple[list[int], list[int]]:
    y, m = list(successes), list(sizes)
    if len(y) != len(m) or len(y) < 2:
        raise ValueError(
            f"need at least 2 clusters with one size each, got {len(y)} counts and {len(m)} sizes"
        )
    for k, size in zip(y, m, strict=True):
        _check_counts(k, size)
    return y, m


def cluster_robust_rate(successes: Sequence[int], sizes: Sequence[int]) -> ClusteredRate:
    """``ClusteredRate`` of per-cluster ``successes`` out of ``sizes`` (see the section comment)."""
    y, m = _cluster_arrays(successes, sizes)
    total, n, g = sum(y), sum(m), len(y)
    p = total / n
    robust = g / (g - 1) * sum((yc - p * mc) ** 2 for yc, mc in zip(y, m, strict=True)) / n**2
    independent = p * (1 - p) / n
    deff = robust / independent if 0 < total < n else None
    return ClusteredRate(total, n, g, n / g, p, robust, independent, deff)


def effective_wilson_lower(rate: float, n_eff: float, z: float = Z_95) -> float:
    """The Wilson lower bound of a rate observed on an effective sample of ``n_eff`` (not necessarily whole)
    observations, clipped to [0, rate]."""
    if not 0.0 <= rate <= 1.0 or not n_eff > 0:
        raise ValueError(f"need a rate in [0, 1] and n_eff > 0, got {rate!r} and {n_eff!r}")
    return min(rate, max(0.0, wilson_interval(rate * n_eff, n_eff, z)[0]))


def clustered_lower_bound(
    successes: Sequence[int], sizes: Sequence[int], design_effect: float | None = None, z: float = Z_95
) -> tuple[float, float]:
    """``(lower bound, n_eff)``: the Wilson lower bound at ``n_eff = Σm / deff``; ``deff`` defaults to the
    worst case, the mean cluster size (``n_eff`` = number of clusters); a given ``deff`` is floored at 1."""
    est = cluster_robust_rate(successes, sizes)
    deff = est.mean_cluster_size if design_effect is None else max(1.0, float(design_effect))
    n_eff = est.n / deff
    return effective_wilson_lower(est.rate, n_eff, z), n_eff


def min_clusters_to_pass(threshold: float, z: float = Z_95) -> int:
    """The fewest clusters with which the worst-case cluster bound can pass at all (all replies valid):
    the smallest ``G`` with Wilson lower bound of ``G/G`` ≥ ``threshold`` (765 at 0.995, 73 at 0.95)."""
    _check_threshold(threshold)
    if threshold >= 1.0:
        raise ValueError("no finite number of clusters establishes a rate of 1")
    g = max(1, math.floor(threshold * z * z / (1 - threshold)) - 1)
    while effective_wilson_lower(1.0, g, z) < threshold:
        g += 1
    return g


def _cluster_failure_pmf(m: int, failure_rate: float, icc: float):
    """P(a cluster of ``m`` replies has f failures), f = 0..m: beta-binomial with mean ``failure_rate``
    and intra-cluster correlation ``icc`` (binomial at 0, all-or-nothing at 1)."""
    import numpy as np
    from scipy.stats import betabinom, binom

    f = np.arange(m + 1)
    if failure_rate in (0.0, 1.0):
        return (f == round(failure_rate * m)).astype(float)
    if icc == 0.0:
        return binom.pmf(f, m, failure_rate)
    if icc == 1.0:
        out = np.zeros(m + 1)
        out[0], out[m] = 1 - failure_rate, failure_rate
        return out
    a = failure_rate * (1 - icc) / icc
    return betabinom.pmf(f, m, a, (1 - failure_rate) * (1 - icc) / icc)


def max_failures_to_pass(n_clusters: int, cluster_size: int, threshold: float, rule: str) -> int | None:
    """The most failures (over all ``n_clusters · cluster_size`` replies) with which ``rule`` still passes,
    or ``None`` when nothing passes. Both rules are decreasing in the failures, so this decides them."""
    _check_counts(0, n_clusters)
    _check_counts(0, cluster_size)
    _check_threshold(threshold)
    n = n_clusters * cluster_size
    if rule == "independent_lower_bound":
        k_min = min_successes_to_pass(n, threshold, "lower_bound")
        return None if k_min is None else n - k_min
    if rule != "cluster_lower_bound":
        raise ValueError(f"unknown clustered rule {rule!r}; known: {', '.join(CLUSTER_RULES)}")
    passing = [f for f in range(n + 1) if effective_wilson_lower(1 - f / n, n_clusters) >= threshold]
    return max(passing) if passing else None


def clustered_pass_probability(
    n_clusters: int, cluster_size: int, true_rate: float, icc: float, threshold: float, rule: str
) -> float:
    """P(``rule`` passes) when the true reply rate is ``true_rate`` and failures cluster with ``icc`` (see
    the section comment): the exact distribution of the total failures, clusters independent."""
    import numpy as np

    if not 0.0 <= true_rate <= 1.0 or not 0.0 <= icc <= 1.0:
        raise ValueError(f"true_rate and icc must be in [0, 1], got {true_rate!r} and {icc!r}")
    f_max = max_failures_to_pass(n_clusters, cluster_size, threshold, rule)
    if f_max is None:
        return 0.0
    pmf = _cluster_failure_pmf(cluster_size, 1.0 - true_rate, icc)
    total = np.ones(1)
    for _ in range(n_clusters):
        total = np.convolve(total, pmf)[: f_max + 1]  # only P(F ≤ f_max) is needed
    return float(min(1.0, total.sum()))
