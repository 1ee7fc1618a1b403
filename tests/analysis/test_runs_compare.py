"""``rftlab.analysis.compare`` and ``rftlab runs compare``: two arms of small local runs, and one spec on two
backends (the local simulation and a genuine tinker-backend run of the tiny agent model through the
in-process Tinker service), each checked against an independent computation on the raw run files: pandas
on ``metrics.jsonl`` for the per-epoch table, statsmodels' cluster-robust OLS on the rollout records for the
paired contrasts, scipy's binomial test for the sign test."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from option_errors import refused_option
from scipy import stats as sps

from rftlab.analysis.compare import (
    cluster_robust_mean,
    compare_runs,
    comparison_figure,
    contrast_table,
    resolve_runs,
)
from rftlab.cli import main
from rftlab.launch.spectrum.local import LocalLauncher
from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.runs import RunStore, load_run

SMALL = {"rows": 4, "epochs": 3, "response_candidates": 3, "num_scans": 4}


def _spec(arm: str, prompt: str, memory: str, **kw) -> SpectrumArmSpec:
    return SpectrumArmSpec(arm=arm, prompt=prompt, memory=memory, **{**SMALL, **kw})


@pytest.fixture(scope="module")
def arms(tmp_path_factory):
    """Arms A (explicit, echo) and B (explicit, scrambled) share their rows and bands; C (weak prompt) has
    its own rows; A_seed1 has A's rows but other epoch salts."""
    root = tmp_path_factory.mktemp("runs")
    launcher = LocalLauncher(progress=False)
    specs = [
        _spec("A", "explicit", "echo"),
        _spec("B", "explicit", "scrambled"),
        _spec("C", "weak", "echo"),
        _spec("A_seed1", "explicit", "echo", seed=1),
    ]
    return root, {s.arm: load_run(launcher.launch(s, root=root).path) for s in specs}


# ------------------------------------------------------------------ the independent computation


def _raw_rollouts(run) -> pd.DataFrame:
    frames = []
    for path in sorted((run.path / "rollouts").glob("epoch-*.jsonl")):
        frames.append(pd.read_json(path, lines=True))
    return pd.concat(frames, ignore_index=True)


def _statsmodels_contrast(x_run, y_run, metric="reward"):
    """Row means per (epoch, row id) of each run, d = x − y, OLS of d on 1 and on [1, epoch] with the
    cluster-robust covariance (row id as the cluster, t reference), and the sign test by scipy."""
    x = _raw_rollouts(x_run).groupby(["epoch", "row_id"])[metric].mean().rename("x")
    y = _raw_rollouts(y_run).groupby(["epoch", "row_id"])[metric].mean().rename("y")
    both = pd.concat([x, y], axis=1, join="inner").reset_index()
    both["d"] = both["x"] - both["y"]
    groups = pd.factorize(both["row_id"])[0]
    mean_fit = sm.OLS(both["d"].to_numpy(), np.ones((len(both), 1))).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True
    )
    slope_fit = sm.OLS(both["d"].to_numpy(), sm.add_constant(both["epoch"].to_numpy(dtype=float))).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True
    )
    per_row = both.groupby("row_id")["d"].mean()
    pos, neg = int((per_row > 0).sum()), int((per_row < 0).sum())
    return {
        "n": len(both),
        "rows": both["row_id"].nunique(),
        "mean": mean_fit.params[0],
        "mean_se": mean_fit.bse[0],
        "mean_p": mean_fit.pvalues[0],
        "mean_ci": tuple(mean_fit.conf_int()[0]),
        "slope": slope_fit.params[1],
        "slope_se": slope_fit.bse[1],
        "slope_p": slope_fit.pvalues[1],
        "epoch_means": both.groupby("epoch")["d"].mean().to_numpy(),
        "signs": (pos, neg),
        "sign_p": sps.binomtest(pos, pos + neg, 0.5).pvalue if pos + neg else 1.0,
    }


def _check_contrast(c, x_run, y_run):
    want = _statsmodels_contrast(x_run, y_run, c.metric)
    assert c.paired and c.reason == ""
    assert (c.n_obs, c.n_rows) == (want["n"], want["rows"])
    assert c.mean_difference == pytest.approx(want["mean"], rel=1e-10, abs=1e-12)
    assert c.mean_se == pytest.approx(want["mean_se"], rel=1e-8)
    assert c.mean_p == pytest.approx(want["mean_p"], rel=1e-8)
    assert c.mean_ci == pytest.approx(want["mean_ci"], rel=1e-8)
    assert c.slope == pytest.approx(want["slope"], rel=1e-8, abs=1e-12)
    assert c.slope_se == pytest.approx(want["slope_se"], rel=1e-8)
    assert c.slope_p == pytest.approx(want["slope_p"], rel=1e-8)
    assert np.allclose(c.epoch_differences, want["epoch_means"], rtol=1e-10)
    assert (c.sign_positive, c.sign_negative) == want["signs"]
    assert c.sign_p == pytest.approx(want["sign_p"], rel=1e-10)


