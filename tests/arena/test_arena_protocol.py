"""Prompts, strict parsers (one test per error code), permutations and reference broadcasts (docs/arena.md §8)."""

from __future__ import annotations

import json

import pytest

from rftlab.envs.arena.cases import frozen_cases
from rftlab.envs.arena.oracle import solve_joint_action
from rftlab.envs.arena.protocol import (
    ACT_SYSTEM_PROMPT,
    ACTION_ERROR_CODES,
    BROADCAST_ERROR_CODES,
    BROADCAST_SYSTEM_PROMPT,
    EMPTY_BROADCAST,
    PROMPT_VERSION,
    Broadcast,
    action_or_wait,
    action_prompt,
    broadcast_or_empty,
    broadcast_prompt,
    displayed_actions,
    encode_action,
    encode_broadcast,
    inbox_for,
    oracle_broadcast,
    parse_action,
    parse_broadcast,
    permutation_for,
)
from rftlab.envs.arena.rules import Action, legal_actions
from rftlab.envs.arena.world import generate_state
from rftlab.policies.arena.scripted import deterministic_policy, local_policy_action

STATE0 = generate_state(0, 12)
# blue-3 knows V15 (RED EXPOSED 3), V59 (NEUTRAL SECURE 3 critical), V63 (own EXPOSED 3 critical)
V59 = {
    "node": "V59",
    "owner": "NEUTRAL",
    "status": "SECURE",
    "value": 3,
    "critical": True,
    "observed_turn": 0,
}
V15 = {"node": "V15", "owner": "RED", "status": "EXPOSED", "value": 3, "critical": False, "observed_turn": 0}


def reply(facts=(), intent=None, request=0, **extra):
    body = {"facts": list(facts), "intent": intent, "request_resource": request, **extra}
    return json.dumps(body)


def code_of(raw, agent="blue-3"):
    result = parse_broadcast(raw, STATE0, agent)
    assert not result.valid and len(result.errors) == 1
    return result.error


# ---------------------------------------------------------------- vectors


def test_prompt_version():
    assert PROMPT_VERSION == "rftlab-arena-prompt-v2"


def test_seed0_reference_broadcasts():
    blue0 = oracle_broadcast(STATE0, "blue-0", local_policy_action(STATE0, "blue-0"))
    assert encode_broadcast(blue0) == (
        '{"facts":[{"critical":false,"node":"V48","observed_turn":0,"owner":"NEUTRAL","status":"SECURE","value":2}],'
        '"intent":{"target":"V48","type":"PROBE"},"request_resource":0}'
    )
    blue3 = oracle_broadcast(STATE0, "blue-3", local_policy_action(STATE0, "blue-3"))
    assert encode_broadcast(blue3) == (
        '{"facts":[{"critical":true,"node":"V59","observed_turn":0,"owner":"NEUTRAL","status":"SECURE","value":3},'
        '{"critical":true,"node":"V63","observed_turn":0,"owner":"BLUE","status":"EXPOSED","value":3},'
        '{"critical":false,"node":"V15","observed_turn":0,"owner":"RED","status":"EXPOSED","value":3}],'
        '"intent":{"target":"V59","type":"PROBE"},"request_resource":0}'
    )
    for agent, broadcast in (("blue-0", blue0), ("blue-3", blue3)):
        parsed = parse_broadcast(encode_broadcast(broadcast), STATE0, agent)
        assert parsed.valid and parsed.value == broadcast


def test_frozen_case0_reference_broadcast():
    case = frozen_cases()[0]
    state = generate_state(case.seed, case.size)
    solution = solve_joint_action(state, "BLUE", deterministic_policy(state, "RED", case.style))
    broadcast = oracle_broadcast(state, "blue-3", solution.canonical_assignment["blue-3"])
    assert encode_broadcast(broadcast) == (
        '{"facts":[{"critical":false,"node":"V65","observed_turn":0,"owner":"RED","status":"SECURE","value":3}],'
        '"intent":{"target":"V65","type":"PROBE"},"request_resource":0}'
    )


def test_reference_broadcast_wait_requests_resource_when_broke():
    state = STATE0.copy()
    state.agents["blue-0"].resource = 0
    broadcast = oracle_broadcast(state, "blue-0", Action("WAIT"))
    assert broadcast.intent is None and broadcast.request_resource == 1
    assert [f.node for f in broadcast.facts] == ["V48"]  # own SECURE non-critical V71 is not useful
    assert oracle_broadcast(STATE0, "blue-0", Action("WAIT")).request_resource == 0


