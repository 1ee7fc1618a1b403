"""``rftlab runs``: look at the run store from the shell.

A damaged run never hides the others: ``list`` and ``metrics`` print every readable run and report each
unreadable file on stderr (``rftlab: error: <path>: <problem>``), then exit 2. A ``--root`` that does
not exist (or is not a folder) is an error, not an empty table. Temporaries left by writers that were
killed (SIGKILL, power loss) are ignored by readers, mentioned by ``list`` and removed by ``clean``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rftlab.cli import UsageError, add_root_argument, print_json

CLEAN_DESCRIPTION = (
    "Remove the temporary files that rftlab's atomic writers left when they were killed (SIGKILL, power "
    "loss), at most 5 folders below --root. Only names exactly as the writers make them count: "
    "'.<file name>.<pid>-<8 lowercase hex digits>.rftlab-tmp' (a regular file, or a staging folder of the "
    "same name), whose writer process is gone and which belong to you. Anything else is never touched: a "
    "file that merely resembles the pattern, a name with a pid no process can have, a symlink, another "
    "user's file, and every temporary whose writer is still running."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    runs = subparsers.add_parser("runs", help="list runs, export their metrics, clean stale temporaries")
    sub = runs.add_subparsers(dest="runs_command", metavar="SUBCOMMAND")
    sub.required = True

    listing = sub.add_parser("list", help="one line per run: experiment, arm, run id, backend, status")
    add_root_argument(listing)
    listing.add_argument("--experiment", help="only this experiment")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=_list)

    metrics = sub.add_parser("metrics", help="the tidy metrics table across runs, as CSV or JSON lines")
    add_root_argument(metrics)
    metrics.add_argument("--experiment", help="only this experiment")
    metrics.add_argument("--arm", help="only this arm")
    metrics.add_argument("--json", action="store_true", help="JSON lines instead of CSV")
    metrics.set_defaults(func=_metrics)

    clean = sub.add_parser(
        "clean",
        help="remove temporary files left by rftlab writers that were killed (never a live writer's)",
        description=CLEAN_DESCRIPTION,
    )
    add_root_argument(clean)
    clean.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    clean.set_defaults(func=_clean)


def _root(value: str) -> Path:
    if not value.strip():
        raise UsageError("--root is empty; give the run store folder (default: the project's runs/)")
    root = Path(value)
    try:
        if not root.exists():
            raise UsageError(
                f"--root {value}: no such folder; give the run store folder (default: the project's runs/)"
            )
        if not root.is_dir():
            raise UsageError(f"--root {value} is a file, not a run store folder")
        next(root.iterdir(), None)
        if (root / "run.json").is_file():
            raise UsageError(
                f"--root {value} is one run's folder; give the store root (the folder above "
                "<experiment>/<arm>/<run_id>)"
            )
    except PermissionError:
        raise UsageError(f"--root {value}: cannot be read (permission denied)") from None
    except OSError as exc:
        raise UsageError(f"--root {value}: cannot be read ({exc.strerror or exc})") from None
    return root


def _report(problems: dict[str, str]) -> int:
    """Print one stderr line per unreadable file; exit 2 if there was any."""
    for path, why in problems.items():
        print(f"rftlab: error: {path}: {' '.join(why.split())}", file=sys.stderr)
    if problems:
        print(
            f"rftlab: error: {len(problems)} run file(s) could not be read; the other runs are listed",
            file=sys.stderr,
        )
    return 2 if problems else 0


def _list(args: argparse.Namespace) -> int:
    from rftlab.runs import RunStore, find_temporaries

    root = _root(args.root)
    runs, problems = RunStore(root).scan(args.experiment)
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
        print_json(rows)
    else:
        for row in rows:
            print(
                f"{row['experiment']:<20} {row['arm']:<16} {row['run_id']:<28} {row['backend']:<10} {row['status']}"
            )
    stale = [t for t in find_temporaries(root) if t.stale and t.ours]
    if stale:
        size = sum(t.size for t in stale)
        print(
            f"rftlab: note: {len(stale)} stale temporary file(s) ({size} bytes) from interrupted writers under "
            f"{root}; remove them with `rftlab runs clean --root {root}`",
            file=sys.stderr,
        )
    return _report(problems)


def _metrics(args: argparse.Namespace) -> int:
    from rftlab.runs import collect_metrics

    root = _root(args.root)
    frame, problems = collect_metrics(root, args.experiment, args.arm)
    if args.json:
        print(frame.to_json(orient="records", lines=True), end="")
    else:
        print(frame.to_csv(index=False), end="")
    return _report(problems)


def _clean(args: argparse.Namespace) -> int:
    from rftlab.runs import clean_temporaries, find_temporaries

    root = _root(args.root)
    removed = clean_temporaries(root, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for temp in removed:
        print(f"{verb} {temp.path} ({temp.size} bytes, writer pid {temp.pid or 'unknown'})")
    left = find_temporaries(root)
    live = [t for t in left if not t.stale]
    others = [t for t in left if t.stale and not t.ours]
    print(
        f"{verb} {len(removed)} stale temporary file(s); {len(live)} belong to writers still running"
        + (f"; {len(others)} stale one(s) of other users left for them" if others else ""),
        file=sys.stderr,
    )
    return 0
