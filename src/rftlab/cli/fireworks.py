"""``rftlab fireworks ...``: launch a spectrum arm as a Fireworks RFT job and follow it into the run store.

    rftlab fireworks launch data/specs/spectrum_probe.json --dry-run      # print the exact commands
    rftlab fireworks upload-evaluator data/specs/spectrum_probe.json      # eval-protocol upload, staged
    rftlab fireworks launch data/specs/spectrum_probe.json                # preflight, dataset, job, run folder
    rftlab fireworks poll runs/spectrum_memory/probe/<run_id> --every 60  # until done; resumable

The key comes from ``FIREWORKS_API_KEY`` and the account from ``--account-id`` or ``FIREWORKS_ACCOUNT_ID``.
Exit codes of ``poll``: 0 finished, 1 the job failed or was cancelled, 3 stopped on a suspected stall or
repeated poll errors (the run stays resumable: run the same command again).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from rftlab.cli import UsageError, add_root_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    fw = subparsers.add_parser("fireworks", help="launch and follow Fireworks RFT jobs (firectl)")
    sub = fw.add_subparsers(dest="fireworks_command", metavar="SUBCOMMAND")
    sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--account-id", help="Fireworks account id (default: $FIREWORKS_ACCOUNT_ID)")
        p.add_argument("--style", choices=["noun-verb", "verb-noun"], default="noun-verb",
                       help="firectl command spelling your binary accepts (default: noun-verb)")  # fmt: skip

    launch = sub.add_parser("launch", help="preflight, create the dataset and the RFT job, record the run")
    launch.add_argument("spec", help="arm spec JSON (data/specs/spectrum_*.json)")
    add_root_argument(launch)
    launch.add_argument("--dry-run", action="store_true", help="print the exact commands; run nothing")
    launch.add_argument("--json", action="store_true", help="print the plan or the run as JSON")
    common(launch)
    launch.set_defaults(func=_launch)

    upload = sub.add_parser("upload-evaluator", help="stage the evaluator and run 'eval-protocol upload'")
    upload.add_argument("spec", help="spectrum or poker arm spec JSON (data/specs/*.json)")
    common(upload)
    upload.set_defaults(func=_upload)

    poll = sub.add_parser("poll", help="poll a launched run until it ends, recording every epoch")
    poll.add_argument("run_dir", help="the run folder printed by 'launch'")
    poll.add_argument("--every", type=float, default=60.0, help="seconds between polls (default: 60)")
    poll.add_argument("--stall-after", type=float, default=1800.0,
                      help="stop after this many seconds without progress (default: 1800)")  # fmt: skip
    poll.add_argument("--once", action="store_true", help="poll once, record what is ready, and exit")
    poll.add_argument("--json", action="store_true", help="print the final state as JSON")
    common(poll)
    poll.set_defaults(func=_poll)


def _spec(path: str):
    from rftlab.launch.spectrum.spec import load_arm_spec

    try:
        return load_arm_spec(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _arm_spec(path: str):
    """A spectrum or poker arm spec (by its ``experiment`` field): both upload through the same code."""
    from rftlab.launch.specs import load_spec_file

    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = None
    if isinstance(raw, dict) and raw.get("experiment") == "poker":
        from rftlab.launch.poker.spec import PokerArmSpec

        try:
            return load_spec_file(path, PokerArmSpec)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return _spec(path)


def _launcher(args: argparse.Namespace):
    from rftlab.launch.fireworks import FireworksLauncher

    return FireworksLauncher(account_id=args.account_id, style=args.style)


def launch_or_plan(
    launcher, spec, args: argparse.Namespace, notes: list[str] | None = None, extra=None
) -> int:
    """``--dry-run``: print the exact commands (copyable shell, or JSON with ``extra``), run nothing; else
    launch and print the run folder. A launcher's refusal is one line (exit 2). Shared by every family
    that launches on Fireworks."""
    from rftlab.launch.firectl import FirectlError
    from rftlab.launch.fireworks import LaunchRefused

    try:
        if args.dry_run:
            plan = launcher.plan(spec)
            if args.json:
                print(json.dumps({**(extra or {}), **plan.to_dict()}, indent=2))
                return 0
            print(f"# arm {spec.arm} (spec sha256 {spec.sha256()[:12]}), job {plan.job_id}; nothing is run")
            for note in notes or []:
                print(f"# {note}")
            for warning in plan.warnings:
                print(f"# WARNING: {warning}")
            for argv in plan.commands:
                print(shlex.join(argv).replace("'$FIREWORKS_API_KEY'", '"$FIREWORKS_API_KEY"'))
            return 0
        ref = launcher.launch(spec, root=args.root)
    except (LaunchRefused, FirectlError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    out = {"run_dir": str(ref.path), "run_id": ref.run_id, "arm": ref.arm, "backend": ref.backend}
    print(json.dumps(out, indent=2) if args.json else f"launched {spec.arm}: {ref.path}")
    return 0


def _launch(args: argparse.Namespace) -> int:
    return launch_or_plan(_launcher(args), _spec(args.spec), args)


def _upload(args: argparse.Namespace) -> int:
    import os

    from rftlab.launch.fireworks import ACCOUNT_ENV, LaunchRefused, upload_evaluator

    spec = _arm_spec(args.spec)
    account = args.account_id or os.environ.get(ACCOUNT_ENV)
    if not account:
        raise UsageError(f"no Fireworks account id: pass --account-id or set {ACCOUNT_ENV}")
    try:
        record = upload_evaluator(spec, account)
    except LaunchRefused as exc:
        raise UsageError(str(exc)) from None
    if record["stdout"].strip():
        print(record["stdout"].rstrip())
    print(
        f"uploaded evaluator {record['evaluator_id']} for arm {spec.arm} ({shlex.join(record['argv'][1:])})"
    )
    return 0


def _poll(args: argparse.Namespace) -> int:
    from rftlab.launch.fireworks import LaunchRefused
    from rftlab.runs import CorruptRunError, load_run
    from rftlab.types import RunRef

    if args.every < 0 or args.stall_after <= 0:
        raise UsageError("--every must be >= 0 and --stall-after > 0 (seconds)")
    path = Path(args.run_dir)
    try:
        handle = load_run(path)
    except CorruptRunError as exc:
        raise UsageError(f"{args.run_dir}: not a readable run folder ({exc})") from None
    record = handle.record
    if record.backend != "fireworks":
        raise UsageError(f"{args.run_dir} is a {record.backend} run, not a Fireworks run")
    ref = RunRef(record.experiment, record.arm, record.run_id, path, record.backend)
    launcher = _launcher(args)
    launcher.account_id = launcher.account_id or record.provider.get("account_id")
    try:
        if args.once:
            status = launcher.poll(ref)
            result = None
        else:
            result = _watch(launcher, ref, args)
            status = result.status
    except LaunchRefused as exc:
        raise UsageError(str(exc)) from None
    payload = {
        "state": status.state,
        "epochs_done": status.progress,
        "epochs": status.total,
        "message": status.message,
        "epochs_recorded": None if result is None else result.epochs_recorded,
        "stalled": bool(result and result.stalled),
    }
    if args.json:
        print(json.dumps(payload, indent=2))
    else:
        print(f"{record.arm}: {status.state}, epochs recorded {payload['epochs_recorded']}")
        if status.message:
            print(status.message, file=sys.stderr)
    if result is None:
        return 0
    if result.stalled or status.state == "unknown":
        return 3
    return 0 if status.state == "completed" else 1


def _watch(launcher, ref, args):
    from tqdm.auto import tqdm

    total = load_total(ref.path)
    bar = tqdm(total=total, desc=f"{ref.arm} epochs", unit="epoch", disable=not sys.stderr.isatty())

    def on_status(status) -> None:
        if status.progress is not None:
            bar.n = min(int(status.progress), total or int(status.progress))
        bar.set_postfix_str(f"{status.provider.get('state', status.state)} {status.provider.get('percent')}%")
        bar.refresh()

    try:
        return launcher.watch(ref, every=args.every, stall_after=args.stall_after, on_status=on_status)
    finally:
        bar.close()


def load_total(path: Path) -> int | None:
    from rftlab.runs import load_run

    epochs = load_run(path).record.spec.get("epochs")
    return int(epochs) if isinstance(epochs, int) else None
