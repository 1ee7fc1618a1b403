"""Stage-1 arena SFT gates (docs/arena.md §11): the validated gate spec, checkpoint eligibility on
validation, and promotion / claim gates on the selected checkpoint.

``load_gate_spec`` reads ``data/specs/arena_gates.json`` into ``GateSpec`` (pydantic, strict): known gate
names G1–G7, the metric each gate may use, the data it reads (``frozen`` replies, ``validation`` scoring or
the ``paired`` comparison of §10.6), a rule (``point`` / ``lower_bound`` for rates, ``count`` for failure
counts, ``value`` for paired numbers), finite thresholds and a minimum n. ``claim_gates`` must be a JSON
list (``"G7"`` written as a string is refused, not read as ``('G', '7')``). A bad spec raises
``GateSpecError`` with one line.

``load_summary`` validates an evaluation ``summary.json`` field by field (``SummaryError``, one line).

``gate_metrics(candidate, comparison)`` turns the SFT run's summary and the base-vs-SFT comparison
(``rftlab.analysis.arena.compare``) into counts and values; ``evaluate_gates`` applies the spec's checks:
a rate check reports n, the point estimate, the Wilson and exact lower bounds and its operating
characteristic (``rftlab.analysis.rate_gates``); a check with fewer than ``min_n`` observations says
``INSUFFICIENT N``; a metric that cannot be computed is ``MISSING`` with the reason. G5 and G7 read the
comparison (there is no second computation of them). ``selection_eligibility`` applies the spec's
``selection`` checks to one checkpoint's validation scoring.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rftlab.analysis.rate_gates import FAIL, INSUFFICIENT, PASS, count_gate, rate_gate
from rftlab.runs.hashing import file_sha256
from rftlab.runs.paths import SPECS_DIR
from rftlab.runs.strictjson import read_json_file, refuse_constant

DEFAULT_GATE_SPEC = SPECS_DIR / "arena_gates.json"
MISSING = "MISSING"
GateName = Literal["G1", "G2", "G3", "G4", "G5", "G6", "G7"]
GATE_NAMES: tuple[str, ...] = ("G1", "G2", "G3", "G4", "G5", "G6", "G7")
Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
RankKey = Literal["selection_score", "broadcast.exact", "act.exact", "broadcast.supported", "act.legal"]

# metric -> (gate, rule family, data it may read)
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "act_schema_valid": ("G1", "rate", ("frozen", "validation")),
    "broadcast_schema_valid": ("G2", "rate", ("frozen", "validation")),
    "unsupported_fact_responses": ("G3", "count", ("validation",)),
    "act_legal": ("G4", "rate", ("frozen", "validation")),
    "regret_difference_mean": ("G5", "value", ("paired",)),
    "regret_difference_ci_high": ("G5", "value", ("paired",)),
    "action_order_consistency_rate": ("G6", "rate", ("frozen",)),
    "max_perm_regret_delta": ("G6", "value", ("frozen",)),
    "generated_minus_dropped_ci_low": ("G7", "value", ("paired",)),
    "generated_minus_shuffled_ci_low": ("G7", "value", ("paired",)),
    "generated_minus_shuffled_within_ci_low": ("G7", "value", ("paired",)),
}
_RULES = {"rate": ("point", "lower_bound"), "count": ("count",), "value": ("value",)}


class GateSpecError(ValueError):
    """The gate spec is missing, not JSON or not a valid arena gate spec (one line saying why)."""


class SummaryError(ValueError):
    """A summary file is missing or is not a valid arena evaluation summary."""


class CheckSpec(BaseModel):
    """One check of the gate spec."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    gate: GateName
    metric: str
    data: Literal["frozen", "validation", "paired"]
    rule: Literal["point", "lower_bound", "count", "value"]
    min: Finite | None = None
    max: Finite | None = None
    min_n: int = Field(ge=1)
    measures: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> CheckSpec:
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}; known: {', '.join(METRICS)}")
        gate, family, data = METRICS[self.metric]
        if self.gate != gate:
            raise ValueError(f"metric {self.metric!r} belongs to gate {gate}, not {self.gate}")
        if self.data not in data:
            raise ValueError(f"metric {self.metric!r} reads {' or '.join(data)} data, not {self.data!r}")
        if self.rule not in _RULES[family]:
            raise ValueError(f"metric {self.metric!r} needs rule {' or '.join(_RULES[family])}")
        if family == "rate" and (self.min is None or self.max is not None or not 0 <= self.min <= 1):
            raise ValueError(f"rate check {self.metric!r} needs a 'min' in [0, 1] and no 'max'")
        if family == "count" and (
            self.max is None or self.min is not None or self.max < 0 or self.max != int(self.max)
        ):
            raise ValueError(f"count check {self.metric!r} needs an integer 'max' >= 0 and no 'min'")
        if family == "value":
            if self.min is None and self.max is None:
                raise ValueError(f"check {self.metric!r} declares neither 'min' nor 'max'")
            if self.min is not None and self.max is not None and self.min > self.max:
                raise ValueError(f"check {self.metric!r} has min > max")
        return self

    def threshold_text(self) -> str:
        parts = []
        if self.min is not None:
            parts.append(f">= {self.min:g}")
        if self.max is not None:
            parts.append(f"<= {self.max:g}")
        return " and ".join(parts)


class SelectionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    description: str = ""
    checks: list[CheckSpec] = Field(min_length=1)
    rank_by: list[RankKey] = Field(min_length=1)
    tie_break: Literal["earlier_step"]

    @model_validator(mode="after")
    def _validation_only(self) -> SelectionSpec:
        for check in self.checks:
            if check.data != "validation" or check.gate not in ("G1", "G2", "G3", "G4"):
                raise ValueError("selection checks are G1-G4 on validation data only")
        return self


class GateSpec(BaseModel):
    """The whole arena gate spec (``data/specs/arena_gates.json``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    description: str = ""
    definitions: dict[str, str] = Field(default_factory=dict)
    licenses: dict[GateName, str]
    claim_gates: list[GateName] = Field(min_length=1)
    claim_gates_note: str = ""
    checks: list[CheckSpec] = Field(min_length=1)
    selection: SelectionSpec

    @model_validator(mode="after")
    def _complete(self) -> GateSpec:
        metrics = [c.metric for c in self.checks]
        repeated = sorted({m for m in metrics if metrics.count(m) > 1})
        if repeated:
            raise ValueError(f"metric(s) {repeated} checked twice")
        used = {c.gate for c in self.checks}
        if not set(self.claim_gates) <= used:
            raise ValueError(f"claim gate(s) {sorted(set(self.claim_gates) - used)} have no check")
        if used == set(self.claim_gates):
            raise ValueError("every gate is a claim gate: nothing would decide promotion")
        unlicensed = sorted(used - set(self.licenses))
        if unlicensed:
            raise ValueError(f"gate(s) {unlicensed} do not say which claim they license ('licenses')")
        return self

    @property
    def labels(self) -> dict[str, str]:
        return {c.metric: c.gate for c in self.checks}


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "the top level"
    return f"{where}: {error['msg']}"


def parse_gate_spec(raw: Any, where: str = "gate spec") -> GateSpec:
    if not isinstance(raw, dict):
        raise GateSpecError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    try:
        return GateSpec.model_validate(raw, strict=True)
    except ValidationError as exc:
        raise GateSpecError(f"{where} is not a valid arena gate spec: {_first_error(exc)}") from None


def load_gate_spec(path: str | Path = DEFAULT_GATE_SPEC) -> tuple[GateSpec, str]:
    """``(spec, SHA-256 of the file)``; ``GateSpecError`` (one line) for a missing, non-JSON or bad spec."""
    path = Path(path)
    raw = read_json_file(path, "gate spec", GateSpecError)
    return parse_gate_spec(raw, f"gate spec {path}"), file_sha256(path)


# ------------------------------------------------------------------------------------ summaries

Rate01 = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0.0, le=1.0)]
Count = Annotated[int, Field(strict=True, ge=0)]


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Failures(_Loose):
    schema_valid: Count
    legal: Count
    supported: Count


class _PhaseValidation(_Loose):
    rows: Count
    schema_valid: Rate01 | None = None
    legal: Rate01 | None = None
    supported: Rate01 | None = None
    exact: Rate01 | None = None
    failures: _Failures

    @model_validator(mode="after")
    def _failures_within_rows(self) -> _PhaseValidation:
        if max(self.failures.schema_valid, self.failures.legal, self.failures.supported) > self.rows:
            raise ValueError("failure counts exceed rows")
        return self


class _Validation(_Loose):
    act: _PhaseValidation
    broadcast: _PhaseValidation
    unsupported_fact_responses: Count
    selection_score: Rate01 | None = None

    @model_validator(mode="after")
    def _count_within_rows(self) -> _Validation:
        if self.unsupported_fact_responses > self.broadcast.rows:
            raise ValueError("unsupported_fact_responses exceeds the broadcast rows")
        return self


class _ReplyCounts(_Loose):
    n: Count
    schema_valid: Count
    legal: Count | None = None
    valid: Count | None = None


class _Replies(_Loose):
    act: _ReplyCounts
    broadcast: _ReplyCounts


class _PermDelta(_Loose):
    mean: Finite
    mean_95: list[Finite] = Field(min_length=2, max_length=2)


class _Summary(_Loose):
    eval_version: str
    arena_version: str
    manifest_sha256: str
    model: str | None = None
    num_cases: int = Field(ge=1, le=1_000_000_000)  # float arithmetic on counts stays exact far below 2**53
    complete_manifest: bool = False
    message_strict_rate: Rate01
    action_order_consistency_rate: Rate01
    conditions: dict[str, dict[str, Any]]
    per_case: list[dict[str, Any]] = Field(min_length=1)
    perm_regret_delta: dict[str, _PermDelta] = Field(default_factory=dict)
    replies: _Replies | None = None
    validation: _Validation | None = None


def validate_summary(summary: Any, where: str = "summary") -> dict[str, Any]:
    """The summary unchanged when every field the gates read is well-typed and finite; ``SummaryError``
    (one line) otherwise."""
    if not isinstance(summary, dict):
        raise SummaryError(f"{where} is not an arena evaluation summary (a JSON object)")
    if "conditions" not in summary or "per_case" not in summary:
        raise SummaryError(f"{where} is not an arena evaluation summary (run `rftlab arena eval`)")
    try:
        _Summary.model_validate(summary, strict=True)
    except ValidationError as exc:
        raise SummaryError(f"{where}: {_first_error(exc)}") from None
    for phase in ("act", "broadcast"):
        counts = (summary.get("replies") or {}).get(phase)
        if counts and any((counts.get(k) or 0) > counts["n"] for k in ("schema_valid", "legal", "valid")):
            raise SummaryError(f"{where}: replies.{phase} counts exceed n")
    return summary


def load_summary(path: str | Path) -> dict[str, Any]:
    """``summary.json`` from a directory or a file path, validated (``SummaryError``, one line)."""
    path = Path(path)
    file = path / "summary.json" if path.is_dir() else path
    if file.exists() and not file.is_file():  # a FIFO or device would block the read
        raise SummaryError(f"{file} is not a regular file (a FIFO, socket or device); give the file itself")
    try:
        summary = json.loads(file.read_text(encoding="utf-8"), parse_constant=refuse_constant)
    except OSError as exc:
        raise SummaryError(f"cannot read {file}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise SummaryError(f"{file} is not JSON: {str(exc).splitlines()[0] if str(exc) else exc}") from None
    return validate_summary(summary, str(file))


# ------------------------------------------------------------------------------------ evaluation


@dataclass(frozen=True)
class CheckResult:
    """One check: what it decided on, with n, bounds and operating characteristic in ``evidence``."""

    gate: str
    metric: str
    data: str
    rule: str
    threshold: str
    min_n: int
    n: int | None
    observed: float | None
    verdict: str
    reason: str
    measures: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict == PASS


@dataclass(frozen=True)
class GateEvaluation:
    """Every check of one spec section, the spec's SHA-256 and which gates are claim-only."""

    spec_name: str
    spec_sha256: str
    checks: tuple[CheckResult, ...]
    claim_gates: tuple[str, ...]
    licenses: dict[str, str]
    spec_path: str | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def check(self, metric: str) -> CheckResult:
        """The check of ``metric``; ``KeyError`` naming the metrics there are when none has that name."""
        for c in self.checks:
            if c.metric == metric:
                return c
        raise KeyError(f"no check of {metric!r}; the checks are {', '.join(c.metric for c in self.checks)}")

    def gate_verdicts(self) -> dict[str, str]:
        """Per gate: PASS when every check passed, else the first non-passing verdict."""
        out: dict[str, str] = {}
        for check in self.checks:
            if out.get(check.gate, PASS) == PASS:
                out[check.gate] = check.verdict
        return out

    def verdicts(self) -> dict[str, bool]:
        promotion = [c for c in self.checks if c.gate not in self.claim_gates]
        claim = [c for c in self.checks if c.gate in self.claim_gates]
        return {
            "promotion": bool(promotion) and all(c.passed for c in promotion),
            "communication_claim": bool(claim) and all(c.passed for c in claim),
            "all": self.passed,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec_name": self.spec_name,
            "spec_sha256": self.spec_sha256,
            "spec_path": self.spec_path,
            "passed": self.passed,
            "n_checks": len(self.checks),
            "n_failed": sum(not c.passed for c in self.checks),
            "claim_gates": list(self.claim_gates),
            "gate_verdicts": self.gate_verdicts(),
            "verdicts": self.verdicts(),
            "licenses": dict(self.licenses),
            "checks": [asdict(c) for c in self.checks],
        }


