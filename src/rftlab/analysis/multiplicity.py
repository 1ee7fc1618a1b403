"""Multiplicity in noninferiority gates: repeated looks at checkpoints, and seed shopping.

**Repeated looks.** A betting confidence sequence is anytime-valid over the items of *one*
comparison. Evaluating a new checkpoint on the same test items after every epoch is a *new*
comparison each time, and "pass at the first epoch whose bound clears the margin" is then a test
repeated K times: at the null boundary its error rate grows towards ``1 - (1 - alpha)^K``.
``repeated_looks_gate`` is the valid procedure for a **pre-declared** number of looks K: look k is
tested at ``alpha_k`` with ``Σ alpha_k = alpha`` (equal split by default: Bonferroni ``alpha/K``).
By the union bound, ``P(any look passes | every checkpoint is at or below the null) <= Σ alpha_k``
whatever the dependence between looks (shared items, correlated checkpoints), and whatever the
method, as long as each look's bound is valid at its own level. A look beyond the K declared is
refused: the split must be fixed before the first look.

**A family of claims.** ``holm_adjust`` gives Holm's step-down adjusted p-values for a pre-declared
family of hypotheses (a study plan's confirmatory contrasts): a claim is made when its adjusted p-value
is below alpha, which keeps the family-wise error at most alpha under any dependence between the tests.

**Seed shopping.** Plug-in empirical Bernstein and betting depend on the order of the items. Trying
several permutation seeds and keeping a pass is also a repeated test; ``seed_shopping_error_rate``
measures how much it inflates the error. The defence is procedural: the seed is part of the
pre-registered decision rule (``decision_rules``), recorded with every result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from rftlab.analysis.noninferiority import (
    METHODS,
    ORDER_DEPENDENT,
    BoundResult,
    batch_noninferior,
    bound_result,
)
from rftlab.analysis.power import DiscordanceModel, simulate_paired_differences

_CHUNK = 2500


def holm_adjust(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the order given (statsmodels' ``multipletests``, method
    ``"holm"``): with the p-values sorted ascending, ``adj_(j) = max_{i <= j} min(1, (m − i + 1)·p_(i))``.
    Reject hypothesis j at level alpha iff ``adj_j < alpha``."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or p.size == 0:
        raise ValueError("need a non-empty list of p-values")
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("p-values must lie in [0, 1]")
    return np.asarray(multipletests(p, method="holm")[1], dtype=float)


def look_alphas(alpha: float, n_looks: int, weights: Sequence[float] | None = None) -> np.ndarray:
    """Per-look levels ``alpha_k = alpha·w_k/Σw`` (equal weights: ``alpha/K``); they sum to ``alpha``.

    Unequal weights (declared in advance) spend more of alpha where a pass is expected, e.g. on the
    later checkpoints; zero weight means that look cannot pass.
    """
    if isinstance(n_looks, bool) or not isinstance(n_looks, int) or n_looks < 1:
        raise ValueError(f"n_looks={n_looks!r} must be a positive integer declared before the first look")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha={alpha} must be in (0, 0.5)")
    w = np.ones(n_looks) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (n_looks,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be one finite non-negative number per look, not all zero")
    return alpha * w / w.sum()


@dataclass(frozen=True)
class RepeatedLooksResult:
    """A gate over checkpoints with alpha split across ``n_looks`` pre-declared looks.

    ``passed`` iff some look so far claimed noninferiority at its own level ``look_alphas[k]``;
    ``first_pass`` is that look's index (0-based) or ``None``. ``looks_taken < n_looks`` means the gate
    may still look again; the family-wise error over all ``n_looks`` looks is at most ``alpha``.
    """

    method: str
    alpha: float
    n_looks: int
    looks_taken: int
    look_alphas: tuple[float, ...]
    margin: float
    passed: bool
    first_pass: int | None
    decision: str
    looks: tuple[BoundResult, ...]
    procedure: str = "alpha split across pre-declared looks (union bound; valid under any dependence)"

    def to_dict(self) -> dict:
        out = asdict(self)
        out["look_alphas"] = list(self.look_alphas)
        out["looks"] = [asdict(look) for look in self.looks]
        return out


def repeated_looks_gate(
    looks: Sequence[np.ndarray],
    margin: float,
    alpha: float,
    n_looks: int,
    method: str = "hoeffding",
    low: float = -1.0,
    high: float = 1.0,
    weights: Sequence[float] | None = None,
    permutation_seed: int = 0,
) -> RepeatedLooksResult:
    """Evaluate per-item differences of successive checkpoints (look k = ``looks[k]``) as one gate.

    Each look is tested with ``method`` at ``alpha_k`` (``look_alphas``); the gate passes at the first
    look that claims noninferiority. Order-dependent methods see each look's items in the order
    ``default_rng(permutation_seed).permutation(n)``. ``decision`` is ``noninferior`` (passed),
    ``inconclusive`` (no pass yet, looks left: ``pending`` in the text) or ``inconclusive`` after the
    last look.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    alphas = look_alphas(alpha, n_looks, weights)
    if len(looks) > n_looks:
        raise ValueError(
            f"{len(looks)} looks but only {n_looks} were declared: the alpha split cannot grow after the fact"
        )
    results: list[BoundResult] = []
    first_pass = None
    for k, d in enumerate(looks):
        d = np.asarray(d, dtype=float)
        if method in ORDER_DEPENDENT:
            d = d[np.random.default_rng(permutation_seed).permutation(d.size)]
        seed = permutation_seed if method in ORDER_DEPENDENT else None
        result = bound_result(method, d, margin, float(alphas[k]), low, high, permutation_seed=seed)
        results.append(result)
        if first_pass is None and result.decision == "noninferior":
            first_pass = k
    passed = first_pass is not None
    return RepeatedLooksResult(
        method=method,
        alpha=alpha,
        n_looks=n_looks,
        looks_taken=len(results),
        look_alphas=tuple(float(a) for a in alphas),
        margin=margin,
        passed=passed,
        first_pass=first_pass,
        decision="noninferior" if passed else "inconclusive",
        looks=tuple(results),
    )


