"""Power, coverage and planning for paired noninferiority (``docs/statistics.md`` §3.3).

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
from scipy import stats as sps

from rftlab.analysis.noninferiority import (
    COUNT_ONLY,
    METHODS,
    MIN_DISCORDANT,
    batch_noninferior,
    hoeffding_half_width,
    tango_score_statistic,
)

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


def pass_rates(
    method: str,
    n: int,
    margin: float,
    alpha: float,
    differences: Sequence[float],
    discordance: float,
    rng: np.random.Generator | None = None,
    reps: int | None = None,
) -> list[PassRate]:
    """P(noninferiority claimed) at each true difference, for one discordance rate (``docs/statistics.md``
    §3.3): exact for a count-only method (a trinomial sum: ``reps`` 0, ``mc_se`` 0), else Monte Carlo on
    common random numbers (one ``(reps, n)`` uniform draw serves every difference; ``reps`` defaults to
    ``mc_reps_for(0.01, 0.8)`` = 6,400) with its standard error."""
    models = [DiscordanceModel.from_difference(d, discordance) for d in differences]
    if method in COUNT_ONLY:
        rates = [(exact_pass_rate(method, n, m, margin, alpha), 0.0) for m in models]
        used = 0
    else:
        if rng is None:
            raise ValueError("a Monte Carlo pass rate needs an explicit numpy.random.Generator")
        used = mc_reps_for(0.01, 0.8) if reps is None else int(reps)
        uniforms = rng.random((used, n), dtype=np.float32)
        rates = []
        for m in models:
            rate = _pass_rate_from_uniforms(method, uniforms, m, margin, alpha)
            rates.append((rate, math.sqrt(rate * (1.0 - rate) / used)))
    return [
        PassRate(method, n, m.difference, m.discordance, margin, alpha, used, rate, se)
        for m, (rate, se) in zip(models, rates, strict=True)
    ]


def null_error_rate(
    method: str, n: int, margin: float, discordance: float, alpha: float, reps: int, rng: np.random.Generator
) -> PassRate:
    """Type-I error at the null boundary ``theta = -margin``: should be <= alpha (up to MC error)."""
    return pass_rate(
        method, n, DiscordanceModel.from_difference(-margin, discordance), margin, alpha, reps, rng
    )


# --------------------------------------------------------------------------------------------------
# Exact power for the count-only bounds: sum over the trinomial distribution of (#(+1), #(-1))
# --------------------------------------------------------------------------------------------------

EXACT_TAIL = 1e-13  # probability mass left out at each end of each binomial when summing the trinomial


def count_lower_bounds(
    method: str, n_plus: np.ndarray, n_minus: np.ndarray, n: int, alpha: float
) -> np.ndarray:
    """Lower bounds of a count-only method from the counts of a paired 0/1 sample (``d`` in {-1, 0, 1}).

    Equal (up to rounding) to ``batch_lower_bounds(method, d, alpha)`` for any ``d`` with these counts:
    Hoeffding needs ``d̄``; Maurer–Pontil and paired t need ``d̄`` and ``Σ d² = #(+1) + #(-1)``; Tango
    needs the two counts. ``nan`` where an asymptotic method makes no claim (degenerate sample).
    """
    if method not in COUNT_ONLY:
        raise ValueError(f"{method!r} depends on the order of the items; use a simulation")
    b = np.asarray(n_plus, dtype=float)
    c = np.asarray(n_minus, dtype=float)
    mean = (b - c) / n
    if method == "hoeffding":
        return np.maximum(mean - hoeffding_half_width(n, alpha), -1.0)
    var = np.maximum((b + c - n * mean**2) / (n - 1), 0.0) if n > 1 else np.zeros_like(mean)
    if method == "empirical_bernstein":
        if n < 2:
            return np.full(mean.shape, -1.0)
        log_term = math.log(2.0 / alpha)
        lcb_x = (
            (mean + 1.0) / 2.0 - np.sqrt(2.0 * (var / 4.0) * log_term / n) - 7.0 * log_term / (3.0 * (n - 1))
        )
        return -1.0 + 2.0 * np.clip(lcb_x, 0.0, 1.0)
    degenerate = (b + c) < MIN_DISCORDANT
    if method == "paired_t":
        degenerate |= (b + c == 0) | (b == n) | (c == n) | (n < 2)
        if n < 2:
            return np.full(mean.shape, np.nan)
        lower = np.maximum(mean - sps.t.ppf(1.0 - alpha, n - 1) * np.sqrt(var / n), -1.0)
        return np.where(degenerate, np.nan, lower)
    # tango: bisection of the score statistic, as in noninferiority._tango_batch
    z_crit = sps.norm.ppf(1.0 - alpha)
    lo, hi = np.full(mean.shape, -1.0), mean.copy()
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        rejected = tango_score_statistic(b, c, n, mid) > z_crit
        lo = np.where(rejected, mid, lo)
        hi = np.where(rejected, hi, mid)
    return np.where(degenerate, np.nan, lo)


def count_noninferior(
    method: str, n_plus: np.ndarray, n_minus: np.ndarray, n: int, margin: float, alpha: float
) -> np.ndarray:
    """Is noninferiority claimed on a paired 0/1 sample with these counts? (Tango tests -margin directly.)"""
    if method == "tango":
        b = np.asarray(n_plus, dtype=float)
        c = np.asarray(n_minus, dtype=float)
        z = tango_score_statistic(b, c, n, np.full(np.broadcast(b, c).shape, -margin))
        return (z > sps.norm.ppf(1.0 - alpha)) & ((b + c) >= MIN_DISCORDANT)
    return count_lower_bounds(method, n_plus, n_minus, n, alpha) > -margin


def trinomial_grid(n: int, model: DiscordanceModel, tail: float = EXACT_TAIL) -> tuple[np.ndarray, ...]:
    """``(n_plus, n_minus, probability)`` over the counts that carry all but ~4·tail of the mass.

    ``#(+1) ~ Binomial(n, p_plus)`` and, given it, ``#(-1) ~ Binomial(n - #(+1), p_minus/(1 - p_plus))``;
    each count is summed between its ``tail`` and ``1 - tail`` quantiles.
    """
    b_lo, b_hi = (int(v) for v in sps.binom.ppf([tail, 1.0 - tail], n, model.p_plus))
    c_lo, c_hi = (int(v) for v in sps.binom.ppf([tail, 1.0 - tail], n, model.p_minus))
    b_lo, c_lo = max(b_lo - 1, 0), max(c_lo - 1, 0)
    b, c = np.meshgrid(np.arange(b_lo, b_hi + 1), np.arange(c_lo, min(c_hi, n) + 1), indexing="ij")
    keep = b + c <= n
    b, c = b[keep], c[keep]
    q = model.p_minus / (1.0 - model.p_plus) if model.p_plus < 1.0 else 0.0
    prob = sps.binom.pmf(b, n, model.p_plus) * sps.binom.pmf(c, n - b, min(q, 1.0))
    return b, c, prob


def exact_pass_rate(method: str, n: int, model: DiscordanceModel, margin: float, alpha: float) -> float:
    """P(noninferiority claimed) for a count-only method, by summing the trinomial distribution.

    Exact up to the ~1e-12 of probability mass outside ``trinomial_grid`` (and float rounding).
    """
    b, c, prob = trinomial_grid(n, model)
    return float(np.sum(prob * count_noninferior(method, b, c, n, margin, alpha)))


def exact_probability_text(p: float) -> str:
    """An ``exact_pass_rate`` for a table: 5 decimals from 1e-5, ``1.2e-07`` style below, and ``< 1e-12``
    below the mass the trinomial grid leaves out (``EXACT_TAIL``), where the sum cannot tell a value from 0."""
    if not 0.0 <= p <= 1.0 + 1e-12:
        raise ValueError(f"a probability must lie in [0, 1], got {p!r}")
    if p < 4 * EXACT_TAIL:
        return f"< {4 * EXACT_TAIL:.0e}"
    return f"{p:.5f}" if p >= 1e-5 else f"{p:.1e}"


def mc_reps_for(precision: float = 0.01, power: float = 0.8) -> int:
    """Replications so that two Monte Carlo standard errors of a rate near ``power`` are <= precision."""
    return int(math.ceil(power * (1.0 - power) / (precision / 2.0) ** 2))


@dataclass(frozen=True)
class PowerSearch:
    """Result of a power search: the value found and the power achieved there.

    ``exact`` searches (count-only bounds) have ``mc_se = 0`` and ``reps = 0``; Monte Carlo searches
    report the standard error of ``achieved_power`` at ``value`` over ``reps`` replications.
    """

    method: str
    value: float | int | None
    achieved_power: float
    mc_se: float
    reps: int
    exact: bool


def minimum_detectable_difference(
    method: str,
    n: int,
    margin: float,
    alpha: float,
    discordance: float,
    rng: np.random.Generator | None = None,
    power: float = 0.8,
    reps: int | None = None,
    tol: float = 2e-4,
    exact: bool | None = None,
) -> PowerSearch:
    """Smallest true difference theta at which ``method`` claims noninferiority with probability >= power.

    Bisection on theta in ``[max(-margin, -discordance), discordance]`` (a discordance rate below the
    margin allows no theta below ``-discordance``). Count-only methods (``COUNT_ONLY``) are exact by
    default (``exact_pass_rate``; ``tol`` then 1e-5 of theta). Order-dependent methods are simulated
    with common random numbers (one ``(reps, n)`` uniform draw reused for every theta); ``reps``
    defaults to ``mc_reps_for(0.01, power)`` = 6,400 so the power claim holds within ±0.01 (2 MC SE).
    ``value`` is ``None`` if even ``theta = discordance`` is not enough.
    """
    exact = method in COUNT_ONLY if exact is None else exact
    if exact:

        def rate(theta: float) -> float:
            return exact_pass_rate(
                method, n, DiscordanceModel.from_difference(theta, discordance), margin, alpha
            )

        tol, reps_used = min(tol, 1e-5), 0
    else:
        if rng is None:
            raise ValueError("a Monte Carlo search needs an explicit numpy.random.Generator")
        reps_used = mc_reps_for(0.01, power) if reps is None else reps
        uniforms = rng.random((reps_used, n), dtype=np.float32)

        def rate(theta: float) -> float:
            model = DiscordanceModel.from_difference(theta, discordance)
            return _pass_rate_from_uniforms(method, uniforms, model, margin, alpha)

    lo, hi = max(-margin, -discordance), discordance  # |theta| <= r: below r < margin, theta >= -r
    hi_rate = rate(hi)
    if hi_rate < power:
        return PowerSearch(method, None, hi_rate, _se(hi_rate, reps_used), reps_used, exact)
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        mid_rate = rate(mid)
        if mid_rate >= power:
            hi, hi_rate = mid, mid_rate
        else:
            lo = mid
    return PowerSearch(method, hi, hi_rate, _se(hi_rate, reps_used), reps_used, exact)


def _se(rate: float, reps: int) -> float:
    return math.sqrt(rate * (1.0 - rate) / reps) if reps else 0.0


def required_n(
    method: str,
    difference: float,
    margin: float,
    alpha: float,
    discordance: float,
    rng: np.random.Generator | None = None,
    power: float = 0.8,
    reps: int | None = None,
    n_max: int = 200_000,
    n_min: int = 2,
    n_hint: int | None = None,
    exact: bool | None = None,
) -> PowerSearch:
    """Smallest n at which ``method`` claims noninferiority with probability >= power at ``difference``.

    Every end of the search is checked: ``n_min`` (or ``n_hint``) first (returned if it passes), then
    the size grows by x1.25 (with a hint) or x2 until one passes, then integer bisection between the
    last failing and the first passing size. Discrete tests have power that is not monotone in n (a
    saw-tooth), so the result is the first crossing on this search path and ``achieved_power`` is the
    power at the returned n. Count-only methods are exact; order-dependent ones are simulated on
    nested samples (the first n columns of one growing draw) with ``reps`` (default 6,400: ±0.01).
    ``value`` is ``None`` if ``n_max`` items are not enough.
    """
    model = DiscordanceModel.from_difference(difference, discordance)
    exact = method in COUNT_ONLY if exact is None else exact
    reps_used = 0 if exact else (mc_reps_for(0.01, power) if reps is None else reps)
    rate = _pass_rate_at(method, model, margin, alpha, exact, reps_used, rng)
    n, n_rate = _first_passing_size(rate, power, n_min, n_max, n_hint)
    return PowerSearch(method, n, n_rate, _se(n_rate, reps_used), reps_used, exact)


def _pass_rate_at(method, model, margin, alpha, exact: bool, reps: int, rng):
    """``rate(n)``: the probability that ``method`` passes at ``n`` items — exact for count-only methods,
    else simulated with ``reps`` repetitions on nested samples (the first ``n`` columns of one growing
    draw, so sizes share their randomness)."""
    draws = np.zeros((reps, 0), dtype=np.int8)

    def rate(size: int) -> float:
        nonlocal draws
        if exact:
            return exact_pass_rate(method, size, model, margin, alpha)
        if rng is None:
            raise ValueError("a Monte Carlo search needs an explicit numpy.random.Generator")
        if draws.shape[1] < size:
            extra = differences_from_uniforms(
                rng.random((reps, size - draws.shape[1]), dtype=np.float32), model
            )
            draws = np.concatenate([draws, extra.astype(np.int8)], axis=1)
        passes = 0
        for start in range(0, reps, _CHUNK):
            d = draws[start : start + _CHUNK, :size].astype(float)
            passes += int(batch_noninferior(method, d, margin, alpha).sum())
        return passes / reps

    return rate


def _first_passing_size(rate, power: float, n_min: int, n_max: int, n_hint: int | None):
    """``(n, rate(n))`` for the first size on the search path of ``required_n`` whose rate reaches
    ``power`` (``n`` is ``None``, with the last rate, when ``n_max`` fails)."""
    growth = 1.25 if n_hint is not None else 2.0
    n = max(n_min, 2) if n_hint is None else max(n_hint, n_min, 2)
    n_rate = rate(n)
    if n_rate >= power and n_hint is not None and n > n_min:
        # the hint passes: walk down until a size fails (or n_min passes)
        while n > n_min:
            smaller = max(n_min, int(n / growth))
            smaller_rate = rate(smaller)
            if smaller_rate < power:
                lo = smaller
                break
            n, n_rate = smaller, smaller_rate
        else:
            return n, n_rate
    elif n_rate >= power:
        return n, n_rate
    else:
        lo = n  # checked: fails
        while True:
            if n >= n_max:
                return None, n_rate
            n = min(max(int(n * growth), n + 1), n_max)
            n_rate = rate(n)
            if n_rate >= power:
                break
            lo = n
    hi, hi_rate = n, n_rate  # lo fails, hi passes: both checked
    while hi - lo > 1:
        mid = (lo + hi) // 2
        mid_rate = rate(mid)
        if mid_rate >= power:
            hi, hi_rate = mid, mid_rate
        else:
            lo = mid
    return hi, hi_rate


def hoeffding_power_by_size(
    sizes: Sequence[int], model: DiscordanceModel, margin: float, alpha: float, tail: float = EXACT_TAIL
) -> np.ndarray:
    """Exact P(Hoeffding claims noninferiority) at each n of ``sizes``, one O(√n) sum per size.

    Hoeffding passes iff ``#(+1) − #(−1) > n·c(n)`` with ``c(n) = hoeffding_clearing_difference(n, ...)``.
    With ``B = #(+1) ~ Binomial(n, p_plus)`` and ``C | B = b ~ Binomial(n − b, p_minus/(1 − p_plus))`` the
    probability is ``Σ_b P(B = b)·P(C ≤ ⌈b − n·c(n)⌉ − 1 | b)``, summed over the ``b`` between the ``tail``
    quantiles (as ``trinomial_grid``). A second computation beside ``exact_pass_rate``'s grid sum, fast
    enough to scan every size up to tens of thousands (``sizes_reaching_power``)."""
    ns = np.asarray([int(n) for n in sizes], dtype=np.int64)
    if ns.size and ns.min() < 1:
        raise ValueError(f"sizes must be >= 1, got {int(ns[np.argmax(ns < 1)])}")
    q = model.p_minus / (1.0 - model.p_plus) if model.p_plus < 1.0 else 0.0
    # every size's b range at once (the same elementwise pmf and cdf), then one sum per size's slice
    quantiles = sps.binom.ppf(np.array([[tail], [1.0 - tail]]), ns, model.p_plus)
    b_lo = np.maximum(quantiles[0].astype(np.int64) - 1, 0)
    counts = np.maximum(quantiles[1].astype(np.int64) - b_lo + 1, 0)
    starts = np.cumsum(counts) - counts
    which = np.repeat(np.arange(ns.size), counts)
    b = np.arange(int(counts.sum()), dtype=np.int64) - starts[which] + b_lo[which]
    clearing = np.array([hoeffding_clearing_difference(int(n), margin, alpha) for n in ns])
    n_b = ns[which]
    need = b - n_b * clearing[which]  # C must be strictly below this
    terms = sps.binom.pmf(b, n_b, model.p_plus) * sps.binom.cdf(np.ceil(need) - 1, n_b - b, min(q, 1.0))
    return np.array([float(np.sum(terms[s : s + c])) for s, c in zip(starts, counts, strict=True)])


@dataclass(frozen=True)
class PowerThresholds:
    """The two readings of "items needed for power ``target``" over a scan of every size ``n_min..n_max``.

    ``first_n``: the smallest scanned n whose power reaches ``target``. ``from_then_on_n``: the smallest n
    from which **every** scanned size up to ``n_max`` reaches it (a discrete test's power is a saw-tooth in
    n, so a size just above ``first_n`` can fall back below). ``None`` when no size (or the last) fails.
    ``power_first`` / ``power_from_then_on`` are the powers at those sizes; ``dips`` counts the scanned
    sizes above ``first_n`` that fall below ``target``."""

    target: float
    n_min: int
    n_max: int
    first_n: int | None
    from_then_on_n: int | None
    power_first: float | None
    power_from_then_on: float | None
    dips: int


def sizes_reaching_power(
    sizes: Sequence[int], powers: Sequence[float], target: float = 0.8
) -> PowerThresholds:
    """``PowerThresholds`` of a scan: ``sizes`` must be every integer of one range, in order."""
    n = np.asarray(sizes, dtype=int)
    p = np.asarray(powers, dtype=float)
    if len(n) == 0 or len(n) != len(p) or np.any(np.diff(n) != 1):
        raise ValueError("sizes_reaching_power needs one power per size, over consecutive sizes")
    reached = p >= target
    hits = np.flatnonzero(reached)
    if len(hits) == 0:
        return PowerThresholds(target, int(n[0]), int(n[-1]), None, None, None, None, 0)
    first = int(hits[0])
    misses = np.flatnonzero(~reached)
    tail_start = int(misses[-1]) + 1 if len(misses) else 0
    stays = tail_start < len(n)
    return PowerThresholds(
        target=target,
        n_min=int(n[0]),
        n_max=int(n[-1]),
        first_n=int(n[first]),
        from_then_on_n=int(n[tail_start]) if stays else None,
        power_first=float(p[first]),
        power_from_then_on=float(p[tail_start]) if stays else None,
        dips=int(np.count_nonzero(~reached[first:])),
    )


def hoeffding_required_n_readings(
    difference: float,
    margin: float,
    alpha: float,
    discordance: float,
    power: float = 0.8,
    n_max: int = 20_000,
) -> PowerThresholds:
    """Both readings of the items Hoeffding needs (``PowerThresholds``), from its exact power at every size
    ``2..n_max`` (``hoeffding_power_by_size``)."""
    model = DiscordanceModel.from_difference(difference, discordance)
    sizes = list(range(2, n_max + 1))
    powers = hoeffding_power_by_size(sizes, model, margin, alpha).tolist()
    return sizes_reaching_power(sizes, powers, power)


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
    exact: bool = True,
) -> pd.DataFrame:
    """Tidy table of pass rates: one row per (method, discordance, difference).

    Count-only methods are exact when ``exact`` (``mc_se`` 0); the others use ``reps`` common random
    numbers per discordance rate, with their Monte Carlo standard error.
    """
    rows = []
    for r in discordance_rates:
        uniforms = rng.random((reps, n), dtype=np.float32)
        for theta in differences:
            if abs(theta) > r:
                continue
            model = DiscordanceModel.from_difference(theta, r)
            for method in methods:
                if exact and method in COUNT_ONLY:
                    rate, se = exact_pass_rate(method, n, model, margin, alpha), 0.0
                else:
                    rate = _pass_rate_from_uniforms(method, uniforms, model, margin, alpha)
                    se = _se(rate, reps)
                rows.append(
                    {
                        "method": method,
                        "discordance": r,
                        "difference": theta,
                        "pass_rate": rate,
                        "mc_se": se,
                        "exact": bool(exact and method in COUNT_ONLY),
                    }
                )
    return pd.DataFrame(rows)


def minimum_detectable_difference_table(
    n: int,
    margin: float,
    alpha: float,
    discordance_rates: Sequence[float],
    rng: np.random.Generator,
    power: float = 0.8,
    reps: int | None = None,
    methods: Sequence[str] = METHODS,
) -> pd.DataFrame:
    """Tidy minimum-detectable-difference table: one row per (method, discordance rate).

    Columns: ``mdd``, ``achieved_power`` (at the mdd), ``mc_se`` (0 when exact), ``reps``, ``exact``.
    """
    rows = []
    for method in methods:
        for r in discordance_rates:
            found = minimum_detectable_difference(method, n, margin, alpha, r, rng, power, reps)
            rows.append(
                {
                    "method": method,
                    "discordance": r,
                    "mdd": found.value,
                    "achieved_power": found.achieved_power,
                    "mc_se": found.mc_se,
                    "reps": found.reps,
                    "exact": found.exact,
                }
            )
    return pd.DataFrame(rows)


def coverage_table(
    n: int,
    margin: float,
    alpha: float,
    discordance: float,
    rng: np.random.Generator,
    reps: int = 10_000,
    methods: Sequence[str] = METHODS,
    exact: bool = False,
) -> pd.DataFrame:
    """Type-I error rate of every method at the null boundary, with Monte Carlo standard errors.

    With ``exact``, count-only methods are summed over the trinomial distribution (``mc_se`` 0).
    """
    rows = []
    model = DiscordanceModel.from_difference(-margin, discordance)
    for method in methods:
        if exact and method in COUNT_ONLY:
            rate, se, used = exact_pass_rate(method, n, model, margin, alpha), 0.0, 0
        else:
            result = null_error_rate(method, n, margin, discordance, alpha, reps, rng)
            rate, se, used = result.rate, result.mc_se, reps
        rows.append(
            {
                "method": method,
                "error_rate": rate,
                "mc_se": se,
                "reps": used,
                "alpha": alpha,
                "exact": bool(exact and method in COUNT_ONLY),
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class DegenerateSampleAnatomy:
    """Where the small-sample error of the paired t test comes from (exact, trinomial sum).

    At the null boundary with few discordant pairs, the *unguarded* paired t (no degeneracy rule: a
    zero-variance sample gives a zero-width interval at its mean) claims noninferiority on essentially
    every sample that has no ``-1``. ``p_no_minus = (1 - p_minus)^n`` is that probability;
    ``p_all_ties = (1 - r)^n`` the part with no discordant pair at all; ``unguarded_error`` the
    unguarded test's exact error; ``guarded_error`` the error of ``paired_t`` as implemented (no claim
    from fewer than ``MIN_DISCORDANT`` discordant pairs or zero variance).
    """

    n: int
    discordance: float
    p_minus: float
    p_no_minus: float
    p_all_ties: float
    unguarded_error: float
    guarded_error: float


def degenerate_sample_anatomy(
    n: int, margin: float, alpha: float, discordance: float
) -> DegenerateSampleAnatomy:
    """Exact decomposition of the paired t error at ``theta = -margin`` (see the class docstring)."""
    model = DiscordanceModel.from_difference(-margin, discordance)
    b, c, prob = trinomial_grid(n, model)
    mean = (b - c) / n
    var = np.maximum((b + c - n * mean**2) / (n - 1), 0.0)
    unguarded = mean - sps.t.ppf(1.0 - alpha, n - 1) * np.sqrt(var / n) > -margin
    return DegenerateSampleAnatomy(
        n=n,
        discordance=discordance,
        p_minus=model.p_minus,
        p_no_minus=float((1.0 - model.p_minus) ** n),
        p_all_ties=float((1.0 - discordance) ** n),
        unguarded_error=float(np.sum(prob * unguarded)),
        guarded_error=exact_pass_rate("paired_t", n, model, margin, alpha),
    )


def exact_pass_rate_grid(
    method: str,
    n: int,
    margin: float,
    alpha: float,
    differences: Sequence[float],
    discordance_rates: Sequence[float],
) -> pd.DataFrame:
    """Exact P(noninferiority claimed) of a count-only ``method`` at each (true difference, discordance)
    pair with ``|difference| <= discordance``: one row per pair with ``difference``, ``discordance``,
    ``pass_rate`` (``exact_pass_rate``). What a pre-registered rule will decide at a planned n — e.g.
    how often the GS1 Hoeffding rule passes two equally good arms (docs/statistics.md §3.4)."""
    if method not in COUNT_ONLY:
        raise ValueError(f"{method!r} is order-dependent: its pass rate is simulated, not exact")
    rows = []
    for r in discordance_rates:
        for theta in differences:
            if abs(theta) > r:
                continue
            model = DiscordanceModel.from_difference(theta, r)
            rows.append({"difference": theta, "discordance": r,
                         "pass_rate": exact_pass_rate(method, n, model, margin, alpha)})  # fmt: skip
    return pd.DataFrame(rows)
