"""``rftlab arm ...``: launch an arm spec on a backend and look at its status.

    rftlab arm launch data/specs/spectrum_C.json --backend local [--root runs]
    rftlab arm launch data/specs/spectrum_C.json --backend tinker [--base-model rftlab/tiny-qwen3-agent]
    rftlab arm status data/specs/spectrum_C.json [--root runs]
    rftlab arm launch data/specs/spectrum_C.json --set rows=8 --set learning_rate=3e-4
    rftlab arm sweep data/specs/spectrum_C.json sweep.json [--dry-run]

``--set KEY=VALUE`` (repeatable) overrides a field of the spec (dotted for a nested one, ``fireworks.lora_rank``;
the value is JSON when it parses, else a string); the spec model validates the result, which is a new spec
with its own hash, and a new run records the overrides (``provider.overrides``) and the spec file's hash
(``provider.base_spec_sha256``). A sweep file (``{"KEY": [v1, v2], ...}``, JSON or YAML) expands to the grid
of its values (``rftlab.launch.overrides``); ``arm sweep`` lists each spec with its hash and launches them in
turn (``--dry-run``: only the list).

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

from rftlab.cli import UsageError, add_root_argument, print_json

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
    add_set_argument(p)
    p.add_argument("--json", action="store_true", help="print the run reference and status as JSON")
    p.set_defaults(func=_cmd_launch)

    p = sub.add_parser("sweep", help="expand a sweep file over an arm spec, list the specs and launch them")
    p.add_argument("spec", help="arm spec JSON file (data/specs/spectrum_*.json)")
    p.add_argument("sweep", help='sweep file: {"KEY": [value, ...], ...} as JSON (or YAML with PyYAML)')
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="where the arms run (default: each spec's backend field, else local)",
    )
    add_root_argument(p)
    add_set_argument(p)
    p.add_argument("--dry-run", action="store_true", help="only list the expanded specs and their hashes")
    p.add_argument("--force", action="store_true", help="start new runs even where finished ones exist")
    p.add_argument("--json", action="store_true", help="print the expanded specs (and their runs) as JSON")
    p.set_defaults(func=_cmd_sweep)

    p = sub.add_parser("status", help="status of the newest run of an arm spec")
    p.add_argument("spec", help="arm spec JSON file")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="the backend whose runs are looked up (default: the spec's, else local)",
    )
    add_root_argument(p)
    add_set_argument(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_status)


def add_set_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a spec field (repeatable; dotted KEY for a nested field, VALUE as JSON or a string)",
    )


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


def _load(path: str, overrides: list[str] | None = None):
    from rftlab.launch.overrides import override_spec
    from rftlab.studies.spectrum import as_spec

    try:
        return override_spec(as_spec(path), overrides or [])
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def provenance(base_spec, overrides: list) -> dict:
    """The ``provider`` fields of a run made with ``--set`` (``rftlab.launch.overrides.override_provenance``)."""
    from rftlab.launch.overrides import override_provenance

    return override_provenance(base_spec, overrides).provider_fields()


def _cmd_launch(args: argparse.Namespace) -> int:

    spec = _load(args.spec, args.overrides)
    backend = args.backend or spec.backend or "local"
    if args.base_model and backend != "tinker":
        raise UsageError("--base-model is for --backend tinker")
    print(
        f"{spec.arm}: {backend} backend: preflight, then {spec.epochs} epochs (or reuse a finished run "
        "of this spec); progress follows on a terminal",
        file=sys.stderr,
        flush=True,
    )
    done = _launch(
        spec,
        backend,
        args.root,
        resume=not args.no_resume,
        force=args.force,
        provenance=provenance(_load(args.spec), args.overrides),
        **({"base_model": args.base_model} if args.base_model else {}),
    )
    _report(done.ref, done.status, args.json, " (reused a finished run)" if done.reused else "")
    return 0 if done.status.state in ("completed", "running", "pending") else 1


def _launch(spec, backend, root, **options):
    from rftlab.studies.spectrum import launch_arm

    try:
        return launch_arm(spec, backend, root, **options)
    except Exception as exc:  # a launcher's refusal (no key, failed preflight, firectl error) is one line
        if type(exc).__name__ not in ("LaunchRefused", "FirectlError", "PreflightFailed"):
            raise
        raise UsageError(str(exc)) from None


def _cmd_sweep(args: argparse.Namespace) -> int:
    from rftlab.launch.overrides import load_sweep, sweep_specs

    base = _load(args.spec)
    try:
        expanded = sweep_specs(base, load_sweep(args.sweep), args.overrides)
    except ValueError as exc:
        raise UsageError(" ".join(str(exc).split())) from None
    rows = []
    for overrides, spec in expanded:
        backend = args.backend or spec.backend or "local"
        row = {
            "arm": spec.arm,
            "spec_sha256": spec.sha256(),
            "backend": backend,
            "overrides": [o.text for o in overrides],
        }
        rows.append(row)
        if not args.json:
            print(f"{spec.arm:<16} {row['spec_sha256'][:12]}  {backend:<9} {' '.join(row['overrides'])}")
    hashes = [r["spec_sha256"] for r in rows]
    if len(set(hashes)) != len(hashes):
        raise UsageError(
            f"{args.sweep}: the sweep gives the same spec twice (a value equal to the spec's own?)"
        )
    print(f"{len(rows)} spec(s) from {args.sweep}", file=sys.stderr)
    codes = []
    launches = [] if args.dry_run else list(zip(rows, expanded, strict=True))
    for row, (overrides, spec) in launches:
        done = _launch(
            spec, row["backend"], args.root, force=args.force, provenance=provenance(base, overrides)
        )
        row.update(
            run_id=done.ref.run_id, path=str(done.ref.path), state=done.status.state, reused=done.reused
        )
        codes.append(0 if done.status.state in ("completed", "running", "pending") else 1)
        if not args.json:
            _report(done.ref, done.status, False, " (reused a finished run)" if done.reused else "")
    if args.json:
        print_json(rows)
    return max(codes, default=0)


def _cmd_status(args: argparse.Namespace) -> int:
    from rftlab.runs import CorruptRunError
    from rftlab.studies.spectrum import arm_status

    spec = _load(args.spec, args.overrides)
    try:
        done = arm_status(spec if args.overrides else args.spec, args.backend, args.root)
    except (CorruptRunError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    _report(done.ref, done.status, args.json)
    return 0