@dataclass(frozen=True)
class RepeatedLooksSimulation:
    """Error rates at the null boundary over ``n_looks`` checkpoints, on the same simulated data.

    ``naive_rate``: pass if any look clears at the full alpha. ``split_rate``: the valid procedure
    (alpha split across looks). ``single_rate``: the first look alone at the full alpha.
    """

    method: str
    n: int
    n_looks: int
    redraw_fraction: float
    discordance: float
    margin: float
    alpha: float
    reps: int
    single_rate: float
    naive_rate: float
    split_rate: float

    def se(self, rate: float) -> float:
        return math.sqrt(rate * (1.0 - rate) / self.reps)


def simulate_repeated_looks(
    method: str,
    n: int,
    margin: float,
    alpha: float,
    discordance: float,
    n_looks: int,
    reps: int,
    rng: np.random.Generator,
    redraw_fraction: float = 1.0,
    weights: Sequence[float] | None = None,
) -> RepeatedLooksSimulation:
    """Every checkpoint sits at the null boundary ``theta = -margin``; the gate looks after each epoch.

    Look 1 draws every item's difference from the discordance model; at each later look a fraction
    ``redraw_fraction`` of the items gets a fresh difference (1.0: independent evaluations; 0.3: the
    checkpoint changed its answer distribution on 30% of items), so every look is marginally at the
    null and consecutive looks are correlated when ``redraw_fraction < 1``.
    """
    if not 0.0 < redraw_fraction <= 1.0:
        raise ValueError("redraw_fraction must be in (0, 1]")
    alphas = look_alphas(alpha, n_looks, weights)
    model = DiscordanceModel.from_difference(-margin, discordance)
    single = naive = split = 0
    for start in range(0, reps, _CHUNK):
        size = min(_CHUNK, reps - start)
        d = simulate_paired_differences(n, model, size, rng)
        naive_any = np.zeros(size, dtype=bool)
        split_any = np.zeros(size, dtype=bool)
        for k in range(n_looks):
            if k > 0:
                fresh = simulate_paired_differences(n, model, size, rng)
                d = np.where(rng.random((size, n)) < redraw_fraction, fresh, d)
            at_alpha = batch_noninferior(method, d, margin, alpha)
            if k == 0:
                single += int(at_alpha.sum())
            naive_any |= at_alpha
            split_any |= batch_noninferior(method, d, margin, float(alphas[k]))
        naive += int(naive_any.sum())
        split += int(split_any.sum())
    return RepeatedLooksSimulation(
        method=method,
        n=n,
        n_looks=n_looks,
        redraw_fraction=redraw_fraction,
        discordance=discordance,
        margin=margin,
        alpha=alpha,
        reps=reps,
        single_rate=single / reps,
        naive_rate=naive / reps,
        split_rate=split / reps,
    )


