"""The arena SFT notebook's study (``05_arena``, part of the ``rftlab.studies.arena`` driver).

``sft_study`` does all of the notebook's work, in the order of work. It builds the SFT data twice and
audits it, also on a copy with one changed byte. It runs three scripted providers on the frozen cases,
in process and through the local policy server. It compares them and applies the gates. It runs the two
Stage-1 lineages, the lineage study and the handoff. The notebook only displays the typed result.
The data build and its checks are ``rftlab.studies.arena_sft_data``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.analysis.arena.gates import GateEvaluation
from rftlab.analysis.paired import SignTest
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT
from rftlab.rollout.arena.evaluation import CONDITION_LABELS, CONDITIONS
from rftlab.rollout.arena.sft_data import SftConfig
from rftlab.runs.plan_audit import DecisionAudit
from rftlab.studies.arena_frozen import FrozenEvaluation, evaluate_frozen, read_rows, write_evaluation
from rftlab.studies.arena_lineage import run_stage1
from rftlab.studies.arena_lineage_store import Stage1Result
from rftlab.studies.arena_lineages import (
    LineageStudy,
    audit_gates,
    lineage_study,
    simulated_lineages,
    write_spec_variant,
)
from rftlab.studies.arena_sft_data import Clock, SftDataCheck, build_sft_data
from rftlab.training.arena.stage1 import Stage1Spec

# Smoke-size changes to the two lineage specs in quick mode (``write_spec_variant``).
QUICK_LOCAL_CHANGES: dict[str, Any] = {
    "overfit": {"steps": 2},
    "evaluation": {"frozen_case_stride": 30, "max_tokens": 8},
}
QUICK_SIMULATED_CHANGES: dict[str, Any] = {
    "overfit": {"rows": 16, "steps": 60, "batch_size": 4},
    "train": {
        "max_steps": 40,
        "batch_size": 4,
        "validation_every_steps": 20,
        "min_validation_measurements": 3,
    },
    "evaluation": {"frozen_case_stride": 12, "test_rows": 20},
}
# The three scripted providers of the frozen evaluation, in display order.
PROVIDER_LABELS: tuple[str, ...] = ("oracle", "scripted", "scripted, inbox ignored")


@dataclass(frozen=True)
class CommunicationEffect:
    """One paired message-condition difference of one policy, with its exact sign test."""

    policy: str
    left: str
    right: str
    mean: float
    low: float
    high: float
    signs: SignTest

    @property
    def label(self) -> str:
        return f"{CONDITION_LABELS[self.left]} − {CONDITION_LABELS[self.right]}"


@dataclass(frozen=True)
class ConditionRow:
    """One policy under one message condition of the frozen evaluation."""

    policy: str
    condition: str
    strict_action_rate: float
    mean_regret: float
    regret_95: tuple[float, float]
    optimal_rate: float
    optimal_wilson_95: tuple[float, float]
    nonredundant_rate: float

    @property
    def label(self) -> str:
        return CONDITION_LABELS[self.condition]


@dataclass(frozen=True)
class LineageRow:
    """One simulated lineage: its selected checkpoint, regrets, paired contrast, truth and verdicts.
    ``selected_step`` is ``None`` (and the rest empty) for a lineage that stopped."""

    seed: int
    lineage: str
    selected_step: int | None = None
    competence: float = float("nan")
    base_regret: float = float("nan")
    sft_regret: float = float("nan")
    contrast: float = float("nan")
    """SFT − base mean regret over the cases"""
    contrast_95: tuple[float, float] = (float("nan"), float("nan"))
    truth: float = float("nan")
    promotion: bool = False
    """the registered (v2) promotion verdict"""
    g1_after_review: str = ""


def _pair(values: Sequence[float]) -> tuple[float, float]:
    low, high = values
    return low, high


def _regret(summary: Mapping[str, Any]) -> float:
    return summary["conditions"]["generated"]["mean_oracle_regret"]


@dataclass(frozen=True)
class FrozenCheck:
    """The scripted providers on the frozen cases (sections 3 to 6)."""

    cases_run: list[int]
    evaluations: dict[str, FrozenEvaluation]
    served_requests: int
    """HTTP chat completions the policy server answered"""
    served_agrees: bool
    """the served records equal the in-process ones, case by case"""
    effects: list[CommunicationEffect]
    scripted_compare: dict[str, Any]
    """``arena compare`` of the scripted policy against itself with its inbox ignored"""
    scripted_gates: GateEvaluation
    oracle_gates: GateEvaluation
    gate_sha256: str
    g1_clusters: int
    """agent-cases of the scripted policy's ACT replies"""
    g1_cluster_size: int
    """replies per agent-case (rounded mean)"""
    g1_type1: float
    """P(pass) of the registered G1 at 99.5% when failures take whole agent-cases"""
    frozen_manifest_sha256: str
    """the frozen cases' manifest hash, recomputed"""

    @property
    def manifest_published(self) -> bool:
        """The recomputed manifest hash equals the published one."""
        from rftlab.envs.arena.cases import FROZEN_MANIFEST_SHA256

        return self.frozen_manifest_sha256 == FROZEN_MANIFEST_SHA256

    def compare_table(self) -> str:
        """``arena compare``'s Markdown table of the scripted comparison."""
        from rftlab.analysis.arena.compare import compare_markdown

        return compare_markdown(self.scripted_compare)

    def gate_table(self, candidate: str) -> str:
        """The gates' Markdown table for ``scripted`` or ``oracle``."""
        from rftlab.analysis.arena.gates import gate_table

        return gate_table(self.scripted_gates if candidate == "scripted" else self.oracle_gates)

    def license_rows(self) -> list[dict[str, str]]:
        """What each gate licenses, for the scripted candidate."""
        from rftlab.analysis.arena.gates import license_rows

        return license_rows(self.scripted_gates)

    def condition_rows(self) -> list[ConditionRow]:
        """Every provider under every message condition, in display order."""
        return [
            ConditionRow(
                policy=label,
                condition=condition,
                strict_action_rate=c["strict_action_rate"],
                mean_regret=c["mean_oracle_regret"],
                regret_95=_pair(c["mean_oracle_regret_95"]),
                optimal_rate=c["optimal_outcome_rate"],
                optimal_wilson_95=_pair(c["optimal_outcome_wilson_95"]),
                nonredundant_rate=c["nonredundant_joint_action_rate"],
            )
            for label, e in self.evaluations.items()
            for condition in CONDITIONS
            for c in [e.summary["conditions"][condition]]
        ]

    @property
    def summaries(self) -> dict[str, dict[str, Any]]:
        return {label: e.summary for label, e in self.evaluations.items()}

    @property
    def oracle_ok(self) -> bool:
        """Regret 0 and strict and optimal rate 1 in every condition (the oracle harness check)."""
        return all(
            c["mean_oracle_regret"] == 0 and c["strict_action_rate"] == 1 and c["optimal_outcome_rate"] == 1
            for c in self.evaluations["oracle"].summary["conditions"].values()
        )