def test_displayed_permutation_a6_vector():
    state = generate_state(2, 12)
    displayed = displayed_actions(state, "blue-2", permutation_for(2, 2))
    assert displayed == (
        Action("WAIT"),
        Action("CAPTURE", "V20"),
        Action("PROBE", "V20"),
        Action("SCAN", "V17"),
        Action("TRANSFER", "blue-3", 1),
    )
    assert encode_action(Action("PROBE", "V20"), displayed) == '{"action_id":"A2"}'
    assert parse_action('{"action_id":"A2"}', displayed).value == Action("PROBE", "V20")


def test_displayed_is_a_rotation_of_the_sorted_list():
    legal = legal_actions(STATE0, "blue-1")
    for p in range(-3, 20):
        shown = displayed_actions(STATE0, "blue-1", p)
        s = p % len(legal)
        assert shown == legal[s:] + legal[:s]
    assert displayed_actions(STATE0, "blue-1", 0) == legal


def test_prompts_are_two_messages_with_compact_sorted_json():
    messages, displayed = broadcast_prompt(STATE0, "blue-0", permutation_for(0, 0))
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == BROADCAST_SYSTEM_PROMPT
    body = json.loads(messages[1]["content"])
    assert messages[1]["content"] == json.dumps(body, sort_keys=True, separators=(",", ":"))
    assert set(body) == {"phase", "team_objective", "observation", "legal_actions"}
    assert body["phase"] == "BROADCAST"
    assert [e["id"] for e in body["legal_actions"]] == [f"A{i}" for i in range(len(displayed))]
    assert body["legal_actions"][0] == {"id": "A0", "type": "CAPTURE", "target": "V48"}

    inbox = inbox_for("blue-0", {"blue-2": oracle_broadcast(STATE0, "blue-2", Action("PROBE", "V75"))})
    assert [entry["sender"] for entry in inbox] == ["blue-1", "blue-2", "blue-3"]
    assert inbox[0]["broadcast"] == {"facts": [], "intent": None, "request_resource": 0}  # empties included
    act, displayed = action_prompt(STATE0, "blue-0", inbox, 3)
    assert act[0]["content"] == ACT_SYSTEM_PROMPT
    body = json.loads(act[1]["content"])
    assert set(body) == {"phase", "team_objective", "observation", "inbox", "legal_actions"}
    assert body["phase"] == "ACT" and body["inbox"] == inbox
    assert displayed[0] == Action("SCAN", "V55")


def test_system_prompts_cover_the_required_content():
    for text in (BROADCAST_SYSTEM_PROMPT, ACT_SYSTEM_PROMPT):
        for kind in ("WAIT", "SCAN", "PROBE", "CAPTURE", "FORTIFY", "RECOVER", "TRANSFER"):
            assert f"- {kind}" in text
        assert "legal_actions" in text and "four" in text
    assert '"request_resource"' in BROADCAST_SYSTEM_PROMPT and '{"type":"WAIT"}' in BROADCAST_SYSTEM_PROMPT
    assert '"action_id"' in ACT_SYSTEM_PROMPT and "eight agents" in ACT_SYSTEM_PROMPT


# ---------------------------------------------------------------- broadcast parser: one test per code


def test_valid_broadcast_and_whitespace_tolerance():
    raw = "  \n" + reply([V59, V15], {"type": "PROBE", "target": "V59"}, 1) + "\n "
    parsed = parse_broadcast(raw, STATE0, "blue-3")
    assert parsed.valid and parsed.errors == ()
    assert [f.node for f in parsed.value.facts] == ["V59", "V15"]  # reply order
    assert parsed.value.intent == Action("PROBE", "V59") and parsed.value.request_resource == 1
    assert parse_broadcast(reply(), STATE0, "blue-3").value == EMPTY_BROADCAST


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "```json\n{}\n```",
        'Sure: {"facts":[],"intent":null,"request_resource":0}',
        "",
        None,
        17,
        b"{}",
    ],
)
def test_invalid_json(raw):
    assert code_of(raw) == "invalid_json"


def test_not_object():
    assert code_of("[1, 2]") == "not_object"
    assert code_of('"text"') == "not_object"


def test_broadcast_schema_extra_and_missing_keys():
    assert code_of(reply(note="hi")) == "broadcast_schema"
    assert code_of('{"facts":[],"intent":null}') == "broadcast_schema"


def test_facts_schema():
    assert code_of('{"facts":{},"intent":null,"request_resource":0}') == "facts_schema"
    assert code_of(reply([V59, V15, V59, V15])) == "facts_schema"


