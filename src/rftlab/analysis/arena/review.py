"""The arena gates after review (issue 31): the agent-case as the unit of G1/G4, G3 flagged as passing by
construction, both error types of every gate, and the registered rule kept beside every change.

The registered gate spec (``data/specs/arena_gates.json``, v2) still decides the lineages (their keys hold
its SHA-256). ``data/specs/arena_gates_v3_after_review.json`` records what the review changed, written
after the v2 results were seen, so its verdicts are exploratory. ``load_revised_spec`` refuses a revision
whose ``revises_sha256`` is not the registered spec's hash (a revision of some other text).

- ``agent_case_counts``: per agent-case (one agent of one frozen case), the successes among its ACT
  replies over the seven conditions, for ``act_schema_valid`` or ``act_legal``.
- ``revised_gate_rows``: per check of the registered spec, its registered rule and verdict, and the
  revised rule, verdict and the label of the change.
- ``gate_error_rows``: per gate, type I (P(pass) with the truth at the threshold) and type II (P(fail)
  with a good truth) of the registered and the revised rule (definitions in the revision's
  ``error_rates``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rftlab.analysis.arena.gates import DEFAULT_GATE_SPEC, FAIL, INSUFFICIENT, PASS, GateSpecError
from rftlab.analysis.rate_gates import (
    cluster_robust_rate,
    clustered_lower_bound,
    clustered_pass_probability,
    count_gate,
    min_clusters_to_pass,
    pass_probability,
)
from rftlab.envs.arena.protocol import ACT_PHASE
from rftlab.runs.hashing import file_sha256
from rftlab.runs.paths import SPECS_DIR
from rftlab.runs.strictjson import read_json_file

REVISED_GATE_SPEC = SPECS_DIR / "arena_gates_v3_after_review.json"
CLUSTERED_METRICS = ("act_schema_valid", "act_legal")
BY_CONSTRUCTION = "by construction: selection required it on this same validation measurement"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RuleChange(_Strict):
    gate: Literal["G1", "G4"]
    metric: Literal["act_schema_valid", "act_legal"]
    change: Literal["rule"]
    unit: Literal["agent_case"]
    rule: Literal["cluster_lower_bound"]
    min: float = Field(gt=0, lt=1)
    min_clusters: int = Field(ge=1)
    why: str = Field(min_length=1)


class FlagChange(_Strict):
    gate: Literal["G3"]
    metric: Literal["unsupported_fact_responses"]
    change: Literal["flag"]
    flag: Literal["by_construction"]
    why: str = Field(min_length=1)


class ErrorRates(_Strict):
    good_failure_fraction: float = Field(gt=0, lt=1)
    bad_unsupported_rate: float = Field(gt=0, lt=1)
    good_unsupported_rate: float = Field(gt=0, lt=1)
    iccs: list[float] = Field(min_length=1)
    note: str = ""


class RevisedGateSpec(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    revises: str
    revises_name: str
    revises_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    changed_after_review: str = Field(min_length=1)
    changes: list[RuleChange | FlagChange] = Field(min_length=1)
    error_rates: ErrorRates

    def rule_changes(self) -> dict[str, RuleChange]:
        return {c.metric: c for c in self.changes if isinstance(c, RuleChange)}

    def flags(self) -> dict[str, FlagChange]:
        return {c.metric: c for c in self.changes if isinstance(c, FlagChange)}


def load_revised_spec(
    path: str | Path = REVISED_GATE_SPEC, registered: str | Path = DEFAULT_GATE_SPEC
) -> tuple[RevisedGateSpec, str]:
    """``(revision, its SHA-256)``; ``GateSpecError`` (one line) for a missing, invalid or mismatched one."""
    path = Path(path)
    raw = read_json_file(path, "revised gate spec", GateSpecError)
    try:
        spec = RevisedGateSpec.model_validate(raw, strict=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "the top level"
        raise GateSpecError(f"revised gate spec {path}: {where}: {error['msg']}") from None
    actual = file_sha256(Path(registered))
    if spec.revises_sha256 != actual:
        raise GateSpecError(
            f"revised gate spec {path} revises a spec with SHA-256 {spec.revises_sha256[:12]}…, "
            f"but {Path(registered).name} has {actual[:12]}…"
        )
    for c in spec.rule_changes().values():
        if c.min_clusters != min_clusters_to_pass(c.min):
            raise GateSpecError(
                f"revised gate spec {path}: {c.metric} min_clusters {c.min_clusters} is not the fewest "
                f"agent-cases that can pass at {c.min} ({min_clusters_to_pass(c.min)})"
            )
    return spec, file_sha256(path)


def agent_case_counts(records: Sequence[Mapping[str, Any]], metric: str) -> tuple[list[int], list[int]]:
    """``(successes, sizes)`` per agent-case over the frozen records (every condition and action order)."""
    from rftlab.rollout.arena.evaluation import reply_schema_valid

    if metric not in CLUSTERED_METRICS:
        raise ValueError(f"{metric!r} is not an ACT reply metric; known: {', '.join(CLUSTERED_METRICS)}")
    clusters: dict[tuple[int, str], list[bool]] = {}
    for record in records:
        for row in record["conditions"]:
            for action in row["actions"]:
                ok = (
                    reply_schema_valid(ACT_PHASE, action["raw_response"])
                    if metric == "act_schema_valid"
                    else bool(action["valid"])
                )
                clusters.setdefault((record["case_index"], action["agent_id"]), []).append(ok)
    return [sum(v) for v in clusters.values()], [len(v) for v in clusters.values()]


def clustered_check(records: Sequence[Mapping[str, Any]], change: RuleChange) -> dict[str, Any]:
    """The revised G1/G4 check on a frozen evaluation's records: the cluster-robust rate and design
    effect (``None`` without failures), the worst-case bound and its verdict."""
    successes, sizes = agent_case_counts(records, change.metric)
    est = cluster_robust_rate(successes, sizes)
    low, n_eff = clustered_lower_bound(successes, sizes)
    if est.clusters < change.min_clusters:
        verdict, reason = INSUFFICIENT, f"{est.clusters} agent-cases < {change.min_clusters}"
    else:
        verdict = PASS if low >= change.min else FAIL
        reason = f"cluster lower bound {low:.4f} (n_eff {n_eff:g})"
    return {
        **est.to_dict(),
        "lower_bound": low,
        "n_eff": n_eff,
        "threshold": change.min,
        "min_clusters": change.min_clusters,
        "verdict": verdict,
        "reason": reason,
    }


def revised_gate_rows(
    gate_rows: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    revision: RevisedGateSpec,
    test_summary: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Per registered check (``gate_rows`` of a gates evaluation or a saved ``gates.json``): the
    registered rule and verdict beside the revised ones, each change labelled as made after review."""
    changes, flags = revision.rule_changes(), revision.flags()
    label = f"changed after review ({revision.changed_after_review})"
    out = []
    for row in gate_rows:
        metric = row["metric"]
        base = {
            "gate": row["gate"],
            "metric": metric,
            "registered rule": f"{row['rule']} {row['threshold']} over {row['n']} ({row['data']})",
            "registered verdict": row["verdict"],
        }
        if metric in changes:
            c = clustered_check(records, changes[metric])
            revised = f"cluster_lower_bound >= {c['threshold']:g} over {c['clusters']} agent-cases"
            out.append(
                {**base, "revised rule": revised, "revised verdict": c["verdict"], "change": label}
                | {"agent-cases": c["clusters"], "design effect": c["design_effect"]}
            )
        elif metric in flags and row["data"] == "validation":
            note = BY_CONSTRUCTION
            if test_summary is not None:
                note += f"; on test (never seen by selection): {test_summary['unsupported_fact_responses']} unsupported"
            out.append(
                {
                    **base,
                    "revised rule": "unchanged, flagged",
                    "revised verdict": row["verdict"],
                    "change": note,
                }
            )
        else:
            out.append(
                {**base, "revised rule": "unchanged", "revised verdict": row["verdict"], "change": "–"}
            )
    return out


