"""Statistics of GRPO groups (docs/spectrum.md §B.11): Pearson correlation and the within-group carry statistics.

The trainer logs them every epoch and the analysis layer reports them, so the one implementation sits
here (training is below analysis). Pure functions of plain numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import mean as _stat_mean
from typing import Any

__all__ = ["group_carry_stats", "pearson"]


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation of paired samples; ``None`` with fewer than two pairs or zero variance."""
    if len(x) < 2:
        return None
    mx, my = _stat_mean(x), _stat_mean(y)
    sx = math.fsum((a - mx) ** 2 for a in x)
    sy = math.fsum((b - my) ** 2 for b in y)
    if sx == 0 or sy == 0:
        return None
    return math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / math.sqrt(sx * sy)


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    k = len(s) // 2
    return s[k] if len(s) % 2 else (s[k - 1] + s[k]) / 2


def group_carry_stats(groups: Mapping[Any, Sequence[tuple[float | None, float]]]) -> dict[str, Any]:
    """Within-group carry statistics (B.11). ``groups`` maps a group key (row, epoch) to the
    ``(carry_rate, reward)`` of each candidate. Per group: sample sd of carry and Pearson
    ``corr(carry, reward)``; then mean and median over groups, skipping groups with zero variance in
    either variable (and candidates whose carry is undefined)."""
    sds, corrs = [], []
    for members in groups.values():
        pairs = [(c, r) for c, r in members if c is not None]
        if len(pairs) < 2:
            continue
        cs = [c for c, _ in pairs]
        rs = [r for _, r in pairs]
        m = _stat_mean(cs)
        sd = math.sqrt(math.fsum((c - m) ** 2 for c in cs) / (len(cs) - 1))
        rho = pearson(cs, rs)
        if sd == 0 or rho is None:
            continue
        sds.append(sd)
        corrs.append(rho)
    return {
        "n_groups": len(sds),
        "mean_sd_carry": _stat_mean(sds) if sds else None,
        "median_sd_carry": _median(sds),
        "mean_corr_carry_reward": _stat_mean(corrs) if corrs else None,
        "median_corr_carry_reward": _median(corrs),
    }
