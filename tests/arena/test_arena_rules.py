"""Legality and turn resolution on hand-built states (docs/arena.md §3, §4, Appendix A.3)."""

from __future__ import annotations

import pytest

from rftlab.envs.arena.rules import (
    Action,
    legal_actions,
    redundant_agents,
    step,
)
from rftlab.envs.arena.world import build_state, generate_state, state_fingerprint

W = Action("WAIT")


def A(kind, target=None, amount=None):  # noqa: N802 - short constructor for readable tables
    return Action(kind, target, amount)


def two_node(**y_extra):
    """A.3: X (BLUE) - Y (RED); all BLUE on X, all RED on Y; resource 2; everyone knows both nodes."""
    nodes = [{"id": "X", "owner": "BLUE", "value": 1}, {"id": "Y", "owner": "RED", "value": 1, **y_extra}]
    agents = [(f"blue-{k}", "X", 2) for k in range(4)] + [(f"red-{k}", "Y", 2) for k in range(4)]
    return build_state(nodes, [("X", "Y")], agents)


def line_state(resources=None, knowledge=None, **node_extra):
    """A - B - C - D line: A BLUE, B NEUTRAL, C RED, D RED. blue-0 on A, red-0 on C, others parked."""
    nodes = [
        {"id": "A", "owner": "BLUE", "value": 2, **node_extra.get("A", {})},
        {"id": "B", "owner": "NEUTRAL", "value": 3, **node_extra.get("B", {})},
        {"id": "C", "owner": "RED", "value": 1, **node_extra.get("C", {})},
        {"id": "D", "owner": "RED", "value": 2, **node_extra.get("D", {})},
        {"id": "E", "owner": "BLUE", "value": 1, **node_extra.get("E", {})},
    ]
    edges = [("A", "B"), ("B", "C"), ("C", "D"), ("A", "E")]
    res = {"blue-0": 2, "blue-1": 2, "blue-2": 2, "blue-3": 2, "red-0": 2, "red-1": 2, "red-2": 2, "red-3": 2}
    res.update(resources or {})
    positions = {"blue-0": "A", "blue-1": "E", "blue-2": "E", "blue-3": "E"}
    positions.update({"red-0": "C", "red-1": "D", "red-2": "D", "red-3": "D"})
    agents = [(a, positions[a], res[a]) for a in positions]
    return build_state(nodes, edges, agents, knowledge)


# ---------------------------------------------------------------- A.1 and A.3 vectors


def test_seed0_legal_lists():
    state = generate_state(0, 12)
    expected = {
        "blue-0": [A("CAPTURE", "V48"), A("FORTIFY", "V71"), A("PROBE", "V48"), A("SCAN", "V55"), W],
        "blue-1": [
            A("CAPTURE", "V75"),
            A("CAPTURE", "V84"),
            A("FORTIFY", "V72"),
            A("PROBE", "V75"),
            A("PROBE", "V84"),
            A("SCAN", "V61"),
            W,
        ],
        "blue-2": [
            A("CAPTURE", "V48"),
            A("CAPTURE", "V75"),
            A("PROBE", "V48"),
            A("PROBE", "V75"),
            A("SCAN", "V15"),
            W,
        ],
        "blue-3": [
            A("CAPTURE", "V15"),
            A("CAPTURE", "V59"),
            A("FORTIFY", "V63"),
            A("PROBE", "V15"),
            A("PROBE", "V59"),
            W,
        ],
    }
    for agent_id, actions in expected.items():
        assert list(legal_actions(state, agent_id)) == actions


def test_two_node_fixture_legal_and_all_wait():
    state = two_node()
    assert list(legal_actions(state, "blue-0")) == [A("CAPTURE", "Y"), A("FORTIFY", "X"), A("PROBE", "Y"), W]
    result = step(state, {})
    assert result.rewards["BLUE"] == 0.0
    assert result.rewards["RED"] == 0.0


def test_two_node_probe_enables_same_turn_capture():
    state = two_node()
    joint = {"blue-0": A("PROBE", "Y"), "blue-1": A("CAPTURE", "Y")}
    result = step(state, joint)
    assert result.rewards["BLUE"] == pytest.approx(1.4, abs=1e-12)
    assert result.rewards["RED"] == -result.rewards["BLUE"]
    assert result.state.nodes["Y"].owner == "BLUE"
    assert result.state.agents["blue-1"].position == "Y"  # capturers move
    assert result.state.agents["blue-0"].position == "X"
    assert result.duplicate_targets == {"BLUE": (), "RED": ()}
    assert redundant_agents(state, joint, "BLUE") == ()


