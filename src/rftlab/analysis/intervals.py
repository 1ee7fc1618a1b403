"""Simple two-sided intervals used in evaluation summaries (arena ``summary.json``, spec §10.3).

Both use the normal quantile ``z = 1.96`` by default, as the upstream summaries do; pass
``z=scipy.stats.norm.ppf(0.975)`` for the exact 95% quantile. They are two-sided, level ≈ 95%, and the
replication unit is whatever the caller passes (cases, items) — never the rollouts inside one case.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z_95 = 1.96


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval ``[c − r, c + r]`` for ``successes`` out of ``n`` (spec §10.3 formula).

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


def normal_mean_interval(values: Sequence[float], z: float = Z_95) -> tuple[float, float, float]:
    """``(mean, low, high)`` with ``mean ± z·s/√n`` and the sample (n − 1) standard deviation ``s``.

    With fewer than two values the interval is ``[mean, mean]`` (spec §10.3 ``mean_ci``). Asymptotic:
    use it to describe, not to gate.
    """
    n = len(values)
    if n == 0:
        raise ValueError("normal_mean_interval needs at least one value")
    mean = math.fsum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = z * sd / math.sqrt(n)
    return mean, mean - half, mean + half
