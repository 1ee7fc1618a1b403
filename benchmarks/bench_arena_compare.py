"""Sign-flip randomisation test of ``rftlab arena compare`` (docs/arena.md §10.6): the library's bit-block
implementation against the literal one-``getrandbits(1)``-per-value loop, in the same run, on the 60 per-case
differences of two real evaluations (the scripted policy with and without its inbox).

Prints both timings, their ratio, and whether the p-values are equal (they must be).
Run: ``.venv/bin/python benchmarks/bench_arena_compare.py [--trials N]``.
"""

from __future__ import annotations

import argparse
import random
import time

from rftlab.analysis.paired import sign_flip_p_value
from rftlab.policies.arena.providers import ScriptedProvider
from rftlab.studies.arena import evaluate_frozen


def literal(diffs: list[float], trials: int) -> float:
    rng = random.Random(0)
    observed = sum(diffs) / len(diffs)
    if observed == 0:
        return 1.0
    count = 0
    for _ in range(trials):
        flipped = [d if rng.getrandbits(1) else -d for d in diffs]
        if abs(sum(flipped) / len(flipped)) >= abs(observed) - 1e-12:
            count += 1
    return (count + 1) / (trials + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000)
    args = parser.parse_args()
    base = evaluate_frozen(ScriptedProvider(use_inbox=False)).summary["per_case"]
    sft = evaluate_frozen(ScriptedProvider()).summary["per_case"]
    diffs = [s["generated_regret"] - b["generated_regret"] for b, s in zip(base, sft, strict=True)]
    start = time.perf_counter()
    slow = literal(diffs, args.trials)
    t_literal = time.perf_counter() - start
    start = time.perf_counter()
    fast = sign_flip_p_value(diffs, trials=args.trials)
    t_fast = time.perf_counter() - start
    print(f"{len(diffs)} differences, {args.trials} trials")
    print(f"literal loop   {t_literal:8.3f} s   p = {slow!r}")
    print(f"bit blocks     {t_fast:8.3f} s   p = {fast!r}")
    print(f"speed-up {t_literal / t_fast:.1f}x, p-values equal: {slow == fast}")


if __name__ == "__main__":
    main()
