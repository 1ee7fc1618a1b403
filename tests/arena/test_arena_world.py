"""Generation, observations and fingerprints against docs/arena.md §A.1/A.2."""

from __future__ import annotations

import pytest

from rftlab.envs.arena.world import (
    ARENA_VERSION,
    GENERATOR_VERSION,
    check_invariants,
    generate_mechanics_state,
    generate_state,
    observation_for,
    state_fingerprint,
)

# Appendix A.1: node -> (neighbors, owner, value, critical, fortification, exposed, compromised), index order.
SEED0_NODES = [
    ("V59", "V37 V48 V63", "NEUTRAL", 3, True, 0, False, False),
    ("V63", "V15 V59", "BLUE", 3, True, 0, True, False),
    ("V15", "V43 V63", "RED", 3, False, 0, True, False),
    ("V43", "V15 V48 V75", "BLUE", 2, False, 1, False, False),
    ("V75", "V43 V72", "NEUTRAL", 2, False, 0, False, False),
    ("V72", "V61 V75 V84", "BLUE", 1, False, 0, True, False),
    ("V61", "V37 V48 V72", "RED", 3, False, 0, False, False),
    ("V48", "V43 V59 V61 V71", "NEUTRAL", 2, False, 0, False, False),
    ("V71", "V48 V55", "BLUE", 2, False, 0, False, False),
    ("V55", "V71 V84", "RED", 3, False, 1, False, False),
    ("V84", "V37 V55 V72", "RED", 1, False, 1, False, False),
    ("V37", "V59 V61 V84", "NEUTRAL", 2, False, 0, False, False),
]
SEED0_AGENTS = {
    "blue-0": ("V71", 3, {"V48", "V71"}),
    "blue-1": ("V72", 2, {"V72", "V75", "V84"}),
    "blue-2": ("V43", 2, {"V43", "V48", "V75"}),
    "blue-3": ("V63", 2, {"V15", "V59", "V63"}),
    "red-0": ("V84", 3, {"V72", "V84"}),
    "red-1": ("V55", 1, {"V55", "V84"}),
    "red-2": ("V15", 2, {"V15", "V63"}),
    "red-3": ("V61", 3, {"V48", "V61"}),
}


def test_version_strings():
    assert ARENA_VERSION == "arena-core-v1"
    assert GENERATOR_VERSION == "arena-gen-v1"


def test_seed0_nodes_in_index_order():
    state = generate_state(0, 12)
    assert list(state.nodes) == [row[0] for row in SEED0_NODES]
    for nid, neighbors, owner, value, critical, fort, exposed, compromised in SEED0_NODES:
        node = state.nodes[nid]
        assert node.neighbors == tuple(neighbors.split())
        assert (node.owner, node.value, node.critical) == (owner, value, critical)
        assert (node.fortification, node.exposed, node.compromised) == (fort, exposed, compromised)


def test_seed0_agents_and_knowledge():
    state = generate_state(0, 12)
    assert list(state.agents) == list(SEED0_AGENTS)
    for agent_id, (position, resource, known) in SEED0_AGENTS.items():
        agent = state.agents[agent_id]
        assert (agent.position, agent.resource) == (position, resource)
        assert set(state.knowledge[agent_id]) == known
        assert all(obs.observed_turn == 0 for obs in state.knowledge[agent_id].values())


@pytest.mark.parametrize(
    ("seed", "size", "fingerprint"),
    [
        (0, 12, "c78728229b5a83897d402b58885c2220577290596e4fa726b8f68fa7fad835fa"),
        (1000003, 12, "2010d4491e3374562b0e9270de5514667422ed1b6d101b44edf896d564e3d4c1"),
        (1008086, 14, "49c018b11de8ef3d2be34f185b16405575413d30800fa407b84dc610cef1b477"),
    ],
)
def test_state_fingerprints(seed, size, fingerprint):
    assert state_fingerprint(generate_state(seed, size)) == fingerprint


@pytest.mark.parametrize("size", [10, 12, 13, 14, 16])
def test_generation_invariants(size):
    for seed in range(40):
        state = generate_state(seed, size)
        check_invariants(state)
        degrees = [len(node.neighbors) for node in state.nodes.values()]
        assert min(degrees) >= 2 and max(degrees) <= 4
        assert sum(degrees) == 2 * (size + max(2, size // 3))
        for team in ("BLUE", "RED"):
            owned = sorted(nid for nid, node in state.nodes.items() if node.owner == team)
            assert len(owned) == 4
            assert sorted(a.position for a in state.agents.values() if a.team == team) == owned
        assert sum(node.critical for node in state.nodes.values()) == 2


def test_generation_is_deterministic_and_rejects_small_graphs():
    assert state_fingerprint(generate_state(7, 13)) == state_fingerprint(generate_state(7, 13))
    assert state_fingerprint(generate_state(7, 13)) != state_fingerprint(generate_state(8, 13))
    with pytest.raises(ValueError, match="size"):
        generate_state(0, 9)


def test_observation_shape_seed0():
    state = generate_state(0, 12)
    obs = observation_for(state, "blue-1")
    assert obs["turn"] == 0
    assert obs["self"] == {"id": "blue-1", "team": "BLUE", "position": "V72", "resource": 2}
    assert [o["node"] for o in obs["known_nodes"]] == ["V72", "V75", "V84"]
    assert obs["known_nodes"][2] == {
        "node": "V84",
        "owner": "RED",
        "status": "FORTIFIED",
        "value": 1,
        "critical": False,
        "observed_turn": 0,
    }
    assert obs["unknown_neighbors"] == ["V61"]
    assert obs["adjacent_teammates"] == []  # no teammate on a neighbour of V72
    obs0 = observation_for(state, "blue-2")  # V43 neighbours V15 V48 V75; blue-3 on V63 is not adjacent
    assert obs0["adjacent_teammates"] == []
    assert obs0["unknown_neighbors"] == ["V15"]


@pytest.mark.parametrize("skill", ["WAIT", "SCAN", "TRANSFER", "SILENCE"])
def test_mechanics_states(skill):
    state = generate_mechanics_state(5_000_000, skill)
    actor = state.agents["blue-0"]
    home = state.nodes[actor.position]
    assert home.owner == "BLUE" and not home.compromised and not home.exposed
    assert home.fortification == (0 if skill == "SILENCE" else 2)
    assert actor.resource == (2 if skill == "TRANSFER" else 0)
    known = set(state.knowledge["blue-0"])
    if skill in ("WAIT", "SILENCE"):
        assert known == {home.id, *home.neighbors}
    elif skill == "SCAN":
        assert known == {home.id, *home.neighbors} - {sorted(home.neighbors)[0]}
    else:
        landing = sorted(home.neighbors)[0]
        assert known == {home.id}
        assert state.agents["blue-1"].position == landing and state.agents["blue-1"].resource == 0
        assert state.nodes[landing].compromised and state.nodes[landing].owner == "BLUE"
        assert set(state.knowledge["blue-1"]) == {landing}
    with pytest.raises(ValueError, match="skill"):
        generate_mechanics_state(0, "PROBE")
