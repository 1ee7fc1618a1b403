"""Whole-build timings of ``python -m rftlab.reports``: serial against parallel, and a rebuild with nothing
changed against a build from scratch, all measured in this run on the same notebooks.

Three builds of the same notebooks into fresh temporary report folders, each a separate process (as
``make reports`` runs it): ``--jobs 1`` (the baseline), ``--jobs N`` (default: one per core), then the parallel
build's folder once more with nothing changed (every report skipped). Prints the seconds of each and the
ratios, and checks that the serial and the parallel reports are byte-identical (the build log aside). Quick
(smoke) size by default; ``--full`` builds full-size reports, each build into its own empty temporary run store, which
takes as long as ``make reports`` from an empty store, twice.

    .venv/bin/python benchmarks/bench_reports.py                       # every notebook, quick size
    .venv/bin/python benchmarks/bench_reports.py notebooks/00_methods.py notebooks/04_arena_env.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(notebooks: list[str], out: Path, jobs: int, quick: bool, env: dict[str, str]) -> float:
    cmd = [sys.executable, "-m", "rftlab.reports", *notebooks, "--out", str(out), "--jobs", str(jobs)]
    if quick:
        cmd.append("--quick")
    started = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def contents(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "build.log"
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks (default: every notebooks/NN_name.py)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="parallel workers")
    parser.add_argument("--full", action="store_true", help="full-size reports (slow) instead of quick")
    args = parser.parse_args()
    notebooks = args.notebooks or sorted(str(p) for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    with tempfile.TemporaryDirectory(prefix="rftlab-bench-reports-") as tmp:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        serial_env = {**env, "RFTLAB_RUNS_ROOT": str(Path(tmp) / "store-serial")}
        parallel_env = {**env, "RFTLAB_RUNS_ROOT": str(Path(tmp) / "store-parallel")}
        serial, parallel = Path(tmp) / "serial", Path(tmp) / "parallel"
        quick = not args.full
        t_serial = build(notebooks, serial, 1, quick, serial_env)
        t_parallel = build(notebooks, parallel, args.jobs, quick, parallel_env)
        t_again = build(notebooks, parallel, args.jobs, quick, parallel_env)
        identical = contents(serial) == contents(parallel)
    size = "full" if args.full else "quick"
    print(f"{len(notebooks)} notebooks, {size} size, {args.jobs} workers")
    print(f"  serial (--jobs 1, baseline)      {t_serial:7.1f} s   1.00x")
    print(f"  parallel (--jobs {args.jobs})             {t_parallel:7.1f} s   {t_parallel / t_serial:.2f}x")
    print(f"  again, nothing changed           {t_again:7.1f} s   {t_again / t_serial:.3f}x")
    print(f"  serial and parallel reports byte-identical: {'yes' if identical else 'NO'}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
