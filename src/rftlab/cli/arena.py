"""``rftlab arena``: the swarm arena's model-free baselines, single-case solves and prompts, and the Stage-1
SFT pipeline (``build-sft | audit | manifest | eval | compare | gates | handoff | sft-smoke | sft-run``).
Handlers import the library lazily."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from rftlab.cli import UsageError, print_json
from rftlab.cli.argtypes import (
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    ArgType,
    deferred,
    existing_dir,
    folder,
    integer,
    json_file,
    number,
    one_of,
)

# Node ids are V10..V99 (spec arena-gen-v1 §2.2: ``sample(range(10, 100), size)``), and a state needs
# at least 10 nodes: the valid sizes are 10..90.
MIN_SIZE, MAX_SIZE = 10, 90
SIZE = integer(MIN_SIZE, MAX_SIZE, note="node ids are V10..V99")


def _stage1_limit(name: str) -> Callable[[], ArgType[int]]:
    """``1..limit`` for one of the Stage-1 spec's limits (docs/arena.md §11), read when the option is given."""

    def build() -> ArgType[int]:
        from rftlab.training.arena import stage1

        return integer(1, getattr(stage1, name), note="the Stage-1 spec's limit")

    return build


def _styles() -> ArgType[str]:
    from rftlab.envs.arena.cases import STYLES

    return one_of(STYLES)


def _blue_agents() -> ArgType[str]:
    from rftlab.envs.arena.world import team_agent_ids

    return one_of(team_agent_ids("BLUE"))


def _baseline_policies() -> ArgType[str]:
    from rftlab.policies.arena.scripted import BASELINE_POLICIES

    return one_of(BASELINE_POLICIES)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("arena", help="swarm arena: baselines, oracle solves, prompts")
    commands = parser.add_subparsers(dest="arena_command", metavar="SUBCOMMAND")
    commands.required = True

    baselines = commands.add_parser(
        "baselines",
        help="mean reward / regret / optimal rate of the model-free policies on the 60 frozen cases",
    )
    baselines.add_argument("--json", action="store_true", help="print JSON")
    baselines.add_argument(
        "--policy",
        action="append",
        type=deferred(_baseline_policies),
        help="restrict to these policies (repeatable)",
    )
    baselines.set_defaults(func=_baselines)

    solve = commands.add_parser(
        "solve", help="exact BLUE oracle for one generated state against scripted RED"
    )
    solve.add_argument("--seed", type=NON_NEGATIVE_INT, required=True, help="world seed (docs/arena.md §A.1)")
    solve.add_argument("--size", type=SIZE, default=12, help="number of graph nodes (default 12)")
    solve.add_argument(
        "--style",
        type=deferred(_styles),
        default="balanced",
        help="RED style: balanced, aggressive or defensive",
    )
    solve.add_argument("--json", action="store_true", help="print JSON")
    solve.set_defaults(func=_solve)

    prompt = commands.add_parser("prompt", help="print the broadcast-phase prompt of one BLUE agent")
    prompt.add_argument("--seed", type=NON_NEGATIVE_INT, required=True, help="world seed")
    prompt.add_argument("--size", type=SIZE, default=12, help="number of graph nodes (default 12)")
    prompt.add_argument(
        "--agent",
        type=deferred(_blue_agents),
        default="blue-0",
        help="the agent whose prompts are printed (default blue-0)",
    )
    prompt.add_argument(
        "--permutation", type=NON_NEGATIVE_INT, default=None, help="default: seed + agent index"
    )
    prompt.set_defaults(func=_prompt)

    register_subcommands(commands)  # the Stage-1 SFT pipeline


def _baselines(args: argparse.Namespace) -> int:
    from rftlab.policies.arena.scripted import BASELINE_POLICIES, evaluate_baselines, summarize_baselines

    policies = args.policy or list(BASELINE_POLICIES)
    summary = summarize_baselines(evaluate_baselines(policies))
    if args.json:
        print_json(summary)
    else:
        print(f"{'policy':<12} {'mean_reward':>12} {'mean_regret':>12} {'optimal_rate':>13}")
        for name, row in summary.items():
            print(
                f"{name:<12} {row['mean_reward']:>12.4f} {row['mean_regret']:>12.4f} {row['optimal_rate']:>13.4f}"
            )
    return 0


