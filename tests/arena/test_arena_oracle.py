"""Scripted styles, the exact oracle and its tie-breaks (docs/arena.md §6, §7, Appendix A.1/A.4/A.6)."""

from __future__ import annotations

import itertools
import statistics

import pytest

from rftlab.envs.arena.cases import FROZEN_MANIFEST_SHA256, frozen_cases, manifest_sha256
from rftlab.envs.arena.oracle import (
    JointSolution,
    joint_action_rewards,
    oracle_regret,
    select_optimum,
    solve_joint_action,
    solve_joint_action_bruteforce,
)
from rftlab.envs.arena.rules import Action, legal_actions, step
from rftlab.envs.arena.world import build_state, generate_mechanics_state, generate_state, team_agent_ids
from rftlab.policies.arena.scripted import (
    deterministic_policy,
    local_policy_action,
    local_priority,
    ranked_actions,
)

W = Action("WAIT")


def A(kind, target=None, amount=None):  # noqa: N802
    return Action(kind, target, amount)


def solve_case(case):
    state = generate_state(case.seed, case.size)
    red = deterministic_policy(state, "RED", case.style)
    return state, red, solve_joint_action(state, "BLUE", red)


def assert_same_solution(a: JointSolution, b: JointSolution):
    assert a.reward == b.reward
    assert a.canonical_assignment == b.canonical_assignment
    assert a.optimal_count == b.optimal_count
    assert a.action_options == b.action_options
    assert a.explored == b.explored
    assert a.optimal_assignments == b.optimal_assignments


# ---------------------------------------------------------------- scripted policies


def test_seed0_red_balanced_and_local_actions():
    state = generate_state(0, 12)
    assert deterministic_policy(state, "RED", "balanced") == {
        "red-0": A("CAPTURE", "V72"),
        "red-1": A("TRANSFER", "red-0", 1),
        "red-2": A("CAPTURE", "V63"),
        "red-3": A("PROBE", "V48"),
    }
    # A.1 broadcast targets carry the balanced local choice as intent (blue-0 PROBE V48, blue-3 PROBE V59)
    assert local_policy_action(state, "blue-0") == A("PROBE", "V48")
    assert local_policy_action(state, "blue-3") == A("PROBE", "V59")


def test_priority_table_and_style_bonuses():
    state = generate_state(0, 12)
    # blue-3 knows V59 (NEUTRAL SECURE value 3 critical), V15 (RED EXPOSED value 3), V63 (own EXPOSED critical)
    assert local_priority(state, "blue-3", A("PROBE", "V59")) == (8 + 3 + 2, "PROBE", "V59")
    assert local_priority(state, "blue-3", A("PROBE", "V15")) == (1, "PROBE", "V15")
    assert local_priority(state, "blue-3", A("CAPTURE", "V15")) == (9 + 3, "CAPTURE", "V15")
    assert local_priority(state, "blue-3", A("CAPTURE", "V59")) == (1, "CAPTURE", "V59")
    assert local_priority(state, "blue-3", A("FORTIFY", "V63")) == (7 + 3 + 3, "FORTIFY", "V63")
    assert local_priority(state, "blue-3", W) == (0, "WAIT", "V63")
    assert local_priority(state, "blue-0", A("SCAN", "V55")) == (2, "SCAN", "V55")
    assert local_priority(state, "red-1", A("TRANSFER", "red-0", 1)) == (3, "TRANSFER", "red-0")
    assert local_priority(state, "blue-3", A("CAPTURE", "V15"), "aggressive")[0] == 12 + 6
    assert local_priority(state, "blue-3", A("PROBE", "V59"), "aggressive")[0] == 13 + 4
    assert local_priority(state, "blue-3", A("FORTIFY", "V63"), "aggressive")[0] == 13 - 2
    assert local_priority(state, "blue-3", A("FORTIFY", "V63"), "defensive")[0] == 13 + 5
    assert local_priority(state, "blue-3", A("PROBE", "V59"), "defensive")[0] == 13 - 1
    with pytest.raises(ValueError, match="style"):
        local_priority(state, "blue-3", W, "reckless")


