"""Arena rules: actions, legality from the agent's own knowledge, costs and turn resolution (docs/arena.md §3-§4).

``step`` never mutates its input: it resolves a joint action on a copy, in the fixed order
validate -> record values -> pay costs -> transfers -> recover/fortify -> scan/probe collection ->
probe resolution -> contested captures -> refresh knowledge -> rewards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .reward import SCAN_BONUS, team_reward, team_value
from .world import (
    COMPROMISED,
    EXPOSED,
    MAX_FORTIFICATION,
    MAX_RESOURCE,
    SECURE,
    TEAMS,
    GameState,
    check_invariants,
    refresh_knowledge,
)

WAIT, SCAN, PROBE, CAPTURE, FORTIFY, RECOVER, TRANSFER = (
    "WAIT",
    "SCAN",
    "PROBE",
    "CAPTURE",
    "FORTIFY",
    "RECOVER",
    "TRANSFER",
)
ACTION_KINDS: tuple[str, ...] = (CAPTURE, FORTIFY, PROBE, RECOVER, SCAN, TRANSFER, WAIT)  # sorted
PAID_KINDS = frozenset({PROBE, CAPTURE, FORTIFY, RECOVER})
INVALID = "INVALID"


class Action(NamedTuple):
    """``(kind, target, amount)``. TRANSFER targets an agent id with amount 1; other targets are node ids.

    Tuples order by plain string comparison, so kinds sort alphabetically (§3).
    """

    kind: str
    target: str | None = None
    amount: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"type": kind}`` plus ``target`` / ``amount`` when set."""
        out: dict[str, Any] = {"type": self.kind}
        if self.target is not None:
            out["target"] = self.target
        if self.amount is not None:
            out["amount"] = self.amount
        return out

    @property
    def is_wait(self) -> bool:
        return self.kind == WAIT


WAIT_ACTION = Action(WAIT)


def action_from_dict(value: Mapping[str, Any]) -> Action:
    """Inverse of ``Action.to_dict`` for well-formed input (no validation of legality)."""
    return Action(value["type"], value.get("target"), value.get("amount"))


class Event(NamedTuple):
    """One resolution event: what an agent tried on which target, and how it ended."""

    kind: str
    agent: str
    target: str | None
    success: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


def legal_actions(state: GameState, agent_id: str) -> tuple[Action, ...]:
    """The agent's legal actions, sorted, decided from its own knowledge (§3)."""
    agent = state.agents[agent_id]
    known = state.knowledge[agent_id]
    resource = agent.resource
    neighbors = state.nodes[agent.position].neighbors
    actions = [WAIT_ACTION]
    for nid in neighbors:
        if nid not in known:
            actions.append(Action(SCAN, nid))
        elif resource >= 1 and known[nid].owner != agent.team:
            actions.append(Action(PROBE, nid))
            actions.append(Action(CAPTURE, nid))
    if resource >= 1:
        for nid in (agent.position, *neighbors):
            obs = known.get(nid)
            if obs is None or obs.owner != agent.team:
                continue
            if obs.status == COMPROMISED:
                actions.append(Action(RECOVER, nid))
            elif obs.status in (SECURE, EXPOSED):
                actions.append(Action(FORTIFY, nid))
        for other_id in sorted(state.agents):
            other = state.agents[other_id]
            if (
                other_id != agent_id
                and other.team == agent.team
                and other.position in neighbors
                and other.resource < MAX_RESOURCE
            ):
                actions.append(Action(TRANSFER, other_id, 1))
    return tuple(sorted(actions))


def legal_action_map(state: GameState) -> dict[str, tuple[Action, ...]]:
    """``legal_actions`` for every agent, keyed by sorted agent id."""
    return {agent_id: legal_actions(state, agent_id) for agent_id in sorted(state.agents)}


def duplicate_targets(actions: Mapping[str, Action], members: list[str]) -> tuple[str, ...]:
    """Sorted ``"KIND:target"`` strings used by >= 2 of ``members`` (non-WAIT). Reported only (§4 step 2)."""
    counts: dict[str, int] = {}
    for agent_id in members:
        action = actions[agent_id]
        if action.kind != WAIT:
            key = f"{action.kind}:{action.target}"
            counts[key] = counts.get(key, 0) + 1
    return tuple(sorted(key for key, count in counts.items() if count >= 2))


