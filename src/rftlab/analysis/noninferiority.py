"""Paired noninferiority on per-item outcomes (``docs/statistics.md`` §3).

Items i = 1..n carry a difference ``d_i = y_i^B - y_i^A`` in a declared range ``[a, b]`` (0/1
correctness: ``[-1, 1]``). With margin ``delta > 0`` the hypotheses are ``H0: mu <= -delta`` vs
``H1: mu > -delta``; noninferiority is claimed iff the one-sided lower confidence bound exceeds
``-delta``.

Decisions (the same rule for every method):

* ``noninferior``  — the one-sided level-(1-alpha) **lower** bound is above ``-delta``;
* ``inferior``     — the one-sided level-(1-alpha) **upper** bound (same method, mirrored data) is
  below ``-delta``, i.e. ``H0': mu >= -delta`` is rejected at level alpha;
* ``inconclusive`` — neither: the interval ``[lower, upper]`` (a two-sided 1-2alpha interval)
  straddles ``-delta``. An inconclusive result is not a win. The asymptotic methods (paired t, Tango)
  also return ``inconclusive``, with the reason in ``note``, on a degenerate sample (zero variance, or
  fewer than ``MIN_DISCORDANT`` discordant pairs on paired 0/1 data): they claim nothing from it.

Sidedness, stated once: ``lower`` and ``upper`` are each a one-sided bound at level ``1 - alpha``
(``one_sided_level``); together they form a two-sided interval at level ``1 - 2·alpha``
(``two_sided_level``). ``alpha = 0.05`` gives 95% one-sided bounds and a 90% two-sided interval.

What "anytime-valid" means here: the betting confidence sequence is valid simultaneously over the
items of *one* comparison, so the bound may be read after every item while one evaluation streams
in. Re-evaluating a *new checkpoint* on the same items after every epoch is a new comparison each
time and is **not** covered: for repeated looks at successive checkpoints use
``rftlab.analysis.multiplicity.repeated_looks_gate`` (alpha split across a pre-declared number of looks).

Order: plug-in empirical Bernstein and betting depend on the order of the items
(``ORDER_DEPENDENT``); the order is a seeded permutation whose seed belongs in the pre-registered
spec and is recorded with every result.

Every bound is computed by a *batched* core that works on an ``(R, n)`` array (R replications), so
the same code serves one data set and a 10,000-replication coverage simulation. Bounds on the
rescaled ``x = (d - a)/(b - a)`` in [0, 1] are mapped back with ``a + (b - a)·LCB_x``; every lower
bound is clipped to ``a`` (the mean cannot be below the range).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats as sps

METHODS: tuple[str, ...] = (
    "hoeffding",
    "empirical_bernstein",
    "plugin_empirical_bernstein",
    "betting",
    "paired_t",
    "tango",
)

VALIDITY: dict[str, str] = {
    "hoeffding": "finite-sample",
    "empirical_bernstein": "finite-sample",
    "plugin_empirical_bernstein": "finite-sample (order-dependent: fixed permutation)",
    "betting": "finite-sample; anytime over the items of one comparison, not over checkpoints "
    "(order-dependent: fixed permutation)",
    "paired_t": "asymptotic",
    "tango": "asymptotic (paired binary outcomes only)",
}

# Why the betting confidence sequence is valid (Ville's inequality), and what this module checks. For each
# candidate mean m of the rescaled items x_t in [0, 1], the capital K_t(m) = prod_{i<=t}(1 + lambda_i(m)(x_i - m))
# is a nonnegative supermartingale under H0 (E x <= m) when the conditions below hold; Ville's inequality
# then gives P(sup_t K_t(m) >= 1/alpha) <= alpha, so rejecting every m whose capital reaches 1/alpha errs
# with probability at most alpha simultaneously over all t. Each entry: (condition, how it is checked).
BETTING_VALIDITY_CONDITIONS: tuple[tuple[str, str], ...] = (
    ("bounded observations: every difference lies in the declared range [a, b] (rescaled to x in [0, 1])",
     "checked at run time: a difference outside the range is refused with a ValueError"),
    ("predictable bets: lambda_t(m) depends only on the items before t",
     "by construction (plug-in mean and variance of items 1..t-1); tested: changing items t..n leaves "
     "lambda_1..lambda_t unchanged"),
    ("nonnegative capital: 0 <= lambda_t(m) <= c/m with c = 1/2, so every factor is at least 1 - c = 1/2",
     "by construction (truncation at c/m); tested on random data and every m"),
    ("the null holds item by item: E[x_t | items before t] <= m for every t",
     "assumed, not checkable from the data: the items are independent paired outcomes with mean mu, and "
     "the seeded permutation fixes their order before any outcome is seen"),
)  # fmt: skip

# Methods whose bound depends on the order of the items (a seeded permutation must be pre-registered).
ORDER_DEPENDENT: frozenset[str] = frozenset({"plugin_empirical_bernstein", "betting"})
# Methods whose bound on paired 0/1 data depends only on the counts (#(+1), #(-1)): exact power.
COUNT_ONLY: tuple[str, ...] = ("hoeffding", "empirical_bernstein", "paired_t", "tango")
# The asymptotic tests make no claim on paired 0/1 data with fewer discordant pairs than this
# (the usual rule of thumb for McNemar-type normal approximations).
MIN_DISCORDANT = 10

BET_TRUNCATION = 0.5  # c in lambda_t = min(lambda_dot_t, c) and lambda_t(m) = min(lambda_dot_t, c/m)
_BISECTION_STEPS = 40  # 2**-40 of the range: far below any margin a spec declares


def _validate(alpha: float, low: float, high: float) -> None:
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha={alpha} must be in (0, 0.5)")
    if not high > low:
        raise ValueError(f"declared range [{low}, {high}] is empty")


def _as_batch(d: np.ndarray) -> np.ndarray:
    d = np.asarray(d, dtype=float)
    if d.ndim == 1:
        d = d[None, :]
    if d.ndim != 2 or d.shape[1] == 0:
        raise ValueError("need at least one item")
    return d


def _check_range(d: np.ndarray, low: float, high: float) -> None:
    if np.any(d < low - 1e-12) or np.any(d > high + 1e-12):
        raise ValueError(f"differences outside the declared range [{low}, {high}]")


# --------------------------------------------------------------------------------------------------
# Hoeffding (the pre-registered rule of the GS1 spec)
# --------------------------------------------------------------------------------------------------


def hoeffding_half_width(
    n: int, alpha: float, low: float = -1.0, high: float = 1.0, two_sided: bool = False
) -> float:
    """Half-width ``(b - a)·sqrt(ln(k/alpha)/(2n))`` with k = 1 (one-sided) or 2 (two-sided)."""
    k = 2.0 if two_sided else 1.0
    return (high - low) * math.sqrt(math.log(k / alpha) / (2.0 * n))


def hoeffding_lower_bound(
    d: np.ndarray,
    alpha: float,
    low: float = -1.0,
    high: float = 1.0,
    item_weights: np.ndarray | None = None,
    two_sided: bool = False,
) -> float:
    """Hoeffding lower confidence bound for the mean difference; level 1-alpha, replication unit = item.

    Equal weights: ``d̄ - (b - a)·sqrt(ln(1/alpha)/(2n))``. Item weights (Σ w_i = 1):
    ``d̄_w - (b - a)·sqrt(ln(1/alpha)·Σ w_i² / 2)``. ``two_sided`` uses ln(2/alpha) (the lower end of a
    two-sided 1-alpha interval). Clipped to ``a`` (only matters for tiny n).
    """
    _validate(alpha, low, high)
    d = np.asarray(d, dtype=float)
    _check_range(d, low, high)
    k = 2.0 if two_sided else 1.0
    if item_weights is None:
        lower = float(np.mean(d) - hoeffding_half_width(d.size, alpha, low, high, two_sided))
    else:
        w = np.asarray(item_weights, dtype=float)
        if w.shape != d.shape or np.any(w < 0) or not math.isclose(float(w.sum()), 1.0, rel_tol=1e-9):
            raise ValueError("item_weights must be non-negative, one per item, and sum to 1")
        lower = float(
            np.dot(w, d) - (high - low) * math.sqrt(math.log(k / alpha) * float(np.sum(w**2)) / 2.0)
        )
    return max(lower, low)  # the mean cannot be below the declared range


def hoeffding_p_value(d: np.ndarray, margin: float, low: float = -1.0, high: float = 1.0) -> float:
    """One-sided p-value for ``H0: mu <= -margin``: ``exp(-2n(d̄ + delta)²/(b - a)²)`` if d̄ > -delta, else 1."""
    d = np.asarray(d, dtype=float)
    excess = float(np.mean(d)) + margin
    if excess <= 0:
        return 1.0
    return float(math.exp(-2.0 * d.size * excess**2 / (high - low) ** 2))


def _hoeffding_batch(x: np.ndarray, alpha: float) -> np.ndarray:
    return x.mean(axis=1) - math.sqrt(math.log(1.0 / alpha) / (2.0 * x.shape[1]))


# --------------------------------------------------------------------------------------------------
# Maurer & Pontil (2009), Theorem 4: empirical Bernstein
# --------------------------------------------------------------------------------------------------


def _empirical_bernstein_batch(x: np.ndarray, alpha: float) -> np.ndarray:
    """``x̄ - sqrt(2·V_n·ln(2/alpha)/n) - 7·ln(2/alpha)/(3(n-1))``, V_n the unbiased sample variance.

    Theorem 4 of Maurer & Pontil (2009) is a one-sided statement at level 1-delta whose ln(2/delta)
    comes from a union bound over the Bernstein step and the variance step; this is that constant.
    """
    n = x.shape[1]
    if n < 2:
        return np.zeros(x.shape[0])
    log_term = math.log(2.0 / alpha)
    var = x.var(axis=1, ddof=1)
    return x.mean(axis=1) - np.sqrt(2.0 * var * log_term / n) - 7.0 * log_term / (3.0 * (n - 1))


# --------------------------------------------------------------------------------------------------
# Waudby-Smith & Ramdas (JRSSB 2024): predictable plug-in empirical Bernstein and betting
# --------------------------------------------------------------------------------------------------


def _plugin_moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predictable mean and variance estimates ``(mu_hat_{t-1}, sigma2_hat_{t-1})`` for t = 1..n.

    ``mu_hat_t = (1/2 + Σ_{i<=t} x_i)/(t+1)``, ``sigma2_hat_t = (1/4 + Σ_{i<=t}(x_i - mu_hat_i)²)/(t+1)``.
    The arrays are the size of ``x`` (a Monte Carlo batch), so each step works in place.
    """
    n = x.shape[1]
    t_plus_1 = np.arange(2, n + 2, dtype=float)
    mu_hat = np.cumsum(x, axis=1)  # mu_hat_t, t = 1..n
    mu_hat += 0.5
    mu_hat /= t_plus_1
    sigma2_hat = np.subtract(x, mu_hat)
    np.square(sigma2_hat, out=sigma2_hat)
    np.cumsum(sigma2_hat, axis=1, out=sigma2_hat)
    sigma2_hat += 0.25
    sigma2_hat /= t_plus_1
    return _shifted(mu_hat, 0.5), _shifted(sigma2_hat, 0.25)


