"""Arena policies (docs/arena.md §6, Appendix A.5): the scripted local-priority table, its three styles and the
claim-avoiding team policy; the model-free BLUE baselines and their evaluation on the frozen cases; and
``ScriptedJointPolicy``, a ``rftlab.types.Policy`` that drives ``ArenaEnv`` with scripted teams.

Baseline evaluation: each policy maps ``(state, case)`` to BLUE joint actions; every case is stepped once
with RED's scripted actions for the case style and compared with the oracle: reward ``R_BLUE``, regret
``oracle - R_BLUE`` and ``optimal`` (regret <= 1e-9; model-free policies always "parse", so strictness is
not in question).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rftlab.envs.arena.cases import STYLES, FrozenCase, frozen_cases
from rftlab.envs.arena.env import ArenaObservation
from rftlab.envs.arena.oracle import (
    OPTIMAL_REGRET_TOLERANCE,
    JointSolution,
    oracle_regret,
    solve_joint_action,
)
from rftlab.envs.arena.rules import (
    CAPTURE,
    FORTIFY,
    PROBE,
    RECOVER,
    SCAN,
    TRANSFER,
    WAIT,
    WAIT_ACTION,
    Action,
    legal_actions,
    step,
)
from rftlab.envs.arena.world import BLUE, EXPOSED, RED, GameState, generate_state, team_agent_ids

__all__ = [
    "BASELINE_POLICIES",
    "STYLES",
    "CaseOutcome",
    "ScriptedJointPolicy",
    "deterministic_policy",
    "evaluate_baselines",
    "local_policy_action",
    "local_priority",
    "random_legal_actions",
    "ranked_actions",
    "summarize_baselines",
]

# ------------------------------------------------------------------------------ scripted (§6)

STYLE_BONUS: dict[str, dict[str, int]] = {
    "balanced": {CAPTURE: 0, PROBE: 0, FORTIFY: 0, RECOVER: 0},
    "aggressive": {CAPTURE: 6, PROBE: 4, FORTIFY: -2, RECOVER: -1},
    "defensive": {CAPTURE: -2, PROBE: -1, FORTIFY: 5, RECOVER: 6},
}


def _check_style(style: str) -> dict[str, int]:
    if style not in STYLE_BONUS:
        raise ValueError(f"unknown opponent style {style!r}; expected one of {STYLES}")
    return STYLE_BONUS[style]


def priority_score(
    kind: str,
    *,
    value: int = 0,
    critical: int = 0,
    exposed: bool = False,
    receiver_resource: int | None = None,
    own_resource: int = 0,
) -> int:
    """The local-priority table (docs/arena.md §6) before the style bonus: one action's score from what the acting
    agent knows of its target. Used on the world state (``local_priority``) and on a prompt's JSON alone
    (the arena SFT evaluation's prompt-only policy), so both rank actions identically."""
    if kind == RECOVER:
        return 12 + value + 3 * critical
    if kind == CAPTURE:
        return 9 + value + 2 * critical if exposed else 1
    if kind == FORTIFY:
        return 7 + value + 3 * critical
    if kind == PROBE:
        return 1 if exposed else 8 + value + 2 * critical
    if kind == TRANSFER:
        return 3 + 8 * int(receiver_resource == 0) + 2 * int(own_resource > 1)
    if kind == SCAN:
        return 2
    if kind == WAIT:
        return 0
    raise ValueError(f"unknown action kind {kind!r}")


def local_priority(
    state: GameState, agent_id: str, action: Action, style: str = "balanced"
) -> tuple[int, str, str]:
    """The sort key ``(score, kind, target or position)`` of the local-priority table; larger is preferred."""
    bonus = _check_style(style)
    agent = state.agents[agent_id]
    target = action.target
    obs = state.knowledge[agent_id].get(target) if target is not None and action.kind != TRANSFER else None
    receiver = state.agents[target].resource if target is not None and action.kind == TRANSFER else None
    score = priority_score(
        action.kind,
        value=obs.value if obs is not None else 0,
        critical=int(obs.critical) if obs is not None else 0,
        exposed=obs is not None and obs.status == EXPOSED,
        receiver_resource=receiver,
        own_resource=agent.resource,
    )
    score += bonus.get(action.kind, 0)
    return (score, action.kind, target if target is not None else agent.position)


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


class ScriptedJointPolicy:
    """Both teams scripted with the claim-avoiding team policy (BLUE in ``blue_style``, RED in
    ``red_style``): ``act(ArenaObservation)`` returns the joint action ``ArenaEnv.step`` takes.
    Deterministic, so ``reset``'s ``seed`` is unused."""

    def __init__(self, blue_style: str = "balanced", red_style: str = "balanced"):
        self.blue_style, self.red_style = blue_style, red_style

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, observation: ArenaObservation) -> dict[str, Action]:
        state = observation.state
        return {
            **deterministic_policy(state, BLUE, self.blue_style),
            **deterministic_policy(state, RED, self.red_style),
        }