@dataclass(frozen=True)
class ArenaSftStudy:
    """Everything notebook ``05_arena`` shows, computed in the order of work."""

    data: SftDataCheck
    frozen: FrozenCheck
    local_spec: Stage1Spec
    local: Stage1Result
    simulated_spec: Stage1Spec
    lineages: dict[int, Stage1Result]
    study: LineageStudy
    gates_audit: DecisionAudit
    handoff: str
    second_evaluation_refused: bool | None
    """a second final evaluation of the simulated lineage is refused (``None``: it has none)"""
    durations: dict[str, float]
    """wall seconds per step, for the build log only"""

    @property
    def simulated(self) -> Stage1Result:
        """The simulated learner's first lineage (the spec's own seed)."""
        return next(iter(self.lineages.values()))

    def lineage_rows(self) -> list[LineageRow]:
        """One row per simulated lineage (``lineage_table``)."""
        return lineage_table(self.study)

    @property
    def uncorrupted_seeds(self) -> list[int]:
        """The lineages whose final evaluation drew no corrupted reply (``uncorrupted_seeds``)."""
        return uncorrupted_seeds(self.lineages)

    def validation_series(self) -> dict[str, list[dict[str, float]]]:
        """The simulated lineage's validation rates per step, with Wilson intervals."""
        from rftlab.analysis.arena.lineages import validation_series

        return validation_series(self.simulated.measurements)

    def _simulated_comparison(self) -> dict[str, Any]:
        comparison = self.simulated.comparison
        if comparison is None:
            raise ValueError("the simulated lineage did not reach its comparison")
        return comparison

    def simulated_compare_table(self) -> str:
        """``arena compare``'s Markdown table of the simulated lineage's base vs SFT."""
        from rftlab.analysis.arena.compare import compare_markdown

        return compare_markdown(self._simulated_comparison())

    def simulated_endpoints(self) -> list[tuple[str, Mapping[str, Any]]]:
        """The simulated lineage's paired endpoints, by name."""
        from rftlab.analysis.arena.compare import named_endpoints

        return named_endpoints(self._simulated_comparison())

    def simulated_gate_table(self) -> str:
        """The Markdown table of the simulated lineage's gates G1-G7."""
        from rftlab.analysis.arena.gates import rows_table

        gates = self.simulated.gates
        if gates is None:
            raise ValueError("the simulated lineage did not reach its gates")
        return rows_table(gates["rows"])


