"""Declarative gates (``docs/statistics.md`` §4; the GS1 spec's ``activation_gate.checks`` format).

A check is ``{metric, measures, min?, max?, one_of?}``. Evaluating it against a metrics dict gives the
observed value, the threshold, pass/fail, a reason and the evidence. Gates are never relaxed after
data are seen, so every evaluation records the SHA-256 of the spec it came from.

Accepted metrics: ``{"name": value, ...}``; a value may also be an object ``{"value": v, ...}`` whose
other keys (run ids, n, ...) are that metric's evidence. An optional top-level ``"evidence"`` object is
attached to every check, and an optional ``"metrics"`` object may wrap the values. ``evidence`` and
``metrics`` must be JSON objects (``GateInputError`` otherwise).

**Values.** A value checked against ``min``/``max`` must be a finite JSON number, or a string that is
a plain decimal number: optional sign, digits with an optional decimal point, optional exponent
(``"8"``, ``"-0.5"``, ``"1e3"``), nothing else — no surrounding spaces, no ``_`` separators, no
``"inf"``/``"Infinity"``/``"nan"``. Anything else (``Infinity``, ``NaN``, ``"1_0"``, ``true``, an
object) **fails** the check with a reason. ``one_of`` compares the value's text, or its number when
both sides parse under the same rule.

**Records.** An evaluation keeps the values it saw, a non-finite float as it is. ``rftlab gates --json``
prints it as ``null`` (``rftlab.runs.strictjson.json_output``); a gate record in a run folder writes it as
the text ``"NaN"`` (``nonfinite_as_text``), as it always has.

**Specs.** A threshold must be a finite JSON number and ``min <= max``; a spec that breaks this is a
bad spec (a ``pydantic.ValidationError``, exit 2 in the CLI), never a failing gate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rftlab.analysis.io import AnalysisInputError, read_json_file
from rftlab.runs.hashing import file_sha256
from rftlab.runs.strictjson import json_plain

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
Threshold = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class GateInputError(AnalysisInputError):
    """The metrics given to a gate are malformed (not a value that fails: a file that is wrong)."""


class GateCheck(BaseModel):
    """One declarative check on a named metric; thresholds are finite numbers with min <= max."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    metric: str
    measures: str = ""
    min: Threshold | None = None
    max: Threshold | None = None
    one_of: list[str] | None = None

    @model_validator(mode="after")
    def _has_a_condition(self) -> GateCheck:
        if self.min is None and self.max is None and self.one_of is None:
            raise ValueError(f"check on {self.metric!r} declares none of min, max, one_of")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"check on {self.metric!r} has min {self.min:g} > max {self.max:g}")
        if self.one_of is not None and not self.one_of:
            raise ValueError(f"check on {self.metric!r} has an empty one_of list")
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
    return [GateCheck.model_validate(item, strict=True) for item in raw]


def parse_gate_value(value: Any) -> float | None:
    """A gate value as a finite float, or ``None`` if it is not one (see the module docstring).

    Finite JSON numbers (not booleans) and strict decimal strings are accepted; ``Infinity``, ``NaN``,
    ``"inf"``, ``"1_0"``, ``" 8"`` and every other shape give ``None``.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            return None
    elif isinstance(value, str) and len(value) <= 400 and _DECIMAL.fullmatch(value):
        number = float(value)
    else:
        return None
    return number if math.isfinite(number) else None


def _describe(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "a huge integer"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _matches(observed: Any, option: str) -> bool:
    if isinstance(observed, str) and observed == option:
        return True
    if isinstance(observed, int) and not isinstance(observed, bool) and str(observed) == option:
        return True
    a, b = parse_gate_value(observed), parse_gate_value(option)
    return a is not None and b is not None and a == b


def evaluate_check(
    check: GateCheck, metrics: Mapping[str, Any], evidence: Mapping[str, Any] | None = None
) -> CheckResult:
    """Evaluate one check; a missing or non-numeric metric fails with a reason instead of raising."""
    evidence = dict(json_plain(dict(evidence or {})))
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
        failures.append(f"{_describe(observed)} is not one of {check.one_of}")
    if check.min is not None or check.max is not None:
        number = parse_gate_value(observed)
        if number is None:
            failures.append(
                f"{_describe(observed)} is not a finite number (a JSON number or a plain decimal string)"
            )
        else:
            if check.min is not None and not number >= check.min:
                failures.append(f"{number:g} < min {check.min:g}")
            if check.max is not None and not number <= check.max:
                failures.append(f"{number:g} > max {check.max:g}")
    reason = "; ".join(failures) if failures else "within threshold"
    return CheckResult(
        check.metric,
        check.measures,
        json_plain(observed),
        check.threshold(),
        not failures,
        reason,
        json_plain(evidence),
    )


def evaluate_gate(
    checks: Sequence[GateCheck],
    metrics: Mapping[str, Any],
    spec_sha256: str,
    evidence: Mapping[str, Any] | None = None,
    spec_path: str | None = None,
) -> GateEvaluation:
    """Evaluate every check against ``metrics`` (see the module docstring for the accepted shapes).

    Raises ``GateInputError`` when ``metrics`` is not an object, or its ``metrics``/``evidence`` keys
    hold something other than an object.
    """
    if not isinstance(metrics, Mapping):
        raise GateInputError(f"metrics must be a JSON object, got {type(metrics).__name__}")
    top_evidence = metrics.get("evidence")
    if top_evidence is not None and not isinstance(top_evidence, Mapping):
        raise GateInputError(
            f"'evidence' must be a JSON object (e.g. run ids, n), got {type(top_evidence).__name__}"
        )
    if evidence is not None and not isinstance(evidence, Mapping):
        raise GateInputError(f"evidence must be a mapping, got {type(evidence).__name__}")
    if "metrics" in metrics:
        if not isinstance(metrics["metrics"], Mapping):
            raise GateInputError(
                f"'metrics' must be a JSON object of values, got {type(metrics['metrics']).__name__}"
            )
        evidence = {**dict(top_evidence or {}), **dict(evidence or {})}
        metrics = metrics["metrics"]
    elif top_evidence is not None:
        evidence = {**dict(top_evidence), **dict(evidence or {})}
    evidence = json_plain(dict(evidence or {}))
    results = tuple(evaluate_check(check, metrics, evidence) for check in checks)
    return GateEvaluation(
        spec_sha256=spec_sha256, passed=all(r.passed for r in results), checks=results, spec_path=spec_path
    )


def evaluate_gate_file(spec_path: str | Path, metrics: Mapping[str, Any]) -> GateEvaluation:
    """Load checks from a spec file and evaluate them; records the file's SHA-256."""
    spec_path = Path(spec_path)
    spec = read_json_file(spec_path, "spec")
    if not isinstance(spec, Mapping):
        raise AnalysisInputError(f"spec {spec_path}: expected a JSON object")
    return evaluate_gate(parse_checks(spec), metrics, file_sha256(spec_path), spec_path=str(spec_path))
