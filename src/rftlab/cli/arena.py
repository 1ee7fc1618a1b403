"""``rftlab arena``: the swarm arena's model-free baselines, single-case solves and prompts."""

from __future__ import annotations

import argparse
import json

from rftlab.cli import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("arena", help="swarm arena: baselines, oracle solves, prompts")
    commands = parser.add_subparsers(dest="arena_command", metavar="SUBCOMMAND")
    commands.required = True

    baselines = commands.add_parser(
        "baselines",
        help="mean reward / regret / optimal rate of the model-free policies on the 60 frozen cases",
    )
    baselines.add_argument("--json", action="store_true", help="print JSON")
    baselines.add_argument("--policy", action="append", help="restrict to these policies (repeatable)")
    baselines.set_defaults(func=_baselines)

    solve = commands.add_parser(
        "solve", help="exact BLUE oracle for one generated state against scripted RED"
    )
    solve.add_argument("--seed", type=int, required=True)
    solve.add_argument("--size", type=int, default=12)
    solve.add_argument("--style", default="balanced", help="RED style: balanced, aggressive or defensive")
    solve.add_argument("--json", action="store_true", help="print JSON")
    solve.set_defaults(func=_solve)

    prompt = commands.add_parser("prompt", help="print the broadcast-phase prompt of one BLUE agent")
    prompt.add_argument("--seed", type=int, required=True)
    prompt.add_argument("--size", type=int, default=12)
    prompt.add_argument("--agent", default="blue-0")
    prompt.add_argument("--permutation", type=int, default=None, help="default: seed + agent index")
    prompt.set_defaults(func=_prompt)


def _baselines(args: argparse.Namespace) -> int:
    from rftlab.policies.arena import BASELINE_POLICIES, evaluate_baselines, summarize_baselines

    policies = args.policy or list(BASELINE_POLICIES)
    unknown = sorted(set(policies) - set(BASELINE_POLICIES))
    if unknown:
        raise UsageError(f"unknown --policy {unknown}; choose from {list(BASELINE_POLICIES)}")
    summary = summarize_baselines(evaluate_baselines(policies))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{'policy':<12} {'mean_reward':>12} {'mean_regret':>12} {'optimal_rate':>13}")
        for name, row in summary.items():
            print(
                f"{name:<12} {row['mean_reward']:>12.4f} {row['mean_regret']:>12.4f} {row['optimal_rate']:>13.4f}"
            )
    return 0


def _check_generation_args(args: argparse.Namespace) -> None:
    from rftlab.envs.arena.cases import STYLES

    if args.size < 10:
        raise UsageError(f"--size must be >= 10, got {args.size}")
    if getattr(args, "style", "balanced") not in STYLES:
        raise UsageError(f"--style must be one of {list(STYLES)}, got {args.style!r}")


def _solve(args: argparse.Namespace) -> int:
    from rftlab.envs.arena.oracle import solve_joint_action
    from rftlab.envs.arena.world import generate_state, state_fingerprint
    from rftlab.policies.arena import deterministic_policy

    _check_generation_args(args)
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
        print(json.dumps(out, indent=2))
    else:
        print(f"seed {args.seed} size {args.size} RED {args.style}: oracle reward {solution.reward!r}")
        print(f"optimal joint actions: {solution.optimal_count} of {solution.explored}")
        for agent_id, action in solution.canonical_assignment.items():
            print(f"  {agent_id}: {json.dumps(action.to_dict())}")
    return 0


def _prompt(args: argparse.Namespace) -> int:
    from rftlab.envs.arena.protocol import broadcast_prompt
    from rftlab.envs.arena.world import generate_state, team_agent_ids

    _check_generation_args(args)
    blue = team_agent_ids("BLUE")
    if args.agent not in blue:
        raise UsageError(f"--agent must be one of {list(blue)}, got {args.agent!r}")
    permutation = args.seed + blue.index(args.agent) if args.permutation is None else args.permutation
    messages, _ = broadcast_prompt(generate_state(args.seed, args.size), args.agent, permutation)
    print(json.dumps(messages, indent=2))
    return 0
