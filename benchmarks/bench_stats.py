"""Time every noninferiority bound on n = 1319 paired items and a 10,000-replication coverage run.

Run: ``.venv/bin/python benchmarks/bench_stats.py [--reps 10000] [--n 1319]``. Prints one table:
per bound, the time of one evaluation on one data set, the time of the coverage run (decisions on
``reps`` simulated data sets at the null boundary theta = -margin, discordance rate 0.2) and the
error rate it found (should be <= alpha up to Monte Carlo error).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rftlab.analysis.noninferiority import METHODS, bound_result
from rftlab.analysis.power import DiscordanceModel, null_error_rate, simulate_paired_differences


def best_time(fn, repeat: int = 5) -> float:
    """Best wall time of ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1319)
    parser.add_argument("--reps", type=int, default=10_000)
    parser.add_argument("--margin", type=float, default=0.03)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--discordance", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    d = simulate_paired_differences(args.n, DiscordanceModel.from_difference(0.0, args.discordance), 1, rng)[
        0
    ]
    print(
        f"n = {args.n}, alpha = {args.alpha}, margin = {args.margin}, coverage reps = {args.reps}, "
        f"discordance = {args.discordance}\n"
    )
    print(
        f"| {'bound':<27} | {'one data set (ms)':>17} | {'coverage run (s)':>16} | {'error rate':>10} | {'MC se':>6} |"
    )
    print(f"|{'-' * 29}|{'-' * 19}|{'-' * 18}|{'-' * 12}|{'-' * 8}|")
    total = 0.0
    for method in METHODS:
        one = best_time(lambda m=method: bound_result(m, d, args.margin, args.alpha))
        start = time.perf_counter()
        result = null_error_rate(method, args.n, args.margin, args.discordance, args.alpha, args.reps, rng)
        coverage_seconds = time.perf_counter() - start
        total += coverage_seconds
        print(
            f"| {method:<27} | {1000 * one:>17.2f} | {coverage_seconds:>16.2f} | {result.rate:>10.4f} | "
            f"{result.mc_se:>6.4f} |"
        )
    print(f"\ntotal coverage time: {total:.1f} s")


if __name__ == "__main__":
    main()
