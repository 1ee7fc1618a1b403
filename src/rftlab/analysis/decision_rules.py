"""Pre-registered decision rules: the ``decision_rule`` block of a spec, evaluated on per-item files.

The GS1 spec's rule reads::

    {"alpha": 0.05, "method": "paired_hoeffding",
     "criteria": [{"id": "primary", "metric": "accuracy", "weights": {"treatment": 1, "baseline": -1},
                   "margin": -0.03, "bounds": [0, 1]}]}

Per criterion the per-item statistic is ``s_i = Σ_k w_k y_i^k`` over the arms k, whose range is
``[Σ w_k·lo_k, Σ w_k·hi_k]`` taken per sign of w_k. The criterion passes iff the one-sided lower bound
of mean(s) at level 1 - alpha is above ``margin`` (a threshold: -0.03 means "no worse than 3 points").

**Permutation seed.** Order-dependent methods (plug-in empirical Bernstein, betting) see the items in
a seeded random order, and a different seed can flip the decision. The seed is therefore part of the
pre-registered rule: ``"permutation_seed": <int >= 0>`` in the ``decision_rule`` block (so it is
covered by the spec file's SHA-256). A rule with an order-dependent method and no seed is refused; a
seed requested at evaluation time must equal the rule's (``SeedMismatchError`` otherwise). Every
``CriterionResult`` and the ``DecisionRuleResult`` record the seed used (``None`` for methods that do
not depend on order, which see the items in file order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from rftlab.analysis.gates import file_sha256
from rftlab.analysis.io import (
    AnalysisInputError,
    item_sort_key,
    iter_jsonl,
    load_item_outcomes,
    pair_outcomes,
    read_json_file,
    validation_message,
)
from rftlab.analysis.noninferiority import METHODS, ORDER_DEPENDENT, bound_result

# Names a spec may use for a method, mapped to ``rftlab.analysis.noninferiority.METHODS``.
METHOD_ALIASES: dict[str, str] = {
    "paired_hoeffding": "hoeffding",
    "paired_empirical_bernstein": "empirical_bernstein",
    "paired_plugin_empirical_bernstein": "plugin_empirical_bernstein",
    "paired_betting": "betting",
    **{m: m for m in METHODS},
}


class Criterion(BaseModel):
    """One criterion of a decision rule: a weighted per-item statistic and its threshold."""

    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)

    id: str
    metric: str
    weights: dict[str, float]
    margin: float
    bounds: tuple[float, float] = (0.0, 1.0)

    @field_validator("weights")
    @classmethod
    def _nonzero(cls, weights: dict[str, float]) -> dict[str, float]:
        if not weights or all(w == 0 for w in weights.values()):
            raise ValueError("weights must name at least one arm with a non-zero weight")
        return weights

    @model_validator(mode="after")
    def _valid_threshold(self) -> Criterion:
        lo, hi = self.bounds
        if not lo < hi:
            raise ValueError(f"criterion {self.id!r}: bounds [{lo}, {hi}] must have lower < upper")
        low, high = self.statistic_range()
        if self.margin > 0:
            raise ValueError(
                f"criterion {self.id!r}: margin {self.margin} above 0 is not a noninferiority margin "
                "(it is the threshold the lower bound must clear, e.g. -0.03)"
            )
        if not low < self.margin:
            raise ValueError(
                f"criterion {self.id!r}: margin {self.margin} must lie above the lowest possible value "
                f"{low:g} of the statistic (range [{low:g}, {high:g}])"
            )
        return self

    def statistic_range(self) -> tuple[float, float]:
        """Range of ``s_i = Σ w_k y_i^k`` when every arm's outcome lies in ``bounds``, per sign."""
        lo, hi = self.bounds
        low = sum(w * (lo if w > 0 else hi) for w in self.weights.values())
        high = sum(w * (hi if w > 0 else lo) for w in self.weights.values())
        return float(low), float(high)


