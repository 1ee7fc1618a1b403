"""The simulated policy: exact log-probabilities and gradients, temperature, calibration, notepad parsing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.policies.spectrum.simulated import (
    N_PARAMS,
    PARAM_NAMES,
    TARGET_CARRY,
    ScanBatch,
    SimulatedSpectrumPolicy,
    decide_scan,
    format_notepad,
    initial_params,
    parse_notepad,
)
from rftlab.rollout.episode import episode
from rftlab.training.spectrum.calibration import measure_untrained
from rftlab.training.spectrum.rollout import GroupSampler
from rftlab.types import Policy


def _play(memory: str, theta, seed: int, row: str = "sc2_3"):
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory=memory, render=False))
    policy = SimulatedSpectrumPolicy(theta, memory=memory, temperature=1.3, record=True)
    traj = episode(env, policy, row, policy_seed=seed, epoch=0)
    return policy, traj


def _finite_difference(f, theta, h=1e-6):
    out = np.zeros_like(theta)
    for i in range(theta.size):
        up, down = theta.copy(), theta.copy()
        up[i] += h
        down[i] -= h
        out[i] = (f(up) - f(down)) / (2 * h)
    return out


@pytest.mark.parametrize("memory", ["echo", "scrambled", "notepad"])
def test_logprob_gradient_matches_finite_differences(memory):
    # off-calibration parameters so every block has probabilities well inside (0, 1)
    theta = np.array([0.7, 0.9, -0.4, 1.1, 0.5, 0.8, 0.6])
    policy, _ = _play(memory, theta, seed=7)
    trace = policy.trace
    assert len(trace) > 20
    T = policy.temperature
    fd = _finite_difference(lambda th: trace.logprob(th, T), theta)
    np.testing.assert_allclose(policy.grad, fd, rtol=1e-6, atol=1e-7)
    assert policy.logp == pytest.approx(trace.logprob(theta, T), rel=1e-12)
    if memory == "notepad":
        assert policy.grad[PARAM_NAMES.index("write.bias")] != 0.0
    else:
        assert policy.grad[PARAM_NAMES.index("carry.bias")] != 0.0


def test_logprob_of_one_scan_by_hand():
    # two memory items (one corroborated by a peak), two peaks (one a near-duplicate of the kept item)
    theta = np.array([1.0, 2.0, -1.0, 0.5, 1.5, 0.0, 0.0])
    T = 2.0
    peaks = [
        {"freq_mhz": 50.0, "power_dbm": -25.0, "width_mhz": 8.0},  # snr (25-15)/10 = 1.0, width 0
        {"freq_mhz": 101.0, "power_dbm": -45.0, "width_mhz": 4.0},  # snr -1.0, width 1.0
    ]
    batch = ScanBatch.build([peaks], [[100.0, 20.0]])
    u_carry = np.array([[0.0, 0.999]])  # keep 100.0 (corroborated), drop 20.0
    u_report = np.array([[0.0, 0.0]])  # peak 0 reported; peak 1 is a near-duplicate of 100.0: no decision
    dec = decide_scan(theta, T, batch, u_carry, u_report)
    s = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    p_keep_corr = s((0.5 + 1.5) / T)
    p_keep_plain = s(0.5 / T)
    p_report0 = s((1.0 + 2.0 * 1.0 - 1.0 * 0.0) / T)
    expected = math.log(p_keep_corr) + math.log(1 - p_keep_plain) + math.log(p_report0)
    assert dec.logp[0] == pytest.approx(expected, rel=1e-12)
    assert dec.reports[0] == [100.0, 50.0]
    g = dec.grad[0]
    assert g[3] == pytest.approx(((1 - p_keep_corr) + (0 - p_keep_plain)) / T)
    assert g[4] == pytest.approx((1 - p_keep_corr) / T)
    assert g[0] == pytest.approx((1 - p_report0) / T)
    assert g[1] == pytest.approx((1 - p_report0) * 1.0 / T)
    assert dec.carried[0] == 1 and dec.offered[0] == 2


def test_temperature_scales_logits():
    theta = initial_params("explicit")
    batch = ScanBatch.build([[]], [[10.0 * i for i in range(1, 17)]])
    u = np.random.default_rng(0).random((1, 16))
    cold = decide_scan(theta, 1.0, batch, u, np.zeros((1, 0)))
    hot = decide_scan(theta, 1e6, batch, u, np.zeros((1, 0)))
    # at an enormous temperature every choice is a fair coin: log p = 16 · log(1/2)
    assert hot.logp[0] == pytest.approx(16 * math.log(0.5), rel=1e-5)
    assert cold.logp[0] > hot.logp[0]


def test_group_sampler_traces_agree_with_vectorised_sums():
    theta = np.array([0.7, 0.9, -0.4, 1.1, 0.5, 0.8, 0.6])
    for memory in ("echo", "notepad"):
        sampler = GroupSampler(memory, 5)
        res = sampler.run(theta, 1.2, "sc1_2", "x", np.random.default_rng(3), record=True)
        for i, trace in enumerate(res.traces):
            assert res.logp[i] == pytest.approx(trace.logprob(theta, 1.2), rel=1e-10)
            np.testing.assert_allclose(res.grads[i], trace.grad(theta, 1.2), rtol=1e-10, atol=1e-12)
        assert len({r["band_seed"] for r in res.records}) == 1


@pytest.mark.parametrize("variant", ["explicit", "weak"])
def test_untrained_carry_rate_is_calibrated(variant):
    # measured on bands other than the ones the bias was calibrated on
    m = measure_untrained(variant, rows=16, candidates=8, row_prefix="calibtest", seed=99)
    assert m["carry_rate"] == pytest.approx(TARGET_CARRY[variant], abs=0.012)


def test_initial_params_shape_and_bad_variant():
    assert initial_params("weak").shape == (N_PARAMS,)
    with pytest.raises(ValueError, match="prompt variant"):
        initial_params("chatty")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=180, allow_nan=False), max_size=16))
def test_notepad_round_trip(centres):
    parsed = parse_notepad(format_notepad(centres))
    assert len(parsed) == len(centres)
    assert all(abs(a - b) <= 0.05 + 1e-9 for a, b in zip(parsed, centres, strict=True))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parse_notepad_never_raises(text):
    out = parse_notepad(text)
    assert all(isinstance(x, float) and math.isfinite(x) for x in out)
    assert len(out) <= 64


@pytest.mark.parametrize("memory", ["echo", "notepad"])
def test_policy_contract_and_replay_through_the_episode_loop(memory):
    theta = initial_params("explicit")
    policy = SimulatedSpectrumPolicy(theta, memory=memory)
    assert isinstance(policy, Policy)
    a = _play(memory, theta, seed=11)[1].metrics
    b = _play(memory, theta, seed=11)[1].metrics
    c = _play(memory, theta, seed=12)[1].metrics
    assert a == b and a != c
    assert a["scans_completed"] == 12
    if memory == "notepad":
        assert a["notepad_writes"] > 0 and a["notepad_reads"] > 0


def test_long_memory_lists_are_capped_not_crashing():
    from types import SimpleNamespace

    policy = SimulatedSpectrumPolicy(initial_params("explicit"), memory="echo")
    policy.reset(0)
    obs = SimpleNamespace(
        peaks=[{"freq_mhz": 90.0, "power_dbm": -30.0, "width_mhz": 8.0}],
        echo=[1.0 + 4.5 * i for i in range(40)],
    )
    report = policy.act(obs)
    assert len(report) <= 16 and policy.offered == 16
    with pytest.raises(ValueError, match="uniforms"):
        decide_scan(
            policy.theta, 1.2, ScanBatch.build([[]], [[1.0, 2.0]]), np.zeros((1, 1)), np.zeros((1, 0))
        )


def test_calibration_check_uses_the_bisection_sample_and_a_held_out_one():
    from rftlab.training.spectrum.calibration import calibration_check

    rows = calibration_check(rows=6, candidates=4)
    assert [(r["variant"], r["sample"]) for r in rows] == [
        ("explicit", "bisection rows and seed"),
        ("explicit", "held-out rows, other seed"),
        ("weak", "bisection rows and seed"),
        ("weak", "held-out rows, other seed"),
    ]
    # the bisection sample is exactly what calibrate_carry_bias measures (its rows and seed) ...
    again = measure_untrained("weak", rows=6, candidates=4)
    assert rows[2]["measured carry"] == again["carry_rate"]
    # ... and the held-out sample is other bands drawn with another RNG seed
    assert rows[3]["rows"] == "heldout_0..5" and rows[3]["rng seed"] != rows[2]["rng seed"]
    assert rows[3]["measured carry"] != rows[2]["measured carry"]
    for r in rows:
        assert r["s.e. (rows)"] > 0
        assert r["gap / s.e."] == pytest.approx((r["measured carry"] - r["target carry"]) / r["s.e. (rows)"])
