"""The gates after review (issue 31): the revision file, the agent-case counts, the revised verdicts beside
the registered ones and both error types, against hand-worked cases and closed forms."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, norm

from rftlab.analysis.arena.gates import DEFAULT_GATE_SPEC, GateSpecError
from rftlab.analysis.arena.review import (
    REVISED_GATE_SPEC,
    agent_case_counts,
    clustered_check,
    gate_error_rows,
    load_revised_spec,
    paired_bound_power,
    revised_gate_rows,
)
from rftlab.runs.hashing import file_sha256

GOOD, CUT, A99 = '{"action_id": "A1"}', '{"action_', '{"action_id": "A99"}'


def records(cases: int = 60, failing: dict | None = None) -> list[dict]:
    """Frozen records of 4 agents x 7 condition rows; ``failing[(case, agent)] = reply`` in every row."""
    failing = failing or {}
    out = []
    for c in range(cases):
        rows = []
        for _ in range(7):
            actions = []
            for a in range(4):
                raw = failing.get((c, a), GOOD)
                actions.append({"agent_id": f"blue-{a}", "raw_response": raw, "valid": raw == GOOD})
            rows.append({"actions": actions})
        out.append({"case_index": c, "conditions": rows})
    return out


def test_the_committed_revision_names_the_registered_spec():
    revision, sha = load_revised_spec()
    assert revision.revises_sha256 == file_sha256(DEFAULT_GATE_SPEC)
    assert sha == file_sha256(REVISED_GATE_SPEC)
    assert set(revision.rule_changes()) == {"act_schema_valid", "act_legal"}
    assert set(revision.flags()) == {"unsupported_fact_responses"}


def test_a_revision_of_another_text_is_refused(tmp_path):
    raw = json.loads(REVISED_GATE_SPEC.read_text())
    raw["revises_sha256"] = "0" * 64
    path = tmp_path / "rev.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(GateSpecError, match="revises a spec with SHA-256"):
        load_revised_spec(path)
    raw = json.loads(REVISED_GATE_SPEC.read_text())
    raw["changes"][0]["min_clusters"] = 240  # not the fewest that can pass at 0.995
    path.write_text(json.dumps(raw))
    with pytest.raises(GateSpecError, match="min_clusters 240"):
        load_revised_spec(path)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=8,
    )
)
@settings(max_examples=60, deadline=None)
def test_any_other_json_is_one_gate_spec_error(tmp_path_factory, value):
    path = tmp_path_factory.mktemp("rev") / "rev.json"
    path.write_text(json.dumps(value))
    with pytest.raises(GateSpecError) as info:
        load_revised_spec(path)
    assert "\n" not in str(info.value)


def test_agent_case_counts_by_hand():
    recs = records(3, {(1, 2): CUT, (2, 0): A99})
    ok, sizes = agent_case_counts(recs, "act_schema_valid")
    assert sizes == [7] * 12 and sum(ok) == 84 - 7  # A99 is schema-valid, the cut reply is not
    legal, _ = agent_case_counts(recs, "act_legal")
    assert sum(legal) == 84 - 14
    with pytest.raises(ValueError):
        agent_case_counts(recs, "broadcast_schema_valid")


def test_clustered_verdicts_at_240_agent_cases():
    revision, _ = load_revised_spec()
    g1, g4 = revision.rule_changes()["act_schema_valid"], revision.rule_changes()["act_legal"]
    clean = records()
    assert clustered_check(clean, g1)["verdict"] == "INSUFFICIENT N"  # 240 < 765 agent-cases
    c4 = clustered_check(clean, g4)
    assert c4["verdict"] == "PASS" and c4["n_eff"] == 240 and c4["design_effect"] is None
    # 10 failing agent-cases (70 of 1680 replies, 4.2%): the Wilson bound of 230/240 is 0.925 < 0.95
    bad = records(failing={(c, 0): CUT for c in range(10)})
    c4 = clustered_check(bad, g4)
    assert c4["verdict"] == "FAIL" and c4["lower_bound"] == pytest.approx(0.92497, abs=1e-4)
    assert c4["design_effect"] == pytest.approx(7 * 240 / 239)


def _gate_row(gate, metric, data, rule, threshold, n, verdict="PASS"):
    return {
        "gate": gate,
        "metric": metric,
        "data": data,
        "rule": rule,
        "threshold": threshold,
        "n": n,
        "verdict": verdict,
    }


ROWS = [
    _gate_row("G1", "act_schema_valid", "frozen", "lower_bound", ">= 0.995", 1680),
    _gate_row("G2", "broadcast_schema_valid", "frozen", "point", ">= 0.99", 240),
    _gate_row("G3", "unsupported_fact_responses", "validation", "count", "<= 0", 223),
    _gate_row("G4", "act_legal", "frozen", "lower_bound", ">= 0.95", 1680),
    _gate_row("G5", "regret_difference_ci_high", "paired", "value", "<= -1e-12", 60),
]


def test_revised_rows_keep_the_registered_verdict_beside_the_revised_one():
    revision, _ = load_revised_spec()
    rows = {
        r["metric"]: r
        for r in revised_gate_rows(ROWS, records(), revision, {"unsupported_fact_responses": 0})
    }
    assert rows["act_schema_valid"]["registered verdict"] == "PASS"
    assert rows["act_schema_valid"]["revised verdict"] == "INSUFFICIENT N"
    assert "after review" in rows["act_schema_valid"]["change"]
    assert rows["unsupported_fact_responses"]["change"].startswith("by construction")
    assert rows["broadcast_schema_valid"]["change"] == "–"


def test_error_rates_against_closed_forms():
    revision, _ = load_revised_spec()
    comparison = {"endpoints": {"primary": {"mean_difference_95": [-1.0, -0.2]}}}
    se = 0.8 / (2 * 1.959963984540054)
    rows = gate_error_rows(ROWS, records(), comparison, {}, {"primary": -0.7}, revision)
    by = {(r["metric"], r["rule"]): r for r in rows}
    # G1 registered, all-or-nothing clusters: no failing agent-case at all, 0.995^240
    assert by[("act_schema_valid", "registered")]["type I"] == pytest.approx(0.995**240, rel=1e-9)
    assert by[("act_schema_valid", "revised")]["type II"] == 1.0  # cannot pass at 240 agent-cases
    assert by[("broadcast_schema_valid", "registered")]["type I"] == pytest.approx(binom.sf(237, 240, 0.99))
    assert by[("unsupported_fact_responses", "registered")]["type I"] == pytest.approx(0.99**223)
    assert by[("unsupported_fact_responses", "registered")]["type II"] == pytest.approx(1 - 0.999**223)
    assert by[("unsupported_fact_responses", "revised (flag)")]["type I"] == 1.0
    assert by[("regret_difference_ci_high", "registered")]["type II"] == pytest.approx(
        norm.cdf(1.959963984540054 - 0.7 / se)
    )


def test_g3_on_test_is_given_beside_the_flag():
    revision, _ = load_revised_spec()
    comparison = {"endpoints": {"primary": {"mean_difference_95": [-1.0, -0.2]}}}
    rows = gate_error_rows(
        ROWS, records(), comparison, {}, {"primary": -0.7}, revision, {"broadcast": {"rows": 137}}
    )
    (test,) = [r for r in rows if r["rule"].startswith("exploratory: on 137 test")]
    assert test["type I"] == pytest.approx(0.99**137) and test["type II"] == pytest.approx(1 - 0.999**137)


def test_paired_bound_power_by_hand():
    assert paired_bound_power(1.959963984540054, 1.0) == pytest.approx(0.5)
    assert paired_bound_power(0.0, 1.0) == pytest.approx(0.025, abs=1e-4)
    assert paired_bound_power(0.3, 0.0) == 1.0
    with pytest.raises(ValueError):
        paired_bound_power(float("nan"), 1.0)
