"""Summaries of the frozen arena evaluation (docs/arena.md §10.3, §10.5) and of validation scoring (§11).

``summarize_eval`` turns the per-case records of ``rftlab.rollout.arena.evaluation.evaluate_case`` into
``summary.json``: strict parse rates, legal-action rate, mean oracle regret with its 95% interval, optimal
rate with its Wilson interval, non-redundant rate, the paired communication effects, slices by size and
style, the per-permutation block, the per-case values that paired comparisons need, and ``replies``:
per-reply counts over *every* reply of the run (all conditions and permutations) that the rate gates
G1, G2 and G4 decide on (§11).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rftlab.analysis.intervals import normal_mean_interval, wilson_interval
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT, FROZEN_MANIFEST_SHA256
from rftlab.envs.arena.protocol import ACT_PHASE, BROADCAST_PHASE
from rftlab.rollout.arena.evaluation import CONDITIONS, EVAL_VERSION, PERMUTATIONS, reply_schema_valid

PAIRED_EFFECTS: tuple[tuple[str, str], ...] = (
    ("generated", "dropped"),
    ("generated", "shuffled"),
    ("generated", "shuffled_within"),
    ("reference", "generated"),
)


def mean_ci(values: Sequence[float]) -> dict[str, Any]:
    mean, low, high = normal_mean_interval(list(values))
    return {"mean": mean, "ci95": [low, high]}


def _row(record: Mapping[str, Any], condition: str, k: int = 0) -> Mapping[str, Any]:
    for row in record["conditions"]:
        if row["condition"] == condition and row["permutation"] == k:
            return row
    raise KeyError(f"case {record.get('seed')}: no {condition} row with permutation {k}")


def _legal_rate(rows: Sequence[Mapping[str, Any]]) -> float:
    """Replies that name a displayed action (valid strict parse); invalid replies are resolved as WAIT."""
    actions = [a for row in rows for a in row["actions"]]
    return sum(a["valid"] for a in actions) / len(actions)


def condition_block(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    optimal = sum(bool(r["optimal_outcome"]) for r in rows)
    reward = mean_ci([r["environment_reward"] for r in rows])
    regret = mean_ci([r["regret"] for r in rows])
    low, high = wilson_interval(optimal, n)
    low, high = max(0.0, low), min(1.0, high)  # float rounding can leave -1e-17 at k = 0
    return {
        "cases": n,
        "strict_action_rate": statistics.fmean(r["strict_action_rate"] for r in rows),
        "strict_team_protocol_rate": sum(bool(r["strict_team_protocol"]) for r in rows) / n,
        "legal_action_rate": _legal_rate(rows),
        "optimal_outcome_rate": optimal / n,
        "optimal_outcome_wilson_95": [low, high],
        "mean_environment_reward": reward["mean"],
        "mean_environment_reward_95": reward["ci95"],
        "mean_oracle_regret": regret["mean"],
        "mean_oracle_regret_95": regret["ci95"],
        "nonredundant_joint_action_rate": sum(not r["redundant_agents"] for r in rows) / n,
    }


def paired_effect(left: Sequence[float], right: Sequence[float]) -> dict[str, Any]:
    diffs = [a - b for a, b in zip(left, right, strict=True)]
    ci = mean_ci(diffs)
    return {
        "cases": len(diffs),
        "mean_difference": ci["mean"],
        "mean_difference_95": ci["ci95"],
        "positive_case_rate": sum(d > 0 for d in diffs) / len(diffs),
        "zero_case_rate": sum(d == 0 for d in diffs) / len(diffs),
    }


def reply_counts(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts over every reply of a frozen evaluation: ACT replies (``n``, ``schema_valid``, ``legal`` =
    strictly parsed to a displayed action) and BROADCAST replies (``n``, ``schema_valid``, ``valid`` =
    strictly parsed, §8.4)."""
    acts = [a for r in records for row in r["conditions"] for a in row["actions"]]
    messages = [m for r in records for m in r["messages"]]
    return {
        "act": {
            "n": len(acts),
            "schema_valid": sum(reply_schema_valid(ACT_PHASE, a["raw_response"]) for a in acts),
            "legal": sum(bool(a["valid"]) for a in acts),
        },
        "broadcast": {
            "n": len(messages),
            "schema_valid": sum(reply_schema_valid(BROADCAST_PHASE, m["raw_response"]) for m in messages),
            "valid": sum(bool(m["valid"]) for m in messages),
        },
    }


