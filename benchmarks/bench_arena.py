"""Arena oracle benchmark: exact joint-action solve time per frozen case, by graph size, and in total.

Compares the vectorised oracle (``solve_joint_action``) with the naive reference solver in the same run
(``solve_joint_action_bruteforce``: one full ``rules.step`` per joint action, no caching), and checks that
both return the same solution. Run: ``.venv/bin/python benchmarks/bench_arena.py [--naive-every K]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from rftlab.envs.arena.cases import frozen_cases
from rftlab.envs.arena.oracle import solve_joint_action, solve_joint_action_bruteforce
from rftlab.envs.arena.world import generate_state
from rftlab.policies.arena.scripted import deterministic_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--naive-every", type=int, default=1, help="time the naive solver on every K-th case")
    parser.add_argument("--repeats", type=int, default=3, help="best-of repeats for the fast solver")
    args = parser.parse_args()

    setups = []
    for case in frozen_cases():
        state = generate_state(case.seed, case.size)
        setups.append((case, state, deterministic_policy(state, "RED", case.style)))

    fast: dict[int, float] = {}
    naive: dict[int, float] = {}
    explored: dict[int, int] = {}
    for case, state, red in setups:
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            solution = solve_joint_action(state, "BLUE", red)
            best = min(best, time.perf_counter() - start)
        fast[case.index], explored[case.index] = best, solution.explored
        if case.index % args.naive_every == 0:
            start = time.perf_counter()
            reference = solve_joint_action_bruteforce(state, "BLUE", red)
            naive[case.index] = time.perf_counter() - start
            assert reference.reward == solution.reward, case
            assert reference.canonical_assignment == solution.canonical_assignment, case
            assert reference.action_options == solution.action_options, case

    print(
        f"{'size':>4} {'cases':>5} {'mean explored':>13} {'fast ms/case':>13} {'naive ms/case':>14} {'speed-up':>9}"
    )
    for size in (12, 13, 14):
        ids = [c.index for c, _, _ in setups if c.size == size]
        naive_ids = [i for i in ids if i in naive]
        f_ms = 1000 * statistics.fmean(fast[i] for i in ids)
        n_ms = 1000 * statistics.fmean(naive[i] for i in naive_ids)
        f_same = 1000 * statistics.fmean(fast[i] for i in naive_ids)
        print(
            f"{size:>4} {len(ids):>5} {statistics.fmean(explored[i] for i in ids):>13.1f} "
            f"{f_ms:>13.2f} {n_ms:>14.1f} {n_ms / f_same:>8.1f}x"
        )
    total_fast = sum(fast.values())
    total_naive = sum(naive.values())
    fast_same = sum(fast[i] for i in naive)
    print(f"total over {len(fast)} frozen cases: fast {total_fast:.3f} s (target < 20 s on one core)")
    print(
        f"naive on {len(naive)} cases: {total_naive:.2f} s vs fast {fast_same:.3f} s on the same cases "
        f"-> {total_naive / fast_same:.1f}x; joint actions explored: {sum(explored.values())}"
    )


if __name__ == "__main__":
    main()