def _solve(args: argparse.Namespace) -> int:
    from rftlab.envs.arena.oracle import solve_joint_action
    from rftlab.envs.arena.world import generate_state, state_fingerprint
    from rftlab.policies.arena.scripted import deterministic_policy

    state = generate_state(args.seed, args.size)
    red = deterministic_policy(state, "RED", args.style)
    solution = solve_joint_action(state, "BLUE", red)
    out = {
        "seed": args.seed,
        "size": args.size,
        "style": args.style,
        "fingerprint": state_fingerprint(state),
        "red_actions": {a: act.to_dict() for a, act in red.items()},
        "reward": solution.reward,
        "canonical_assignment": {a: act.to_dict() for a, act in solution.canonical_assignment.items()},
        "optimal_count": solution.optimal_count,
        "explored": solution.explored,
        "acceptable_actions": {
            a: [act.to_dict() for act in acts] for a, acts in solution.action_options.items()
        },
    }
    if args.json:
        print_json(out)
    else:
        print(f"seed {args.seed} size {args.size} RED {args.style}: oracle reward {solution.reward!r}")
        print(f"optimal joint actions: {solution.optimal_count} of {solution.explored}")
        for agent_id, action in solution.canonical_assignment.items():
            print(f"  {agent_id}: {json.dumps(action.to_dict())}")
    return 0


def _prompt(args: argparse.Namespace) -> int:
    from rftlab.envs.arena.protocol import broadcast_prompt
    from rftlab.envs.arena.world import generate_state, team_agent_ids

    blue = team_agent_ids("BLUE")
    permutation = args.seed + blue.index(args.agent) if args.permutation is None else args.permutation
    messages, _ = broadcast_prompt(generate_state(args.seed, args.size), args.agent, permutation)
    print_json(messages)
    return 0


# ------------------------------------------------------------------ the Stage-1 SFT pipeline

DEFAULT_DATA_DIR = "data/arena_sft_stage1"
# build-sft bounds: Stage 1 uses 1024 seeds; 100 times that is hours of generation and gigabytes of rows.
MAX_SFT_SEEDS = 100_000
MAX_TARGETED = 100_000
MAX_START_SEED = 2**31 - 1
DEFAULT_GATE_SPEC = "data/specs/arena_gates.json"


def register_subcommands(commands: argparse._SubParsersAction) -> None:
    build = commands.add_parser("build-sft", help="build the Stage-1 SFT data, splits, mixture and manifest")
    build.add_argument(
        "--out",
        type=folder(),
        default=DEFAULT_DATA_DIR,
        help=f"output directory (default {DEFAULT_DATA_DIR})",
    )
    build.add_argument(
        "--start-seed",
        type=integer(0, MAX_START_SEED),
        default=0,
        help="first natural world seed (default 0)",
    )
    build.add_argument(
        "--num-seeds",
        type=integer(0, MAX_SFT_SEEDS),
        default=1024,
        help="natural world seeds (default 1024, Stage 1)",
    )
    build.add_argument(
        "--mechanics-per-kind",
        type=integer(0, MAX_TARGETED),
        default=32,
        help="targeted rows per mechanic (default 32, Stage 1)",
    )
    build.add_argument(
        "--silence-examples",
        type=integer(0, MAX_TARGETED),
        default=512,
        help="targeted silence rows (default 512, Stage 1)",
    )
    build.add_argument("--json", action="store_true", help="print the manifest as JSON")
    build.set_defaults(func=_build_sft)

    audit = commands.add_parser(
        "audit", help="audit an SFT data directory (exit 1 with one line per failure)"
    )
    audit.add_argument(
        "directory",
        type=existing_dir("build one with `rftlab arena build-sft --out DIR`"),
        help="SFT data directory written by build-sft (with manifest.json)",
    )
    audit.add_argument(
        "--require-split-action-coverage",
        action="store_true",
        help="fail unless every split holds all seven action kinds (the Stage-1 requirement)",
    )
    audit.add_argument("--output", help="audit report path (default DIR/audit.json)")
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.set_defaults(func=_audit)
    register_eval_subcommands(commands)
    register_gate_subcommands(commands)
    register_handoff_subcommand(commands)
    register_sft_subcommand(commands)