def _validation_counts(validation: Mapping[str, Any], metric: str) -> tuple[int, int] | str:
    """``(successes, n)`` of a rate metric, or ``(failures, n)`` of the count metric, from validation."""
    act, bc = validation["act"], validation["broadcast"]
    if metric == "act_schema_valid":
        return act["rows"] - act["failures"]["schema_valid"], act["rows"]
    if metric == "act_legal":
        return act["rows"] - act["failures"]["legal"], act["rows"]
    if metric == "broadcast_schema_valid":
        return bc["rows"] - bc["failures"]["schema_valid"], bc["rows"]
    if metric == "unsupported_fact_responses":
        return validation["unsupported_fact_responses"], bc["rows"]
    return f"{metric} is not a validation metric"


def _frozen_counts(summary: Mapping[str, Any], metric: str) -> tuple[int, int] | str:
    if metric == "action_order_consistency_rate":
        n = summary["num_cases"]
        k = round(summary["action_order_consistency_rate"] * n)
        if abs(k - summary["action_order_consistency_rate"] * n) > 1e-6:
            return "action_order_consistency_rate is not a whole number of cases"
        return k, n
    replies = summary.get("replies")
    if not replies:
        return "the summary has no per-reply counts (re-run `rftlab arena eval` with this version)"
    phase, key = {
        "act_schema_valid": ("act", "schema_valid"),
        "act_legal": ("act", "legal"),
        "broadcast_schema_valid": ("broadcast", "schema_valid"),
    }[metric]
    if replies[phase].get(key) is None:
        return f"the summary's replies.{phase} has no {key!r} count"
    return replies[phase][key], replies[phase]["n"]


