"""Paired comparisons over shared deals, both RFT rewards with standard errors, GRPO pair ordering under the
two dealing modes, and the shortcut strategies (blind counters, sandbagger) — checked against hand
computations, brute force and scipy."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import t as student_t
from scipy.stats import wilcoxon as scipy_wilcoxon

from rftlab.analysis.paired import bootstrap_mean_interval, sign_test
from rftlab.analysis.poker import (
    deal_results,
    excludes_zero,
    luck_spread,
    pair_ordering,
    pair_ordering_interval,
    paired_rft_table,
    paired_schedule_table,
    paired_sentence,
    reward_mean_se,
    reward_table,
)
from rftlab.envs.poker.env import PokerEnv, PokerEnvConfig, row_assignment
from rftlab.policies.poker.reference import AlwaysCall, Exploit, Sandbag
from rftlab.rewards.poker import gain_reward
from rftlab.rollout.episode import episode
from rftlab.rollout.poker.play import play_rft


def hand(run, position, hand_id, stage, opponent, bb):
    return {
        "run": run,
        "position": position,
        "hand_id": hand_id,
        "stage": stage,
        "opponent": opponent,
        "bb": bb,
    }


A_ROWS = [
    hand(0, 0, "h1", 0, "tom", 10.0),
    hand(1, 1, "h1", 0, "tom", 30.0),  # deal h1: a averages 20 over its two runs
    hand(0, 1, "h2", 0, "tom", -1.0),
    hand(1, 0, "h2", 0, "tom", -1.0),
    hand(0, 2, "h3", 1, "adam", 0.5),
    hand(1, 2, "h3", 1, "adam", 0.5),
    hand(0, 3, "h4", 1, "adam", 2.0),
    hand(1, 3, "h4", 1, "adam", 0.0),
]
B_ROWS = [dict(r, bb=v) for r, v in zip(A_ROWS, [0.0, 0.0, 1.0, 1.0, 0.5, 0.5, -1.0, -1.0], strict=True)]


def test_deal_results_average_each_deal_over_its_runs():
    deals = deal_results(A_ROWS)
    assert deals["h1"] == {"stage": 1, "opponent": "tom", "bb": 20.0, "runs": 2}
    assert deals["h4"]["bb"] == 1.0 and deals["h3"]["stage"] == 2


def test_paired_schedule_table_differences_deals_then_bootstraps_and_sign_tests():
    table = paired_schedule_table({"a": A_ROWS, "b": B_ROWS}, [("a", "b")], reps=4000, seed=5)
    assert [(r["stage"], r["opponent"], r["deals"]) for r in table] == [
        (1, "tom", 2),
        (2, "adam", 2),
        ("all", "all", 4),
    ]
    diffs = {"h1": 20.0, "h2": -2.0, "h3": 0.0, "h4": 2.0}  # by hand from the rows above
    overall = table[-1]
    assert overall["mean"] == pytest.approx(sum(diffs.values()) / 4)
    assert (overall["better"], overall["worse"], overall["ties"]) == (2, 1, 1)
    assert overall["sign_p"] == pytest.approx(sign_test(list(diffs.values())).p_value)
    # Wilcoxon beside it, against scipy (exact: 3 untied magnitudes 2, 2, 20 -> tied, so normal)
    reference = scipy_wilcoxon([20.0, -2.0, 2.0], method="approx", correction=False)
    assert overall["wilcoxon_p"] == pytest.approx(reference.pvalue, rel=1e-10)
    assert overall["wilcoxon_method"] == "normal"
    # the overall interval resamples within stages (stage sizes fixed), seeded
    strat = bootstrap_mean_interval([20.0, -2.0, 0.0, 2.0], reps=4000, seed=5, strata=[1, 1, 2, 2])
    assert (overall["low"], overall["high"], overall["se"]) == (strat.low, strat.high, strat.se)
    assert table[0]["mean"] == pytest.approx(9.0) and table[1]["mean"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same deals"):
        paired_schedule_table({"a": A_ROWS, "b": B_ROWS[:-2]}, [("a", "b")])


def episode_row(row_id, opponent, **values):
    return {"row_id": row_id, "opponent": opponent, **values}


def test_paired_rft_table_by_opponent_and_overall():
    a = [episode_row("r1", "x", reward_gain=1.0), episode_row("r2", "x", reward_gain=0.0),
         episode_row("r3", "y", reward_gain=5.0)]  # fmt: skip
    b = [episode_row("r1", "x", reward_gain=0.0), episode_row("r2", "x", reward_gain=0.0),
         episode_row("r3", "y", reward_gain=-1.0)]  # fmt: skip
    table = paired_rft_table({"a": a, "b": b}, [("a", "b")], "reward_gain", reps=500)
    assert [(r["opponent"], r["deals"], r["mean"]) for r in table] == [
        ("x", 2, 0.5),
        ("y", 1, 6.0),
        ("all", 3, 7 / 3),
    ]
    assert (table[-1]["better"], table[-1]["ties"]) == (2, 1)
    b[2]["opponent"] = "x"
    with pytest.raises(ValueError, match="different opponents"):
        paired_rft_table({"a": a, "b": b}, [("a", "b")], "reward_gain")


def test_reward_table_standard_errors_and_t_intervals():
    values = [0.5, -1.0, 2.0, 0.0, 3.5]
    rows = [episode_row(f"r{i}", "x", reward_mean_instance=v, reward_gain=-v) for i, v in enumerate(values)]
    table = reward_table({"s": rows})
    mi = next(r for r in table if r["reward"] == "mean-instance")
    se = statistics.stdev(values) / math.sqrt(len(values))
    assert mi["mean"] == pytest.approx(statistics.fmean(values)) and mi["se"] == pytest.approx(se)
    assert mi["high"] - mi["mean"] == pytest.approx(student_t.ppf(0.975, 4) * se)  # t below 30 rollouts
    gain = next(r for r in table if r["reward"] == "gain")
    assert gain["mean"] == pytest.approx(-mi["mean"]) and gain["rollouts"] == 5


def test_pair_ordering_row_shared_against_per_rollout():
    a = [episode_row("r1", "x", v=3.0), episode_row("r2", "x", v=0.0), episode_row("r3", "x", v=1.0)]
    b = [episode_row("r1", "x", v=2.0), episode_row("r2", "x", v=-1.0), episode_row("r3", "x", v=1.0)]
    out = pair_ordering(a, b, "v")
    # same row: r1 a>b, r2 a>b, r3 tie
    assert out["row_shared"] == {"a_first": 2 / 3, "b_first": 0.0, "tied": 1 / 3, "pairs": 3}
    # other rows, by hand: (3,-1) (3,1) (0,2) (0,1) (1,2) (1,-1) -> a first 3, b first 3
    assert out["per_rollout"] == {"a_first": 0.5, "b_first": 0.5, "tied": 0.0, "pairs": 6}


def naive_ordering_bootstrap(a_values, b_values, reps, seed):
    """The same resamples as ``pair_ordering_interval`` (one ``rng.integers`` draw of row indices), each
    share counted pair by pair over the drawn positions."""
    n = len(a_values)
    draws = np.random.default_rng(seed).integers(0, n, size=(reps, n))
    shared, crossed = [], []
    for drawn in draws:
        shared.append(sum(a_values[i] > b_values[i] for i in drawn) / n)
        pairs = [(i, j) for i, j in itertools.product(drawn, repeat=2) if i != j]
        crossed.append(sum(a_values[i] > b_values[j] for i, j in pairs) / len(pairs))
    return np.array(shared), np.array(crossed)


def test_pair_ordering_interval_matches_a_pair_by_pair_bootstrap():
    rng = np.random.default_rng(4)
    a_values, b_values = list(rng.normal(1.0, 2.0, size=9)), list(rng.normal(0.0, 1.0, size=9))
    a = [episode_row(f"r{i}", "x", v=v) for i, v in enumerate(a_values)]
    b = [episode_row(f"r{i}", "x", v=v) for i, v in enumerate(b_values)]
    out = pair_ordering_interval(a, b, "v", reps=300, seed=2)
    point = pair_ordering(a, b, "v")
    assert out["row_shared"]["estimate"] == point["row_shared"]["a_first"]
    assert out["per_rollout"]["estimate"] == point["per_rollout"]["a_first"]
    # row ids sort as strings (r0..r8): the naive loop sees them in the same order
    shared, crossed = naive_ordering_bootstrap(a_values, b_values, 300, 2)
    for key, series in (("row_shared", shared), ("per_rollout", crossed), ("difference", shared - crossed)):
        assert (out[key]["low"], out[key]["high"]) == pytest.approx(
            tuple(np.quantile(series, [0.025, 0.975]))
        )
    with pytest.raises(ValueError, match="same rows"):
        pair_ordering_interval(a, b[:-1], "v")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-50, 50, allow_nan=False), min_size=2, max_size=12))
def test_luck_spread_is_the_rms_difference_over_pairs_of_other_rows(values):
    rows = [{"v": v} for v in values]
    brute = [(x - y) ** 2 for (i, x), (j, y) in itertools.product(enumerate(values), repeat=2) if i != j]
    assert luck_spread(rows, "v") == pytest.approx(math.sqrt(sum(brute) / len(brute)), rel=1e-9, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=10).map(lambda v: v + v[:1]))
def test_gain_reward_is_antisymmetric_under_reversing_an_even_number_of_hands(values):
    if len(values) % 2:
        values = values[:-1]
    forward, backward = gain_reward(values, 0)["score"], gain_reward(values[::-1], 0)["score"]
    assert backward == pytest.approx(-forward, abs=1e-9)


def test_memoryless_expected_gain_is_zero_over_the_orders_of_exchangeable_hands():
    """A memoryless, position-blind strategy's hand results are exchangeable across the rollout's
    positions, so its gain averages to exactly 0 over the orders of any hand set (clipping included)."""
    hands = [12.0, -0.5, -30.0, 1.0]
    gains = [gain_reward(list(order), 0)["score"] for order in itertools.permutations(hands)]
    assert statistics.fmean(gains) == pytest.approx(0.0, abs=1e-12) and max(gains) > 0


class Recorder:
    """Wraps a policy and records the hand number of every decision it was asked for."""

    def __init__(self, inner):
        self.inner, self.hands = inner, []

    def reset(self, seed=None):
        self.inner.reset(seed)

    def act(self, observation):
        self.hands.append(observation.next_query.metadata["hand_num"])
        return self.inner.act(observation)


def test_sandbag_switches_policy_at_the_hand_number_in_the_prompt():
    early, late = Recorder(AlwaysCall()), Recorder(AlwaysCall())
    episode(PokerEnv(PokerEnvConfig(mode="rft", hands=6)), Sandbag(early, late, switch=3), "poker_s1001")
    assert early.hands and late.hands
    assert max(early.hands) <= 3 < min(late.hands) and max(late.hands) <= 6
    with pytest.raises(ValueError):
        Sandbag(AlwaysCall(), AlwaysCall(), switch=-1)


def test_a_blind_counter_ignores_the_name_and_equals_exploit_against_its_own_opponent():
    tom_rows = [
        r for r in (f"poker_s{1000 + i}" for i in range(12)) if row_assignment(r)[0] == "calling_station"
    ]
    assert tom_rows
    named = play_rft(Exploit(seed=2, samples=20), tom_rows[:2], hands=3, policy_seed=2)
    blind = play_rft(Exploit(seed=2, samples=20, assume="Tom"), tom_rows[:2], hands=3, policy_seed=2)
    assert [t.metrics["hand_bb"] for t in named] == [t.metrics["hand_bb"] for t in blind]
    # the fit-or-fold counter min-raises whenever it may, whoever the prompt names
    query = PokerEnv(PokerEnvConfig(mode="rft", hands=1)).reset(tom_rows[0]).next_query
    move = Exploit(assume="Adam").act(query)
    assert "RAISE" in query.legal_actions and move["action"] == "RAISE"
    assert move["amount"] == min(query.metadata["min_raise"], query.metadata["max_raise"])
    with pytest.raises(ValueError, match="assume"):
        Exploit(assume="Bob")


def test_reference_study_plays_every_strategy_on_the_same_deals():
    from rftlab.studies.poker import BLIND_COUNTERS, SANDBAG, reference_study

    study = reference_study(schedule="quick_test", runs=1, rows=3, hands=4, equity_samples=10)
    assert set(study.schedule_rows) == set(study.rft_rows) == {"random", "call", "exploit"}
    assert set(study.shortcut_rows) == {*BLIND_COUNTERS.values(), SANDBAG}
    ids = [r["row_id"] for r in study.rft_rows["call"]]
    assert ids == ["poker_s1000", "poker_s1001", "poker_s1002"]
    for rows in [*study.rft_rows.values(), *study.shortcut_rows.values()]:
        assert [(r["row_id"], r["opponent"]) for r in rows] == [(i, row_assignment(i)[0]) for i in ids]
    # every strategy played the schedule's same deals, so the paired table needs nothing else
    table = paired_schedule_table(study.schedule_rows, [("exploit", "call")], reps=200)
    assert table[-1]["deals"] == 5
    with pytest.raises(ValueError, match="runs"):
        reference_study(schedule="quick_test", runs=6)


def test_report_text_of_a_paired_row_and_a_reward():
    row = {"mean": 7.014, "low": 4.06, "high": 10.11, "deals": 96, "better": 76, "worse": 19, "ties": 1,
           "sign_p": 3.1e-09}  # fmt: skip
    assert paired_sentence(row, over="rows") == (
        "+7.01 BB/hand, 95% bootstrap [+4.06, +10.11] over 96 rows; 76 won, 19 lost, 1 tied (sign test p = 3.1e-09)"
    )
    assert paired_sentence({**row, "wilcoxon_p": 0.0123}, over="rows").endswith(
        "(sign test p = 3.1e-09, Wilcoxon p = 0.012)"
    )
    assert excludes_zero(row) and excludes_zero({"low": -2.0, "high": -0.1})
    assert not excludes_zero({"low": -0.23, "high": 0.36}) and not excludes_zero({"low": 0.0, "high": 1.0})
    rewards = [{"strategy": "call", "reward": "gain", "mean": -0.004, "se": 0.1234},
               {"strategy": "call", "reward": "mean-instance", "mean": 1.0, "se": 0.5}]  # fmt: skip
    assert reward_mean_se(rewards, "call", "gain") == "+0.00 ± 0.12"  # signed, never "-0.00"
    with pytest.raises(ValueError, match="0 rows match"):
        reward_mean_se(rewards, "exploit", "gain")
