"""``rftlab plan``: register an analysis plan, amend it as a new version, check it (docs/statistics.md §8).

``register`` records the SHA-256 of a committed plan file's exact bytes and the earliest commit holding
them in ``data/registrations/<plan>.json``; ``amend`` records a changed (and committed) plan as the next
version, keeping the old ones, with the diff; ``check`` prints one line per check and exits 1 when any
fails (with ``--experiment``, also one line per run: does it record this plan and come after it?).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rftlab.cli import UsageError, add_root_argument, print_json
from rftlab.cli.argtypes import existing_file

PLAN_FILE = existing_file("plan file")

PLAN_DESCRIPTION = (
    "Pre-registration that can be audited. A plan file is registered by the SHA-256 of its exact bytes and "
    "the earliest commit that holds them (so the file must be committed first); a changed plan is an "
    "amendment, a new version with the diff from the last one, and the old versions are kept. A study "
    "refuses a plan whose bytes match no registered version. Records: data/registrations/<plan>.json."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    plan = subparsers.add_parser(
        "plan", help="register, amend and check pre-registered analysis plans", description=PLAN_DESCRIPTION
    )
    sub = plan.add_subparsers(dest="plan_command", metavar="SUBCOMMAND")
    sub.required = True

    reg = sub.add_parser("register", help="record the first version of a committed plan file")
    reg.add_argument(
        "plan_file", type=PLAN_FILE, help="the plan file (committed; its bytes are what is registered)"
    )
    _common(reg)
    reg.set_defaults(func=_register)

    amend = sub.add_parser("amend", help="record a changed, committed plan file as its next version")
    amend.add_argument("plan_file", type=PLAN_FILE, help="the changed plan file (committed)")
    amend.add_argument(
        "--from", dest="from_version", type=int, required=True, help="the version it amends (the latest)"
    )
    _common(amend)
    amend.set_defaults(func=_amend)

    check = sub.add_parser("check", help="one line per check of a plan's registration; exit 1 if any fails")
    check.add_argument("plan_file", type=PLAN_FILE, help="the plan file to check")
    check.add_argument(
        "--registry", default=None, help="folder of the registration records (default: data/registrations)"
    )
    check.add_argument("--experiment", default=None, help="also check every run of this experiment")
    add_root_argument(check)
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(func=_check)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--name", default=None, help="the plan's name in the records (default: the file's stem)"
    )
    parser.add_argument(
        "--note", default="", help="what the record should say (for example that it was made after the fact)"
    )
    parser.add_argument(
        "--registry", default=None, help="folder of the registration records (default: data/registrations)"
    )
    parser.add_argument("--json", action="store_true", help="print the recorded version as JSON")


def _report(args: argparse.Namespace, version, name: str) -> int:
    from rftlab.runs.registration import registry_path

    if args.json:
        print_json(version.model_dump(mode="json"))
        return 0
    where = registry_path(name, args.registry)
    print(
        f"registered plan {name!r} v{version.version}: {version.file}, sha256 {version.sha256}, first "
        f"committed in {version.commit} at {version.commit_time}; recorded in {where} (commit that file)"
    )
    if version.diff is not None:
        changed = sum(
            1 for line in version.diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
        )
        print(f"amends v{version.version - 1} (sha256 {version.previous_sha256}); {changed} changed lines")
    return 0


def _register(args: argparse.Namespace) -> int:
    from rftlab.runs.registration import RegistrationError, register_plan

    path: Path = args.plan_file
    name = args.name or path.stem
    try:
        version = register_plan(path, name=name, note=args.note, registry_dir=args.registry)
    except RegistrationError as exc:
        raise UsageError(str(exc)) from None
    return _report(args, version, name)


def _amend(args: argparse.Namespace) -> int:
    from rftlab.runs.registration import RegistrationError, amend_plan

    path: Path = args.plan_file
    name = args.name or path.stem
    try:
        version = amend_plan(path, args.from_version, name=name, note=args.note, registry_dir=args.registry)
    except RegistrationError as exc:
        raise UsageError(str(exc)) from None
    return _report(args, version, name)


def _check(args: argparse.Namespace) -> int:
    from rftlab.runs.plan_audit import plan_checks

    path: Path = args.plan_file
    checks = plan_checks(path, registry_dir=args.registry, root=args.root, experiment=args.experiment)
    if args.json:
        print_json([{"ok": ok, "check": text} for ok, text in checks])
    else:
        for ok, text in checks:
            print(f"{'ok  ' if ok else 'FAIL'} {text}")
    return 0 if all(ok for ok, _ in checks) else 1
