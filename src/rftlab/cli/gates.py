"""``rftlab gates check SPEC.json METRICS.json``: evaluate declarative gates against observed metrics.

SPEC.json is either a whole spec with ``activation_gate.checks`` (like the GS1 spec) or a bare
``{"checks": [...]}``. METRICS.json is ``{"metric": value, ...}``; a value may be ``{"value": v, ...}``
with evidence beside it, and a top-level ``"evidence"`` object (run ids, n) is attached to every check.
Exit 0 when every check passes, 1 when any fails, 2 on bad input. The spec file's SHA-256 is reported.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import ValidationError

from rftlab.analysis.gates import evaluate_gate, file_sha256, parse_checks
from rftlab.cli import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    gates = subparsers.add_parser("gates", help="evaluate declarative gates (activation_gate.checks)")
    commands = gates.add_subparsers(dest="gates_command", metavar="GATES_COMMAND")
    commands.required = True
    check = commands.add_parser(
        "check",
        help="check metrics against a spec's gate; exit 0 pass, 1 fail, 2 bad input",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("spec", help='spec JSON with activation_gate.checks, or {"checks": [...]}')
    check.add_argument("metrics", help="metrics JSON object {name: value}")
    check.add_argument("--json", action="store_true", help="print JSON instead of a table")
    check.set_defaults(func=check_command)


def _read_json_object(path: str, what: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{what} {path}: file not found")
    try:
        obj = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} {path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(obj, dict):
        raise UsageError(f"{what} {path}: expected a JSON object")
    return obj


def check_command(args: argparse.Namespace) -> int:
    spec = _read_json_object(args.spec, "spec")
    metrics = _read_json_object(args.metrics, "metrics")
    try:
        checks = parse_checks(spec)
    except (ValueError, ValidationError) as exc:
        raise UsageError(f"spec {args.spec}: {exc}") from None
    evaluation = evaluate_gate(checks, metrics, file_sha256(args.spec), spec_path=args.spec)
    if args.json:
        print(json.dumps(evaluation.to_dict(), indent=2, default=str))
    else:
        print(f"gate of {args.spec} (sha256 {evaluation.spec_sha256})")
        for c in evaluation.checks:
            status = "PASS" if c.passed else "FAIL"
            print(
                f"  {status}  {c.metric:<36} observed={c.observed!r:<10} threshold={c.threshold}  ({c.reason})"
            )
        print(
            "all checks passed"
            if evaluation.passed
            else f"{sum(not c.passed for c in evaluation.checks)} check(s) failed"
        )
    return 0 if evaluation.passed else 1