def test_fact_schema():
    assert code_of(reply(["V59"])) == "fact_schema"
    assert code_of(reply([{**V59, "extra": 1}])) == "fact_schema"
    missing = dict(V59)
    del missing["observed_turn"]
    assert code_of(reply([missing])) == "fact_schema"


def test_fact_node():
    assert code_of(reply([{**V59, "node": 59}])) == "fact_node"
    assert code_of(reply([V59, V59])) == "fact_node"


def test_fact_value_including_unhashable():
    assert code_of(reply([{**V59, "owner": "GREEN"}])) == "fact_value"
    assert code_of(reply([{**V59, "status": "secure"}])) == "fact_value"
    assert code_of(reply([{**V59, "owner": ["NEUTRAL"]}])) == "fact_value"  # upstream crashes here
    assert code_of(reply([{**V59, "status": {"a": 1}}])) == "fact_value"


def test_fact_priority():
    assert code_of(reply([{**V59, "value": 4}])) == "fact_priority"
    assert code_of(reply([{**V59, "value": 3.0}])) == "fact_priority"
    assert code_of(reply([{**V59, "value": True}])) == "fact_priority"
    assert code_of(reply([{**V59, "critical": 1}])) == "fact_priority"


def test_fact_turn():
    assert code_of(reply([{**V59, "observed_turn": "0"}])) == "fact_turn"
    assert code_of(reply([{**V59, "observed_turn": 0.0}])) == "fact_turn"


def test_unsupported_fact_unknown_node_wrong_content_and_stale_turn():
    assert code_of(reply([{**V59, "node": "V48"}])) == "unsupported_fact"  # blue-3 never saw V48
    assert code_of(reply([{**V59, "owner": "RED"}])) == "unsupported_fact"  # contradicts its observation
    assert code_of(reply([{**V59, "critical": False}])) == "unsupported_fact"
    assert code_of(reply([{**V59, "observed_turn": 1}])) == "unsupported_fact"  # not the stored stamp
    later = STATE0.copy()
    later.turn = 1
    later.knowledge["blue-3"]["V59"] = later.knowledge["blue-3"]["V59"]._replace(observed_turn=1)
    result = parse_broadcast(reply([V59]), later, "blue-3")  # a stale (turn-0) copy of a refreshed fact
    assert result.error == "unsupported_fact"


def test_illegal_intent():
    assert code_of(reply(intent={"type": "PROBE", "target": "V48"})) == "illegal_intent"  # not a neighbour
    assert code_of(reply(intent={"type": "CAPTURE"})) == "illegal_intent"  # missing target
    assert code_of(reply(intent={"type": "WAIT", "target": "V59"})) == "illegal_intent"
    assert code_of(reply(intent={"type": "PROBE", "target": "V59", "amount": 1})) == "illegal_intent"
    assert code_of(reply(intent={"type": "JUMP", "target": "V59"})) == "illegal_intent"
    assert code_of(reply(intent={"type": "PROBE", "target": "V59", "why": "x"})) == "illegal_intent"
    assert code_of(reply(intent={"action_id": "A3"})) == "illegal_intent"
    assert code_of(reply(intent="PROBE V59")) == "illegal_intent"
    assert code_of(reply(intent={"type": 3})) == "illegal_intent"


def test_request_schema():
    assert code_of(reply(request=2)) == "request_schema"
    assert code_of(reply(request=True)) == "request_schema"
    assert code_of(reply(request="1")) == "request_schema"


def test_checks_run_in_order_first_failure_wins():
    # an unsupported fact is reported before an illegal intent and a bad request
    assert code_of(reply([{**V59, "value": 1}], {"type": "JUMP"}, 5)) == "unsupported_fact"
    assert code_of(reply([], {"type": "JUMP"}, 5)) == "illegal_intent"
    assert set(BROADCAST_ERROR_CODES) >= {
        "invalid_json",
        "unsupported_fact",
        "illegal_intent",
        "request_schema",
    }


def test_upstream_quirks_are_kept():
    # intent type is upper-cased; bools pass as observed_turn (False == 0) and as a TRANSFER amount
    lower = parse_broadcast(reply(intent={"type": "probe", "target": "V59"}), STATE0, "blue-3")
    assert lower.valid and lower.value.intent == Action("PROBE", "V59")
    assert parse_broadcast(reply([{**V59, "observed_turn": False}]), STATE0, "blue-3").valid
    wait = parse_broadcast(reply(intent={"type": "WAIT", "target": None}), STATE0, "blue-3")
    assert wait.valid and wait.value.intent == Action("WAIT")
    dup = (
        '{"facts":[],"intent":null,"request_resource":5,"request_resource":0}'  # last key wins, as json does
    )
    assert parse_broadcast(dup, STATE0, "blue-3").valid


