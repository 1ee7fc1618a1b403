"""``rftlab arm ...``: launch an arm spec on a backend and look at its status.

    rftlab arm launch data/specs/spectrum_C.json --backend local [--root runs]
    rftlab arm launch data/specs/spectrum_C.json --backend tinker [--base-model rftlab/tiny-qwen3-agent]
    rftlab arm status data/specs/spectrum_C.json [--root runs]

The ``local`` backend trains the simulated policy (``rftlab.launch.spectrum.local``) in-process; re-launching a
finished spec reuses its run. The ``fireworks`` backend needs the Fireworks launcher
(``rftlab.launch.fireworks``). The ``tinker`` backend trains a language model through the Tinker API
(``rftlab.launch.spectrum.tinker``: ``TINKER_BASE_URL``'s server, hosted Tinker with ``TINKER_API_KEY``, else
the in-process local service). Without ``--backend`` the spec's ``backend`` field decides (default local).
"""

from __future__ import annotations

import argparse
import json
import sys

from rftlab.cli import UsageError, add_root_argument

BACKENDS = ("local", "fireworks", "tinker")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("arm", help="launch experiment arms (spec files) and check their runs")
    sub = parser.add_subparsers(dest="arm_command", metavar="SUBCOMMAND")
    sub.required = True

    p = sub.add_parser("launch", help="run an arm spec (reuses a finished run of the same spec)")
    p.add_argument("spec", help="arm spec JSON file (data/specs/spectrum_*.json)")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="where the arm runs (default: the spec's backend field, else local)",
    )
    p.add_argument(
        "--base-model",
        default=None,
        help="tinker backend: the base model (default: rftlab/tiny-qwen3-agent on a local target, the spec's "
        "model on hosted Tinker)",
    )
    add_root_argument(p)
    p.add_argument("--force", action="store_true", help="start a new run even if a finished one exists")
    p.add_argument("--no-resume", action="store_true", help="do not resume an unfinished run of the spec")
    p.add_argument("--json", action="store_true", help="print the run reference and status as JSON")
    p.set_defaults(func=_cmd_launch)

    p = sub.add_parser("status", help="status of the newest run of an arm spec")
    p.add_argument("spec", help="arm spec JSON file")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="the backend whose runs are looked up (default: the spec's, else local)",
    )
    add_root_argument(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_status)


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


def _load(path: str):
    from rftlab.studies.spectrum import as_spec

    try:
        return as_spec(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _cmd_launch(args: argparse.Namespace) -> int:
    from rftlab.studies.spectrum import launch_arm

    spec = _load(args.spec)
    backend = args.backend or spec.backend or "local"
    if args.base_model and backend != "tinker":
        raise UsageError("--base-model is for --backend tinker")
    print(
        f"{spec.arm}: {backend} backend: preflight, then {spec.epochs} epochs (or reuse a finished run "
        "of this spec); progress follows on a terminal",
        file=sys.stderr,
        flush=True,
    )
    try:
        done = launch_arm(
            spec,
            backend,
            args.root,
            resume=not args.no_resume,
            force=args.force,
            **({"base_model": args.base_model} if args.base_model else {}),
        )
    except Exception as exc:  # a launcher's refusal (no key, failed preflight, firectl error) is one line
        if type(exc).__name__ not in ("LaunchRefused", "FirectlError", "PreflightFailed"):
            raise
        raise UsageError(str(exc)) from None
    _report(done.ref, done.status, args.json, " (reused a finished run)" if done.reused else "")
    return 0 if done.status.state in ("completed", "running", "pending") else 1


def _cmd_status(args: argparse.Namespace) -> int:
    from rftlab.runs import CorruptRunError
    from rftlab.studies.spectrum import arm_status

    _load(args.spec)
    try:
        done = arm_status(args.spec, args.backend, args.root)
    except (CorruptRunError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    _report(done.ref, done.status, args.json)
    return 0