def _build_sft(args: argparse.Namespace) -> int:
    from rftlab.rollout.arena.sft_data import SftConfig
    from rftlab.studies.arena import build_sft

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
    built = build_sft(out, config)
    manifest = built.manifest
    if args.json:
        print_json(manifest)
        return 0
    print(f"wrote {manifest['num_examples']} rows to {out} ({manifest['examples_by_split']})")
    print(f"content_sha256     {manifest['content_sha256']}")
    print(f"structural_sha256  {manifest['structural_sha256']['all']}")
    if built.digest.verdict is not None:
        print(f"fidelity digest (docs/arena.md §9.6): {built.digest.verdict}")
    return built.digest.exit_code


def _audit(args: argparse.Namespace) -> int:
    from rftlab.analysis.arena.audit import audit_dataset, write_audit

    directory = Path(args.directory)
    report = audit_dataset(directory, args.require_split_action_coverage)
    write_audit(report, args.output or directory / "audit.json")
    if args.json:
        print_json(report.to_dict())
    for failure in report.failures:
        print(failure, file=sys.stderr)
    if report.valid:  # with --json stdout holds the JSON only
        print(
            f"audit passed: {report.num_examples} rows, {report.num_unique_seeds} seeds, "
            f"{report.verified_solver_seeds} solver-verified seeds in {report.seconds:.1f} s",
            file=sys.stderr if args.json else sys.stdout,
        )
        return 0
    print(f"audit FAILED: {len(report.failures)} failure(s)", file=sys.stderr)
    return 1


def register_eval_subcommands(commands: argparse._SubParsersAction) -> None:
    manifest = commands.add_parser(
        "manifest", help="print the frozen 60-case manifest SHA-256 (refused if changed)"
    )
    manifest.add_argument(
        "--check",
        metavar="FILE",
        type=json_file(),
        help="verify a [[seed,size,style],...] JSON file against it",
    )
    manifest.add_argument("--json", action="store_true", help="print the cases and hash as JSON")
    manifest.set_defaults(func=_manifest)

    ev = commands.add_parser("eval", help="frozen 60-case evaluation under the five message conditions")
    ev.add_argument(
        "--provider",
        required=True,
        choices=["oracle", "endpoint", "local"],
        help="who answers: the exact oracle, an OpenAI-compatible endpoint, or a local model",
    )
    ev.add_argument(
        "--output-dir",
        type=folder(),
        required=True,
        help="folder for rows.jsonl, validation.jsonl and summary.json",
    )
    ev.add_argument("--model", default=None, help="endpoint: model name sent in the request")
    ev.add_argument(
        "--base-url", default=None, help="endpoint: OpenAI-compatible base URL (default %(default)s)"
    )
    ev.add_argument(
        "--api-key-env",
        default=None,
        help="endpoint: environment variable holding the key (never written out)",
    )
    ev.add_argument(
        "--max-tokens", type=POSITIVE_INT, default=None, help="endpoint: completion token limit (default 192)"
    )
    ev.add_argument(
        "--local-policy",
        default="scripted",
        choices=["scripted", "scripted-no-inbox"],
        help="local: the in-process policy (scripted team policy, with or without reading the inbox)",
    )
    ev.add_argument(
        "--case-stride", type=POSITIVE_INT, default=1, help="evaluate every k-th case (smoke runs only)"
    )
    ev.add_argument("--validation-data", metavar="DIR", help="also score DIR/validation.jsonl (gates G1-G4)")
    ev.add_argument("--force", action="store_true", help="overwrite an existing evaluation in --output-dir")
    ev.set_defaults(func=_eval)


