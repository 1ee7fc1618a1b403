"""``rftlab gs1``: the GS1 kernel-baseline vs GRPO study (``data/specs/gs1_vs_grpo.json``).

    rftlab gs1 advantages --input BATCH.json --estimator group_mean|kernel_baseline [--bandwidth H] --json
    rftlab gs1 preflight [--backend local|tinker] [--root runs] [--out preflight.json] [--quick]
    rftlab gs1 run --arm grpo_gs8|gs1_kernel|both [--backend local|tinker] [--root runs] [--quick]
    rftlab gs1 decide --treatment GS1/eval.jsonl --baseline GRPO/eval.jsonl [--spec SPEC] [--json]

``run`` calls the study driver ``rftlab.studies.gs1.run_study`` (preflight → pilot gate → arms →
decision); this module parses arguments, turns the driver's ``ValueError`` into a usage error and prints.
Backend default: ``tinker`` when ``TINKER_API_KEY`` is set, else ``local``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from rftlab.cli import UsageError
from rftlab.studies.gs1 import (
    ARMS,
    DEFAULT_SPEC,
    decide,
    decision_table,
    run_study,
    study_preflight,
    write_json,
)


def load_spec(path: str | Path) -> tuple[dict[str, Any], str]:
    """The study spec and its SHA-256; a bad file is a usage error."""
    from rftlab.studies.gs1 import load_spec as load

    try:
        return load(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def get_backend(backend: str | None, spec: dict[str, Any], root: str, quick: bool):
    """The study's backend; one that cannot be built here is a usage error."""
    from rftlab.studies.gs1 import get_backend as build

    try:
        return build(backend, spec, root, quick)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    gs1 = subparsers.add_parser(
        "gs1", help="GS1 kernel baseline vs GRPO: estimators, preflight, runs, decision"
    )
    sub = gs1.add_subparsers(dest="gs1_command", metavar="GS1_COMMAND")
    sub.required = True

    adv = sub.add_parser("advantages", help="per-rollout advantages of a batch file")
    adv.add_argument("--input", required=True, help="JSON list of {prompt_id, reward, phi: [x, y], step}")
    adv.add_argument("--estimator", required=True, choices=("group_mean", "kernel_baseline"))
    adv.add_argument("--bandwidth", type=float, default=0.5, help="kernel bandwidth h (default 0.5)")
    adv.add_argument("--window", type=int, default=256, help="sliding window in rollouts (default 256)")
    adv.add_argument("--json", action="store_true", help="print JSON (the default is a table)")
    adv.set_defaults(func=advantages_command)

    for name, helptext in (
        ("preflight", "correctness preflight (a)-(e); writes preflight.json"),
        ("run", "preflight, pilot gate, the arms, evaluation and the decision"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--backend", choices=("local", "tinker"), default=None)
        p.add_argument("--spec", default=str(DEFAULT_SPEC))
        p.add_argument("--root", default="runs", help="run store root (default: runs)")
        p.add_argument("--quick", action="store_true", help="smoke sizes (2 steps, 16 eval items)")
        p.add_argument("--json", action="store_true")
        if name == "preflight":
            p.add_argument("--out", help="also copy preflight.json here")
            p.set_defaults(func=preflight_command)
        else:
            p.add_argument("--arm", choices=(*ARMS, "both"), default="both")
            p.add_argument("--despite-failed-gate", action="store_true")
            p.set_defaults(func=run_command)

    dec = sub.add_parser("decide", help="the spec's decision rule on two eval.jsonl files")
    dec.add_argument("--treatment", required=True)
    dec.add_argument("--baseline", required=True)
    dec.add_argument("--spec", default=str(DEFAULT_SPEC))
    dec.add_argument("--json", action="store_true")
    dec.set_defaults(func=decide_command)


# ---------------------------------------------------------------------------------------- commands


MAX_BANDWIDTH = 1e6  # far beyond any feature distance: the kernel is flat long before
MAX_WINDOW = 1_000_000


def advantages_command(args: argparse.Namespace) -> int:
    from rftlab.training.gs1.advantages import advantages_for_rows, parse_batch_rows

    path = Path(args.input)
    if not path.is_file():
        raise UsageError(f"batch {args.input}: file not found")
    try:
        rows = parse_batch_rows(json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as exc:
        raise UsageError(f"batch {args.input}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except ValueError as exc:
        raise UsageError(f"batch {args.input}: {exc}") from None
    if not (math.isfinite(args.bandwidth) and 0 < args.bandwidth <= MAX_BANDWIDTH):
        raise UsageError(
            f"--bandwidth must be a finite number in (0, {MAX_BANDWIDTH:g}], got {args.bandwidth}"
        )
    if not 1 <= args.window <= MAX_WINDOW:
        raise UsageError(f"--window must be an integer from 1 to {MAX_WINDOW}, got {args.window}")
    out = advantages_for_rows(rows, args.estimator, bandwidth=args.bandwidth, window=args.window)
    if args.json:
        payload = {
            "estimator": args.estimator,
            "bandwidth": args.bandwidth,
            "window": args.window,
            "rows": out,
        }
        try:  # strict JSON: a NaN or an infinity is a defect to report, never text that is not JSON
            print(json.dumps(payload, indent=2, allow_nan=False))
        except ValueError:
            raise UsageError(
                "the advantages are not finite for this batch; check its rewards and features"
            ) from None
        return 0
    print(f"{'step':>4} {'prompt_id':<16} {'reward':>7} {'baseline':>9} {'advantage':>10} {'eff_nb':>7}")
    for r in out:
        ess = "" if r["effective_neighbors"] is None else f"{r['effective_neighbors']:.2f}"
        print(
            f"{r['step']:>4} {str(r['prompt_id']):<16} {r['reward']:>7.3f} {r['baseline']:>9.4f} "
            f"{r['advantage']:>10.4f} {ess:>7}"
        )
    return 0


def preflight_command(args: argparse.Namespace) -> int:
    from rftlab.runs.store import RunStore
    from rftlab.training.gs1.rl_loop import ModelNotServedError, check_model_served, service_capabilities

    spec, sha = load_spec(args.spec)
    backend = get_backend(args.backend, spec, args.root, args.quick)
    try:
        for cfg in backend.arms.values():
            check_model_served(service_capabilities(backend.service_client), cfg.base_model)
    except ModelNotServedError as exc:
        raise UsageError(str(exc)) from None
    pre, path = study_preflight(backend, spec, sha, RunStore(args.root))
    if args.out:
        write_json(Path(args.out), pre)
    if args.json:
        print(json.dumps(pre, indent=2, default=str))
    else:
        for c in pre["checks"]:
            print(f"  {c['status'].upper():<8} {c['id']:<28} {c['detail']}")
        print(f"preflight {pre['status']} on {pre['backend']}: {path}")
    return 0 if pre["status"] == "passed" else 1


def run_command(args: argparse.Namespace) -> int:
    spec, _ = load_spec(args.spec)
    backend = get_backend(args.backend, spec, args.root, args.quick)
    arms = ARMS if args.arm == "both" else (args.arm,)

    def progress(m):
        print(
            f"  {m['arm']} step {m['step']}: reward {m['reward_mean']:.3f}, datums {m['n_datums']}",
            file=sys.stderr,
        )

    from rftlab.training.gs1.rl_loop import ModelNotServedError, ResumeError

    try:
        summary = run_study(backend, args.spec, args.root, arms, args.despite_failed_gate, progress=progress)
    except (ModelNotServedError, ResumeError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(f"preflight: {summary['preflight']['status']} ({summary['preflight']['path']})")
        if "gate" in summary:
            print(
                f"activation gate: {'passed' if summary['gate']['passed'] else 'FAILED'} "
                f"(bandwidth {summary['gate']['bandwidth']})"
            )
        for name, r in summary.get("runs", {}).items():
            print(f"{name}: {r['path']} ({r['origin']})")
        if "decision" in summary:
            d = summary["decision"]
            crit = d["rule"]["criteria"][0]
            print(
                f"decision: {d['decision']} (mean diff {crit['statistic_mean']:+.4f}, "
                f"Hoeffding LCB {crit['lower']:+.4f} vs margin {crit['margin']})"
            )
        if "stopped" in summary:
            print(f"stopped: {summary['stopped']}")
    return 0 if "stopped" not in summary else 1


def decide_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.io import AnalysisInputError

    load_spec(args.spec)
    for p in (args.treatment, args.baseline):
        if not Path(p).is_file():
            raise UsageError(f"{p}: file not found")
    try:
        out = decide(args.spec, args.treatment, args.baseline)
    except (AnalysisInputError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    for row in decision_table(out):
        print("  ".join(f"{k}={v}" for k, v in row.items()))
    print(f"decision: {out['decision']}")
    return 0
