"""Exact centralized oracle: every joint action of one team against the other team's fixed actions (docs/arena.md §7).

``solve_joint_action`` evaluates all combinations at once with numpy. Each resolution step of §4 is
applied to a ``[combination, node]`` / ``[combination, agent]`` array, in the same order and with the same
float operations as ``rules.step``, so every reward is bit-identical to stepping the state; the test suite
checks this against ``solve_joint_action_bruteforce`` (which literally calls ``step`` per combination).
The running optimum, tolerance and canonical tie-break are then applied in enumeration order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .reward import (
    COMPROMISED_PENALTY,
    EXPOSED_PENALTY,
    FORTIFICATION_BONUS,
    INVALID_ACTION_PENALTY,
    POTENTIAL_RATE,
    opportunity,
    scan_bonus_total,
    team_value,
)
from .rules import (
    CAPTURE,
    FORTIFY,
    PAID_KINDS,
    PROBE,
    RECOVER,
    SCAN,
    TRANSFER,
    WAIT,
    Action,
    legal_actions,
    step,
    validate_joint_action,
)
from .world import BLUE, MAX_FORTIFICATION, MAX_RESOURCE, NEUTRAL, RED, GameState, opponent, team_agent_ids

TIE_TOLERANCE = 1e-12
OPTIMAL_REGRET_TOLERANCE = 1e-9
DEFAULT_MAX_OPTIMA = 256

_KIND_CODE = {
    kind: code for code, kind in enumerate((WAIT, SCAN, PROBE, CAPTURE, FORTIFY, RECOVER, TRANSFER))
}
_OWNER_CODE = {BLUE: 0, RED: 1, NEUTRAL: 2}


@dataclass(frozen=True)
class JointSolution:
    """The oracle's answer for one state: best team reward, canonical optimum and every acceptable action."""

    team: str
    reward: float
    canonical_assignment: dict[str, Action]
    optimal_count: int
    action_options: dict[str, tuple[Action, ...]]
    explored: int
    optimal_assignments: tuple[dict[str, Action], ...] = field(default=())

    @property
    def unique(self) -> bool:
        return self.optimal_count == 1

    def acceptable(self, agent_id: str) -> tuple[Action, ...]:
        """The actions of ``agent_id`` that appear in at least one optimal joint action."""
        return self.action_options[agent_id]


def _canonical_key(combo: Sequence[Action]) -> tuple[int, tuple[Action, ...]]:
    return (sum(1 for action in combo if action.kind != WAIT), tuple(combo))


def select_optimum(
    rewards: Iterable[float],
    combos: Sequence[Sequence[Action]] | Any,
    members: Sequence[str],
    team: str,
    explored: int,
    max_optima: int = DEFAULT_MAX_OPTIMA,
) -> JointSolution:
    """Apply the running optimum of §7 to rewards listed in enumeration order.

    ``combos[i]`` is the joint action (tuple of actions in member order) of ``rewards[i]``; it may be any
    indexable (a lazy accessor is fine), since only the optimal cluster is ever materialised.
    """
    best = -math.inf
    cluster: list[int] = []
    for index, reward in enumerate(rewards):
        if reward > best + TIE_TOLERANCE:
            best = reward
            cluster = [index]
        elif abs(reward - best) <= TIE_TOLERANCE:
            cluster.append(index)
    if not cluster:
        raise ValueError("no joint action was evaluated")
    optima = [tuple(combos[i]) for i in cluster]
    canonical = min(optima, key=_canonical_key)
    options: dict[str, set[Action]] = {agent_id: set() for agent_id in members}
    for combo in optima:
        for agent_id, action in zip(members, combo, strict=True):
            options[agent_id].add(action)
    return JointSolution(
        team=team,
        reward=best,
        canonical_assignment=dict(zip(members, canonical, strict=True)),
        optimal_count=len(optima),
        action_options={agent_id: tuple(sorted(acts)) for agent_id, acts in options.items()},
        explored=explored,
        optimal_assignments=tuple(dict(zip(members, combo, strict=True)) for combo in optima[:max_optima]),
    )


