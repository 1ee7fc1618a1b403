"""GRPO group-mean and GS1 kernel-baseline advantages against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.training.gs1.advantages import (
    WindowRollouts,
    advantages_for_rows,
    group_mean,
    kernel_baseline,
    kernel_effective_neighbors,
    parse_batch_rows,
    prompt_features,
)


def test_group_mean_matches_hand_values():
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    groups = ["a", "a", "a", "a", "b", "b"]
    # group a mean 0.5, group b mean 1.0
    assert group_mean(rewards, groups).tolist() == [0.5, -0.5, -0.5, 0.5, 0.0, 0.0]


def test_group_mean_equals_cookbook_compute_advantages():
    import torch
    from tinker_cookbook.rl.data_processing import compute_advantages

    class Group:  # the only method compute_advantages calls
        def __init__(self, r):
            self.r = r

        def get_total_rewards(self):
            return self.r

    rng = np.random.default_rng(3)
    groups = [rng.integers(0, 2, 8).astype(float).tolist() for _ in range(8)]
    ours = group_mean([x for g in groups for x in g], [i for i, g in enumerate(groups) for _ in g])
    theirs = torch.cat(compute_advantages([Group(g) for g in groups])).numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-7)  # the cookbook works in float32


def test_kernel_effective_neighbors():
    assert kernel_effective_neighbors([1, 1, 1, 1]) == pytest.approx(4.0)
    assert kernel_effective_neighbors([1.0, 0.0, 0.0]) == pytest.approx(1.0)
    assert kernel_effective_neighbors([0.5, 0.25]) == pytest.approx(0.75**2 / (0.25 + 0.0625))
    assert kernel_effective_neighbors([]) == 0.0
    assert kernel_effective_neighbors([0.0, 0.0]) == 0.0


def _hand_standardize(points):
    cols = list(zip(*points, strict=True))
    out_cols = []
    for col in cols:
        m = sum(col) / len(col)
        sd = math.sqrt(sum((x - m) ** 2 for x in col) / len(col))
        out_cols.append([(x - m) / (sd if sd > 0 else 1.0) for x in col])
    return list(zip(*out_cols, strict=True))


def _hand_baseline(i_window, window_r, window_phi, window_ids, h, min_mass=1e-3):
    """Pure-Python GS1 baseline of window position i_window (written from the spec's words)."""
    z = _hand_standardize(window_phi)
    num = den = 0.0
    rs = []
    for j, (r, ident) in enumerate(zip(window_r, window_ids, strict=True)):
        if ident == window_ids[i_window]:
            continue
        d2 = (z[i_window][0] - z[j][0]) ** 2 + (z[i_window][1] - z[j][1]) ** 2
        w = math.exp(-d2 / (2 * h * h))
        num += w * r
        den += w
        rs.append(r)
    if not rs:
        return 0.0
    return sum(rs) / len(rs) if den < min_mass else num / den


def test_kernel_baseline_three_prompts_by_hand():
    # Three rollouts, three prompts, φ on a line: standardised φ are (-√1.5, 0, √1.5) in x and 0 in y.
    rewards = [1.0, 0.0, 1.0]
    phi = [[0.0, -1.0], [1.0, -1.0], [2.0, -1.0]]
    res = kernel_baseline(rewards, phi, ["p", "q", "s"], bandwidth=1.0)
    s = math.sqrt(1.5)
    w_near, w_far = math.exp(-(s**2) / 2), math.exp(-((2 * s) ** 2) / 2)
    # b_0 = (w_near*0 + w_far*1)/(w_near + w_far); b_1 = (w_near*1 + w_near*1)/(2 w_near) = 1
    assert res.baselines[0] == pytest.approx(w_far / (w_near + w_far), abs=1e-15)
    assert res.baselines[1] == pytest.approx(1.0, abs=1e-15)
    assert res.baselines[2] == pytest.approx(w_near * 0 / (w_near + w_far) + w_far / (w_near + w_far))
    np.testing.assert_allclose(res.advantages, np.array(rewards) - res.baselines)
    assert res.effective_neighbors[1] == pytest.approx(2.0)
    assert res.effective_neighbors[0] == pytest.approx((w_near + w_far) ** 2 / (w_near**2 + w_far**2))
    assert res.baselines.dtype == np.float64


def test_same_prompt_rollouts_are_excluded_and_window_keeps_the_last_256():
    rng = np.random.default_rng(0)
    # 300 earlier rollouts (oldest first) and a batch of 64 -> the window is the last 192 + the batch
    hist_r = rng.integers(0, 2, 300).astype(float)
    hist_phi = rng.normal(size=(300, 2)) * [0.3, 1.0] + [4.0, -2.0]
    hist_ids = [f"h{k % 97}" for k in range(300)]
    r = rng.integers(0, 2, 64).astype(float)
    phi = rng.normal(size=(64, 2)) * [0.3, 1.0] + [4.0, -2.0]
    ids = [f"h{k % 5}" for k in range(64)]  # shares prompt ids with the history and within the batch
    history = WindowRollouts.of(hist_r, hist_phi, hist_ids)
    res = kernel_baseline(r, phi, ids, history, bandwidth=0.5)

    win_r = list(hist_r[-192:]) + list(r)
    win_phi = [tuple(x) for x in hist_phi[-192:]] + [tuple(x) for x in phi]
    win_ids = hist_ids[-192:] + ids
    assert res.window_rewards.size == 256
    for i in (0, 7, 33, 63):
        expected = _hand_baseline(192 + i, win_r, win_phi, win_ids, 0.5)
        assert res.baselines[i] == pytest.approx(expected, rel=1e-12, abs=1e-12)
        assert res.n_neighbors[i] == sum(x != ids[i] for x in win_ids)
        assert all(win_ids[j] != ids[i] for j in res.neighbors[i])


def test_fallback_to_window_mean_when_kernel_mass_is_tiny():
    # prompt a sits far from the others: its kernel mass underflows -> unweighted mean of the others
    rewards = [0.0, 1.0, 1.0, 0.0, 1.0]
    phi = [[100.0, 0.0], [0.0, 0.0], [0.1, 0.0], [0.2, 0.0], [0.3, 0.0]]
    res = kernel_baseline(rewards, phi, ["a", "b", "c", "d", "e"], bandwidth=0.5)
    assert res.fallback.tolist() == [True, False, False, False, False]
    assert res.kernel_mass[0] < 1e-3
    assert res.baselines[0] == pytest.approx((1 + 1 + 0 + 1) / 4)
    # b, c, d, e are close to each other: no fallback, kernel mean of the three others (a has ~0 weight)
    expected_b = _hand_baseline(1, rewards, [tuple(p) for p in phi], list("abcde"), 0.5)
    assert res.baselines[1] == pytest.approx(expected_b, rel=1e-12)


def test_forced_non_activation_huge_bandwidth_gives_window_mean():
    rng = np.random.default_rng(1)
    r = rng.integers(0, 2, 64).astype(float)
    phi = rng.normal(size=(64, 2))
    ids = list(range(64))
    res = kernel_baseline(r, phi, ids, bandwidth=1e6)
    loo = (r.sum() - r) / (r.size - 1)  # mean of the other 63 rollouts
    np.testing.assert_allclose(res.baselines, loo, rtol=0, atol=1e-9)
    assert np.all(res.effective_neighbors > 62.99)


def test_forced_activation_heterogeneous_phi_gives_nonconstant_baseline():
    rng = np.random.default_rng(2)
    x = rng.normal(size=64)
    r = (x > 0).astype(float)  # reward depends on the feature
    phi = np.stack([x, rng.normal(size=64) * 0.1], axis=1)
    res = kernel_baseline(r, phi, list(range(64)), bandwidth=0.5)
    assert np.std(res.baselines) > 0.1
    assert np.corrcoef(res.baselines, r)[0, 1] > 0.5


def test_no_neighbour_gives_zero_baseline():
    res = kernel_baseline([1.0, 0.0], [[0, 0], [1, 1]], ["a", "a"])
    assert res.baselines.tolist() == [0.0, 0.0]
    assert res.advantages.tolist() == [1.0, 0.0]


def test_rows_api_processes_steps_in_order_with_history():
    rows = [
        {"prompt_id": "a", "reward": 1.0, "phi": [1.0, -1.0], "step": 1},
        {"prompt_id": "b", "reward": 0.0, "phi": [2.0, -0.5], "step": 0},
        {"prompt_id": "c", "reward": 1.0, "phi": [1.5, -0.7], "step": 0},
    ]
    out = advantages_for_rows(rows, "kernel_baseline", bandwidth=1.0)
    assert [o["prompt_id"] for o in out] == ["a", "b", "c"]  # input order kept
    # step 0: b and c only see each other
    assert out[1]["baseline"] == pytest.approx(1.0) and out[2]["baseline"] == pytest.approx(0.0)
    # step 1: a sees the two step-0 rollouts
    expected = _hand_baseline(
        2, [0.0, 1.0, 1.0], [(2.0, -0.5), (1.5, -0.7), (1.0, -1.0)], ["b", "c", "a"], 1.0
    )
    assert out[0]["baseline"] == pytest.approx(expected, rel=1e-12)
    gm = advantages_for_rows(rows, "group_mean")
    assert [o["advantage"] for o in gm] == [0.0, 0.0, 0.0]  # every (step, prompt) group has one rollout


def test_prompt_features():
    assert prompt_features(4, [None, -1.0, -2.0, -3.0]) == (math.log(4), -2.0)
    assert prompt_features(1, [None]) == (0.0, 0.0)


@pytest.mark.parametrize(
    "bad, message",
    [
        ([], "non-empty"),
        ([{"prompt_id": "a", "reward": 1, "phi": [1, 2]}], "missing step"),
        ([{"prompt_id": "a", "reward": "x", "phi": [1, 2], "step": 0}], "reward"),
        ([{"prompt_id": "a", "reward": 1, "phi": [1], "step": 0}], "phi"),
        ([{"prompt_id": "a", "reward": 1, "phi": [1, float("nan")], "step": 0}], "phi"),
        ([{"prompt_id": "a", "reward": 1, "phi": [1, 2], "step": -1}], "step"),
        ([3], "expected an object"),
    ],
)
def test_parse_batch_rows_rejects_bad_rows(bad, message):
    with pytest.raises(ValueError, match=message):
        parse_batch_rows(bad)


row_strategy = st.fixed_dictionaries(
    {
        "prompt_id": st.sampled_from(["a", "b", "c", "d", 1, 2]),
        "reward": st.sampled_from([0.0, 1.0, 0.5]),
        "phi": st.lists(st.floats(-5, 5, allow_nan=False), min_size=2, max_size=2),
        "step": st.integers(0, 3),
    }
)


@settings(max_examples=60, deadline=None)
@given(st.lists(row_strategy, min_size=1, max_size=20), st.sampled_from([0.5, 1.0]))
def test_kernel_baseline_is_a_convex_combination_of_other_prompts_rewards(rows, h):
    out = advantages_for_rows(parse_batch_rows(rows), "kernel_baseline", bandwidth=h)
    for row in out:
        assert row["advantage"] == pytest.approx(row["reward"] - row["baseline"])
        if row["n_neighbors"]:
            assert -1e-12 <= row["baseline"] <= 1.0 + 1e-12
            assert 0.0 <= row["effective_neighbors"] <= row["n_neighbors"] + 1e-9
        else:
            assert row["baseline"] == 0.0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_parse_batch_rows_never_crashes_on_arbitrary_json(obj):
    try:
        rows = parse_batch_rows(obj)
    except ValueError:
        return
    out = advantages_for_rows(rows, "kernel_baseline")  # whatever parses must also compute
    assert len(out) == len(rows)