def _shifted(a: np.ndarray, first: float) -> np.ndarray:
    """``a`` one step later along its rows: ``first``, then ``a[:, :-1]``."""
    out = np.empty_like(a)
    out[:, 0] = first
    out[:, 1:] = a[:, :-1]
    return out


def _plugin_lambdas(x: np.ndarray, alpha: float, horizon: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Predictable bets ``lambda_dot_t = sqrt(2 ln(1/alpha)/(horizon·sigma2_hat_{t-1}))`` (untruncated)."""
    mu_prev, lam = _plugin_moments(x)
    horizon = x.shape[1] if horizon is None else horizon
    lam *= horizon
    np.divide(2.0 * math.log(1.0 / alpha), lam, out=lam)
    np.sqrt(lam, out=lam)
    return lam, mu_prev


def _plugin_empirical_bernstein_batch(x: np.ndarray, alpha: float) -> np.ndarray:
    """``(Σ λ_i x_i - ln(1/alpha) - Σ v_i psi_E(λ_i)) / Σ λ_i`` with λ_i truncated at c = 1/2."""
    lam, mu_prev = _plugin_lambdas(x, alpha, None)
    np.minimum(lam, BET_TRUNCATION, out=lam)
    v = np.subtract(x, mu_prev, out=mu_prev)
    np.square(v, out=v)
    v *= 4.0
    psi = np.negative(lam)
    np.log1p(psi, out=psi)
    np.negative(psi, out=psi)
    psi -= lam
    psi /= 4.0
    v *= psi
    v_psi = v.sum(axis=1)
    lam_x = np.multiply(lam, x, out=psi).sum(axis=1)
    return (lam_x - math.log(1.0 / alpha) - v_psi) / lam.sum(axis=1)


def _betting_max_log_capital(
    x: np.ndarray, lam_dot: np.ndarray, m: np.ndarray, not_seen: np.ndarray | None = None
) -> np.ndarray:
    """``max_{t<=n} log K_t(m)`` with ``K_t(m) = Π_{i<=t}(1 + λ_i(m)(x_i - m))``, λ_i(m) = min(λ̇_i, c/m).

    One m per row; ``not_seen`` (same shape as the capital) masks times excluded from the maximum.
    """
    m = m[:, None]
    with np.errstate(divide="ignore"):
        cap = np.where(m > 0, BET_TRUNCATION / np.maximum(m, 1e-300), np.inf)
    log_capital = np.subtract(x, m)
    log_capital *= np.minimum(lam_dot, cap)
    np.log1p(log_capital, out=log_capital)
    np.cumsum(log_capital, axis=1, out=log_capital)
    if not_seen is not None:
        np.copyto(log_capital, -np.inf, where=not_seen)
    return np.maximum(log_capital.max(axis=1), 0.0)  # K_0 = 1


def _betting_batch(x: np.ndarray, alpha: float, horizon: int | None = None) -> np.ndarray:
    """Lower end of the betting confidence sequence at time n (running intersection over t <= n).

    m is rejected at time t when ``K_t(m) >= 1/alpha`` (Ville's inequality makes this anytime-valid).
    Each factor of ``K_t(m)`` is non-increasing in m, so the rejected set is an interval ``[0, L)``
    and bisection on m is exact: the returned value is always a rejected m (conservative side).
    """
    lam_dot, _ = _plugin_lambdas(x, alpha, horizon)
    threshold = math.log(1.0 / alpha)
    lo = np.zeros(x.shape[0])  # rejected (or the floor 0)
    hi = np.ones(x.shape[0])  # never rejected: every factor <= 1 at m = 1
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        rejected = _betting_max_log_capital(x, lam_dot, mid) >= threshold
        lo = np.where(rejected, mid, lo)
        hi = np.where(rejected, hi, mid)
    return lo


def betting_anytime_p_value(x: np.ndarray, m0: float, alpha: float, horizon: int | None = None) -> np.ndarray:
    """P-value ``min(1, 1/max_t K_t(m0))`` for ``H0: E x <= m0`` (bets tuned for alpha).

    Anytime-valid over the items of one comparison (Ville), not over repeated checkpoints.
    """
    x = _as_batch(x)
    lam_dot, _ = _plugin_lambdas(x, alpha, horizon)
    return np.minimum(1.0, np.exp(-_betting_max_log_capital(x, lam_dot, np.full(x.shape[0], m0))))


# --------------------------------------------------------------------------------------------------
# Asymptotic references: paired t and Tango's score test
# --------------------------------------------------------------------------------------------------


def _is_ternary(d: np.ndarray) -> bool:
    return bool(np.all((d == -1.0) | (d == 0.0) | (d == 1.0)))


def asymptotic_degenerate_reason(method: str, d: np.ndarray) -> str:
    """Why an asymptotic method (paired t, Tango) claims nothing from ``d`` ('' if it applies).

    Paired t needs n >= 2 and a non-zero sample variance; on paired 0/1 data (differences in
    {-1, 0, 1}) both paired t and Tango need at least ``MIN_DISCORDANT`` discordant pairs.
    """
    d = np.asarray(d, dtype=float)
    if method == "paired_t":
        if d.size < 2:
            return "the paired t test needs at least 2 items"
        if float(np.ptp(d)) == 0.0:
            return "degenerate sample: zero variance (every item has the same difference)"
    if method in ("paired_t", "tango") and _is_ternary(d):
        discordant = int(np.sum(d != 0.0))
        if discordant < MIN_DISCORDANT:
            return (
                f"degenerate sample: {discordant} discordant pair(s) < {MIN_DISCORDANT}; "
                "the normal approximation cannot be trusted"
            )
    return ""


def _asymptotic_degenerate_rows(method: str, d: np.ndarray) -> np.ndarray:
    """Rows of a batch on which the asymptotic ``method`` makes no claim (see the function above)."""
    degenerate = np.zeros(d.shape[0], dtype=bool)
    if method == "paired_t":
        degenerate |= d.shape[1] < 2
        degenerate |= np.ptp(d, axis=1) == 0.0
    ternary = np.all((d == -1.0) | (d == 0.0) | (d == 1.0), axis=1)
    degenerate |= ternary & ((d != 0.0).sum(axis=1) < MIN_DISCORDANT)
    return degenerate


def _paired_t_batch(d: np.ndarray, alpha: float) -> np.ndarray:
    n = d.shape[1]
    if n < 2:
        return np.full(d.shape[0], -np.inf)
    se = d.std(axis=1, ddof=1) / math.sqrt(n)
    return d.mean(axis=1) - sps.t.ppf(1.0 - alpha, n - 1) * se


def tango_score_statistic(n_plus: np.ndarray, n_minus: np.ndarray, n: int, delta0: np.ndarray) -> np.ndarray:
    """Tango (1998) score statistic for ``H0: p(d=+1) - p(d=-1) = delta0`` on paired binary outcomes.

    ``Z = (b - c - n·delta0) / sqrt(n(2 q̂ + delta0(1 - delta0)))`` with b = #(d=+1), c = #(d=-1) and
    q̂ the restricted MLE of p(d=-1): ``(sqrt(B² - 4AC) - B)/(2A)``, A = 2n,
    ``B = -b - c + (2n - b + c)·delta0``, ``C = -c·delta0(1 - delta0)``.
    """
    b = np.asarray(n_plus, dtype=float)
    c = np.asarray(n_minus, dtype=float)
    delta0 = np.asarray(delta0, dtype=float)
    big_a = 2.0 * n
    big_b = -b - c + (2.0 * n - b + c) * delta0
    big_c = -c * delta0 * (1.0 - delta0)
    q_hat = (np.sqrt(np.maximum(big_b**2 - 4.0 * big_a * big_c, 0.0)) - big_b) / (2.0 * big_a)
    variance = n * (2.0 * q_hat + delta0 * (1.0 - delta0))
    numerator = b - c - n * delta0
    degenerate = variance <= 1e-300  # all mass on one cell: the statistic is ±inf (or 0 at the estimate)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = numerator / np.sqrt(np.where(degenerate, 1.0, variance))
    return np.where(degenerate, np.where(numerator > 0, np.inf, np.where(numerator < 0, -np.inf, 0.0)), z)


def _tango_counts(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not np.all(np.isin(d, (-1.0, 0.0, 1.0))):
        raise ValueError("the Tango score test needs paired binary (0/1) outcomes")
    return (d == 1.0).sum(axis=1), (d == -1.0).sum(axis=1)


def _tango_batch(d: np.ndarray, alpha: float) -> np.ndarray:
    """Lower end of the score interval: the delta0 where Z(delta0) = z_{1-alpha} (bisection on [-1, d̄])."""
    n = d.shape[1]
    b, c = _tango_counts(d)
    z_crit = sps.norm.ppf(1.0 - alpha)
    lo = np.full(d.shape[0], -1.0)  # Z(-1) = +inf: rejected
    hi = (b - c) / n  # Z(d̄) = 0: not rejected
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        rejected = tango_score_statistic(b, c, n, mid) > z_crit
        lo = np.where(rejected, mid, lo)
        hi = np.where(rejected, hi, mid)
    return lo


# --------------------------------------------------------------------------------------------------
# Batched entry points (used by the single-data-set report and by the power/coverage simulations)
# --------------------------------------------------------------------------------------------------


def batch_lower_bounds(
    method: str, d: np.ndarray, alpha: float, low: float = -1.0, high: float = 1.0, horizon: int | None = None
) -> np.ndarray:
    """One-sided level-(1-alpha) lower bounds of the mean of each row of ``d`` (shape (R, n) or (n,)).

    Paired t and Tango give ``nan`` (no claim) on degenerate rows (``asymptotic_degenerate_reason``).
    """
    _validate(alpha, low, high)
    d = _as_batch(d)
    width = high - low
    if method in ("paired_t", "tango"):
        raw = _paired_t_batch(d, alpha) if method == "paired_t" else _tango_batch(d, alpha)
        return np.where(_asymptotic_degenerate_rows(method, d), np.nan, np.maximum(raw, low))
    x = (d - low) / width
    if method == "hoeffding":
        lcb_x = _hoeffding_batch(x, alpha)
    elif method == "empirical_bernstein":
        lcb_x = _empirical_bernstein_batch(x, alpha)
    elif method == "plugin_empirical_bernstein":
        lcb_x = _plugin_empirical_bernstein_batch(x, alpha)
    elif method == "betting":
        lcb_x = _betting_batch(x, alpha, horizon)
    else:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    return low + width * np.clip(lcb_x, 0.0, 1.0)


def batch_upper_bounds(
    method: str, d: np.ndarray, alpha: float, low: float = -1.0, high: float = 1.0, horizon: int | None = None
) -> np.ndarray:
    """One-sided level-(1-alpha) upper bounds: the same method on the mirrored data ``-d``."""
    return -batch_lower_bounds(method, -_as_batch(d), alpha, -high, -low, horizon)


def batch_noninferior(
    method: str,
    d: np.ndarray,
    margin: float,
    alpha: float,
    low: float = -1.0,
    high: float = 1.0,
    horizon: int | None = None,
) -> np.ndarray:
    """Per row: is noninferiority claimed (lower bound > -margin)?

    Betting and Tango test ``-margin`` directly (capital ``>= 1/alpha``; ``Z > z_{1-alpha}``) instead
    of bisecting for the bound, which is the same decision and much faster in simulations.
    """
    _validate(alpha, low, high)
    d = _as_batch(d)
    if method == "betting":
        x = (d - low) / (high - low)
        m0 = (-margin - low) / (high - low)
        if m0 <= 0.0:
            return np.zeros(d.shape[0], dtype=bool)
        lam_dot, _ = _plugin_lambdas(x, alpha, horizon)
        return _betting_max_log_capital(x, lam_dot, np.full(d.shape[0], m0)) >= math.log(1.0 / alpha)
    if method == "tango":
        b, c = _tango_counts(d)
        z = tango_score_statistic(b, c, d.shape[1], np.full(d.shape[0], -margin))
        return (z > sps.norm.ppf(1 - alpha)) & ~_asymptotic_degenerate_rows(method, d)
    return batch_lower_bounds(method, d, alpha, low, high, horizon) > -margin


def _single(
    method: str, d: np.ndarray, alpha: float, low: float, high: float, horizon: int | None = None
) -> float:
    d = np.asarray(d, dtype=float)
    if d.ndim != 1:
        raise ValueError("expected a 1-d vector of per-item differences")
    _check_range(d, low, high)
    return float(batch_lower_bounds(method, d, alpha, low, high, horizon)[0])


def empirical_bernstein_lower_bound(
    d: np.ndarray, alpha: float, low: float = -1.0, high: float = 1.0
) -> float:
    """Maurer–Pontil (2009, Thm 4) lower bound; one-sided, level 1-alpha, replication unit = item."""
    return _single("empirical_bernstein", d, alpha, low, high)


def plugin_empirical_bernstein_lower_bound(
    d: np.ndarray, alpha: float, low: float = -1.0, high: float = 1.0
) -> float:
    """Predictable plug-in empirical Bernstein lower bound (fixed n; order-dependent); level 1-alpha."""
    return _single("plugin_empirical_bernstein", d, alpha, low, high)


def betting_lower_bound(
    d: np.ndarray, alpha: float, low: float = -1.0, high: float = 1.0, horizon: int | None = None
) -> float:
    """Betting confidence sequence's lower end after all n items (order-dependent; level 1-alpha).

    Anytime-valid over the items of this one comparison only (see ``betting_confidence_sequence``).
    """
    return _single("betting", d, alpha, low, high, horizon)


def betting_confidence_sequence(
    d: np.ndarray, alpha: float, low: float = -1.0, high: float = 1.0, horizon: int | None = None
) -> np.ndarray:
    """Lower confidence sequence ``L_1..L_n`` (running intersection): ``P(exists t: mu < L_t) <= alpha``.

    The guarantee is over the items of *one* comparison: while one evaluation streams in item by
    item, ``L_t > -margin`` may be checked after every item without inflating the error. It says
    nothing about re-evaluating a new checkpoint on the same items after every epoch (each is a new
    comparison); use ``rftlab.analysis.multiplicity.repeated_looks_gate`` for that. ``L_n`` equals
    ``betting_lower_bound``. The bets are tuned for ``horizon`` (default n), which does not affect
    validity.
    """
    d = np.asarray(d, dtype=float)
    _validate(alpha, low, high)
    _check_range(d, low, high)
    n = d.size
    x = (d - low) / (high - low)
    lam_dot, _ = _plugin_lambdas(x[None, :], alpha, horizon if horizon is not None else n)
    after_t = np.triu(np.ones((n, n), dtype=bool), k=1)  # row t: items s > t are not yet seen
    threshold = math.log(1.0 / alpha)
    lo, hi = np.zeros(n), np.ones(n)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        rejected = _betting_max_log_capital(x[None, :], lam_dot, mid, not_seen=after_t) >= threshold
        lo = np.where(rejected, mid, lo)
        hi = np.where(rejected, hi, mid)
    return low + (high - low) * lo


def paired_t_lower_bound(d: np.ndarray, alpha: float) -> float:
    """Paired t lower bound ``d̄ - t_{1-alpha,n-1}·s/sqrt(n)``; one-sided, level 1-alpha, **asymptotic**.

    ``nan`` on a degenerate sample (``asymptotic_degenerate_reason``): no claim.
    """
    d = _as_batch(d)
    return float(np.where(_asymptotic_degenerate_rows("paired_t", d), np.nan, _paired_t_batch(d, alpha))[0])


def tango_lower_bound(d: np.ndarray, alpha: float) -> float:
    """Tango score-interval lower end for paired 0/1 outcomes; one-sided, level 1-alpha, **asymptotic**.

    ``nan`` with fewer than ``MIN_DISCORDANT`` discordant pairs: no claim.
    """
    d = _as_batch(d)
    return float(np.where(_asymptotic_degenerate_rows("tango", d), np.nan, _tango_batch(d, alpha))[0])


# --------------------------------------------------------------------------------------------------
# One data set: the report the CLI and notebooks use
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BoundResult:
    """One method's verdict on a paired comparison.

    ``lower`` and ``upper`` are each a one-sided bound at level ``one_sided_level`` = 1 - alpha;
    together ``[lower, upper]`` is a two-sided interval at level ``two_sided_level`` = 1 - 2·alpha.
    The replication unit is the item. ``lower`` is ``None`` when the method does not apply (Tango on
    non-binary scores) or makes no claim (an asymptotic method on a degenerate sample; ``note`` says
    why). ``permutation_seed`` is the seed of the item order for order-dependent methods, else None.
    """

    method: str
    lower: float | None
    upper: float | None
    decision: str
    p_value: float | None
    alpha: float
    one_sided_level: float
    two_sided_level: float
    margin: float
    n: int
    validity: str
    sidedness: str = (
        "lower and upper: each a one-sided bound at one_sided_level = 1-alpha; "
        "[lower, upper]: a two-sided interval at two_sided_level = 1-2*alpha"
    )
    replication_unit: str = "item"
    note: str = ""
    order_dependent: bool = False
    permutation_seed: int | None = None


def decide(lower: float | None, upper: float | None, margin: float) -> str:
    """``noninferior`` if lower > -margin, ``inferior`` if upper < -margin, else ``inconclusive``."""
    if lower is None:
        return "not_applicable"
    if lower > -margin:
        return "noninferior"
    if upper is not None and upper < -margin:
        return "inferior"
    return "inconclusive"


def _paired_t_statsmodels(d: np.ndarray, margin: float, alpha: float) -> tuple[float, float, float | None]:
    """Paired t via ``DescrStatsW(d).ttest_mean(value=-margin, alternative='larger')`` (asymptotic)."""
    from statsmodels.stats.weightstats import DescrStatsW

    stats = DescrStatsW(d)
    if d.size < 2 or stats.std == 0.0:  # degenerate: every item has the same difference
        mean = float(np.mean(d))
        return mean, mean, None
    # statsmodels is unannotated: pyright reads `value: int` from its default 0, but any real is meant
    _, p_value, _ = stats.ttest_mean(value=-margin, alternative="larger")  # pyright: ignore[reportArgumentType]
    lower = float(stats.tconfint_mean(alpha=alpha, alternative="larger")[0])
    upper = float(stats.tconfint_mean(alpha=alpha, alternative="smaller")[1])
    return lower, upper, float(p_value)


def bound_result(
    method: str,
    d: np.ndarray,
    margin: float,
    alpha: float,
    low: float = -1.0,
    high: float = 1.0,
    item_weights: np.ndarray | None = None,
    horizon: int | None = None,
    permutation_seed: int | None = None,
) -> BoundResult:
    """Evaluate one method on one vector of per-item differences (already in a fixed order).

    ``permutation_seed`` is only recorded (for order-dependent methods): the caller applied it.
    """
    _validate(alpha, low, high)
    if not math.isfinite(margin) or margin < 0 or -margin <= low:
        raise ValueError(
            f"margin={margin} must be finite, >= 0 and below {-low:g} (the threshold -margin must lie "
            f"inside the range [{low:g}, {high:g}] of the differences)"
        )
    d = np.asarray(d, dtype=float)
    _check_range(d, low, high)
    n = d.size
    note, p_value = "", None
    lower: float | None
    upper: float | None
    if method == "hoeffding":
        lower = hoeffding_lower_bound(d, alpha, low, high, item_weights)
        upper = -hoeffding_lower_bound(-d, alpha, -high, -low, item_weights)
        if item_weights is None:
            p_value = hoeffding_p_value(d, margin, low, high)
        else:
            w2 = float(np.sum(np.asarray(item_weights) ** 2))
            excess = float(np.dot(item_weights, d)) + margin
            p_value = 1.0 if excess <= 0 else math.exp(-2.0 * excess**2 / ((high - low) ** 2 * w2))
    elif item_weights is not None:
        raise ValueError("item weights are supported by the Hoeffding bound only")
    elif method == "tango" and not _is_ternary(d):
        lower, upper, note = None, None, "Tango's score test needs paired 0/1 outcomes"
    elif method in ("paired_t", "tango") and asymptotic_degenerate_reason(method, d):
        lower, upper, note = None, None, asymptotic_degenerate_reason(method, d)
    elif method == "paired_t":
        lower, upper, p_value = _paired_t_statsmodels(d, margin, alpha)
        lower, upper = max(lower, low), min(upper, high)
    else:
        lower = float(batch_lower_bounds(method, d, alpha, low, high, horizon)[0])
        upper = float(batch_upper_bounds(method, d, alpha, low, high, horizon)[0])
        if method == "betting":
            x = (d - low) / (high - low)
            m0 = (-margin - low) / (high - low)
            p_value = float(betting_anytime_p_value(x, m0, alpha, horizon)[0]) if m0 > 0 else 1.0
        elif method == "tango":
            b, c = _tango_counts(d[None, :])
            z = float(tango_score_statistic(b, c, n, np.array([-margin]))[0])
            p_value = float(sps.norm.sf(z))
    if lower is None and (note.startswith("degenerate") or note.startswith("the paired t test needs")):
        decision = "inconclusive"
    elif lower is not None and upper is not None and method in ("betting", "tango"):
        # direct test of -margin: the same decision as comparing the bisected bound, without its rounding
        claimed = bool(batch_noninferior(method, d, margin, alpha, low, high, horizon)[0])
        decision = "noninferior" if claimed else ("inferior" if upper < -margin else "inconclusive")
    else:
        decision = decide(lower, upper, margin)
    return BoundResult(
        method=method,
        lower=lower,
        upper=upper,
        decision=decision,
        p_value=p_value,
        alpha=alpha,
        one_sided_level=1.0 - alpha,
        two_sided_level=1.0 - 2.0 * alpha,
        margin=margin,
        n=n,
        validity=VALIDITY[method],
        note=note,
        order_dependent=method in ORDER_DEPENDENT,
        permutation_seed=permutation_seed if method in ORDER_DEPENDENT else None,
    )


@dataclass(frozen=True)
class NoninferiorityReport:
    """Every method on one paired comparison; ``decision`` is the pre-registered (Hoeffding) one."""

    n: int
    mean_difference: float
    alpha: float
    margin: float
    range: tuple[float, float]
    permutation_seed: int
    bounds: dict[str, BoundResult] = field(default_factory=dict)
    decision_method: str = "hoeffding"
    replication_unit: str = "item"

    @property
    def decision(self) -> str:
        return self.bounds[self.decision_method].decision

    def to_dict(self) -> dict:
        out = {
            "n": self.n,
            "mean_difference": self.mean_difference,
            "alpha": self.alpha,
            "one_sided_level": 1.0 - self.alpha,
            "two_sided_level": 1.0 - 2.0 * self.alpha,
            "margin": self.margin,
            "decision": self.decision,
            "decision_method": self.decision_method,
            "range": list(self.range),
            "replication_unit": self.replication_unit,
            "permutation_seed": self.permutation_seed,
            "bounds": {name: asdict(result) for name, result in self.bounds.items()},
        }
        return out


def paired_noninferiority(
    treatment: np.ndarray,
    baseline: np.ndarray,
    margin: float,
    alpha: float = 0.05,
    outcome_bounds: tuple[float, float] = (0.0, 1.0),
    methods: tuple[str, ...] = METHODS,
    permutation_seed: int = 0,
    decision_method: str = "hoeffding",
) -> NoninferiorityReport:
    """All noninferiority bounds for treatment minus baseline on paired items.

    The order-dependent methods (plug-in empirical Bernstein, betting) see the items in the order
    ``numpy.random.default_rng(permutation_seed).permutation(n)`` of the given order, recorded in the
    report and in each of their bounds; the other methods do not depend on order. The seed is part of
    the analysis plan: choosing it after seeing results (seed shopping) inflates the error rate.
    """
    if isinstance(permutation_seed, bool) or not isinstance(permutation_seed, int | np.integer):
        raise ValueError(f"permutation_seed={permutation_seed!r} must be a non-negative integer")
    if permutation_seed < 0:
        raise ValueError(f"permutation_seed={permutation_seed} must be a non-negative integer")
    treatment = np.asarray(treatment, dtype=float)
    baseline = np.asarray(baseline, dtype=float)
    if treatment.shape != baseline.shape or treatment.ndim != 1 or treatment.size == 0:
        raise ValueError("treatment and baseline must be non-empty 1-d arrays of the same length")
    lo, hi = outcome_bounds
    low, high = lo - hi, hi - lo
    d = treatment - baseline
    d = d[np.random.default_rng(permutation_seed).permutation(d.size)]
    bounds = {
        method: bound_result(method, d, margin, alpha, low, high, permutation_seed=permutation_seed)
        for method in methods
    }
    return NoninferiorityReport(
        n=int(d.size),
        mean_difference=float(np.mean(d)),
        alpha=alpha,
        margin=margin,
        range=(low, high),
        permutation_seed=permutation_seed,
        bounds=bounds,
        decision_method=decision_method,
    )
