"""``rftlab spectrum preflight SPEC.json``: the checks of ``rftlab.launch.preflight`` on an arm spec
(registered under the ``spectrum`` family by ``rftlab.cli.spectrum``)."""

from __future__ import annotations

import argparse
import json

from rftlab.cli import UsageError


def register_preflight(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("preflight", help="check an arm spec's GRPO setup before a paid launch")
    p.add_argument("spec", help="arm spec JSON file (data/specs/spectrum_*.json)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_preflight)


def _cmd_preflight(args: argparse.Namespace) -> int:
    from rftlab.launch.preflight import spectrum_preflight
    from rftlab.launch.specs import load_arm_spec

    try:
        spec = load_arm_spec(args.spec)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    report = spectrum_preflight(spec)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.render())
    return 0 if report.passed else 1
