"""The whole local GS1 study from scratch: wall time per phase and peak memory, against the budget the
project sets for it (≤ 10 min, ≤ 4 GiB on 2 cores) and against a baseline measured in the same run.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_gs1_study.py            # full size (several minutes)
    PYTHONPATH=src .venv/bin/python benchmarks/bench_gs1_study.py --quick    # smoke size

In a fresh temporary run store it builds the local backend (the supervised warm start included), runs
``rftlab.studies.gs1.run_study`` (preflight, pilot and gate, both arms, the untrained base, both
decisions) and the design numbers of both rules (``rftlab.studies.gs1.design``), then prints each phase's
share. The baseline is one greedy evaluation pass of the base model over the test items, timed in the same
process after the study: the unit of work every evaluation arm does, so the study's cost reads as a number
of evaluation passes whatever the machine's load. ``--gate`` lets the arms run even if the activation gate
fails (to time the full study either way).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

BUDGET_S = 600.0
BUDGET_MIB = 4096.0


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke sizes (no warm start)")
    parser.add_argument("--gate", action="store_true", help="train and decide even if the gate fails")
    parser.add_argument("--reps", type=int, default=None, help="Monte Carlo replications of the design")
    args = parser.parse_args()

    from rftlab.launch.gs1.backend import make_gs1_backend
    from rftlab.runs.store import RunStore
    from rftlab.studies.gs1 import DEFAULT_SPEC, REVISED_SPEC, base_config, design, load_spec, run_study
    from rftlab.training.gs1.rl_loop import evaluate, resolve

    spec, revised = load_spec(DEFAULT_SPEC), load_spec(REVISED_SPEC)
    root = Path(tempfile.mkdtemp(prefix="bench-gs1-")) / "runs"
    phases: dict[str, float] = {}

    t0 = time.perf_counter()
    backend = make_gs1_backend("local", spec, root=root, quick=args.quick)
    phases["backend + warm start"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    summary = run_study(
        backend,
        spec,
        root,
        despite_failed_gate=args.gate,
        store=RunStore(root),
        revised=revised,
    )
    phases["study (preflight, pilot, arms, base, decisions)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for rule_spec in (spec, revised):
        design(rule_spec, candidates=rule_spec is revised, reps=args.reps)
    phases["design numbers (both rules)"] = time.perf_counter() - t0
    peak = peak_rss_mib()

    # the baseline: one greedy evaluation pass of the untrained base over the same test items
    cfg = base_config(backend)
    client = resolve(
        backend.service_client.create_lora_training_client(cfg.base_model, rank=cfg.lora_rank, seed=0)
    )
    sampler = resolve(client.save_weights_and_get_sampling_client())
    t0 = time.perf_counter()
    rows = evaluate(cfg, sampler, backend.renderer, backend.task)
    unit = time.perf_counter() - t0

    total = sum(phases.values())
    print(f"local GS1 study, {'quick' if args.quick else 'full'} size, fresh run store")
    print(f"  baseline: one greedy evaluation pass of {len(rows)} items: {unit:.1f} s")
    for name, seconds in phases.items():
        print(f"  {name:<48} {seconds:7.1f} s   {seconds / unit:6.1f} x the evaluation pass")
    print(
        f"  {'total':<48} {total:7.1f} s   {total / unit:6.1f} x   (budget {BUDGET_S:.0f} s: {total / BUDGET_S:.2f})"
    )
    print(
        f"  peak memory (max RSS of this process): {peak:.0f} MiB (budget {BUDGET_MIB:.0f}: {peak / BUDGET_MIB:.2f})"
    )
    d = summary.decision
    print(f"  stopped: {summary.stopped}" if summary.stopped is not None else f"  decision: {d.decision}")
    for name, info in summary.runs.items():
        print(f"  {name}: {info.origin}")
    if d is not None:  # the numbers a rebuild must reproduce (the study is seeded)
        print(
            f"  accuracy: base {d.base_accuracy:.4f}, grpo_gs8 {d.baseline_accuracy:.4f}, "
            f"gs1_kernel {d.treatment_accuracy:.4f}"
        )
        for dec in d.decisions():
            c = dec.rule.primary
            print(f"  {c.method}: lower {c.lower:+.4f}, decision {dec.decision}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