def _members_and_legal(state: GameState, team: str) -> tuple[list[str], list[tuple[Action, ...]]]:
    members = list(team_agent_ids(team))
    return members, [legal_actions(state, agent_id) for agent_id in members]


def solve_joint_action_bruteforce(
    state: GameState,
    team: str = BLUE,
    opponent_actions: Mapping[str, Any] | None = None,
    max_optima: int = DEFAULT_MAX_OPTIMA,
) -> JointSolution:
    """Reference solver: ``itertools.product`` over sorted legal lists, one full ``step`` per combination."""
    opponent_actions = dict(opponent_actions or {})
    members, legal = _members_and_legal(state, team)
    combos = list(itertools.product(*legal))
    rewards = []
    for combo in combos:
        joint = dict(opponent_actions)
        joint.update(zip(members, combo, strict=True))
        rewards.append(step(state, joint, check=False).rewards[team])
    return select_optimum(rewards, combos, members, team, len(combos), max_optima)


class _LazyCombos:
    """Joint action ``i`` of the product enumeration, rebuilt from the per-member index arrays."""

    def __init__(self, legal: list[tuple[Action, ...]], index: np.ndarray):
        self.legal = legal
        self.index = index

    def __getitem__(self, i: int) -> tuple[Action, ...]:
        return tuple(self.legal[k][j] for k, j in enumerate(self.index[i].tolist()))


@dataclass
class _Combinations:
    """Every joint action of one team as arrays over combinations (``[agent, combination]``)."""

    order: list[str]  # agent ids, sorted
    node_index: dict[str, int]
    rows: np.ndarray  # arange(count)
    team_code: np.ndarray  # [agent] owner code of the agent's team
    kind: np.ndarray  # [agent, combination] kind codes
    node_target: np.ndarray  # [agent, combination] node index (0 when the action has none)
    agent_target: np.ndarray  # [agent, combination] agent index (0 unless TRANSFER)
    choices_of: dict[str, list[Action]]


def _target(action: Action) -> str:
    """The target of a SCAN, CAPTURE or TRANSFER action (every legal one has a target)."""
    if action.target is None:
        raise ValueError(f"a {action.kind} action without a target")
    return action.target


def _enumerate_actions(
    state: GameState, members: Sequence[str], legal: Sequence[tuple[Action, ...]], choice: np.ndarray, fixed
) -> _Combinations:
    """Per-agent action arrays: members pick from their legal lists by ``choice``; everyone else plays
    their resolved fixed action in every combination."""
    count = choice.shape[0]
    order = sorted(state.agents)
    agent_index = {agent_id: i for i, agent_id in enumerate(order)}
    node_index = {nid: j for j, nid in enumerate(state.nodes)}
    n_agents = len(order)
    kind = np.zeros((n_agents, count), dtype=np.int8)
    node_target = np.zeros((n_agents, count), dtype=np.int64)
    agent_target = np.zeros((n_agents, count), dtype=np.int64)
    choices_of: dict[str, list[Action]] = {}
    member_slot = {agent_id: k for k, agent_id in enumerate(members)}
    for agent_id in order:
        i = agent_index[agent_id]
        if agent_id in member_slot:
            table = legal[member_slot[agent_id]]
            pick = choice[:, member_slot[agent_id]]
        else:
            table = (fixed[agent_id],)
            pick = np.zeros(count, dtype=np.int64)
        choices_of[agent_id] = list(table)
        kind[i] = np.array([_KIND_CODE[a.kind] for a in table], dtype=np.int8)[pick]
        node_target[i] = np.array(
            [node_index[a.target] if a.target in node_index and a.kind != TRANSFER else 0 for a in table]
        )[pick]
        receivers = [agent_index[_target(a)] if a.kind == TRANSFER else 0 for a in table]
        agent_target[i] = np.array(receivers)[pick]
    team_code = np.array([_OWNER_CODE[state.agents[a].team] for a in order])
    return _Combinations(
        order, node_index, np.arange(count), team_code, kind, node_target, agent_target, choices_of
    )