def summarize_eval(
    records: Sequence[Mapping[str, Any]],
    provider: Mapping[str, Any] | None = None,
    validation: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """``summary.json`` of a frozen evaluation (only permutation-0 rows enter ``conditions``)."""
    if not records:
        raise ValueError("no case records to summarize")
    conditions = {name: condition_block([_row(r, name) for r in records]) for name in sorted(CONDITIONS)}
    rewards = {name: [_row(r, name)["environment_reward"] for r in records] for name in CONDITIONS}
    effects = {}
    for left, right in PAIRED_EFFECTS:
        effects[f"{left}_minus_{right}"] = {
            "left": left,
            "right": right,
            **paired_effect(rewards[left], rewards[right]),
        }

    permutations = {}
    deltas = {}
    base_regret = [_row(r, "generated", 0)["regret"] for r in records]
    for k in range(PERMUTATIONS):
        rows = [_row(r, "generated", k) for r in records]
        permutations[str(k)] = {
            "strict_action_rate": statistics.fmean(row["strict_action_rate"] for row in rows),
            "mean_oracle_regret": statistics.fmean(row["regret"] for row in rows),
            "mean_environment_reward": statistics.fmean(row["environment_reward"] for row in rows),
        }
        if k:
            effect = paired_effect([row["regret"] for row in rows], base_regret)
            deltas[str(k)] = {"mean": effect["mean_difference"], "mean_95": effect["mean_difference_95"]}

    slices: dict[str, dict[str, Any]] = {"topology_size": {}, "opponent_style": {}}
    for key, field in (("topology_size", "size"), ("opponent_style", "opponent_style")):
        for value in sorted({r[field] for r in records}, key=str):
            rows = [_row(r, "generated") for r in records if r[field] == value]
            slices[key][str(value)] = {
                "cases": len(rows),
                "optimal_outcome_rate": sum(bool(x["optimal_outcome"]) for x in rows) / len(rows),
                "mean_oracle_regret": statistics.fmean(x["regret"] for x in rows),
            }

    first = records[0]
    summary: dict[str, Any] = {
        "eval_version": EVAL_VERSION,
        "arena_version": first["arena_version"],
        "prompt_version": first["prompt_version"],
        "manifest_sha256": first["manifest_sha256"],
        "model": first["model"],
        "provider": dict(provider or {}),
        "num_cases": len(records),
        "complete_manifest": len(records) == FROZEN_CASE_COUNT
        and first["manifest_sha256"] == FROZEN_MANIFEST_SHA256,
        "message_strict_rate": statistics.fmean(r["message_strict_rate"] for r in records),
        "action_order_consistency_rate": sum(bool(r["action_order_consistent"]) for r in records)
        / len(records),
        "replies": reply_counts(records),
        "conditions": conditions,
        "communication_effects": effects,
        "generated_minus_dropped_reward": effects["generated_minus_dropped"]["mean_difference"],
        "reference_message_headroom": effects["reference_minus_generated"]["mean_difference"],
        "generated_permutations": permutations,
        "perm_regret_delta": deltas,
        "generated_slices": slices,
        "per_case": [
            {
                "seed": r["seed"],
                "size": r["size"],
                "opponent_style": r["opponent_style"],
                **{f"{name}_regret": _row(r, name)["regret"] for name in CONDITIONS},
                **{f"{name}_reward": _row(r, name)["environment_reward"] for name in CONDITIONS},
            }
            for r in records
        ],
    }
    if validation is not None:
        summary["validation"] = summarize_validation(validation)
    return summary


def summarize_validation(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Validation-split rates per phase and overall (§11), plus the G3 count of unsupported-fact replies."""
    out: dict[str, Any] = {"rows": len(records)}
    metrics = ("schema_valid", "legal", "supported", "exact", "ordered_exact")
    for phase, key in (("BROADCAST", "broadcast"), ("ACT", "act")):
        rows = [r for r in records if r["phase"] == phase]
        out[key] = {
            "rows": len(rows),
            **{m: (sum(bool(r[m]) for r in rows) / len(rows)) if rows else None for m in metrics},
        }
        out[key]["failures"] = {
            m: sum(not r[m] for r in rows) for m in ("schema_valid", "legal", "supported")
        }
    out["overall"] = {
        m: (sum(bool(r[m]) for r in records) / len(records)) if records else None for m in metrics
    }
    out["unsupported_fact_responses"] = sum(bool(r["unsupported_fact_response"]) for r in records)
    exacts = [out["broadcast"]["exact"], out["act"]["exact"]]
    out["selection_score"] = statistics.fmean(exacts) if None not in exacts else None
    return out


def format_summary(summary: Mapping[str, Any]) -> str:
    """A short plain-text table of the condition blocks."""
    lines = [
        f"model {summary['model']}  cases {summary['num_cases']}  message strict {summary['message_strict_rate']:.4f}"
        f"  order consistency {summary['action_order_consistency_rate']:.4f}",
        f"{'condition':<15} {'strict':>7} {'legal':>7} {'regret':>8} {'regret 95% CI':>20} {'optimal':>8}"
        f" {'Wilson 95%':>17} {'nonred':>7}",
    ]
    for name, c in summary["conditions"].items():
        lo, hi = c["mean_oracle_regret_95"]
        wl, wh = c["optimal_outcome_wilson_95"]
        lines.append(
            f"{name:<15} {c['strict_action_rate']:>7.4f} {c['legal_action_rate']:>7.4f} {c['mean_oracle_regret']:>8.4f}"
            f" [{lo:>8.4f}, {hi:>8.4f}] {c['optimal_outcome_rate']:>8.4f} [{wl:.4f}, {wh:.4f}]"
            f" {c['nonredundant_joint_action_rate']:>7.4f}"
        )
    for name, e in summary["communication_effects"].items():
        lo, hi = e["mean_difference_95"]
        lines.append(f"{name:<31} reward difference {e['mean_difference']:+.4f} [{lo:+.4f}, {hi:+.4f}]")
    return "\n".join(lines)
