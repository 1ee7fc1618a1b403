"""Declarative gates (``specs/statistics.md`` §4; the GS1 spec's ``activation_gate.checks`` format).

A check is ``{metric, measures, min?, max?, one_of?}``. Evaluating it against a metrics dict gives the
observed value, the threshold, pass/fail, a reason and the evidence. Gates are never relaxed after
data are seen, so every evaluation records the SHA-256 of the spec it came from.

Accepted metrics: ``{"name": value, ...}``; a value may also be an object ``{"value": v, ...}`` whose
other keys (run ids, n, ...) are that metric's evidence. An optional top-level ``"evidence"`` object is
attached to every check, and an optional ``"metrics"`` object may wrap the values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from rftlab.runs.hashing import file_sha256


class GateCheck(BaseModel):
    """One declarative check on a named metric."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str
    measures: str = ""
    min: float | None = None
    max: float | None = None
    one_of: list[str] | None = None

    @model_validator(mode="after")
    def _has_a_condition(self) -> GateCheck:
        if self.min is None and self.max is None and self.one_of is None:
            raise ValueError(f"check on {self.metric!r} declares none of min, max, one_of")
        return self

    def threshold(self) -> dict[str, Any]:
        return {
            k: v for k, v in (("min", self.min), ("max", self.max), ("one_of", self.one_of)) if v is not None
        }


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check: the observed value against its threshold, with the evidence."""

    metric: str
    measures: str
    observed: Any
    threshold: dict[str, Any]
    passed: bool
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GateEvaluation:
    """All checks of one gate; ``passed`` iff every check passed. ``spec_sha256`` pins the spec."""

    spec_sha256: str
    passed: bool
    checks: tuple[CheckResult, ...]
    spec_path: str | None = None

    def to_dict(self) -> dict:
        return {
            "spec_sha256": self.spec_sha256,
            "spec_path": self.spec_path,
            "passed": self.passed,
            "n_checks": len(self.checks),
            "n_failed": sum(not c.passed for c in self.checks),
            "checks": [asdict(c) for c in self.checks],
        }


def parse_checks(spec: Mapping[str, Any]) -> list[GateCheck]:
    """Checks from a whole spec (``activation_gate.checks``) or a bare ``{"checks": [...]}``."""
    if "activation_gate" in spec and isinstance(spec["activation_gate"], Mapping):
        raw = spec["activation_gate"].get("checks")
    else:
        raw = spec.get("checks")
    if not isinstance(raw, list) or not raw:
        raise ValueError("spec has no non-empty 'activation_gate.checks' or 'checks' list")
    return [GateCheck.model_validate(item) for item in raw]


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _matches(observed: Any, option: str) -> bool:
    if str(observed) == option:
        return True
    a, b = _as_float(observed), _as_float(option)
    return a is not None and b is not None and a == b


def evaluate_check(
    check: GateCheck, metrics: Mapping[str, Any], evidence: Mapping[str, Any] | None = None
) -> CheckResult:
    """Evaluate one check; a missing or non-numeric metric fails with a reason instead of raising."""
    evidence = dict(evidence or {})
    if check.metric not in metrics or metrics[check.metric] is None:
        return CheckResult(
            check.metric,
            check.measures,
            None,
            check.threshold(),
            False,
            f"metric {check.metric!r} is missing from the metrics",
            evidence,
        )
    observed = metrics[check.metric]
    if isinstance(observed, Mapping):
        evidence.update({k: v for k, v in observed.items() if k != "value"})
        observed = observed.get("value")
    failures: list[str] = []
    if check.one_of is not None and not any(_matches(observed, option) for option in check.one_of):
        failures.append(f"{observed!r} is not one of {check.one_of}")
    if check.min is not None or check.max is not None:
        number = _as_float(observed)
        if number is None or math.isnan(number):
            failures.append(f"{observed!r} is not a number")
        else:
            if check.min is not None and not number >= check.min:
                failures.append(f"{number:g} < min {check.min:g}")
            if check.max is not None and not number <= check.max:
                failures.append(f"{number:g} > max {check.max:g}")
    reason = "; ".join(failures) if failures else "within threshold"
    return CheckResult(
        check.metric, check.measures, observed, check.threshold(), not failures, reason, evidence
    )


def evaluate_gate(
    checks: Sequence[GateCheck],
    metrics: Mapping[str, Any],
    spec_sha256: str,
    evidence: Mapping[str, Any] | None = None,
    spec_path: str | None = None,
) -> GateEvaluation:
    """Evaluate every check against ``metrics`` (see the module docstring for the accepted shapes)."""
    if "metrics" in metrics and isinstance(metrics["metrics"], Mapping):
        evidence = {**dict(metrics.get("evidence") or {}), **dict(evidence or {})}
        metrics = metrics["metrics"]
    elif "evidence" in metrics and isinstance(metrics["evidence"], Mapping):
        evidence = {**dict(metrics["evidence"]), **dict(evidence or {})}
    results = tuple(evaluate_check(check, metrics, evidence) for check in checks)
    return GateEvaluation(
        spec_sha256=spec_sha256, passed=all(r.passed for r in results), checks=results, spec_path=spec_path
    )


def evaluate_gate_file(spec_path: str | Path, metrics: Mapping[str, Any]) -> GateEvaluation:
    """Load checks from a spec file and evaluate them; records the file's SHA-256."""
    spec_path = Path(spec_path)
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    if not isinstance(spec, Mapping):
        raise ValueError(f"{spec_path}: spec must be a JSON object")
    return evaluate_gate(parse_checks(spec), metrics, file_sha256(spec_path), spec_path=str(spec_path))
