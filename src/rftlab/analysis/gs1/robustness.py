"""How much the GS1 verdicts and gates rest on (``docs/gs1.md`` §12): the revised rule's placebo verdict
across permutation seeds, each activation-gate check's margin in its own units (rollouts, prompts) with a
bootstrap interval, and the noninferiority margin a future run derives from a measured control − base
effect.

* ``placebo_across_permutation_seeds``: the revised (order-dependent) rule applied to the untrained base
  as if it were the treatment, once per item-order seed; the share of seeds that call it noninferior says
  how much the registered seed's verdict is luck of the order.
* ``percentile_margin`` / ``mean_margin`` / ``correlation_margin``: a gate check's observed value minus its
  threshold, how many units (rollouts below the minimum, successes, prompts) the verdict rests on and how
  many more would flip it, and a percentile bootstrap interval (units resampled with replacement) with the
  share of bootstrap samples that pass. The per-rollout effective-neighbour counts share kernel windows, so
  resampling them as independent is an approximation (said in ``note``).
* ``derived_margin``: half (``fraction``) of a measured control − base effect, refused when the effect's
  interval does not exclude 0 (no margin can be derived from an effect that is not shown to exist).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rftlab.analysis.decision_rules import evaluate_decision_rule
from rftlab.analysis.gs1.results import Record
from rftlab.analysis.gs1.spec import GS1StudySpec

BOOTSTRAP_REPS = 4000
BOOTSTRAP_SEED = 0
PERMUTATION_SEEDS = tuple(range(200))


class PermutationSweep(Record):
    """One order-dependent rule on one pair of per-item files, at every permutation seed."""

    method: str
    registered_seed: int | None
    registered_decision: str
    seeds: tuple[int, ...]
    decisions: tuple[str, ...]
    lowers: tuple[float | None, ...]
    share_noninferior: float
    min_lower: float
    max_lower: float

    def sentence(self, what: str) -> str:
        k = sum(d == "noninferior" for d in self.decisions)
        return (
            f"the revised {self.method} rule calls {what} noninferior at {k} of {len(self.seeds)} permutation "
            f"seeds ({self.seeds[0]}–{self.seeds[-1]}: {self.share_noninferior:.1%}; lower bounds from "
            f"{self.min_lower:+.4f} to {self.max_lower:+.4f}); at its registered seed {self.registered_seed} "
            f"it says {self.registered_decision}"
        )


def placebo_across_permutation_seeds(
    spec: GS1StudySpec,
    treatment_eval: str | Path,
    baseline_eval: str | Path,
    seeds: Sequence[int] = PERMUTATION_SEEDS,
) -> PermutationSweep:
    """The spec's (order-dependent) rule on the two files with each item-order seed in ``seeds``."""
    rule = spec.decision_rule
    if rule.permutation_seed is None:
        raise ValueError(
            f"{spec.file_name}: its rule does not depend on the item order (no permutation seed)"
        )
    files = {"treatment": treatment_eval, "baseline": baseline_eval}
    decisions, lowers = [], []
    for seed in seeds:
        variant = rule.model_copy(update={"permutation_seed": int(seed)})
        result = evaluate_decision_rule(variant, files, spec_sha256=spec.sha256)
        decisions.append(result.decision)
        lowers.append(result.criteria[0].lower)
    registered = evaluate_decision_rule(rule, files, spec_sha256=spec.sha256)
    finite = [x for x in lowers if x is not None]
    return PermutationSweep(
        method=registered.method,
        registered_seed=rule.permutation_seed,
        registered_decision=registered.decision,
        seeds=tuple(int(s) for s in seeds),
        decisions=tuple(decisions),
        lowers=tuple(lowers),
        share_noninferior=float(np.mean([d == "noninferior" for d in decisions])),
        min_lower=float(min(finite)),
        max_lower=float(max(finite)),
    )


class GateMargin(Record):
    """One gate check's distance from its threshold, in its own units, with a bootstrap interval."""

    metric: str
    observed: float
    threshold: str
    margin: float  # observed − the nearest bound (positive: inside)
    unit: str
    n_units: int
    beyond: int | None  # units on the failing side now (rollouts below the minimum, ...)
    flips_to_fail: int | None  # more units on the failing side (just past the threshold) that fail it
    flips_to_fail_at_lowest: int | None = None  # the same, each moved to the lowest observed value
    ci: tuple[float, float]
    bootstrap_pass_share: float
    reps: int
    seed: int
    note: str = ""

    def sentence(self) -> str:
        rest = ""
        if self.flips_to_fail is not None:
            rest = f"; {self.flips_to_fail} more {self.unit}s on the failing side flip it"
            if self.flips_to_fail_at_lowest is not None:
                rest += (
                    f" if each lands just below the threshold, {self.flips_to_fail_at_lowest} if each lands "
                    "at the lowest observed value"
                )
            if self.beyond is not None:
                rest = f"; {self.beyond} of {self.n_units} {self.unit}s are on the failing side now" + rest
        return (
            f"`{self.metric}` {self.observed:.4g} against {self.threshold}: margin {self.margin:+.4g}{rest}; "
            f"95% bootstrap interval [{self.ci[0]:.4g}, {self.ci[1]:.4g}] over {self.unit}s, passing in "
            f"{self.bootstrap_pass_share:.0%} of {self.reps} resamples"
            + (f" ({self.note})" if self.note else "")
        )


