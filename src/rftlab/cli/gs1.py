"""``rftlab gs1``: the GS1 kernel-baseline vs GRPO study (``data/specs/gs1_vs_grpo.json``).

    rftlab gs1 advantages --input BATCH.json --estimator group_mean|kernel_baseline [--bandwidth H] --json
    rftlab gs1 design [SPEC] [--discordance R ...] [--candidates] [--json]
    rftlab gs1 preflight [--backend local|tinker] [--root runs] [--out preflight.json] [--quick]
    rftlab gs1 run --arm grpo_gs8|gs1_kernel|both [--backend local|tinker] [--root runs] [--quick]
    rftlab gs1 decide --treatment GS1/eval.jsonl --baseline GRPO/eval.jsonl [--spec SPEC] [--json]

``design`` prints what a spec's decision rule can decide before anything runs (``rftlab.studies.gs1.design``);
``run`` calls the study driver ``rftlab.studies.gs1.run_study`` (preflight → pilot gate → arms → base →
decisions); this module parses arguments, turns the driver's ``ValueError`` into a usage error and prints.
Backend default: ``tinker`` when ``TINKER_BASE_URL`` or ``TINKER_API_KEY`` is set, else ``local``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rftlab.cli import UsageError, add_root_argument, print_json
from rftlab.cli.argtypes import ArgType, deferred, integer, number
from rftlab.launch.gs1 import ARMS, DEFAULT_SPEC, REVISED_SPEC, RUN_PLAN
from rftlab.runs.paths import display_path

if TYPE_CHECKING:  # the driver imports the statistics: each command imports it when it runs
    from rftlab.studies.gs1 import GS1StudySpec, GS1Summary

MAX_BANDWIDTH = 1e6  # far beyond any feature distance: the kernel is flat long before
MAX_WINDOW = 1_000_000


def _design_reps() -> ArgType[int]:
    from rftlab.analysis.gs1 import MAX_DESIGN_REPS

    return integer(100, MAX_DESIGN_REPS)


def _spec_message(path: str | Path, exc: Exception) -> str:
    """One line for a refused spec, naming the file once (pydantic's report becomes ``field: message``)."""
    from rftlab.analysis.io import validation_message

    text = validation_message(exc)
    return text if str(path) in text else f"{path}: {text}"


def load_spec(path: str | Path) -> GS1StudySpec:
    """The study spec, parsed once (its SHA-256 is ``spec.sha256``); a bad file is a usage error."""
    from rftlab.studies.gs1 import load_spec as load

    try:
        return load(path)
    except ValueError as exc:
        raise UsageError(_spec_message(path, exc)) from None


def load_run_plan(path: str | Path) -> Any:
    """The run-level plan (``RunLevelPlan``), parsed once; a bad file is a usage error."""
    from rftlab.studies.gs1 import load_run_plan as load

    try:
        return load(path)
    except ValueError as exc:
        raise UsageError(_spec_message(path, exc)) from None


def get_backend(backend: str | None, spec: GS1StudySpec, root: str, quick: bool):
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
    _register_advantages(sub)
    _register_design(sub)
    _register_preflight_and_run(sub)
    _register_decide(sub)


def _register_advantages(sub: argparse._SubParsersAction) -> None:
    adv = sub.add_parser("advantages", help="per-rollout advantages of a batch file")
    adv.add_argument("--input", required=True, help="JSON list of {prompt_id, reward, phi: [x, y], step}")
    adv.add_argument(
        "--estimator",
        required=True,
        choices=("group_mean", "kernel_baseline"),
        help="GRPO group mean, or the GS1 kernel baseline",
    )
    adv.add_argument(
        "--bandwidth",
        type=number(gt=0, le=MAX_BANDWIDTH),
        default=0.5,
        help="kernel bandwidth h (default 0.5)",
    )
    adv.add_argument(
        "--window",
        type=integer(1, MAX_WINDOW),
        default=256,
        help="sliding window in rollouts (default 256)",
    )
    adv.add_argument("--json", action="store_true", help="print JSON (the default is a table)")
    adv.set_defaults(func=advantages_command)


def _register_design(sub: argparse._SubParsersAction) -> None:
    des = sub.add_parser(
        "design", help="what the spec's decision rule can decide at its n, before any run (power)"
    )
    des.add_argument(
        "spec", nargs="?", default=str(DEFAULT_SPEC), help="study spec (default: the pre-registered one)"
    )
    des.add_argument(
        "--discordance",
        type=number(gt=0, le=1),
        nargs="+",
        default=None,
        help="discordance rates: share of items the arms disagree on (default 0.05 0.1 0.2)",
    )
    des.add_argument(
        "--candidates",
        action="store_true",
        help="also every finite-sample bound at the planning discordance, and the one the numbers choose",
    )
    des.add_argument(
        "--reps", type=deferred(_design_reps), default=None, help="Monte Carlo replications (default 6400)"
    )
    des.add_argument("--json", action="store_true", help="print JSON instead of a table")
    des.set_defaults(func=design_command)


def _register_preflight_and_run(sub: argparse._SubParsersAction) -> None:
    for name, helptext in (
        ("preflight", "correctness preflight (a)-(f); writes preflight.json"),
        ("run", "preflight, pilot gate, the arms, evaluation and the decision"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument(
            "--backend",
            choices=("local", "tinker"),
            default=None,
            help="default: tinker when TINKER_BASE_URL or TINKER_API_KEY is set, else local",
        )
        p.add_argument(
            "--spec", default=str(DEFAULT_SPEC), help="study spec (default data/specs/gs1_vs_grpo.json)"
        )
        add_root_argument(p)
        p.add_argument("--quick", action="store_true", help="smoke sizes (2 steps, 16 eval items)")
        p.add_argument("--json", action="store_true", help="print JSON")
        if name == "preflight":
            p.add_argument("--out", help="also copy preflight.json here")
            p.set_defaults(func=preflight_command)
        else:
            p.add_argument(
                "--arm", choices=(*ARMS, "both"), default="both", help="which arm(s) to train (default both)"
            )
            p.add_argument(
                "--despite-failed-gate",
                action="store_true",
                help="train and decide even if the activation gate fails (recorded; never the default)",
            )
            p.add_argument(
                "--revised-spec",
                default=str(REVISED_SPEC),
                help="a revised decision rule reported after the registered one (default: %(default)s)",
            )
            p.add_argument(
                "--run-plan",
                nargs="?",
                const=str(RUN_PLAN),
                default=None,
                metavar="PLAN",
                help="also train the run-level plan's other seeds of every arm and decide with the run as "
                f"the unit (as the notebook does; bare --run-plan: {display_path(RUN_PLAN)})",
            )
            p.set_defaults(func=run_command)


def _register_decide(sub: argparse._SubParsersAction) -> None:
    dec = sub.add_parser("decide", help="the spec's decision rule on two eval.jsonl files")
    dec.add_argument("--treatment", required=True, help="eval.jsonl of the treatment arm (gs1_kernel)")
    dec.add_argument("--baseline", required=True, help="eval.jsonl of the baseline arm (grpo_gs8)")
    dec.add_argument(
        "--spec",
        default=str(DEFAULT_SPEC),
        help="study spec with the decision rule (default data/specs/gs1_vs_grpo.json)",
    )
    dec.add_argument("--json", action="store_true", help="print JSON instead of a table")
    dec.set_defaults(func=decide_command)


# ---------------------------------------------------------------------------------------- commands


def advantages_command(args: argparse.Namespace) -> int:
    from rftlab.studies.gs1 import check_input_file
    from rftlab.training.gs1.advantages import advantages_for_rows, parse_batch_rows

    path = Path(args.input)
    try:
        check_input_file(path, "batch")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        rows = parse_batch_rows(json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as exc:
        raise UsageError(f"batch {args.input}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except ValueError as exc:
        raise UsageError(f"batch {args.input}: {exc}") from None
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


def design_command(args: argparse.Namespace) -> int:
    from rftlab.studies.gs1 import design

    spec = load_spec(args.spec)
    # a computation that is still running after 2 s says so (a refusal comes sooner and stays one line)
    slow = threading.Timer(
        2.0,
        lambda: print(
            "computing the design tables (a Monte Carlo rule takes about a minute; cached for the next run) ...",
            file=sys.stderr,
            flush=True,
        ),
    )
    slow.daemon = True
    try:
        out = design(
            spec,
            candidates=args.candidates,
            discordances=args.discordance,
            reps=args.reps,
            on_miss=slow.start,
        )
    except ValueError as exc:  # the message names the spec file (and the field)
        raise UsageError(_spec_message(args.spec, exc)) from None
    finally:
        slow.cancel()
    if args.json:
        print_json(out.to_dict())
        return 0
    d = out.design
    print(f"design of {spec.file_name} (sha256 {out.spec_sha256[:16]}…)")
    print(out.note)
    rows = out.table
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[c]).rjust(w) for c, w in zip(cols, widths, strict=True)))
    if out.candidates is not None:
        r = out.planning_discordance
        print(
            f"finite-sample bounds at discordance {r:g} (n = {d.n}, alpha {d.alpha:g}, margin {d.margin:g}):"
        )
        for c in out.candidates:
            null, zero = c.rows[0], c.rows[1]
            se = lambda row: "" if not row["reps"] else f" ± {row['mc_se']:.3f}"  # noqa: E731
            print(
                f"  {c.method:<28} P(noninferior) at {null['difference']:+.3f}: {null['p_noninferior']:.4f}{se(null)}"
                f"   at 0: {zero['p_noninferior']:.4f}{se(zero)}"
            )
        print(f"chosen by the design numbers: {out.chosen_method}")
    return 0


def preflight_command(args: argparse.Namespace) -> int:
    from rftlab.runs.paths import PROJECT_ROOT
    from rftlab.runs.store import RunStore
    from rftlab.studies.gs1 import closing_session, study_preflight, write_json
    from rftlab.training.gs1.rl_loop import ModelNotServedError, check_model_served, service_capabilities

    spec = load_spec(args.spec)
    backend = get_backend(args.backend, spec, args.root, args.quick)
    with closing_session(backend.service_client, "rftlab gs1 preflight"):
        try:
            for cfg in backend.arms.values():
                check_model_served(service_capabilities(backend.service_client), cfg.base_model)
        except ModelNotServedError as exc:
            raise UsageError(str(exc)) from None
        pre, path = study_preflight(backend, spec, RunStore(args.root, repo=PROJECT_ROOT))
    if args.out:
        write_json(Path(args.out), pre)
    if args.json:
        print_json(pre)
    else:
        for c in pre["checks"]:
            print(f"  {c['status'].upper():<8} {c['id']:<28} {c['detail']}")
        print(f"preflight {pre['status']} on {pre['backend']}: {path}")
    return 0 if pre["status"] == "passed" else 1


def run_command(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    revised = load_spec(args.revised_spec) if args.revised_spec else None
    plan = load_run_plan(args.run_plan) if args.run_plan else None
    backend = get_backend(args.backend, spec, args.root, args.quick)
    arms = ARMS if args.arm == "both" else (args.arm,)

    from rftlab.studies.gs1 import closing_session, run_study
    from rftlab.training.gs1.rl_loop import ModelNotServedError, ResumeError

    try:
        with closing_session(backend.service_client, "rftlab gs1 run"):
            summary = run_study(
                backend,
                spec,
                args.root,
                arms,
                args.despite_failed_gate,
                progress=print_step,
                revised=revised,
                plan=plan,
            )
    except (ModelNotServedError, ResumeError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(summary.to_dict())
    else:
        print_summary(summary)
    return 0 if summary.stopped is None else 1


def print_summary(summary: GS1Summary) -> None:
    """The study's outcome in a few lines (``rftlab gs1 run`` without ``--json``)."""
    pre = summary.preflight
    if pre is not None:
        print(f"preflight: {pre.status} ({pre.path})")
    if summary.gate is not None:
        print(
            f"activation gate: {'passed' if summary.gate.passed else 'FAILED'} "
            f"(bandwidth {summary.gate.bandwidth})"
        )
    for name, r in summary.runs.items():
        print(f"{name}: {r.path} ({r.origin})")
    if summary.despite_failed_gate:
        print("--despite-failed-gate was given: a failed gate would not have stopped the full runs")
    d = summary.decision
    if d is not None:
        for label, dec in zip(("pre-registered", "revised"), d.decisions(), strict=False):
            crit = dec.rule.primary
            print(
                f"decision ({label}, {dec.spec}): {dec.decision} for these seed-0 checkpoints "
                f"(mean diff {crit.statistic_mean:+.4f}, {crit.method} lower bound "
                f"{crit.lower:+.4f} vs margin {crit.margin})"
            )
        a = d.assay_sensitivity
        print(
            f"assay sensitivity: {a.control} - base {a.control_minus_base:+.4f}, Hoeffding lower "
            f"{a.hoeffding_lower:+.4f} vs margin {a.margin:g}: "
            f"{'established' if a.established else 'NOT established'}"
        )
    if summary.run_level is not None:
        main = summary.run_level.treatment_vs_control
        print(f"run level ({main.status}): {main.sentence()}")
        print(f"  {main.decision_sentence().replace('**', '')}")
    if summary.stopped is not None:
        print(f"stopped: {summary.stopped}")


def print_step(m: dict[str, Any]) -> None:
    """Progress of a full-arm training step on stderr, with any alert (``analysis.gs1.step_alerts``)."""
    alerts = "".join(f"; ALERT {a}" for a in m.get("alerts") or ())
    print(
        f"  {m.get('arm', '?')} step {m['step']}: reward {m['reward_mean']:.3f}, datums {m['n_datums']}{alerts}",
        file=sys.stderr,
    )


def decide_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.io import AnalysisInputError, validation_message
    from rftlab.studies.gs1 import check_input_file, decide

    spec = load_spec(args.spec)
    try:
        check_input_file(args.treatment, "--treatment")
        check_input_file(args.baseline, "--baseline")
        out = decide(spec, args.treatment, args.baseline)
    except (AnalysisInputError, ValueError) as exc:
        raise UsageError(validation_message(exc)) from None
    if args.json:
        print_json(out.to_dict())
        return 0
    crit = out.rule.primary
    print(
        f"GS1 decision: treatment {args.treatment} vs baseline {args.baseline}\n"
        f"n = {out.n} paired items; accuracy {out.treatment_accuracy:.4f} vs {out.baseline_accuracy:.4f}, "
        f"mean difference {crit.statistic_mean:+.4f}; noninferiority margin {crit.margin:+g}\n"
    )
    print(
        f"{'method':<34} {'status':<15} {'level':>6} {'seed':>5} {'lower':>9} {'upper':>9}  {'decision':<14} validity"
    )
    for row in out.bound_rows():
        status = str(row["status"]).split(":")[0]  # registered (in its spec) or exploratory
        print(
            f"{row['method']:<34} {status:<15} {row['one-sided level']:>6} {row['permutation seed']!s:>5} "
            f"{_fmt_bound(row['lower']):>9} {_fmt_bound(row['upper']):>9}  {row['decision']:<14} {row['validity']}"
        )
    print(f"\ndecision (pre-registered, {crit.method}): {out.decision}")
    return 0


def _fmt_bound(value: Any) -> str:
    """A bound as a fixed-width signed number (``n/a`` when a method gives none)."""
    if isinstance(value, int | float) and math.isfinite(value):
        return f"{value:+.4f}"
    return "n/a"
