"""Power, coverage and planning for paired noninferiority (``specs/statistics.md`` §3.3).

The simulation model is the *binomial discordance model* for paired 0/1 outcomes: each item's
difference ``d_i`` is +1 with probability ``p_plus`` (treatment right, baseline wrong), -1 with
``p_minus`` and 0 otherwise. A model is set by its true difference ``theta = p_plus - p_minus`` and its
discordance rate ``r = p_plus + p_minus`` (``|theta| <= r <= 1``).

All randomness comes from an explicit ``numpy.random.Generator``; every simulation is vectorised over
replications (rows of an ``(R, n)`` array) through ``noninferiority.batch_noninferior``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rftlab.analysis.noninferiority import METHODS, batch_noninferior, hoeffding_half_width

_CHUNK = 2500  # replications per block: bounds memory to ~100 MB at n = 1319


@dataclass(frozen=True)
class DiscordanceModel:
    """Paired binary outcomes: P(d = +1) = p_plus, P(d = -1) = p_minus."""

    p_minus: float
    p_plus: float

    def __post_init__(self) -> None:
        if self.p_minus < 0 or self.p_plus < 0 or self.p_minus + self.p_plus > 1 + 1e-12:
            raise ValueError(f"invalid discordance model p_minus={self.p_minus}, p_plus={self.p_plus}")

    @classmethod
    def from_difference(cls, difference: float, discordance: float) -> DiscordanceModel:
        """The model with true difference ``theta`` and discordance rate ``r`` (needs ``|theta| <= r``)."""
        if abs(difference) > discordance + 1e-12 or discordance > 1:
            raise ValueError(f"difference {difference} is impossible at discordance rate {discordance}")
        return cls(p_minus=(discordance - difference) / 2.0, p_plus=(discordance + difference) / 2.0)

    @property
    def difference(self) -> float:
        return self.p_plus - self.p_minus

    @property
    def discordance(self) -> float:
        return self.p_plus + self.p_minus


def differences_from_uniforms(uniforms: np.ndarray, model: DiscordanceModel) -> np.ndarray:
    """Map U(0,1) draws to d: +1 if u < p_plus, -1 if u >= 1 - p_minus, else 0.

    With common uniforms, d is non-decreasing in the true difference (for a fixed discordance rate),
    which keeps power searches over the difference monotone up to the bound's own behaviour.
    """
    plus = uniforms < model.p_plus
    minus = uniforms >= 1.0 - model.p_minus
    return plus.astype(float) - minus.astype(float)


def simulate_paired_differences(
    n: int, model: DiscordanceModel, reps: int, rng: np.random.Generator
) -> np.ndarray:
    """``(reps, n)`` array of per-item differences drawn from the discordance model."""
    return differences_from_uniforms(rng.random((reps, n)), model)


def _pass_rate_from_uniforms(
    method: str, uniforms: np.ndarray, model: DiscordanceModel, margin: float, alpha: float
) -> float:
    passes = 0
    for start in range(0, uniforms.shape[0], _CHUNK):
        d = differences_from_uniforms(uniforms[start : start + _CHUNK], model)
        passes += int(batch_noninferior(method, d, margin, alpha).sum())
    return passes / uniforms.shape[0]


@dataclass(frozen=True)
class PassRate:
    """Fraction of simulated data sets on which a method claims noninferiority, with its MC error."""

    method: str
    n: int
    difference: float
    discordance: float
    margin: float
    alpha: float
    reps: int
    rate: float
    mc_se: float


def pass_rate(
    method: str,
    n: int,
    model: DiscordanceModel,
    margin: float,
    alpha: float,
    reps: int,
    rng: np.random.Generator,
) -> PassRate:
    """P(noninferiority claimed) under ``model`` at n items, estimated from ``reps`` replications.

    Under the null boundary (``theta = -margin``) this is the type-I error rate; otherwise it is power.
    Replications are drawn in blocks so 10,000 replications at n = 1319 stay within ~100 MB.
    """
    passes = 0
    for start in range(0, reps, _CHUNK):
        size = min(_CHUNK, reps - start)
        d = simulate_paired_differences(n, model, size, rng)
        passes += int(batch_noninferior(method, d, margin, alpha).sum())
    rate = passes / reps
    return PassRate(
        method=method,
        n=n,
        difference=model.difference,
        discordance=model.discordance,
        margin=margin,
        alpha=alpha,
        reps=reps,
        rate=rate,
        mc_se=math.sqrt(max(rate * (1.0 - rate), 1e-12) / reps),
    )


def null_error_rate(
    method: str, n: int, margin: float, discordance: float, alpha: float, reps: int, rng: np.random.Generator
) -> PassRate:
    """Type-I error at the null boundary ``theta = -margin``: should be <= alpha (up to MC error)."""
    return pass_rate(
        method, n, DiscordanceModel.from_difference(-margin, discordance), margin, alpha, reps, rng
    )


def minimum_detectable_difference(
    method: str,
    n: int,
    margin: float,
    alpha: float,
    discordance: float,
    rng: np.random.Generator,
    power: float = 0.8,
    reps: int = 1000,
    tol: float = 2e-4,
) -> float:
    """Smallest true difference theta at which ``method`` claims noninferiority with probability >= power.

    Bisection on theta in ``[-margin, discordance]`` with common random numbers (one ``(reps, n)``
    uniform draw reused for every theta). Returns ``nan`` if even ``theta = discordance`` is not enough.
    """
    uniforms = rng.random((reps, n))

    def enough(theta: float) -> bool:
        model = DiscordanceModel.from_difference(theta, discordance)
        return _pass_rate_from_uniforms(method, uniforms, model, margin, alpha) >= power

    lo, hi = -margin, discordance
    if not enough(hi):
        return float("nan")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


def required_n(
    method: str,
    difference: float,
    margin: float,
    alpha: float,
    discordance: float,
    rng: np.random.Generator,
    power: float = 0.8,
    reps: int = 1000,
    n_max: int = 200_000,
) -> int | None:
    """Smallest n at which ``method`` claims noninferiority with probability >= power at ``difference``.

    Doubling search then integer bisection, on nested samples (the first n columns of one growing
    uniform draw). Returns ``None`` if n_max items are not enough.
    """
    model = DiscordanceModel.from_difference(difference, discordance)
    n = 16
    uniforms = rng.random((reps, n))

    def enough(size: int) -> bool:
        return _pass_rate_from_uniforms(method, uniforms[:, :size], model, margin, alpha) >= power

    while not enough(n):
        if n >= n_max:
            return None
        n = min(2 * n, n_max)
        uniforms = np.concatenate([uniforms, rng.random((reps, n - uniforms.shape[1]))], axis=1)
    lo, hi = n // 2, n  # lo fails (or is below the first size tried), hi passes
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


def hoeffding_clearing_difference(n: int, margin: float, alpha: float) -> float:
    """Observed mean difference needed for the Hoeffding rule to clear ``-margin`` on 0/1 items.

    ``d̄ > -margin + sqrt(2 ln(1/alpha)/n)``; at n = 1319, alpha = 0.05, margin = 0.03 this is +0.037.
    """
    return -margin + hoeffding_half_width(n, alpha)


def power_curve(
    n: int,
    margin: float,
    alpha: float,
    discordance_rates: Sequence[float],
    differences: Sequence[float],
    rng: np.random.Generator,
    reps: int = 1000,
    methods: Sequence[str] = METHODS,
) -> pd.DataFrame:
    """Tidy table of pass rates: one row per (method, discordance, difference), common random numbers."""
    rows = []
    for r in discordance_rates:
        uniforms = rng.random((reps, n))
        for theta in differences:
            if abs(theta) > r:
                continue
            model = DiscordanceModel.from_difference(theta, r)
            for method in methods:
                rate = _pass_rate_from_uniforms(method, uniforms, model, margin, alpha)
                rows.append({"method": method, "discordance": r, "difference": theta, "pass_rate": rate})
    return pd.DataFrame(rows)


def minimum_detectable_difference_table(
    n: int,
    margin: float,
    alpha: float,
    discordance_rates: Sequence[float],
    rng: np.random.Generator,
    power: float = 0.8,
    reps: int = 1000,
    methods: Sequence[str] = METHODS,
) -> pd.DataFrame:
    """Minimum detectable difference per method (rows) and discordance rate (columns)."""
    rows = []
    for method in methods:
        row: dict[str, object] = {"method": method}
        for r in discordance_rates:
            row[f"r={r:g}"] = minimum_detectable_difference(method, n, margin, alpha, r, rng, power, reps)
        rows.append(row)
    return pd.DataFrame(rows)


def coverage_table(
    n: int,
    margin: float,
    alpha: float,
    discordance: float,
    rng: np.random.Generator,
    reps: int = 10_000,
    methods: Sequence[str] = METHODS,
) -> pd.DataFrame:
    """Type-I error rate of every method at the null boundary, with Monte Carlo standard errors."""
    rows = []
    for method in methods:
        result = null_error_rate(method, n, margin, discordance, alpha, reps, rng)
        rows.append(
            {"method": method, "error_rate": result.rate, "mc_se": result.mc_se, "reps": reps, "alpha": alpha}
        )
    return pd.DataFrame(rows)
