"""Reward and behaviour metrics on hand-built episodes (docs/spectrum.md §B.8, B.11), reference policies, RFT CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rftlab.cli import main as cli_main
from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.policies.spectrum.reference import RFT_POLICIES
from rftlab.rewards.spectrum import (
    carried_count,
    carry_rate,
    classify_report_items,
    early_late,
    episode_metrics,
    spectrum_avail_reward,
    spectrum_reward,
)
from rftlab.rollout.episode import episode
from rftlab.training.group_stats import group_carry_stats


def scan(occ, avail=0.5, report=(), echo=None, submitted=True):
    return {
        "submitted": submitted,
        "forced": not submitted,
        "occ": occ,
        "avail": avail,
        "report": list(report) if submitted else None,
        "echo": None if echo is None else list(echo),
    }


def test_reward_is_three_times_mean_occ_and_penalty_when_nothing_scored():
    assert spectrum_reward([0.2, 0.4]) == pytest.approx(0.9)
    assert spectrum_reward([]) == -0.2
    assert spectrum_avail_reward([0.5]) == 1.5 and spectrum_avail_reward([]) == -0.2


def test_half_split():
    assert early_late([0.1, 0.2, 0.3, 0.4]) == (pytest.approx(0.15), pytest.approx(0.35))
    assert early_late([0.1, 0.2, 0.6]) == (pytest.approx(0.1), pytest.approx(0.4))  # half = 1
    assert early_late([0.7]) == (0.7, 0.0)  # B.15 #8: n = 1 → late 0, gain = −early


def test_episode_metrics_hand_built():
    scans = [
        scan(0.10, 0.40, report=[10.0, 20.0]),
        scan(0.20, 0.45, report=[10.0, 20.0, 30.0], echo=[10.0, 20.0]),
        scan(0.0, 0.30, submitted=False),  # forced: excluded from every mean, counted as forced
        scan(0.40, 0.50, report=[10.0, 30.0, 50.0, 60.0], echo=[10.0, 20.0, 30.0]),
        scan(0.50, 0.55, report=[], echo=None),
    ]
    m = episode_metrics(scans)
    occ = [0.1, 0.2, 0.4, 0.5]
    assert m["scans_completed"] == 4 and m["scans_forced"] == 1
    assert m["mean_occ"] == pytest.approx(sum(occ) / 4)
    assert m["reward"] == pytest.approx(3 * sum(occ) / 4)
    assert m["early_occ"] == pytest.approx(0.15) and m["late_occ"] == pytest.approx(0.45)
    assert m["memory_gain"] == pytest.approx(0.30)
    assert m["mean_avail"] == pytest.approx((0.40 + 0.45 + 0.50 + 0.55) / 4)
    assert m["avail_gain"] == pytest.approx((0.50 + 0.55) / 2 - (0.40 + 0.45) / 2)
    assert m["report_size"] == pytest.approx((2 + 3 + 4 + 0) / 4)
    # carry: scan 2 carries 2/2, scan 4 carries {10, 30} of {10, 20, 30} = 2/3 → (2 + 2) / (2 + 3)
    assert m["carry_rate"] == pytest.approx(4 / 5)
    assert m["carry_tau"] == 0.05


def test_scores_are_taken_at_score_line_precision():
    m = episode_metrics([scan(0.123456), scan(0.2)])
    assert m["mean_occ"] == pytest.approx((0.1235 + 0.2) / 2, abs=1e-15)


def test_no_scored_scan():
    m = episode_metrics([scan(0.3, submitted=False)] * 3)
    assert m["reward"] == -0.2 and m["mean_occ"] == 0.0 and m["memory_gain"] == 0.0
    assert m["scans_completed"] == 0 and m["carry_rate"] is None


_centre = st.one_of(
    st.floats(min_value=2400.0, max_value=2500.0),  # MHz centres as the env parses them
    st.integers(min_value=24000, max_value=25000).map(lambda k: k / 10),  # .1f display values: exact ties
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)


@given(
    st.lists(_centre, max_size=12),
    st.lists(_centre, max_size=12),
    st.sampled_from([0.0, 0.05, 0.1, 0.4, 1.0]),
)
def test_carried_count_is_the_definitions_pairwise_check(echo, report, tau):
    """The bisect count equals B.11's definition, checked pairwise, on random lists with ties at the
    tolerance's edge."""
    tol = tau + 1e-9
    expected = sum(1 for e in echo if any(abs(r - e) <= tol for r in report))
    assert carried_count(echo, report, tau) == expected
    edge = [e + tol for e in echo] + [e - tol for e in echo]  # report values exactly at the edge
    assert carried_count(echo, edge, tau) == sum(1 for e in echo if any(abs(r - e) <= tol for r in edge))


