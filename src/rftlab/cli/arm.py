"""``rftlab arm ...``: launch an arm spec on a backend and look at its status.

    rftlab arm launch data/specs/spectrum_C.json --backend local [--root runs]
    rftlab arm status data/specs/spectrum_C.json [--root runs]

The ``local`` backend trains the simulated policy (``rftlab.launch.local``) in-process; re-launching a
finished spec reuses its run. The ``fireworks`` backend needs the Fireworks launcher
(``rftlab.launch.fireworks``).
"""

from __future__ import annotations

import argparse
import json

from rftlab.cli import UsageError

BACKENDS = ("local", "fireworks")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("arm", help="launch experiment arms (spec files) and check their runs")
    sub = parser.add_subparsers(dest="arm_command", metavar="SUBCOMMAND")
    sub.required = True

    p = sub.add_parser("launch", help="run an arm spec (reuses a finished run of the same spec)")
    p.add_argument("spec", help="arm spec JSON file (data/specs/spectrum_*.json)")
    p.add_argument("--backend", choices=BACKENDS, default="local")
    p.add_argument("--root", default="runs", help="run store root (default: runs)")
    p.add_argument("--force", action="store_true", help="start a new run even if a finished one exists")
    p.add_argument("--no-resume", action="store_true", help="do not resume an unfinished run of the spec")
    p.add_argument("--json", action="store_true", help="print the run reference and status as JSON")
    p.set_defaults(func=_cmd_launch)

    p = sub.add_parser("status", help="status of the newest run of an arm spec")
    p.add_argument("spec", help="arm spec JSON file")
    p.add_argument("--backend", choices=BACKENDS, default="local")
    p.add_argument("--root", default="runs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_status)


def _load(path: str):
    from rftlab.launch.specs import load_arm_spec

    try:
        return load_arm_spec(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def get_launcher(backend: str):
    """The launcher of ``backend`` (``rftlab.launch.launcher_for``); a bad name is a usage error."""
    from rftlab.launch import launcher_for

    try:
        return launcher_for(backend)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _report(ref, status, as_json: bool, origin: str = "") -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "experiment": ref.experiment,
                    "arm": ref.arm,
                    "run_id": ref.run_id,
                    "path": str(ref.path),
                    "backend": ref.backend,
                    "state": status.state,
                    "progress": status.progress,
                    "total": status.total,
                    "message": status.message,
                },
                indent=2,
            )
        )
    else:
        what = ", simulated policy" if ref.backend == "local" else ""
        print(f"{ref.arm}: {status.state} ({status.progress}/{status.total} epochs{what}) {ref.path}{origin}")


def _cmd_launch(args: argparse.Namespace) -> int:
    spec = _load(args.spec)
    launcher = get_launcher(args.backend)
    from rftlab.runs import RunStore

    before = RunStore(args.root).find_run(spec.experiment, spec.arm, spec.to_dict(), "finished", args.backend)
    try:
        ref = launcher.launch(
            spec, root=args.root, resume=not args.no_resume, **({"force": True} if args.force else {})
        )
    except Exception as exc:  # a launcher's refusal (no key, failed preflight, firectl error) is one line
        if type(exc).__name__ not in ("LaunchRefused", "FirectlError", "PreflightFailed"):
            raise
        raise UsageError(str(exc)) from None
    status = launcher.poll(ref)
    reused = before is not None and before.path == ref.path and not args.force
    _report(ref, status, args.json, " (reused a finished run)" if reused else "")
    return 0 if status.state in ("completed", "running", "pending") else 1


def _cmd_status(args: argparse.Namespace) -> int:
    from rftlab.runs import CorruptRunError, RunStore
    from rftlab.types import RunRef

    spec = _load(args.spec)
    store = RunStore(args.root)
    try:
        runs = [
            r
            for r in store.runs(spec.experiment, spec.arm)
            if r.record.spec_sha256 == spec.sha256() and r.record.backend == args.backend
        ]
    except CorruptRunError as exc:
        raise UsageError(str(exc)) from None
    if not runs:
        raise UsageError(f"no {args.backend} run of {args.spec} under {args.root}")
    run = max(runs, key=lambda r: (r.record.created_at, r.path.name))
    ref = RunRef(spec.experiment, spec.arm, run.run_id, run.path, args.backend)
    _report(ref, get_launcher(args.backend).poll(ref), args.json)
    return 0