def _bootstrap(values: np.ndarray, statistic, reps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, values.shape[0], size=(reps, values.shape[0]))
    return np.array([statistic(values[i]) for i in idx])


def _ci(samples: np.ndarray) -> tuple[float, float]:
    finite = samples[np.isfinite(samples)]
    low, high = np.quantile(finite, [0.025, 0.975])
    return float(low), float(high)


def _flips(x: np.ndarray, minimum: float, q: float, value: float) -> int:
    """How many of the smallest values at or above ``minimum``, each set to ``value``, bring the
    ``q``-th percentile below it."""
    if value >= minimum:
        raise ValueError(f"a flipped value must lie below the minimum {minimum:g}, got {value:g}")
    moved, flips = x.copy(), 0
    while np.percentile(moved, q) >= minimum:  # ends: every flip moves one more value below the minimum
        moved[np.flatnonzero(moved >= minimum)[0]] = value
        flips += 1
    return flips


def percentile_margin(
    metric: str, values: Sequence[float], minimum: float, q: float = 10.0, reps: int = BOOTSTRAP_REPS,
    seed: int = BOOTSTRAP_SEED,
) -> GateMargin:  # fmt: skip
    """A "``q``-th percentile ≥ ``minimum``" check over rollouts (``numpy.percentile``, linear): the
    rollouts below the minimum now, and how many more (each moved to just below it) make it fail."""
    x = np.sort(np.asarray(values, dtype=float))
    if x.size < 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"{metric}: needs at least 2 finite values")
    observed = float(np.percentile(x, q))
    below = int(np.sum(x < minimum))
    flips = flips_low = None
    if observed >= minimum:
        flips = _flips(x, minimum, q, np.nextafter(minimum, -np.inf))
        just_below = float(np.nextafter(minimum, -np.inf))
        flips_low = _flips(x, minimum, q, min(float(x[0]), just_below))  # the lowest value, or just below
    boot = _bootstrap(x, lambda v: np.percentile(v, q), reps, seed)
    return GateMargin(
        metric=metric, observed=observed, threshold=f"min {minimum:g}", margin=observed - minimum,
        unit="rollout", n_units=int(x.size), beyond=below, flips_to_fail=flips,
        flips_to_fail_at_lowest=flips_low, ci=_ci(boot),
        bootstrap_pass_share=float(np.mean(boot >= minimum)), reps=reps, seed=seed,
        note="rollouts resampled as independent, though their kernel windows overlap",
    )  # fmt: skip


def mean_margin(
    metric: str, rewards: Sequence[float], low: float | None, high: float | None,
    reps: int = BOOTSTRAP_REPS, seed: int = BOOTSTRAP_SEED,
) -> GateMargin:  # fmt: skip
    """A window check on the mean of 0/1 rewards: how many rewards flipped towards the nearer bound make
    the mean leave the window."""
    x = np.asarray(rewards, dtype=float)
    if x.size < 2 or not np.all((x == 0) | (x == 1)):
        raise ValueError(f"{metric}: needs at least 2 rewards, each 0 or 1")
    n, k = x.size, int(x.sum())
    observed = k / n
    gaps = {b: abs(observed - b) for b in (low, high) if b is not None}
    if not gaps:
        raise ValueError(f"{metric}: the window has neither a low nor a high bound")
    nearest = min(gaps, key=lambda b: gaps[b])
    if (
        low is not None and nearest == low
    ):  # fail when k / n < low: the largest failing count is ceil(low n) - 1
        flips = max(0, k - (math.ceil(low * n - 1e-12) - 1))
    else:  # nearest is the high bound: fail when k / n > high
        flips = max(0, math.floor(nearest * n + 1e-12) + 1 - k)
    boot = _bootstrap(x, np.mean, reps, seed)
    inside = np.ones_like(boot, dtype=bool)
    if low is not None:
        inside &= boot >= low
    if high is not None:
        inside &= boot <= high
    window = " and ".join(
        p
        for p in (f"min {low:g}" if low is not None else "", f"max {high:g}" if high is not None else "")
        if p
    )
    return GateMargin(
        metric=metric, observed=observed, threshold=window, margin=gaps[nearest], unit="rollout",
        n_units=n, beyond=None, flips_to_fail=flips, ci=_ci(boot), bootstrap_pass_share=float(np.mean(inside)),
        reps=reps, seed=seed, note=f"{k} of {n} rewards are 1; a flip moves one reward towards the {'min' if nearest == low else 'max'}",
    )  # fmt: skip