def _declared_bound(bound: float | None, check: CheckSpec, name: str) -> float:
    """The check's ``min`` or ``max``. The spec's validator requires it of every rate or count check."""
    if bound is None:
        raise GateSpecError(f"check {check.metric!r} declares no {name!r}")
    return bound


def _rate_result(check: CheckSpec, counts: tuple[int, int] | str) -> CheckResult:
    if isinstance(counts, str):
        return _missing(check, counts)
    k, n = counts
    if n == 0:
        return _result(check, 0, None, INSUFFICIENT, f"no observations (needs {check.min_n})", {})
    if check.rule == "count":
        limit = int(_declared_bound(check.max, check, "max"))
        oc = count_gate(k, n, limit, check.min_n)
        observed, reason = float(k), f"{k} of {n} failed (at most {limit} allowed)"
    elif check.rule == "value":
        raise GateSpecError(f"check {check.metric!r} has rule 'value': it is not a rate or count check")
    else:
        oc = rate_gate(k, n, _declared_bound(check.min, check, "min"), check.rule, check.min_n)
        observed = oc.decided_on
        label = "point estimate" if check.rule == "point" else "Wilson 95% lower bound"
        reason = f"{label} {observed:.4f} from {k}/{n}"
    if oc.verdict == INSUFFICIENT:
        reason = f"insufficient n: {n} < {check.min_n}"
    return _result(check, n, observed, oc.verdict, reason, oc.to_dict())