def test_carry_rate_tolerance_and_skips():
    assert carried_count([10.0, 20.0], [10.04, 25.0], 0.05) == 1
    assert carried_count([10.0, 20.0], [10.06, 21.0], 0.05) == 0
    assert carried_count([10.0, 20.0], [10.06, 21.0], 1.0) == 2
    pairs = [(None, [1.0]), ([], [1.0]), ([5.0], None), ([5.0, 6.0], [5.0]), ([7.0], [7.0, 9.0])]
    assert carry_rate(pairs) == pytest.approx(2 / 3)
    assert carry_rate([(None, [1.0])]) is None
    m = episode_metrics([scan(0.1, report=[10.0]), scan(0.2, report=[13.0], echo=[10.0])])
    assert m["carry_rate"] == 0.0 and m["carry_rate_tau4"] == 1.0 and m["carry_rate_tau1"] == 0.0


def test_group_carry_stats():
    groups = {
        ("row0", 0): [(0.5, 1.0), (0.7, 1.4), (0.9, 1.8)],  # perfectly correlated
        ("row1", 0): [(0.5, 1.0), (0.5, 1.2)],  # zero carry variance: skipped
        ("row2", 0): [(0.2, 1.0), (0.4, 0.5), (None, 2.0)],  # undefined carry ignored → 2 members, corr −1
    }
    st = group_carry_stats(groups)
    assert st["n_groups"] == 2
    assert st["mean_corr_carry_reward"] == pytest.approx(0.0)
    assert st["median_corr_carry_reward"] == pytest.approx(0.0)
    assert st["mean_sd_carry"] == pytest.approx((0.2 + 0.1414213562) / 2, rel=1e-6)


def test_item_classes():
    got = classify_report_items([10.0, 50.0, 90.0], current_peaks=[12.0], earlier_peaks=[48.0, 10.5])
    assert got == {"current": 1, "recalled": 1, "hallucinated": 1}


# ------------------------------------------------------------------------------- reference policies


def _episodes(name, n=24, memory="echo"):
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory=memory, render=False))
    return [episode(env, RFT_POLICIES[name](), f"t_{i}").metrics for i in range(n)]


def test_oracle_and_empty():
    for m in _episodes("oracle", 6):
        assert (
            m["mean_occ"] == 1.0 and m["memory_gain"] == 0.0 and m["mean_avail"] == 1.0 and m["reward"] == 3.0
        )
    for m in _episodes("empty", 6):
        assert m["mean_occ"] == 0.0 and m["reward"] == 0.0 and m["scans_completed"] == 12
        assert m["carry_rate"] is None  # no echo after empty reports


def test_memory_separates_accumulate_from_memoryless():
    mem = _episodes("memoryless")
    acc = _episodes("accumulate")
    mean = lambda ms, k: sum(m[k] for m in ms) / len(ms)  # noqa: E731
    assert abs(mean(mem, "memory_gain")) < 0.03
    assert mean(acc, "memory_gain") > 0.1
    assert mean(acc, "mean_occ") > 2 * mean(mem, "mean_occ")
    assert mean(acc, "carry_rate") == 1.0  # it resubmits everything it ever listed


def test_ceiling_policies_read_hidden_state():
    den = _episodes("accumulate_denoised", 8)
    assert all(m["late_occ"] >= m["early_occ"] for m in den)
    acc = _episodes("accumulate_filtered", 8)
    assert all(m["mean_occ"] > 0 for m in acc)


def test_baselines_rft_cli(capsys):
    assert (
        cli_main(["spectrum", "baselines", "--variant", "rft", "--episodes", "8", "--seed", "3", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert {"memoryless", "accumulate", "oracle", "empty"} <= set(out)
    for row in out.values():
        for key in ("mean_occ", "memory_gain", "mean_avail", "early_occ", "late_occ", "report_size"):
            assert key in row
        assert row["episodes"] == 8
    assert out["oracle"]["mean_occ"] == 1.0
    # deterministic for a given seed
    cli_main(["spectrum", "baselines", "--variant", "rft", "--episodes", "8", "--seed", "3", "--json"])
    assert json.loads(capsys.readouterr().out) == out
