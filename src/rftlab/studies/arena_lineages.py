"""Several Stage-1 lineages and their tables (part of the ``rftlab.studies.arena`` driver).

``lineage_rows`` tables one lineage. ``write_spec_variant`` writes a resized spec. ``simulated_lineages``
runs one lineage of the simulated learner per seed, and ``lineage_study`` adds the truth, coverage and
the gates after review (issue 31). ``audit_gates`` audits the registered gates over the lineages' runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.runs import atomic_write_text
from rftlab.runs.parallel import map_processes
from rftlab.studies.arena_frozen import (
    read_rows,
)
from rftlab.studies.arena_lineage import run_stage1
from rftlab.studies.arena_lineage_store import STAGES, Stage1Result


def lineage_rows(result: Stage1Result) -> list[dict[str, Any]]:
    """The lineage as a table: one row per stage of the seed's order, with the run-store folder that holds
    its run (``runs/<experiment>/<folder>/``; the run ids stay in the run store and the lineage record) and
    its outcome."""
    rows = []
    for number, arm, title in STAGES:
        info = result.lineage["stages"].get(arm)
        if info is None:
            outcome = (
                "not reached" if result.stopped_at is not None and number > result.stopped_at else "not run"
            )
            rows.append({"step": number, "stage": title, "run folder": "–", "outcome": outcome})
            continue
        rows.append(
            {"step": number, "stage": title, "run folder": f"{arm}/", "outcome": _outcome(arm, result)}
        )
    return rows


_DIAGNOSIS = " (diagnosis run, excluded from claims)"


def _outcome(arm: str, result: Stage1Result) -> str:
    if arm == "base_eval" and result.base_summary:
        s = result.base_summary
        return (
            f"{s['num_cases']} cases, message strict rate {s['message_strict_rate']:.3f}, "
            f"generated regret {s['conditions']['generated']['mean_oracle_regret']:.3f}"
        )
    if arm == "overfit" and result.overfit:
        o = result.overfit
        rates = ", ".join(f"{k} {v:.2f}" for k, v in o["schema_valid"].items() if v is not None)
        return f"{'PASS' if o['passed'] else 'STOP'}: schema validity {rates} (threshold {o['threshold']})"
    if arm == "train":
        return f"{len(result.measurements)} validation measurements at steps {[m['step'] for m in result.measurements]}"
    if arm == "selection" and result.selection:
        s = result.selection
        return (
            f"selected step {s['selected_step']}"
            if s["selected_step"] is not None
            else "STOP: no eligible checkpoint"
        )
    if arm == "final_eval" and result.final_summary:
        t = result.test_summary or {}
        exact = t.get("overall", {}).get("exact", float("nan"))
        text = f"test exact {exact:.3f} on {t.get('rows')} rows; {result.final_summary['num_cases']} frozen cases"
        return text + _DIAGNOSIS if result.final_summary.get("excluded_from_claims") else text
    if arm == "compare" and result.gates:
        v = result.gates["verdicts"]
        text = (
            f"promotion {'PASS' if v['promotion'] else 'FAIL'}, "
            f"communication claim {'supported' if v['communication_claim'] else 'not supported'}"
        )
        return text + _DIAGNOSIS if result.gates.get("excluded_from_claims") else text
    return ""


def write_spec_variant(spec_path: str | Path, out_path: str | Path, changes: Mapping[str, Any]) -> str:
    """A copy of a Stage-1 spec file with ``changes`` (``{section: {field: value}}``, or ``{field: value}``
    for a top-level scalar it declares, such as ``seed``) applied, written
    atomically to ``out_path`` (a smoke-size lineage in quick mode); returns its path. A section or field
    the spec does not have is a ``ValueError``: a variant only resizes what the spec already declares."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    for section, fields in changes.items():
        if not isinstance(fields, Mapping) and section in spec and not isinstance(spec[section], dict):
            spec[section] = fields  # a top-level scalar the spec declares (the seed, the name)
            continue
        if not isinstance(spec.get(section), dict):
            raise ValueError(f"{spec_path}: no section {section!r} to change")
        unknown = sorted(set(fields) - set(spec[section]))
        if unknown:
            raise ValueError(f"{spec_path}: section {section!r} has no field(s) {', '.join(unknown)}")
        spec[section].update(fields)
    atomic_write_text(Path(out_path), json.dumps(spec, indent=2) + "\n")
    return str(out_path)


# ------------------------------------------------------------------ several lineages (issue 31)


def simulated_lineages(
    spec_path: str | Path,
    seeds: Sequence[int],
    *,
    store_root: str | Path | None = None,
    data_dir: str | Path | None = None,
    variant_dir: str | Path,
) -> dict[int, Stage1Result]:
    """One Stage-1 lineage of the simulated learner per seed (each a full lineage in the run store). The
    spec's own seed runs from the spec file unchanged (its lineage key and id stay those recorded);
    every other seed from a copy in ``variant_dir`` that differs only in its seed and name. The lineages
    are independent, so they run in worker processes, one per core (``rftlab.runs.parallel``)."""
    from rftlab.training.arena.stage1 import load_stage1_spec

    spec, _ = load_stage1_spec(spec_path)
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be distinct and at least one, got {list(seeds)}")
    paths = [
        str(spec_path)
        if seed == spec.seed
        else write_spec_variant(
            spec_path,
            Path(variant_dir) / f"{spec.name}-seed{seed}.json",
            {"seed": seed, "name": f"{spec.name}-seed{seed}"},
        )
        for seed in seeds
    ]
    root = str(store_root) if store_root is not None else None
    data = str(data_dir) if data_dir is not None else None
    results = map_processes(_simulated_lineage, [(path, root, data) for path in paths])
    return dict(zip(seeds, results, strict=True))


