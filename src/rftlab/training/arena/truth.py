"""The simulated learner's truth: the expected values of what the frozen evaluation measures, computed
exactly from its corruption schedule (issue 31, "the truth of every simulation").

The simulated learner (``rftlab.training.arena.simulated``) answers each prompt with the scripted
policy's reply with probability ``q(s)`` and otherwise with one of four corruptions, drawn by a hash of the
prompt text, the step count ``s`` and the seed; over seeds these are independent draws per distinct prompt.
Every corruption is *rejected* by the strict parsers: a corrupted ACT reply (cut JSON, a wrong key, an
undisplayed id) resolves as WAIT, and a corrupted BROADCAST reply (cut JSON, a wrong key, an unsupported
fact) is delivered as the empty broadcast. So within one condition of one case the outcome depends only on
which of the four broadcast replies and which of the four ACT replies are the scripted ones: 16 × 16 masks,
each with probability ``q^j (1 − q)^(8 − j)`` (``j`` correct replies). ``case_outcomes`` evaluates the
environment reward of every mask once (it does not depend on ``q``); ``expected_frozen`` weights them for
any ``q``. The reply rates follow from the corruption kinds (each 1/4 of corruptions): an ACT reply is
schema-valid unless cut or re-keyed, so ``E[act_schema_valid] = q + (1 − q)/2`` and ``E[act_legal] = q``;
likewise ``E[broadcast_schema_valid] = q + (1 − q)/2``. A case is action-order consistent only when its 12
generated-condition ACT replies are all the scripted ones and those agree across the three orders.

This is the truth of the *simulation*, never of a model; ``tests/arena/test_arena_truth.py`` checks it
against replicate draws of the simulated sampler itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rftlab.envs.arena.cases import FrozenCase, frozen_cases
from rftlab.envs.arena.oracle import solve_joint_action
from rftlab.envs.arena.protocol import (
    EMPTY_BROADCAST,
    action_or_wait,
    action_prompt,
    broadcast_or_empty,
    broadcast_prompt,
    inbox_for,
    parse_action,
    parse_broadcast,
)
from rftlab.envs.arena.rules import step
from rftlab.envs.arena.world import BLUE, RED, generate_state, team_agent_ids
from rftlab.policies.arena.providers import ScriptedProvider
from rftlab.policies.arena.scripted import deterministic_policy
from rftlab.rollout.arena.evaluation import (
    PERMUTATIONS,
    _reference_broadcasts,
    shuffled_broadcasts,
    within_case_shuffled,
)

AGENTS = 4
MASKS = 2**AGENTS
TRUTH_CONDITIONS: tuple[str, ...] = ("generated", "dropped", "reference", "shuffled", "shuffled_within")


@dataclass(frozen=True)
class CaseOutcomes:
    """One frozen case's environment reward under every (broadcast mask, ACT mask) of every condition
    (``rewards[condition][b, a]``; bit ``i`` set = agent ``i``'s reply is the scripted one) and, per
    broadcast mask, whether the scripted actions agree across the three action orders."""

    case_index: int
    oracle_reward: float
    rewards: Mapping[str, np.ndarray]
    order_consistent: np.ndarray


def mask_probabilities(q: float) -> np.ndarray:
    """``P(mask)`` for the 16 masks of four independent replies, each the scripted one with probability q."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"a competence must be in [0, 1], got {q!r}")
    bits = np.array([bin(m).count("1") for m in range(MASKS)])
    return q**bits * (1.0 - q) ** (AGENTS - bits)


class _Scripted:
    """The scripted replies (the learner's uncorrupted answer), memoised by prompt."""

    def __init__(self) -> None:
        self.provider, self.memo = ScriptedProvider(), {}

    def __call__(self, messages: list[dict[str, str]]) -> str:
        key = messages[-1]["content"]
        if key not in self.memo:
            self.memo[key] = self.provider.complete(messages, "")
        return self.memo[key]


def _act_choices(state, case, delivered, k, scripted) -> list[Any]:
    """The scripted action of each agent under the delivered broadcasts and action order ``k``."""
    out = []
    for i, agent_id in enumerate(team_agent_ids(BLUE)):
        inbox = inbox_for(agent_id, {a: b for a, b in delivered.items() if a != agent_id})
        prompt, displayed = action_prompt(state, agent_id, inbox, case.seed + i + k)
        out.append(action_or_wait(parse_action(scripted(prompt), displayed)))
    return out


def _rewards_by_act_mask(state, red, choices, memo) -> np.ndarray:
    """Reward of each ACT mask: agent i plays its scripted choice when bit i is set, else WAIT."""
    from rftlab.envs.arena.protocol import WAIT_ACTION

    blue = team_agent_ids(BLUE)
    out = np.empty(MASKS)
    for mask in range(MASKS):
        joint = {a: (choices[i] if mask >> i & 1 else WAIT_ACTION) for i, a in enumerate(blue)}
        key = tuple(sorted((a, repr(x)) for a, x in joint.items()))
        if key not in memo:
            memo[key] = step(state, {**red, **joint}, check=False).rewards[BLUE]
        out[mask] = memo[key]
    return out


def case_outcomes(
    case: FrozenCase, cases: Sequence[FrozenCase], scripted: _Scripted | None = None
) -> CaseOutcomes:
    """``CaseOutcomes`` of one frozen case (see the module docstring)."""
    scripted = scripted or _Scripted()
    state = generate_state(case.seed, case.size)
    red = deterministic_policy(state, RED, case.style)
    solution = solve_joint_action(state, BLUE, red)
    blue = team_agent_ids(BLUE)
    correct = {
        a: broadcast_or_empty(
            parse_broadcast(scripted(broadcast_prompt(state, a, case.seed + i)[0]), state, a)
        )
        for i, a in enumerate(blue)
    }
    fixed = {
        "dropped": dict.fromkeys(blue, EMPTY_BROADCAST),
        "reference": _reference_broadcasts(state, solution),
        "shuffled": shuffled_broadcasts(case.index, case.style, cases),
    }
    memo: dict = {}
    rewards = {c: np.empty((MASKS, MASKS)) for c in TRUTH_CONDITIONS}
    for name, delivered in fixed.items():
        rewards[name][:] = _rewards_by_act_mask(
            state, red, _act_choices(state, case, delivered, 0, scripted), memo
        )
    consistent = np.zeros(MASKS, dtype=bool)
    for b in range(MASKS):
        generated = {a: (correct[a] if b >> i & 1 else EMPTY_BROADCAST) for i, a in enumerate(blue)}
        orders = [_act_choices(state, case, generated, k, scripted) for k in range(PERMUTATIONS)]
        rewards["generated"][b] = _rewards_by_act_mask(state, red, orders[0], memo)
        consistent[b] = all(repr(o) == repr(orders[0]) for o in orders)
        within = within_case_shuffled(generated, case.seed)
        rewards["shuffled_within"][b] = _rewards_by_act_mask(
            state, red, _act_choices(state, case, within, 0, scripted), memo
        )
    return CaseOutcomes(case.index, float(solution.reward), rewards, consistent)


def frozen_outcomes(case_indices: Sequence[int] | None = None) -> list[CaseOutcomes]:
    """``CaseOutcomes`` of the frozen cases (all 60 by default), one scripted memo shared."""
    cases = frozen_cases()
    scripted = _Scripted()
    indices = range(len(cases)) if case_indices is None else case_indices
    return [case_outcomes(cases[i], cases, scripted) for i in indices]


def expected_case_rewards(outcome: CaseOutcomes, q: float) -> dict[str, float]:
    """``E[reward]`` of each condition of one case for a learner of competence ``q`` (ACT order 0)."""
    w = mask_probabilities(q)
    return {c: float(w @ outcome.rewards[c] @ w) for c in TRUTH_CONDITIONS}


def expected_frozen(outcomes: Sequence[CaseOutcomes], q: float) -> dict[str, Any]:
    """The frozen evaluation's expected quantities for competence ``q``: per-condition mean reward and
    regret over the cases, per-case rewards, the reply rates the gates read and the order consistency."""
    if not outcomes:
        raise ValueError("expected_frozen needs at least one case")
    per_case = [expected_case_rewards(o, q) for o in outcomes]
    w = mask_probabilities(q)
    oracle = np.array([o.oracle_reward for o in outcomes])
    mean_reward = {c: float(np.mean([p[c] for p in per_case])) for c in TRUTH_CONDITIONS}
    return {
        "competence": q,
        "cases": [o.case_index for o in outcomes],
        "per_case_reward": per_case,
        "mean_reward": mean_reward,
        "mean_regret": {c: float(oracle.mean() - mean_reward[c]) for c in TRUTH_CONDITIONS},
        "act_schema_valid": q + (1.0 - q) / 2,
        "act_legal": q,
        "broadcast_schema_valid": q + (1.0 - q) / 2,
        "action_order_consistency_rate": float(
            np.mean([w @ o.order_consistent * q ** (AGENTS * PERMUTATIONS) for o in outcomes])
        ),
    }


def expected_contrasts(outcomes: Sequence[CaseOutcomes], q_base: float, q_sft: float) -> dict[str, float]:
    """The expected base-vs-SFT comparison endpoints (``frozen-paired-arena-v1``) of a lineage whose base
    has competence ``q_base`` and whose selected checkpoint has ``q_sft``: the mean over cases of each
    paired difference (expectations are linear, so the draws' correlation between arms does not enter)."""
    base, sft = expected_frozen(outcomes, q_base), expected_frozen(outcomes, q_sft)
    g = sft["mean_reward"]["generated"]
    return {
        "primary": sft["mean_regret"]["generated"] - base["mean_regret"]["generated"],
        "supporting": g - base["mean_reward"]["generated"],
        "generated_minus_dropped": g - sft["mean_reward"]["dropped"],
        "generated_minus_shuffled": g - sft["mean_reward"]["shuffled"],
        "generated_minus_shuffled_within": g - sft["mean_reward"]["shuffled_within"],
    }
