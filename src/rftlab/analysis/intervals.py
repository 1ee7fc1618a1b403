"""Simple two-sided intervals used in evaluation summaries (arena ``summary.json``, docs/arena.md §10.3).

``wilson_interval`` uses the normal quantile ``z = 1.96`` by default, as the upstream summaries do;
``normal_mean_interval`` uses Student's t quantile below ``T_BELOW_N`` values (where 1.96 would
under-cover: about 88% actual coverage at n = 5) and 1.96 from there on (the spec's ``mean_ci``);
``mean_interval_quantile`` says which one a given n gets. Pass ``z`` explicitly to force a quantile.
Both are two-sided, level ≈ 95%, and the replication unit is whatever the caller passes (cases,
items) — never the rollouts inside one case.

The Wilson formula stays written out. statsmodels' ``proportion_confint(method="wilson")`` takes a level,
not ``z``, and uses the exact quantile 1.959964. The arena spec's constant is 1.96, and no level maps back
to it exactly (``norm.isf`` returns 1.9599999999999997). At the exact quantile the two agree to 1e-12
(``tests/analysis/test_stats_intervals.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z_95 = 1.96
T_BELOW_N = 30  # below this many values the mean interval uses t_{0.975, n-1} instead of 1.96


def wilson_interval(successes: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval ``[c − r, c + r]`` for ``successes`` out of ``n`` (docs/arena.md §10.3 formula).
    Both may be effective counts, not whole numbers (``rate_gates.effective_wilson_lower``).

    ``d = 1 + z²/n``, ``c = (p + z²/(2n))/d``, ``r = z·sqrt(p(1−p)/n + z²/(4n²))/d`` with ``p = k/n``.
    """
    if n <= 0:
        raise ValueError(f"wilson_interval needs n >= 1, got n={n}")
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n, got {successes} of {n}")
    p = successes / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    r = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - r, c + r


def mean_interval_quantile(n: int, z: float | None = None) -> tuple[float, str]:
    """The quantile ``normal_mean_interval`` uses for n values, and its label.

    ``z`` given: that normal quantile (label ``"normal z=…"``). Otherwise ``t_{0.975, n-1}`` for
    ``2 <= n < T_BELOW_N`` (label ``"t, df=n-1"``) and 1.96 from ``T_BELOW_N`` on (``"normal z=1.96"``).
    """
    if z is not None:
        return float(z), f"normal z={z:g}"
    if 2 <= n < T_BELOW_N:
        from scipy.stats import t as student_t

        return float(student_t.ppf(0.975, n - 1)), f"t, df={n - 1}"
    return Z_95, f"normal z={Z_95:g}"


def normal_mean_interval(values: Sequence[float], z: float | None = None) -> tuple[float, float, float]:
    """``(mean, low, high)`` with ``mean ± q·s/√n`` and the sample (n − 1) standard deviation ``s``.

    ``q`` is ``mean_interval_quantile(n, z)``: Student's t for fewer than 30 values, 1.96 from 30 on
    (the arena spec's ``mean_ci``), or the given ``z``. With fewer than two values the interval is
    ``[mean, mean]`` (docs/arena.md §10.3 ``mean_ci``). Two-sided ≈95%; assumes roughly normal means: use it
    to describe, not to gate.
    """
    n = len(values)
    if n == 0:
        raise ValueError("normal_mean_interval needs at least one value")
    mean = math.fsum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    quantile, _ = mean_interval_quantile(n, z)
    half = quantile * sd / math.sqrt(n)
    return mean, mean - half, mean + half
