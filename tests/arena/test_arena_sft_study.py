"""Notebook 05's study driver (``rftlab.studies.arena_sft``) and ``sft_smoke`` (``rftlab.studies.arena``)
against independent computations on small inputs."""

from __future__ import annotations

import json

import pytest
from stage1_specs import SMALL, write_spec

from rftlab.analysis.arena.review import agent_case_counts
from rftlab.analysis.rate_gates import clustered_pass_probability
from rftlab.envs.arena.cases import FROZEN_MANIFEST_SHA256
from rftlab.rollout.arena.evaluation import CONDITION_LABELS, CONDITIONS
from rftlab.rollout.arena.sft_data import SftConfig
from rftlab.studies.arena import (
    Stage1Result,
    lineage_study,
    read_rows,
    sft_study,
    simulated_lineages,
)
from rftlab.studies.arena_sft import (
    build_sft_data,
    communication_effects,
    frozen_check,
    g1_clustering,
    lineage_table,
    second_evaluation_refused,
    uncorrupted_seeds,
)

TINY = SftConfig(num_seeds=64, targeted_mechanics_per_kind=1, targeted_silence_examples=1)
STRIDE = 30  # frozen cases 0 and 30


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("sft-study")


@pytest.fixture(scope="module")
def data(work):
    return build_sft_data(work, TINY)


@pytest.fixture(scope="module")
def frozen(work, data):
    return frozen_check(work, STRIDE)


def test_communication_effects_sign_test_counts_the_case_differences():
    summary = {
        "per_case": [
            {"generated_reward": 3.0, "dropped_reward": 1.0},
            {"generated_reward": 1.0, "dropped_reward": 2.0},
            {"generated_reward": 2.0, "dropped_reward": 2.0},
            {"generated_reward": 4.0, "dropped_reward": 0.5},
        ],
        "communication_effects": {
            "generated_minus_dropped": {
                "left": "generated",
                "right": "dropped",
                "mean_difference": 1.375,
                "mean_difference_95": [-0.5, 3.25],
            }
        },
    }
    (effect,) = communication_effects({"scripted": summary})
    assert (effect.signs.positive, effect.signs.negative, effect.signs.ties) == (2, 1, 1)
    assert effect.signs.p_value == pytest.approx(1.0)  # 2·P(X ≤ 1), X ~ Bin(3, 1/2) = 2·4/8
    assert (effect.mean, effect.low, effect.high) == (1.375, -0.5, 3.25)
    assert effect.label == f"{CONDITION_LABELS['generated']} − {CONDITION_LABELS['dropped']}"


def test_build_sft_data_rebuilds_identically_and_the_audit_catches_one_byte(work, data):
    assert data.rebuild_identical and not data.is_stage1 and not data.digest_match
    assert data.audit.valid and not data.tamper_audit.valid
    original = (work / "data" / "validation.jsonl").read_bytes()
    tampered = (work / "data_tampered" / "validation.jsonl").read_bytes()
    assert data.tamper_position == len(original) // 2
    assert [k for k in range(len(original)) if original[k] != tampered[k]] == [data.tamper_position]
    rows = sum(
        len(read_rows(work / "data" / f"{split}.jsonl")) for split in data.manifest["examples_by_split"]
    )
    assert rows == data.manifest["num_examples"]
    assert json.loads((work / "data" / "audit.json").read_text())["valid"] is True
    assert set(data.unmet_inputs) == {r["item"] for r in data.inputs if r["met"] != "yes"}


def test_frozen_check_serves_every_reply_and_the_oracle_passes(frozen):
    assert frozen.cases_run == [0, 30]
    assert frozen.oracle_ok and frozen.served_agrees and frozen.manifest_published
    assert frozen.frozen_manifest_sha256 == FROZEN_MANIFEST_SHA256
    # every case asks 4 broadcasts and 28 actions, each one chat completion over HTTP
    assert frozen.served_requests == 2 * (4 + 28)
    effects = sum(len(s["communication_effects"]) for s in frozen.summaries.values())
    assert len(frozen.effects) == effects and {e.policy for e in frozen.effects} == set(frozen.evaluations)
    assert frozen.scripted_gates.spec_sha256 == frozen.gate_sha256