def _pay_and_transfer(state: GameState, combos: _Combinations) -> np.ndarray:
    """Steps 3–4 of §4: action costs, then transfers in agent order. ``[combination, agent]`` resources."""
    code, kind, rows = _KIND_CODE, combos.kind, combos.rows
    resource = np.tile(
        np.array([state.agents[a].resource for a in combos.order], dtype=np.int64), (rows.size, 1)
    )
    paid = np.isin(kind, [code[k] for k in PAID_KINDS])
    resource -= paid.T.astype(np.int64)  # 3. costs
    for i in range(len(combos.order)):  # 4. transfers, agent order
        moving = kind[i] == code[TRANSFER]
        if not moving.any():
            continue
        receiver = combos.agent_target[i]
        ok = moving & (resource[rows, receiver] < MAX_RESOURCE)
        resource[:, i] -= ok
        resource[rows, receiver] += ok
    return resource


def _resolve_nodes(state: GameState, team: str, combos: _Combinations):
    """Steps 5–8 of §4 over combinations: recover/fortify, scans, probes, captures (contested when both
    teams attack) and the capturers' moves. Returns ``(scan_count, owner, fort, exposed, compromised,
    position)``."""
    code, kind, rows, node_target = _KIND_CODE, combos.kind, combos.rows, combos.node_target
    count, n_nodes, n_agents = rows.size, len(state.nodes), len(combos.order)
    nodes = list(state.nodes.values())
    fort = np.tile(np.array([n.fortification for n in nodes], dtype=np.int64), (count, 1))
    exposed = np.tile(np.array([n.exposed for n in nodes], dtype=bool), (count, 1))
    compromised = np.tile(np.array([n.compromised for n in nodes], dtype=bool), (count, 1))
    owner0 = np.array([_OWNER_CODE[n.owner] for n in nodes], dtype=np.int64)

    for i in range(n_agents):  # 5. recover / fortify, agent order
        t = node_target[i]
        rec = kind[i] == code[RECOVER]
        if rec.any():
            compromised[rows[rec], t[rec]] = False
            exposed[rows[rec], t[rec]] = False
        fo = kind[i] == code[FORTIFY]
        if fo.any():
            fort[rows[fo], t[fo]] = np.minimum(MAX_FORTIFICATION, fort[rows[fo], t[fo]] + 1)
            exposed[rows[fo], t[fo]] = False

    scan_count = {BLUE: np.zeros(count, dtype=np.int64), RED: np.zeros(count, dtype=np.int64)}
    valid_probes = np.zeros((count, n_nodes), dtype=np.int64)
    attackers = {0: np.zeros((count, n_nodes), dtype=np.int64), 1: np.zeros((count, n_nodes), dtype=np.int64)}
    for i, agent_id in enumerate(combos.order):  # 6. scans; probe and capture collection
        t = node_target[i]
        scan_count[state.agents[agent_id].team] += kind[i] == code[SCAN]
        valid_probes[rows, t] += (kind[i] == code[PROBE]) & (owner0[t] != combos.team_code[i])
        attackers[combos.team_code[i]][rows, t] += kind[i] == code[CAPTURE]
    probed = valid_probes > 0  # 7. probe resolution
    shields = fort
    fort = np.where(probed, np.maximum(0, shields - valid_probes), shields)
    exposed = np.where(probed, valid_probes > shields, exposed)
    owner = np.tile(owner0, (count, 1))  # 8. captures (contested when both teams attack)
    success = {}
    for t_code in (0, 1):
        success[t_code] = (
            (attackers[t_code] > 0)
            & (attackers[1 - t_code] == 0)
            & exposed
            & (fort == 0)
            & (owner0 != t_code)
        )
        owner = np.where(success[t_code], t_code, owner)
    captured = success[0] | success[1]
    exposed &= ~captured
    compromised &= ~captured
    position = np.tile(
        np.array([combos.node_index[state.agents[a].position] for a in combos.order], dtype=np.int64),
        (count, 1),
    )
    for i in range(n_agents):
        t = node_target[i]
        moved = (kind[i] == code[CAPTURE]) & success[int(combos.team_code[i])][rows, t]
        position[:, i] = np.where(moved, t, position[:, i])
    return scan_count, owner, fort, exposed, compromised, position


