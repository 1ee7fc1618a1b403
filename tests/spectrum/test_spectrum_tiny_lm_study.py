"""The memory study on a tiny language model (``rftlab.studies.spectrum_tiny_lm.run_tiny_lm_study``): the plan
restricted to the design's arms, the stop with a diagnosis, and the whole path at test size."""

from __future__ import annotations

import pytest

from rftlab.analysis.spectrum.plan import load_study_plan
from rftlab.runs.paths import SPECS_DIR
from rftlab.studies.spectrum_tiny_lm import TINY_LM_EXPERIMENT, TinyLMDesign, restrict_plan, run_tiny_lm_study

PLAN = SPECS_DIR / "study_spectrum_memory.json"


def test_the_restricted_plan_keeps_the_contrasts_among_its_arms_and_holm_over_them():
    plan = load_study_plan(PLAN).plan
    small = restrict_plan(plan, ("probe", "C", "B_prime"), epochs=3, pairs=3)
    ids = [c.id for c in small.contrasts]
    assert ids == [c.id for c in plan.contrasts if {c.treatment, c.control} <= {"probe", "C", "B_prime"}]
    assert [c.id for c in small.confirmatory()] == [
        "C-B_prime.memory_gain",
        "C-B_prime.mean_occ",
        "C-B_prime.carry",
    ]
    assert small.primary_contrast == plan.primary_contrast and small.epochs == 3
    assert (small.replicates.min_runs, small.replicates.max_runs) == (3, 3)
    # margins are over the run, so per epoch they grow when the run is shorter
    assert small.epsilon("memory_gain") == pytest.approx(plan.equivalence_margins["memory_gain"].over_run / 2)
    with pytest.raises(ValueError, match="primary_contrast"):
        restrict_plan(plan, ("probe", "C"), epochs=3, pairs=3)


TEST_SIZE = dict(rows=2, candidates=2, num_scans=4, epochs=3, max_tokens=100, warm_rows=1, warm_held_out=1)


def test_a_model_that_writes_no_valid_call_stops_the_study_with_examples(tmp_path):
    design = TinyLMDesign(**TEST_SIZE, warm_steps=2, warm_batch=2, min_valid_rate=0.5)
    study = run_tiny_lm_study(PLAN, SPECS_DIR, design, root=tmp_path / "runs")
    assert study.stopped and not study.contrasts and not study.runs
    assert study.warm_start.valid_rate < 0.5
    assert study.warm_start.refused_examples  # what the model wrote instead
    assert not (tmp_path / "runs" / TINY_LM_EXPERIMENT).exists()  # no RL run was started


@pytest.mark.slow
def test_every_arm_and_pair_trains_through_the_tinker_api_and_is_contrasted(tmp_path):
    # enough warm start for some valid reports (all-empty reports would leave no variance to contrast)
    design = TinyLMDesign(**TEST_SIZE, warm_steps=60, warm_batch=4, min_valid_rate=0.0)
    study = run_tiny_lm_study(PLAN, SPECS_DIR, design, root=tmp_path / "runs")
    assert sorted(study.runs) == sorted(
        ["probe", "C", "B_prime", "C_prime", "B_prime_seed1", "C_seed2", "B_prime_seed2"]
    )
    for run in study.runs.values():
        assert run.record.backend == "tinker" and run.record.experiment == TINY_LM_EXPERIMENT
        assert run.record.provider["trainer"]["task"]["base_model"] == study.warm_start.path
        assert len(run.metrics()) == 3
    rows = study.epoch_rows()
    assert len(rows) == 7 * 3 and all(0.0 <= r["valid-call rate"] <= 1.0 for r in rows)
    # an under-trained model (60 steps on 12 transcripts) scores too few scans for memory_gain: the study
    # names why the primary contrast has no interval and computes no contrast (nothing is made up)
    assert "C-B_prime.memory_gain" in study.not_estimable and not study.contrasts
    assert all(" − " in why for why in study.not_estimable.values())
    # a second call reuses the warm start and every run
    again = run_tiny_lm_study(PLAN, SPECS_DIR, design, root=tmp_path / "runs")
    assert {a: r.path for a, r in again.runs.items()} == {a: r.path for a, r in study.runs.items()}


def _records(epochs: int, rows: int, value) -> list[list[dict]]:
    return [
        [
            {
                "row_id": f"r{k}",
                "band_seed": k,
                "memory_gain": value(e, k, j),
                "mean_occ": value(e, k, j),
                "carry_rate": 0.0,
            }
            for k in range(rows)
            for j in range(2)
        ]
        for e in range(epochs)
    ]


def test_a_contrast_whose_paired_difference_never_varies_has_no_interval_and_is_left_out():
    from rftlab.analysis.spectrum.study import study_contrasts, unestimable_contrasts

    plan = restrict_plan(load_study_plan(PLAN).plan, ("probe", "C", "B_prime"), epochs=3, pairs=3)
    import numpy as np

    def noisy(seed):
        rng = np.random.default_rng(seed)
        return lambda e, k, j: float(rng.uniform(0, 0.5))

    rollouts = {}
    for seed in range(3):
        for arm in ("C", "B_prime"):
            rollouts[plan.replicate_name(arm, seed)] = _records(3, 4, noisy(seed + (arm == "C")))
    rollouts["probe"] = _records(3, 4, noisy(9))
    # carry-rate 0 everywhere: C − B′ carry and C − probe carry have no standard error
    dropped = unestimable_contrasts(plan, rollouts)
    assert sorted(dropped) == ["C-B_prime.carry", "C-probe.carry"]
    assert "never varied" in dropped["C-B_prime.carry"]
    analysed = restrict_plan(plan, ("probe", "C", "B_prime"), 3, 3, drop=dropped)
    results = study_contrasts(analysed, rollouts)
    assert [c.id for c in results] == [c.id for c in plan.contrasts if c.id not in dropped]
    assert len(analysed.confirmatory()) == 2  # Holm over the two C − B′ contrasts left
