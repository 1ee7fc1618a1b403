"""The environment study of notebook 01 (``rftlab.studies.spectrum_env``): each typed field against the
lower layers' own functions and plain-Python computations on three bands."""

from __future__ import annotations

import statistics

import pytest

from rftlab.analysis.paired import paired_t_interval
from rftlab.analysis.spectrum.summaries import rft_reference_runs
from rftlab.policies.spectrum.reference import BENCH_POLICIES, RFT_POLICIES, RFTPolicyOnBench
from rftlab.rollout.spectrum.evaluation import evaluate_bench90
from rftlab.runs import RunStore
from rftlab.studies.spectrum_env import (
    BENCH90_EXPERIMENT,
    HALF,
    NUM_SCANS,
    keep_bench90,
    run_bench_study,
    run_reward_study,
)

BANDS = 3


@pytest.fixture(scope="module")
def study():
    return run_reward_study(["echo", "scrambled"], BANDS, seed=0)


@pytest.fixture(scope="module")
def reference():
    return rft_reference_runs(["echo", "scrambled"], RFT_POLICIES, BANDS, 0)


def _per_band(reference, arm: str, policy: str, metric: str) -> list[float]:
    rows = sorted(
        (e for e in reference.episodes if e["arm"] == arm and e["policy"] == policy), key=lambda e: e["band"]
    )
    return [float(e[metric]) for e in rows]


def _diff(reference, metric: str, a: str, b: str, arm: str = "echo") -> list[float]:
    return [
        x - y
        for x, y in zip(
            _per_band(reference, arm, a, metric), _per_band(reference, arm, b, metric), strict=True
        )
    ]


def test_the_summaries_are_the_reference_runs_summaries(study, reference):
    assert study.policies == tuple(RFT_POLICIES)
    assert len(study.episodes) == 2 * len(RFT_POLICIES) * BANDS
    for (arm, name), raw in reference.summaries.items():
        s = study.summary(arm, name)
        assert (s.reward, s.mean_occ, s.memory_gain, s.mean_avail) == pytest.approx(
            (raw["reward"], raw["mean_occ"], raw["memory_gain"], raw["mean_avail"])
        )
        assert s.memory_gain_se == pytest.approx(raw["memory_gain_se"])
    carpet, acc = reference.summaries["echo", "carpet"], reference.summaries["echo", "accumulate"]
    assert study.carpet_share == pytest.approx(carpet["reward"] / acc["reward"])


def test_the_paired_readings_are_band_by_band_differences(study, reference):
    d = _diff(reference, "mean_occ", "carpet", "accumulate")
    assert study.carpet_vs_acc.mean == pytest.approx(statistics.mean(d))
    assert study.carpet_vs_acc.se == pytest.approx(statistics.stdev(d) / BANDS**0.5)
    occ = _diff(reference, "mean_occ", "accumulate", "memoryless")
    avail = _diff(reference, "mean_avail", "accumulate", "memoryless")
    assert study.acc_vs_memless.mean == pytest.approx(statistics.mean(occ))
    reading = study.available
    assert reading.avail.mean == pytest.approx(statistics.mean(avail))
    _, low, high = paired_t_interval(avail)
    assert (reading.avail_low, reading.avail_high) == pytest.approx((low, high))
    assert reading.resolved == pytest.approx(max(abs(low), abs(high)))
    _, low, high = paired_t_interval(occ)
    assert (reading.occ_low, reading.occ_high) == pytest.approx((low, high))
    gains = _per_band(reference, "echo", "accumulate", "avail_gain")
    assert study.acc_avail_gain.mean == pytest.approx(statistics.mean(gains))


def test_the_scramble_rows_and_the_per_scan_curve(study, reference):
    from rftlab.analysis.display import pm

    rows = {r["policy"]: r for r in study.scramble_rows}
    scr = _per_band(reference, "scrambled", "echo_follower", "mean_occ")
    echo = _per_band(reference, "echo", "echo_follower", "mean_occ")
    diffs = [a - b for a, b in zip(scr, echo, strict=True)]
    expected = pm(statistics.mean(diffs), statistics.stdev(diffs) / BANDS**0.5)
    assert rows["echo_follower"]["Δ mean_occ (scrambled − echo) ± 1 s.e."] == expected
    # accumulate never reads the list: scrambling changes nothing
    assert rows["accumulate"]["Δ mean_occ (scrambled − echo) ± 1 s.e."].startswith("+0.000")
    per_scan = [
        statistics.mean(
            r["occ"]
            for r in reference.scans
            if (r["arm"], r["policy"], r["scan"]) == ("echo", "accumulate", k)
        )
        for k in range(1, NUM_SCANS + 1)
    ]
    early = statistics.mean(per_scan[:HALF])
    late = statistics.mean(per_scan[HALF:])
    assert study.acc_early_late == pytest.approx((early, late))
    placed = [e["channels_placed"] for e in reference.episodes]
    oracle = [e["channels_placed"] for e in reference.episodes if e["policy"] == "oracle"]
    assert study.channels_placed() == (min(placed), max(placed), pytest.approx(statistics.mean(oracle)))


def test_the_available_rows_carry_the_echo_means(study, reference):
    (row,) = study.available_rows(["accumulate"])
    assert row["mean_avail ± 1 s.e."].startswith(
        f"{statistics.mean(_per_band(reference, 'echo', 'accumulate', 'mean_avail')):.3f}"
    )


def test_the_bench_study_matches_evaluate_bench90_and_is_kept(tmp_path):
    bench = run_bench_study(1, ["accumulate"])
    direct = evaluate_bench90(BENCH_POLICIES["accumulate"], runs=range(1), baseline=True)
    score = bench.bench_score("accumulate")
    assert (score.available, score.occupied) == pytest.approx(
        (direct["mean_available_iou"], direct["mean_occupied_iou"])
    )
    bridged = evaluate_bench90(lambda: RFTPolicyOnBench(RFT_POLICIES["accumulate"]()), runs=range(1))
    assert bench.bridge_score("accumulate").available == pytest.approx(bridged["mean_available_iou"])
    assert bench.best_bridge() == "accumulate"
    assert bench.best_bench() == max(
        (n for n in BENCH_POLICIES if n != "oracle"), key=lambda n: bench.bench[n]["mean_available_iou"]
    )
    assert [r["policy"] for r in bench.bridge_rows()] == ["rft:accumulate"]
    kept = keep_bench90(bench, tmp_path)
    assert (kept.episodes, kept.runs) == (len(BENCH_POLICIES) + 1, len(BENCH_POLICIES) + 1)
    arms = {r.record.arm for r in RunStore(tmp_path).runs(BENCH90_EXPERIMENT)}
    assert arms == set(BENCH_POLICIES) | {"rft-accumulate"}
