"""``rftlab spectrum ...``: the official BSM corpus, reference-policy baselines, RFT datasets."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rftlab.cli import UsageError


def _write_bytes(path: str, data: bytes) -> None:
    out = Path(path)
    if out.parent and not out.parent.exists():
        raise UsageError(f"--out {path}: folder {out.parent} does not exist")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)


def _cmd_corpus(args: argparse.Namespace) -> int:
    from rftlab.envs.spectrum import official

    _write_bytes(args.out, official.corpus_bytes())
    if args.metadata:
        _write_bytes(args.metadata, official.metadata_bytes())
    print(f"wrote {official.TOTAL_SCANS} scans -> {args.out}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("spectrum", help="spectrum memory environment (CLBench BSM + RFT variant)")
    sub = parser.add_subparsers(dest="spectrum_command", metavar="SUBCOMMAND")
    sub.required = True

    p = sub.add_parser("corpus", help="write the official 90-scan mixed_grid_lifecycle corpus (JSONL)")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.add_argument("--metadata", help="also write the corpus metadata JSON to this file")
    p.set_defaults(func=_cmd_corpus)


def _dump(obj: object) -> None:
    print(json.dumps(obj, indent=2))