def _check_metrics(result, runs):
    for series in result.metrics:
        for run, values, final in zip(runs, series.values, series.final, strict=True):
            frame = pd.read_json(run.path / "metrics.jsonl", lines=True)
            if series.metric not in frame:
                assert all(v is None for v in values) and final is None
                continue
            want = pd.to_numeric(frame[series.metric], errors="coerce").groupby(frame["epoch"]).mean()
            if want.dropna().empty:  # a metric recorded as null only
                assert all(v is None for v in values) and final is None
                continue
            got = {e: v for e, v in zip(series.epochs, values, strict=True) if v is not None}
            assert got == pytest.approx(want.dropna().to_dict(), rel=1e-12)
            assert final == pytest.approx(want.dropna().iloc[-1], rel=1e-12)


# ------------------------------------------------------------------ two arms


def test_two_arms_side_by_side_match_pandas_and_statsmodels(arms):
    _, runs = arms
    a, b = runs["A"], runs["B"]
    result = compare_runs([a, b])
    assert result.labels == ("A", "B") and not result.cross_backend and result.same_spec == ()
    _check_metrics(result, [a, b])
    assert {"reward", "carry_rate", "mean_occ"} <= {s.metric for s in result.metrics}
    (contrast,) = result.contrasts
    assert (contrast.left, contrast.right, contrast.n_epochs) == ("A", "B", 3)
    _check_contrast(contrast, a, b)
    carry = compare_runs([a, b], metric="carry_rate").contrast("A", "B")
    _check_contrast(carry, a, b)


def test_runs_whose_rows_differ_are_not_paired_and_say_why(arms):
    _, runs = arms
    result = compare_runs([runs["A"], runs["C"], runs["A_seed1"]])
    rows = result.contrast("A", "C")
    assert not rows.paired and rows.mean_difference is None
    assert "row ids differ" in rows.reason and "sc1_0" in rows.reason and "sc2_0" in rows.reason
    salts = result.contrast("A", "A_seed1")
    assert not salts.paired and "different bands" in salts.reason
    assert "epoch salt" in salts.reason
    # the per-epoch table is still there for unpaired runs
    _check_metrics(result, [runs["A"], runs["C"], runs["A_seed1"]])


def test_the_contrast_table_shows_each_pair_as_the_contrast_computed_it(arms):
    """The notebooks' table of ``compare_runs``: the paired pair's numbers, rounded as printed, and the
    unpaired pairs' reasons only."""
    _, runs = arms
    result = compare_runs([runs["A"], runs["B"], runs["C"]])
    rows = {r["contrast"]: r for r in contrast_table(result)}
    assert set(rows) == {"A − B", "A − C", "B − C"}
    ab, c = rows["A − B"], result.contrast("A", "B")
    assert ab["paired"] == f"{c.n_rows} rows × {c.n_epochs} epochs"
    assert float(ab["mean difference"]) == pytest.approx(c.mean_difference, abs=5e-5)
    low, high = (float(x) for x in ab["95% CI"].strip("[]").split(", "))
    assert (low, high) == (pytest.approx(c.mean_ci[0], abs=5e-5), pytest.approx(c.mean_ci[1], abs=5e-5))
    assert float(ab["slope / epoch"]) == pytest.approx(c.slope, abs=5e-5)
    assert ab["rows better / worse / tied"] == f"{c.sign_positive} / {c.sign_negative} / {c.sign_ties}"
    assert set(rows["A − C"]) == {"contrast", "metric", "paired"}
    assert rows["A − C"]["paired"] == "no: " + result.contrast("A", "C").reason


def test_a_metric_missing_from_the_rollouts_is_not_paired(arms):
    _, runs = arms
    c = compare_runs([runs["A"], runs["B"]], metric="grad_norm").contrast("A", "B")
    assert not c.paired and "no field 'grad_norm'" in c.reason


