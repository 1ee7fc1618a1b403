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
from rftlab.cli.argtypes import file_suffix

CLEAN_DESCRIPTION = (
    "Remove the temporary files that rftlab's atomic writers left when they were killed (SIGKILL, power "
    "loss), at most 5 folders below --root. Only names exactly as the writers make them count: "
    "'.<file name>.<pid>-<8 lowercase hex digits>.rftlab-tmp' (a regular file, or a staging folder of the "
    "same name), whose writer process is gone and which belong to you. Anything else is never touched: a "
    "file that merely resembles the pattern, a name with a pid no process can have, a symlink, another "
    "user's file, and every temporary whose writer is still running."
)


COMPARE_DESCRIPTION = (
    "Compare two or more runs: each run's metric per epoch and its final value, the mean of each numeric "
    "field of eval.jsonl, and for every pair whose rollouts have the same row ids and band seeds (the same "
    "rows and epoch salts) the paired contrast left − right of the metric: mean difference and slope per "
    "epoch with a cluster-robust 95%% interval (rows as clusters) and the sign test over rows. A pair that "
    "cannot be paired says why. Runs of one spec hash on different backends are flagged (cross-backend)."
)


TRACK_DESCRIPTION = (
    "Send every run's metric rows (of --root, or one experiment or arm) to the experiment trackers, with "
    "the run's tags (run id, spec hash, backend, arm, family, git commit) and its spec's fields as params. "
    "Live tracking (RFTLAB_TRACKING) sends rows as they are appended; this sends what it missed, or a "
    "store made before. MLflow gets only the points its run lacks (safe to repeat); its store is "
    "$MLFLOW_TRACKING_URI, else the project's mlruns/mlflow.db. See live curves with: mlflow ui "
    "--backend-store-uri sqlite:///mlruns/mlflow.db (from the project folder)."
)


FIGURE_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def register(subparsers: argparse._SubParsersAction) -> None:
    runs = subparsers.add_parser(
        "runs",
        help="list and compare runs, export their metrics, send them to a tracker, clean stale temporaries",
    )
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

    compare = sub.add_parser(
        "compare",
        help="runs or arms side by side: metrics per epoch, final values, paired contrasts, same spec "
        "across backends",
        description=COMPARE_DESCRIPTION,
    )
    compare.add_argument(
        "names",
        nargs="+",
        metavar="RUN_OR_ARM",
        help="a run folder, a run id, or [EXPERIMENT/]ARM[@BACKEND] (the newest finished run of the arm)",
    )
    add_root_argument(compare)
    compare.add_argument(
        "--metric",
        default="reward",
        help="the metric shown per epoch and contrasted row by row (default: reward)",
    )
    compare.add_argument("--json", action="store_true", help="print the whole comparison as JSON")
    compare.add_argument(
        "--figure",
        metavar="FILE",
        type=file_suffix(FIGURE_FORMATS),
        help="also draw the comparison to FILE (.png, .svg or .pdf)",
    )
    compare.set_defaults(func=_compare)

    track = sub.add_parser(
        "track",
        help="send the store's metric rows to MLflow and/or W&B (what live tracking missed)",
        description=TRACK_DESCRIPTION,
    )
    add_root_argument(track)
    track.add_argument("--experiment", help="only this experiment")
    track.add_argument("--arm", help="only this arm")
    track.add_argument(
        "--to",
        metavar="TRACKERS",
        help="mlflow, wandb or mlflow,wandb (default: $RFTLAB_TRACKING when it names trackers, else mlflow)",
    )
    track.add_argument("--json", action="store_true", help="print what was sent as JSON")
    track.set_defaults(func=_track)

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
    elif rows:
        print(f"{'EXPERIMENT':<20} {'ARM':<16} {'RUN ID':<28} {'BACKEND':<10} STATUS")
        for row in rows:
            print(
                f"{row['experiment']:<20} {row['arm']:<16} {row['run_id']:<28} {row['backend']:<10} {row['status']}"
            )
    else:
        only = f" of experiment {args.experiment}" if args.experiment else ""
        print(f"no runs{only} under {root}", file=sys.stderr)
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


def _compare(args: argparse.Namespace) -> int:
    from rftlab.analysis.compare import compare_runs, resolve_runs
    from rftlab.runs import CorruptRunError

    root = _root(args.root)
    if len(args.names) < 2:
        raise UsageError("compare needs at least two runs or arms")
    if args.figure:
        _check_figure(args.figure)
    try:
        result = compare_runs(resolve_runs(root, args.names), metric=args.metric)
        series = result.metric(args.metric)
    except (ValueError, CorruptRunError) as exc:
        raise UsageError(" ".join(str(exc).split())) from None
    if args.json:
        print_json(result.to_dict())
    else:
        print(_comparison_text(result, series))
    if args.figure:
        _save_figure(result, args.metric, args.figure)
    return 0


def _check_figure(path: str) -> None:
    from rftlab.runs import OutputPathError, check_output_path

    try:
        check_output_path(path, "--figure")
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None


