"""``rftlab spectrum ...``: the official BSM corpus, reference-policy baselines, RFT datasets."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rftlab.cli import UsageError
from rftlab.cli.argtypes import NON_NEGATIVE_INT, ArgType, deferred, integer, one_of

# Bounds of the size flags: beyond them a run takes hours or fills the disk, so say so instead of trying.
MAX_DATASET_ROWS = 1_000_000  # ~2 KB a row: about 2 GB of JSONL, written as a stream
MAX_RFT_EPISODES = 100_000  # ~9 ms an episode for all reference policies: about 15 minutes
BENCH_RUNS = integer(1, 5, note="the default schedule has 5 runs")


def _bench_policies() -> ArgType[str]:
    """A bench policy, or ``rft:<name>``: an RFT policy through the bench bridge."""
    from rftlab.policies.spectrum.reference import BENCH_POLICIES, RFT_POLICIES

    return one_of([*BENCH_POLICIES, *(f"rft:{name}" for name in RFT_POLICIES)])


def _out_path(path: str, flag: str = "--out"):
    """Validate an output path before anything is written (names ``flag`` on failure)."""
    from rftlab.runs import OutputPathError, check_output_path

    try:
        return check_output_path(path, flag)
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None


def _write_bytes(path: str, data: bytes, flag: str = "--out") -> None:
    """Write ``data`` atomically (unique temporary in the target folder, cleaned on failure)."""
    from rftlab.runs import atomic_write_bytes

    atomic_write_bytes(_out_path(path, flag), data, make_parents=False, where=f"{flag} {path}")


def _cmd_corpus(args: argparse.Namespace) -> int:
    from rftlab.envs.spectrum import official

    _out_path(args.out, "--out")
    if args.metadata:
        _out_path(args.metadata, "--metadata")
        if Path(args.metadata).resolve() == Path(args.out).resolve():
            raise UsageError("--metadata and --out name the same file; give two different paths")
    _write_bytes(args.out, official.corpus_bytes(), "--out")
    if args.metadata:
        _write_bytes(args.metadata, official.metadata_bytes(), "--metadata")
    print(f"wrote {official.TOTAL_SCANS} scans -> {args.out}", file=sys.stderr)
    return 0


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
        from rftlab.studies.spectrum_env import bench_baselines

        results = {name: row.to_dict() for name, row in bench_baselines(args.runs).items()}
        keys = ["mean_available_iou", "stateless_available_iou", "mean_occupied_iou", "learning_delta"]
    else:
        from rftlab.analysis.spectrum.summaries import rft_baselines

        results = rft_baselines(episodes=args.episodes, seed=args.seed, memory=args.memory)
        keys = ["mean_occ", "early_occ", "late_occ", "memory_gain", "mean_avail", "report_size", "carry_rate"]
    if args.json:
        _dump(results)
    else:
        _print_table(results, keys)
    return 0


def _cmd_bench90(args: argparse.Namespace) -> int:
    from rftlab.policies.spectrum.reference import BENCH_POLICIES, RFT_POLICIES, RFTPolicyOnBench
    from rftlab.rollout.spectrum.evaluation import evaluate_bench90

    name = args.policy
    if name.startswith("rft:"):
        inner = name[4:]
        factory = lambda: RFTPolicyOnBench(RFT_POLICIES[inner]())  # noqa: E731
    else:
        factory = BENCH_POLICIES[name]
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
    from rftlab.rollout.spectrum.dataset import dataset_estimate, dataset_jsonl, dataset_rows
    from rftlab.runs import atomic_writer

    out = _out_path(args.out)
    rows = dataset_rows(
        args.n,
        prompt=args.prompt,
        memory=args.memory,
        prefix=args.prefix,
        think=not args.no_think,
        fewshot=args.fewshot,
    )
    first_row = next(rows)
    first_line = dataset_jsonl([first_row]).encode("utf-8")
    size = dataset_estimate(first_line, args.n, out.parent)
    if not size.fits:
        raise UsageError(
            f"--n {args.n}: the dataset needs about {size.needed_bytes / 1e6:.0f} MB but {out.parent} has "
            f"{size.free_bytes / 1e6:.0f} MB free; lower --n or choose another --out"
        )
    last_id = first_row["input_metadata"]["row_id"]
    with atomic_writer(out, make_parents=False, where=f"--out {args.out}") as handle:
        handle.write(first_line)
        batch = []
        for row in rows:
            batch.append(row)
            if len(batch) == 1000:
                handle.write(dataset_jsonl(batch).encode("utf-8"))
                last_id = batch[-1]["input_metadata"]["row_id"]
                batch = []
        if batch:
            handle.write(dataset_jsonl(batch).encode("utf-8"))
            last_id = batch[-1]["input_metadata"]["row_id"]
    first = first_row["input_metadata"]["row_id"]
    print(f"wrote {args.n} rows ({first} .. {last_id}) -> {args.out}", file=sys.stderr)
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
    p.add_argument(
        "--variant",
        choices=["bench", "rft"],
        required=True,
        help="bench: the official 90-scan schedule (available-IoU); rft: random RFT bands (occupied-IoU)",
    )
    p.add_argument(
        "--runs", type=BENCH_RUNS, default=5, help="bench: permuted runs 0..N-1 to average (default 5)"
    )
    p.add_argument(
        "--episodes",
        type=integer(1, MAX_RFT_EPISODES, note="about 9 ms an episode"),
        default=200,
        help="rft: number of random bands (default 200)",
    )
    p.add_argument(
        "--seed", type=NON_NEGATIVE_INT, default=0, help="rft: seed of the band row ids (default 0)"
    )
    p.add_argument(
        "--memory",
        choices=["none", "echo", "scrambled", "notepad"],
        default="echo",
        help="rft: memory channel of the env (default echo; carry-rate needs an echo)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_baselines)

    p = sub.add_parser("dataset", help="write RFT training rows (eval-protocol JSONL)")
    p.add_argument(
        "--n",
        type=integer(1, MAX_DATASET_ROWS, note="about 2 KB a row"),
        default=48,
        help="number of rows (default 48)",
    )
    p.add_argument(
        "--prompt", choices=["explicit", "weak"], default="explicit", help="prompt variant (default explicit)"
    )
    p.add_argument(
        "--memory",
        choices=["none", "echo", "scrambled", "notepad"],
        default="echo",
        help="memory channel (default echo)",
    )
    p.add_argument("--prefix", help="row-id prefix (default by arm: spectrum, sc1, sc2, nm1, nm2)")
    p.add_argument("--no-think", action="store_true", help="append ' /no_think' to the system prompt")
    p.add_argument("--fewshot", action="store_true", help="append an illustrative accumulation example")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.set_defaults(func=_cmd_dataset)

    p = sub.add_parser("bench90", help="evaluate a reference policy on the official 90-scan schedule")
    p.add_argument(
        "--policy",
        type=deferred(_bench_policies),
        required=True,
        help="a bench policy name, or rft:<name> through the RFT bridge",
    )
    p.add_argument(
        "--runs", type=BENCH_RUNS, default=1, help="permuted runs 0..N-1 (default 1: the official order)"
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the stateless-baseline protocol")
    p.add_argument("--json", action="store_true", help="print JSON (per-scan rewards included)")
    p.set_defaults(func=_cmd_bench90)

    _register_preflight(sub)


def _dump(obj: object) -> None:
    from rftlab.cli import print_json

    print_json(obj)  # strict JSON: a non-finite number becomes null


def _register_preflight(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("preflight", help="check an arm spec's GRPO setup before a paid launch")
    p.add_argument("spec", help="arm spec JSON file (data/specs/spectrum_*.json)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_preflight)


def _cmd_preflight(args: argparse.Namespace) -> int:
    from rftlab.launch.spectrum.preflight import spectrum_preflight
    from rftlab.launch.spectrum.spec import load_arm_spec

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
