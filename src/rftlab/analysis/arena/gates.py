"""Stage-1 arena SFT promotion gates (docs/arena.md §11) from a base and a candidate evaluation summary.

``gate_metrics`` turns the two ``summary.json`` files of ``rftlab arena eval`` into the metrics named in
``data/specs/arena_gates.json``; ``evaluate_arena_gates`` runs them through the gate engine
(``rftlab.analysis.gates``), which records the spec file's SHA-256, and ``gate_table`` lays out the observed
value, threshold, verdict and evidence of every check. A metric that cannot be computed (no validation
scoring, mismatched case sets) is missing, and a missing metric fails its check with that reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rftlab.analysis.arena.evaluation import paired_effect
from rftlab.analysis.gates import GateEvaluation, evaluate_gate, parse_checks
from rftlab.envs.arena.cases import FROZEN_MANIFEST_SHA256
from rftlab.runs.hashing import file_sha256
from rftlab.runs.paths import SPECS_DIR

DEFAULT_GATE_SPEC = SPECS_DIR / "arena_gates.json"


class SummaryError(ValueError):
    """A summary file is missing or is not an arena evaluation summary."""


def load_summary(path: str | Path) -> dict[str, Any]:
    """``summary.json`` from a directory or a file path, with a clear error for anything else."""
    path = Path(path)
    file = path / "summary.json" if path.is_dir() else path
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SummaryError(f"cannot read {file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SummaryError(f"{file} is not JSON: {exc}") from None
    if not isinstance(summary, dict) or "conditions" not in summary or "per_case" not in summary:
        raise SummaryError(f"{file} is not an arena evaluation summary (run `rftlab arena eval`)")
    return summary


def _case_key(case: Mapping[str, Any]) -> tuple:
    return (case["seed"], case["size"], case["opponent_style"])


def _metric(value: Any, **evidence: Any) -> dict[str, Any]:
    return {"value": value, **evidence}


def gate_metrics(base: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """The gate metrics (values with their evidence) of ``candidate`` against ``base``."""
    metrics: dict[str, Any] = {}
    validation = candidate.get("validation")
    if isinstance(validation, Mapping):
        act, bc = validation["act"], validation["broadcast"]
        metrics["act_schema_valid"] = _metric(
            act["schema_valid"], n=act["rows"], failures=act["failures"]["schema_valid"]
        )
        metrics["broadcast_schema_valid"] = _metric(
            bc["schema_valid"], n=bc["rows"], failures=bc["failures"]["schema_valid"]
        )
        metrics["unsupported_fact_responses"] = _metric(
            validation["unsupported_fact_responses"], n=bc["rows"], broadcast_supported=bc["supported"]
        )
        metrics["act_legal"] = _metric(act["legal"], n=act["rows"], failures=act["failures"]["legal"])

    comparable, why = True, ""
    for key in ("eval_version", "arena_version", "manifest_sha256"):
        if base.get(key) != candidate.get(key):
            comparable, why = (
                False,
                f"{key} differs: base {base.get(key)!r}, candidate {candidate.get(key)!r}",
            )
    if comparable and candidate.get("manifest_sha256") != FROZEN_MANIFEST_SHA256:
        comparable, why = (
            False,
            f"manifest_sha256 {candidate.get('manifest_sha256')!r} is not the frozen manifest",
        )
    base_cases = {_case_key(c): c for c in base["per_case"]}
    cand_cases = {_case_key(c): c for c in candidate["per_case"]}
    if comparable and (
        set(base_cases) != set(cand_cases)
        or len(base_cases) != len(base["per_case"])
        or len(cand_cases) != len(candidate["per_case"])
    ):
        comparable, why = False, "the two summaries do not cover the same cases exactly once"
    if comparable:
        keys = sorted(base_cases)
        effect = paired_effect(
            [cand_cases[k]["generated_regret"] for k in keys],
            [base_cases[k]["generated_regret"] for k in keys],
        )
        evidence = {
            "cases": effect["cases"],
            "mean": effect["mean_difference"],
            "ci95": effect["mean_difference_95"],
            "base_model": base.get("model"),
            "candidate_model": candidate.get("model"),
            "full_frozen_manifest": bool(candidate.get("complete_manifest"))
            and candidate.get("manifest_sha256") == FROZEN_MANIFEST_SHA256,
        }
        metrics["regret_difference_mean"] = _metric(effect["mean_difference"], **evidence)
        metrics["regret_difference_ci_high"] = _metric(effect["mean_difference_95"][1], **evidence)
    else:
        metrics["regret_difference_mean"] = None
        metrics["regret_difference_ci_high"] = None

    metrics["action_order_consistency_rate"] = _metric(
        candidate["action_order_consistency_rate"], cases=candidate["num_cases"]
    )
    deltas = candidate.get("perm_regret_delta") or {}
    if deltas:
        worst = max(deltas, key=lambda k: deltas[k]["mean"])
        metrics["max_perm_regret_delta"] = _metric(
            deltas[worst]["mean"], permutation=int(worst), ci95=deltas[worst]["mean_95"]
        )
    effects = candidate.get("communication_effects") or {}
    for name in ("generated_minus_dropped", "generated_minus_shuffled"):
        if name in effects:
            e = effects[name]
            metrics[f"{name}_ci_low"] = _metric(
                e["mean_difference_95"][0],
                mean=e["mean_difference"],
                ci95=e["mean_difference_95"],
                cases=e["cases"],
            )
    return {"metrics": metrics, "evidence": {} if comparable else {"paired_comparison": why}}


def evaluate_arena_gates(
    base: Mapping[str, Any], candidate: Mapping[str, Any], spec_path: str | Path = DEFAULT_GATE_SPEC
) -> tuple[GateEvaluation, dict[str, str], tuple[str, ...]]:
    """Evaluate every check of the spec file; returns the evaluation, the metric → gate label map and the
    claim-only gate labels."""
    spec_path = Path(spec_path)
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    computed = gate_metrics(base, candidate)
    evaluation = evaluate_gate(
        parse_checks(spec),
        computed["metrics"],
        file_sha256(spec_path),
        evidence=computed["evidence"],
        spec_path=str(spec_path),
    )
    return evaluation, dict(spec.get("labels", {})), tuple(spec.get("claim_gates", ()))


def verdicts(
    evaluation: GateEvaluation, labels: Mapping[str, str], claim_gates: Sequence[str] = ("G7",)
) -> dict:
    """``promotion`` (every check outside the claim gates passed) and ``communication_claim`` (claim gates)."""
    promotion = [c for c in evaluation.checks if labels.get(c.metric) not in claim_gates]
    claim = [c for c in evaluation.checks if labels.get(c.metric) in claim_gates]
    return {
        "promotion": all(c.passed for c in promotion),
        "communication_claim": bool(claim) and all(c.passed for c in claim),
        "all": evaluation.passed,
    }


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def gate_rows(evaluation: GateEvaluation, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """One row per check: gate, metric, observed, threshold, verdict, reason and evidence."""
    rows = []
    for check in evaluation.checks:
        threshold = " and ".join(
            f"{'>=' if k == 'min' else '<=' if k == 'max' else 'in'} {_fmt(v)}"
            for k, v in check.threshold.items()
        )
        rows.append(
            {
                "gate": labels.get(check.metric, ""),
                "metric": check.metric,
                "observed": check.observed,
                "threshold": threshold,
                "verdict": "PASS" if check.passed else "FAIL",
                "reason": check.reason,
                "evidence": check.evidence,
            }
        )
    return rows


def gate_table(evaluation: GateEvaluation, labels: Mapping[str, str]) -> str:
    """A Markdown table of the gate rows (evidence as compact JSON)."""
    lines = [
        "| gate | metric | observed | threshold | verdict | evidence |",
        "|---|---|---|---|---|---|",
    ]
    for row in gate_rows(evaluation, labels):
        evidence = json.dumps(row["evidence"], sort_keys=True, default=str)
        observed = _fmt(row["observed"]) if row["observed"] is not None else f"missing ({row['reason']})"
        lines.append(
            f"| {row['gate']} | `{row['metric']}` | {observed} | {row['threshold']} | {row['verdict']} | {evidence} |"
        )
    return "\n".join(lines)
