"""The memory study's analysis plan: loading and validation, the planned contrasts on constructed runs
whose contrasts are known, Holm across the confirmatory family, and the whole study on a tiny size."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rftlab.analysis.multiplicity import holm_adjust
from rftlab.analysis.spectrum.plan import load_study_plan
from rftlab.analysis.spectrum.study import replicate_pairs, study_contrasts
from rftlab.runs.hashing import file_sha256
from rftlab.runs.paths import PROJECT_ROOT

PLAN = PROJECT_ROOT / "data" / "specs" / "study_spectrum_memory.json"
SPECS = PROJECT_ROOT / "data" / "specs"


def test_the_committed_plan_loads_with_its_hash_and_margins():
    loaded = load_study_plan(PLAN)
    plan = loaded.plan
    assert loaded.sha256 == file_sha256(PLAN)
    assert plan.primary_metric == "memory_gain"
    assert plan.primary_contrast == "C-B_prime.memory_gain"
    assert plan.multiplicity == "holm" and plan.interval_level == pytest.approx(1 - plan.alpha)
    # margins are over the run (first to last epoch) and used per epoch
    assert plan.epsilon("mean_occ") == pytest.approx(0.012 / 11)
    assert plan.epsilon("carry") == pytest.approx(0.0167 / 11)
    assert plan.replicate_name("C", 0) == "C" and plan.replicate_name("C", 1) == "C_prime"
    assert plan.replicate_name("B_prime", 2) == "B_prime_seed2"
    assert {c.family for c in plan.contrasts} == {"confirmatory", "exploratory"}
    assert plan.family_of("C-B_prime.memory_gain") == "confirmatory"
    assert plan.family_of("first-vs-last.C.memory_gain") == "exploratory"
    for arm in plan.arms:  # every arm of the plan has a spec file
        assert (SPECS / f"spectrum_{arm}.json").is_file()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(alpha=0.1), "interval_level"),
        (lambda d: d.update(primary_contrast="nope"), "primary_contrast"),
        (lambda d: d["contrasts"].append(dict(d["contrasts"][0])), "unique"),
        (lambda d: d["contrasts"][0].update(control="Z"), "not among the plan's arms"),
        (lambda d: d["equivalence_margins"].pop("carry"), "equivalence margin"),
        (lambda d: d["contrasts"][0].update(family="exploratory"), "must be confirmatory"),
        (
            lambda d: d["equivalence_margins"]["carry"].update(over_run=-0.1),
            "equivalence_margins.carry.over_run",
        ),
        (lambda d: d["replicates"].update(min_runs=5), "min_runs"),
        (lambda d: d.update(surprise=1), "surprise"),
        (lambda d: d.update(seen_before=["nope"]), "seen_before"),
    ],
)
def test_a_bad_plan_is_refused_with_the_field_named(tmp_path, edit, message):
    data = json.loads(PLAN.read_text())
    edit(data)
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_study_plan(bad)


# --------------------------------------------------------------------------- constructed study runs

EPOCHS, ROWS, CANDS = 12, 24, 3
# arm -> (row group sharing bands, slope of memory_gain, slope of mean_occ, slope of carry)
TRUE = {
    "probe": ("sc1/0", 0.0, 0.0005, 0.0),
    "A": ("sc1/0", 0.0, 0.0012, 0.0010),
    "B": ("sc1/0", 0.0, 0.0005, 0.0010),
    "C": ("sc2/0", 0.003, 0.002, 0.004),
    "B_prime": ("sc2/0", 0.0, 0.001, 0.004),
    "C_prime": ("sc2/1", 0.003, 0.002, 0.004),
    "B_prime_seed1": ("sc2/1", 0.0, 0.001, 0.004),
    "C_seed2": ("sc2/2", 0.003, 0.002, 0.004),
    "B_prime_seed2": ("sc2/2", 0.0, 0.001, 0.004),
    "D": ("np/0", 0.001, 0.001, 0.0),
    "D_cost": ("np/0", 0.001, 0.001, 0.0),
}


def _runs(seed: int = 0, luck_sd: float = 0.05) -> dict[str, list[list[dict]]]:
    rng = np.random.default_rng(seed)
    groups = sorted({g for g, *_ in TRUE.values()})
    luck = {g: rng.normal(0, luck_sd, (EPOCHS, ROWS, 3)) for g in groups}  # shared band luck per metric
    out = {}
    for arm, (group, *slopes) in TRUE.items():
        epochs = []
        for e in range(EPOCHS):
            recs = []
            for r in range(ROWS):
                for c in range(CANDS):
                    vals = [
                        0.2 + s * e + luck[group][e, r, k] + rng.normal(0, 0.002)
                        for k, s in enumerate(slopes)
                    ]
                    recs.append(
                        {
                            "row_id": f"{group.split('/')[0]}_{r}",
                            "band_seed": f"{group}:{e}:{r}",
                            "candidate": c,
                            "memory_gain": vals[0],
                            "mean_occ": vals[1],
                            "carry_rate": vals[2],
                        }
                    )
            epochs.append(recs)
        out[arm] = epochs
    return out


def test_planned_contrasts_recover_known_slopes_with_holm_over_the_confirmatory_family():
    plan = load_study_plan(PLAN).plan
    results = {r.id: r for r in study_contrasts(plan, _runs())}
    assert set(results) == {c.id for c in plan.contrasts}
    primary = results["C-B_prime.memory_gain"]
    assert len(primary.fits) == 3 and primary.pooled is not None  # three seed-matched pairs
    assert primary.shared_bands == 1.0
    assert primary.ci[0] < 0.003 < primary.ci[1]
    assert primary.claim and primary.agreement() == "3 of 3 runs"
    assert primary.verdict().startswith("C's slope is higher")
    occ = results["C-B_prime.mean_occ"]
    assert occ.ci[0] < 0.001 < occ.ci[1]
    carry = results["C-B_prime.carry"]
    assert not carry.claim and carry.within_epsilon  # the same carry trend with a scrambled list
    b_probe = results["B-probe.mean_occ"]
    assert b_probe.claim and b_probe.verdict().startswith("equivalent within")
    # Holm: the adjusted p-values are Holm's of the family's own p-values, in plan order
    family = [results[c.id] for c in plan.confirmatory()]
    assert [r.p_adjusted for r in family] == pytest.approx(list(holm_adjust([r.p_family for r in family])))
    for r in results.values():
        if r.planned.family == "exploratory":
            assert r.p_adjusted == r.p_family
    # contrasts between arms on other rows say so
    assert results["C-probe.memory_gain"].shared_bands == 0.0
    d_a = results["D-A.mean_occ"]
    assert d_a.shared_bands == 0.0 and d_a.ci[0] < 0.001 - 0.0012 < d_a.ci[1]


def test_replicate_pairs_match_seeds_and_fall_back_to_seed_zero():
    plan = load_study_plan(PLAN).plan
    by_id = {c.id: c for c in plan.contrasts}
    have = ["C", "B_prime", "C_prime", "B_prime_seed1", "C_seed2", "probe"]
    assert replicate_pairs(plan, by_id["C-B_prime.memory_gain"], have) == [
        (0, "C", "B_prime"),
        (1, "C_prime", "B_prime_seed1"),
    ]
    assert replicate_pairs(plan, by_id["C-probe.mean_occ"], have) == [(0, "C", "probe")]
    assert replicate_pairs(plan, by_id["B-probe.mean_occ"], have) == []
    with pytest.raises(ValueError, match="no runs"):
        study_contrasts(plan, {k: v for k, v in _runs().items() if k != "B"})


def test_the_whole_study_runs_at_a_tiny_size_and_is_reused(tmp_path):
    from rftlab.studies.spectrum import run_memory_study

    sizes = {"rows": 3, "response_candidates": 3, "epochs": 3}
    study = run_memory_study(PLAN, SPECS, "local", tmp_path, size_overrides=sizes)
    plan = study.plan.plan
    design = study.replicate_design
    assert plan.replicates.min_runs <= design.runs <= plan.replicates.max_runs
    assert [n for n, _ in design.powers] == list(
        range(plan.replicates.min_runs, plan.replicates.max_runs + 1)
    )
    expected = set(plan.arms) | {
        plan.replicate_name(a, s) for a in plan.replicates.arms for s in range(design.runs)
    }
    assert set(study.runs) == expected
    assert study.specs["C_seed2"].seed == 2 and study.specs["C_seed2"].prompt == "weak"
    assert study.specs["B_prime_seed2"].memory == "scrambled"
    assert len(study.primary.fits) == design.runs
    # every run records the plan's hash (outside its spec hash), and the audit reads it
    assert {r.record.plan_sha256 for r in study.runs.values()} == {study.plan.sha256}
    assert study.registration is not None and study.registration.sha256 == study.plan.sha256
    audit = study.audit
    assert sorted(audit.contrasts) == sorted(c.id for c in plan.confirmatory())
    assert audit.contrasts[plan.primary_contrast].runs == 2 * design.runs  # both arms of every pair
    for cid, verdict in audit.contrasts.items():
        # fresh runs at a commit descending from the plan's: only rule (e) can make one exploratory
        assert verdict.confirmatory == (cid not in plan.seen_before), (cid, verdict.reasons)
        assert study.audited_family(cid) == verdict.family
    exploratory = [c.id for c in plan.contrasts if c.family == "exploratory"]
    assert exploratory and all(study.audited_family(cid) == "exploratory" for cid in exploratory)
    from rftlab.studies.spectrum import audit_statement

    statement = audit_statement(study)
    assert [v.version for v in statement.versions][-1] == study.registration.version
    assert [r["audited as"] for r in statement.rows] == [
        "exploratory" if c.id in plan.seen_before else "confirmatory" for c in plan.confirmatory()
    ]
    # the plan's first commit also added B_prime's spec: git says so, and the statement repeats it
    assert any("together with the spec of arm B_prime" in line for line in statement.limits)
    again = run_memory_study(PLAN, SPECS, "local", tmp_path, size_overrides=sizes)
    assert {k: r.path for k, r in again.runs.items()} == {k: r.path for k, r in study.runs.items()}
    assert [c.estimate for c in again.contrasts] == [c.estimate for c in study.contrasts]


def test_the_study_refuses_a_plan_edited_after_registration(tmp_path):
    from rftlab.runs.registration import UnregisteredPlanError
    from rftlab.studies.spectrum import run_memory_study

    data = json.loads(PLAN.read_text())
    data["arms"].append("E")  # adding an arm changes the plan: an amendment, never a silent edit
    edited = tmp_path / PLAN.name
    edited.write_text(json.dumps(data))
    with pytest.raises(UnregisteredPlanError, match="edited after registration.*rftlab plan amend"):
        run_memory_study(edited, SPECS, "local", tmp_path / "runs")
    assert not (tmp_path / "runs").exists()  # refused before any run


def test_the_committed_plan_is_a_registered_version():
    from rftlab.runs.registration import require_registered

    name, version = require_registered(PLAN)
    assert name == "study_spectrum_memory" and version.sha256 == file_sha256(PLAN)
    assert version.file == "data/specs/study_spectrum_memory.json"


def test_compare_epochs_tests_row_means_not_rollouts():
    from scipy import stats

    from rftlab.analysis.spectrum.study import compare_epochs, row_means

    runs = _runs(seed=5)
    first, last = runs["C"][0], runs["C"][-1]
    out = compare_epochs(first, last, "memory_gain")
    x, y = row_means(first, "memory_gain"), row_means(last, "memory_gain")
    assert (out["n_first"], out["n_last"]) == (ROWS, ROWS)  # rows, not the 72 rollouts
    assert out["welch_p"] == pytest.approx(stats.ttest_ind(y, x, equal_var=False).pvalue)
    assert out["diff"] == pytest.approx(y.mean() - x.mean())
    assert compare_epochs(first[:1], last, "memory_gain") is None


def test_arm_slopes_replicate_pool_and_the_seed_comparison():
    from rftlab.analysis.spectrum.study import arm_slope, replicate_pool, seed_comparison

    plan = load_study_plan(PLAN).plan
    runs = _runs(seed=6, luck_sd=0.01)  # a single arm's slope keeps its band luck: less of it here
    fit = arm_slope(runs["C"], "memory_gain")
    assert fit.slope_ci[0] < 0.003 < fit.slope_ci[1] and fit.shared_bands == 1.0
    fits, pool = replicate_pool(plan, runs, "C", "memory_gain")
    assert [name for name, _ in fits] == ["C", "C_prime", "C_seed2"]
    assert pool.n_runs == 3 and abs(pool.estimate - 0.003) < 4 * pool.fixed_se
    rows = {(r["arm"], r["metric"]): r for r in seed_comparison(plan, runs)}
    # constructed: C rises in all three metrics (the seed: up), D's memory_gain rises (the seed: down)
    assert rows["C", "occ"]["our direction"] == "up" and rows["C", "occ"]["agree"]
    assert rows["D", "memory_gain"]["our direction"] == "up" and not rows["D", "memory_gain"]["agree"]
    assert rows["B", "occ"]["seed change"] is None  # the seed gives no first/last numbers for B's occ
    # flat needs the CI inside the plan's margin: B's memory_gain has slope 0 and a tight CI here
    assert rows["B", "memory_gain"]["our direction"] == "flat" and rows["B", "memory_gain"]["agree"]


def test_seed_floor_scenarios():
    from rftlab.analysis.spectrum.power import seed_floor_scenarios

    f = seed_floor_scenarios(12)
    assert f["floor: 95% band"] == pytest.approx(0.02 / 1.96)
    assert f["floor: halves s.d."] == pytest.approx(0.02 / np.sqrt(1 / 6 + 1 / 6))


def test_a_contrast_reads_as_one_sentence_with_its_unit_and_source():
    plan = load_study_plan(PLAN).plan
    results = {r.id: r for r in study_contrasts(plan, _runs())}
    primary, single = results["C-B_prime.memory_gain"], results["B-probe.mean_occ"]
    text = primary.sentence("simulated policy")
    lo, hi = primary.ci
    assert text.startswith(f"{primary.estimate:+.4f} per epoch, 95% CI [{lo:+.4f}, {hi:+.4f}] ")
    assert (
        f"({primary.estimate * (plan.epochs - 1):+.3f} over the run; rows = bands, 3 seed-matched pairs"
        in text
    )
    assert text.endswith("3 of 3 runs; simulated policy)")
    assert "rows = bands, 1 run; backend fireworks)" in single.sentence("backend fireworks")


def test_the_small_k_sensitivity_never_narrows_and_holds_the_plans_own_numbers():
    from rftlab.analysis.runlevel import sign_flip_exact_p
    from rftlab.analysis.spectrum.study import small_k_sensitivity

    plan = load_study_plan(PLAN).plan
    runs = _runs()
    results = study_contrasts(plan, runs)
    rows = {r["id"]: r for r in small_k_sensitivity(plan, runs, results)}
    pooled = [r for r in results if r.planned.family == "confirmatory" and r.pooled is not None]
    assert len(rows) == len(pooled) >= 1
    for c in pooled:
        row = rows[c.id]
        assert row["CI, plan (HK)"] == c.ci and row["p (Holm), plan"] == c.p_adjusted
        low, high = row["CI, truncated HK"]
        assert low <= c.ci[0] + 1e-15 and high >= c.ci[1] - 1e-15  # q* = max(1, q) only widens
        assert row["p (Holm), truncated HK"] >= c.p_adjusted - 1e-15
        if c.planned.hypothesis == "difference":
            assert row["sign-flip p over pairs"] == sign_flip_exact_p([f.slope for *_, f in c.fits])
            assert row["smallest attainable"] == 2 / 2 ** len(c.fits)


def test_truth_checks_recover_the_generating_slopes_and_judge_coverage():
    """Independent pairs drawn from the same generator estimate its true C − B′ slopes (memory_gain
    0.003, occ 0.001, carry 0); an interval placed away from the truth is reported as not covering it."""
    import dataclasses

    from rftlab.analysis.spectrum.study import truth_checks

    plan = load_study_plan(PLAN).plan
    results = study_contrasts(plan, _runs())
    truncated = study_contrasts(plan, _runs(), truncated_hk=True)
    truth_rollouts, pairs = {}, []
    for s in range(1, 7):
        runs = _runs(seed=s)
        truth_rollouts[f"C_t{s}"], truth_rollouts[f"B_t{s}"] = runs["C"], runs["B_prime"]
        pairs.append({"C": f"C_t{s}", "B_prime": f"B_t{s}"})
    checks = {t.contrast.id: t for t in truth_checks(plan, results, truncated, truth_rollouts, pairs)}
    assert set(checks) == {"C-B_prime.memory_gain", "C-B_prime.mean_occ", "C-B_prime.carry"}
    for cid, true_slope in [
        ("C-B_prime.memory_gain", 0.003),
        ("C-B_prime.mean_occ", 0.001),
        ("C-B_prime.carry", 0.0),
    ]:
        check = checks[cid]
        assert check.n_pairs == 6
        assert abs(check.truth - true_slope) < 4 * check.truth_se + 1e-4
        assert check.covers and check.covers_truncated
    primary = checks["C-B_prime.memory_gain"].contrast
    moved = dataclasses.replace(primary, ci=(primary.ci[1] + 0.001, primary.ci[1] + 0.002))
    (away,) = [t for t in truth_checks(plan, [moved], truncated, truth_rollouts, pairs)]
    assert not away.covers and away.covers_truncated  # the truncated interval is the unmoved one
    with pytest.raises(ValueError, match="at least 2"):
        truth_checks(plan, results, truncated, truth_rollouts, pairs[:1])


def test_more_pairs_pools_the_plans_pairs_and_new_ones_kept_apart_without_a_plan_hash(tmp_path):
    """The exploratory extension (added after the registered results): seeds past the plan's pairs are run
    under their own experiment with no plan hash, every pair is pooled as the plan pools its own (the
    same pool recomputed here from the pairs' row-paired fits), and coverage of a given truth is judged
    for both intervals."""
    import dataclasses

    from rftlab.analysis.contrasts import random_effects_pool
    from rftlab.analysis.spectrum.study import TruthCheck, contrast_fits
    from rftlab.runs import RunStore
    from rftlab.studies.spectrum import MORE_PAIRS_EXPERIMENT, more_pairs, run_memory_study

    sizes = {"rows": 3, "response_candidates": 3, "epochs": 3}
    study = run_memory_study(PLAN, SPECS, "local", tmp_path, size_overrides=sizes)
    plan, n = study.plan.plan, study.replicate_design.runs
    with pytest.raises(ValueError, match="must exceed"):
        more_pairs(study, n, root=tmp_path)
    primary = study.primary
    mid = (primary.ci[0] + primary.ci[1]) / 2
    far = primary.ci[1] + 100 * (primary.ci[1] - primary.ci[0])
    truth = [TruthCheck(primary, mid, 0.0, 2, True, True)]
    ext = more_pairs(study, n + 2, truth=truth, root=tmp_path)
    new = RunStore(tmp_path).runs(MORE_PAIRS_EXPERIMENT)
    assert sorted(r.record.arm for r in new) == sorted(
        plan.replicate_name(a, s) for a in plan.replicates.arms for s in range(n, n + 2)
    )
    assert all(r.record.plan_sha256 is None for r in new)  # governed by no registered plan
    row = {r["id"]: r for r in ext.rows}[primary.id]
    assert ext.pairs == row["pairs"] == n + 2
    wider = plan.model_copy(
        update={"replicates": plan.replicates.model_copy(update={"min_runs": n + 2, "max_runs": n + 2})}
    )
    rollouts = dict(study.rollouts)
    for r in new:
        rollouts[r.record.arm] = [r.rollouts(e) for e in range(len(r.metrics()))]
    fits = contrast_fits(wider, primary.planned, rollouts)
    pool = random_effects_pool(
        [f.slope for *_, f in fits], [f.slope_se for *_, f in fits], plan.interval_level,
        dfs=[f.df_resid for *_, f in fits],
    )  # fmt: skip
    assert len(fits) == n + 2 and row["CI, plan (HK)"] == pytest.approx(pool.ci)
    lo, hi = row["CI, plan (HK)"]
    expected = (lo <= mid <= hi, row["CI, truncated HK"][0] <= mid <= row["CI, truncated HK"][1])
    assert ext.covers[primary.id] == expected
    far_truth = [dataclasses.replace(truth[0], truth=far)]
    again = more_pairs(study, n + 2, truth=far_truth, root=tmp_path)
    assert again.covers[primary.id] == (False, False)
    assert len(RunStore(tmp_path).runs(MORE_PAIRS_EXPERIMENT)) == 4  # reused, none added
    assert all(v is None for k, v in again.covers.items() if k != primary.id)


def test_an_equivalence_margin_is_read_against_both_arms_own_slopes():
    """Three readings: the margin wider than both arms' slopes, than one, than neither (hand cases)."""
    from types import SimpleNamespace

    from rftlab.analysis.spectrum.study import margin_against_arms

    contrast = SimpleNamespace(
        id="A-B.carry", epsilon=0.0015, planned=SimpleNamespace(metric="carry", treatment="A", control="B")
    )

    def fits(a, b):
        return {("A", "carry"): SimpleNamespace(slope=a), ("B", "carry"): SimpleNamespace(slope=b)}

    both = margin_against_arms(contrast, fits(0.0012, -0.0010))
    assert both.startswith(
        "Its margin (±0.0015/epoch) is wider than either arm's own slope (A +0.0012, B -0.0010"
    )
    assert margin_against_arms(contrast, fits(0.0030, 0.0010)).startswith(
        "Its margin (±0.0015/epoch) is wider than B's own slope"
    )
    assert margin_against_arms(contrast, fits(0.0030, -0.0020)).startswith("Both arms' own slopes")
    with pytest.raises(ValueError, match="no equivalence margin"):
        margin_against_arms(SimpleNamespace(**{**vars(contrast), "epsilon": None}), fits(0, 0))
