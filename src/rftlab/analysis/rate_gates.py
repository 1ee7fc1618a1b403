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
