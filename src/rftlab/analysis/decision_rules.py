"""Pre-registered decision rules: the ``decision_rule`` block of a spec, evaluated on per-item files.

The GS1 spec's rule reads::

    {"alpha": 0.05, "method": "paired_hoeffding",
     "criteria": [{"id": "primary", "metric": "accuracy", "weights": {"treatment": 1, "baseline": -1},
                   "margin": -0.03, "bounds": [0, 1]}]}

Per criterion the per-item statistic is ``s_i = Σ_k w_k y_i^k`` over the arms k, whose range is
``[Σ w_k·lo_k, Σ w_k·hi_k]`` taken per sign of w_k. The criterion passes iff the one-sided lower bound
of mean(s) at level 1 - alpha is above ``margin`` (a threshold: -0.03 means "no worse than 3 points").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rftlab.analysis.gates import file_sha256
from rftlab.analysis.io import (
    AnalysisInputError,
    item_sort_key,
    iter_jsonl,
    load_item_outcomes,
    pair_outcomes,
)
from rftlab.analysis.noninferiority import METHODS, bound_result

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

    model_config = ConfigDict(frozen=True, extra="allow")

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
    alpha: float = Field(gt=0.0, lt=0.5)
    method: str
    criteria: list[Criterion]

    @field_validator("method")
    @classmethod
    def _known_method(cls, method: str) -> str:
        if method not in METHOD_ALIASES:
            raise ValueError(f"unknown method {method!r}; known: {', '.join(sorted(METHOD_ALIASES))}")
        return method


@dataclass(frozen=True)
class CriterionResult:
    """One criterion's verdict: the lower bound (one-sided, level 1 - alpha, unit item) vs the margin."""

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
    level: float
    statistic_range: tuple[float, float]
    sidedness: str = "one-sided lower bound at level 1-alpha"
    replication_unit: str = "item"


@dataclass(frozen=True)
class DecisionRuleResult:
    """All criteria; ``decision`` is ``noninferior`` only if every criterion is, ``inferior`` if any is."""

    spec_sha256: str | None
    decision: str
    passed: bool
    criteria: tuple[CriterionResult, ...]

    def to_dict(self) -> dict:
        return {
            "spec_sha256": self.spec_sha256,
            "decision": self.decision,
            "passed": self.passed,
            "criteria": [asdict(c) for c in self.criteria],
        }


def load_decision_rule(spec_path: str | Path) -> tuple[DecisionRule, str]:
    """The ``decision_rule`` block of a spec file (or a bare rule) and the file's SHA-256."""
    spec_path = Path(spec_path)
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    block = spec.get("decision_rule", spec) if isinstance(spec, Mapping) else None
    if not isinstance(block, Mapping):
        raise ValueError(f"{spec_path}: no 'decision_rule' object")
    return DecisionRule.model_validate(block), file_sha256(spec_path)


def evaluate_decision_rule(
    rule: DecisionRule,
    arm_files: Mapping[str, str | Path],
    spec_sha256: str | None = None,
    permutation_seed: int = 0,
) -> DecisionRuleResult:
    """Evaluate ``rule`` on per-item files, one per arm name used in the weights (e.g. treatment, baseline).

    Each arm file is read with the criterion's ``bounds``; the value is the field named like the
    criterion's ``metric`` if the records carry it, else ``correct``/``score``.
    """
    method = METHOD_ALIASES[rule.method]
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
        s = s[np.random.default_rng(permutation_seed).permutation(s.size)]
        low, high = criterion.statistic_range()
        delta = -criterion.margin
        if delta < 0:
            raise ValueError(
                f"criterion {criterion.id!r}: margin {criterion.margin} above 0 is not a NI margin"
            )
        bound = bound_result(method, s, delta, rule.alpha, low, high)
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
                level=1.0 - rule.alpha,
                statistic_range=(low, high),
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
        spec_sha256=spec_sha256, decision=overall, passed=overall == "noninferior", criteria=tuple(results)
    )


def _load_arm(path: str | Path, criterion: Criterion) -> dict[str, float]:
    field = criterion.metric if _records_have_field(path, criterion.metric) else None
    return load_item_outcomes(path, bounds=tuple(criterion.bounds), field=field)


def _records_have_field(path: str | Path, name: str) -> bool:
    for _, obj in iter_jsonl(path):
        return name in obj
    return False


def evaluate_decision_rule_file(
    spec_path: str | Path, treatment_path: str | Path, baseline_path: str | Path, permutation_seed: int = 0
) -> DecisionRuleResult:
    """Load a spec's ``decision_rule`` and evaluate it on a treatment and a baseline per-item file."""
    rule, sha = load_decision_rule(spec_path)
    files: dict[str, Any] = {"treatment": treatment_path, "baseline": baseline_path}
    return evaluate_decision_rule(rule, files, spec_sha256=sha, permutation_seed=permutation_seed)