def _manifest(args: argparse.Namespace) -> int:
    from rftlab.envs.arena.cases import FROZEN_MANIFEST_SHA256, frozen_cases, manifest_sha256

    try:
        cases = frozen_cases()
    except RuntimeError as exc:
        print(f"rftlab: refused: {exc}", file=sys.stderr)
        return 1
    if args.check:
        path = args.check.path
        payload = json.dumps(args.check.value, separators=(",", ":"))
        import hashlib

        digest = hashlib.sha256(payload.encode("utf-8")).hexdigest()
        if digest != FROZEN_MANIFEST_SHA256:
            print(
                f"rftlab: refused: {path} hashes to {digest}, not the frozen {FROZEN_MANIFEST_SHA256}",
                file=sys.stderr,
            )
            return 1
    if args.json:
        out = {"manifest_sha256": manifest_sha256(cases), "cases": [[c.seed, c.size, c.style] for c in cases]}
        print_json(out)
    else:
        print(manifest_sha256(cases))
    return 0


def _provider(args: argparse.Namespace):
    from rftlab.policies.arena import providers as ev

    if args.provider == "oracle":
        return ev.OracleProvider()
    if args.provider == "local":
        return ev.ScriptedProvider(use_inbox=args.local_policy == "scripted")
    if not args.model:
        raise UsageError("--provider endpoint needs --model")
    if args.base_url:
        from rftlab.runs.secrets import url_credential_problem

        problem = url_credential_problem(args.base_url)
        if problem:  # it would be written to summary.json: refuse before any case runs
            raise UsageError(f"--base-url {problem}: put the key in --api-key-env, never in the URL")
    return ev.EndpointProvider(
        model=args.model,
        base_url=args.base_url or ev.DEFAULT_BASE_URL,
        api_key_env=args.api_key_env or ev.DEFAULT_API_KEY_ENV,
        max_tokens=args.max_tokens or ev.OPENAI_MAX_TOKENS,
    )


def _write_text(path: Path, text: str) -> None:
    from rftlab.runs import atomic_write_text

    atomic_write_text(path, text)