def test_two_node_same_turn_fortify_blocks_single_probe():
    state = two_node()
    result = step(state, {"blue-0": A("PROBE", "Y"), "blue-1": A("CAPTURE", "Y"), "red-0": A("FORTIFY", "Y")})
    y = result.state.nodes["Y"]
    assert result.rewards["BLUE"] == 0.0
    assert (y.owner, y.exposed, y.fortification) == ("RED", False, 0)
    details = {(e.agent, e.kind): e.detail for e in result.events}
    assert details[("blue-0", "PROBE")] == "fortification_reduced"
    assert details[("blue-1", "CAPTURE")] == "not_exposed"


def test_two_node_invalid_action_is_wait_and_penalised():
    state = two_node()
    result = step(state, {"blue-0": A("CAPTURE", "NOT_A_NODE")})
    assert result.invalid_agents == ("blue-0",)
    assert result.rewards["BLUE"] == -1.0
    assert result.rewards["RED"] == 1.0
    assert result.resolved_actions["blue-0"] == W
    (invalid,) = [e for e in result.events if e.kind == "INVALID"]
    assert (invalid.agent, invalid.target, invalid.success, invalid.detail) == (
        "blue-0",
        "NOT_A_NODE",
        False,
        "CAPTURE",
    )
    assert result.state.agents["blue-0"].resource == 2  # resolved as WAIT: nothing paid


def test_malformed_action_objects_are_invalid_not_crashes():
    state = two_node()
    result = step(state, {"blue-0": "PROBE Y", "blue-1": {"type": "PROBE", "target": "Y"}, "red-0": 17})
    assert result.invalid_agents == ("blue-0", "red-0")
    assert result.resolved_actions["blue-1"] == A("PROBE", "Y")
    with pytest.raises(ValueError, match="unknown agents"):
        step(state, {"green-0": W})


# ---------------------------------------------------------------- legality per kind


def test_scan_only_unknown_neighbours():
    state = line_state(knowledge={"blue-0": ["A"]})
    assert A("SCAN", "B") in legal_actions(state, "blue-0")
    assert A("SCAN", "E") in legal_actions(state, "blue-0")
    assert not any(
        a.kind == "SCAN" and a.target == "C" for a in legal_actions(state, "blue-0")
    )  # not adjacent
    known = line_state()
    assert not any(a.kind == "SCAN" for a in legal_actions(known, "blue-0"))


def test_probe_and_capture_need_resource_and_non_team_known_neighbour():
    state = line_state(B={"owner": "NEUTRAL"})
    legal = legal_actions(state, "blue-0")
    assert A("PROBE", "B") in legal and A("CAPTURE", "B") in legal  # NEUTRAL counts
    assert A("PROBE", "E") not in legal and A("PROBE", "C") not in legal  # own node / not adjacent
    broke = line_state(resources={"blue-0": 0})
    assert [a.kind for a in legal_actions(broke, "blue-0")] == ["WAIT"]
    exposed = line_state(knowledge=None, C={"exposed": True})
    assert A("PROBE", "C") not in legal_actions(exposed, "red-1")
    assert A("PROBE", "B") in legal_actions(exposed, "red-0")  # NEUTRAL B, exposed or not


def test_probe_allowed_on_exposed_enemy():
    state = line_state(B={"owner": "RED", "exposed": True}, D={"owner": "BLUE"}, E={"owner": "RED"})
    assert {A("PROBE", "B"), A("CAPTURE", "B")} <= set(legal_actions(state, "blue-0"))


def test_recover_and_fortify_from_known_status():
    state = line_state(A={"compromised": True}, E={"fortification": 1})
    legal = legal_actions(state, "blue-0")
    assert A("RECOVER", "A") in legal and A("FORTIFY", "A") not in legal
    assert A("FORTIFY", "E") not in legal  # FORTIFIED: no further fortify
    exposed = line_state(E={"exposed": True})
    assert A("FORTIFY", "E") in legal_actions(exposed, "blue-0")  # EXPOSED may be fortified
    assert A("FORTIFY", "A") in legal_actions(exposed, "blue-0")  # SECURE
    assert A("RECOVER", "E") not in legal_actions(exposed, "blue-0")