def _value_result(check: CheckSpec, value: float | None, n: int, evidence: Mapping[str, Any]) -> CheckResult:
    if value is None or not math.isfinite(value):
        return _missing(check, "the value is missing or not finite")
    if n < check.min_n:
        return _result(check, n, value, INSUFFICIENT, f"insufficient n: {n} < {check.min_n}", evidence)
    ok = (check.min is None or value >= check.min) and (check.max is None or value <= check.max)
    reason = "within threshold" if ok else f"{value:.4g} is not {check.threshold_text()}"
    return _result(check, n, value, PASS if ok else FAIL, reason, evidence)


def _result(check, n, observed, verdict, reason, evidence) -> CheckResult:
    return CheckResult(
        check.gate,
        check.metric,
        check.data,
        check.rule,
        check.threshold_text(),
        check.min_n,
        n,
        observed,
        verdict,
        reason,
        check.measures,
        dict(evidence),
    )


def _missing(check: CheckSpec, why: str) -> CheckResult:
    return _result(check, None, None, MISSING, why, {})


_PAIRED = {
    "regret_difference_mean": ("primary", "mean"),
    "regret_difference_ci_high": ("primary", "high"),
    "generated_minus_dropped_ci_low": ("generated_minus_dropped", "low"),
    "generated_minus_shuffled_ci_low": ("generated_minus_shuffled", "low"),
    "generated_minus_shuffled_within_ci_low": ("generated_minus_shuffled_within", "low"),
}


def _paired_result(check: CheckSpec, comparison: Mapping[str, Any] | str | None) -> CheckResult:
    if comparison is None or isinstance(comparison, str):
        return _missing(check, f"no paired comparison: {comparison or 'none given'}")
    name, part = _PAIRED[check.metric]
    endpoints = {**comparison["endpoints"], **comparison.get("rftlab_additions", {}).get("endpoints", {})}
    if name not in endpoints:
        return _missing(check, f"the comparison has no {name!r} endpoint")
    e = endpoints[name]
    value = {
        "mean": e["mean_difference"],
        "low": e["mean_difference_95"][0],
        "high": e["mean_difference_95"][1],
    }
    evidence = {
        "endpoint": name,
        "mean": e["mean_difference"],
        "ci95": e["mean_difference_95"],
        "randomization_p_two_sided": e["randomization_p_two_sided"],
        "sign_test": e.get("sign_test"),
        "complete_manifest": comparison.get("complete_manifest"),
    }
    return _value_result(check, value[part], e["cases"], evidence)


def _check_result(
    check: CheckSpec,
    candidate: Mapping[str, Any] | None,
    validation: Mapping[str, Any] | None,
    comparison: Mapping[str, Any] | str | None,
) -> CheckResult:
    if check.data == "paired":
        return _paired_result(check, comparison)
    if check.data == "validation":
        if validation is None:
            return _missing(check, "no validation scoring (evaluate with --validation-data)")
        return _rate_result(check, _validation_counts(validation, check.metric))
    if candidate is None:
        return _missing(check, "no frozen evaluation summary of the candidate")
    if check.metric == "max_perm_regret_delta":
        deltas = candidate.get("perm_regret_delta") or {}
        if not deltas:
            return _missing(check, "the summary has no perm_regret_delta")
        worst = max(deltas, key=lambda k: deltas[k]["mean"])
        evidence = {"permutation": int(worst), "ci95": deltas[worst]["mean_95"]}
        return _value_result(check, deltas[worst]["mean"], candidate["num_cases"], evidence)
    return _rate_result(check, _frozen_counts(candidate, check.metric))


def evaluate_checks(
    checks: Sequence[CheckSpec],
    spec: GateSpec,
    spec_sha256: str,
    *,
    candidate: Mapping[str, Any] | None = None,
    validation: Mapping[str, Any] | None = None,
    comparison: Mapping[str, Any] | str | None = None,
    spec_path: str | None = None,
) -> GateEvaluation:
    """Apply ``checks`` to the given inputs (see the module docstring); a ``comparison`` that is a string
    is the reason there is none (e.g. the comparison's refusal)."""
    results = tuple(_check_result(c, candidate, validation, comparison) for c in checks)
    return GateEvaluation(
        spec.name,
        spec_sha256,
        results,
        tuple(spec.claim_gates),
        {gate: claim for gate, claim in spec.licenses.items()},
        spec_path,
    )


