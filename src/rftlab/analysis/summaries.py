"""Mean ± standard error: the one implementation in the package (every family's summaries use it).

mean_se([0.1, 0.3, 0.2])                  # MeanSE(mean=0.2, se=0.0577..., n=3)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MeanSE:
    """A mean with its standard error (sample sd / √n; ``None`` when n < 2) over ``n`` values."""

    mean: float | None
    se: float | None
    n: int


def mean_se(values: Iterable[float]) -> MeanSE:
    """Mean and standard error ``sd/√n`` (sample sd, n − 1) of ``values``; ``mean`` is ``None`` for no
    values and ``se`` is ``None`` for fewer than two."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return MeanSE(None, None, 0)
    mu = sum(xs) / n
    if n < 2:
        return MeanSE(mu, None, 1)
    sd = math.sqrt(sum((x - mu) ** 2 for x in xs) / (n - 1))
    return MeanSE(mu, sd / math.sqrt(n), n)