def lineage_table(study: LineageStudy) -> list[LineageRow]:
    """One row per lineage of ``study``, from its stage outputs and the lineage study's truth."""
    rows = []
    for seed, r in study.results.items():
        if seed not in study.coverage or not (
            r.comparison and r.base_summary and r.final_summary and r.gates
        ):
            rows.append(LineageRow(seed, r.lineage["lineage"]))
            continue
        primary = r.comparison["endpoints"]["primary"]
        revised = {x["metric"]: x for x in study.revised_gates[seed]}
        rows.append(
            LineageRow(
                seed=seed,
                lineage=r.lineage["lineage"],
                selected_step=study.selected_steps[seed],
                competence=study.competence[seed],
                base_regret=_regret(r.base_summary),
                sft_regret=_regret(r.final_summary),
                contrast=primary["mean_difference"],
                contrast_95=_pair(primary["mean_difference_95"]),
                truth=study.truth_contrasts[seed]["primary"],
                promotion=bool(r.gates["verdicts"]["promotion"]),
                g1_after_review=revised["act_schema_valid"]["revised verdict"],
            )
        )
    return rows


def uncorrupted_seeds(results: Mapping[int, Stage1Result]) -> list[int]:
    """Lineages whose final evaluation drew no corrupted reply: every ACT reply legal, every broadcast valid."""

    def clean(replies: Mapping[str, Any]) -> bool:
        act, broadcast = replies["act"], replies["broadcast"]
        return act["legal"] == act["n"] and broadcast["valid"] == broadcast["n"]

    return [s for s, r in results.items() if r.final_summary and clean(r.final_summary["replies"])]


def communication_effects(summaries: Mapping[str, Mapping[str, Any]]) -> list[CommunicationEffect]:
    """Every policy's paired message-condition differences with the exact sign test of the case differences."""
    from rftlab.analysis.paired import sign_test

    out = []
    for label, s in summaries.items():
        for e in s["communication_effects"].values():
            left, right = e["left"], e["right"]
            signs = sign_test([c[f"{left}_reward"] - c[f"{right}_reward"] for c in s["per_case"]])
            low, high = e["mean_difference_95"]
            out.append(CommunicationEffect(label, left, right, e["mean_difference"], low, high, signs))
    return out


