"""Arena world: the graph state, its seeded generator, observations, knowledge and fingerprints.

Mechanics follow ``docs/arena.md`` §2 (``arena-core-v1`` / ``arena-gen-v1``). Everything here is pure:
a seed in, the same state out, with the RNG calls in exactly the upstream order (§2.2).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

ARENA_VERSION = "arena-core-v1"
GENERATOR_VERSION = "arena-gen-v1"

BLUE, RED, NEUTRAL = "BLUE", "RED", "NEUTRAL"
TEAMS: tuple[str, str] = (BLUE, RED)
OWNERS = frozenset({BLUE, RED, NEUTRAL})
SECURE, FORTIFIED, EXPOSED, COMPROMISED = "SECURE", "FORTIFIED", "EXPOSED", "COMPROMISED"
STATUSES = frozenset({SECURE, FORTIFIED, EXPOSED, COMPROMISED})
AGENTS_PER_TEAM = 4
MAX_RESOURCE = 4
MAX_FORTIFICATION = 2
AGENT_IDS: tuple[str, ...] = tuple(f"{t.lower()}-{k}" for t in TEAMS for k in range(AGENTS_PER_TEAM))

# Targeted-mechanics skills (§2.2 / §9.3).
MECHANIC_SKILLS = ("WAIT", "SCAN", "TRANSFER", "SILENCE")


def opponent(team: str) -> str:
    """The other team (BLUE <-> RED)."""
    if team == BLUE:
        return RED
    if team == RED:
        return BLUE
    raise ValueError(f"team must be {BLUE!r} or {RED!r}, got {team!r}")


def team_agent_ids(team: str) -> tuple[str, ...]:
    """The four agent ids of ``team`` in sorted order (``blue-0..3`` or ``red-0..3``)."""
    opponent(team)  # validates
    return tuple(f"{team.lower()}-{k}" for k in range(AGENTS_PER_TEAM))


def compact_json(value: object) -> str:
    """The spec's canonical JSON: sorted keys, no spaces, ASCII escaping."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Observation(NamedTuple):
    """What an agent believes about one node, stamped with the turn it was observed (immutable)."""

    node: str
    owner: str
    status: str
    value: int
    critical: bool
    observed_turn: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "owner": self.owner,
            "status": self.status,
            "value": self.value,
            "critical": self.critical,
            "observed_turn": self.observed_turn,
        }


@dataclass
class Node:
    """One graph node: owner, value, critical flag and its defensive condition."""

    id: str
    neighbors: tuple[str, ...]
    owner: str
    value: int
    critical: bool
    fortification: int = 0
    exposed: bool = False
    compromised: bool = False

    @property
    def status(self) -> str:
        """COMPROMISED > EXPOSED > FORTIFIED > SECURE (§2.1)."""
        if self.compromised:
            return COMPROMISED
        if self.exposed:
            return EXPOSED
        if self.fortification > 0:
            return FORTIFIED
        return SECURE

    @property
    def weight(self) -> float:
        """``w(n) = value + [critical]`` as a float (§5.1)."""
        return float(self.value + (1 if self.critical else 0))

    def copy(self) -> Node:
        return Node(
            self.id,
            self.neighbors,
            self.owner,
            self.value,
            self.critical,
            self.fortification,
            self.exposed,
            self.compromised,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "neighbors": list(self.neighbors),
            "owner": self.owner,
            "value": self.value,
            "critical": self.critical,
            "fortification": self.fortification,
            "exposed": self.exposed,
            "compromised": self.compromised,
        }


@dataclass
class Agent:
    """One agent: its team, the node it stands on and its resource (0..4)."""

    id: str
    team: str
    position: str
    resource: int

    def copy(self) -> Agent:
        return Agent(self.id, self.team, self.position, self.resource)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "team": self.team, "position": self.position, "resource": self.resource}


@dataclass
class GameState:
    """The full arena state. ``nodes`` keeps generation index order; ``agents`` is blue-0..3, red-0..3."""

    turn: int
    nodes: dict[str, Node]
    agents: dict[str, Agent]
    knowledge: dict[str, dict[str, Observation]] = field(default_factory=dict)

    def copy(self) -> GameState:
        """A deep copy (observations are immutable, so knowledge dicts are copied one level deep)."""
        return GameState(
            self.turn,
            {nid: node.copy() for nid, node in self.nodes.items()},
            {aid: agent.copy() for aid, agent in self.agents.items()},
            {aid: dict(known) for aid, known in self.knowledge.items()},
        )

    def observe(self, node_id: str, turn: int | None = None) -> Observation:
        """A fresh observation of ``node_id`` stamped ``turn`` (default: the current turn)."""
        node = self.nodes[node_id]
        stamp = self.turn if turn is None else turn
        return Observation(node.id, node.owner, node.status, node.value, node.critical, stamp)

    def to_dict(self) -> dict[str, Any]:
        """The fingerprinted form (§A.2)."""
        return {
            "turn": self.turn,
            "nodes": {nid: node.to_dict() for nid, node in self.nodes.items()},
            "agents": {aid: agent.to_dict() for aid, agent in self.agents.items()},
            "knowledge": {
                aid: {nid: obs.to_dict() for nid, obs in known.items()}
                for aid, known in self.knowledge.items()
            },
        }