def test_transfer_and_recover_scores():
    state = build_state(
        [
            {"id": "X", "owner": "BLUE", "value": 2, "critical": True, "compromised": True},
            {"id": "Y", "owner": "BLUE", "value": 1},
        ],
        [("X", "Y")],
        [("blue-0", "X", 2), ("blue-1", "Y", 0), ("blue-2", "Y", 3), ("blue-3", "Y", 3)]
        + [(f"red-{k}", "Y", 1) for k in range(4)],
    )
    assert local_priority(state, "blue-0", A("TRANSFER", "blue-1", 1))[0] == 3 + 8 + 2
    assert local_priority(state, "blue-0", A("TRANSFER", "blue-2", 1))[0] == 3 + 2
    assert local_priority(state, "blue-0", A("RECOVER", "X"))[0] == 12 + 2 + 3
    assert local_priority(state, "blue-0", A("RECOVER", "X"), "defensive")[0] == 17 + 6
    assert local_priority(state, "blue-0", A("RECOVER", "X"), "aggressive")[0] == 17 - 1


def test_ties_break_on_kind_then_target_descending():
    state = build_state(
        [
            {"id": "H", "owner": "BLUE", "value": 1},
            {"id": "P", "owner": "RED", "value": 2},
            {"id": "Q", "owner": "RED", "value": 2},
        ],
        [("H", "P"), ("H", "Q")],
        [("blue-0", "H", 1), ("blue-1", "H", 1), ("blue-2", "H", 1), ("blue-3", "H", 1)]
        + [("red-0", "P", 1), ("red-1", "Q", 1), ("red-2", "P", 1), ("red-3", "Q", 1)],
    )
    ranked = ranked_actions(state, "blue-0")
    assert ranked[:2] == [A("PROBE", "Q"), A("PROBE", "P")]  # equal scores: target descending
    assert local_policy_action(state, "blue-0") == A("PROBE", "Q")
    # claim-avoiding team policy: the next agents take the next unclaimed (kind, target)
    team = deterministic_policy(state, "BLUE")
    assert team["blue-0"] == A("PROBE", "Q") and team["blue-1"] == A("PROBE", "P")
    assert team["blue-2"] == A("FORTIFY", "H")
    assert team["blue-3"].kind != "PROBE" and team["blue-3"] != A("FORTIFY", "H")


# ---------------------------------------------------------------- oracle vectors


def test_seed0_oracle_vector():
    state = generate_state(0, 12)
    solution = solve_joint_action(state, "BLUE", deterministic_policy(state, "RED"))
    assert solution.reward == 3.800000000000001
    assert solution.unique and solution.optimal_count == 1
    assert solution.explored == 1260
    assert solution.canonical_assignment == {
        "blue-0": A("SCAN", "V55"),
        "blue-1": A("FORTIFY", "V72"),
        "blue-2": A("CAPTURE", "V48"),
        "blue-3": A("FORTIFY", "V63"),
    }


def test_frozen_manifest_hash():
    cases = frozen_cases()
    assert len(cases) == 60 and manifest_sha256(cases) == FROZEN_MANIFEST_SHA256
    first, last = cases[0], cases[-1]
    assert (first.seed, first.size, first.style) == (1000003, 12, "balanced")
    assert (last.seed, last.size, last.style) == (1008086, 14, "defensive")


@pytest.mark.parametrize(
    ("index", "red", "reward", "blue", "count", "explored"),
    [
        (
            0,
            [A("PROBE", "V75"), A("PROBE", "V28"), A("PROBE", "V32"), A("PROBE", "V94")],
            4.9,
            [A("CAPTURE", "V28"), A("PROBE", "V76"), A("FORTIFY", "V17"), A("PROBE", "V65")],
            2,
            900,
        ),
        (
            1,
            [A("PROBE", "V85"), A("FORTIFY", "V95"), A("PROBE", "V69"), A("FORTIFY", "V89")],
            1.25,
            [A("CAPTURE", "V58"), A("FORTIFY", "V85"), A("CAPTURE", "V69"), A("PROBE", "V58")],
            2,
            2205,
        ),
        (
            59,
            [A("FORTIFY", "V65"), A("FORTIFY", "V29"), A("FORTIFY", "V28"), A("FORTIFY", "V71")],
            2.6,
            [A("FORTIFY", "V20"), A("RECOVER", "V62"), A("FORTIFY", "V27"), A("FORTIFY", "V84")],
            2,
            1260,
        ),
    ],
)
def test_frozen_case_vectors(index, red, reward, blue, count, explored):
    _, red_actions, solution = solve_case(frozen_cases()[index])
    assert list(red_actions.values()) == red
    assert solution.reward == pytest.approx(reward, abs=1e-9)
    assert list(solution.canonical_assignment.values()) == blue
    assert (solution.optimal_count, solution.explored) == (count, explored)