def _save_figure(result, metric: str, path: str) -> None:
    import io

    from rftlab.analysis.compare import comparison_figure
    from rftlab.runs import atomic_write_bytes

    buffer = io.BytesIO()
    comparison_figure(result, metric).savefig(
        buffer, format=FIGURE_FORMATS[Path(path).suffix.lower()], dpi=120
    )
    atomic_write_bytes(path, buffer.getvalue(), where=path)
    print(f"figure written to {path}", file=sys.stderr)


def _comparison_text(result, series) -> str:
    from rftlab.analysis.display import number

    names = [r.label for r in result.runs]
    width = max(8, *(len(n) for n in names)) + 2
    lines = ["runs:"]
    lines += [
        f"  {r.label} = {r.experiment}/{r.arm}/{r.run_id} ({r.backend}, {r.status}, spec {r.spec_sha256[:12]})"
        for r in result.runs
    ]
    for group in result.same_spec:
        where = (
            "on different backends (" + ", ".join(group.backends) + ")"
            if group.cross_backend
            else "on one backend"
        )
        lines.append(f"same spec {group.spec_sha256[:12]} {where}: {', '.join(group.labels)}")
    lines += ["", f"{series.metric} per epoch", f"{'epoch':<8}" + "".join(f"{n:>{width}}" for n in names)]
    for k, epoch in enumerate(series.epochs):
        lines.append(f"{epoch:<8}" + "".join(f"{number(v[k]):>{width}}" for v in series.values))
    lines.append(f"{'final':<8}" + "".join(f"{number(v):>{width}}" for v in series.final))
    if result.evaluation:
        lines += [
            "",
            "evaluation (mean over eval.jsonl items)",
            f"{'field':<16}" + "".join(f"{n:>{width}}" for n in names),
        ]
        for e in result.evaluation:
            lines.append(f"{e.field:<16}" + "".join(f"{number(v):>{width}}" for v in e.means))
        lines += [_eval_line(c) for c in result.eval_contrasts]
    lines += [
        "",
        f"paired contrasts of {result.contrast_metric} (rows matched by row id and band; rows as clusters)",
    ]
    lines += [_contrast_line(c) for c in result.contrasts]
    return "\n".join(lines)


def _eval_line(c) -> str:
    from rftlab.analysis.display import interval, number
    from rftlab.analysis.paired import format_p

    if not c.paired:
        return f"  {c.left} − {c.right} ({c.field}): not paired: {c.reason}"
    return (
        f"  {c.left} − {c.right} ({c.field}, paired by item): {number(c.mean_difference, 4, signed=True)} "
        f"{round(100 * c.level)}% CI {interval(*c.ci, signed=True, digits=4)}, p = {format_p(c.p)} "
        f"({c.n_items} items); better / worse / tied {c.sign_positive} / {c.sign_negative} / {c.sign_ties}, "
        f"sign test p = {format_p(c.sign_p)}"
    )


def _contrast_line(c) -> str:
    from rftlab.analysis.display import interval, number
    from rftlab.analysis.paired import format_p

    if not c.paired:
        return f"  {c.left} − {c.right}: not paired: {c.reason}"
    level = f"{round(100 * c.level)}%"
    text = (
        f"  {c.left} − {c.right}: mean {number(c.mean_difference, 4, signed=True)} {level} CI "
        f"{interval(*c.mean_ci, signed=True, digits=4)}, p = {format_p(c.mean_p)} "
        f"({c.n_rows} rows × {c.n_epochs} epochs)"
    )
    if c.slope is not None:
        text += (
            f"; slope {number(c.slope, 4, signed=True)}/epoch {interval(*c.slope_ci, signed=True, digits=4)}, "
            f"p = {format_p(c.slope_p)}"
        )
    return text + (
        f"; rows better / worse / tied {c.sign_positive} / {c.sign_negative} / {c.sign_ties}, "
        f"sign test p = {format_p(c.sign_p)}"
    )


def _track(args: argparse.Namespace) -> int:
    from rftlab.runs import RunStore
    from rftlab.runs.tracking import (
        TrackerUnavailableError,
        TrackingSettingError,
        backfill,
        selected_trackers,
    )

    root = _root(args.root)
    if args.to is not None:
        try:
            names = selected_trackers(root, {"RFTLAB_TRACKING": args.to}) if args.to.strip() else ()
        except TrackingSettingError:
            names = ()
        if not names:
            raise UsageError(f"--to {args.to!r}: give mlflow, wandb or mlflow,wandb")
    else:
        try:
            names = selected_trackers(root) or ("mlflow",)
        except TrackingSettingError as exc:
            raise UsageError(str(exc)) from None
    runs, problems = RunStore(root).scan(args.experiment, args.arm)
    try:
        sent = backfill(runs, names)
    except TrackerUnavailableError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json([vars(s) for s in sent])
    else:
        for s in sent:
            print(f"{s.tracker:<7} {s.key}: {s.rows} row(s), {s.points} new metric value(s)")
    print(f"sent {len(runs)} run(s) to {', '.join(names)}", file=sys.stderr)
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
