"""``rftlab arena`` commands and the model-free baselines (docs/arena.md §A.5, §13 gap 7)."""

from __future__ import annotations

import json

import pytest
from option_errors import refused_option

from rftlab.cli import main
from rftlab.envs.arena.cases import frozen_cases
from rftlab.policies.arena.scripted import BASELINE_POLICIES, evaluate_baselines, summarize_baselines


def test_baselines_json(capsys):
    assert main(["arena", "baselines", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert list(summary) == list(BASELINE_POLICIES)
    for row in summary.values():
        assert set(row) == {"mean_reward", "mean_regret", "optimal_rate"}
    # the oracle's mean follows from A.4 (2.39, 3.19, 2.355 by size); it is optimal everywhere with zero regret
    assert summary["oracle"] == {
        "mean_reward": pytest.approx(2.645, abs=1e-9),
        "mean_regret": 0.0,
        "optimal_rate": 1.0,
    }
    # §13 gap 7: the project's 16-repeat random-legal reimplementation gives -1.2824 / regret 3.9274
    assert summary["random"]["mean_reward"] == pytest.approx(-1.2824, abs=5e-5)
    assert summary["random"]["mean_regret"] == pytest.approx(3.9274, abs=5e-5)
    for name, row in summary.items():
        assert row["mean_reward"] + row["mean_regret"] == pytest.approx(2.645, abs=1e-9), name
        assert row["mean_reward"] <= summary["oracle"]["mean_reward"] + 1e-12
    assert (
        summary["wait"]["mean_reward"]
        < summary["random"]["mean_reward"]
        < summary["sequential"]["mean_reward"]
    )


def test_baselines_table_and_bad_policy(capsys):
    assert main(["arena", "baselines", "--policy", "wait"]) == 0
    assert "wait" in capsys.readouterr().out
    refused_option(
        ["arena", "baselines", "--policy", "genius"], capsys, "--policy", "one of 'oracle'", "got 'genius'"
    )


def test_random_baseline_is_seeded():
    cases = frozen_cases()[:3]
    first = evaluate_baselines(["random"], cases, random_repeats=2)
    assert first == evaluate_baselines(["random"], cases, random_repeats=2)
    assert summarize_baselines(first)["random"]["optimal_rate"] >= 0.0


def test_solve_command_matches_seed0_vector(capsys):
    assert main(["arena", "solve", "--seed", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fingerprint"] == "c78728229b5a83897d402b58885c2220577290596e4fa726b8f68fa7fad835fa"
    assert out["reward"] == 3.800000000000001 and out["optimal_count"] == 1 and out["explored"] == 1260
    assert out["canonical_assignment"]["blue-0"] == {"type": "SCAN", "target": "V55"}
    refused_option(["arena", "solve", "--seed", "0", "--style", "reckless"], capsys, "--style", "'balanced'")
    refused_option(["arena", "solve", "--seed", "0", "--size", "8"], capsys, "--size", "got '8'")


def test_prompt_command(capsys):
    assert main(["arena", "prompt", "--seed", "0", "--agent", "blue-1"]) == 0
    messages = json.loads(capsys.readouterr().out)
    assert [m["role"] for m in messages] == ["system", "user"]
    body = json.loads(messages[1]["content"])
    assert body["phase"] == "BROADCAST" and body["observation"]["self"]["id"] == "blue-1"
    # default permutation p = seed + agent index = 1: the sorted list rotated by one
    assert body["legal_actions"][0] == {"id": "A0", "type": "CAPTURE", "target": "V84"}
    refused_option(["arena", "prompt", "--seed", "0", "--agent", "red-0"], capsys, "--agent", "got 'red-0'")