@dataclass(frozen=True)
class SeedShoppingSimulation:
    """Error rate at the null boundary with one pre-registered seed vs keeping any pass of ``n_seeds``."""

    method: str
    n: int
    n_seeds: int
    discordance: float
    margin: float
    alpha: float
    reps: int
    one_seed_rate: float
    any_seed_rate: float

    def se(self, rate: float) -> float:
        return math.sqrt(rate * (1.0 - rate) / self.reps)


def seed_shopping_error_rate(
    method: str,
    n: int,
    margin: float,
    alpha: float,
    discordance: float,
    n_seeds: int,
    reps: int,
    rng: np.random.Generator,
) -> SeedShoppingSimulation:
    """Draw a data set at the null boundary, evaluate it under ``n_seeds`` item orders, count passes.

    Each "seed" is an independent uniformly random permutation of the same data set (what a different
    ``--seed`` gives). ``one_seed_rate`` uses the first order only (the pre-registered seed).
    """
    if method not in ORDER_DEPENDENT:
        raise ValueError(f"{method!r} does not depend on the item order: every seed gives the same result")
    if n_seeds < 1:
        raise ValueError("n_seeds must be >= 1")
    model = DiscordanceModel.from_difference(-margin, discordance)
    one = any_pass = 0
    for start in range(0, reps, _CHUNK):
        size = min(_CHUNK, reps - start)
        d = simulate_paired_differences(n, model, size, rng)
        passed = np.zeros(size, dtype=bool)
        for k in range(n_seeds):
            order = d if k == 0 else rng.permuted(d, axis=1)
            this = batch_noninferior(method, order, margin, alpha)
            if k == 0:
                one += int(this.sum())
            passed |= this
        any_pass += int(passed.sum())
    return SeedShoppingSimulation(
        method=method,
        n=n,
        n_seeds=n_seeds,
        discordance=discordance,
        margin=margin,
        alpha=alpha,
        reps=reps,
        one_seed_rate=one / reps,
        any_seed_rate=any_pass / reps,
    )


def seeds_passing(
    d: np.ndarray,
    method: str,
    margin: float,
    alpha: float,
    seeds: Sequence[int],
    low: float = -1.0,
    high: float = 1.0,
) -> dict[int, str]:
    """Decision of an order-dependent ``method`` on one data set under each permutation seed.

    ``d`` is in its canonical order; seed s evaluates ``d[default_rng(s).permutation(n)]`` — what
    ``paired_noninferiority(..., permutation_seed=s)`` does. Shows how much a decision can move.
    """
    d = np.asarray(d, dtype=float)
    out = {}
    for seed in seeds:
        ordered = d[np.random.default_rng(seed).permutation(d.size)]
        out[int(seed)] = bound_result(
            method, ordered, margin, alpha, low, high, permutation_seed=int(seed)
        ).decision
    return out