def test_legality_uses_the_agents_own_stale_knowledge():
    state = line_state(E={"compromised": True})
    # blue-0 remembers E as RED (stale): PROBE/CAPTURE are legal, RECOVER is not, though E is BLUE.
    stale = state.copy()
    stale.knowledge["blue-0"]["E"] = stale.knowledge["blue-0"]["E"]._replace(owner="RED", status="SECURE")
    legal = legal_actions(stale, "blue-0")
    assert A("PROBE", "E") in legal and A("RECOVER", "E") not in legal
    result = step(stale, {"blue-0": A("PROBE", "E")})
    (event,) = [e for e in result.events if e.kind == "PROBE"]
    assert (event.success, event.detail) == (False, "owner_changed")
    assert result.state.agents["blue-0"].resource == 1  # the cost is paid anyway


def test_transfer_legality():
    state = line_state(resources={"blue-1": 4, "blue-2": 3})
    legal = legal_actions(state, "blue-0")
    assert A("TRANSFER", "blue-2", 1) in legal
    assert A("TRANSFER", "blue-1", 1) not in legal  # already full
    assert A("TRANSFER", "blue-3", 1) in legal
    # same-node teammates are not adjacent
    assert not any(
        a.kind == "TRANSFER" and a.target in {"blue-2", "blue-3"} for a in legal_actions(state, "blue-1")
    )


# ---------------------------------------------------------------- resolution


def test_full_receiver_transfer_fails_at_no_cost():
    state = line_state(resources={"blue-0": 3, "blue-1": 3, "blue-2": 2})
    # blue-1 (E) is adjacent to blue-0 (A); make blue-2 also send from E to blue-0.
    joint = {"blue-1": A("TRANSFER", "blue-0", 1), "blue-2": A("TRANSFER", "blue-0", 1)}
    result = step(state, joint)
    resources = {a: result.state.agents[a].resource for a in ("blue-0", "blue-1", "blue-2")}
    assert resources == {"blue-0": 4, "blue-1": 2, "blue-2": 2}
    transfers = [(e.agent, e.success, e.detail) for e in result.events if e.kind == "TRANSFER"]
    assert transfers == [("blue-1", True, "transferred"), ("blue-2", False, "receiver_full")]


def test_transfer_receiver_room_counts_its_own_cost_first():
    state = line_state(resources={"blue-0": 3, "blue-1": 3, "blue-2": 2})
    joint = {
        "blue-0": A("PROBE", "B"),
        "blue-1": A("TRANSFER", "blue-0", 1),
        "blue-2": A("TRANSFER", "blue-0", 1),
    }
    result = step(state, joint)
    assert result.state.agents["blue-0"].resource == 4  # 3 - 1 (probe) + 1 + 1
    assert all(e.success for e in result.events if e.kind == "TRANSFER")


def test_contested_capture_fails_for_both_teams_and_costs_are_paid():
    state = line_state(B={"exposed": True})
    result = step(state, {"blue-0": A("CAPTURE", "B"), "red-0": A("CAPTURE", "B")})
    assert result.state.nodes["B"].owner == "NEUTRAL"
    assert result.state.nodes["B"].exposed
    assert [(e.agent, e.success, e.detail) for e in result.events if e.kind == "CAPTURE"] == [
        ("blue-0", False, "contested"),
        ("red-0", False, "contested"),
    ]
    assert result.state.agents["blue-0"].resource == 1 and result.state.agents["red-0"].resource == 1
    assert (result.state.agents["blue-0"].position, result.state.agents["red-0"].position) == ("A", "C")
    alone = step(state, {"blue-0": A("CAPTURE", "B")})
    assert alone.state.nodes["B"].owner == "BLUE" and not alone.state.nodes["B"].exposed