def correlation_margin(
    metric: str, x: Sequence[float], y: Sequence[float], minimum: float, reps: int = BOOTSTRAP_REPS,
    seed: int = BOOTSTRAP_SEED,
) -> GateMargin:  # fmt: skip
    """A "Pearson correlation ≥ ``minimum``" check over prompts (pairs resampled together)."""
    pairs = np.column_stack([np.asarray(x, float), np.asarray(y, float)])
    if pairs.shape[0] < 3 or not np.all(np.isfinite(pairs)):
        raise ValueError(f"{metric}: needs at least 3 finite pairs")

    def corr(p: np.ndarray) -> float:
        if np.std(p[:, 0]) == 0 or np.std(p[:, 1]) == 0:
            return math.nan
        return float(np.corrcoef(p[:, 0], p[:, 1])[0, 1])

    observed = corr(pairs)
    boot = _bootstrap(pairs, corr, reps, seed)
    return GateMargin(
        metric=metric, observed=observed, threshold=f"min {minimum:g}", margin=observed - minimum,
        unit="prompt", n_units=int(pairs.shape[0]), beyond=None, flips_to_fail=None, ci=_ci(boot),
        bootstrap_pass_share=float(np.mean(np.nan_to_num(boot, nan=-np.inf) >= minimum)), reps=reps, seed=seed,
        note="a resample with a constant column has no correlation and counts as failing",
    )  # fmt: skip


class DerivedMargin(Record):
    """A noninferiority margin derived from a measured control − base effect."""

    effect: float
    effect_ci: tuple[float, float]
    fraction: float
    margin: float | None
    established: bool
    source: str
    reason: str


def derived_margin(effect: float, ci: tuple[float, float], fraction: float, source: str) -> DerivedMargin:
    """``fraction`` of a measured control − base ``effect`` as the margin, only when its interval ``ci``
    lies above 0 (else ``margin`` is ``None`` and ``reason`` says why)."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction={fraction} must be in (0, 1)")
    if not all(math.isfinite(v) for v in (effect, *ci)) or ci[0] > ci[1]:
        raise ValueError("the effect and its interval must be finite, the interval ordered")
    established = ci[0] > 0
    if established:
        reason = f"{fraction:g} × the measured effect {effect:+.4f} (interval [{ci[0]:+.4f}, {ci[1]:+.4f}] above 0)"
    else:
        reason = (
            f"the measured effect {effect:+.4f} has an interval [{ci[0]:+.4f}, {ci[1]:+.4f}] that does not "
            "lie above 0: the control is not shown to beat the base, so no margin can be derived from it"
        )
    return DerivedMargin(
        effect=float(effect), effect_ci=(float(ci[0]), float(ci[1])), fraction=float(fraction),
        margin=float(fraction * effect) if established else None, established=established, source=source,
        reason=reason,
    )  # fmt: skip


def margin_spec(base: dict, base_file: str, base_sha256: str, derived: DerivedMargin, written: str) -> dict:
    """A new spec (never an edit of ``base``): ``base`` with every criterion's margin set to −``derived``'s
    margin (rounded to 4 decimals) and a ``revision_of`` block saying where the margin came from.
    ``ValueError`` (its reason) when no margin was derived."""
    import copy

    if not derived.established or derived.margin is None:
        raise ValueError(f"no margin to write: {derived.reason}")
    if not base.get("decision_rule", {}).get("criteria"):
        raise ValueError(f"{base_file}: its decision_rule has no criteria to set a margin on")
    out = copy.deepcopy(base)
    margin = round(float(derived.margin), 4)
    old = sorted({c["margin"] for c in out["decision_rule"]["criteria"]})
    for crit in out["decision_rule"]["criteria"]:
        crit["margin"] = -margin
    out["title"] = f"{base['title']} (margin from a measured GRPO − base effect)"
    out["revision_of"] = {
        "file": base_file,
        "sha256": base_sha256,
        "changes": f"decision_rule criteria margin {old} -> {-margin}; title; nothing else",
        "reason": derived.reason,
        "chosen_by": {
            "fraction": derived.fraction,
            "effect": derived.effect,
            "effect_ci": list(derived.effect_ci),
            "source": derived.source,
        },
        "written": written,
    }
    return out