def test_the_cluster_robust_mean_is_statsmodels_on_a_hand_case():
    d = [0.5, 1.5, -1.0, 2.0, 0.0, 3.0]
    g = [0, 0, 1, 1, 2, 2]
    mean, se, ci, p, groups = cluster_robust_mean(d, g)
    fit = sm.OLS(np.array(d), np.ones((6, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": np.array(g)}, use_t=True
    )
    # by hand: cluster sums of d − 1 are 0, −1, +1; se² = 3/2 · 2 / 36 = 1/12
    assert mean == 1.0 and se == pytest.approx(math.sqrt(1 / 12), rel=1e-12) and groups == 3
    assert se == pytest.approx(fit.bse[0], rel=1e-12) and p == pytest.approx(fit.pvalues[0], rel=1e-12)
    assert ci == pytest.approx(tuple(fit.conf_int()[0]), rel=1e-12)


def _eval_runs(store, items):
    runs = []
    for arm, rows in items.items():
        run = store.create_run("e", arm, {"arm": arm})
        run.append_metrics([{"step": 0, "epoch": 0, "reward": 0.25}])
        run.write_eval([{"item_id": k, "correct": c, "answer": "7"} for k, c in rows])
        run.finish()
        runs.append(run)
    return runs


def test_evaluations_match_numpy_and_scipy_by_item(tmp_path):
    rng = np.random.default_rng(3)
    ids = [f"test-{k}" for k in range(40)]
    x = rng.integers(0, 2, 40).tolist()
    y = rng.integers(0, 2, 40).tolist()
    order = rng.permutation(40)  # the second run lists its items in another order
    runs = _eval_runs(
        RunStore(tmp_path), {"x": list(zip(ids, x, strict=True)), "y": [(ids[k], y[k]) for k in order]}
    )
    result = compare_runs(runs)
    (ev,) = result.evaluation
    assert ev.field == "correct" and ev.items == (40, 40)
    assert ev.means == pytest.approx((np.mean(x), np.mean(y)), rel=1e-12)
    (c,) = result.eval_contrasts
    want = sps.ttest_rel(x, y)
    ci = want.confidence_interval(0.95)
    d = np.subtract(x, y)
    assert c.paired and c.n_items == 40 and c.mean_difference == pytest.approx(d.mean(), abs=1e-12)
    assert c.p == pytest.approx(want.pvalue, rel=1e-10)
    assert c.ci == pytest.approx((ci.low, ci.high), rel=1e-10)
    pos, neg = int((d > 0).sum()), int((d < 0).sum())
    assert (c.sign_positive, c.sign_negative, c.sign_ties) == (pos, neg, 40 - pos - neg)
    assert c.sign_p == pytest.approx(sps.binomtest(pos, pos + neg, 0.5).pvalue, rel=1e-10)
    assert not result.contrasts[0].paired and "no per-rollout records" in result.contrasts[0].reason


def test_evaluations_on_other_items_are_not_paired(tmp_path):
    runs = _eval_runs(RunStore(tmp_path), {"x": [("a", 1), ("b", 0)], "y": [("a", 1), ("c", 1)]})
    (c,) = compare_runs(runs).eval_contrasts
    assert not c.paired and c.mean_difference is None and "the items differ" in c.reason


# ------------------------------------------------------------------ one spec on two backends


OVERRIDES = ["rows=3", "response_candidates=3", "num_scans=2", "epochs=2", "learning_rate=0.01"]
CALL = '<tool_call>\n{{"name": "submit_report", "arguments": {args}}}\n</tool_call><|im_end|>'


@pytest.fixture(scope="module")
def two_backends(tmp_path_factory, scripted_tinker_service):
    """One spec (spectrum_C with ``--set`` overrides) launched on the local simulation and on the tinker
    backend through the launcher ``rftlab arm launch --backend tinker`` uses, with the in-process service
    (the tiny agent model trained on scripted replies, valid and malformed, so the groups' rewards differ)."""
    from rftlab.launch.overrides import override_spec
    from rftlab.launch.spectrum.spec import load_arm_spec
    from rftlab.runs.paths import spec_path
    from rftlab.studies.spectrum import launch_arm
    from rftlab.training.local_tinker import LocalServiceClient
    from rftlab.training.local_tinker.model import AGENT_MODEL

    root = tmp_path_factory.mktemp("xb")
    overrides = [*OVERRIDES, "arm=tiny"]
    spec = override_spec(load_arm_spec(spec_path("spectrum_C.json")), overrides)
    provenance = {"overrides": overrides}
    local = launch_arm(spec, "local", root / "runs", provenance=provenance)
    service = scripted_tinker_service(
        LocalServiceClient(storage_dir=root / "ckpt"),
        CALL.format(args='{"center_freqs": [40.0, 120.5]}'),
        CALL.format(args='"40 MHz"'),
        pick=lambda seed: seed % 2,  # every reply scripted: the model only trains, never samples (time)
    )
    tinker = launch_arm(
        spec,
        "tinker",
        root / "runs",
        provenance=provenance,
        service=service,
        base_model=AGENT_MODEL,
        max_tokens=12,
        lora_rank=4,
    )
    assert tinker.status.state == "completed", tinker.status
    return root / "runs", load_run(local.ref.path), load_run(tinker.ref.path)


def test_one_spec_on_two_backends_is_flagged_and_paired(two_backends):
    root, local, tinker = two_backends
    assert local.record.spec_sha256 == tinker.record.spec_sha256 and tinker.record.status == "finished"
    assert (
        local.record.provider["overrides"] == tinker.record.provider["overrides"] == [*OVERRIDES, "arm=tiny"]
    )
    assert (local.record.backend, tinker.record.backend) == ("local", "tinker")
    runs = resolve_runs(root, ["tiny@local", "tiny@tinker"])
    assert [r.path for r in runs] == [local.path, tinker.path]
    result = compare_runs(runs)
    assert result.cross_backend and result.labels == ("tiny@local", "tiny@tinker")
    (group,) = result.same_spec
    assert group.backends == ("local", "tinker") and group.spec_sha256 == local.record.spec_sha256
    _check_metrics(result, runs)
    _check_contrast(result.contrast("tiny@local", "tiny@tinker"), local, tinker)


def test_the_cli_prints_the_table_json_and_figure(two_backends, tmp_path, capsys):
    root, local, tinker = two_backends
    figure = tmp_path / "cmp.png"
    code = main(
        ["runs", "compare", "tiny@local", str(tinker.path), "--root", str(root), "--figure", str(figure)]
    )
    out = capsys.readouterr().out
    assert code == 0 and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "different backends (local, tinker)" in out and "reward per epoch" in out
    frame = pd.read_json(local.path / "metrics.jsonl", lines=True)
    final = f"{round(float(frame['reward'].iloc[-1]), 3):.3f}"
    assert any(line.startswith("final") and final in line for line in out.splitlines())
    assert "sign test p = " in out and "p = +" not in out
    assert main(["runs", "compare", "tiny@local", "tiny@tinker", "--root", str(root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cross_backend"] is True and [r["backend"] for r in data["runs"]] == ["local", "tinker"]
    assert data["contrasts"][0]["paired"] is True


@pytest.mark.parametrize(
    "argv, message",
    [
        (["tiny@local"], "at least two"),
        (["tiny@local", "nope"], "nope: no run folder, run id or arm"),
        (["tiny@local", "tiny@tinker", "--metric", "nope"], "no metric 'nope'"),
        (["tiny@local", "tiny@local"], "named twice"),
    ],
)
def test_bad_compare_input_is_one_line(two_backends, capsys, argv, message):
    root, _, _ = two_backends
    assert main(["runs", "compare", *argv, "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rftlab: error:") and message in err[0], err


def test_a_figure_without_an_image_suffix_is_refused_by_argparse(two_backends, capsys):
    root, _, _ = two_backends
    argv = ["runs", "compare", "tiny@local", "tiny@tinker", "--figure", "x.txt", "--root", str(root)]
    refused_option(argv, capsys, "--figure", "a .png, .svg or .pdf file, got 'x.txt'")


def test_the_figure_draws_both_panels(arms):
    _, runs = arms
    fig = comparison_figure(compare_runs([runs["A"], runs["B"], runs["C"]]))
    left, right = fig.axes
    assert len(left.lines) == 3 and right.get_legend() is not None
    assert "not paired: A − C, B − C" in right.get_title()


def test_an_empty_run_list_prints_a_header_and_an_empty_store_says_so(arms, tmp_path, capsys):
    root, _ = arms
    assert main(["runs", "list", "--root", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["EXPERIMENT", "ARM", "RUN", "ID", "BACKEND", "STATUS"] and len(lines) == 5
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["runs", "list", "--root", str(empty)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and f"no runs under {empty}" in captured.err
    assert main(["runs", "list", "--root", str(empty), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_names_resolve_to_runs(arms):
    root, runs = arms
    a = runs["A"]
    found = resolve_runs(root, [str(a.path), a.record.run_id, "spectrum_memory/A", "A@local"])
    assert [r.path for r in found] == [a.path] * 4
    with pytest.raises(ValueError, match="A@tinker: no run folder"):
        resolve_runs(root, ["A@tinker"])