def test_neutral_capture_needs_exposure_from_either_team():
    state = line_state()
    alone = step(state, {"red-0": A("CAPTURE", "B")})
    assert alone.state.nodes["B"].owner == "NEUTRAL"
    assert [e.detail for e in alone.events if e.kind == "CAPTURE"] == ["not_exposed"]
    helped = step(state, {"blue-0": A("PROBE", "B"), "red-0": A("CAPTURE", "B")})
    assert helped.state.nodes["B"].owner == "RED"  # BLUE's probe exposed it; RED took it
    assert helped.state.agents["red-0"].position == "B"


def test_probe_exposure_and_shields():
    unfortified = step(line_state(), {"blue-0": A("PROBE", "B")}).state.nodes["B"]
    assert (unfortified.fortification, unfortified.exposed) == (0, True)

    one = line_state(B={"fortification": 1})
    single = step(one, {"blue-0": A("PROBE", "B")})
    assert (single.state.nodes["B"].fortification, single.state.nodes["B"].exposed) == (0, False)
    double = step(one, {"blue-0": A("PROBE", "B"), "red-0": A("PROBE", "B")})
    assert (double.state.nodes["B"].fortification, double.state.nodes["B"].exposed) == (0, True)
    assert [(e.agent, e.detail) for e in double.events if e.kind == "PROBE"] == [
        ("blue-0", "fortification_reduced"),
        ("red-0", "exposed"),
    ]
    two = line_state(B={"fortification": 2})
    stripped = step(two, {"blue-0": A("PROBE", "B"), "red-0": A("PROBE", "B")}).state.nodes["B"]
    assert (stripped.fortification, stripped.exposed) == (0, False)  # two probes remove two shield levels


def test_fortify_recover_and_caps():
    state = line_state(E={"fortification": 1}, A={"compromised": True})
    result = step(
        state,
        {"blue-0": A("RECOVER", "A"), "blue-1": A("TRANSFER", "blue-0", 1)},
    )
    assert not result.state.nodes["A"].compromised
    exposed = line_state(E={"exposed": True})
    both = step(
        exposed, {"blue-0": A("FORTIFY", "E"), "blue-1": A("FORTIFY", "E"), "blue-2": A("FORTIFY", "E")}
    )
    node = both.state.nodes["E"]
    assert (node.fortification, node.exposed) == (2, False)  # capped at 2, exposure cleared
    assert both.duplicate_targets["BLUE"] == ("FORTIFY:E",)
    assert {a: both.state.agents[a].resource for a in ("blue-0", "blue-1", "blue-2")} == {
        "blue-0": 1,
        "blue-1": 1,
        "blue-2": 1,
    }


def test_scan_reveals_node_refreshed_at_next_turn_and_pays_bonus():
    state = line_state(knowledge={"blue-0": ["A", "E"]})
    result = step(state, {"blue-0": A("SCAN", "B"), "red-0": A("PROBE", "B")})
    obs = result.state.knowledge["blue-0"]["B"]
    assert (
        obs.observed_turn == 1 and obs.status == "EXPOSED"
    )  # the post-turn refresh overwrites the scan stamp
    assert result.scan_bonus == {"BLUE": 0.1, "RED": 0.0}
    assert result.state.agents["blue-0"].resource == 2  # SCAN is free


def test_knowledge_refresh_after_capture_move_and_stale_remote_entries():
    state = line_state(C={"exposed": True})
    result = step(state, {})
    assert result.state.turn == 1
    # remote nodes keep their old stamp; own position and known neighbours are re-stamped
    known = result.state.knowledge["blue-0"]
    assert known["A"].observed_turn == 1 and known["B"].observed_turn == 1 and known["E"].observed_turn == 1
    assert known["C"].observed_turn == 0 and known["D"].observed_turn == 0


def test_step_leaves_its_input_untouched():
    state = generate_state(3, 13)
    before = state_fingerprint(state)
    step(state, {a: legal_actions(state, a)[0] for a in state.agents})
    assert state_fingerprint(state) == before


def test_redundancy_leave_one_out():
    state = line_state()
    joint = {"blue-0": A("PROBE", "B"), "blue-1": A("FORTIFY", "E"), "blue-2": A("FORTIFY", "E")}
    # a second FORTIFY on E adds 0.15 of fortification: not redundant; PROBE on B only exposes a neutral node
    redundant = redundant_agents(state, joint, "BLUE")
    assert "blue-1" not in redundant and "blue-2" not in redundant
    assert "blue-0" in redundant
