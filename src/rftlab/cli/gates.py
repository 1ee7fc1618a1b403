"""``rftlab gates check SPEC.json METRICS.json``: evaluate declarative gates against observed metrics.

SPEC.json is either a whole spec with ``activation_gate.checks`` (like the GS1 spec) or a bare
``{"checks": [...]}``; a threshold must be a finite number and min <= max. METRICS.json is
``{"metric": value, ...}``; a value may be ``{"value": v, ...}`` with evidence beside it, and a
top-level ``"evidence"`` object (run ids, n) is attached to every check. A value checked against
min/max must be a finite JSON number or a plain decimal string ("8", "-0.5", "1e3"); Infinity, NaN,
"inf", "1_0" and other shapes fail the check with a reason.

Exit 0 when every check passes, 1 when a check fails, 2 on bad input (unreadable or malformed spec or
metrics file, a bad threshold). The spec file's SHA-256 is reported. ``--json`` never holds NaN or
Infinity.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from rftlab.cli import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    gates = subparsers.add_parser("gates", help="evaluate declarative gates (activation_gate.checks)")
    commands = gates.add_subparsers(dest="gates_command", metavar="GATES_COMMAND")
    commands.required = True
    check = commands.add_parser(
        "check",
        help="check metrics against a spec's gate; exit 0 pass, 1 fail, 2 bad input",
        description=(__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("spec", help='spec JSON with activation_gate.checks, or {"checks": [...]}')
    check.add_argument("metrics", help="metrics JSON object {name: value}")
    check.add_argument("--json", action="store_true", help="print JSON instead of a table")
    check.set_defaults(func=check_command)


def _read_json_object(path: str, what: str) -> dict:
    from rftlab.analysis.io import AnalysisInputError, read_json_file

    try:
        obj = read_json_file(path, what)
    except AnalysisInputError as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(obj, Mapping):
        raise UsageError(f"{what} {path}: expected a JSON object, got {type(obj).__name__}")
    return dict(obj)


def check_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.gates import GateInputError, evaluate_gate, file_sha256, parse_checks
    from rftlab.analysis.io import validation_message
    from rftlab.cli import print_json
    from rftlab.runs.strictjson import nonfinite_as_text

    spec = _read_json_object(args.spec, "spec")
    metrics = _read_json_object(args.metrics, "metrics")
    try:
        checks = parse_checks(spec)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise UsageError(f"spec {args.spec}: {validation_message(exc)}") from None
    try:
        sha = file_sha256(args.spec)
        evaluation = evaluate_gate(checks, metrics, sha, spec_path=args.spec)
    except GateInputError as exc:
        raise UsageError(f"metrics {args.metrics}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"spec {args.spec}: cannot read ({exc.strerror or exc})") from None
    if args.json:
        print_json(evaluation.to_dict())
    else:
        print(f"gate of {args.spec} (sha256 {evaluation.spec_sha256})")
        for c in evaluation.checks:
            status = "PASS" if c.passed else "FAIL"
            observed = repr(nonfinite_as_text(c.observed))  # the text it has always shown
            observed = observed if len(observed) <= 40 else observed[:37] + "..."
            print(f"  {status}  {c.metric:<36} observed={observed:<10} threshold={c.threshold}  ({c.reason})")
        print(
            "all checks passed"
            if evaluation.passed
            else f"{sum(not c.passed for c in evaluation.checks)} check(s) failed"
        )
    return 0 if evaluation.passed else 1
