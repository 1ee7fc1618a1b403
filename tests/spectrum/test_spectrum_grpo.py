"""Local GRPO trainer: advantages by hand, Adam, determinism, resume after an interruption."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rftlab.runs import RunStore
from rftlab.training.grpo import Adam, group_advantages, policy_gradient
from rftlab.training.spectrum.grpo import SpectrumGRPOConfig, final_theta, train_spectrum_grpo

TINY = dict(rows=4, candidates=4, epochs=3, batch_rows=2, row_prefix="t")


def test_grpo_advantages_by_hand():
    rewards = np.array([[1.0, 2.0, 3.0, 6.0], [5.0, 5.0, 5.0, 5.0]])
    sd = math.sqrt(((1 - 3) ** 2 + (2 - 3) ** 2 + 0 + (6 - 3) ** 2) / 3)  # sample sd of the first group
    adv = group_advantages(rewards, "grpo")
    np.testing.assert_allclose(adv[0], [-2 / sd, -1 / sd, 0.0, 3 / sd])
    np.testing.assert_array_equal(adv[1], [0.0, 0.0, 0.0, 0.0])  # zero variance: no signal
    np.testing.assert_allclose(group_advantages(rewards, "mean_only"), [[-2, -1, 0, 3], [0, 0, 0, 0]])
    with pytest.raises(ValueError):
        group_advantages(rewards, "ppo")


def test_policy_gradient_by_hand():
    adv = np.array([[1.0, -1.0]])
    grads = np.array([[[2.0, 0.0], [0.0, 4.0]]])
    np.testing.assert_allclose(policy_gradient(adv, grads), [(2.0 - 0.0) / 2, (0.0 - 4.0) / 2])


def test_adam_first_step_and_state_round_trip():
    adam = Adam(lr=0.1)
    step = adam.step(np.array([3.0, -0.002]))
    # after one step m̂ = g and v̂ = g², so the update is lr · g / (|g| + eps)
    np.testing.assert_allclose(step, [0.1, -0.1], rtol=1e-5)
    twin = Adam.from_state(json.loads(json.dumps(adam.state_dict())))
    g = np.array([1.0, 1.0])
    np.testing.assert_array_equal(adam.step(g), twin.step(g))


def _train(tmp_path, name, **kw):
    cfg = SpectrumGRPOConfig(**{**TINY, **kw})
    run = RunStore(tmp_path).create_run("t", name, cfg.to_dict())
    return cfg, run, train_spectrum_grpo(cfg, run, progress=False)


def _strip(rows):
    return [{k: v for k, v in r.items()} for r in rows]


def test_deterministic_for_a_seed(tmp_path):
    _, run_a, a = _train(tmp_path, "a", learning_rate=0.05)
    _, run_b, b = _train(tmp_path, "b", learning_rate=0.05)
    _, _, c = _train(tmp_path, "c", learning_rate=0.05, seed=1)
    assert _strip(a.metrics) == _strip(b.metrics)
    np.testing.assert_array_equal(a.theta, b.theta)
    assert run_a.rollouts(2) == run_b.rollouts(2)
    assert [m["reward"] for m in a.metrics] != [m["reward"] for m in c.metrics]


def test_metrics_rows_and_fresh_bands(tmp_path):
    cfg, run, res = _train(tmp_path, "m", learning_rate=0.05)
    assert [m["epoch"] for m in res.metrics] == [0, 1, 2]
    for key in (
        "reward",
        "mean_occ",
        "early_occ",
        "late_occ",
        "memory_gain",
        "carry_rate",
        "report_size",
        "within_group_corr_carry_reward",
        "within_group_reward_sd",
        "frac_zero_variance_groups",
    ):
        assert res.metrics[0][key] is not None, key
    r0, r1 = run.rollouts(0), run.rollouts(1)
    assert len(r0) == cfg.rows * cfg.candidates
    # candidates of a row share a band; epochs use fresh bands
    by_row = {}
    for r in r0:
        by_row.setdefault(r["row_id"], set()).add(r["band_seed"])
    assert all(len(s) == 1 for s in by_row.values())
    assert {r["band_seed"] for r in r0}.isdisjoint({r["band_seed"] for r in r1})
    # the epoch mean is the mean of the rollouts on disk
    assert res.metrics[1]["reward"] == pytest.approx(np.mean([r["reward"] for r in r1]))
    assert run.finished


def test_resume_after_interruption_matches_an_uninterrupted_run(tmp_path):
    _, run_full, full = _train(tmp_path, "full", learning_rate=0.05)
    cfg = SpectrumGRPOConfig(**{**TINY, "learning_rate": 0.05})
    run = RunStore(tmp_path).create_run("t", "cut", cfg.to_dict())

    def interrupt(epoch, _row):
        if epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_spectrum_grpo(cfg, run, progress=False, on_epoch_end=interrupt)
    assert not run.finished and [m["epoch"] for m in run.metrics()] == [0, 1]
    # a half-written next epoch (rollouts on disk, no metrics row) is recomputed, not trusted
    (run.path / "rollouts" / "epoch-2.jsonl").write_text('{"junk": 1}\n')
    resumed = train_spectrum_grpo(cfg, run, progress=False)
    assert resumed.resumed_from == 1 and resumed.epochs_run == [2]
    assert _strip(run.metrics()) == _strip(run_full.metrics())
    assert run.rollouts(2) == run_full.rollouts(2)
    np.testing.assert_array_equal(final_theta(run), full.theta)


def test_learning_moves_carry_up_and_probe_stays_put(tmp_path):
    _, _, trained = _train(tmp_path, "lr", learning_rate=0.1, rows=8, candidates=8, epochs=4, batch_rows=4)
    assert trained.metrics[-1]["theta.carry.bias"] > trained.metrics[0]["theta.carry.bias"] + 0.2
    _, _, probe = _train(tmp_path, "probe", learning_rate=1e-7)
    assert abs(probe.theta[3] - probe.metrics[0]["theta.carry.bias"]) < 1e-5


def test_notepad_write_cost_is_charged(tmp_path):
    _, run, _ = _train(tmp_path, "d", memory="notepad", prompt="explicit", notepad_write_cost=0.05, epochs=1)
    for r in run.rollouts(0):
        assert r["reward"] == pytest.approx(r["env_reward"] - 0.05 * r["notepad_writes"])


def test_within_group_carry_stats_by_hand():
    from rftlab.training.group_stats import group_carry_stats

    groups = {
        "a": [(0.8, 1.0), (0.9, 2.0), (1.0, 3.0)],  # perfectly correlated, sd 0.1
        "b": [(0.5, 1.0), (0.7, 0.0), (None, 5.0)],  # corr -1 over the two defined carries
        "c": [(0.9, 1.0), (0.9, 2.0)],  # zero carry variance: skipped
    }
    out = group_carry_stats(groups)
    assert out["n_groups"] == 2
    assert out["mean_corr_carry_reward"] == pytest.approx(0.0)
    assert out["mean_sd_carry"] == pytest.approx((0.1 + math.sqrt(0.02)) / 2)