def test_frozen_case_aggregates():
    results = [(case, solve_case(case)[2]) for case in frozen_cases()]
    assert sum(s.unique for _, s in results) == 30
    assert max(s.optimal_count for _, s in results) == 16
    explored = [s.explored for _, s in results]
    assert (min(explored), max(explored), sum(explored)) == (480, 3072, 75_170)
    assert statistics.fmean(explored) == pytest.approx(1252.83, abs=0.005)
    for size, mean in ((12, 2.39), (13, 3.19), (14, 2.355)):
        assert statistics.fmean(s.reward for c, s in results if c.size == size) == pytest.approx(
            mean, abs=1e-9
        )
    for style, mean in (("balanced", 3.2025), ("aggressive", 3.28), ("defensive", 1.4525)):
        assert statistics.fmean(s.reward for c, s in results if c.style == style) == pytest.approx(
            mean, abs=1e-9
        )
    assert statistics.fmean(s.reward for _, s in results) == pytest.approx(2.645, abs=1e-9)


def test_sft_solver_vectors():
    """A.6: the first natural ACT row (seed 2) and the first accepted mechanics seeds."""
    state = generate_state(2, 12)
    red = deterministic_policy(state, "RED")
    solution = solve_joint_action(state, "BLUE", red)
    assert (solution.reward, solution.optimal_count, solution.explored) == (-1.0499999999999994, 2, 900)
    local = {a: local_policy_action(state, a) for a in team_agent_ids("BLUE")}
    assert step(state, {**red, **local}).rewards["BLUE"] == -1.6999999999999993
    assert solution.acceptable("blue-2") == (A("PROBE", "V20"),)
    for seed, skill, reward, action in (
        (5_000_000, "WAIT", 1.7500000000000004, W),
        (5_002_000, "SCAN", 3.8500000000000005, None),
        (5_004_006, "TRANSFER", 0.24999999999999992, A("TRANSFER", "blue-1", 1)),
    ):
        mech = generate_mechanics_state(seed, skill)
        sol = solve_joint_action(mech, "BLUE", deterministic_policy(mech, "RED"))
        assert sol.reward == reward
        (only,) = sol.acceptable("blue-0")
        assert only.kind == skill and local_policy_action(mech, "blue-0") == only
        if action is not None:
            assert only == action


# ---------------------------------------------------------------- exactness against brute force


def _small_states():
    yield generate_state(0, 12), "BLUE", "balanced"
    yield generate_mechanics_state(5_004_006, "TRANSFER"), "BLUE", "balanced"
    yield generate_mechanics_state(5_002_000, "SCAN"), "BLUE", "aggressive"
    yield generate_state(11, 10), "RED", "defensive"  # solve for RED against fixed BLUE
    later = generate_state(4, 12)  # a turn-1 state with moved agents and stale remote knowledge
    first = {
        **deterministic_policy(later, "RED", "aggressive"),
        **deterministic_policy(later, "BLUE", "aggressive"),
    }
    yield step(later, first).state, "BLUE", "balanced"


@pytest.mark.parametrize("case", list(range(5)))
def test_vectorised_oracle_matches_bruteforce(case):
    state, team, style = list(_small_states())[case]
    other = "RED" if team == "BLUE" else "BLUE"
    fixed = deterministic_policy(state, other, style)
    fast = solve_joint_action(state, team, fixed)
    slow = solve_joint_action_bruteforce(state, team, fixed)
    assert_same_solution(fast, slow)
    rewards, _, legal = joint_action_rewards(state, team, fixed)
    members = team_agent_ids(team)
    expected = [
        step(state, {**fixed, **dict(zip(members, combo, strict=True))}).rewards[team]
        for combo in itertools.product(*legal)
    ]
    assert rewards.tolist() == expected  # bit-identical, combination by combination


