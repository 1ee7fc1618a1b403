"""Time every noninferiority bound on n = 1319 paired items and a 10,000-replication coverage run.

Run: ``.venv/bin/python benchmarks/bench_stats.py [--reps 10000] [--n 1319]``. Prints one table:
per bound, the time of one evaluation on one data set, the time of the coverage run (decisions on
``reps`` simulated data sets at the null boundary theta = -margin, discordance rate 0.2) and the
error rate it found (should be <= alpha up to Monte Carlo error), and the time to compute all ``reps``
lower bounds themselves (betting and Tango bisect for the bound; the coverage run tests -margin directly).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rftlab.analysis.noninferiority import METHODS, batch_lower_bounds, bound_result
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
    null = DiscordanceModel.from_difference(-args.margin, args.discordance)
    print(
        f"n = {args.n}, alpha = {args.alpha}, margin = {args.margin}, coverage reps = {args.reps}, "
        f"discordance = {args.discordance}\n"
    )
    header = [
        "bound",
        "one data set (ms)",
        "× hoeffding",
        "coverage run (s)",
        "× hoeffding",
        "error rate",
        "MC se",
        "all lower bounds (s)",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("-" * (len(h) + 2) for h in header) + "|")
    baseline: dict[str, float] = {}  # Hoeffding (METHODS[0]) is the baseline every ratio is taken against
    for method in METHODS:
        one = best_time(lambda m=method: bound_result(m, d, args.margin, args.alpha))
        start = time.perf_counter()
        result = null_error_rate(method, args.n, args.margin, args.discordance, args.alpha, args.reps, rng)
        coverage_seconds = time.perf_counter() - start
        start = time.perf_counter()
        for block in range(0, args.reps, 2500):
            size = min(2500, args.reps - block)
            batch_lower_bounds(method, simulate_paired_differences(args.n, null, size, rng), args.alpha)
        bounds_seconds = time.perf_counter() - start
        baseline.setdefault("one", one)
        baseline.setdefault("coverage", coverage_seconds)
        cells = [
            f"{method:<26}",
            f"{1000 * one:>17.2f}",
            f"{one / baseline['one']:>11.1f}",
            f"{coverage_seconds:>16.2f}",
            f"{coverage_seconds / baseline['coverage']:>11.1f}",
            f"{result.rate:>10.4f}",
            f"{result.mc_se:>5.4f}",
            f"{bounds_seconds:>20.2f}",
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
