"""``analysis.summaries`` (mean ± s.e., Pearson, per-scan rows) and ``analysis.display`` helpers, checked
against independent computations."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd
import pytest

from rftlab.analysis.display import interval, markdown_table, pm, r3
from rftlab.analysis.spectrum.summaries import rft_reference_runs, scan_rows, summarize_episodes
from rftlab.analysis.summaries import mean_se
from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.policies.spectrum.reference import RFT_POLICIES, RFTAccumulate
from rftlab.rewards.spectrum import as_reported
from rftlab.rollout.episode import episode
from rftlab.training.group_stats import pearson


def test_mean_se_matches_statistics():
    xs = [0.1, 0.4, 0.35, -0.2, 0.0]
    got = mean_se(xs)
    assert got.n == 5 and got.mean == pytest.approx(statistics.fmean(xs))
    assert got.se == pytest.approx(statistics.stdev(xs) / math.sqrt(5))
    assert mean_se([2.0]) == type(got)(2.0, None, 1) and mean_se([]).mean is None


def test_pearson_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=30)
    y = 0.5 * x + rng.normal(size=30)
    assert pearson(list(x), list(y)) == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert pearson([1.0, 1.0], [1.0, 2.0]) is None and pearson([1.0], [2.0]) is None


def test_display_helpers():
    assert pm(0.12345, 0.04567) == "+0.123 ± 0.046" and pm(0.5, 0.1, signed=False) == "0.500 ± 0.100"
    assert pm(-0.0001, None) == "+0.000 ± –"  # no negative zero; an undefined s.e. prints as –
    assert r3(-0.0004) == 0.0 and math.copysign(1.0, r3(-0.0004)) == 1.0
    assert (
        interval(-0.1234, 0.5) == "[-0.123, 0.500]" and interval(-0.1, 0.2, signed=True) == "[-0.100, +0.200]"
    )
    md = markdown_table(pd.DataFrame({"a": [-0.0001, None], "b": ["x", "y"]}))
    lines = md.splitlines()
    assert "–" in lines[-1] and "-0.000" not in md and "0.000" in lines[2]


def test_scan_rows_equal_the_env_records():
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="echo", render=False))
    traj = episode(env, RFTAccumulate(), "rows_check")
    rows = scan_rows(traj, policy="accumulate")
    assert [r["scan"] for r in rows] == [rec["scan"] for rec in env.records]
    assert [r["occ"] for r in rows] == [as_reported(rec["occ"]) for rec in env.records]
    assert [r["avail"] for r in rows] == [as_reported(rec["avail"]) for rec in env.records]
    assert [r["report_size"] for r in rows] == [len(rec["report"] or []) for rec in env.records]
    assert all(r["policy"] == "accumulate" for r in rows)


def test_reference_runs_summaries_equal_the_cli_summary_path():
    runs = rft_reference_runs(["echo"], {"accumulate": RFT_POLICIES["accumulate"]}, n_bands=3, seed=0)
    assert len(runs.episodes) == 3 and len(runs.scans) == 36
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="echo", render=False))
    metrics = [episode(env, RFT_POLICIES["accumulate"](), f"bl0_{i}").metrics for i in range(3)]
    assert runs.summaries["echo", "accumulate"] == summarize_episodes(metrics)
    gains = [m["memory_gain"] for m in metrics]
    assert runs.summaries["echo", "accumulate"]["memory_gain_se"] == pytest.approx(
        statistics.stdev(gains) / math.sqrt(3)
    )
