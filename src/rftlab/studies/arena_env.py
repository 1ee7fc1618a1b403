"""The arena environment notebook's study (``04_arena_env``, part of the ``rftlab.studies.arena`` driver).

One function per section of the notebook, each returning a frozen result. ``world_view`` generates one
world. ``baseline_study`` scores the model-free baselines on the frozen cases and compares neighbouring
policies. ``case_hardness`` asks the oracle how many optima each case has. ``protocol_example`` renders
one agent's prompts and runs the strict parsers on typical replies. ``headroom`` gathers the numbers the
conclusions quote. The notebook only displays them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from rftlab.analysis.arena.comparisons import PairedComparison, RateRow, RegretShare
from rftlab.analysis.paired import SignTest
from rftlab.envs.arena import BLUE, NEUTRAL, RED, GameState
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT, FROZEN_MANIFEST_SHA256, STYLES, FrozenCase
from rftlab.envs.arena.rules import Action
from rftlab.policies.arena.scripted import BASELINE_POLICIES, CaseOutcome

__all__ = [
    "BLUE",
    "FROZEN_CASE_COUNT",
    "FROZEN_MANIFEST_SHA256",
    "NEUTRAL",
    "POLICY_LABELS",
    "RED",
    "BaselineStudy",
    "CaseHardness",
    "Headroom",
    "ProtocolExample",
    "RegretBars",
    "WorldView",
    "baseline_study",
    "case_hardness",
    "headroom",
    "protocol_example",
    "world_view",
]

POLICY_LABELS: dict[str, str] = {
    "oracle": "oracle (canonical optimum)",
    "sequential": "sequential (claim-avoiding team heuristic)",
    "independent": "independent (each agent's local best)",
    "random": "random legal",
    "wait": "all WAIT",
}


# ------------------------------------------------------------------------------------ 1. one world


@dataclass(frozen=True)
class WorldView:
    """One generated world, the agents standing on each node and its fingerprint (docs/arena.md §A.2)."""

    seed: int
    size: int
    state: GameState
    on_node: dict[str, list[str]]
    """node id -> ``"<agent> (r=<resource>)"`` of the agents on it"""
    fingerprint: str

    @property
    def edges(self) -> int:
        return sum(len(n.neighbors) for n in self.state.nodes.values()) // 2

    def node_table(self) -> pd.DataFrame:
        """The nodes in generation order, one row each."""
        return pd.DataFrame(
            [
                {
                    "node": node.id,
                    "owner": node.owner,
                    "value": node.value,
                    "critical": "yes" if node.critical else "",
                    "fortification": node.fortification,
                    "status": node.status,
                    "neighbours": " ".join(node.neighbors),
                    "agent (resource)": ", ".join(self.on_node.get(node.id, [])),
                }
                for node in self.state.nodes.values()
            ]
        )


def world_view(seed: int, size: int) -> WorldView:
    """``generate_state(seed, size)`` with the agents on each node and the state fingerprint."""
    from rftlab.envs.arena import generate_state, state_fingerprint

    state = generate_state(seed, size)
    on_node: dict[str, list[str]] = {}
    for agent in state.agents.values():
        on_node.setdefault(agent.position, []).append(f"{agent.id} (r={agent.resource})")
    return WorldView(seed, size, state, on_node, state_fingerprint(state))


# ------------------------------------------------------------------------------------ 2. baselines


@dataclass(frozen=True)
class RegretBars:
    """The mean regret of each policy with its 95% interval over cases, in one group of cases."""

    label: str
    stats: list[tuple[float, float, float]]
    """``(mean, low, high)`` per policy, in ``BaselineStudy.policies`` order"""


@dataclass(frozen=True)
class BaselineStudy:
    """The model-free baselines on the frozen cases: outcomes, Wilson tables, regret intervals and the
    paired comparisons of neighbouring policies."""

    cases: tuple[FrozenCase, ...]
    random_repeats: int
    policies: list[str]
    case_info: pd.DataFrame
    outcomes: list[CaseOutcome]
    scores: pd.DataFrame
    """one row per outcome, with its case's size and style"""
    slices: list[tuple[str, Any]]
    """``(column, value)`` of every size and style slice"""
    rate_rows: list[RateRow]
    per_case: pd.DataFrame
    """reward and regret per policy and case (random legal averaged over its draws)"""
    regret_bars: dict[str, list[RegretBars]]
    """``size`` and ``style``: all cases, then each slice of that column"""
    quantiles: list[tuple[int, str, float]]
    """``(cases, label, q)`` of the interval quantile at every case count used"""
    regret_wide: pd.DataFrame
    comparisons: dict[tuple[str, str], PairedComparison]
    signs: dict[tuple[str, str], SignTest]

    @property
    def rate(self) -> dict[str, RateRow]:
        """The all-cases row of each policy."""
        return {r.policy: r for r in self.rate_rows if r.slice == "all"}

    def rate_table(self, with_slice: bool = False) -> pd.DataFrame:
        """The Wilson table over all cases, or by slice."""
        from rftlab.analysis.arena.comparisons import rate_frame

        rows = [r for r in self.rate_rows if (r.slice != "all") == with_slice]
        return rate_frame(rows, POLICY_LABELS, with_slice=with_slice)