# ------------------------------------------------------------------- model-free BLUE baselines (A.5)

BASELINE_POLICIES: tuple[str, ...] = ("oracle", "sequential", "independent", "random", "wait")
RANDOM_REPEATS = 16

JointPolicy = Callable[[GameState, JointSolution, int], dict[str, Action]]


@dataclass(frozen=True)
class CaseOutcome:
    """One policy's realised BLUE joint action on one case, scored against the oracle."""

    policy: str
    case_index: int
    repeat: int
    reward: float
    regret: float
    optimal: bool


def random_legal_actions(state: GameState, seed: int, repeat: int) -> dict[str, Action]:
    """Uniform random legal action per BLUE agent: ``Random(seed*10000 + repeat).choice`` over sorted lists."""
    rng = random.Random(seed * 10_000 + repeat)
    return {agent_id: rng.choice(legal_actions(state, agent_id)) for agent_id in team_agent_ids(BLUE)}


def _policy_actions(
    name: str, state: GameState, solution: JointSolution, seed: int, repeat: int
) -> dict[str, Action]:
    if name == "oracle":
        return dict(solution.canonical_assignment)
    if name == "sequential":
        return deterministic_policy(state, BLUE, "balanced")
    if name == "independent":
        return {agent_id: local_policy_action(state, agent_id) for agent_id in team_agent_ids(BLUE)}
    if name == "random":
        return random_legal_actions(state, seed, repeat)
    if name == "wait":
        return {agent_id: WAIT_ACTION for agent_id in team_agent_ids(BLUE)}
    raise ValueError(f"unknown baseline policy {name!r}; expected one of {BASELINE_POLICIES}")


def evaluate_baselines(
    policies: Sequence[str] = BASELINE_POLICIES,
    cases: Sequence[FrozenCase] | None = None,
    random_repeats: int = RANDOM_REPEATS,
) -> list[CaseOutcome]:
    """Score every policy on every case (the random policy ``random_repeats`` times per case)."""
    outcomes: list[CaseOutcome] = []
    for case in cases if cases is not None else frozen_cases():
        state = generate_state(case.seed, case.size)
        red = deterministic_policy(state, RED, case.style)
        solution = solve_joint_action(state, BLUE, red)
        for name in policies:
            for repeat in range(random_repeats if name == "random" else 1):
                blue = _policy_actions(name, state, solution, case.seed, repeat)
                reward = step(state, {**red, **blue}, check=False).rewards[BLUE]
                regret = oracle_regret(solution, state, blue, red)
                outcomes.append(
                    CaseOutcome(name, case.index, repeat, reward, regret, regret <= OPTIMAL_REGRET_TOLERANCE)
                )
    return outcomes


def summarize_baselines(outcomes: Sequence[CaseOutcome]) -> dict[str, dict[str, float]]:
    """``{policy: {mean_reward, mean_regret, optimal_rate}}`` in first-seen policy order."""
    summary: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(o.policy for o in outcomes):
        rows = [o for o in outcomes if o.policy == name]
        summary[name] = {
            "mean_reward": statistics.fmean(o.reward for o in rows),
            "mean_regret": statistics.fmean(o.regret for o in rows),
            "optimal_rate": sum(o.optimal for o in rows) / len(rows),
        }
    return summary
