"""The exploitable-poker study: the driver the notebook (``06_poker``) and the CLI (``rftlab poker``) both call.

``make_strategy`` builds a reference strategy by name, ``schedule_summary`` plays it over a CLBench
schedule and summarises BB per hand with intervals over deals, ``fireworks_launcher`` is the Fireworks
launcher with the poker preflight and dataset rows (what ``rftlab poker launch`` runs and the notebook's
plan shows). Bad input raises ``ValueError``.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- rewards: ``rftlab.rewards.poker``
- envs: ``rftlab.envs.poker`` (engine, opponents, schedules, prompt rendering, task, env)
- policies: ``rftlab.policies.poker`` (reference strategies, chat adapter)
- rollout: ``rftlab.rollout.poker`` (play, dataset rows, McpGym server, scoring); entry modules
  ``rftlab.rollout.eval_entries.poker_mcp_eval``, ``rftlab.rollout.eval_entries.poker_mcp_server``
- launch: ``rftlab.launch.poker`` (arm spec and the Prime → Fireworks mapping, preflight)
- analysis: ``rftlab.analysis.poker``
- studies: ``rftlab.studies.poker``
- cli: ``rftlab.cli.poker``
"""

from __future__ import annotations

from typing import Any

from rftlab.analysis.poker import bb_summary
from rftlab.envs.poker import SCHEDULES
from rftlab.policies.poker.reference import POKER_POLICIES
from rftlab.rollout.poker.play import hand_rows, play_runs

MAX_RUNS = 5  # a CLBench schedule has five permuted runs


def make_strategy(name: str, seed: int = 0, **options: Any):
    """The reference strategy ``name`` (``random``, ``call`` or ``exploit``); ``call`` takes no seed."""
    if name not in POKER_POLICIES:
        raise ValueError(f"unknown strategy {name!r}: choose one of {', '.join(POKER_POLICIES)}")
    if seed < 0:
        raise ValueError("the seed must be >= 0")
    return POKER_POLICIES[name]() if name == "call" else POKER_POLICIES[name](seed=seed, **options)


def schedule_summary(name: str, schedule: str = "default", runs: int = 1, seed: int = 0) -> dict[str, Any]:
    """``name`` played over the first ``runs`` permuted runs of ``schedule``: BB per hand overall and by
    stage, with 95% intervals over deals (``rftlab.analysis.poker.bb_summary``)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r}: choose one of {', '.join(SCHEDULES)}")
    if not 1 <= runs <= MAX_RUNS:
        raise ValueError(f"runs must be between 1 and {MAX_RUNS} (the schedule's permuted runs)")
    policy = make_strategy(name, seed)
    rows = hand_rows(play_runs(policy, schedule=schedule, runs=range(runs), policy_seed=seed))
    return {"policy": name, "schedule": schedule, **bb_summary(rows)}


def fireworks_launcher(account_id: str | None = None):
    """The Fireworks launcher of poker arms: the poker preflight and the poker dataset rows."""
    from rftlab.launch.fireworks import FireworksLauncher
    from rftlab.launch.poker.preflight import poker_preflight
    from rftlab.rollout.poker.dataset import dataset_rows

    return FireworksLauncher(
        account_id=account_id,
        preflight=poker_preflight,
        dataset_rows=lambda s: dataset_rows(s.rows, hands=s.hands, thinking=s.thinking, reward=s.reward),
    )