def paired_bound_power(true_difference: float, se: float, z: float = 1.959963984540054) -> float:
    """P(the 95% interval's lower end > 0) for a paired mean with true value ``true_difference`` and
    standard error ``se`` (normal approximation); by symmetry also P(upper end < 0) at −difference."""
    from scipy.stats import norm

    if not se >= 0 or not math.isfinite(true_difference):
        raise ValueError(f"need a finite difference and se >= 0, got {true_difference!r}, {se!r}")
    if se == 0:
        return 1.0 if true_difference > 0 else 0.0
    return float(norm.sf(z - true_difference / se))


_PAIRED_ENDPOINT = {
    "regret_difference_ci_high": ("primary", -1.0),
    "generated_minus_dropped_ci_low": ("generated_minus_dropped", 1.0),
    "generated_minus_shuffled_ci_low": ("generated_minus_shuffled", 1.0),
    "generated_minus_shuffled_within_ci_low": ("generated_minus_shuffled_within", 1.0),
}


def _se(interval: Sequence[float], z: float = 1.959963984540054) -> float:
    return (float(interval[1]) - float(interval[0])) / (2 * z)


def _clustered_errors(threshold: float, clusters: int, size: int, good: float, iccs, rule: str) -> tuple:
    at = [clustered_pass_probability(clusters, size, threshold, icc, threshold, rule) for icc in iccs]
    ok = [clustered_pass_probability(clusters, size, good, icc, threshold, rule) for icc in iccs]
    return max(at), 1.0 - min(ok)


