"""The viewer shows records as a reader wants them (issue 33, item 6): an arena case as its broadcasts and,
per message condition, the rounded rewards and each agent's chosen action; a record without a transcript
as one ``field: value`` line per scalar, floats to 4 significant digits (float noise such as
``4.1000000000000005`` reads ``4.1``), never as a JSON dump."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("eval_protocol")

from rftlab.rollout.viewer import _fmt, record_to_row  # noqa: E402

TAGS = {"experiment": "arena_sft_simulated", "arm": "final_eval", "run_id": "r1", "epoch": "eval"}
NUMBER = re.compile(r"-?\d+\.\d+(?:e[+-]?\d+)?")


def _significant(text: str) -> int:
    return len(re.sub(r"e.*$", "", text).lstrip("-").replace(".", "").lstrip("0"))


def _arena_case():
    act = {"agent_id": "blue-0", "errors": [], "raw_response": '{"action_id":"A1"}',
           "selected_action": {"target": "V82", "type": "RECOVER"}, "valid": True}  # fmt: skip
    bad = {"agent_id": "blue-1", "errors": ["unknown action id A9"], "raw_response": '{"action_id":"A9"}',
           "selected_action": None, "valid": False}  # fmt: skip
    return {
        "case_index": 3,
        "messages": [{"agent_id": "blue-0", "raw_response": '{"intent":{"type":"RECOVER"}}', "valid": True}],
        "conditions": [
            {
                "condition": "generated",
                "environment_reward": 4.1000000000000005,
                "oracle_reward": 4.9,
                "regret": 0.7999999999999998,
                "actions": [act, bad],
            },  # fmt: skip
            {
                "condition": "dropped",
                "environment_reward": 3.0,
                "oracle_reward": 4.9,
                "regret": 1.9,
                "actions": [act],
            },
        ],
    }


def test_an_arena_case_reads_as_broadcasts_then_conditions_with_actions():
    row = record_to_row(_arena_case(), TAGS, 0)
    texts = [m.content for m in row.messages]
    assert texts[0] == 'blue-0 broadcast: {"intent":{"type":"RECOVER"}}'
    generated = texts[1].splitlines()
    assert generated[0] == "condition generated: reward 4.1, oracle 4.9, regret 0.8"
    assert generated[1] == 'blue-0: RECOVER V82 (reply {"action_id":"A1"})'
    assert generated[2] == 'blue-1: no valid action (reply {"action_id":"A9"}); errors: unknown action id A9'
    assert texts[2].startswith("condition dropped: reward 3, oracle 4.9, regret 1.9")
    assert row.input_metadata.row_id == "case-3"


def test_a_simulated_record_is_one_rounded_line_per_field():
    record = {"row_id": "sc1_0", "candidate": 0, "band_seed": 201096025152391, "reward": 1.3919749999999997,
              "memory_gain": 0.09365000000000001, "complete": True, "records": [{"scan": 0}, {"scan": 1}]}  # fmt: skip
    row = record_to_row(record, {**TAGS, "experiment": "spectrum_memory", "arm": "A", "epoch": 0}, 0)
    (message,) = row.messages
    lines = message.content.splitlines()
    assert lines[0].startswith("No transcript recorded for this rollout")
    assert lines[1:] == ["row_id: sc1_0", "candidate: 0", "band_seed: 201096025152391", "reward: 1.392",
                         "memory_gain: 0.09365", "complete: True", "records: 2 items"]  # fmt: skip
    shown = message.content + row.evaluation_result.reason
    shown += "".join(m.reason or "" for m in row.evaluation_result.metrics.values())
    assert all(_significant(n) <= 4 for n in NUMBER.findall(shown)), shown
    assert "band_seed = 201096025152391" in row.evaluation_result.reason
    # the exact values stay in the row's data
    assert row.input_metadata.session_data["values"]["reward"] == 1.3919749999999997


@given(st.floats(min_value=-1e300, max_value=1e300))
def test_a_rounded_float_reads_back_within_half_a_unit_of_its_fourth_digit(value):
    text = _fmt(value)
    if value.is_integer() and abs(value) < 1e15:
        assert int(text) == value
    else:
        assert float(text) == pytest.approx(value, rel=5e-4, abs=1e-300)
        assert _significant(text) <= 4