def _read_rows(path: Path) -> list[dict]:
    from rftlab.studies.arena import read_rows

    try:
        return read_rows(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _eval(args: argparse.Namespace) -> int:
    from rftlab.analysis.arena.evaluation import format_summary
    from rftlab.envs.arena.cases import FROZEN_CASE_COUNT
    from rftlab.policies.arena.providers import EndpointError
    from rftlab.studies.arena import evaluate_frozen, write_evaluation

    out = Path(args.output_dir)
    if (out / "summary.json").exists() and not args.force:
        raise UsageError(f"{out} already holds an evaluation; pass --force to overwrite it")
    validation_rows = None
    if args.validation_data:
        path = Path(args.validation_data) / "validation.jsonl"
        if not path.is_file():
            raise UsageError(f"{path} does not exist (build the data with `rftlab arena build-sft`)")
        validation_rows = _read_rows(path)
        from rftlab.studies.arena import check_sft_rows

        try:
            check_sft_rows(validation_rows, str(path))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    from rftlab.envs.arena.cases import frozen_cases

    try:
        frozen_cases()
    except RuntimeError as exc:
        print(f"rftlab: refused: {exc}", file=sys.stderr)
        return 1
    provider = _provider(args)
    try:
        evaluation = evaluate_frozen(provider, range(0, FROZEN_CASE_COUNT, args.case_stride), validation_rows)
    except EndpointError as exc:
        print(f"rftlab: error: endpoint failed: {exc}", file=sys.stderr)
        return 1
    write_evaluation(out, evaluation)
    print(format_summary(evaluation.summary))
    print(f"wrote {out / 'rows.jsonl'} and {out / 'summary.json'}")
    return 0


def register_gate_subcommands(commands: argparse._SubParsersAction) -> None:
    compare = commands.add_parser(
        "compare",
        help="base vs SFT paired comparison frozen-paired-arena-v1 (docs/arena.md §10.6): four endpoints "
        "with 95%% intervals and sign-flip p-values",
    )
    compare.add_argument(
        "--base", required=True, help="base model evaluation directory (rows.jsonl, summary.json)"
    )
    compare.add_argument(
        "--candidate", required=True, help="SFT evaluation directory (rows.jsonl, summary.json)"
    )
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.add_argument("--output", help="write the comparison as JSON here")
    compare.set_defaults(func=_compare)

    gates = commands.add_parser(
        "gates", help="Stage-1 SFT promotion and claim gates from a base and a candidate evaluation"
    )
    gates.add_argument(
        "--base", required=True, help="base model evaluation directory (rows.jsonl, summary.json)"
    )
    gates.add_argument(
        "--candidate", required=True, help="candidate evaluation directory (rows.jsonl, summary.json)"
    )
    gates.add_argument("--spec", default=None, help=f"gate spec (default {DEFAULT_GATE_SPEC})")
    gates.add_argument("--output", help="write the evaluation as JSON here")
    gates.add_argument("--json", action="store_true", help="print the evaluation as JSON")
    gates.set_defaults(func=_gates)


def _compare(args: argparse.Namespace) -> int:
    from rftlab.analysis.arena.compare import (
        CompareError,
        NotComparableError,
        compare_evaluations,
        compare_table_rows,
        load_evaluation,
    )

    _check_compare_paths(args)
    try:
        base, candidate = load_evaluation(args.base), load_evaluation(args.candidate)
        comparison = compare_evaluations(base, candidate)
    except NotComparableError as exc:
        print(f"rftlab: refused: cannot compare: {exc}", file=sys.stderr)
        return 1
    except CompareError as exc:
        raise UsageError(str(exc)) from None
    text = json.dumps(comparison, indent=2, sort_keys=True) + "\n"
    if args.output:
        _write_text(Path(args.output), text)
    if args.json:
        print_json(comparison)
        return 0
    print(
        f"{comparison['compare_version']}: {comparison['cases']} cases, base {comparison['base']['model']!r}, "
        f"SFT {comparison['sft']['model']!r} (sign-flip test: Random(0), {comparison['randomization']['trials']} trials)"
    )
    print(f"{'endpoint':<32} {'mean':>8} {'95% CI':>20} {'+/-/0':>10} {'p (flip)':>9} {'p (sign)':>9}")
    for row in compare_table_rows(comparison):
        signs = row["positive / negative / tied"].replace(" ", "")
        print(
            f"{row['endpoint']:<32} {row['mean difference']:>+8.4f} {row['95% CI']:>20} {signs:>10}"
            f" {row['sign-flip p']:>9.4f} {row['sign test p']:>9.4f}"
        )
    for name, value in comparison["claim_gates"].items():
        print(f"{name}: {value}")
    for role in ("base", "sft"):
        echo = comparison[role]
        print(
            f"{role}: message_strict_rate {echo['message_strict_rate']:.4f}, "
            f"action_order_consistency_rate {echo['action_order_consistency_rate']:.4f}"
        )
    return 0


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except (OSError, RuntimeError):  # a symlink loop: the path is checked again when it is used
        return False


def _check_compare_paths(args: argparse.Namespace, extra_inputs: tuple[Path, ...] = ()) -> None:
    """``--base`` and ``--candidate`` are two evaluations, and ``--output`` overwrites neither."""
    from rftlab.analysis.arena.compare import evaluation_files

    base_files, candidate_files = evaluation_files(args.base), evaluation_files(args.candidate)
    if _same_file(base_files[0].parent, candidate_files[0].parent):
        raise UsageError(
            f"--base and --candidate are the same evaluation ({base_files[0].parent}); give two evaluations"
        )
    if not args.output:
        return
    _check_out(args.output, "--output")
    output = Path(args.output)
    for given in (*base_files, *candidate_files, *extra_inputs):
        if _same_file(output, given):
            raise UsageError(f"--output {args.output} is the input {given}; choose another file")


def _check_out(path: str, flag: str) -> None:
    from rftlab.runs import OutputPathError, check_output_path

    try:
        check_output_path(path, flag)
    except OutputPathError as exc:
        raise UsageError(str(exc)) from None


def _gates(args: argparse.Namespace) -> int:
    from rftlab.analysis.arena.compare import (
        CompareError,
        NotComparableError,
        compare_evaluations,
        load_evaluation,
    )
    from rftlab.analysis.arena.gates import (
        DEFAULT_GATE_SPEC as spec_default,
    )
    from rftlab.analysis.arena.gates import (
        GateSpecError,
        SummaryError,
        evaluate_arena_gates,
        gate_rows,
        gate_table,
        load_gate_spec,
        load_summary,
    )

    spec = Path(args.spec) if args.spec else spec_default
    _check_compare_paths(args, (spec,))
    try:
        load_gate_spec(spec)
        candidate = load_summary(args.candidate)
        load_summary(args.base)
        base_run, candidate_run = load_evaluation(args.base), load_evaluation(args.candidate)
    except (GateSpecError, SummaryError, CompareError) as exc:
        raise UsageError(str(exc)) from None
    try:
        comparison = compare_evaluations(base_run, candidate_run)
    except NotComparableError as exc:
        comparison = f"refused: {exc}"
    except CompareError as exc:
        raise UsageError(str(exc)) from None
    evaluation = evaluate_arena_gates(candidate, comparison, spec)
    verdict = evaluation.verdicts()
    out = {**evaluation.to_dict(), "rows": gate_rows(evaluation), "comparison": comparison}
    if args.output:
        _write_text(Path(args.output), json.dumps(out, indent=2, sort_keys=True, default=str) + "\n")
    if args.json:
        print_json(out)
    else:
        print(gate_table(evaluation))
        print(f"\ngate spec {spec} ({evaluation.spec_name}) sha256 {evaluation.spec_sha256}")
        claims = ", ".join(evaluation.claim_gates)
        print(f"{out['n_failed']} of {out['n_checks']} checks did not pass")
        print(f"promotion (every gate except {claims}): {'PASS' if verdict['promotion'] else 'FAIL'}")
        supported = "supported" if verdict["communication_claim"] else "not supported"
        print(f"communication claim ({claims}): {supported}")
    return 0 if verdict["promotion"] else 1


def register_handoff_subcommand(commands: argparse._SubParsersAction) -> None:
    handoff = commands.add_parser(
        "handoff", help="write the GPU handoff document from the built data and recipe"
    )
    handoff.add_argument(
        "--data", default=DEFAULT_DATA_DIR, help=f"SFT data directory (default {DEFAULT_DATA_DIR})"
    )
    handoff.add_argument("--out", help="output Markdown file (default DATA/GPU_HANDOFF.md; '-' prints it)")
    handoff.add_argument("--gate-spec", default=None, help=f"gate spec (default {DEFAULT_GATE_SPEC})")
    handoff.add_argument("--oracle-eval", help="an oracle evaluation directory whose summary is quoted")
    handoff.set_defaults(func=_handoff)


def _handoff(args: argparse.Namespace) -> int:
    from rftlab.analysis.arena.gates import DEFAULT_GATE_SPEC as spec_default
    from rftlab.analysis.arena.gates import SummaryError, load_summary
    from rftlab.analysis.arena.handoff import HandoffError, render_handoff

    spec = Path(args.gate_spec) if args.gate_spec else spec_default
    if not spec.is_file():
        raise UsageError(f"gate spec {spec} does not exist")
    try:
        oracle = load_summary(args.oracle_eval) if args.oracle_eval else None
        text = render_handoff(args.data, gate_spec=spec, oracle_summary=oracle)
    except (HandoffError, SummaryError) as exc:
        raise UsageError(str(exc)) from exc
    if args.out == "-":
        print(text, end="")
        return 0
    out = Path(args.out) if args.out else Path(args.data) / "GPU_HANDOFF.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_text(out, text)
    print(f"wrote {out}")
    return 0


def register_sft_subcommand(commands: argparse._SubParsersAction) -> None:
    smoke = commands.add_parser(
        "sft-smoke",
        help="overfit check alone: LoRA SFT (cross_entropy, assistant tokens only) on the overfit rows, then "
        "strict-JSON scoring of the same rows (tinker with TINKER_API_KEY, else the local backend)",
    )
    smoke.add_argument(
        "--data", default=DEFAULT_DATA_DIR, help=f"SFT data directory (default {DEFAULT_DATA_DIR})"
    )
    smoke.add_argument(
        "--rows",
        type=deferred(_stage1_limit("MAX_ROWS")),
        default=None,
        help="a phase-balanced prefix of N overfit rows (default: all 256)",
    )
    smoke.add_argument(
        "--steps",
        type=deferred(_stage1_limit("MAX_STEPS")),
        default=None,
        help="optimizer steps (default: the recipe's 96)",
    )
    smoke.add_argument(
        "--batch-size",
        type=deferred(_stage1_limit("MAX_BATCH")),
        default=None,
        help="rows per step (default: the recipe's 16)",
    )
    smoke.add_argument(
        "--lr", type=number(gt=0), default=None, help="peak learning rate (default: the recipe's 1e-4)"
    )
    smoke.add_argument(
        "--max-tokens",
        type=deferred(_stage1_limit("MAX_TOKENS")),
        default=224,
        help="greedy completion limit",
    )
    smoke.add_argument(
        "--base-model",
        default=None,
        help="base model (default: the recipe's model on tinker; the tiny local arena model built under "
        "--work-dir on the local backend)",
    )
    smoke.add_argument(
        "--work-dir",
        default=None,
        help="local model and checkpoint storage (default: .runs_local_tinker/arena_sft_smoke beside the "
        "run store; never inside it, where every folder is a run)",
    )
    smoke.add_argument("--output", help="write the verdict as JSON here")
    smoke.set_defaults(func=_sft_smoke)

    run = commands.add_parser(
        "sft-run",
        help="the Stage-1 experiment order as one lineage in the run store: base eval, overfit check, LoRA SFT "
        "with validation, selection, one test/frozen evaluation, comparison and gates (docs/arena.md §11)",
    )
    run.add_argument("spec", help="Stage-1 spec, e.g. data/specs/arena_sft_stage1.json")
    run.add_argument(
        "--backend",
        choices=["local", "tinker", "simulated"],
        default="local",
        help="where the lineage trains: the in-process local backend, Tinker, or the simulated learner",
    )
    run.add_argument("--data", default=None, help="SFT data directory (default: the spec's data_dir)")
    run.add_argument("--root", default=None, help="run store root (default: runs/ of the project)")
    run.add_argument(
        "--work-dir", default=None, help="local model and checkpoints (default ROOT/.arena_sft_work)"
    )
    run.add_argument(
        "--base-model", default=None, help="override the spec's base model (e.g. a local HF directory)"
    )
    run.add_argument("--device", default="cpu", help="local backend device (cpu or cuda)")
    run.add_argument(
        "--diagnosis-eval",
        action="store_true",
        help="evaluate the selected checkpoint again as a diagnosis run (excluded from every claim)",
    )
    run.add_argument("--json", action="store_true", help="print the lineage record as JSON")
    run.set_defaults(func=_sft_run)


def _sft_smoke(args: argparse.Namespace) -> int:
    from rftlab.studies.arena import sft_smoke

    if args.output:
        _check_out(args.output, "--output")
    try:
        result = sft_smoke(
            args.data,
            rows=args.rows,
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            max_tokens=args.max_tokens,
            base_model=args.base_model,
            work_dir=args.work_dir,
        )
    except ValueError as exc:  # missing or malformed data, or an SftError
        raise UsageError(str(exc)) from exc
    out = result.to_dict()
    if args.output:
        _write_text(Path(args.output), json.dumps(out, indent=2, sort_keys=True) + "\n")
    print_json(out)
    return 0 if result.passed else 1


def _sft_run(args: argparse.Namespace) -> int:
    from rftlab.runs import RunStoreError
    from rftlab.studies.arena import lineage_rows, run_stage1
    from rftlab.training.arena.stage1 import SingleEvaluationError, Stage1Error

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        result = run_stage1(
            args.spec,
            backend=args.backend,
            store_root=args.root,
            data_dir=args.data,
            work_dir=args.work_dir,
            base_model=args.base_model,
            device=args.device,
            diagnosis_eval=args.diagnosis_eval,
            progress=progress,
        )
    except SingleEvaluationError as exc:
        print(f"rftlab: refused: {exc}", file=sys.stderr)
        return 1
    except (Stage1Error, RunStoreError) as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    if args.json:
        print_json(result.lineage)
    else:
        print(f"lineage {result.lineage['lineage']} ({result.lineage['spec_name']}, backend {args.backend})")
        for row in lineage_rows(result):
            print(f"  {row['step']}. {row['stage']}: {row['outcome']} [{row['run folder']}]")
        if result.stopped_at is not None:
            print(f"stopped at step {result.stopped_at}: {result.lineage['stop_reason']}")
    if result.stopped_at is not None:
        return 1
    return 0 if result.gates and result.gates["verdicts"]["promotion"] else 1