@dataclass(frozen=True)
class TurnResolution:
    """The outcome of one turn: the next state, both team rewards and the resolution record."""

    state: GameState
    rewards: dict[str, float]
    events: tuple[Event, ...]
    invalid_agents: tuple[str, ...]
    resolved_actions: dict[str, Action]
    duplicate_targets: dict[str, tuple[str, ...]]
    values_before: dict[str, float]
    values_after: dict[str, float]
    scan_bonus: dict[str, float] = field(default_factory=dict)


def _coerce(action: Any) -> Action | None:
    """Accept an ``Action``, ``None`` (= WAIT) or a JSON-form dict; anything else is malformed (``None``)."""
    if action is None:
        return WAIT_ACTION
    if isinstance(action, Action):
        return action
    if isinstance(action, Mapping) and isinstance(action.get("type"), str):
        try:
            return action_from_dict(action)
        except Exception:  # noqa: BLE001 - any malformed dict is simply an invalid action
            return None
    return None


def validate_joint_action(
    state: GameState, joint_actions: Mapping[str, Any]
) -> tuple[dict[str, Action], list[str], list[Event]]:
    """Step 1: resolve each agent's action (missing -> WAIT, illegal -> WAIT and recorded as invalid)."""
    unknown = sorted(set(joint_actions) - set(state.agents))
    if unknown:
        raise ValueError(
            f"joint action names unknown agents {unknown}; expected ids from {sorted(state.agents)}"
        )
    resolved: dict[str, Action] = {}
    invalid: list[str] = []
    events: list[Event] = []
    for agent_id in sorted(state.agents):
        raw = joint_actions.get(agent_id)
        action = _coerce(raw)
        if action is not None and action in legal_actions(state, agent_id):
            resolved[agent_id] = action
            continue
        invalid.append(agent_id)
        resolved[agent_id] = WAIT_ACTION
        target = action.target if action is not None else None
        kind = action.kind if action is not None else "MALFORMED"
        events.append(Event(INVALID, agent_id, target if isinstance(target, str) else None, False, str(kind)))
    return resolved, invalid, events


def _pay_and_transfer(nxt: GameState, order: list[str], resolved, events: list[Event]) -> None:
    """Steps 3–4 of §4: every paid action costs 1, then transfers in agent order (a full receiver refuses)."""
    agents = nxt.agents
    for agent_id in order:  # 3. costs
        if resolved[agent_id].kind in PAID_KINDS:
            agents[agent_id].resource -= 1
    for agent_id in order:  # 4. transfers
        action = resolved[agent_id]
        if action.kind != TRANSFER:
            continue
        receiver = agents[action.target]
        if receiver.resource >= MAX_RESOURCE:
            events.append(Event(TRANSFER, agent_id, action.target, False, "receiver_full"))
            continue
        agents[agent_id].resource -= 1
        receiver.resource += 1
        events.append(Event(TRANSFER, agent_id, action.target, True, "transferred"))


def _recover_and_fortify(nxt: GameState, order: list[str], resolved, events: list[Event]) -> None:
    """Step 5 of §4, in agent order."""
    for agent_id in order:
        action = resolved[agent_id]
        if action.kind == RECOVER:
            node = nxt.nodes[action.target]
            node.compromised = False
            node.exposed = False
            events.append(Event(RECOVER, agent_id, action.target, True, "recovered"))
        elif action.kind == FORTIFY:
            node = nxt.nodes[action.target]
            node.fortification = min(MAX_FORTIFICATION, node.fortification + 1)
            node.exposed = False
            events.append(Event(FORTIFY, agent_id, action.target, True, "fortified"))