def _simulated_lineage(job: tuple[str, str | None, str | None]) -> Stage1Result:
    """One ``simulated_lineages`` job in a worker: the lineage of one spec file."""
    path, store_root, data_dir = job
    return run_stage1(path, backend="simulated", store_root=store_root, data_dir=data_dir)


def audit_gates(gate_spec: str | Path, results: Sequence[Stage1Result]) -> Any:
    """The pre-registration audit (``rftlab.runs.plan_audit.audit_decision``) of the promotion gates that
    ``gate_spec`` registers, over every stage run of the lineages in ``results`` that reached their gates
    (the runs whose records the gates read, and the runs that produced them)."""
    from rftlab.runs import load_run
    from rftlab.runs.plan_audit import audit_decision

    runs = [load_run(path) for r in results if r.gates for path in r.runs.values()]
    return audit_decision(gate_spec, runs)


def final_records(result: Stage1Result) -> list[dict[str, Any]]:
    """The frozen-evaluation records of a lineage's selected checkpoint (its ``final_eval`` run)."""
    if "final_eval" not in result.runs:
        raise ValueError(f"lineage {result.lineage.get('lineage')} has no final evaluation")
    return read_rows(Path(result.runs["final_eval"]) / "rows.jsonl")


@dataclass
class LineageStudy:
    """The lineages of the simulated learner with their truth, coverage, lineage-level contrast and the
    gates after review (``rftlab.analysis.arena.lineages`` and ``.review``)."""

    results: dict[int, Stage1Result]
    selected_steps: dict[int, int]
    competence: dict[int, float]
    truth_contrasts: dict[int, dict[str, float]]
    coverage: dict[int, list[dict[str, Any]]]
    method: dict[str, Any] | None
    revised_gates: dict[int, list[dict[str, Any]]]
    gate_errors: dict[int, list[dict[str, Any]]]
    revision_sha256: str
    analysis_cpu_seconds: float
    base_competence: dict[int, float] = field(default_factory=dict)
    expected_corrupted_replies: dict[int, float] = field(default_factory=dict)
    """per lineage: (1 − q(s)) × the final evaluation's frozen replies (ACT and BROADCAST)"""


@dataclass(frozen=True)
class _Compared:
    """The stage outputs of a lineage that reached its comparison, none of them missing."""

    result: Stage1Result
    selected_step: int
    base: dict[str, Any]
    final: dict[str, Any]
    comparison: dict[str, Any]
    gate_rows: list[dict[str, Any]]


def _compared(r: Stage1Result) -> _Compared | None:
    """``r``'s outputs when it reached a comparison with endpoints, else ``None``."""
    if not (r.gates and r.comparison and "endpoints" in r.comparison):
        return None
    if r.selection is None or r.base_summary is None or r.final_summary is None:
        return None  # a lineage with gates ran every earlier stage: not reached in practice
    return _Compared(
        r, r.selection["selected_step"], r.base_summary, r.final_summary, r.comparison, r.gates["rows"]
    )


def lineage_study(results: Mapping[int, Stage1Result]) -> LineageStudy:
    """Truth, coverage, the lineage-level SFT − base regret and the revised gates of the lineages that
    reached their comparison (the others are left out and say so by their absence)."""
    from rftlab.analysis.arena.lineages import coverage_rows, method_level
    from rftlab.analysis.arena.review import gate_error_rows, load_revised_spec, revised_gate_rows
    from rftlab.training.arena.simulated import SIMULATED_MODELS
    from rftlab.training.arena.truth import expected_contrasts, expected_frozen, frozen_outcomes

    done = {s: c for s, r in results.items() if (c := _compared(r)) is not None}
    revision, revision_sha = load_revised_spec()
    started = time.process_time()
    cases = sorted({rec["case_index"] for c in done.values() for rec in final_records(c.result)})
    outcomes = {o.case_index: o for o in frozen_outcomes(cases)} if cases else {}
    study = LineageStudy(dict(results), {}, {}, {}, {}, None, {}, {}, revision_sha, 0.0)
    for seed, c in done.items():
        records, test = final_records(c.result), c.result.test_summary
        mine = [outcomes[rec["case_index"]] for rec in records]
        q = SIMULATED_MODELS[c.result.lineage["base_model"]]
        step_ = c.selected_step
        truth_base, truth_sft = expected_frozen(mine, q(0)), expected_frozen(mine, q(step_))
        contrasts = expected_contrasts(mine, q(0), q(step_))
        study.selected_steps[seed], study.competence[seed], study.base_competence[seed] = (
            step_,
            q(step_),
            q(0),
        )
        replies = c.final["replies"]
        study.expected_corrupted_replies[seed] = (1 - q(step_)) * (
            replies["act"]["n"] + replies["broadcast"]["n"]
        )
        study.truth_contrasts[seed] = contrasts
        study.coverage[seed] = coverage_rows(c.base, c.final, c.comparison, truth_base, truth_sft, contrasts)
        study.revised_gates[seed] = revised_gate_rows(c.gate_rows, records, revision, test)
        study.gate_errors[seed] = gate_error_rows(
            c.gate_rows, records, c.comparison, c.final, contrasts, revision, test
        )
    if len(done) >= 2:
        regret = lambda s: s["conditions"]["generated"]["mean_oracle_regret"]  # noqa: E731
        study.method = method_level(
            {s: regret(c.final) for s, c in done.items()},
            {s: regret(c.base) for s, c in done.items()},
            {s: t["primary"] for s, t in study.truth_contrasts.items()},
        )
    study.analysis_cpu_seconds = time.process_time() - started
    return study
