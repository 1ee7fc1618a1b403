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


def _r4(x):
    return None if x is None else round(float(x), 4)


def bench_baselines(runs: int = 5) -> dict[str, dict]:
    """Reference-policy summary on the official corpus: run 0 .. runs-1 and the stateless baseline."""
    from rftlab.envs.spectrum.bench import evaluate_bench90
    from rftlab.policies.spectrum import BENCH_POLICIES

    out: dict[str, dict] = {}
    for name, factory in BENCH_POLICIES.items():
        res = evaluate_bench90(factory, runs=range(runs), baseline=True)
        run0 = res["runs"][0]
        gains = [r["normalized_gain"] for r in res["runs"] if r["normalized_gain"] is not None]
        out[name] = {
            "mean_available_iou": _r4(res["mean_available_iou"]),
            "run0_available_iou": _r4(run0["mean_available_iou"]),
            "stateless_available_iou": _r4(res["baseline"]["mean_available_iou"]),
            "mean_occupied_iou": _r4(res["mean_occupied_iou"]),
            "stateless_occupied_iou": _r4(res["baseline"]["mean_occupied_iou"]),
            "first_half_score": run0["first_half_score"],
            "second_half_score": run0["second_half_score"],
            "learning_delta": run0["learning_delta"],
            "normalized_gain": _r4(sum(gains) / len(gains)) if gains else None,
            "run0_available_by_stage": {k: _r4(v) for k, v in run0["available_by_stage"].items()},
            "stateless_available_by_stage": {
                k: _r4(v) for k, v in res["baseline"]["available_by_stage"].items()
            },
            "run0_occupied_by_stage": {k: _r4(v) for k, v in run0["occupied_by_stage"].items()},
            "runs": runs,
        }
    return out


def _print_table(results: dict[str, dict], keys: list[str]) -> None:
    width = max(len(k) for k in results) + 2
    print("policy".ljust(width) + "".join(k.rjust(max(len(k), 8) + 2) for k in keys))
    for name, row in results.items():
        cells = []
        for k in keys:
            v = row.get(k)
            txt = "-" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v))
            cells.append(txt.rjust(max(len(k), 8) + 2))
        print(name.ljust(width) + "".join(cells))


def _cmd_baselines(args: argparse.Namespace) -> int:
    if args.variant == "bench":
        if not 1 <= args.runs <= 5:
            raise UsageError(
                f"--runs must be between 1 and 5 (the default schedule has 5 runs), got {args.runs}"
            )
        results = bench_baselines(args.runs)
        keys = ["mean_available_iou", "stateless_available_iou", "mean_occupied_iou", "learning_delta"]
    else:
        if args.episodes < 1:
            raise UsageError(f"--episodes must be >= 1, got {args.episodes}")
        from rftlab.envs.spectrum.rft import rft_baselines

        results = rft_baselines(episodes=args.episodes, seed=args.seed, memory=args.memory)
        keys = ["mean_occ", "early_occ", "late_occ", "memory_gain", "mean_avail", "report_size", "carry_rate"]
    if args.json:
        _dump(results)
    else:
        _print_table(results, keys)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("spectrum", help="spectrum memory environment (CLBench BSM + RFT variant)")
    sub = parser.add_subparsers(dest="spectrum_command", metavar="SUBCOMMAND")
    sub.required = True

    p = sub.add_parser("corpus", help="write the official 90-scan mixed_grid_lifecycle corpus (JSONL)")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.add_argument("--metadata", help="also write the corpus metadata JSON to this file")
    p.set_defaults(func=_cmd_corpus)

    p = sub.add_parser("baselines", help="reference-policy scores (official bench or RFT variant)")
    p.add_argument("--variant", choices=["bench", "rft"], required=True)
    p.add_argument("--runs", type=int, default=5, help="bench: permuted runs 0..N-1 to average (default 5)")
    p.add_argument("--episodes", type=int, default=200, help="rft: number of random bands (default 200)")
    p.add_argument("--seed", type=int, default=0, help="rft: seed of the band row ids (default 0)")
    p.add_argument(
        "--memory",
        choices=["none", "echo", "scrambled", "notepad"],
        default="echo",
        help="rft: memory channel of the env (default echo; carry-rate needs an echo)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_baselines)


def _dump(obj: object) -> None:
    print(json.dumps(obj, indent=2))