class DecisionRule(BaseModel):
    """The ``decision_rule`` block of a spec."""

    model_config = ConfigDict(frozen=True, extra="allow")

    version: int = 1
    estimand: str = ""
    unit: str = "fixed_checkpoint_items"
    alpha: float = Field(gt=0.0, lt=0.5, allow_inf_nan=False)
    method: str
    criteria: list[Criterion] = Field(min_length=1)
    permutation_seed: StrictInt | None = Field(default=None, ge=0)

    @field_validator("method")
    @classmethod
    def _known_method(cls, method: str) -> str:
        if method not in METHOD_ALIASES:
            raise ValueError(f"unknown method {method!r}; known: {', '.join(sorted(METHOD_ALIASES))}")
        return method

    @model_validator(mode="after")
    def _seed_for_order_dependent_methods(self) -> DecisionRule:
        if self.order_dependent and self.permutation_seed is None:
            raise ValueError(
                f"method {self.method!r} depends on the item order: the rule must pre-register "
                "'permutation_seed' (a non-negative integer) in the decision_rule block"
            )
        return self

    @property
    def order_dependent(self) -> bool:
        return METHOD_ALIASES.get(self.method, self.method) in ORDER_DEPENDENT


class SeedMismatchError(ValueError):
    """A permutation seed given at evaluation time differs from the one the rule pre-registered."""


@dataclass(frozen=True)
class CriterionResult:
    """One criterion's verdict: the lower bound (one-sided, level 1 - alpha, unit item) vs the margin.

    ``lower`` and ``upper`` are each one-sided at ``one_sided_level``; ``[lower, upper]`` is a two-sided
    interval at ``two_sided_level``. ``permutation_seed`` is the item-order seed (``None`` when the
    method does not depend on order).
    """

    id: str
    metric: str
    method: str
    n: int
    statistic_mean: float
    lower: float | None
    upper: float | None
    margin: float
    decision: str
    passed: bool
    alpha: float
    one_sided_level: float
    two_sided_level: float
    statistic_range: tuple[float, float]
    order_dependent: bool
    permutation_seed: int | None
    sidedness: str = (
        "lower and upper: each a one-sided bound at one_sided_level = 1-alpha; "
        "[lower, upper]: a two-sided interval at two_sided_level = 1-2*alpha"
    )
    replication_unit: str = "item"
    note: str = ""


@dataclass(frozen=True)
class DecisionRuleResult:
    """All criteria; ``decision`` is ``noninferior`` only if every criterion is, ``inferior`` if any is."""

    spec_sha256: str | None
    decision: str
    passed: bool
    criteria: tuple[CriterionResult, ...]
    method: str = ""
    alpha: float = 0.05
    permutation_seed: int | None = None
    order_dependent: bool = False

    def to_dict(self) -> dict:
        return {
            "spec_sha256": self.spec_sha256,
            "decision": self.decision,
            "passed": self.passed,
            "method": self.method,
            "alpha": self.alpha,
            "one_sided_level": 1.0 - self.alpha,
            "two_sided_level": 1.0 - 2.0 * self.alpha,
            "order_dependent": self.order_dependent,
            "permutation_seed": self.permutation_seed,
            "permutation_seed_source": "decision_rule.permutation_seed (pre-registered, hashed with the spec)"
            if self.order_dependent
            else "not used: the method does not depend on item order",
            "criteria": [asdict(c) for c in self.criteria],
        }


def load_decision_rule(spec_path: str | Path) -> tuple[DecisionRule, str]:
    """The ``decision_rule`` block of a spec file (or a bare rule) and the file's SHA-256."""
    spec_path = Path(spec_path)
    spec = read_json_file(spec_path, "spec")
    block = spec.get("decision_rule", spec) if isinstance(spec, Mapping) else None
    if block is spec and isinstance(spec, Mapping) and "criteria" not in spec:
        raise ValueError(f"{spec_path}: no decision_rule (neither a 'decision_rule' object nor a bare rule)")
    if not isinstance(block, Mapping):
        raise ValueError(f"{spec_path}: no 'decision_rule' object")
    try:
        rule = DecisionRule.model_validate(block)
    except ValidationError as exc:  # one line naming the field, never pydantic's multi-line report
        where = "decision_rule." if block is not spec else ""
        raise ValueError(f"{spec_path}: {where}{validation_message(exc)}") from None
    return rule, file_sha256(spec_path)


