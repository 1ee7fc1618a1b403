"""Ceiling policies of the spectrum-memory study (averaging vs true-centre denoising)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rftlab.rollout.spectrum.ceilings import AccumulateNoDedupe, AveragingCeiling, ceiling_table


def _obs(peaks, sources, truths):
    return SimpleNamespace(
        peaks=[{"freq_mhz": f} for f in peaks],
        hidden={"peak_sources": sources, "peak_true_centers": truths},
    )


def test_averaging_ceiling_reports_running_means_and_drops_false_alarms():
    pol = AveragingCeiling()
    assert pol.act(_obs([49.0, 70.0], ["channel", "noise"], [50.0, None])) == [49.0]
    assert pol.act(_obs([52.0, 101.0], ["channel", "channel"], [50.0, 100.0])) == [50.5, 101.0]
    assert pol.act(_obs([53.5], ["channel"], [50.0])) == [pytest.approx((49 + 52 + 53.5) / 3), 101.0]
    pol.reset()
    assert pol.act(_obs([], [], [])) == []


def test_accumulate_without_merging_keeps_the_first_sixteen():
    pol = AccumulateNoDedupe()
    for i in range(6):
        out = pol.act(_obs([10.0 + i, 10.1 + i, 10.2 + i], ["channel", "noise", "channel"], [10, None, 10]))
    assert len(out) == 16 and out[:3] == [10.0, 10.1, 10.2]
    filtered = AccumulateNoDedupe(source_filter=True)
    assert filtered.act(_obs([1.0, 2.0], ["noise", "channel"], [None, 2.0])) == [2.0]


def test_ceiling_ordering_on_real_bands():
    table = {r["policy"]: r["mean_occ"] for r in ceiling_table([f"ceil_{i}" for i in range(12)])}
    assert (
        table["memoryless"]
        < table["accumulate"]
        < table["averaging"]
        < table["true_centre"]
        < table["oracle"]
    )
    assert table["oracle"] == 1.0
    # averaging the detections sits far below placing them at the true centres
    assert table["true_centre"] - table["averaging"] > 0.15


def test_naive_search_scores_equal_the_policies_played_through_the_env():
    """The search scores reports directly; its first-16 schemes must equal the same policies played through
    the env's submit_report (``ceiling_table``), naive and filtered."""
    from rftlab.rollout.spectrum.ceilings import naive_ceiling_search

    rows = [f"bl0_{i}" for i in range(8)]
    search = {r["scheme"]: r for r in naive_ceiling_search(rows)}
    table = {r["policy"]: r["mean_occ"] for r in ceiling_table(rows)}
    assert search["first16"]["naive mean occ"] == pytest.approx(table["accumulate_nodedupe"], abs=1e-12)
    assert search["first16"]["filtered mean occ"] == pytest.approx(
        table["accumulate_nodedupe_filtered"], abs=1e-12
    )
    assert search["merge4"]["naive mean occ"] == pytest.approx(table["accumulate"], abs=1e-12)
    assert search["merge4"]["filtered mean occ"] == pytest.approx(table["accumulate_filtered"], abs=1e-12)
    for r in search.values():
        assert r["within 0.447 ± 0.042"] == (0.405 <= r["naive mean occ"] <= 0.489)
        assert r["bands"] == 8
