"""Independent group samples, the collapse check and the sampler-vs-trainer KL (docs/gs1.md §6).

The fake service (``test_gs1_fakes``) imitates the three seed behaviours reported for Tinker: an
unseeded request draws fresh randomness; a seed combined with ``num_samples > 1`` returns one sample
repeated (tinker-feedback #79); and, as a worst case, a service returning one sample per prompt."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_gs1_fakes import BASE_MODEL, FakeServiceClient, fake_renderer, toy_task
from tinker import types

from rftlab.analysis.gs1 import step_alerts
from rftlab.launch.gs1.preflight import check_independent_samples, fixed_batch
from rftlab.runs.store import RunStore
from rftlab.training.gs1.rl_loop import (
    IMPLAUSIBLE_DUPLICATE_PROB,
    GS1ArmConfig,
    group_sample_stats,
    request_seed,
    resolve,
    run_arm,
    sample_batch,
    sample_train_kl,
)


def grpo(**kw) -> GS1ArmConfig:
    base = dict(arm="grpo_gs8", estimator="group_mean", group_size=8, groups_per_batch=3, steps=2)
    return GS1ArmConfig(**{**base, "max_tokens": 64, "eval_max_tokens": 64, "n_train": 40, "n_eval": 6, **kw})


def _sampler(service):
    trainer = resolve(service.create_lora_training_client(BASE_MODEL, rank=32, seed=0))
    return resolve(trainer.save_weights_and_get_sampling_client())


def test_group_stats_by_hand():
    rare, common = -20.0, -0.1  # exp(-20) = 2e-9 is implausible to draw twice; exp(-0.1) = 0.9 is not
    stats = group_sample_stats(
        [
            [((1, 2, 3), rare), ((1, 2, 3), rare), ((4,), -1.0)],  # a repeated long answer
            [((7,), common), ((7,), common), ((8,), -3.0), ((9,), -3.0)],  # a repeated confident answer
            [((5,), -2.0), ((6,), -2.0)],
        ]
    )
    assert stats == {
        "distinct_samples_per_group_mean": pytest.approx((2 + 3 + 2) / 3),
        "distinct_samples_per_group_min": 2,
        "groups_with_duplicates": 2,
        "groups_implausible_duplicates": 1,
    }
    assert set(group_sample_stats([[((1,), -1.0)], [((2,), -1.0)]]).values()) == {None}  # groups of one
    assert math.exp(rare) < IMPLAUSIBLE_DUPLICATE_PROB < math.exp(common)


tokens = st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple)


@given(
    st.lists(st.lists(st.tuples(tokens, st.floats(-60, 0)), min_size=2, max_size=8), min_size=1, max_size=6)
)
def test_group_stats_match_a_direct_count(groups):
    stats = group_sample_stats(groups)
    distinct = [len({t for t, _ in g}) for g in groups]
    assert stats["distinct_samples_per_group_min"] == min(distinct)
    assert stats["distinct_samples_per_group_mean"] == pytest.approx(np.mean(distinct))
    assert stats["groups_with_duplicates"] == sum(d < len(g) for d, g in zip(distinct, groups, strict=True))
    assert 0 <= stats["groups_implausible_duplicates"] <= stats["groups_with_duplicates"]


def test_request_seeds_are_distinct_and_reproducible():
    cfg = grpo()
    seeds = {
        request_seed(cfg, s, k, g, salt)
        for s in range(40)
        for k in range(8)
        for g in range(8)
        for salt in (0, 7)
    }
    assert len(seeds) == 40 * 8 * 8 * 2 and all(0 <= x < 2**31 - 1 for x in seeds)
    assert request_seed(cfg, 3, 2, 1) == request_seed(grpo(), 3, 2, 1)


def test_the_loop_never_combines_a_seed_with_several_samples():
    """On a service with the #79 behaviour, the loop's groups stay independent (one request per sample)
    while a single num_samples=8 request with a seed comes back as one sample repeated, which the
    statistic flags."""
    service = FakeServiceClient(seed_duplicates=True)
    renderer, task = fake_renderer(), toy_task()
    batch = sample_batch(grpo(), 0, _sampler(service), renderer, task)
    assert batch.group_stats["groups_implausible_duplicates"] == 0
    assert batch.group_stats["distinct_samples_per_group_min"] >= 6
    assert all(c[1] == 1 for c in service.calls if c[0] == "sample")
    prompt = task.prompt(renderer, task.train[0])
    params = types.SamplingParams(max_tokens=64, temperature=1.0, seed=123)
    seqs = _sampler(service).sample(prompt=prompt, num_samples=8, sampling_params=params).result().sequences
    direct = group_sample_stats([[(s.tokens, float(np.sum(s.logprobs))) for s in seqs]])
    assert direct["distinct_samples_per_group_min"] == 1 and direct["groups_implausible_duplicates"] == 1


def test_without_seeds_requests_carry_none_and_groups_stay_distinct():
    service = FakeServiceClient()
    batch = sample_batch(grpo(), 0, _sampler(service), fake_renderer(), toy_task(), send_seeds=False)
    sent = [c[2] for c in service.calls if c[0] == "sample"]
    assert len(sent) == 24 and all(p.seed is None for p in sent)
    assert batch.group_stats["groups_implausible_duplicates"] == 0


def test_the_preflight_fails_when_groups_collapse():
    renderer, task = fake_renderer(), toy_task()
    good = check_independent_samples(fixed_batch(grpo(), FakeServiceClient(), renderer, task), 8)
    assert good.status == "passed" and good.values["groups_implausible_duplicates"] == 0
    bad = check_independent_samples(fixed_batch(grpo(), FakeServiceClient(collapse=True), renderer, task), 8)
    assert bad.status == "failed" and bad.values["groups_implausible_duplicates"] == 3
    assert "duplicated samples" in bad.detail
    gs1 = GS1ArmConfig(arm="gs1_kernel", estimator="kernel_baseline", group_size=1, groups_per_batch=8)
    single = check_independent_samples(fixed_batch(gs1, FakeServiceClient(), renderer, task), 1)
    assert single.status == "failed" and "no group" in single.detail  # nothing to check is not a pass


def test_collapsed_groups_are_logged_and_flagged_every_step(tmp_path):
    res = run_arm(
        grpo(), FakeServiceClient(collapse=True), fake_renderer(), toy_task(), RunStore(tmp_path), "local"
    )
    for m in res.run.metrics():
        assert m["distinct_samples_per_group_min"] == 1 and m["groups_implausible_duplicates"] == 3
        assert any("implausible duplicate" in a for a in step_alerts(m, 8.0))


def test_kl_is_logged_every_step_and_matches_the_trainer_shift(tmp_path):
    """A trainer whose logprobs sit 0.25 below the sampler's on every response token: v1 = 0.25 and
    v2 = 0.25² / 2 over exactly the trained response tokens."""
    service = FakeServiceClient(trainer_logprob_shift=0.25)
    res = run_arm(grpo(), service, fake_renderer(), toy_task(), RunStore(tmp_path), "local")
    for step, m in enumerate(res.run.metrics()):
        trained = [r for r in res.run.rollouts(step) if r.get("in_batch")]
        assert m["n_kl_tokens"] == sum(r["response_tokens"] for r in trained) > 0
        assert m["kl_sample_train_v1"] == pytest.approx(0.25, abs=1e-6)
        assert m["kl_sample_train_v2"] == pytest.approx(0.25**2 / 2, abs=1e-6)


def test_kl_by_hand_and_without_trainer_logprobs():
    prompt = types.ModelInput.from_ints([5, 6, 7])
    from rftlab.training.gs1.rl_loop import make_datum

    d = make_datum(prompt, [11, 12], [-0.5, -1.0], 1.0)  # targets 0, 0, 11 (-0.5), 12 (-1.0)
    trainer = {"logprobs": types.TensorData.from_numpy(np.array([-9.0, -9.0, -0.25, -1.5], np.float32))}
    kl = sample_train_kl([d], [2], [trainer])
    diffs = np.array([-0.5 + 0.25, -1.0 + 1.5])  # sampler minus trainer over the two response tokens
    assert kl["kl_sample_train_v1"] == pytest.approx(diffs.mean())
    assert kl["kl_sample_train_v2"] == pytest.approx(0.5 * np.mean(diffs**2))
    assert kl["n_kl_tokens"] == 2
    assert sample_train_kl([d], [2], [])["kl_sample_train_v1"] is None  # the backend returned none
