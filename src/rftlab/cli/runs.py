"""``rftlab runs``: look at the run store from the shell."""

from __future__ import annotations

import argparse
import json

from rftlab.cli import UsageError
from rftlab.runs import CorruptRunError, RunStore, load_metrics


def register(subparsers: argparse._SubParsersAction) -> None:
    runs = subparsers.add_parser("runs", help="list runs and export their metrics")
    sub = runs.add_subparsers(dest="runs_command", metavar="SUBCOMMAND")
    sub.required = True

    listing = sub.add_parser("list", help="one line per run: experiment, arm, run id, backend, status")
    listing.add_argument("--root", default="runs", help="run store root (default: runs)")
    listing.add_argument("--experiment")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_list)

    metrics = sub.add_parser("metrics", help="the tidy metrics table across runs, as CSV or JSON lines")
    metrics.add_argument("--root", default="runs")
    metrics.add_argument("--experiment")
    metrics.add_argument("--arm")
    metrics.add_argument("--json", action="store_true", help="JSON lines instead of CSV")
    metrics.set_defaults(func=_metrics)


def _list(args: argparse.Namespace) -> int:
    try:
        runs = RunStore(args.root).runs(args.experiment)
    except CorruptRunError as exc:
        raise UsageError(str(exc)) from None
    rows = [
        {
            "experiment": r.record.experiment,
            "arm": r.record.arm,
            "run_id": r.record.run_id,
            "backend": r.record.backend,
            "status": r.record.status,
            "spec_sha256": r.record.spec_sha256,
            "path": str(r.path),
        }
        for r in runs
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(
                f"{row['experiment']:<20} {row['arm']:<16} {row['run_id']:<28} {row['backend']:<10} {row['status']}"
            )
    return 0


def _metrics(args: argparse.Namespace) -> int:
    try:
        frame = load_metrics(args.root, args.experiment, args.arm)
    except CorruptRunError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(frame.to_json(orient="records", lines=True), end="")
    else:
        print(frame.to_csv(index=False), end="")
    return 0
