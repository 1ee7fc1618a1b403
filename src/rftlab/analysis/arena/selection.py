"""Checkpoint selection on validation only (docs/arena.md §11, step 4): eligibility, ranking, diagnosis.

``select_checkpoint(measurements)`` takes one validation summary per measured training step
(``analysis.arena.evaluation.summarize_validation``), applies the gate spec's ``selection`` checks (G1–G4
on validation, ``rftlab.analysis.arena.gates.selection_eligibility``), ranks the eligible checkpoints by
(``selection_score``, ``broadcast.exact``, ``act.exact``, ``broadcast.supported``, ``act.legal``), all
descending, and takes the earlier step on ties. When nothing is eligible it returns no step and a
diagnosis (what failed, and how the replies of the best-ranked checkpoint fail), never a relaxed
threshold. ``failure_breakdown`` counts how scored validation replies fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rftlab.analysis.arena.gates import DEFAULT_GATE_SPEC, load_gate_spec, selection_eligibility


def _value(validation: Mapping[str, Any], key: str) -> float:
    """A rank key's value (``"act.exact"`` → ``validation["act"]["exact"]``); a missing rate ranks last."""
    node: Any = validation
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else -1.0


def failure_breakdown(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """How scored validation replies fail, per phase (each failing reply counted once, first reason)."""
    out = {
        "ACT": {"rows": 0, "not_a_json_object": 0, "wrong_keys_or_types": 0, "not_a_displayed_action": 0},
        "BROADCAST": {
            "rows": 0,
            "not_a_json_object": 0,
            "wrong_keys": 0,
            "unsupported_fact": 0,
            "illegal_intent_or_request": 0,
        },
    }
    for r in records:
        phase = r.get("phase")
        if phase not in out:
            continue
        counts = out[phase]
        counts["rows"] += 1
        if not r.get("parsed"):
            counts["not_a_json_object"] += 1
        elif not r.get("schema_valid"):
            counts["wrong_keys_or_types" if phase == "ACT" else "wrong_keys"] += 1
        elif phase == "ACT" and not r.get("legal"):
            counts["not_a_displayed_action"] += 1
        elif phase == "BROADCAST" and r.get("unsupported_fact_response"):
            counts["unsupported_fact"] += 1
        elif phase == "BROADCAST" and not r.get("supported"):
            counts["illegal_intent_or_request"] += 1
    return out


def select_checkpoint(
    measurements: Sequence[Mapping[str, Any]],
    spec_path: str | Path = DEFAULT_GATE_SPEC,
    records_by_step: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Select among ``measurements`` (each ``{"step": int, "validation": summary}``); see the module docstring.

    Returns ``selected_step`` (``None`` when nothing is eligible), a ``rows`` table (one per step: the rank
    keys, the G1–G4 verdicts, eligible), the ``rank_by`` keys, the spec's SHA-256, and, when nothing is
    eligible, ``diagnosis`` (text) and ``failure_breakdown`` of the best-ranked step's replies (from
    ``records_by_step`` when given)."""
    spec, sha = load_gate_spec(spec_path)
    rank_by = list(spec.selection.rank_by)
    rows = []
    for m in measurements:
        validation = m["validation"]
        evaluation = selection_eligibility(validation, spec_path)
        verdicts = {c.gate: c.verdict for c in evaluation.checks}
        rows.append(
            {
                "step": int(m["step"]),
                **{key: _value(validation, key) for key in rank_by},
                "act.schema_valid": _value(validation, "act.schema_valid"),
                "broadcast.schema_valid": _value(validation, "broadcast.schema_valid"),
                "unsupported_fact_responses": validation.get("unsupported_fact_responses"),
                **verdicts,
                "eligible": evaluation.passed,
                "failed": [f"{c.gate} {c.metric}: {c.reason}" for c in evaluation.checks if not c.passed],
            }
        )
    if not rows:
        raise ValueError("no validation measurements to select from")

    def key(row: Mapping[str, Any]) -> tuple:
        return (*(row[k] for k in rank_by), -row["step"])  # descending keys, then the earlier step

    eligible = [r for r in rows if r["eligible"]]
    out: dict[str, Any] = {
        "selection_version": "validation-only-behavioral-v1",
        "gate_spec_sha256": sha,
        "rank_by": rank_by,
        "tie_break": spec.selection.tie_break,
        "rows": rows,
        "eligible_steps": [r["step"] for r in eligible],
    }
    if eligible:
        best = max(eligible, key=key)
        out.update(selected_step=best["step"], diagnosis=None)
        return out
    best = max(rows, key=key)
    breakdown = failure_breakdown((records_by_step or {}).get(best["step"], ()))
    out.update(
        selected_step=None,
        best_ineligible_step=best["step"],
        failure_breakdown=breakdown,
        diagnosis=diagnosis_text(best, breakdown, len(rows)),
    )
    return out


def diagnosis_text(best: Mapping[str, Any], breakdown: Mapping[str, Mapping[str, int]], measured: int) -> str:
    """Why nothing was eligible, in one paragraph (the best-ranked checkpoint's failed checks and replies)."""
    parts = [
        f"STOP: none of the {measured} measured checkpoints passes G1-G4 on validation, so none is selected "
        "and the test split and frozen cases stay closed. The thresholds are not relaxed: diagnose data, "
        "prompt and chat template before training again."
    ]
    parts.append(f"Best-ranked checkpoint (step {best['step']}): " + "; ".join(best["failed"]) + ".")
    act, bc = breakdown.get("ACT", {}), breakdown.get("BROADCAST", {})
    if act.get("rows") or bc.get("rows"):
        parts.append(
            f"Its ACT replies: {act.get('not_a_json_object', 0)} of {act.get('rows', 0)} not a JSON object, "
            f"{act.get('wrong_keys_or_types', 0)} with wrong keys or types, {act.get('not_a_displayed_action', 0)} "
            f"naming no displayed action. Its BROADCAST replies: {bc.get('not_a_json_object', 0)} of "
            f"{bc.get('rows', 0)} not a JSON object, {bc.get('wrong_keys', 0)} with wrong keys, "
            f"{bc.get('unsupported_fact', 0)} with an unsupported fact, {bc.get('illegal_intent_or_request', 0)} "
            "with an illegal intent or request."
        )
    return " ".join(parts)
