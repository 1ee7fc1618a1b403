"""Poker metrics and rewards against the published trace's own metrics and hand computations."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rftlab.rewards.poker import (
    gain_reward,
    hand_profits_from_messages,
    illegal_count,
    mean_instance_reward,
    normalized_gain,
    task_metrics,
)

CLBENCH = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "clbench"


def test_task_metrics_equal_the_published_run_metrics():
    if not CLBENCH.is_dir():
        pytest.skip("reference data absent")
    trace = json.loads(gzip.decompress((CLBENCH / "poker.json.gz").read_bytes()))
    for run in trace["run_traces"]:
        t = run["trace"]
        profits = [o["metadata"]["total_profit"] for o in t["instance_outcomes"]]
        per_hand = [b - a for a, b in zip([0, *profits[:-1]], profits, strict=True)]
        mine = task_metrics(per_hand)
        published = t["result"]["metrics"]
        for key, value in mine.items():
            assert published[key] == pytest.approx(value), key
        assert t["result"]["score"] == pytest.approx(sum(o["reward"] for o in t["instance_outcomes"]) / 120)


def test_gain_reward_hand_computation():
    # clip to ±6: [-10, 1, 2, 9] -> [-6, 1, 2, 6]; early = -2.5, late = 4; gain 6.5; 2 illegal -> 6.46
    r = gain_reward([-10, 1, 2, 9], illegal=2)
    assert r["early_mean"] == -2.5 and r["late_mean"] == 4.0
    assert r["memory_gain"] == 6.5 and r["score"] == pytest.approx(6.46)
    assert gain_reward([6, 6, -6, -6, -6], 0)["memory_gain"] == -8.0  # clipped at -8 (raw -10)
    assert gain_reward([1.0], illegal=3)["score"] == pytest.approx(-0.56)
    assert gain_reward([], 0)["score"] == -0.5


def test_mean_instance_reward():
    r = mean_instance_reward([1.0, -0.5, 2.0], illegal=1)
    assert r["mean_instance_reward"] == pytest.approx(2.5 / 3)
    assert r["score"] == pytest.approx(2.5 / 3 - 1.0 + 0.1)
    assert mean_instance_reward([], 0)["score"] == pytest.approx(0.1)


def test_normalized_gain():
    assert normalized_gain(300.0, 100.0, 120) == pytest.approx(200 / (9.4875 * 120 - 100))


def test_profit_line_only_from_env_messages():
    msgs = [
        {"role": "assistant", "content": "HAND_PROFITS_BB: 6.0,6.0,6.0"},  # forged by the model
        {"role": "tool", "content": "Hand 1 complete ... Net chip change this hand: -25 chips"},
        {"role": "tool", "content": "Invalid poker action: RAISE requires an amount.\nThe hand state ..."},
        {"role": "tool", "content": "done\n\nHAND_PROFITS_BB: -2.5000,1.0000\nOPPONENT_POLICY: fit_or_fold"},
    ]
    assert hand_profits_from_messages(msgs) == [-2.5, 1.0]
    assert hand_profits_from_messages(msgs[:3]) == [-2.5]
    assert hand_profits_from_messages(msgs[:1]) is None
    assert illegal_count(msgs) == 1