def evaluate_decision_rule(
    rule: DecisionRule,
    arm_files: Mapping[str, str | Path],
    spec_sha256: str | None = None,
    permutation_seed: int | None = None,
) -> DecisionRuleResult:
    """Evaluate ``rule`` on per-item files, one per arm name used in the weights (e.g. treatment, baseline).

    Each arm file is read with the criterion's ``bounds``; the value is the field named like the
    criterion's ``metric`` if the records carry it, else ``correct``/``score``. ``permutation_seed``
    may only repeat the rule's pre-registered seed (``SeedMismatchError`` otherwise).
    """
    method = METHOD_ALIASES[rule.method]
    seed = resolve_permutation_seed(rule, permutation_seed)
    results = []
    for criterion in rule.criteria:
        missing = [arm for arm in criterion.weights if arm not in arm_files]
        if missing:
            raise AnalysisInputError(f"criterion {criterion.id!r} needs per-item files for arm(s) {missing}")
        arms = list(criterion.weights)
        outcomes = {arm: _load_arm(arm_files[arm], criterion) for arm in arms}
        # pair every arm against the first one so a missing item in any arm is named
        ids = tuple(sorted(outcomes[arms[0]], key=item_sort_key))
        for arm in arms[1:]:
            pair_outcomes(outcomes[arms[0]], outcomes[arm], str(arm_files[arms[0]]), str(arm_files[arm]))
        s = np.zeros(len(ids))
        for arm, weight in criterion.weights.items():
            s += weight * np.array([outcomes[arm][i] for i in ids])
        if seed is not None:
            s = s[np.random.default_rng(seed).permutation(s.size)]
        low, high = criterion.statistic_range()
        delta = -criterion.margin
        bound = bound_result(method, s, delta, rule.alpha, low, high, permutation_seed=seed)
        results.append(
            CriterionResult(
                id=criterion.id,
                metric=criterion.metric,
                method=method,
                n=bound.n,
                statistic_mean=float(np.mean(s)),
                lower=bound.lower,
                upper=bound.upper,
                margin=criterion.margin,
                decision=bound.decision,
                passed=bound.decision == "noninferior",
                alpha=rule.alpha,
                one_sided_level=1.0 - rule.alpha,
                two_sided_level=1.0 - 2.0 * rule.alpha,
                statistic_range=(low, high),
                order_dependent=rule.order_dependent,
                permutation_seed=seed,
                note=bound.note,
            )
        )
    decisions = [r.decision for r in results]
    if all(d == "noninferior" for d in decisions):
        overall = "noninferior"
    elif any(d == "inferior" for d in decisions):
        overall = "inferior"
    else:
        overall = "inconclusive"
    return DecisionRuleResult(
        spec_sha256=spec_sha256,
        decision=overall,
        passed=overall == "noninferior",
        criteria=tuple(results),
        method=method,
        alpha=rule.alpha,
        permutation_seed=seed,
        order_dependent=rule.order_dependent,
    )


def resolve_permutation_seed(rule: DecisionRule, requested: int | None) -> int | None:
    """The seed a decision uses: the rule's pre-registered one; a different ``requested`` is refused.

    Methods that do not depend on order use no seed (``None``); for them a requested seed must also
    match the rule's (absent means none may be given), so a command line never looks like it chose one.
    """
    if requested is not None and requested != rule.permutation_seed:
        declared = (
            f"pre-registers permutation_seed {rule.permutation_seed}"
            if rule.permutation_seed is not None
            else "pre-registers no permutation_seed"
        )
        raise SeedMismatchError(
            f"seed {requested} differs from the decision rule, which {declared}: a decision uses the "
            "pre-registered seed (drop --seed, or run 'rftlab stats noninferiority --seed' for an "
            "exploratory look)"
        )
    return rule.permutation_seed if rule.order_dependent else None


def _load_arm(path: str | Path, criterion: Criterion) -> dict[str, float]:
    field = criterion.metric if _records_have_field(path, criterion.metric) else None
    return load_item_outcomes(path, bounds=criterion.bounds, field=field)


def _records_have_field(path: str | Path, name: str) -> bool:
    for _, obj in iter_jsonl(path):
        return name in obj
    return False


def evaluate_decision_rule_file(
    spec_path: str | Path,
    treatment_path: str | Path,
    baseline_path: str | Path,
    permutation_seed: int | None = None,
) -> DecisionRuleResult:
    """Load a spec's ``decision_rule`` and evaluate it on a treatment and a baseline per-item file."""
    rule, sha = load_decision_rule(spec_path)
    files: dict[str, Any] = {"treatment": treatment_path, "baseline": baseline_path}
    return evaluate_decision_rule(rule, files, spec_sha256=sha, permutation_seed=permutation_seed)
