"""``rftlab fireworks ...``: launch a spectrum arm as a Fireworks RFT job and follow it into the run store.

    rftlab fireworks launch data/specs/spectrum_probe.json --dry-run      # print the exact commands
    rftlab fireworks upload-evaluator data/specs/spectrum_probe.json      # eval-protocol upload, staged
    rftlab fireworks launch data/specs/spectrum_probe.json                # preflight, evaluator, dataset, job
    rftlab fireworks launch SPEC --resume | --new-attempt                 # after the spec's job FAILED
    rftlab fireworks poll runs/spectrum_memory/probe/<run_id> --every 60  # until done; resumable

The key comes from ``FIREWORKS_API_KEY`` and the account from ``--account-id`` or ``FIREWORKS_ACCOUNT_ID``;
firectl gets it from a private auth file, never on its command line (``--key-via``, see
``rftlab.launch.firectl``).

``poll`` prints one status line per poll on stderr and, at the end, the outcome (``--json``: an object).
Its exit code always matches what it printed, ``--once`` included: 0 the run finished (the job completed;
with ``--once``, also a job still pending or running), 1 the job failed or was cancelled (or the launch
never created it), 3 stopped on a suspected stall or on poll errors (the run stays resumable: run the same
command again).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from rftlab.cli import UsageError, add_root_argument, print_json
from rftlab.cli.argtypes import ArgType, deferred, number


def _poll_interval() -> ArgType[float]:
    from rftlab.launch.fireworks import MIN_POLL_INTERVAL_S

    return number(ge=MIN_POLL_INTERVAL_S, unit="seconds")


def register(subparsers: argparse._SubParsersAction) -> None:
    fw = subparsers.add_parser("fireworks", help="launch and follow Fireworks RFT jobs (firectl)")
    sub = fw.add_subparsers(dest="fireworks_command", metavar="SUBCOMMAND")
    sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--account-id", help="Fireworks account id (default: $FIREWORKS_ACCOUNT_ID)")
        p.add_argument("--style", choices=["noun-verb", "verb-noun"], default="noun-verb",
                       help="firectl command spelling your binary accepts (default: noun-verb)")  # fmt: skip
        p.add_argument("--key-via", choices=["auth-file", "argv"], default="auth-file",
                       help="how firectl gets the key: a private 0600 auth file (default) or --api-key on its "
                       "command line, readable by every local user (only for a firectl that ignores the file)")  # fmt: skip
        p.add_argument("--via", choices=["firectl", "sdk"], default="firectl",
                       help="firectl through subprocess (default), or the fireworks-ai SDK over HTTPS (the W&B key "
                       "then travels in a request body, not on a command line; $FIREWORKS_BASE_URL picks the API, "
                       "e.g. 'rftlab serve fireworks')")  # fmt: skip

    launch = sub.add_parser("launch", help="preflight, create the dataset and the RFT job, record the run")
    launch.add_argument("spec", help="arm spec JSON (data/specs/spectrum_*.json)")
    add_root_argument(launch)
    launch.add_argument("--dry-run", action="store_true", help="print the exact commands; run nothing")
    launch.add_argument("--json", action="store_true", help="print the plan or the run as JSON")
    add_failed_job_arguments(launch)
    common(launch)
    launch.set_defaults(func=_launch)

    upload = sub.add_parser("upload-evaluator", help="stage the evaluator and run 'eval-protocol upload'")
    upload.add_argument("spec", help="spectrum or poker arm spec JSON (data/specs/*.json)")
    common(upload)
    upload.set_defaults(func=_upload)

    poll = sub.add_parser("poll", help="poll a launched run until it ends, recording every epoch")
    poll.add_argument("run_dir", help="the run folder printed by 'launch'")
    poll.add_argument("--every", type=deferred(_poll_interval), default=60.0,
                      help="seconds between polls (default: 60; at least 5)")  # fmt: skip
    poll.add_argument("--stall-after", type=number(gt=0, unit="seconds"), default=1800.0,
                      help="stop after this many seconds without progress (default: 1800)")  # fmt: skip
    poll.add_argument("--dataset-grace", type=number(ge=0, unit="seconds"), default=600.0,
                      help="after the job completes, seconds to wait for its epoch datasets before finishing "
                      "the run without the missing ones (default: 600)")  # fmt: skip
    poll.add_argument("--once", action="store_true", help="poll once, record what is ready, and exit")
    poll.add_argument("--json", action="store_true", help="print the final state as JSON")
    common(poll)
    poll.set_defaults(func=_poll)


def add_failed_job_arguments(parser: argparse.ArgumentParser) -> None:
    """``--resume`` / ``--new-attempt``: what a launch does when the spec's job ended without completing
    (without either, it stops and says so). Shared by every family that launches on Fireworks."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--resume", dest="failed_job", action="store_const", const="resume",
                       help="the spec's job FAILED: resume it (firectl rftj resume) and record this run "
                       "as its next attempt")  # fmt: skip
    group.add_argument("--new-attempt", dest="failed_job", action="store_const", const="new-attempt",
                       help="the spec's job ended without completing: create a new job (id suffix -a<n>) in "
                       "a new run linked to the failed one")  # fmt: skip
    parser.set_defaults(failed_job="refuse")


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
    if getattr(args, "via", "firectl") == "sdk":
        from rftlab.launch.fireworks_sdk import sdk_launcher

        return sdk_launcher(account_id=args.account_id)
    from rftlab.launch.fireworks import FireworksLauncher

    return FireworksLauncher(account_id=args.account_id, style=args.style, key_via=args.key_via)


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
                print_json({**(extra or {}), **plan.to_dict()})
                return 0
            print(f"# arm {spec.arm} (spec sha256 {spec.sha256()[:12]}), job {plan.job_id}; nothing is run")
            for note in notes or []:
                print(f"# {note}")
            if getattr(args, "via", "firectl") == "sdk":
                print(
                    "# the fireworks-ai SDK sends $FIREWORKS_API_KEY in an HTTPS header, never on a command line"
                )
            elif plan.key_via == "auth-file":
                print(
                    "# firectl reads $FIREWORKS_API_KEY from a private auth file (HOME=<a 0700 temporary folder>, "
                    ".fireworks/auth.ini 0600), never from its command line"
                )
            for warning in plan.warnings:
                print(f"# WARNING: {warning}")
            for argv in plan.commands:
                print(shlex.join(argv).replace("'$FIREWORKS_API_KEY'", '"$FIREWORKS_API_KEY"'))
            return 0
        ref = launcher.launch(spec, root=args.root, failed_job=getattr(args, "failed_job", "refuse"))
    except (LaunchRefused, FirectlError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    out = {"run_dir": str(ref.path), "run_id": ref.run_id, "arm": ref.arm, "backend": ref.backend}
    if args.json:
        print_json(out)
    else:
        print(f"launched {spec.arm}: {ref.path}")
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
    if record.get("skipped"):
        print(f"{record['skipped']} (arm {spec.arm})")
        return 0
    if record["stdout"].strip():
        print(record["stdout"].rstrip())
    print(
        f"uploaded evaluator {record['evaluator_id']} for arm {spec.arm} ({shlex.join(record['argv'][1:])})"
    )
    return 0


def _poll(args: argparse.Namespace) -> int:
    from rftlab.launch.fireworks import LaunchRefused, poll_outcome
    from rftlab.runs import CorruptRunError, load_run
    from rftlab.runs.secrets import redact_text
    from rftlab.types import RunRef

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
        result = launcher.watch(
            ref,
            every=args.every,
            stall_after=args.stall_after,
            dataset_grace=args.dataset_grace,
            sleep=_sleep,
            on_status=_status_line(record.arm, load_total(path)),
            max_polls=1 if args.once else None,
        )
    except LaunchRefused as exc:
        raise UsageError(str(exc)) from None
    status = result.status
    outcome = poll_outcome(result, once=args.once)
    code = outcome.exit_code
    payload = {
        "state": status.state,
        "epochs_done": status.progress,
        "epochs": status.total,
        "message": redact_text(status.message),
        "epochs_recorded": result.epochs_recorded,
        "missing_epochs": result.missing_epochs,
        "incomplete_epochs": result.incomplete_epochs,
        "stalled": result.stalled,
        "exit_code": code,
    }
    if args.json:
        print_json(payload)
    else:
        print(f"{record.arm}: {outcome.words}, epochs recorded {result.epochs_recorded}")
        if status.message:
            print(redact_text(status.message), file=sys.stderr)
    return code


def _sleep(seconds: float) -> None:
    """The pause between polls (a seam for tests)."""
    import time

    time.sleep(seconds)


def _status_line(arm: str, total: int | None):
    """One stderr line per poll: time, state, epoch/total, percent, epochs recorded, any problem."""
    import time

    from rftlab.runs.secrets import redact_text

    def show(result) -> None:
        status = result.status
        provider = status.provider or {}
        epoch = provider.get("epoch")
        percent = provider.get("percent")
        parts = [
            time.strftime("%H:%M:%S"),
            f"{arm}: poll {result.polls}",
            str(provider.get("state") or status.state).lower() or status.state,
            f"epoch {'?' if epoch is None else epoch}/{total if total is not None else '?'}",
            f"{'?' if percent is None else percent}%",
            f"recorded {result.epochs_recorded}",
        ]
        if status.state == "unknown" or provider.get("problems") or result.missing_epochs:
            parts.append(" ".join(redact_text(status.message).split())[:300])
        print(" | ".join(parts), file=sys.stderr, flush=True)

    return show


def load_total(path: Path) -> int | None:
    from rftlab.runs import load_run

    epochs = load_run(path).record.spec.get("epochs")
    return int(epochs) if isinstance(epochs, int) and not isinstance(epochs, bool) else None