def state_fingerprint(state: GameState) -> str:
    """``sha256(compact_json(state_dict))`` (docs/arena.md §A.2)."""
    return sha256_hex(compact_json(state.to_dict()))


def check_invariants(state: GameState) -> None:
    """Raise ``ValueError`` naming the broken invariant of §2.1."""
    for nid, node in state.nodes.items():
        if nid in node.neighbors:
            raise ValueError(f"node {nid} has a self-loop")
        for other in node.neighbors:
            if nid not in state.nodes[other].neighbors:
                raise ValueError(f"edge {nid}-{other} is not symmetric")
        if node.owner not in OWNERS:
            raise ValueError(f"node {nid} has unknown owner {node.owner!r}")
        if node.owner == NEUTRAL and node.compromised:
            raise ValueError(f"neutral node {nid} is compromised")
        if node.exposed and node.fortification > 0:
            raise ValueError(f"node {nid} is exposed while fortified")
        if not 0 <= node.fortification <= MAX_FORTIFICATION:
            raise ValueError(f"node {nid} has fortification {node.fortification}")
    for team in TEAMS:
        members = [a for a in state.agents.values() if a.team == team]
        if len(members) != AGENTS_PER_TEAM:
            raise ValueError(f"team {team} has {len(members)} agents, expected {AGENTS_PER_TEAM}")
    for aid, agent in state.agents.items():
        if agent.position not in state.nodes:
            raise ValueError(f"agent {aid} stands on unknown node {agent.position}")
        if not 0 <= agent.resource <= MAX_RESOURCE:
            raise ValueError(f"agent {aid} has resource {agent.resource}")
        if agent.position not in state.knowledge.get(aid, {}):
            raise ValueError(f"agent {aid} does not know its own position {agent.position}")


