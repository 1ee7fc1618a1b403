"""What the GS1 verdicts and gates rest on (``rftlab.analysis.gs1.robustness``), against hand-worked
cases and independent computations."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import pearsonr

from rftlab.analysis.gs1.robustness import (
    correlation_margin,
    derived_margin,
    mean_margin,
    percentile_margin,
    placebo_across_permutation_seeds,
)
from rftlab.analysis.noninferiority import betting_lower_bound
from rftlab.studies.gs1 import DEFAULT_SPEC, REVISED_SPEC, load_spec

REVISED = load_spec(REVISED_SPEC)


def _eval_file(path, correct):
    path.write_text(
        "".join(
            json.dumps({"item_id": f"t-{i:04d}", "correct": int(c)}) + "\n" for i, c in enumerate(correct)
        )
    )
    return path


def test_placebo_sweep_equals_the_betting_bound_on_each_permuted_order(tmp_path):
    rng = np.random.default_rng(5)
    base = rng.random(400) < 0.4
    ctrl = np.where(rng.random(400) < 0.92, base, ~base)
    t, b = _eval_file(tmp_path / "base.jsonl", base), _eval_file(tmp_path / "ctrl.jsonl", ctrl)
    sweep = placebo_across_permutation_seeds(REVISED, t, b, seeds=range(12))
    d = base.astype(float) - ctrl.astype(float)
    margin = REVISED.decision_rule.criteria[0].margin  # -0.03: the threshold
    expected = []
    for seed in range(12):
        order = np.random.default_rng(seed).permutation(d.size)  # the rule's documented item order
        lower = betting_lower_bound(d[order], REVISED.decision_rule.alpha)
        expected.append("noninferior" if lower > margin else "inconclusive")
        assert sweep.lowers[seed] == pytest.approx(lower, abs=1e-12)
    assert list(sweep.decisions) == expected
    assert sweep.share_noninferior == pytest.approx(np.mean([e == "noninferior" for e in expected]))
    assert sweep.registered_seed == 20
    with pytest.raises(ValueError, match="item order"):
        placebo_across_permutation_seeds(load_spec(DEFAULT_SPEC), t, b)


def test_percentile_margin_by_hand():
    # 12 of 128 rollouts at 7, the rest at 9: numpy's 10th percentile sits at position 12.7 (value 9);
    # one more rollout just below 8 gives 8 - eps + 0.7 * (9 - 8 + eps) > 8 (passes); a second fails it
    values = [7.0] * 12 + [9.0] * 116
    m = percentile_margin("ess", values, 8.0, reps=500)
    assert m.observed == pytest.approx(9.0) and m.beyond == 12 and m.flips_to_fail == 2
    # moved to the lowest value (7) instead: 13 at 7 give 7 + 0.7 * 2 = 8.4 (passes), 14 fail
    assert m.flips_to_fail_at_lowest == 2
    # 12 at 1, the rest at 8.5: a 13th just below 8 gives 8 + 0.7 * 0.5 = 8.35 (passes), at 1 it gives
    # 1 + 0.7 * 7.5 = 6.25 (fails)
    far = percentile_margin("ess", [1.0] * 12 + [8.5] * 116, 8.0, reps=200)
    assert (far.flips_to_fail, far.flips_to_fail_at_lowest) == (2, 1)
    assert m.margin == pytest.approx(1.0) and m.unit == "rollout" and m.n_units == 128
    assert m.ci[0] <= m.observed <= m.ci[1] and 0 <= m.bootstrap_pass_share <= 1
    # every rollout above the minimum (the fake service's case): the lowest value is no flip, so a flip
    # lands just below the minimum; 12.7 -> the 13th and 14th smallest must fall below
    above = percentile_margin("ess", [9.0] * 128, 8.0, reps=200)
    assert above.beyond == 0 and (above.flips_to_fail, above.flips_to_fail_at_lowest) == (14, 14)
    failing = percentile_margin("ess", [7.0] * 20 + [9.0] * 108, 8.0, reps=200)
    assert failing.flips_to_fail is None and failing.margin < 0


def test_mean_margin_by_hand():
    rewards = [1.0] * 35 + [0.0] * 93  # 0.2734 in [0.1, 0.9]: fails at 12 of 128 (0.094), passes at 13
    m = mean_margin("pilot_mean_reward", rewards, 0.1, 0.9, reps=500)
    assert m.observed == pytest.approx(35 / 128) and m.flips_to_fail == 35 - 12
    high = mean_margin("r", [1.0] * 110 + [0.0] * 18, 0.1, 0.9, reps=200)  # 0.859: fails above 115.2 -> 116
    assert high.flips_to_fail == 116 - 110
    with pytest.raises(ValueError):
        mean_margin("r", [0.5, 1.0], 0.1, 0.9)


def test_correlation_margin_matches_scipy_and_its_interval_holds_it():
    rng = np.random.default_rng(1)
    x = rng.normal(size=64)
    y = 0.3 * x + rng.normal(size=64)
    m = correlation_margin("corr", x, y, 0.1, reps=1000)
    assert m.observed == pytest.approx(pearsonr(x, y).statistic)
    assert m.ci[0] < m.observed < m.ci[1] and m.unit == "prompt"


def test_derived_margin_refuses_an_effect_that_is_not_shown():
    shown = derived_margin(0.08, (0.05, 0.11), 0.5, "test")
    assert shown.established and shown.margin == pytest.approx(0.04)
    none = derived_margin(-0.0036, (-0.0056, -0.0015), 0.5, "test")
    assert not none.established and none.margin is None and "does not lie above 0" in none.reason
    with pytest.raises(ValueError):
        derived_margin(0.1, (0.2, 0.1), 0.5, "x")


def test_margin_spec_is_a_new_spec_that_changes_only_the_margin_and_parses():
    from rftlab.analysis.gs1 import parse_study_spec
    from rftlab.analysis.gs1.robustness import margin_spec
    from rftlab.runs.hashing import file_sha256

    raw = DEFAULT_SPEC.read_bytes()
    base = json.loads(raw)
    derived = derived_margin(0.0712, (0.05, 0.09), 0.5, "a measured GRPO − base effect")
    out = margin_spec(base, "gs1_vs_grpo.json", file_sha256(DEFAULT_SPEC), derived, "before any run")
    assert [c["margin"] for c in out["decision_rule"]["criteria"]] == [-0.0356]
    assert {k for k in out if out[k] != base.get(k)} == {"decision_rule", "title", "revision_of"}
    assert json.loads(raw) == base  # the registered spec is untouched
    spec = parse_study_spec(json.dumps(out).encode(), "new.json")
    assert spec.registration == "revised" and spec.decision_rule.criteria[0].margin == -0.0356
    with pytest.raises(ValueError, match="no margin to write"):
        margin_spec(base, "x", "0" * 64, derived_margin(0.0, (-0.01, 0.01), 0.5, "x"), "now")


def test_a_window_with_one_bound_counts_flips_towards_it_and_none_is_refused():
    from rftlab.analysis.gs1.robustness import mean_margin

    rewards = [1.0] * 7 + [0.0] * 3  # mean 0.7
    # only a maximum 0.75: 0.7 -> 0.8 > 0.75 after one flip of a 0 to a 1
    assert mean_margin("r", rewards, None, 0.75, reps=50).flips_to_fail == 1
    # only a minimum 0.5: the mean stays >= 0.5 until 3 ones flip (0.4 < 0.5)
    assert mean_margin("r", rewards, 0.5, None, reps=50).flips_to_fail == 3
    with pytest.raises(ValueError, match="neither a low nor a high bound"):
        mean_margin("r", rewards, None, None)