def served_evaluation(cases: Sequence[int]) -> tuple[list[dict[str, Any]], int]:
    """The scripted policy through the local policy server: its records and the HTTP requests it served."""
    from rftlab.policies.arena.providers import EndpointProvider
    from rftlab.policies.arena.server import ArenaPolicyServer
    from rftlab.rollout.arena.evaluation import run_frozen_eval

    with ArenaPolicyServer() as server:  # bound to 127.0.0.1; no key needed locally
        records = run_frozen_eval(EndpointProvider("scripted-balanced", server.base_url), cases)
        return records, len(server.requests)


def g1_clustering(records: Sequence[Mapping[str, Any]]) -> tuple[int, int, float]:
    """``(agent-cases, replies per agent-case, P(pass))`` of the registered G1 rule at 99.5% when every
    failure takes its agent-case's replies with it (intra-cluster correlation 1)."""
    from rftlab.analysis.arena.review import agent_case_counts
    from rftlab.analysis.rate_gates import clustered_pass_probability

    sizes = agent_case_counts(records, "act_schema_valid")[1]
    clusters, size = len(sizes), round(sum(sizes) / len(sizes))
    return (
        clusters,
        size,
        clustered_pass_probability(clusters, size, 0.995, 1.0, 0.995, "independent_lower_bound"),
    )


def _without_model(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "model"} for r in records]


def frozen_check(work: Path, case_stride: int, clock: Clock | None = None) -> FrozenCheck:
    """The three scripted providers on every ``case_stride``-th frozen case, served once over HTTP, then
    compared and gated (the registered gate spec)."""
    from rftlab.analysis.arena.compare import compare_evaluations, evaluation_from_records
    from rftlab.analysis.arena.gates import DEFAULT_GATE_SPEC, evaluate_arena_gates, load_gate_spec
    from rftlab.envs.arena.cases import frozen_cases, manifest_sha256
    from rftlab.policies.arena.providers import OracleProvider, Provider, ScriptedProvider

    clock = clock or Clock()
    cases = list(range(0, FROZEN_CASE_COUNT, case_stride))
    validation_rows = read_rows(work / "data" / "validation.jsonl")
    providers: dict[str, Provider] = {
        "oracle": OracleProvider(),
        "scripted": ScriptedProvider(),
        "scripted, inbox ignored": ScriptedProvider(use_inbox=False),
    }
    evaluations = {}
    for label, provider in providers.items():
        evaluations[label] = clock.timed(f"eval {label}", evaluate_frozen, provider, cases, validation_rows)
        write_evaluation(work / "eval" / label.replace(",", "").replace(" ", "_"), evaluations[label])
    served, requests = clock.timed("served", served_evaluation, cases)
    compared = {  # the frozen evaluations in the form `arena compare` reads
        label: evaluation_from_records(evaluations[label].records, evaluations[label].summary, label)
        for label in ("scripted, inbox ignored", "scripted", "oracle")
    }
    base = compared["scripted, inbox ignored"]
    scripted_compare = clock.timed("compare", compare_evaluations, base, compared["scripted"])
    oracle_compare = compare_evaluations(base, compared["oracle"])
    clusters, size, type1 = g1_clustering(evaluations["scripted"].records)
    return FrozenCheck(
        cases_run=cases,
        evaluations=evaluations,
        served_requests=requests,
        served_agrees=_without_model(served) == _without_model(evaluations["scripted"].records),
        effects=communication_effects({label: e.summary for label, e in evaluations.items()}),
        scripted_compare=scripted_compare,
        scripted_gates=evaluate_arena_gates(evaluations["scripted"].summary, scripted_compare),
        oracle_gates=evaluate_arena_gates(evaluations["oracle"].summary, oracle_compare),
        gate_sha256=load_gate_spec(DEFAULT_GATE_SPEC)[1],
        g1_clusters=clusters,
        g1_cluster_size=size,
        g1_type1=type1,
        frozen_manifest_sha256=manifest_sha256(frozen_cases()),
    )


