"""Model-free BLUE policies scored on the frozen cases against the exact oracle (spec Appendix A.5).

Each policy maps ``(state, case)`` to BLUE joint actions; every case is stepped once with RED's scripted
actions for the case style and compared with the oracle: reward ``R_BLUE``, regret ``oracle - R_BLUE`` and
``optimal`` (regret <= 1e-9; model-free policies always "parse", so strictness is not in question).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .cases import FrozenCase, frozen_cases
from .oracle import OPTIMAL_REGRET_TOLERANCE, JointSolution, oracle_regret, solve_joint_action
from .rules import WAIT_ACTION, Action, legal_actions, step
from .scripted import deterministic_policy, local_policy_action
from .world import BLUE, RED, GameState, generate_state, team_agent_ids

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