def _slice_predicate(case_of: dict[int, FrozenCase], column: str, value: Any):
    return lambda o: getattr(case_of[o.case_index], column) == value


def _regret_bars(per_case: pd.DataFrame, slices, policies: list[str]) -> dict[str, list[RegretBars]]:
    from rftlab.analysis.intervals import normal_mean_interval

    out: dict[str, list[RegretBars]] = {}
    for column in ("size", "style"):
        groups = [("all cases", per_case)] + [
            (f"{column} {value}", per_case[per_case[column] == value])
            for kind, value in slices
            if kind == column
        ]
        out[column] = [
            RegretBars(
                label, [normal_mean_interval(f.loc[f["policy"] == p, "regret"].tolist()) for p in policies]
            )
            for label, f in groups
        ]
    return out


def baseline_study(case_stride: int, random_repeats: int) -> BaselineStudy:
    """Every ``case_stride``-th frozen case, each baseline once (random legal ``random_repeats`` times)."""
    from rftlab.analysis.arena.comparisons import neighbour_comparisons, optimal_rate_table
    from rftlab.analysis.intervals import mean_interval_quantile
    from rftlab.analysis.paired import sign_test
    from rftlab.envs.arena.cases import frozen_cases
    from rftlab.policies.arena.scripted import evaluate_baselines

    cases = frozen_cases()[::case_stride]
    case_info = pd.DataFrame([asdict(c) for c in cases]).rename(columns={"index": "case_index"})
    outcomes = evaluate_baselines(BASELINE_POLICIES, cases, random_repeats=random_repeats)
    scores = pd.DataFrame([asdict(o) for o in outcomes]).merge(case_info, on="case_index")
    case_of = {c.index: c for c in cases}
    slices: list[tuple[str, Any]] = [("size", size) for size in sorted(case_info["size"].unique())] + [
        ("style", style) for style in STYLES if style in set(case_info["style"])
    ]
    predicates = [(f"{c} {v}", _slice_predicate(case_of, c, v)) for c, v in slices]
    rate_rows = optimal_rate_table(outcomes, slices=[("all", lambda o: True), *predicates])
    by_case = scores.groupby(["policy", "case_index", "size", "style"], as_index=False)
    per_case = pd.DataFrame(by_case[["reward", "regret"]].mean())
    policies = list(BASELINE_POLICIES)
    counts = sorted(
        {len(cases)} | {int(k) for column in ("size", "style") for k in case_info[column].value_counts()}
    )
    quantiles = [(n, mean_interval_quantile(n)[1], mean_interval_quantile(n)[0]) for n in counts]
    regret_wide = per_case.pivot(index="case_index", columns="policy", values="regret")
    comparisons = neighbour_comparisons({p: regret_wide[p].tolist() for p in policies}, policies)
    signs = {key: sign_test((regret_wide[key[0]] - regret_wide[key[1]]).tolist()) for key in comparisons}
    return BaselineStudy(
        cases=cases,
        random_repeats=random_repeats,
        policies=policies,
        case_info=case_info,
        outcomes=outcomes,
        scores=scores,
        slices=slices,
        rate_rows=rate_rows,
        per_case=per_case,
        regret_bars=_regret_bars(per_case, slices, policies),
        quantiles=quantiles,
        regret_wide=regret_wide,
        comparisons=comparisons,
        signs=signs,
    )


# ------------------------------------------------------------------------------------ 3. hardness


