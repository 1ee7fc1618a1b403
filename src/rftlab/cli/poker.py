"""``rftlab poker ...``: play reference strategies on the CLBench schedule; build RFT datasets.

rftlab poker play --policy exploit --schedule default --json
rftlab poker dataset --n 64 --out data/poker64.jsonl
rftlab poker launch data/specs/poker_seed.json --backend tinker   # GRPO through the Tinker API
"""

from __future__ import annotations

import argparse
import json
import sys

from rftlab.cli import UsageError, add_root_argument, print_json
from rftlab.cli.argtypes import NON_NEGATIVE_INT, ArgType, deferred, integer, one_of

POLICIES = ("random", "call", "exploit")


def _schedules() -> ArgType[str]:
    from rftlab.envs.poker import SCHEDULES

    return one_of(SCHEDULES)


def register(subparsers: argparse._SubParsersAction) -> None:
    poker = subparsers.add_parser(
        "poker", help="exploitable poker: play reference strategies, build datasets"
    )
    sub = poker.add_subparsers(dest="poker_command", metavar="SUBCOMMAND")
    sub.required = True

    play = sub.add_parser(
        "play", help="play a reference strategy over a schedule: BB/hand per stage and overall"
    )
    play.add_argument("--policy", choices=POLICIES, required=True, help="reference strategy to play")
    play.add_argument(
        "--schedule",
        type=deferred(_schedules),
        default="default",
        help="default | quick_test | calling_station_then_fit_or_fold",
    )
    play.add_argument(
        "--runs",
        type=integer(1, 5, note="the schedule's permuted runs"),
        default=1,
        help="permuted runs to play (default 1: the canonical order)",
    )
    play.add_argument(
        "--seed", type=NON_NEGATIVE_INT, default=0, help="policy seed (random and exploit strategies)"
    )
    play.add_argument("--json", action="store_true", help="print JSON")
    play.set_defaults(func=_play)

    ds = sub.add_parser(
        "dataset", help="eval-protocol rows for RFT, one per row id (opponent and cards from it)"
    )
    ds.add_argument("--n", type=integer(1, 100_000), required=True, help="number of rows (1..100000)")
    ds.add_argument("--out", required=True, help="output JSONL file")
    ds.add_argument(
        "--hands", type=integer(1, 200), default=16, help="hands per rollout (default 16, as upstream)"
    )
    ds.set_defaults(func=_dataset)

    launch = sub.add_parser(
        "launch",
        help="Fireworks: preflight, then dataset + RFT job (see --dry-run); tinker: GRPO through the Tinker API",
    )
    launch.add_argument("spec", help="poker arm spec JSON (data/specs/poker_*.json)")
    launch.add_argument(
        "--backend",
        choices=("fireworks", "tinker"),
        help="where the arm runs (default: the spec's backend field, else fireworks)",
    )
    launch.add_argument(
        "--base-model",
        help="tinker backend: the base model (default: rftlab/tiny-qwen3-agent on a local target, the spec's "
        "model under its Tinker name on hosted Tinker)",
    )
    launch.add_argument(
        "--dry-run", action="store_true", help="print the Prime->Fireworks mapping and the commands"
    )
    add_root_argument(launch)
    launch.add_argument("--account-id", help="Fireworks account id (default: $FIREWORKS_ACCOUNT_ID)")
    launch.add_argument("--json", action="store_true", help="print the plan or the run as JSON")
    from rftlab.cli.arm import add_set_argument
    from rftlab.cli.fireworks import add_failed_job_arguments

    add_set_argument(launch)

    add_failed_job_arguments(launch)
    launch.set_defaults(func=_launch)


def _play(args: argparse.Namespace) -> int:
    from rftlab.studies.poker import schedule_summary

    summary = schedule_summary(args.policy, args.schedule, args.runs, args.seed)
    if args.json:
        print_json(summary)
        return 0
    o = summary["overall"]
    print(f"{args.policy} on {args.schedule}: {o['bb_per_hand']:+.3f} BB/hand "
          f"[{o['ci95'][0]:+.3f}, {o['ci95'][1]:+.3f}] over {o['hands']} deals, {summary['runs']} run(s)")  # fmt: skip
    for s in summary["stages"]:
        print(f"  stage {s['stage']} {s['opponent']:<17} {s['hands']:>3} hands  {s['bb_per_hand']:+.3f} "
              f"[{s['ci95'][0]:+.3f}, {s['ci95'][1]:+.3f}]")  # fmt: skip
    return 0


def _dataset(args: argparse.Namespace) -> int:
    from rftlab.rollout.poker.dataset import dataset_rows
    from rftlab.runs import OutputPathError, atomic_write_text, check_output_path

    try:
        out = check_output_path(args.out, "--out")
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None
    text = "".join(json.dumps(row) + "\n" for row in dataset_rows(args.n, hands=args.hands))
    # atomic (a kill or a full disk leaves the old file, never cut JSONL) and checked for credentials
    atomic_write_text(out, text, make_parents=False, where=f"--out {args.out}")
    print(f"wrote {args.n} rows -> {args.out}", file=sys.stderr)
    return 0


def _launch(args: argparse.Namespace) -> int:
    from rftlab.cli.fireworks import launch_or_plan
    from rftlab.launch.overrides import override_spec
    from rftlab.launch.poker.spec import load_poker_arm_spec, prime_mapping
    from rftlab.studies.poker import fireworks_launcher

    try:
        spec = override_spec(load_poker_arm_spec(args.spec), args.overrides)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    backend = args.backend or spec.backend or "fireworks"
    if args.base_model and backend != "tinker":
        raise UsageError("--base-model is for --backend tinker")
    if backend == "tinker":
        return _launch_tinker(spec, args)
    launcher = fireworks_launcher(args.account_id)
    mapping = prime_mapping(spec)
    notes = ["Prime/verifiers setting -> Fireworks"] + [
        f"  {m['prime']} = {m['value']}  ->  {m['fireworks']}" for m in mapping
    ]
    return launch_or_plan(launcher, spec, args, notes=notes, extra={"mapping": mapping})


def _launch_tinker(spec, args: argparse.Namespace) -> int:
    from rftlab.cli.arm import provenance
    from rftlab.launch.poker.spec import load_poker_arm_spec
    from rftlab.studies.poker import launch_arm

    if args.dry_run:
        raise UsageError("--dry-run shows the Fireworks plan; the tinker backend has none")
    print(f"{spec.arm}: tinker backend: {spec.epochs} epochs (or reuse a finished run)", file=sys.stderr)
    try:
        done = launch_arm(
            spec,
            "tinker",
            args.root,
            provenance=provenance(load_poker_arm_spec(args.spec), args.overrides),
            **({"base_model": args.base_model} if args.base_model else {}),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    ref = done.ref
    out = {
        "run_dir": str(ref.path),
        "run_id": ref.run_id,
        "arm": ref.arm,
        "backend": ref.backend,
        "state": done.status.state,
        "reused": done.reused,
    }
    if args.json:
        print_json(out)
    else:
        print(f"launched {spec.arm}: {ref.path}")
    return 0