def test_transfer_intent_needs_amount_one():
    state = generate_state(2, 12)
    assert Action("TRANSFER", "blue-3", 1) in legal_actions(state, "blue-2")
    ok = parse_broadcast(reply(intent={"type": "TRANSFER", "target": "blue-3", "amount": 1}), state, "blue-2")
    assert ok.valid and ok.value.intent == Action("TRANSFER", "blue-3", 1)
    quirk = parse_broadcast(
        reply(intent={"type": "TRANSFER", "target": "blue-3", "amount": True}), state, "blue-2"
    )
    assert quirk.valid and quirk.value.intent.amount == 1
    for bad in (
        {"type": "TRANSFER", "target": "blue-3"},
        {"type": "TRANSFER", "target": "blue-3", "amount": 2},
    ):
        assert parse_broadcast(reply(intent=bad), state, "blue-2").error == "illegal_intent"


# ---------------------------------------------------------------- action parser: one test per code

DISPLAYED = displayed_actions(STATE0, "blue-1", 1)


def action_code(raw):
    result = parse_action(raw, DISPLAYED)
    assert not result.valid and len(result.errors) == 1
    return result.error


def test_valid_action_and_leading_zeros():
    assert parse_action('{"action_id":"A0"}', DISPLAYED).value == DISPLAYED[0]
    assert parse_action(' {"action_id": "A6"}\n', DISPLAYED).value == DISPLAYED[6]
    assert parse_action('{"action_id":"A01"}', DISPLAYED).value == DISPLAYED[1]  # upstream quirk


@pytest.mark.parametrize("raw", ["A1", '{"action_id":"A1"', '```json\n{"action_id":"A1"}\n```', None, 1])
def test_action_invalid_json(raw):
    assert action_code(raw) == "invalid_json"


def test_action_not_object():
    assert action_code('["A1"]') == "not_object"


def test_action_schema():
    assert action_code('{"action_id":"A1","reason":"x"}') == "action_schema"
    assert action_code('{"action":"A1"}') == "action_schema"
    assert action_code('{"action_id":1}') == "action_schema"


def test_action_id():
    for bad in ("A", "1", "a1", "B1", "A-1", "A 1", "A1.0", "A²", "A١"):
        assert action_code(json.dumps({"action_id": bad})) == "action_id", bad


def test_action_id_range():
    assert action_code('{"action_id":"A7"}') == "action_id_range"
    assert action_code('{"action_id":"A' + "9" * 5000 + '"}') == "action_id_range"
    assert set(ACTION_ERROR_CODES) == {
        "invalid_json",
        "not_object",
        "action_schema",
        "action_id",
        "action_id_range",
    }


# ---------------------------------------------------------------- substitution and encoders


def test_invalid_replies_are_replaced():
    assert broadcast_or_empty(parse_broadcast("nope", STATE0, "blue-3")) == EMPTY_BROADCAST
    assert (
        EMPTY_BROADCAST.is_empty
        and encode_broadcast(EMPTY_BROADCAST) == '{"facts":[],"intent":null,"request_resource":0}'
    )
    assert action_or_wait(parse_action('{"action_id":"A99"}', DISPLAYED)) == Action("WAIT")
    good = parse_action('{"action_id":"A2"}', DISPLAYED)
    assert action_or_wait(good) == DISPLAYED[2]
    with pytest.raises(ValueError, match="not among"):
        encode_action(Action("CAPTURE", "V15"), DISPLAYED)


def test_every_reference_broadcast_and_action_round_trips_on_frozen_cases():
    for case in frozen_cases()[::7]:
        state = generate_state(case.seed, case.size)
        solution = solve_joint_action(state, "BLUE", deterministic_policy(state, "RED", case.style))
        for i, (agent, action) in enumerate(solution.canonical_assignment.items()):
            broadcast = oracle_broadcast(state, agent, action)
            assert isinstance(broadcast, Broadcast) and len(broadcast.facts) <= 3
            assert parse_broadcast(encode_broadcast(broadcast), state, agent).value == broadcast
            for k in range(3):
                displayed = displayed_actions(state, agent, permutation_for(case.seed, i, k))
                assert parse_action(encode_action(action, displayed), displayed).value == action