def _rate_errors(row, records, revision: RevisedGateSpec) -> list[dict[str, Any]]:
    """Type I/II of a rate or count check, registered and (G1/G4) revised."""
    er, metric, thr = revision.error_rates, row["metric"], None
    out = []
    if metric in revision.rule_changes():
        change = revision.rule_changes()[metric]
        successes, sizes = agent_case_counts(records, metric)
        g, m = len(sizes), round(sum(sizes) / len(sizes))
        thr = change.min
        good = 1 - (1 - thr) * er.good_failure_fraction
        for rule, which in (("independent_lower_bound", "registered"), ("cluster_lower_bound", "revised")):
            t1, t2 = _clustered_errors(thr, g, m, good, er.iccs, rule)
            out.append(
                _err(row, which, t1, t2, f"rate {thr:g}; ICC {min(er.iccs):g}–{max(er.iccs):g} (worst)", good)
            )
        return out
    if metric == "unsupported_fact_responses":
        n = int(row["n"])
        bad = count_gate(0, n, 0, 1, (er.bad_unsupported_rate, er.good_unsupported_rate)).pass_probability
        t1, t2 = bad[f"{er.bad_unsupported_rate:g}"], 1 - bad[f"{er.good_unsupported_rate:g}"]
        note = f"unsupported rate {er.bad_unsupported_rate:g}"
        out.append(_err(row, "registered", t1, t2, note, f"unsupported rate {er.good_unsupported_rate:g}"))
        if row["data"] == "validation" and metric in revision.flags():
            out.append(_err(row, "revised (flag)", 1.0, 0.0, "given selection: passes by construction", None))
        return out
    thr = float(str(row["threshold"]).split()[-1])
    n = int(row["n"])
    good = 1 - (1 - thr) * er.good_failure_fraction
    t1 = pass_probability(n, thr, thr, row["rule"])
    t2 = 1 - pass_probability(n, good, thr, row["rule"])
    return [_err(row, "registered", t1, t2, f"rate {thr:g}", good)]


def _err(row, which: str, type1: float, type2: float, at: str, good: float | str | None) -> dict[str, Any]:
    return {
        "gate": row["gate"],
        "metric": row["metric"],
        "rule": which,
        "type I: P(pass) at": at,
        "type I": type1,
        "type II: P(fail) at": good if isinstance(good, str) else "–" if good is None else f"rate {good:g}",
        "type II": type2,
    }


def _value_errors(row, comparison, candidate, truth: Mapping[str, float]) -> list[dict[str, Any]]:
    """Type I/II of a paired-interval check (normal approximation) or of G6's regret-delta point rule."""
    metric = row["metric"]
    if metric == "regret_difference_mean":
        return []  # decided together with regret_difference_ci_high, which is the stricter of the two
    if metric == "max_perm_regret_delta":
        deltas = candidate.get("perm_regret_delta") or {}
        se = max((_se(d["mean_95"]) for d in deltas.values()), default=0.0)
        limit = 0.1
        from scipy.stats import norm

        t2 = 0.0 if se == 0 else 1 - float(norm.cdf(limit / se)) ** max(1, len(deltas))
        return [_err(row, "registered", 0.5, t2, f"delta {limit:g} (point rule: about half)", "delta 0")]
    endpoints = {**comparison["endpoints"], **comparison.get("rftlab_additions", {}).get("endpoints", {})}
    name, sign = _PAIRED_ENDPOINT[metric]
    se = _se(endpoints[name]["mean_difference_95"])
    true = truth[name]
    t2 = 1.0 - paired_bound_power(sign * true, se)
    return [_err(row, "registered", 0.025, t2, "true difference 0", f"the simulation's truth {true:+.3f}")]


def gate_error_rows(
    gate_rows: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    comparison: Mapping[str, Any],
    candidate: Mapping[str, Any],
    truth: Mapping[str, float],
    revision: RevisedGateSpec,
    test_summary: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Both error types of every gate (see the module docstring): the registered rule's and, where the
    review changed or flagged a check, the revised one's. ``truth`` holds the true paired differences
    of the comparison's endpoints (the simulation's truth), for the paired checks' type II. With the
    candidate's ``test_summary``, G3's count rule is also given on the test broadcasts, which selection
    never saw (exploratory)."""
    out: list[dict[str, Any]] = []
    for row in gate_rows:
        if row["rule"] in ("point", "lower_bound", "count") and row["metric"] != "max_perm_regret_delta":
            out.extend(_rate_errors(row, records, revision))
            if row["metric"] in revision.flags() and test_summary is not None:
                n = int(test_summary["broadcast"]["rows"])
                rest = {k: v for k, v in row.items() if k not in ("n", "data")}
                test_rows = _rate_errors({**rest, "n": n, "data": "test"}, records, revision)
                out.extend({**r, "rule": f"exploratory: on {n} test broadcasts"} for r in test_rows)
        else:
            out.extend(_value_errors(row, comparison, candidate, truth))
    return out
