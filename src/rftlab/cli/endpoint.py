"""``rftlab endpoint ...``: OpenAI-compatible endpoints (a Fireworks deployment, vLLM, the local policy
server).

    rftlab endpoint check --base-url URL --model NAME [--api-key-env VAR] [--timeout S] [--json]

Exit 0 when the endpoint answers a chat completion with a well-formed ``submit_report`` tool call, 1 when a
check fails (each failure is one line naming it), 2 for bad arguments. The key comes from ``$VAR``
(default ``OPENAI_API_KEY``) and is never printed; a ``--base-url`` that carries a credential (a password,
a ``?key=`` parameter, a key's value) is refused before anything is sent.
"""

from __future__ import annotations

import argparse

from rftlab.cli import UsageError, print_json
from rftlab.cli.argtypes import http_url, nonblank, number


def _cmd_check(args: argparse.Namespace) -> int:
    from rftlab.rollout.spectrum.endpoint_check import check_endpoint
    from rftlab.runs.secrets import redact_text, url_credential_problem

    problem = url_credential_problem(args.base_url)
    if problem:
        raise UsageError(f"--base-url {problem}: put the key in --api-key-env, never in the URL")
    report = check_endpoint(args.base_url, args.model, api_key_env=args.api_key_env, timeout=args.timeout)
    if args.json:
        print_json(report.to_dict())
    else:
        key = f"${args.api_key_env}" + ("" if report.key_from_env else " (unset: sent a placeholder)")
        print(f"endpoint {report.base_url}  model {redact_text(args.model)}  key {key}")
        for c in report.checks:
            mark = "ok  " if c["passed"] else ("warn" if not c.get("required", True) else "FAIL")
            print(f"  [{mark}] {c['name']}: {c['detail']}")
        print("PASSED" if report.passed else "FAILED")
    return 0 if report.passed else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "endpoint", help="OpenAI-compatible endpoints: connectivity and tool-call check"
    )
    sub = p.add_subparsers(dest="endpoint_command", metavar="SUBCOMMAND")
    sub.required = True
    c = sub.add_parser(
        "check", help="smoke-test an endpoint: models, a chat completion, a submit_report tool call"
    )
    c.add_argument(
        "--base-url",
        type=http_url("http://127.0.0.1:8011/v1"),
        required=True,
        help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8011/v1",
    )
    c.add_argument("--model", type=nonblank(512), required=True, help="model name as the endpoint expects it")
    c.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key")
    c.add_argument(
        "--timeout",
        type=number(gt=0, le=3600, unit="seconds"),
        default=60.0,
        help="seconds per request (default 60)",
    )
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.set_defaults(func=_cmd_check)
