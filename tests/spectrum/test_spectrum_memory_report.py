"""What notebook 02 reads of the memory study (``rftlab.studies.spectrum_memory``), on a tiny size: each
typed field and table against the lower layers' own functions or a plain-Python computation."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from rftlab.analysis.compare import compare_runs, contrast_table
from rftlab.analysis.spectrum.power import inflation_to_floor, seed_floor_scenarios, variance_components
from rftlab.analysis.spectrum.study import (
    compare_epochs,
    margin_against_arms,
    replicate_pool,
    residual_sd,
    seed_comparison,
    small_k_sensitivity,
)
from rftlab.policies.spectrum.simulated import PARAM_NAMES
from rftlab.rollout.spectrum.ceilings import ceiling_table
from rftlab.runs.paths import PROJECT_ROOT
from rftlab.studies.spectrum_memory import (
    METRICS,
    SEED_SIZES,
    ceilings,
    design_power,
    first_last_rows,
    group_rows,
    parameter_rows,
    preflight_rows,
    primary_epochs,
    replicate_rows,
    run_memory_report,
    tiny_side_by_side,
)
from rftlab.studies.spectrum_tiny_lm import TinyLMDesign, TinyLMStudy
from rftlab.training.spectrum.grpo import final_theta

PLAN = PROJECT_ROOT / "data" / "specs" / "study_spectrum_memory.json"
SPECS = PROJECT_ROOT / "data" / "specs"
SIZES = {"rows": 3, "response_candidates": 3, "epochs": 3}


@pytest.fixture(scope="module")
def report(tmp_path_factory):  # about 10 s: the tests that take it are marked slow
    root = tmp_path_factory.mktemp("runs")
    return run_memory_report(PLAN, SPECS, "local", root, SIZES, truth_pairs=2)


@pytest.mark.slow
def test_the_report_holds_what_the_analysis_computes(report):
    study = report.study
    plan, rollouts = study.plan.plan, study.rollouts
    assert report.seed_rows == seed_comparison(plan, rollouts)
    assert report.disagreements == [r for r in report.seed_rows if not r["agree"]]
    expected = small_k_sensitivity(plan, rollouts, study.contrasts)
    assert [r["id"] for r in report.sensitivity] == [r["id"] for r in expected]
    assert report.sensitivity_of(study.primary.id)["pairs"] == len(study.primary.fits)
    assert report.tiny is None  # no tiny_lm design given
    assert report.more is not None and report.more.pairs == len(study.primary.fits) + 1
    more_row = report.more_pairs_of(study.primary.id)
    assert more_row is not None and more_row["pairs"] == report.more.pairs
    assert [t.n_pairs for t in report.truth] == [2] * len(report.truth) and report.truth
    b_probe = study.contrast("B-probe.mean_occ")
    assert report.margin_reading(b_probe) == margin_against_arms(b_probe, report.slope_of)
    for arm, rolls in rollouts.items():  # per-epoch series: the mean of each epoch's rollouts
        means = [statistics.mean(r["mean_occ"] for r in epoch) for epoch in rolls]
        assert report.series[arm]["mean_occ"]["mean"] == pytest.approx(means)


@pytest.mark.slow
def test_replicate_rows_pool_c_and_the_pairs(report):
    plan, rollouts = report.study.plan.plan, report.study.rollouts
    rows = replicate_rows(report)
    assert [r["what"] for r in rows] == ["C alone", "C − B′"] * len(METRICS)
    fits, pool = replicate_pool(plan, rollouts, "C", "memory_gain")
    assert pool is not None and rows[0]["pooled slope"] == pytest.approx(pool.estimate)
    assert rows[0]["per-run slopes"] == ", ".join(f"{f.slope:+.4f}" for _, f in fits)
    assert rows[1]["pooled slope"] == pytest.approx(report.study.primary.estimate)


@pytest.mark.slow
def test_the_per_arm_tables(report):
    study = report.study
    params = {r["arm"]: r for r in parameter_rows(report)}
    run = study.runs["C"]
    first, last = run.metrics()[0], final_theta(run)
    assert last is not None
    name = PARAM_NAMES[0]
    assert params["C"][name] == f"{first[f'theta.{name}']:+.2f} → {last[0]:+.2f}"
    groups = {r["arm"]: r for r in group_rows(report)}
    zero = [m["frac_zero_variance_groups"] for m in run.metrics()]
    assert groups["C"]["zero-variance groups"] == pytest.approx(statistics.mean(zero))
    cmp = first_last_rows(report)
    c_gain = next(r for r in cmp if r["arm"] == "C" and r["metric"] == "memory_gain")
    u = compare_epochs(study.rollouts["C"][0], study.rollouts["C"][-1], "memory_gain")
    assert u is not None and c_gain["diff"] == pytest.approx(u["diff"])
    assert c_gain["test"].startswith("exploratory")
    pre = preflight_rows(report, bands=4)
    assert [r["arm"] for r in pre] == list(study.plan.plan.arms)


def _row_means(epoch, metric):
    by_row: dict[str, list[float]] = {}
    for r in epoch:
        by_row.setdefault(r["row_id"], []).append(float(r[metric]))
    return [statistics.mean(v) for v in by_row.values()]


@pytest.mark.slow
def test_the_primary_contrast_epoch_by_epoch_is_the_row_paired_mean(report):
    study = report.study
    pairs = primary_epochs(report)
    assert [(p.seed, p.treatment, p.control) for p in pairs] == [
        (s, t, c) for s, t, c, _ in study.primary.fits
    ]
    p = pairs[0]
    for e, (x, y) in enumerate(zip(study.rollouts[p.treatment], study.rollouts[p.control], strict=True)):
        diffs = [
            a - b for a, b in zip(_row_means(x, "memory_gain"), _row_means(y, "memory_gain"), strict=True)
        ]
        assert p.means[e] == pytest.approx(statistics.mean(diffs))
    assert np.all(p.half_widths > 0)


@pytest.mark.slow
def test_design_power_reads_the_probe_and_the_seed_floors(report):
    power = design_power(report, nsim=20)
    probe = report.study.specs["probe"]
    comps = variance_components(report.study.rollouts["probe"][0], "mean_occ")
    occ = next(r for r in power.check_rows if r["metric"] == "occ")
    predicted = comps.epoch_sd(probe.rows, probe.response_candidates)
    assert occ["predicted epoch sd (probe sizes)"] == pytest.approx(predicted)
    observed = residual_sd(report.series["probe"]["mean_occ"]["mean"])
    assert occ["ratio"] == pytest.approx(observed / predicted)
    assert power.floors == seed_floor_scenarios(SEED_SIZES["epochs"])
    c_occ = variance_components(report.study.rollouts["C"][0], "mean_occ")
    for name, floor in power.floors.items():
        factor = inflation_to_floor(c_occ, floor, SEED_SIZES["rows"], SEED_SIZES["candidates"])
        assert power.factors[name] == pytest.approx(factor)
    assert {r["noise"] for r in power.power_rows} == {"simulation", *power.floors}
    assert all(0.0 <= r["power"] <= 1.0 for r in power.curve_rows)


def test_ceilings_are_the_ceiling_table_on_notebook_01s_bands():
    got = ceilings(2)
    assert got.bands == 2
    table = ceiling_table(["bl0_0", "bl0_1"])
    assert got.table == table
    averaging = next(r for r in table if r["policy"] == "averaging")
    assert (got.mean_occ("averaging"), got.se("averaging")) == (
        averaging["mean_occ"],
        averaging["mean_occ_se"],
    )
    expected = (averaging["mean_occ"] - 0.549) / averaging["mean_occ_se"]  # the seed's 0.549 ceiling
    assert got.gap("averaging", "+ centre denoising") == pytest.approx(expected)
    assert {r["scheme"] for r in got.search} >= {"first16"}


@pytest.mark.slow
def test_the_tiny_side_by_side_is_runs_compare(report):
    runs = {"C": report.study.runs["C"], "B_prime": report.study.runs["B_prime"]}
    plan = report.study.plan
    tiny = TinyLMStudy(TinyLMDesign(), plan, plan.plan, None, {}, runs, {}, [], {})
    expected = contrast_table(compare_runs([runs["C"], runs["B_prime"]], metric="reward"))
    assert tiny_side_by_side(tiny) == expected and expected