def test_condition_rows_read_every_condition_of_every_summary(frozen):
    rows = frozen.condition_rows()
    assert [(r.policy, r.condition) for r in rows] == [(p, c) for p in frozen.evaluations for c in CONDITIONS]
    for r in rows:
        c = frozen.summaries[r.policy]["conditions"][r.condition]
        assert (r.mean_regret, r.strict_action_rate) == (c["mean_oracle_regret"], c["strict_action_rate"])
        assert r.regret_95 == tuple(c["mean_oracle_regret_95"]) and r.label == CONDITION_LABELS[r.condition]
    assert all(r.mean_regret == 0 and r.optimal_rate == 1 for r in rows if r.policy == "oracle")


def test_g1_clustering_is_four_agent_cases_of_seven_replies_per_case(frozen):
    records = frozen.evaluations["scripted"].records
    assert agent_case_counts(records, "act_schema_valid")[1] == [7] * 8
    clusters, size, p = g1_clustering(records)
    assert (clusters, size) == (8, 7)
    assert p == clustered_pass_probability(8, 7, 0.995, 1.0, 0.995, "independent_lower_bound")
    assert (frozen.g1_clusters, frozen.g1_cluster_size, frozen.g1_type1) == (clusters, size, p)


def test_a_lineage_without_a_final_evaluation_has_nothing_to_refuse(tmp_path):
    assert second_evaluation_refused(tmp_path, Stage1Result(lineage={"lineage": "x", "stages": {}})) is None


@pytest.mark.slow
def test_sft_study_in_quick_mode_stops_the_lineage_at_selection(tmp_path):
    result = sft_study(num_seeds=64, mechanics_per_kind=1, silence_examples=1, work_dir=tmp_path / "work", case_stride=STRIDE, lineage_seeds=(0,),
                       store_root=tmp_path / "runs", quick=True)  # fmt: skip
    assert list(result.lineages) == [0] and result.simulated is result.lineages[0]
    assert result.frozen.cases_run == [0, 30]
    assert result.local_spec.evaluation.frozen_case_stride == 30  # the quick-mode copy of the local spec
    assert "## Fixed inputs" in result.handoff
    assert set(result.durations) >= {"build", "audit", "local lineage", "simulated lineages", "lineage study"}
    # a quick-size validation split is too small for the gates: selection (step 4) stops the lineage
    assert result.simulated.stopped_at == 4 and result.second_evaluation_refused is None
    assert [r.selected_step for r in result.lineage_rows()] == [None] and result.uncorrupted_seeds == []


@pytest.mark.slow
def test_finished_lineages_give_their_rows_and_refuse_a_second_evaluation(stage1_data, tmp_path):
    spec = write_spec(tmp_path, **SMALL)
    root = tmp_path / "runs"
    results = simulated_lineages(spec, [0, 1], store_root=root, data_dir=stage1_data, variant_dir=tmp_path)
    study = lineage_study(results)
    regret = lambda s: s["conditions"]["generated"]["mean_oracle_regret"]  # noqa: E731
    for row in lineage_table(study):
        r = results[row.seed]
        assert row.lineage == r.lineage["lineage"] and row.selected_step == r.selection["selected_step"]
        assert (row.base_regret, row.sft_regret) == (regret(r.base_summary), regret(r.final_summary))
        assert row.contrast == r.comparison["endpoints"]["primary"]["mean_difference"]
        assert row.promotion == r.gates["verdicts"]["promotion"]
    replies = {s: r.final_summary["replies"] for s, r in results.items()}
    clean = [
        s
        for s, x in replies.items()
        if x["act"]["legal"] == x["act"]["n"] and x["broadcast"]["valid"] == x["broadcast"]["n"]
    ]
    assert uncorrupted_seeds(results) == clean
    assert second_evaluation_refused(root, results[0]) is True