def evaluate_arena_gates(
    candidate: Mapping[str, Any],
    comparison: Mapping[str, Any] | str | None,
    spec_path: str | Path = DEFAULT_GATE_SPEC,
) -> GateEvaluation:
    """Promotion and claim gates (the spec's ``checks``) on the candidate's summary (its frozen replies and
    its ``validation`` block) and the base-vs-SFT comparison (or the reason there is none)."""
    spec, sha = load_gate_spec(spec_path)
    return evaluate_checks(
        spec.checks,
        spec,
        sha,
        candidate=candidate,
        validation=candidate.get("validation"),
        comparison=comparison,
        spec_path=str(spec_path),
    )


def selection_eligibility(
    validation: Mapping[str, Any], spec_path: str | Path = DEFAULT_GATE_SPEC
) -> GateEvaluation:
    """The spec's ``selection`` checks (G1–G4 on validation) for one checkpoint's validation summary."""
    spec, sha = load_gate_spec(spec_path)
    return evaluate_checks(spec.selection.checks, spec, sha, validation=validation, spec_path=str(spec_path))


# ------------------------------------------------------------------------------------ display


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def gate_rows(evaluation: GateEvaluation) -> list[dict[str, Any]]:
    """One row per check for a table: gate, metric, data, n, point, lower bound, rule, threshold,
    pass probability at the threshold (rate checks), randomisation p (paired checks), verdict, reason."""
    rows = []
    for c in evaluation.checks:
        ev = c.evidence
        rows.append(
            {
                "gate": c.gate + (" (claim)" if c.gate in evaluation.claim_gates else ""),
                "metric": c.metric,
                "data": c.data,
                "n": c.n,
                "observed": ev.get("point") if c.rule in ("point", "lower_bound") else c.observed,
                "95% lower bound": ev.get("wilson_lower_95"),
                "rule": c.rule,
                "threshold": c.threshold,
                "min n": c.min_n,
                "P(pass) at threshold": ev.get("pass_probability_at_threshold"),
                "sign-flip p": ev.get("randomization_p_two_sided"),
                "verdict": c.verdict,
                "reason": c.reason,
            }
        )
    return rows


def gate_table(evaluation: GateEvaluation) -> str:
    """A Markdown table of ``gate_rows``."""
    return rows_table(gate_rows(evaluation))


def rows_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table of gate rows (``gate_rows``, or the ``rows`` a saved ``gates.json`` holds)."""
    from rftlab.analysis.paired import SIGN_FLIP_TRIALS, format_p

    header = [
        "gate",
        "metric",
        "data",
        "n",
        "observed",
        "95% lower bound",
        "rule",
        "threshold",
        "min n",
        "P(pass) at threshold",
        "sign-flip p",
        "verdict",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        p = row["sign-flip p"]
        cells = [
            row["gate"],
            f"`{row['metric']}`",
            row["data"],
            _fmt(row["n"]),
            _fmt(row["observed"]),
            _fmt(row["95% lower bound"]),
            row["rule"],
            row["threshold"],
            str(row["min n"]),
            _fmt(row["P(pass) at threshold"], 2),
            "–" if p is None else format_p(p, SIGN_FLIP_TRIALS),
            row["verdict"] if row["verdict"] in (PASS, FAIL) else f"{row['verdict']} ({row['reason']})",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def license_rows(evaluation: GateEvaluation) -> list[dict[str, str]]:
    """Per gate: the claim it licenses and whether it does (every check PASS)."""
    verdicts = evaluation.gate_verdicts()
    return [
        {
            "gate": gate,
            "role": "claim" if gate in evaluation.claim_gates else "promotion",
            "licenses the claim that": evaluation.licenses.get(gate, ""),
            "verdict": verdicts[gate],
        }
        for gate in GATE_NAMES
        if gate in verdicts
    ]


__all__ = [
    "DEFAULT_GATE_SPEC",
    "FAIL",
    "GATE_NAMES",
    "INSUFFICIENT",
    "METRICS",
    "MISSING",
    "PASS",
    "CheckResult",
    "CheckSpec",
    "GateEvaluation",
    "GateSpec",
    "GateSpecError",
    "SummaryError",
    "evaluate_arena_gates",
    "evaluate_checks",
    "gate_rows",
    "gate_table",
    "license_rows",
    "load_gate_spec",
    "load_summary",
    "parse_gate_spec",
    "rows_table",
    "selection_eligibility",
    "validate_summary",
]
