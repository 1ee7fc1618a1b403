"""Scripted arena policies: the local-priority table, its three styles and the claim-avoiding team policy (§6)."""

from __future__ import annotations

from .rules import (
    CAPTURE,
    FORTIFY,
    PROBE,
    RECOVER,
    SCAN,
    TRANSFER,
    WAIT,
    Action,
    legal_actions,
)
from .world import EXPOSED, GameState, team_agent_ids

STYLES: tuple[str, ...] = ("balanced", "aggressive", "defensive")
STYLE_BONUS: dict[str, dict[str, int]] = {
    "balanced": {CAPTURE: 0, PROBE: 0, FORTIFY: 0, RECOVER: 0},
    "aggressive": {CAPTURE: 6, PROBE: 4, FORTIFY: -2, RECOVER: -1},
    "defensive": {CAPTURE: -2, PROBE: -1, FORTIFY: 5, RECOVER: 6},
}


def _check_style(style: str) -> dict[str, int]:
    if style not in STYLE_BONUS:
        raise ValueError(f"unknown opponent style {style!r}; expected one of {STYLES}")
    return STYLE_BONUS[style]


def local_priority(
    state: GameState, agent_id: str, action: Action, style: str = "balanced"
) -> tuple[int, str, str]:
    """The sort key ``(score, kind, target or position)`` of the local-priority table; larger is preferred."""
    bonus = _check_style(style)
    agent = state.agents[agent_id]
    obs = state.knowledge[agent_id].get(action.target) if action.kind != TRANSFER else None
    value = obs.value if obs is not None else 0
    critical = int(obs.critical) if obs is not None else 0
    exposed = obs is not None and obs.status == EXPOSED
    kind = action.kind
    if kind == RECOVER:
        score = 12 + value + 3 * critical
    elif kind == CAPTURE:
        score = 9 + value + 2 * critical if exposed else 1
    elif kind == FORTIFY:
        score = 7 + value + 3 * critical
    elif kind == PROBE:
        score = 1 if exposed else 8 + value + 2 * critical
    elif kind == TRANSFER:
        receiver = state.agents[action.target]
        score = 3 + 8 * int(receiver.resource == 0) + 2 * int(agent.resource > 1)
    elif kind == SCAN:
        score = 2
    elif kind == WAIT:
        score = 0
    else:
        raise ValueError(f"unknown action kind {kind!r}")
    score += bonus.get(kind, 0)
    return (score, kind, action.target if action.target is not None else agent.position)


def ranked_actions(state: GameState, agent_id: str, style: str = "balanced") -> list[Action]:
    """The agent's legal actions, best local-priority key first."""
    return sorted(
        legal_actions(state, agent_id),
        key=lambda action: local_priority(state, agent_id, action, style),
        reverse=True,
    )


def local_policy_action(state: GameState, agent_id: str, style: str = "balanced") -> Action:
    """The key-maximal legal action: what one agent does from its own prompt, ignoring teammates."""
    return ranked_actions(state, agent_id, style)[0]


def deterministic_policy(state: GameState, team: str, style: str = "balanced") -> dict[str, Action]:
    """The claim-avoiding team policy: agents in id order take their best action whose (kind, target) is free."""
    _check_style(style)
    claimed: set[tuple[str, str | None]] = set()
    chosen: dict[str, Action] = {}
    for agent_id in team_agent_ids(team):
        for action in ranked_actions(state, agent_id, style):
            if action.kind == WAIT or (action.kind, action.target) not in claimed:
                chosen[agent_id] = action
                if action.kind != WAIT:
                    claimed.add((action.kind, action.target))
                break
    return chosen
