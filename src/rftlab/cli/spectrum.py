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
    return None if x is None else round(float(x), 4) + 0.0  # + 0.0 turns -0.0 into 0.0


def bench_baselines(runs: int = 5) -> dict[str, dict]:
    """Reference-policy summary on the official corpus: run 0 .. runs-1 and the stateless baseline."""
    from rftlab.policies.spectrum import BENCH_POLICIES
    from rftlab.rollout.spectrum_eval import evaluate_bench90

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
        from rftlab.analysis.summaries import rft_baselines

        results = rft_baselines(episodes=args.episodes, seed=args.seed, memory=args.memory)
        keys = ["mean_occ", "early_occ", "late_occ", "memory_gain", "mean_avail", "report_size", "carry_rate"]
    if args.json:
        _dump(results)
    else:
        _print_table(results, keys)
    return 0


def _cmd_bench90(args: argparse.Namespace) -> int:
    from rftlab.policies.spectrum import BENCH_POLICIES, RFT_POLICIES, RFTPolicyOnBench
    from rftlab.rollout.spectrum_eval import evaluate_bench90

    name = args.policy
    if name.startswith("rft:"):
        inner = name[4:]
        if inner not in RFT_POLICIES:
            raise UsageError(f"unknown RFT policy {inner!r}; choose from {', '.join(RFT_POLICIES)}")
        factory = lambda: RFTPolicyOnBench(RFT_POLICIES[inner]())  # noqa: E731
    elif name in BENCH_POLICIES:
        factory = BENCH_POLICIES[name]
    else:
        raise UsageError(
            f"unknown policy {name!r}; choose from {', '.join(BENCH_POLICIES)} or rft:<{'|'.join(RFT_POLICIES)}>"
        )
    if not 1 <= args.runs <= 5:
        raise UsageError(f"--runs must be between 1 and 5, got {args.runs}")
    res = evaluate_bench90(factory, runs=range(args.runs), baseline=not args.no_baseline)
    if args.json:
        _dump(res)
    else:
        for run in res["runs"]:
            gain = run.get("normalized_gain")
            print(
                f"run {run['run_index']}: available-IoU {run['mean_available_iou']:.4f}  "
                f"occupied-IoU {run['mean_occupied_iou']:.4f}  learning_delta {run['learning_delta']:+.4f}"
                + ("" if gain is None else f"  normalized_gain {gain:+.4f}")
            )
        if "baseline" in res:
            b = res["baseline"]
            print(
                f"stateless baseline: available-IoU {b['mean_available_iou']:.4f}  occupied-IoU {b['mean_occupied_iou']:.4f}"
            )
    return 0


def _cmd_dataset(args: argparse.Namespace) -> int:
    from rftlab.envs.spectrum.dataset import dataset_jsonl, dataset_rows

    if args.n < 1:
        raise UsageError(f"--n must be >= 1, got {args.n}")
    rows = list(
        dataset_rows(
            args.n,
            prompt=args.prompt,
            memory=args.memory,
            prefix=args.prefix,
            think=not args.no_think,
            fewshot=args.fewshot,
        )
    )
    _write_bytes(args.out, dataset_jsonl(rows).encode("utf-8"))
    first, last = rows[0]["input_metadata"]["row_id"], rows[-1]["input_metadata"]["row_id"]
    print(f"wrote {len(rows)} rows ({first} .. {last}) -> {args.out}", file=sys.stderr)
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

    p = sub.add_parser("dataset", help="write RFT training rows (eval-protocol JSONL)")
    p.add_argument("--n", type=int, default=48, help="number of rows (default 48)")
    p.add_argument("--prompt", choices=["explicit", "weak"], default="explicit")
    p.add_argument("--memory", choices=["none", "echo", "scrambled", "notepad"], default="echo")
    p.add_argument("--prefix", help="row-id prefix (default by arm: spectrum, sc1, sc2, nm1, nm2)")
    p.add_argument("--no-think", action="store_true", help="append ' /no_think' to the system prompt")
    p.add_argument("--fewshot", action="store_true", help="append an illustrative accumulation example")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.set_defaults(func=_cmd_dataset)

    p = sub.add_parser("bench90", help="evaluate a reference policy on the official 90-scan schedule")
    p.add_argument(
        "--policy", required=True, help="a bench policy name, or rft:<name> through the RFT bridge"
    )
    p.add_argument("--runs", type=int, default=1, help="permuted runs 0..N-1 (default 1: the official order)")
    p.add_argument("--no-baseline", action="store_true", help="skip the stateless-baseline protocol")
    p.add_argument("--json", action="store_true", help="print JSON (per-scan rewards included)")
    p.set_defaults(func=_cmd_bench90)


def _dump(obj: object) -> None:
    print(json.dumps(obj, indent=2))