def _node_value(state: GameState, team: str, owner, fort, exposed, compromised) -> np.ndarray:
    """Steps 9–10 of §4: the node part of the post-turn team value, accumulated exactly as
    ``reward.team_value`` does (node order, same float operations)."""
    own_code, enemy_code = _OWNER_CODE[team], _OWNER_CODE[opponent(team)]
    value = np.zeros(owner.shape[0])
    for j, node in enumerate(state.nodes.values()):
        weight = node.weight
        own = owner[:, j] == own_code
        enemy = owner[:, j] == enemy_code
        value = np.where(own, value + weight, np.where(enemy, value - weight, value))
        shield_bonus = FORTIFICATION_BONUS * fort[:, j]
        value = np.where(own, value + shield_bonus, np.where(enemy, value - shield_bonus, value))
        ex = exposed[:, j]
        value = np.where(
            own & ex,
            value - EXPOSED_PENALTY * weight,
            np.where(enemy & ex, value + EXPOSED_PENALTY * weight, value),
        )
        co = compromised[:, j]
        value = np.where(
            own & co,
            value - COMPROMISED_PENALTY * weight,
            np.where(enemy & co, value + COMPROMISED_PENALTY * weight, value),
        )
    return value


def joint_action_rewards(
    state: GameState, team: str = BLUE, opponent_actions: Mapping[str, Any] | None = None
) -> tuple[np.ndarray, np.ndarray, list[tuple[Action, ...]]]:
    """``R_team`` of every joint action of ``team`` (enumeration order), vectorised over combinations.

    Returns ``(rewards_C, choice_CxM, legal)``: ``choice[c, k]`` indexes member ``k``'s sorted legal list.
    """
    other = opponent(team)
    members, legal = _members_and_legal(state, team)
    sizes = [len(actions) for actions in legal]
    choice = np.stack(np.unravel_index(np.arange(math.prod(sizes)), sizes), axis=1)  # == itertools.product

    # Validation and pre-turn values are the same for every combination (§7 implementation note).
    fixed = {
        agent_id: action for agent_id, action in (opponent_actions or {}).items() if agent_id not in members
    }
    resolved_fixed, invalid, _ = validate_joint_action(state, fixed)
    invalid_other = sum(1 for a in invalid if state.agents[a].team == other)
    value_before = team_value(state, team)

    combos = _enumerate_actions(state, members, legal, choice, resolved_fixed)
    resource = _pay_and_transfer(state, combos)
    scan_count, owner, fort, exposed, compromised, position = _resolve_nodes(state, team, combos)
    value = _node_value(state, team, owner, fort, exposed, compromised)
    after = _PostTurn(
        combos.order,
        combos.choices_of,
        combos.kind,
        combos.node_target,
        position,
        resource,
        owner,
        fort,
        exposed,
        compromised,
    )
    own_code, enemy_code = _OWNER_CODE[team], _OWNER_CODE[other]
    potential = {t_code: _potential(state, t_code, after, combos.node_index) for t_code in (0, 1)}
    value = value + (potential[own_code] - potential[enemy_code])

    scan_bonus = np.array([scan_bonus_total(k) for k in range(len(combos.order) + 1)])  # S for k scanners
    invalid_own = 0  # the enumerated team only plays actions from its legal lists
    reward = value - value_before
    reward = reward + scan_bonus[scan_count[team]]
    reward = reward - scan_bonus[scan_count[other]]
    reward = reward - INVALID_ACTION_PENALTY * invalid_own
    reward = reward + INVALID_ACTION_PENALTY * invalid_other
    return reward, choice, legal


@dataclass(frozen=True)
class _PostTurn:
    """Post-turn arrays over combinations: actions, positions, resources and node conditions."""

    order: list[str]
    choices_of: dict[str, list[Action]]
    kind: np.ndarray  # [agent, combination] kind codes
    node_target: np.ndarray  # [agent, combination] node index (0 when the action has none)
    position: np.ndarray  # [combination, agent] node index after captures
    resource: np.ndarray  # [combination, agent]
    owner: np.ndarray  # [combination, node] owner codes
    fort: np.ndarray
    exposed: np.ndarray
    compromised: np.ndarray