@dataclass(frozen=True)
class CaseHardness:
    """Per case: the oracle's reward, its number of optima and of joint actions, and the chance rate."""

    hardness: pd.DataFrame
    count_table: pd.DataFrame
    """cases per ``optimal_count``"""
    by_slice: pd.DataFrame
    random_rate: float
    """the random legal policy's observed optimal rate"""

    @property
    def unique_optima(self) -> int:
        return sum(1 for count in self.hardness["optimal_count"] if count == 1)

    @property
    def easiest(self) -> pd.DataFrame:
        """The three cases with the highest chance rate."""
        return self.hardness.sort_values("chance rate", ascending=False).head(3)


def _by_slice(hardness: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(
        [
            hardness.groupby(column)
            .agg(
                cases=("case_index", "size"),
                unique_optimum=("optimal_count", lambda s: int((s == 1).sum())),
                mean_optimal_count=("optimal_count", "mean"),
                mean_explored=("explored", "mean"),
                mean_chance_rate=("chance rate", "mean"),
                mean_oracle_reward=("oracle reward", "mean"),
            )
            .reset_index()
            .rename(columns={column: "slice"})
            .assign(slice=lambda f, c=column: c + " " + f["slice"].astype(str))
            for column in ("size", "style")
        ],
        ignore_index=True,
    )


def case_hardness(baselines: BaselineStudy) -> CaseHardness:
    """The oracle's answer for each case of ``baselines`` against RED's scripted policy."""
    from rftlab.envs.arena import generate_state, solve_joint_action
    from rftlab.policies.arena.scripted import deterministic_policy

    rows = []
    for case in baselines.cases:
        state = generate_state(case.seed, case.size)
        solution = solve_joint_action(state, BLUE, deterministic_policy(state, RED, case.style))
        rows.append(
            {
                "case_index": case.index,
                "size": case.size,
                "style": case.style,
                "oracle reward": solution.reward,
                "optimal_count": solution.optimal_count,
                "explored": solution.explored,
            }
        )
    hardness = pd.DataFrame(rows)
    hardness["chance rate"] = hardness["optimal_count"] / hardness["explored"]
    counts = hardness["optimal_count"].value_counts().sort_index().rename_axis("optimal_count").reset_index()
    counts.columns = ["optimal_count", "cases"]
    scores = baselines.scores
    random_rate = float(scores.loc[scores["policy"] == "random", "optimal"].mean())
    return CaseHardness(hardness, counts, _by_slice(hardness), random_rate)


# ------------------------------------------------------------------------------------ 4. the protocol


@dataclass(frozen=True)
class ProtocolExample:
    """One agent's broadcast and act prompts in a frozen case, its legal actions, and the strict parsers
    on typical replies."""

    case: FrozenCase
    agent: str
    prompt_version: str
    broadcast_messages: list[dict[str, str]]
    broadcast_actions: int
    """legal actions listed in the broadcast prompt"""
    act_system: str
    """the act system message without the shared base text (whole when it does not start with it)"""
    base_prompt_chars: int
    act_user: str
    legal_table: pd.DataFrame
    parse_table: pd.DataFrame


def _broadcast_replies(state: GameState, agent: str, target: str) -> list[tuple[str, str]]:
    from rftlab.envs.arena.protocol import Broadcast, encode_broadcast
    from rftlab.envs.arena.world import compact_json

    own = state.agents[agent]
    far_node = sorted(set(state.nodes) - set(state.nodes[own.position].neighbors) - {own.position})[0]
    known = state.knowledge[agent][own.position].to_dict()
    return [
        ("valid: the reference broadcast", target),
        ("valid: empty broadcast", encode_broadcast(Broadcast())),
        ("malformed JSON (markdown fence)", f"```json\n{target}\n```"),
        ("malformed JSON (trailing prose)", target + " I will capture next."),
        ("extra key", compact_json({**json.loads(target), "reasoning": "capture"})),
        (
            "illegal intent (not a neighbour)",
            compact_json(
                {"facts": [], "intent": {"type": "CAPTURE", "target": far_node}, "request_resource": 0}
            ),
        ),
        (
            "invented fact (wrong status)",
            compact_json(
                {"facts": [{**known, "status": "FORTIFIED"}], "intent": None, "request_resource": 0}
            ),
        ),
        ("intent given by action id", compact_json({"facts": [], "intent": "A1", "request_resource": 0})),
    ]


def _action_replies(canonical: Action, displayed: Sequence[Action]) -> list[tuple[str, str]]:
    from rftlab.envs.arena.protocol import encode_action
    from rftlab.envs.arena.world import compact_json

    target = encode_action(canonical, displayed)
    return [
        ("valid: the canonical action", target),
        ("malformed JSON (prose)", f"I choose {target}"),
        ("extra key", compact_json({**json.loads(target), "why": "capture"})),
        (
            "action written out instead of its id",
            compact_json({"action_id": f"{canonical.kind} {canonical.target}"}),
        ),
        ("id out of range", compact_json({"action_id": f"A{len(displayed)}"})),
    ]


def _parse_table(
    state: GameState, agent: str, reference: Any, canonical: Action, displayed: Sequence[Action]
) -> pd.DataFrame:
    from rftlab.envs.arena.protocol import (
        action_or_wait,
        broadcast_or_empty,
        encode_broadcast,
        parse_action,
        parse_broadcast,
    )
    from rftlab.envs.arena.world import compact_json

    rows = []
    for label, raw in _broadcast_replies(state, agent, encode_broadcast(reference)):
        result = parse_broadcast(raw, state, agent)
        delivered = "empty broadcast" if broadcast_or_empty(result).is_empty else "the parsed broadcast"
        rows.append(("broadcast", label, raw, result, delivered))
    for label, raw in _action_replies(canonical, displayed):
        result = parse_action(raw, displayed)
        rows.append(
            ("act", label, raw, result, "played as " + compact_json(action_or_wait(result).to_dict()))
        )
    return pd.DataFrame(
        [
            {
                "phase": phase,
                "reply": label,
                "raw text": "`` " + raw.replace("\n", "⏎") + " ``",
                "valid": "yes" if result.valid else "no",
                "error code": result.error or "",
                "what the environment uses": used,
            }
            for phase, label, raw, result, used in rows
        ]
    )


def protocol_example(case_index: int, agent: str) -> ProtocolExample:
    """``agent``'s prompts in frozen case ``case_index``: broadcast, then act under the reference condition
    (§10.2: the inbox holds the oracle's reference broadcasts of its teammates)."""
    from rftlab.envs.arena import generate_state, solve_joint_action
    from rftlab.envs.arena.cases import frozen_cases
    from rftlab.envs.arena.protocol import (
        BASE_SYSTEM_PROMPT,
        PROMPT_VERSION,
        action_prompt,
        broadcast_prompt,
        inbox_for,
        oracle_broadcast,
        permutation_for,
    )
    from rftlab.envs.arena.world import compact_json, team_agent_ids
    from rftlab.policies.arena.scripted import deterministic_policy

    case = frozen_cases()[case_index]
    state = generate_state(case.seed, case.size)
    solution = solve_joint_action(state, BLUE, deterministic_policy(state, RED, case.style))
    blue = team_agent_ids(BLUE)
    k = blue.index(agent)
    messages, displayed = broadcast_prompt(state, agent, permutation_for(case.seed, k))
    reference = {a: oracle_broadcast(state, a, solution.canonical_assignment[a]) for a in blue}
    act_messages, act_displayed = action_prompt(
        state, agent, inbox_for(agent, reference), permutation_for(case.seed, k, 0)
    )
    system = act_messages[0]["content"]
    canonical = solution.canonical_assignment[agent]
    legal = pd.DataFrame(
        [
            {
                "id": f"A{i}",
                "action": compact_json(action.to_dict()),
                "in some optimum": "yes" if action in solution.acceptable(agent) else "",
                "canonical (SFT target)": "←" if action == canonical else "",
            }
            for i, action in enumerate(act_displayed)
        ]
    )
    return ProtocolExample(
        case=case,
        agent=agent,
        prompt_version=PROMPT_VERSION,
        broadcast_messages=messages,
        broadcast_actions=len(displayed),
        act_system=system[len(BASE_SYSTEM_PROMPT) :].strip()
        if system.startswith(BASE_SYSTEM_PROMPT)
        else system,
        base_prompt_chars=len(BASE_SYSTEM_PROMPT),
        act_user=act_messages[1]["content"],
        legal_table=legal,
        parse_table=_parse_table(state, agent, reference[agent], canonical, act_displayed),
    )


# ------------------------------------------------------------------------------------ 5. the numbers


@dataclass(frozen=True)
class Headroom:
    """The numbers the notebook's conclusions and summary quote."""

    heuristic_hits: int
    """case-policy pairs where sequential, independent or all-WAIT is optimal"""
    resolved: list[str]
    unresolved: list[str]
    sequential_vs_independent: PairedComparison
    sequential_vs_independent_signs: SignTest
    slice_regret: dict[tuple[str, str], float]
    wait_share: RegretShare
    """sequential's mean regret as a share of all-WAIT's, bootstrapped over cases"""
    random_not_worse: list[str]
    oracle_by_style: pd.Series
    lowest_regret_style: dict[str, str]
    """non-oracle policy -> the RED style against which its mean regret is lowest"""
    expected_chance_hits: float
    zero_wilson_high: float
    """the Wilson upper bound of 0 optimal of the cases"""
    sequential_wilson: tuple[float, float]
    oracle_reward_interval: tuple[float, float, float]
    sequential_regret_interval: tuple[float, float, float]
    clear_pairs: list[str]
    """the other neighbouring pairs resolved by both the interval and the sign test"""
    slice_n: int

    @property
    def fragile(self) -> bool:
        return self.sequential_vs_independent_signs.p_value >= 0.05


def headroom(baselines: BaselineStudy, hardness: CaseHardness, *, reps: int, seed: int, z: float) -> Headroom:
    """The conclusions' numbers: optimal hits, resolved pairs, slices, the regret share and chance."""
    from rftlab.analysis.arena.comparisons import regret_share
    from rftlab.analysis.intervals import normal_mean_interval, wilson_interval

    b, scores, per_case = baselines, baselines.scores, baselines.per_case
    comparisons, rate = b.comparisons, b.rate
    slice_regret = {(r.slice, r.policy): r.mean_regret for r in b.rate_rows if r.slice != "all"}
    case_regret = per_case.pivot(index="case_index", columns="policy", values="regret")
    slice_names = list(dict.fromkeys(r.slice for r in b.rate_rows if r.slice != "all"))
    style_slices = sorted(name for name in slice_names if name.startswith("style "))
    other = [key for key in comparisons if key != ("sequential", "independent")]
    seq = rate["sequential"]
    return Headroom(
        heuristic_hits=int(
            scores.loc[scores["policy"].isin(["sequential", "independent", "wait"]), "optimal"].sum()
        ),
        resolved=[f"{c.left} − {c.right}" for c in comparisons.values() if c.excludes_zero],
        unresolved=[f"{c.left} − {c.right}" for c in comparisons.values() if not c.excludes_zero],
        sequential_vs_independent=comparisons["sequential", "independent"],
        sequential_vs_independent_signs=b.signs["sequential", "independent"],
        slice_regret=slice_regret,
        wait_share=regret_share(
            "sequential",
            case_regret["sequential"].tolist(),
            "wait",
            case_regret["wait"].tolist(),
            reps=reps,
            seed=seed,
        ),
        random_not_worse=[
            f"{name} (random {slice_regret[name, 'random']:.3f} vs {policy} {slice_regret[name, policy]:.3f})"
            for name in sorted(slice_names)
            for policy in ("sequential", "independent")
            if slice_regret[name, "random"] <= slice_regret[name, policy]
        ],
        oracle_by_style=pd.Series(hardness.hardness.groupby("style")["oracle reward"].mean()),
        lowest_regret_style={
            p: min(style_slices, key=lambda name, p=p: slice_regret[name, p]).removeprefix("style ")
            for p in b.policies[1:]
        },
        expected_chance_hits=float(hardness.hardness["chance rate"].to_numpy().sum()),
        zero_wilson_high=wilson_interval(0, seq.n, z)[1],
        sequential_wilson=wilson_interval(seq.optimal, seq.n, z),
        oracle_reward_interval=normal_mean_interval([o.reward for o in b.outcomes if o.policy == "oracle"]),
        sequential_regret_interval=normal_mean_interval(
            per_case.loc[per_case["policy"] == "sequential", "regret"].tolist()
        ),
        clear_pairs=[
            f"{a} − {c}" for a, c in other if comparisons[a, c].excludes_zero and b.signs[a, c].p_value < 0.05
        ],
        slice_n=min(int(k) for column in ("size", "style") for k in b.case_info[column].value_counts()),
    )
