"""``rftlab arena build-sft | audit | manifest | eval | gates | handoff``: the Stage-1 SFT pipeline.

Registered as extra sub-commands of ``rftlab arena`` (see ``cli/arena.py``). Library code lives in
``rftlab.training.arena_sft*`` and ``rftlab.analysis.arena_*``; handlers import it lazily.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rftlab.cli import UsageError

DEFAULT_DATA_DIR = "data/arena_sft_stage1"
DEFAULT_GATE_SPEC = "data/specs/arena_gates.json"


def register_subcommands(commands: argparse._SubParsersAction) -> None:
    build = commands.add_parser("build-sft", help="build the Stage-1 SFT data, splits, mixture and manifest")
    build.add_argument(
        "--out", default=DEFAULT_DATA_DIR, help=f"output directory (default {DEFAULT_DATA_DIR})"
    )
    build.add_argument("--start-seed", type=int, default=0)
    build.add_argument("--num-seeds", type=int, default=1024)
    build.add_argument("--mechanics-per-kind", type=int, default=32)
    build.add_argument("--silence-examples", type=int, default=512)
    build.add_argument("--json", action="store_true", help="print the manifest as JSON")
    build.set_defaults(func=_build_sft)

    audit = commands.add_parser(
        "audit", help="audit an SFT data directory (exit 1 with one line per failure)"
    )
    audit.add_argument("directory")
    audit.add_argument("--require-split-action-coverage", action="store_true")
    audit.add_argument("--output", help="audit report path (default DIR/audit.json)")
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.set_defaults(func=_audit)


def _build_sft(args: argparse.Namespace) -> int:
    from rftlab.training.arena_sft import STAGE1_CONFIG, STAGE1_STRUCTURAL_SHA256, SftConfig, write_dataset

    try:
        config = SftConfig(
            start_seed=args.start_seed,
            num_seeds=args.num_seeds,
            targeted_mechanics_per_kind=args.mechanics_per_kind,
            targeted_silence_examples=args.silence_examples,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    manifest = write_dataset(out, config)
    if args.json:
        print(json.dumps(manifest, indent=2, sort_keys=True))
        return 0
    print(f"wrote {manifest['num_examples']} rows to {out} ({manifest['examples_by_split']})")
    print(f"content_sha256     {manifest['content_sha256']}")
    print(f"structural_sha256  {manifest['structural_sha256']['all']}")
    if config == STAGE1_CONFIG:
        ok = manifest["structural_sha256"] == STAGE1_STRUCTURAL_SHA256
        print(f"fidelity digest (spec §9.6): {'MATCH' if ok else 'MISMATCH'}")
        return 0 if ok else 1
    return 0


def _audit(args: argparse.Namespace) -> int:
    from rftlab.training.arena_sft_audit import audit_dataset, write_audit

    directory = Path(args.directory)
    if not directory.is_dir():
        raise UsageError(
            f"{directory} is not a directory (build one with `rftlab arena build-sft --out DIR`)"
        )
    report = audit_dataset(directory, args.require_split_action_coverage)
    write_audit(report, args.output or directory / "audit.json")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    for failure in report.failures:
        print(failure, file=sys.stderr)
    if report.valid:
        print(
            f"audit passed: {report.num_examples} rows, {report.num_unique_seeds} seeds, "
            f"{report.verified_solver_seeds} solver-verified seeds in {report.seconds:.1f} s"
        )
        return 0
    print(f"audit FAILED: {len(report.failures)} failure(s)", file=sys.stderr)
    return 1