def _scan_and_probe(
    state: GameState, nxt: GameState, order: list[str], team_of, resolved, events: list[Event]
) -> dict[str, float]:
    """Steps 6–7 of §4: scans (a bonus per newly known node) and probe resolution by target.
    Returns the scan bonus of each team."""
    scans = {team: 0.0 for team in TEAMS}
    probes: dict[str, list[str]] = {}
    for agent_id in order:  # 6. scan and probe collection
        action = resolved[agent_id]
        if action.kind == SCAN:
            known = nxt.knowledge[agent_id]
            was_unknown = action.target not in known
            known[action.target] = nxt.observe(action.target, state.turn)
            if was_unknown:
                scans[team_of[agent_id]] += SCAN_BONUS * 1.0
            events.append(Event(SCAN, agent_id, action.target, True, "scanned"))
        elif action.kind == PROBE:
            probes.setdefault(action.target, []).append(agent_id)

    for target in sorted(probes):  # 7. probe resolution
        node = nxt.nodes[target]
        valid = [a for a in probes[target] if team_of[a] != node.owner]
        for agent_id in probes[target]:
            if team_of[agent_id] == node.owner:
                events.append(Event(PROBE, agent_id, target, False, "owner_changed"))
        if not valid:
            continue
        shields = node.fortification
        node.fortification = max(0, shields - len(valid))
        node.exposed = len(valid) > shields
        for index, agent_id in enumerate(valid):
            detail = "exposed" if index >= shields else "fortification_reduced"
            events.append(Event(PROBE, agent_id, target, True, detail))
    return scans


def _capture(nxt: GameState, order: list[str], team_of, resolved, events: list[Event]) -> None:
    """Step 8 of §4: captures by target; contested when both teams attack the same node."""
    captures: dict[str, list[str]] = {}
    for agent_id in order:
        if resolved[agent_id].kind == CAPTURE:
            captures.setdefault(resolved[agent_id].target, []).append(agent_id)
    for target in sorted(captures):
        node = nxt.nodes[target]
        attackers = captures[target]
        teams = {team_of[a] for a in attackers}
        if len(teams) > 1:
            events.extend(Event(CAPTURE, a, target, False, "contested") for a in attackers)
            continue
        (team,) = teams
        if node.exposed and node.fortification == 0 and node.owner != team:
            node.owner = team
            node.exposed = False
            node.compromised = False
            for agent_id in attackers:
                nxt.agents[agent_id].position = target
            events.extend(Event(CAPTURE, a, target, True, "captured") for a in attackers)
        else:
            events.extend(Event(CAPTURE, a, target, False, "not_exposed") for a in attackers)


def step(state: GameState, joint_actions: Mapping[str, Any], *, check: bool = True) -> TurnResolution:
    """Resolve one simultaneous turn for all agents (§4). The input state is left untouched."""
    resolved, invalid, events = validate_joint_action(state, joint_actions)
    order = sorted(state.agents)
    team_of = {agent_id: state.agents[agent_id].team for agent_id in order}
    before = {team: team_value(state, team) for team in TEAMS}
    duplicates = {
        team: duplicate_targets(resolved, [a for a in order if team_of[a] == team]) for team in TEAMS
    }

    nxt = state.copy()
    _pay_and_transfer(nxt, order, resolved, events)
    _recover_and_fortify(nxt, order, resolved, events)
    scans = _scan_and_probe(state, nxt, order, team_of, resolved, events)
    _capture(nxt, order, team_of, resolved, events)

    nxt.turn = state.turn + 1  # 9. refresh
    refresh_knowledge(nxt)
    if check:
        check_invariants(nxt)

    after = {team: team_value(nxt, team) for team in TEAMS}  # 10. rewards
    invalid_counts = {team: sum(1 for a in invalid if team_of[a] == team) for team in TEAMS}
    rewards = {team: team_reward(before[team], after[team], scans, invalid_counts, team) for team in TEAMS}
    return TurnResolution(
        state=nxt,
        rewards=rewards,
        events=tuple(events),
        invalid_agents=tuple(invalid),
        resolved_actions=resolved,
        duplicate_targets=duplicates,
        values_before=before,
        values_after=after,
        scan_bonus=scans,
    )


def redundant_agents(state: GameState, joint_actions: Mapping[str, Any], team: str) -> tuple[str, ...]:
    """Leave-one-out redundancy (§5.4): ``team`` agents whose non-WAIT action could be a WAIT at no loss."""
    baseline = step(state, joint_actions, check=False)
    reference = baseline.rewards[team]
    redundant = []
    for agent_id in sorted(state.agents):
        if state.agents[agent_id].team != team or baseline.resolved_actions[agent_id].kind == WAIT:
            continue
        variant = dict(joint_actions)
        variant[agent_id] = WAIT_ACTION
        if step(state, variant, check=False).rewards[team] >= reference - 1e-12:
            redundant.append(agent_id)
    return tuple(redundant)
