"""Playing strategies through the episode loop; summaries; the CLI."""

from __future__ import annotations

import json

import pytest
from option_errors import refused_option

from rftlab.analysis.poker import bb_summary, opponent_table, rft_episode_rows, stage_gains
from rftlab.cli import main as cli_main
from rftlab.policies.poker.reference import AlwaysCall, Exploit, RandomLegal
from rftlab.rewards.poker import task_metrics
from rftlab.rollout.poker.play import hand_rows, play_rft, play_runs


def test_play_runs_rows_match_the_env_outcomes():
    (traj,) = play_runs(AlwaysCall(), schedule="quick_test", runs=[0])
    rows = hand_rows([traj])
    assert [r["position"] for r in rows] == list(range(5))
    assert sum(r["bb"] for r in rows) * 10 == pytest.approx(traj.metrics["total_profit"])
    assert traj.metrics == {**traj.metrics, **task_metrics([round(r["bb"] * 10) for r in rows])}


def test_summary_averages_each_deal_over_runs_before_the_interval():
    rows = [
        {"run": 0, "position": 0, "hand_id": "h1", "stage": 0, "opponent": "a", "bb": 1.0},
        {"run": 1, "position": 1, "hand_id": "h1", "stage": 0, "opponent": "a", "bb": 3.0},
        {"run": 0, "position": 1, "hand_id": "h2", "stage": 0, "opponent": "a", "bb": -1.0},
        {"run": 1, "position": 0, "hand_id": "h2", "stage": 0, "opponent": "a", "bb": -1.0},
        {"run": 0, "position": 2, "hand_id": "h3", "stage": 1, "opponent": "b", "bb": 5.0},
    ]
    s = bb_summary(rows)
    assert s["overall"]["hands"] == 3 and s["overall"]["bb_per_hand"] == pytest.approx((2.0 - 1.0 + 5.0) / 3)
    assert s["stages"][0]["bb_per_hand"] == pytest.approx(0.5) and s["stages"][1]["ci95"] == [5.0, 5.0]
    gains = stage_gains(rows)
    assert {(g["run"], g["stage"]): g["gain"] for g in gains}[(0, 1)] == pytest.approx(-1.0 - 1.0)


def test_policies_are_deterministic_for_a_seed():
    a = [
        t.metrics["hand_bb"]
        for t in play_runs(Exploit(seed=3, samples=50), schedule="quick_test", runs=[0, 1])
    ]
    b = [
        t.metrics["hand_bb"]
        for t in play_runs(Exploit(seed=3, samples=50), schedule="quick_test", runs=[0, 1])
    ]
    assert a == b
    r1 = play_runs(RandomLegal(seed=1), schedule="quick_test", runs=[0], policy_seed=1)[0].metrics["hand_bb"]
    r2 = play_runs(RandomLegal(seed=1), schedule="quick_test", runs=[0], policy_seed=2)[0].metrics["hand_bb"]
    assert r1 != r2 or len(set(r1)) == 1


def test_rft_rows_and_opponent_table():
    trajs = play_rft(AlwaysCall(), [f"r{i}" for i in range(6)], hands=4)
    rows = rft_episode_rows(trajs)
    assert all(r["illegal_actions"] == 0 for r in rows)
    table = opponent_table(rows)
    assert sum(t["episodes"] for t in table) == 6


def test_cli_play_json(capsys):
    assert cli_main(["poker", "play", "--policy", "call", "--schedule", "quick_test", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["overall"]["hands"] == 5 and len(out["stages"]) == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["poker", "play", "--policy", "call", "--schedule", "nope"], "one of 'default'"),
        (["poker", "play", "--policy", "call", "--runs", "9"], "an integer from 1 to 5"),
        (["poker", "dataset", "--n", "0", "--out", "x.jsonl"], "an integer from 1 to 100000"),
    ],
)
def test_cli_rejects_bad_arguments(argv, message, capsys):
    flag = argv[-2] if argv[-2] != "--out" else argv[-4]
    refused_option(argv, capsys, flag, message, f"got '{argv[argv.index(flag) + 1]}'")


def test_cli_dataset_rows(tmp_path):
    out = tmp_path / "rows.jsonl"
    assert cli_main(["poker", "dataset", "--n", "6", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["input_metadata"]["row_id"] for r in rows] == [f"poker_s{1000 + i}" for i in range(6)]
    ctx = rows[0]["input_metadata"]["dataset_info"]["environment_context"]
    assert ctx["mode"] == "row_shared" and ctx["hands"] == 16