def generate_state(seed: int, size: int = 12) -> GameState:
    """The turn-0 state for ``seed`` (``arena-gen-v1``), with the RNG calls in the order of docs/arena.md §2.2."""
    if size < 10:
        raise ValueError(f"size must be >= 10, got {size}")
    rng = random.Random(seed)
    ids = [f"V{x:02d}" for x in rng.sample(range(10, 100), size)]  # 1

    ring = {(i, i + 1) for i in range(size - 1)} | {(0, size - 1)}
    candidates = [
        (left, right) for left in range(size) for right in range(left + 1, size) if (left, right) not in ring
    ]
    rng.shuffle(candidates)  # 2
    degree = [2] * size
    chords: list[tuple[int, int]] = []
    extra = max(2, size // 3)
    for left, right in candidates:
        if len(chords) >= extra:
            break
        if degree[left] < 4 and degree[right] < 4:
            chords.append((left, right))
            degree[left] += 1
            degree[right] += 1
    adjacency: list[set[int]] = [set() for _ in range(size)]
    for left, right in sorted(ring) + chords:
        adjacency[left].add(right)
        adjacency[right].add(left)

    owner_slots = [BLUE, RED] * AGENTS_PER_TEAM + [NEUTRAL] * (size - 2 * AGENTS_PER_TEAM)
    rng.shuffle(owner_slots)  # 3
    values = [rng.randint(1, 3) for _ in range(size)]  # 4
    critical_indices = set(sorted(range(size), key=lambda i: (-values[i], i))[:2])

    nodes: dict[str, Node] = {}
    for i in range(size):  # 5
        fortification, exposed, compromised = 0, False, False
        if owner_slots[i] != NEUTRAL:
            fortification = rng.choice((0, 0, 1))
            if fortification == 0:
                exposed = rng.random() < 0.28
            if not exposed:
                compromised = rng.random() < 0.12
        nodes[ids[i]] = Node(
            id=ids[i],
            neighbors=tuple(sorted(ids[j] for j in adjacency[i])),
            owner=owner_slots[i],
            value=values[i],
            critical=i in critical_indices,
            fortification=fortification,
            exposed=exposed,
            compromised=compromised,
        )

    agents: dict[str, Agent] = {}
    for team in TEAMS:  # 6
        positions = sorted(nid for nid, node in nodes.items() if node.owner == team)
        rng.shuffle(positions)
        for k in range(AGENTS_PER_TEAM):
            agent_id = f"{team.lower()}-{k}"
            agents[agent_id] = Agent(agent_id, team, positions[k], rng.randint(1, 3))

    state = GameState(turn=0, nodes=nodes, agents=agents, knowledge={})
    for agent_id, agent in agents.items():  # 7
        adjacent = list(nodes[agent.position].neighbors)
        rng.shuffle(adjacent)
        count = rng.randint(1, min(2, len(adjacent)))
        known = [agent.position] + adjacent[:count]
        state.knowledge[agent_id] = {nid: state.observe(nid, 0) for nid in known}
    check_invariants(state)
    return state


def generate_mechanics_state(seed: int, skill: str) -> GameState:
    """A targeted SFT state (§2.2, §9.3): ``generate_state(seed)`` edited so one mechanic is isolated."""
    if skill not in MECHANIC_SKILLS:
        raise ValueError(f"skill must be one of {MECHANIC_SKILLS}, got {skill!r}")
    state = generate_state(seed)
    actor = state.agents["blue-0"]
    home = state.nodes[actor.position]
    home.owner, home.compromised, home.exposed, home.fortification = BLUE, False, False, 2
    actor.resource = 2 if skill == "TRANSFER" else 0
    if skill == "SILENCE":
        for nid in (home.id, *home.neighbors):
            node = state.nodes[nid]
            node.owner, node.critical, node.compromised, node.exposed, node.fortification = (
                BLUE,
                False,
                False,
                False,
                0,
            )
    if skill in ("WAIT", "SILENCE"):
        state.knowledge[actor.id] = {nid: state.observe(nid, 0) for nid in (home.id, *home.neighbors)}
    elif skill == "SCAN":
        unknown = sorted(home.neighbors)[0]
        state.knowledge[actor.id] = {
            nid: state.observe(nid, 0) for nid in (home.id, *home.neighbors) if nid != unknown
        }
    else:  # TRANSFER
        helper = state.agents["blue-1"]
        landing = state.nodes[sorted(home.neighbors)[0]]
        helper.position, helper.resource = landing.id, 0
        landing.owner, landing.compromised, landing.exposed, landing.fortification = BLUE, True, False, 0
        state.knowledge[actor.id] = {home.id: state.observe(home.id, 0)}
        state.knowledge[helper.id] = {landing.id: state.observe(landing.id, 0)}
    check_invariants(state)
    return state


def observation_for(state: GameState, agent_id: str) -> dict[str, Any]:
    """The agent's private observation (§2.3): itself, its known nodes, adjacent teammates, unknown neighbours."""
    if agent_id not in state.agents:
        raise KeyError(f"unknown agent {agent_id!r}; expected one of {list(state.agents)}")
    agent = state.agents[agent_id]
    known = state.knowledge[agent_id]
    neighbors = state.nodes[agent.position].neighbors
    teammates = sorted(
        (
            a
            for a in state.agents.values()
            if a.team == agent.team and a.id != agent_id and a.position in neighbors
        ),
        key=lambda a: a.id,
    )
    return {
        "turn": state.turn,
        "self": agent.to_dict(),
        "known_nodes": [known[nid].to_dict() for nid in sorted(known)],
        "adjacent_teammates": [
            {"id": a.id, "position": a.position, "resource": a.resource} for a in teammates
        ],
        "unknown_neighbors": sorted(nid for nid in neighbors if nid not in known),
    }


def refresh_knowledge(state: GameState) -> None:
    """Every agent re-observes its position and its already-known neighbours, stamped ``state.turn`` (§2.4)."""
    for agent_id, agent in state.agents.items():
        known = state.knowledge.setdefault(agent_id, {})
        known[agent.position] = state.observe(agent.position)
        for nid in state.nodes[agent.position].neighbors:
            if nid in known:
                known[nid] = state.observe(nid)


def build_state(
    nodes: list[dict[str, Any]],
    edges: list[tuple[str, str]],
    agents: list[tuple[str, str, int]],
    knowledge: Mapping[str, list[str]] | None = None,
    turn: int = 0,
) -> GameState:
    """A hand-built state for fixtures and tests.

    ``nodes``: dicts with ``id, owner, value`` and optional ``critical, fortification, exposed, compromised``
    (in index order). ``agents``: ``(agent_id, position, resource)``; the team is read from the id prefix.
    ``knowledge``: agent id -> node ids observed at ``turn``; agents not listed know every node. An agent
    always knows its own position.
    """
    adjacency: dict[str, set[str]] = {spec["id"]: set() for spec in nodes}
    for left, right in edges:
        adjacency[left].add(right)
        adjacency[right].add(left)
    built = {
        spec["id"]: Node(
            id=spec["id"],
            neighbors=tuple(sorted(adjacency[spec["id"]])),
            owner=spec["owner"],
            value=spec["value"],
            critical=spec.get("critical", False),
            fortification=spec.get("fortification", 0),
            exposed=spec.get("exposed", False),
            compromised=spec.get("compromised", False),
        )
        for spec in nodes
    }
    placed = {
        agent_id: Agent(agent_id, agent_id.split("-")[0].upper(), position, resource)
        for agent_id, position, resource in sorted(agents)
    }
    state = GameState(turn=turn, nodes=built, agents=placed, knowledge={})
    for agent_id, agent in placed.items():
        seen = list(built) if knowledge is None or agent_id not in knowledge else list(knowledge[agent_id])
        if agent.position not in seen:
            seen.append(agent.position)
        state.knowledge[agent_id] = {nid: state.observe(nid, turn) for nid in seen}
    check_invariants(state)
    return state
