"""The poker study's typed results for notebook 06 (``analyse_reference``, ``schedule_opponents``,
``first_decision``, ``arm_plans``, ``arm_metrics``, ``tiny_lm_readout``), checked against numbers computed
here from the played rows."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict

import pytest

from rftlab.envs.poker import SCHEDULES
from rftlab.runs.paths import SPECS_DIR
from rftlab.studies.poker import (
    BLIND_COUNTERS,
    POKER_ARM_SPECS,
    REFERENCES,
    SANDBAG,
    TRAINED,
    WARM_BASE,
    TinyLMDesign,
    TinyLMStudy,
    analyse_reference,
    arm_metrics,
    arm_plans,
    first_decision,
    reference_study,
    schedule_opponents,
    tiny_lm_readout,
)
from rftlab.studies.poker_reference import find_pair

ROWS = 4


@pytest.fixture(scope="module")
def analysis():
    study = reference_study(schedule="quick_test", runs=1, rows=ROWS, hands=4, equity_samples=10)
    return analyse_reference(study, reps=200, seed=0)


def by_row(rows, value):
    return {r["row_id"]: float(r[value]) for r in rows}


def test_paired_rft_differences_match_the_rows(analysis):
    rft = {**analysis.study.rft_rows, **analysis.study.shortcut_rows}
    for a, b in [("exploit", "call"), (SANDBAG, "exploit")]:
        for value in ("reward_mean_instance", "reward_gain"):
            x, y = by_row(rft[a], value), by_row(rft[b], value)
            diffs = [x[i] - y[i] for i in x]
            row = analysis.rft_pair(f"{a} − {b}", value)
            assert row.deals == ROWS and row.measure == value
            assert row.mean == pytest.approx(sum(diffs) / ROWS)
            assert (row.better, row.worse, row.ties) == (
                sum(d > 1e-12 for d in diffs), sum(d < -1e-12 for d in diffs), sum(abs(d) <= 1e-12 for d in diffs)
            )  # fmt: skip
            assert row.low <= row.mean <= row.high
            assert row.excludes_zero == (row.low > 0 or row.high < 0)


def test_the_best_blind_counter_is_the_smallest_mean_difference(analysis):
    exploit = by_row(analysis.study.rft_rows["exploit"], "reward_mean_instance")
    means = {}
    for label in BLIND_COUNTERS.values():
        other = by_row(analysis.study.shortcut_rows[label], "reward_mean_instance")
        means[label] = sum(exploit[i] - other[i] for i in exploit) / ROWS
    assert set(analysis.blind) == set(means)
    assert analysis.best_blind == min(means, key=lambda k: means[k])
    best = analysis.blind[analysis.best_blind]
    assert analysis.blind_resolved.resolved == max(abs(best.low), abs(best.high))


def test_schedule_bb_and_paired_schedule_rows_match_the_hands(analysis):
    rows = analysis.study.schedule_rows
    for name, summary in analysis.schedule_bb.items():
        bb = [float(r["bb"]) for r in rows[name]]  # one run: a deal is one hand
        assert summary.overall.stage == summary.overall.opponent == "all"
        assert summary.overall.hands == len(bb) and summary.overall.bb_per_hand == pytest.approx(
            sum(bb) / len(bb)
        )
        assert summary.overall.low <= summary.overall.bb_per_hand <= summary.overall.high
        assert sum(s.hands for s in summary.stages) == len(bb)
    deal = lambda name: {r["hand_id"]: float(r["bb"]) for r in rows[name]}  # noqa: E731
    x, y = deal("exploit"), deal("call")
    row = analysis.schedule_pair("exploit − call")
    assert row.deals == len(x) and row.mean == pytest.approx(sum(x[h] - y[h] for h in x) / len(x))
    stage_one = analysis.schedule_pair("exploit − call", stage=1)
    assert stage_one.deals == analysis.schedule_bb["exploit"].stages[0].hands


def test_rewards_ordering_and_spread_match_the_rows(analysis):
    exploit = by_row(analysis.study.rft_rows["exploit"], "reward_mean_instance")
    call = by_row(analysis.study.rft_rows["call"], "reward_mean_instance")
    gains = [float(r["reward_gain"]) for r in analysis.study.rft_rows["call"]]
    reward = analysis.reward("call", "gain")
    assert reward.rollouts == ROWS and reward.mean == pytest.approx(statistics.mean(gains))
    assert reward.se == pytest.approx(statistics.stdev(gains) / math.sqrt(ROWS))
    assert reward.mean_se() == f"{reward.mean:+.2f} ± {reward.se:.2f}".replace("-0.00", "+0.00")
    shared, crossed = analysis.ordering["reward_mean_instance"]
    assert (shared.dealing, crossed.dealing) == ("row_shared", "per_rollout")
    assert shared.pairs == ROWS and crossed.pairs == ROWS * (ROWS - 1)
    assert shared.a_first == pytest.approx(sum(exploit[i] > call[i] for i in exploit) / ROWS)
    assert crossed.a_first == pytest.approx(
        sum(exploit[i] > call[j] for i in exploit for j in call if i != j) / (ROWS * (ROWS - 1))
    )
    interval = analysis.ordering_interval["reward_mean_instance"]
    assert interval.row_shared.estimate == shared.a_first
    assert interval.difference.estimate == pytest.approx(shared.a_first - crossed.a_first)
    values = list(exploit.values())
    assert analysis.spread["exploit"] == pytest.approx(math.sqrt(2) * statistics.stdev(values))
    opponents = {r.opponent for r in analysis.bb_by_opponent if r.strategy == "call"}
    assert opponents == {r["opponent"] for r in analysis.study.rft_rows["call"]}
    assert analysis.rft_strategies == ("random", "call", "exploit", *BLIND_COUNTERS.values(), SANDBAG)


def test_find_pair_names_a_missing_or_repeated_row(analysis):
    with pytest.raises(ValueError, match="0 rows"):
        analysis.rft_pair("call − exploit")
    with pytest.raises(ValueError, match="rows match"):
        find_pair(analysis.schedule_pairs, "exploit − call", opponent="all", stage=None)


def test_schedule_opponents_and_the_first_decision():
    stages = SCHEDULES["quick_test"]
    opponents = schedule_opponents("quick_test")
    assert [o.variant for o in opponents] == list(dict.fromkeys(st.variant for st in stages))
    assert sorted(k for o in opponents for k in o.stages) == list(range(1, len(stages) + 1))
    for o in opponents:
        assert all(
            stages[k - 1].variant == o.variant and stages[k - 1].opponent_name == o.name for k in o.stages
        )
    first = first_decision("quick_test")
    assert stages[0].opponent_name in first.prompt and first.legal_actions
    with pytest.raises(ValueError, match="schedule"):
        schedule_opponents("no_such_schedule")


def test_arm_plans_follow_the_spec_files(tmp_path):
    plans = arm_plans(account_id="acct")
    assert len(plans) == len(POKER_ARM_SPECS)
    for plan, name in zip(plans, POKER_ARM_SPECS, strict=True):
        raw = json.loads((SPECS_DIR / name).read_text(encoding="utf-8"))
        assert (plan.spec.arm, plan.spec.reward) == (raw["arm"], raw["reward"])
        assert plan.commands and all(isinstance(c, str) and c for c in plan.commands)
        assert plan.prime_mapping and {"prime", "value", "fireworks"} <= set(plan.prime_mapping[0])
    assert len({p.job_id for p in plans}) == len(plans)
    assert arm_metrics(plans[0].spec.experiment, root=tmp_path).empty


def _deal(row_id, opponent, reward, bb):
    return {"row_id": row_id, "opponent": opponent, "reward_mean_instance": reward, "bb_per_hand": bb}


def test_tiny_lm_readout_pairs_the_trained_policy_by_deal():
    ids = [("eval_s1000", "Tom"), ("eval_s1001", "Adam"), ("eval_s1002", "Tom"), ("eval_s1003", "Alex")]
    values = {TRAINED: [1.0, -0.5, 2.0, 0.0], WARM_BASE: [0.5, -0.5, 1.0, -1.0], "exploit": [3.0, 0.5, 1.0, 0.5],
              "call": [0.0, -1.0, 0.0, 0.0]}  # fmt: skip
    evaluation = {
        label: [_deal(i, o, v, v / 2) for (i, o), v in zip(ids, vs, strict=True)]
        for label, vs in values.items()
    }
    study = TinyLMStudy(
        TinyLMDesign(), warm_start=None, runs={"tiny_lm_seed0": object()}, evaluation=evaluation
    )
    out = tiny_lm_readout(study, reps=200, seed=0)
    assert set(out.versus) == set(REFERENCES)
    for other in REFERENCES:
        diffs = [a - b for a, b in zip(values[TRAINED], values[other], strict=True)]
        assert out.versus[other].mean == pytest.approx(sum(diffs) / len(diffs))
        assert out.versus[other].deals == len(ids)
    per_opponent = defaultdict(list)
    for (_, o), a, b in zip(ids, values[TRAINED], values[WARM_BASE], strict=True):
        per_opponent[o].append((a - b) / 2)
    bb = out.paired["bb_per_hand"]
    for o, diffs in per_opponent.items():
        row = find_pair(bb, f"{TRAINED} − {WARM_BASE}", opponent=o)
        assert row.mean == pytest.approx(sum(diffs) / len(diffs)) and row.deals == len(diffs)
    stopped = TinyLMStudy(TinyLMDesign(), warm_start=None)
    assert tiny_lm_readout(stopped) == type(out)({"reward_mean_instance": (), "bb_per_hand": ()}, {})
