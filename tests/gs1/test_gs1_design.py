"""The design numbers (``rftlab gs1 design``), the revised spec and the analysis of the decision section:
contrasts against the base, assay sensitivity, gates by construction, monitoring, the summary."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from option_errors import refused_option

from rftlab.analysis import gs1 as ana
from rftlab.analysis.decision_rules import load_decision_rule
from rftlab.analysis.gs1.results import (
    AssaySensitivity,
    Contrast,
    CriterionVerdict,
    RuleVerdict,
    StudyDecision,
)
from rftlab.analysis.noninferiority import bound_result
from rftlab.cli import main
from rftlab.runs.hashing import file_sha256
from rftlab.studies.gs1 import DEFAULT_SPEC, REVISED_SPEC, design, load_spec

SPEC, REVISED = load_spec(DEFAULT_SPEC), load_spec(REVISED_SPEC)

N = 1319
HALF_WIDTH = math.sqrt(2 * math.log(1 / 0.05) / N)  # Hoeffding on 0/1 pairs (docs/statistics.md §3.1)


@pytest.fixture(scope="module")
def registered():
    return design(SPEC)


def _simulated_hoeffding_rate(theta, r, reps, rng):
    """An independent simulation: multinomial counts of +1 / -1 items, the closed-form Hoeffding bound."""
    counts = rng.multinomial(N, [(r + theta) / 2, (r - theta) / 2, 1 - r], size=reps)
    mean = (counts[:, 0] - counts[:, 1]) / N
    return float(np.mean(mean - HALF_WIDTH > -0.03))


@pytest.mark.parametrize("theta, r", [(0.045, 0.2), (0.045, 0.05), (0.02, 0.1), (0.0, 0.2)])
def test_preregistered_rule_matches_an_independent_simulation(registered, theta, r):
    d = registered.design
    exact = d.p(theta, r)
    assert exact["reps"] == 0 and exact["mc_se"] == 0.0  # Hoeffding is count-only: exact
    reps = 40_000
    sim = _simulated_hoeffding_rate(theta, r, reps, np.random.default_rng(1))
    se = math.sqrt(max(exact["p_noninferior"] * (1 - exact["p_noninferior"]), 1e-4) / reps)
    assert abs(sim - exact["p_noninferior"]) < 4 * se


def test_preregistered_rule_has_no_power_at_equality(registered):
    d = registered.design
    assert d.method == "hoeffding" and d.n == N and d.margin == 0.03
    for r in ana.DESIGN_DISCORDANCE:
        assert d.p(-0.03, r)["p_noninferior"] < 1e-6  # far below alpha
        assert d.p(0.0, r)["p_noninferior"] < 0.01
        items = d.items(r)["n"]
        assert items > 7000
        # the returned n really reaches 80% power (independent simulation at that n)
        rng = np.random.default_rng(2)
        counts = rng.multinomial(items, [r / 2, r / 2, 1 - r], size=20_000)
        hw = math.sqrt(2 * math.log(20) / items)
        assert np.mean((counts[:, 0] - counts[:, 1]) / items - hw > -0.03) > 0.8 - 4 * 0.003
    assert d.items(0.2)["n"] == 8837  # the methods report's number (docs/statistics.md §3.4)


def test_revised_rule_power_and_error_against_the_single_sample_bound():
    """The Monte Carlo design of the betting rule agrees with evaluating ``bound_result`` (the code path
    of a real decision, one data set at a time) on independent draws, and keeps its error within alpha."""
    d = ana.spec_design(REVISED, discordances=(0.1,), reps=2000, items_for_power=False)
    assert d.method == "betting" and d.permutation_seed == 20 and not d.exact
    null, zero = d.p(-0.03, 0.1), d.p(0.0, 0.1)
    assert null["p_noninferior"] <= 0.05 + 2 * null["mc_se"]
    rng = np.random.default_rng(3)
    reps, claims = 150, 0
    for _ in range(reps):
        u = rng.random(N)
        x = (u < 0.05).astype(float) - (u >= 0.95).astype(float)  # theta 0, discordance 0.1
        claims += bound_result("betting", x, 0.03, 0.05).decision == "noninferior"
    se = math.sqrt(zero["p_noninferior"] * (1 - zero["p_noninferior"]) / reps + zero["mc_se"] ** 2)
    assert abs(claims / reps - zero["p_noninferior"]) < 4 * se
    assert zero["p_noninferior"] > 0.8  # the point of the revision: power at equality at n = 1319


def test_the_design_numbers_choose_the_revised_specs_method():
    rule, _ = load_decision_rule(DEFAULT_SPEC)
    designs = ana.candidate_designs(rule, N, reps=1000)
    assert [d.method for d in designs] == list(ana.FINITE_SAMPLE)
    chosen = ana.choose_method(designs)
    revised, _ = load_decision_rule(REVISED_SPEC)
    assert chosen == "betting" and revised.method == "paired_betting"
    power = {d.method: d.p(0.0, ana.PLANNING_DISCORDANCE)["p_noninferior"] for d in designs}
    assert power["betting"] == max(power.values())


def test_one_power_number_per_quantity_the_candidate_row_is_the_design_tables_cell():
    """Common random numbers: the revised rule's cell at the planning discordance is the same number in
    the design table (three discordances, four differences, items for power) and in the candidate table
    (one discordance, two differences), and it does not depend on which other cells were computed."""
    n, reps = 300, 300
    table = ana.rule_design(REVISED.decision_rule, n, "revised", reps=reps)
    candidates = {d.method: d for d in ana.candidate_designs(REVISED.decision_rule, n, reps=reps)}
    alone = ana.rule_design(
        REVISED.decision_rule, n, "alone", (0.1,), (0.0,), reps=reps, items_for_power=False
    )
    for diff in (-0.03, 0.0):
        assert table.p(diff, 0.1) == candidates["betting"].p(diff, 0.1)
    assert alone.p(0.0, 0.1)["p_noninferior"] == table.p(0.0, 0.1)["p_noninferior"]
    assert table.items(0.1) == candidates["betting"].items(0.1)
    # an independent draw of the same cell agrees within Monte Carlo error (not bit for bit)
    other = ana.rule_design(REVISED.decision_rule, n, "other", (0.1,), (0.0,), seed=99, reps=reps)
    a, b = table.p(0.0, 0.1), other.p(0.0, 0.1)
    assert abs(a["p_noninferior"] - b["p_noninferior"]) < 4 * math.hypot(a["mc_se"], b["mc_se"]) + 1e-9


def test_choose_method_skips_a_bound_whose_error_exceeds_alpha():
    def fake(method, null, zero, se=0.0):
        rows = (
            {"discordance": 0.1, "difference": -0.03, "p_noninferior": null, "mc_se": se, "reps": 1},
            {"discordance": 0.1, "difference": 0.0, "p_noninferior": zero, "mc_se": se, "reps": 1},
        )
        return ana.RuleDesign(method, method, 0.05, 0.03, N, None, False, rows, ())

    assert ana.choose_method([fake("a", 0.01, 0.5), fake("b", 0.09, 0.99, 0.005)]) == "a"
    with pytest.raises(ValueError, match="within alpha"):
        ana.choose_method([fake("b", 0.09, 0.99, 0.005)])


def test_the_revised_spec_is_a_new_file_that_changes_only_the_rule():
    assert file_sha256(DEFAULT_SPEC) == "cf12f20dd9782c1c43671e118ecdc913cf123df5768b062bc2f0736f5afa8cf0"
    old, new = json.loads(DEFAULT_SPEC.read_text()), json.loads(REVISED_SPEC.read_text())
    assert new["revision_of"]["sha256"] == file_sha256(DEFAULT_SPEC)
    assert new["revision_of"]["file"] == DEFAULT_SPEC.name
    changed = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    assert changed == {"title", "revision_of", "success_criterion", "decision_rule"}
    rule_changes = {k for k in old["decision_rule"].keys() | new["decision_rule"].keys()
                    if old["decision_rule"].get(k) != new["decision_rule"].get(k)}  # fmt: skip
    assert rule_changes == {"version", "method", "permutation_seed"}
    assert new["revision_of"]["chosen_by"]["planning_discordance"] == ana.PLANNING_DISCORDANCE
    assert (SPEC.registration, REVISED.registration) == ("pre-registered", "revised")


def test_design_cli_prints_the_table(capsys):
    assert main(["gs1", "design", "--discordance", "0.1", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "gs1_vs_grpo.json" in out and "hoeffding" in out
    lines = [line.split() for line in out.splitlines() if line.strip().startswith(("0.1 ", "0.2 "))]
    assert [row[-1] for row in lines] == ["8179", "8837"]  # items for 80% power at equality
    assert main(["gs1", "design", "--discordance", "0.2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["design"]["items_for_power"][0]["n"] == 8837 and data["table"][0]["discordance"] == 0.2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["gs1", "design", "missing.json"], "file not found"),
    ],
)
def test_design_cli_bad_input_is_a_one_line_error(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["gs1", "design", "--discordance", "0.1", "0"], "in (0, 1], got '0'"),
        (["gs1", "design", "--reps", "5"], "an integer from 100 to 1000000, got '5'"),
    ],
)
def test_design_cli_bad_numbers_are_refused_by_argparse(argv, message, capsys):
    refused_option(argv, capsys, argv[2], message)


# ---------------------------------------------------------------------------------------- contrasts


def _eval(path, correct):
    path.write_text(
        "".join(json.dumps({"item_id": f"test-{i}", "correct": int(c)}) + "\n" for i, c in enumerate(correct))
    )
    return path


def test_paired_contrast_by_hand(tmp_path):
    t = _eval(tmp_path / "t.jsonl", [1, 1, 0, 1, 1])
    b = _eval(tmp_path / "b.jsonl", [0, 1, 1, 1, 0])
    c = ana.paired_contrast(t, b, "t", "b")
    assert (c.gained, c.lost, c.n) == (2, 1, 5)
    assert c.mean_difference == pytest.approx(0.2) and c.treatment_accuracy == pytest.approx(0.8)
    hw = math.sqrt(2 * math.log(20) / 5)
    assert c.bounds["hoeffding"].lower == pytest.approx(max(0.2 - hw, -1.0))
    assert c.bounds["hoeffding"].upper == pytest.approx(min(0.2 + hw, 1.0))
    assert "exploratory" in c.status
    with pytest.raises(ValueError, match="order"):
        ana.paired_contrast(t, b, "t", "b", methods=("betting",))


def _arms(tmp_path, extra):
    base = np.arange(N) < 600
    control = base | ((np.arange(N) >= 600) & (np.arange(N) < 600 + extra))
    return _eval(tmp_path / "base.jsonl", base), _eval(tmp_path / "control.jsonl", control)


def test_assay_sensitivity_established_when_the_control_clears_the_margin(tmp_path):
    base, control = _arms(tmp_path, 200)  # control − base = 200/1319 = +0.152
    c = ana.paired_contrast(control, base, "grpo_gs8", "base")
    a = ana.assay_sensitivity(c, SPEC, base, control, REVISED)
    assert a.established and a.hoeffding_lower == pytest.approx(200 / N - HALF_WIDTH)
    assert "**yes**" in ana.assay_sentence(a)


def test_assay_sensitivity_fails_when_training_gains_less_than_the_margin(tmp_path):
    """The issue's situation: GRPO gains about 2 points on the base; the untrained base then looks
    no worse than GRPO to a powerful bound."""
    base, control = _arms(tmp_path, 24)  # +0.018
    c = ana.paired_contrast(control, base, "grpo_gs8", "base")
    a = ana.assay_sensitivity(c, SPEC, base, control, REVISED)
    assert not a.established
    # the registered rule on base vs control: Hoeffding interval −0.018 ± 0.0674 straddles −0.03
    assert a.placebo_decision == "inconclusive" and a.placebo_lower == pytest.approx(-24 / N - HALF_WIDTH)
    assert a.revised_placebo_decision == "noninferior"  # the betting bound clears −0.03 for the base
    text = ana.assay_sentence(a)
    assert "**no**" in text and "untrained base" in text and "revised betting rule **noninferior**" in text


# ----------------------------------------------------------------------------- gates and monitoring


def test_gate_checks_that_pass_by_construction_are_named():
    from rftlab.training.gs1.warm_start import WarmStartResult

    warm = WarmStartResult("w", {"target_reward": 0.35}, 10, True, [{"sampled_reward": 0.39}])
    notes = ana.gate_construction_notes("kernel_baseline", warm)
    assert set(notes) == {"frac_nonzero_advantage_treatment", "pilot_mean_reward"}
    assert "0.35" in notes["pilot_mean_reward"] and "0.390" in notes["pilot_mean_reward"]
    assert ana.gate_construction_notes("kernel_baseline", None).keys() == {"frac_nonzero_advantage_treatment"}
    assert ana.gate_construction_notes("group_mean", WarmStartResult("w", {}, 10, False)) == {}


def test_monitor_reports_every_step_below_the_gate_minimum():
    ess_min = SPEC.activation_gate.minimum(ana.ESS_METRIC)
    assert ess_min == 8.0
    rows = [
        {"step": 0, "kernel_effective_neighbors_p10": 9.1, "kernel_effective_neighbors_median": 20.0,
         "kl_sample_train_v1": 0.0, "kl_sample_train_v2": 0.0},
        {"step": 1, "kernel_effective_neighbors_p10": 7.6, "kl_sample_train_v1": -0.02, "kl_sample_train_v2": 0.01},
        {"step": 2, "kernel_effective_neighbors_p10": 8.0, "kl_sample_train_v1": 0.01, "kl_sample_train_v2": 0.002},
    ]  # fmt: skip
    grpo = [
        {"step": 0, "distinct_samples_per_group_mean": 8.0, "distinct_samples_per_group_min": 8,
         "groups_implausible_duplicates": 0},
        {"step": 1, "distinct_samples_per_group_mean": 6.5, "distinct_samples_per_group_min": 1,
         "groups_implausible_duplicates": 2},
    ]  # fmt: skip
    mon = ana.training_monitor({"gs1_kernel": rows, "grpo_gs8": grpo}, ess_min)
    g = mon["gs1_kernel"]
    assert g.steps_below_ess_min == (1,) and g.ess_p10_min == 7.6 and g.ess_p10_min_step == 1
    assert g.kl_sample_train_v1_max_abs == 0.02 and g.kl_sample_train_v2_max == 0.01
    assert mon["grpo_gs8"].steps_with_collapsed_groups == (1,)
    assert mon["grpo_gs8"].distinct_samples_per_group_min == 1 and mon["grpo_gs8"].ess_p10_min is None
    assert ana.step_alerts(rows[1], ess_min) == [
        "kernel_effective_neighbors_p10 7.6 < 8 (the gate's minimum)"
    ]
    assert ana.step_alerts(rows[2], ess_min) == []  # the bound is inclusive, like the gate
    lines = ana.monitor_sentences(mon)
    assert (
        "below the gate's minimum 8 at 1 of 3 steps" in lines[0]
        and "collapsed groups at steps [1]" in lines[1]
    )


# -------------------------------------------------------------------------------------------- summary


def _decision(registration, method, seed, lower, decision, **extra):
    """A decision holding only the fields the summary reads (``model_construct``: no other field needed)."""
    crit = CriterionVerdict.model_construct(method=method, permutation_seed=seed, statistic_mean=0.013, n=N,
                                            one_sided_level=0.95, lower=lower, margin=-0.03)  # fmt: skip
    rule = RuleVerdict.model_construct(criteria=(crit,))
    return StudyDecision.model_construct(registration=registration, decision=decision, rule=rule, **extra)


def _summary(monitor=None, despite_failed_gate=False):
    contrast = dict(baseline_accuracy=0.4541, treatment_accuracy=0.4723, mean_difference=0.0182,
                    gained=31, lost=7, n=N)  # fmt: skip
    decision = _decision(
        "pre-registered", "hoeffding", None, -0.0545, "inconclusive",
        revised=_decision("revised", "betting", 20, 0.0024, "noninferior"),
        gate_passed=True,
        contrasts={"grpo_gs8-base": Contrast.model_construct(**contrast),
                   "gs1_kernel-base": Contrast.model_construct(**{**contrast, "treatment_accuracy": 0.4852})},
        assay_sensitivity=AssaySensitivity.model_construct(
            control="grpo_gs8", margin=0.03, control_minus_base=0.0182, one_sided_level=0.95,
            hoeffding_lower=-0.049, empirical_bernstein_lower=None, established=False,
            placebo_decision="inconclusive", placebo_lower=-0.085, revised_placebo_decision=None),
    )  # fmt: skip
    return ana.StudyOutcome(
        decision=decision, monitor=monitor or {}, gate_passed=True,
        despite_failed_gate=despite_failed_gate, stopped=None,
    )  # fmt: skip


def test_summary_opens_with_design_then_decisions_and_flags_an_override(registered):
    d = registered.design
    plain = ana.report_summary(_summary(despite_failed_gate=False), [d], "a tiny model")
    # first what the verdict is about and at what unit, then assay sensitivity and GRPO's effect
    assert plain[0].startswith("**What the verdicts are about:** a stand-in") and "item of two" in plain[0]
    assert plain[1].startswith("**Assay sensitivity") and plain[2].startswith("**Is GRPO's effect")
    p = ana.seeds.discordant_sign_test(31, 7)
    assert f"31 items gained vs 7 lost, exact two-sided sign test p = {p:.3g}" in plain[2]
    assert plain[3].startswith("**Question.**") and plain[4].startswith("**Design, before any run:**")
    pre = next(i for i, line in enumerate(plain) if "pre-registered rule, hoeffding" in line)
    rev = next(i for i, line in enumerate(plain) if "revised rule, betting, permutation seed 20" in line)
    assert 4 < pre < rev and "these seed-0 checkpoints" in plain[pre]
    assert "untrained base 0.4541" in "\n".join(plain)
    both = ana.report_summary(_summary(), [d, d], None)
    assert both[4].startswith("**Design, before any run:**")
    assert both[5].startswith(
        "**Design of the revised rule, written after the earlier local results were seen:**"
    )
    assert "a tiny model" in plain[-1] and "one seed per arm" in plain[-1]
    override = ana.report_summary(_summary(despite_failed_gate=True), [d], None)
    assert override[0].startswith("**Override: DESPITE_FAILED_GATE = True.**")
    monitored = _summary(monitor={"gs1_kernel": ana.ArmMonitor(steps=40, steps_below_ess_min=(3, 9), ess_min=8.0,
                                                               ess_p10_min=7.6)})  # fmt: skip
    text = "\n".join(ana.report_summary(monitored, [d], None))
    assert "fell below the gate's minimum 8 at 2 of 40 training steps (lowest 7.60)" in text


def test_summary_with_seeds_decides_at_the_run_level_labelled_exploratory(registered):
    from rftlab.analysis.gs1.seeds import RunLevelBrief, WithinSeed, run_level_power, run_level_verdict
    from rftlab.studies.gs1 import load_run_plan

    plan = load_run_plan()
    grpo = {s: 0.40 + 0.002 * s for s in range(5)}
    gs1 = {s: grpo[s] + (-0.004, 0.002, 0.0, -0.001, 0.003)[s] for s in range(5)}
    base = {s: 0.39 for s in range(5)}
    brief = RunLevelBrief(
        treatment_vs_control=run_level_verdict(gs1, grpo, plan),
        control_vs_base=run_level_verdict(grpo, base, plan, "grpo_gs8", "base"),
        base_vs_control=run_level_verdict(base, grpo, plan, "base", "grpo_gs8"),
        power_planning=run_level_power(plan, 0.01),
        power_observed=None,
        within_seed=tuple(WithinSeed(seed=s, decision="inconclusive", lower=-0.06, mean_difference=0.0) for s in range(5)),
        base_identical_across_seeds=True,
    )  # fmt: skip
    outcome = _summary()
    outcome = ana.StudyOutcome(**{**outcome.__dict__, "run_level": brief})
    lines = ana.report_summary(outcome, [registered.design], "a tiny model")
    run = next(line for line in lines if line.startswith("**Decision with the training run as the unit"))
    assert "exploratory" in run and "5 seed-matched pairs" in run and "**noninferior**" in run
    assert "inconclusive at 5 of 5 seeds" in run
    assert "smallest attainable with 5 pairs is 0.0625" in run
    power = next(line for line in lines if line.startswith("**Run-level power"))
    assert "only from 6 seed pairs" in power
    effect = next(line for line in lines if line.startswith("**Is GRPO's effect"))
    assert "**Shown**" in effect  # grpo beats the base at every seed: the bootstrap interval is above 0
    assert "5 training seeds per arm" in lines[-1] and "5 seeds per arm" in lines[0]