def _potential(state: GameState, t_code: int, after: _PostTurn, node_index: dict[str, int]) -> np.ndarray:
    """``Pot`` of team ``t_code`` after the turn, from each agent's refreshed (and partly stale) knowledge."""
    nodes = list(state.nodes.values())
    owner, compromised, exposed = after.owner, after.compromised, after.exposed
    count = owner.shape[0]
    value = np.array([n.value for n in nodes], dtype=np.int64)
    critical = np.array([n.critical for n in nodes], dtype=bool)
    adjacency = np.zeros((len(nodes), len(nodes)), dtype=bool)
    for j, node in enumerate(nodes):
        for nid in node.neighbors:
            adjacency[j, node_index[nid]] = True
    # Fresh opportunity of every node for this team, per combination (§5.1 opp_X on the post-turn status).
    mine = owner == t_code
    fresh = np.where(
        mine & compromised,
        3 + value,
        np.where(
            ~mine & ~compromised & exposed,
            3 + value,
            np.where(~mine, 2 + value, np.where(critical, 1 + value, 0)),
        ),
    )
    team = BLUE if t_code == 0 else RED
    total = np.zeros(count)
    for i, agent_id in enumerate(after.order):
        if state.agents[agent_id].team != team:
            continue
        known_before = state.knowledge[agent_id]
        candidates = {node_index[nid] for nid in known_before}
        candidates |= {
            node_index[_target(a)] for a in after.choices_of[agent_id] if a.kind in (SCAN, CAPTURE)
        }
        scanned = np.where(after.kind[i] == _KIND_CODE[SCAN], after.node_target[i], -1)
        pos = after.position[:, i]
        best = np.zeros(count, dtype=np.int64)
        for j in sorted(candidates):
            node_id = nodes[j].id
            stale_known = node_id in known_before
            at = pos == j
            known_after = at | (scanned == j) | stale_known
            refreshed = at | (adjacency[pos, j] & known_after)
            stale = opportunity(known_before[node_id], team) if stale_known else 0
            opp = np.where(refreshed, fresh[:, j], stale)
            opp = np.where(known_after, opp, 0)
            best = np.maximum(best, opp)
        total = np.where(after.resource[:, i] > 0, total + POTENTIAL_RATE * np.maximum(0, best), total)
    return total


def solve_joint_action(
    state: GameState,
    team: str = BLUE,
    opponent_actions: Mapping[str, Any] | None = None,
    max_optima: int = DEFAULT_MAX_OPTIMA,
) -> JointSolution:
    """The exact oracle of §7: best ``R_team`` over all joint actions, canonical optimum, acceptable sets."""
    members = list(team_agent_ids(team))
    rewards, choice, legal = joint_action_rewards(state, team, opponent_actions)
    return select_optimum(
        rewards.tolist(), _LazyCombos(legal, choice), members, team, len(rewards), max_optima
    )


def joint_reward(state: GameState, joint_actions: Mapping[str, Any], team: str = BLUE) -> float:
    """``R_team`` of one realized joint action (a full ``step``)."""
    return step(state, joint_actions, check=False).rewards[team]


def oracle_regret(
    solution: JointSolution,
    state: GameState,
    team_actions: Mapping[str, Any],
    opponent_actions: Mapping[str, Any],
) -> float:
    """``solution.reward - R_team(step(state, opponent U team_actions))`` (>= 0 up to tolerance)."""
    joint = dict(opponent_actions)
    joint.update(team_actions)
    return solution.reward - joint_reward(state, joint, solution.team)


def optimal_outcome(regret: float, strict_team_protocol: bool = True) -> bool:
    """§7: all four action replies parsed strictly and ``regret <= 1e-9`` (matching the canonical is not needed)."""
    return strict_team_protocol and regret <= OPTIMAL_REGRET_TOLERANCE
