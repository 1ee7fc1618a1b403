"""The simulated learner's exact truth (``rftlab.training.arena.truth``) against replicate draws of the
simulated sampler itself: every replicate's reward must equal the enumerated reward of the masks it drew,
the masks' frequencies and the reply rates must match their probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rftlab.analysis.arena.evaluation import reply_counts
from rftlab.envs.arena.cases import frozen_cases
from rftlab.rollout.arena.evaluation import evaluate_case
from rftlab.training.arena.simulated import LEARNS, SIMULATED_MODEL, SimulatedSampler
from rftlab.training.arena.truth import (
    case_outcomes,
    expected_case_rewards,
    expected_contrasts,
    expected_frozen,
    mask_probabilities,
)


class SamplerReplies:
    """A provider that answers through the simulated sampler's own reply rule on a chat-rendered prompt."""

    def __init__(self, steps: int, seed: int):
        self.sampler = SimulatedSampler(steps, LEARNS, seed, SIMULATED_MODEL)

    def complete(self, messages, target):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return self.sampler._reply(text + "<|im_start|>assistant\n")

    def describe(self):
        return {"model": "simulated-replies"}


def _mask(flags) -> int:
    return sum(1 << i for i, ok in enumerate(flags) if ok)


@pytest.fixture(scope="module")
def draws():
    cases = frozen_cases()
    chosen = [cases[3], cases[17]]
    outcomes = {c.index: case_outcomes(c, cases) for c in chosen}
    records = [evaluate_case(SamplerReplies(0, seed), c, cases) for c in chosen for seed in range(40)]
    return outcomes, records


def test_every_replicate_reward_equals_the_enumerated_reward_of_its_masks(draws):
    outcomes, records = draws
    checked = 0
    for record in records:
        o = outcomes[record["case_index"]]
        b = _mask(m["valid"] for m in record["messages"])
        for row in record["conditions"]:
            if row["permutation"] != 0:
                continue
            a = _mask(x["valid"] for x in row["actions"])
            assert row["environment_reward"] == pytest.approx(o.rewards[row["condition"]][b, a], abs=1e-9)
            checked += 1
        generated = [
            x["valid"]
            for row in record["conditions"]
            if row["condition"] == "generated"
            for x in row["actions"]
        ]
        assert record["action_order_consistent"] == (all(generated) and bool(o.order_consistent[b]))
    assert checked == 5 * len(records)


def test_masks_and_reply_rates_follow_the_competence(draws):
    _, records = draws
    q = LEARNS(0)
    counts = reply_counts(records)
    for phase, n in (("act", counts["act"]["n"]), ("broadcast", counts["broadcast"]["n"])):
        share = counts[phase]["schema_valid"] / n
        # replies of one agent-case share prompts across conditions only partly; 5 SE leaves room for that
        assert abs(share - (q + (1 - q) / 2)) < 5 * math.sqrt(0.25 / n) * math.sqrt(7), (phase, share)
    legal = counts["act"]["legal"] / counts["act"]["n"]
    assert abs(legal - q) < 5 * math.sqrt(q * (1 - q) / counts["act"]["n"]) * math.sqrt(7)
    b_masks = np.bincount([_mask(m["valid"] for m in r["messages"]) for r in records], minlength=16)
    expected = mask_probabilities(q) * len(records)
    assert np.all(np.abs(b_masks - expected) < 5 * np.sqrt(expected) + 2)


def test_the_mean_over_replicates_is_near_the_expectation(draws):
    outcomes, records = draws
    for index, o in outcomes.items():
        rewards = [
            row["environment_reward"]
            for r in records
            if r["case_index"] == index
            for row in r["conditions"]
            if row["condition"] == "generated" and row["permutation"] == 0
        ]
        truth = expected_case_rewards(o, LEARNS(0))["generated"]
        se = np.std(rewards, ddof=1) / math.sqrt(len(rewards))
        assert abs(np.mean(rewards) - truth) < 4.5 * se + 1e-9


def test_hand_worked_limits():
    cases = frozen_cases()
    o = case_outcomes(cases[3], cases)
    perfect = expected_frozen([o], 1.0)
    assert perfect["act_schema_valid"] == 1.0 and perfect["act_legal"] == 1.0
    # at q = 1 every reply is the scripted one: the full masks' rewards
    assert perfect["mean_reward"]["generated"] == pytest.approx(o.rewards["generated"][15, 15])
    assert perfect["mean_reward"]["dropped"] == pytest.approx(o.rewards["dropped"][0, 15])
    # at q = 0 every action is WAIT and every broadcast empty
    assert expected_frozen([o], 0.0)["mean_reward"]["generated"] == pytest.approx(
        o.rewards["generated"][0, 0]
    )
    assert expected_frozen([o], 0.6)["act_schema_valid"] == pytest.approx(0.8)
    assert mask_probabilities(0.3).sum() == pytest.approx(1.0)
    c = expected_contrasts([o], 0.6, 0.6)
    assert c["primary"] == pytest.approx(0.0) and c["supporting"] == pytest.approx(0.0)
    with pytest.raises(ValueError):
        mask_probabilities(1.5)
    with pytest.raises(ValueError):
        expected_frozen([], 0.5)
