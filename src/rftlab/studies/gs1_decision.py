"""The GS1 spec's decision rule, before and after the runs: what it can decide at the spec's n
(``design``, cached in the run store) and its verdict on two arms' ``eval.jsonl`` files
(``decision_record``, ``decide``). Part of the study driver ``rftlab.studies.gs1``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rftlab.analysis.gs1 import GS1StudySpec, RuleDecision, RuleDesign
from rftlab.studies.gs1_results import DesignResult


def decision_record(
    spec: GS1StudySpec, treatment_eval: str | Path, baseline_eval: str | Path
) -> dict[str, Any]:
    """The spec's decision rule on the two ``eval.jsonl`` files, with every other bound beside it (the
    order-dependent ones on the rule's permutation seed, or seed 0 when the rule registers none), as the
    record ``decision.json`` holds."""
    from rftlab.analysis.gs1 import rule_verdict
    from rftlab.analysis.io import load_paired_items
    from rftlab.analysis.noninferiority import paired_noninferiority

    result = rule_verdict(spec, treatment_eval, baseline_eval)
    rule = spec.decision_rule
    crit = rule.criteria[0]
    paired = load_paired_items(treatment_eval, baseline_eval)
    seed = rule.permutation_seed if rule.permutation_seed is not None else 0
    report = paired_noninferiority(
        paired.treatment, paired.baseline, margin=-crit.margin, alpha=rule.alpha, permutation_seed=seed
    )
    return {
        "spec": spec.file_name,
        "spec_sha256": spec.sha256,
        "registration": spec.registration,
        "rule": result.to_dict(),
        "decision": result.decision,
        "n": int(report.n),
        "treatment_accuracy": float(paired.treatment.mean()),
        "baseline_accuracy": float(paired.baseline.mean()),
        "all_bounds": report.to_dict(),
    }


def decide(spec: GS1StudySpec, treatment_eval: str | Path, baseline_eval: str | Path) -> RuleDecision:
    """The spec's decision rule on the two ``eval.jsonl`` files, typed (``decision_record``)."""
    return RuleDecision.model_validate(decision_record(spec, treatment_eval, baseline_eval))


def design(
    spec: GS1StudySpec,
    candidates: bool = False,
    discordances=None,
    reps: int | None = None,
    seed: int | None = None,
    on_miss: Callable[[], None] | None = None,
) -> DesignResult:
    """What the spec's decision rule can decide at its n before any run (``rftlab.analysis.gs1``): the
    probability of ``noninferior`` at −margin, 0, +0.02 and +0.045 and the items for 80% power at
    equality. With ``candidates``, every finite-sample bound at the planning discordance and the one the
    design numbers choose.

    The tables are deterministic for their inputs, so they are cached in the run store
    (``rftlab.runs.cache``) under the spec's SHA-256, the options and the digest of the code that computes
    them. ``on_miss`` is called before a computation (a Monte Carlo rule's takes tens of seconds).
    ``cached`` in the result says which it was."""
    from rftlab.runs.cache import cached_json
    from rftlab.runs.codehash import closure_digest

    opts: dict[str, Any] = {}
    if discordances is not None:
        opts["discordances"] = [float(r) for r in discordances]
    if reps is not None:
        opts["reps"] = int(reps)
    if seed is not None:
        opts["seed"] = int(seed)
    key = {
        "spec_sha256": spec.sha256,
        "candidates": bool(candidates),
        "options": opts,
        "code": closure_digest("rftlab.analysis.gs1"),
    }
    value, hit = cached_json(
        "gs1_design", key, lambda: _design_tables(spec, candidates, opts), on_miss=on_miss
    )
    return DesignResult.model_validate(
        {
            "spec": spec.path,
            "spec_sha256": spec.sha256,
            **value,
            "design": RuleDesign.from_dict(value["design"]),
            **({"candidates": [RuleDesign.from_dict(c) for c in value["candidates"]]} if candidates else {}),
            "cached": hit,
        }
    )


def _design_tables(spec: GS1StudySpec, candidates: bool, opts: dict[str, Any]) -> dict[str, Any]:
    from rftlab.analysis import gs1 as ana

    run_opts = {k: (tuple(v) if k == "discordances" else v) for k, v in opts.items()}
    d = ana.spec_design(spec, **run_opts)
    out: dict[str, Any] = {"design": d.to_dict(), "table": ana.design_table(d), "note": ana.design_note(d)}
    if candidates:
        reps, seed = int(opts.get("reps", ana.DESIGN_REPS)), int(opts.get("seed", ana.DESIGN_SEED))
        designs = ana.candidate_designs(spec.decision_rule, d.n, seed=seed, reps=reps)
        out["candidates"] = [c.to_dict() for c in designs]
        out["chosen_method"] = ana.choose_method(designs)
        out["planning_discordance"] = ana.PLANNING_DISCORDANCE
    return out
