"""Hands per second of the poker env with a reference strategy, against the bare engine.

Baseline (same run): the bare ``texasholdem`` engine playing the same 120 deals of the default schedule
with the same decisions (the same opponent functions; the system always calls or checks), with no
prompts, metadata or records — the cost floor of the wrapper. Both sides use the same seeded deals.

    .venv/bin/python benchmarks/bench_poker.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from texasholdem import ActionType

from rftlab.envs.poker.engine import SYSTEM, deal_from_state
from rftlab.envs.poker.env import PokerEnv
from rftlab.envs.poker.opponents import OPPONENTS
from rftlab.envs.poker.schedule import SCHEDULES, schedule_deals, stage_at
from rftlab.policies.poker.reference import AlwaysCall


def bare_engine(deals, stages) -> int:
    hands = 0
    for i, deal in enumerate(deals):
        game = deal_from_state(deal.state)
        bot = OPPONENTS[stages[stage_at(stages, i)].variant]
        while game.is_hand_running():
            if game.current_player == SYSTEM:
                owes = game.chips_to_call(SYSTEM) > 0
                game.take_action(ActionType.CALL if owes else ActionType.CHECK)
            else:
                action, total = bot(game)
                game.take_action(action, total=total)
        hands += 1
    return hands


def wrapped_env() -> int:
    env, policy = PokerEnv(), AlwaysCall()
    obs = env.reset(0)
    while not obs.done:
        obs = env.step(policy.act(obs)).observation
    return env.metrics()["hands_played"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    stages = SCHEDULES["default"]
    deals = schedule_deals(stages)
    results = {}
    for name, fn in (
        ("bare engine", lambda: bare_engine(deals, stages)),
        ("PokerEnv + always-call", wrapped_env),
    ):
        rates = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            hands = fn()
            rates.append(hands / (time.perf_counter() - start))
        results[name] = statistics.median(rates)
        print(f"{name:<24} {results[name]:8.0f} hands/s (median of {args.repeats}, {hands} hands each)")
    ratio = results["PokerEnv + always-call"] / results["bare engine"]
    print(f"wrapper / bare engine: {ratio:.2f}x the bare engine's rate (cost of prompts, metadata, records)")


if __name__ == "__main__":
    main()