def test_oracle_with_invalid_opponent_actions():
    state = generate_state(0, 12)
    fixed = {"red-0": A("CAPTURE", "NOT_A_NODE"), "red-1": A("PROBE", "V71")}  # both illegal for RED
    fast = solve_joint_action(state, "BLUE", fixed)
    assert_same_solution(fast, solve_joint_action_bruteforce(state, "BLUE", fixed))


def test_oracle_is_an_upper_bound_and_regret():
    state = generate_state(0, 12)
    red = deterministic_policy(state, "RED")
    solution = solve_joint_action(state, "BLUE", red)
    members = team_agent_ids("BLUE")
    for combo in itertools.islice(
        itertools.product(*(legal_actions(state, a) for a in members)), 0, None, 37
    ):
        regret = oracle_regret(solution, state, dict(zip(members, combo, strict=True)), red)
        assert regret >= -1e-12
    assert oracle_regret(solution, state, solution.canonical_assignment, red) == 0.0
    assert oracle_regret(solution, state, {}, red) > 0  # all WAIT is not optimal here


def test_select_optimum_running_semantics():
    members = ["a", "b"]
    combos = [(A("WAIT"), A("PROBE", "X")), (A("PROBE", "X"), W), (W, W), (A("CAPTURE", "X"), W)]
    # the third reward is within 1e-12 of the running best (a tie); the canonical has the fewest non-WAITs
    sol = select_optimum([1.0, 1.0 + 5e-13, 1.0 - 5e-13, 0.5], combos, members, "BLUE", 4)
    assert sol.reward == 1.0 and sol.optimal_count == 3
    assert sol.canonical_assignment == {"a": W, "b": W}
    assert sol.action_options == {"a": (A("PROBE", "X"), W), "b": (A("PROBE", "X"), W)}
    # among equal non-WAIT counts the lexicographically smallest tuple wins; the cap only limits storage
    capped = select_optimum([2.0, 2.0, 1.0, 2.0], combos, members, "BLUE", 4, max_optima=2)
    assert capped.canonical_assignment == {"a": A("CAPTURE", "X"), "b": W}
    assert capped.optimal_count == 3 and len(capped.optimal_assignments) == 2
    # a later reward beyond the tolerance resets the cluster
    reset = select_optimum([1.0, 1.0 + 2e-12, 1.0], combos[:3], members, "BLUE", 3)
    assert reset.reward == 1.0 + 2e-12 and reset.optimal_count == 1
    assert reset.canonical_assignment == {"a": A("PROBE", "X"), "b": W}


@pytest.mark.slow
def test_vectorised_oracle_matches_bruteforce_on_all_frozen_cases():
    members = team_agent_ids("BLUE")
    for case in frozen_cases():
        state = generate_state(case.seed, case.size)
        red = deterministic_policy(state, "RED", case.style)
        rewards, _, legal = joint_action_rewards(state, "BLUE", red)
        expected = [
            step(state, {**red, **dict(zip(members, combo, strict=True))}, check=False).rewards["BLUE"]
            for combo in itertools.product(*legal)
        ]
        assert rewards.tolist() == expected, case


def test_optimal_outcome_needs_strict_replies_and_zero_regret():
    from rftlab.envs.arena.oracle import optimal_outcome

    assert optimal_outcome(0.0) and optimal_outcome(5e-10)
    assert not optimal_outcome(2e-9)
    assert not optimal_outcome(0.0, strict_team_protocol=False)
    state = generate_state(0, 12)
    red = deterministic_policy(state, "RED")
    solution = solve_joint_action(state, "BLUE", red)
    # any optimal assignment (not only the canonical one) has zero regret
    for assignment in solution.optimal_assignments:
        assert optimal_outcome(oracle_regret(solution, state, assignment, red))
