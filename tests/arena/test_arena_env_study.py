"""Notebook 04's study driver (``rftlab.studies.arena_env``) against independent computations: the
lower-layer functions called directly on the same small input, or counted by hand."""

from __future__ import annotations

from statistics import fmean

import pytest

from rftlab.envs.arena import BLUE, RED, frozen_cases, generate_state, solve_joint_action, state_fingerprint
from rftlab.envs.arena.world import compact_json
from rftlab.policies.arena.scripted import BASELINE_POLICIES, deterministic_policy
from rftlab.studies.arena_env import baseline_study, case_hardness, headroom, protocol_example, world_view

STRIDE = 30  # frozen cases 0 and 30: sizes 12 and 13, both against balanced RED
REPEATS = 2


@pytest.fixture(scope="module")
def baselines():
    return baseline_study(STRIDE, REPEATS)


@pytest.fixture(scope="module")
def difficulty(baselines):
    return case_hardness(baselines)


def test_world_view_counts_the_edges_and_agents_of_the_generated_state():
    view = world_view(0, 12)
    state = generate_state(0, 12)
    edges = {frozenset((a, b)) for a, node in state.nodes.items() for b in node.neighbors}
    assert view.edges == len(edges)
    assert view.fingerprint == state_fingerprint(state)
    placed = sorted(text for names in view.on_node.values() for text in names)
    assert placed == sorted(f"{a.id} (r={a.resource})" for a in state.agents.values())
    assert list(view.node_table()["node"]) == list(state.nodes)


def test_baseline_study_rates_and_comparisons_match_a_hand_count(baselines):
    assert [c.index for c in baselines.cases] == [c.index for c in frozen_cases()[::STRIDE]]
    rate = baselines.rate
    n_cases = len(baselines.cases)
    for policy in BASELINE_POLICIES:
        mine = [o for o in baselines.outcomes if o.policy == policy]
        assert rate[policy].n == len(mine) == n_cases * (REPEATS if policy == "random" else 1)
        assert rate[policy].optimal == sum(o.optimal for o in mine)
        assert rate[policy].mean_regret == pytest.approx(fmean(o.regret for o in mine))
    assert rate["oracle"].mean_regret == 0 and rate["oracle"].optimal == n_cases
    # per case: random legal's regret is the mean over its draws
    per_case = {
        c.index: fmean(
            o.regret for o in baselines.outcomes if o.policy == "random" and o.case_index == c.index
        )
        for c in baselines.cases
    }
    assert list(baselines.regret_wide["random"]) == pytest.approx(
        [per_case[c.index] for c in baselines.cases]
    )
    # neighbouring pairs: left − right per case, and their signs counted by hand
    for (left, right), c in baselines.comparisons.items():
        d = (baselines.regret_wide[left] - baselines.regret_wide[right]).tolist()
        assert c.mean == pytest.approx(fmean(d))
        signs = baselines.signs[left, right]
        assert signs.positive + signs.negative + signs.ties == n_cases
        assert signs.positive == sum(x > 1e-9 for x in d) and signs.negative == sum(x < -1e-9 for x in d)
    assert list(baselines.comparisons) == list(
        zip(BASELINE_POLICIES[:-1], BASELINE_POLICIES[1:], strict=True)
    )
    # the bars over all cases are each policy's mean per-case regret
    everything = baselines.regret_bars["size"][0]
    assert everything.label == "all cases"
    for policy, (mean, low, high) in zip(baselines.policies, everything.stats, strict=True):
        assert mean == pytest.approx(fmean(baselines.regret_wide[policy])) and low <= mean <= high


def test_case_hardness_is_the_oracle_enumeration(baselines, difficulty):
    case = baselines.cases[1]
    state = generate_state(case.seed, case.size)
    solution = solve_joint_action(state, BLUE, deterministic_policy(state, RED, case.style))
    row = difficulty.hardness.iloc[1]
    assert (row["optimal_count"], row["explored"]) == (solution.optimal_count, solution.explored)
    assert row["chance rate"] == pytest.approx(solution.optimal_count / solution.explored)
    assert int(difficulty.count_table["cases"].sum()) == len(baselines.cases)
    random = [o for o in baselines.outcomes if o.policy == "random"]
    assert difficulty.random_rate == pytest.approx(sum(o.optimal for o in random) / len(random))


def test_headroom_share_hits_and_chance_are_computed_from_the_outcomes(baselines, difficulty):
    numbers = headroom(baselines, difficulty, reps=200, seed=0, z=1.96)
    wide = baselines.regret_wide
    assert numbers.wait_share.share == pytest.approx(fmean(wide["sequential"]) / fmean(wide["wait"]))
    heuristics = [o for o in baselines.outcomes if o.policy in ("sequential", "independent", "wait")]
    assert numbers.heuristic_hits == sum(o.optimal for o in heuristics)
    chance = sum(r["optimal_count"] / r["explored"] for _, r in difficulty.hardness.iterrows())
    assert numbers.expected_chance_hits == pytest.approx(chance)
    assert set(numbers.resolved) | set(numbers.unresolved) == {f"{a} − {b}" for a, b in baselines.comparisons}
    assert numbers.slice_n == 1  # each size slice holds one of the two cases


def test_protocol_example_marks_the_oracle_action_and_parses_the_reference_replies():
    example = protocol_example(0, "blue-0")
    case = frozen_cases()[0]
    state = generate_state(case.seed, case.size)
    canonical = solve_joint_action(
        state, BLUE, deterministic_policy(state, RED, case.style)
    ).canonical_assignment
    marked = example.legal_table[example.legal_table["canonical (SFT target)"] == "←"]
    assert list(marked["action"]) == [compact_json(canonical["blue-0"].to_dict())]
    table = example.parse_table
    assert list(table["phase"]) == ["broadcast"] * 8 + ["act"] * 5
    assert list(table["valid"]) == ["yes", "yes"] + ["no"] * 6 + ["yes"] + ["no"] * 4
    assert [m["role"] for m in example.broadcast_messages] == ["system", "user"]