def second_evaluation_refused(store_root: str | Path, result: Stage1Result) -> bool | None:
    """Ask the run store for a second test/frozen evaluation of a lineage (another checkpoint). ``True``
    when it is refused, as it must be; ``None`` when the lineage has no final evaluation."""
    from rftlab.runs import RunStore
    from rftlab.training.arena.stage1 import SingleEvaluationError, claim_final_evaluation

    if not result.final_summary:
        return None
    lineage = result.lineage
    try:
        claim_final_evaluation(
            RunStore(store_root),
            lineage["experiment"],
            lineage["lineage"],
            {"stage": "final_eval", "checkpoint_step": -1},
            lineage["backend"],
        )
    except SingleEvaluationError:
        return True
    return False


def _fresh_work_dir(work_dir: str | Path) -> Path:
    work = Path(work_dir)
    for name in ("data", "data_rebuild", "data_tampered", "eval"):
        shutil.rmtree(work / name, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    return work


def sft_study(
    *,
    num_seeds: int,
    mechanics_per_kind: int,
    silence_examples: int,
    work_dir: str | Path,
    case_stride: int,
    lineage_seeds: Sequence[int],
    local_spec: str | Path = "arena_sft_local.json",
    simulated_spec: str | Path = "arena_sft_simulated.json",
    store_root: str | Path | None = None,
    quick: bool = False,
) -> ArenaSftStudy:
    """The notebook's whole study: data, frozen evaluations, the two lineages, the lineage study, the
    registered gates' audit and the handoff. The data has ``num_seeds`` natural seeds and the targeted
    rows given (``SftConfig``; the Stage-1 configuration is 1024, 32 and 512). Specs are found by ``spec_path``; quick mode runs smoke-size
    copies of them (``QUICK_*_CHANGES``). The run store is ``notebook_runs_root(quick)`` by default."""
    from rftlab.analysis.arena.gates import DEFAULT_GATE_SPEC
    from rftlab.analysis.arena.handoff import render_handoff
    from rftlab.runs.paths import notebook_runs_root, spec_path
    from rftlab.training.arena.stage1 import load_stage1_spec

    work = _fresh_work_dir(work_dir)
    store = Path(store_root) if store_root is not None else notebook_runs_root(quick)
    local_path, simulated_path = str(spec_path(local_spec)), str(spec_path(simulated_spec))
    if quick:  # smoke-size copies of the two lineage specs
        local_path = write_spec_variant(local_path, work / "local.json", QUICK_LOCAL_CHANGES)
        simulated_path = write_spec_variant(simulated_path, work / "simulated.json", QUICK_SIMULATED_CHANGES)
    clock = Clock()
    config = SftConfig(
        num_seeds=num_seeds,
        targeted_mechanics_per_kind=mechanics_per_kind,
        targeted_silence_examples=silence_examples,
    )
    data = build_sft_data(work, config, clock)
    frozen = frozen_check(work, case_stride, clock)
    local = clock.timed(
        "local lineage", run_stage1, local_path, backend="local", store_root=store, data_dir=work / "data"
    )
    lineages = clock.timed(
        "simulated lineages",
        simulated_lineages,
        simulated_path,
        lineage_seeds,
        store_root=store,
        data_dir=work / "data",
        variant_dir=work,
    )
    study = clock.timed("lineage study", lineage_study, lineages)  # the truth, coverage, gates after review
    oracle_summary = frozen.evaluations["oracle"].summary
    return ArenaSftStudy(
        data=data,
        frozen=frozen,
        local_spec=load_stage1_spec(local_path)[0],
        local=local,
        simulated_spec=load_stage1_spec(simulated_path)[0],
        lineages=lineages,
        study=study,
        gates_audit=audit_gates(DEFAULT_GATE_SPEC, list(lineages.values())),
        handoff=render_handoff(work / "data", gate_spec=DEFAULT_GATE_SPEC, oracle_summary=oracle_summary),
        second_evaluation_refused=second_evaluation_refused(store, lineages[lineage_seeds[0]]),
        durations=dict(clock.seconds),
    )
