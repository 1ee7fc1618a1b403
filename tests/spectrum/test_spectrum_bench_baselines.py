"""``bench_baselines`` (``rftlab.studies.spectrum_env``) and ``dataset_estimate``
(``rftlab.rollout.spectrum.dataset``): what ``rftlab spectrum baselines --variant bench`` and
``rftlab spectrum dataset`` print and refuse."""

from __future__ import annotations

import math
import shutil

import pytest

from rftlab.policies.spectrum.reference import BENCH_POLICIES
from rftlab.rollout.spectrum.dataset import dataset_estimate
from rftlab.rollout.spectrum.evaluation import evaluate_bench90
from rftlab.studies.spectrum_env import BenchBaseline, bench_baselines

STAGES = {"five_ch_wide", "five_plus_four_mixed", "full_grid_active"}


@pytest.fixture(scope="module")
def two_runs() -> dict[str, BenchBaseline]:
    return bench_baselines(2)


def test_hand_values_of_the_empty_and_oracle_policies(two_runs):
    empty, oracle = two_runs["empty"], two_runs["oracle"]
    # An empty report leaves the 33 free MHz of 168 free on every scan: available-IoU 33/168.
    assert empty.mean_available_iou == empty.stateless_available_iou == round(33 / 168, 4) == 0.1964
    assert empty.mean_occupied_iou == empty.stateless_occupied_iou == 0.0
    assert empty.run0_available_by_stage == dict.fromkeys(STAGES, 0.1964)
    assert empty.normalized_gain == 0.0  # run sum equals stateless sum: gain 0
    assert oracle.mean_available_iou == oracle.stateless_available_iou == oracle.mean_occupied_iou == 1.0
    assert oracle.normalized_gain is None  # a perfect stateless baseline leaves nothing to gain
    assert all(b.runs == 2 for b in two_runs.values())
    assert list(two_runs) == list(BENCH_POLICIES)


def test_scores_equal_an_independent_computation_from_the_per_scan_rewards(two_runs):
    for name, factory in BENCH_POLICIES.items():
        raw = evaluate_bench90(factory, runs=range(2), baseline=True)
        base = raw["baseline"]["rewards"]
        per_run = [sum(r["rewards"]) / len(r["rewards"]) for r in raw["runs"]]
        occupied = [sum(r["occupied"]) / len(r["occupied"]) for r in raw["runs"]]
        denom = len(base) - sum(base)  # r_max * n - B with r_max = 1
        gains = [(sum(r["rewards"]) - sum(base)) / denom for r in raw["runs"]] if denom else []
        got = two_runs[name]
        assert got.mean_available_iou == pytest.approx(round(sum(per_run) / 2, 4), abs=1e-12)
        assert got.run0_available_iou == pytest.approx(round(per_run[0], 4), abs=1e-12)
        assert got.mean_occupied_iou == pytest.approx(round(sum(occupied) / 2, 4), abs=1e-12)
        assert got.stateless_available_iou == pytest.approx(round(sum(base) / len(base), 4), abs=1e-12)
        want_gain = round(sum(gains) / len(gains), 4) if gains else None
        assert got.normalized_gain == (None if want_gain is None else pytest.approx(want_gain, abs=1e-12))
        # the halves and the delta are each at 4 dp (CLBench's metrics): within three half-units
        assert got.learning_delta == pytest.approx(got.second_half_score - got.first_half_score, abs=1.5e-4)
        assert set(got.stateless_available_by_stage) == set(got.run0_occupied_by_stage) == STAGES


def test_the_json_row_keeps_the_field_order_and_no_negative_zero(two_runs):
    row = two_runs["accumulate"].to_dict()
    assert list(row)[:5] == [
        "mean_available_iou",
        "run0_available_iou",
        "stateless_available_iou",
        "mean_occupied_iou",
        "stateless_occupied_iou",
    ]
    assert list(row)[-1] == "runs" and len(row) == 13
    for b in two_runs.values():
        values = [v for v in b.to_dict().values() if isinstance(v, float)]
        values += [
            v
            for stages in (b.run0_available_by_stage, b.stateless_available_by_stage)
            for v in stages.values()
        ]
        assert not any(v == 0.0 and math.copysign(1.0, v) < 0 for v in values)


@pytest.mark.parametrize("free, fits", [(699, False), (700, True), (10**6, True)])
def test_dataset_estimate_is_the_first_line_times_the_rows(monkeypatch, tmp_path, free, fits):
    seen = []

    def usage(path):
        seen.append(path)
        return shutil._ntuple_diskusage(10**9, 10**9 - free, free)

    monkeypatch.setattr(shutil, "disk_usage", usage)
    size = dataset_estimate(b"x" * 99 + b"\n", 7, tmp_path)  # 100 bytes a row, 7 rows
    assert (size.needed_bytes, size.free_bytes, size.fits) == (700, free, fits)
    assert seen == [tmp_path]
