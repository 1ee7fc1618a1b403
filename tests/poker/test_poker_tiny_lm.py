"""Poker's tiny-language-model study (issue 30 item 5): the warm start's reference transcripts
(``rftlab.training.poker.warm_start``) and the study (``rftlab.studies.poker.run_tiny_lm_study``) on the
built-in ``rftlab/tiny-qwen3-agent`` through the in-process Tinker service.

The transcripts are checked against the project's other path to the same play (``play_rft`` on the
``PokerEnv``, scored by ``rft_episode_rows``); the study's contrasts against differences computed here from
the episode records; the stop branch at a threshold no model can reach."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.analysis.poker import rft_episode_rows
from rftlab.policies.poker.reference import AlwaysCall, Exploit
from rftlab.rollout.poker.play import play_rft
from rftlab.runs import RunStore
from rftlab.studies.poker import (
    REFERENCES,
    TINY_LM_EXPERIMENT,
    TRAINED,
    WARM_BASE,
    TinyLMDesign,
    TinyLMStudy,
    run_tiny_lm_study,
    same_deals,
    seed_contrasts,
    tiny_lm_contrasts,
    warm_start_dir,
)
from rftlab.training.agent_warm_start import ReferenceReplyError, reference_turns, reply_tokens
from rftlab.training.cookbook_envs import make_renderer, run_sync
from rftlab.training.local_tinker.model import AGENT_MODEL
from rftlab.training.poker.cookbook_env import (
    PokerCookbookConfig,
    PokerCookbookEnv,
    poker_act_arguments,
    read_reply,
)
from rftlab.training.poker.warm_start import (
    VALID_KEY,
    StrategyReplies,
    WarmStartRows,
    act_message,
    is_valid_call,
    reference_builders,
)

TASK = PokerCookbookConfig(hands=2, base_model=AGENT_MODEL)
EQUITY = (
    30  # the exploit strategy's equity samples in these tests (any count plays the same way on both paths)
)

# A micro design: every stage runs, in seconds. Its warm start is far too short to learn the call, so the
# threshold is 0 here to drive the GRPO run and the evaluation (a test of the mechanics, not a result).
MICRO = TinyLMDesign(
    rows=1, candidates=2, epochs=1, max_tokens=8, eval_rows=2, warm_rows=2, warm_held_out=1,
    warm_steps=2, warm_batch=2, warm_checks=1, equity_samples=EQUITY, min_valid_rate=0.0,
)  # fmt: skip


def _parsed_action(renderer, tokens) -> dict:
    reply = read_reply(renderer, list(tokens))
    assert reply.structural is None and len(reply.calls) == 1 and reply.calls[0].name == "poker_act"
    kwargs, why = poker_act_arguments(reply.calls[0].arguments)
    assert kwargs is not None, why
    return {"action": kwargs["action"], "amount": None if kwargs["amount"] < 0 else kwargs["amount"]}


# ------------------------------------------------------------------ the warm start's transcripts


def test_a_transcripts_replies_parse_back_to_the_strategies_actions():
    builders = reference_builders(TASK, 4, "warm")
    replies = StrategyReplies(("exploit", "call"), equity_samples=EQUITY)
    turns = reference_turns(builders, replies, valid_key=VALID_KEY)
    renderer = make_renderer(AGENT_MODEL)
    per_env = list(replies.actions.values())
    assert len(turns) == sum(len(a) for a in per_env) and len(per_env) == 4
    parsed = [_parsed_action(renderer, t.reply) for t in turns]
    chosen = [{"action": a["action"], "amount": a["amount"]} for acts in per_env for a in acts]
    assert parsed == chosen
    # the same strategies on the same rows through the other path (PokerEnv, play_rft) act alike and score
    # alike: env i plays strategy i % 2 reset with seed i, as play_rft resets row i with policy_seed + i
    for i, (builder, acts) in enumerate(zip(builders, per_env, strict=True)):
        policy = Exploit(samples=EQUITY) if i % 2 == 0 else AlwaysCall()
        (traj,) = play_rft(policy, [builder.row_id], hands=TASK.hands, policy_seed=i)
        assert [(t.action["action"], t.action["amount"]) for t in traj.transitions] == [
            (a["action"], a["amount"]) for a in acts
        ]
        record = builder.envs[0].record()
        assert record["hand_bb"] == traj.metrics["hand_bb"]
        assert math.isclose(record["reward"], rft_episode_rows([traj])[0]["reward_mean_instance"])


def test_warm_start_and_held_out_rows_are_not_study_rows():
    warm = {b.row_id for b in reference_builders(TASK, 8, "warm")}
    held = {b.row_id for b in reference_builders(TASK, 4, "held")}
    study = {r["input_metadata"]["row_id"] for r in TASK.dataset_rows()}
    assert warm and held and not (warm & held) and not (warm | held) & study


def test_a_reply_that_is_not_a_call_is_refused_never_trained_on():
    builders = reference_builders(TASK, 1, "warm")
    for bad in (
        {"role": "assistant", "content": "CALL"},  # no tool call
        act_message({"action": "CALL"}) | {"tool_calls": []},  # an empty call list
    ):
        with pytest.raises(ReferenceReplyError, match="did not read a reference reply as valid"):
            reference_turns(builders, lambda env, m=bad: m, valid_key=VALID_KEY)


def _fresh_env() -> PokerCookbookEnv:
    row = TASK.dataset_rows()[0]
    env = PokerCookbookEnv(row, make_renderer(AGENT_MODEL))
    run_sync(env.initial_observation())
    return env


ACTIONS = st.sampled_from(["FOLD", "CALL", "CHECK", "RAISE"])
AMOUNTS = st.none() | st.integers(0, 10**6)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action=ACTIONS, amount=AMOUNTS)
def test_any_action_round_trips_through_the_renderer_and_the_env(action, amount):
    env = _fresh_env()
    tokens = reply_tokens(env.renderer, env.messages(), act_message({"action": action, "amount": amount}))
    assert _parsed_action(env.renderer, tokens) == {"action": action, "amount": amount}
    assert is_valid_call(TASK, tokens, "stop")
    assert not is_valid_call(TASK, tokens[:-1], "length")  # cut at max_tokens before its stop token: refused


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=200).filter(lambda t: "<tool_call>" not in t))
def test_a_reply_without_a_call_is_never_a_valid_call(text):
    renderer = make_renderer(AGENT_MODEL)
    tokens = renderer.tokenizer.encode(text, add_special_tokens=False)
    end = renderer.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert not is_valid_call(TASK, [*tokens, end], "stop")
    assert not is_valid_call(TASK, tokens, "length")


def test_bad_warm_start_sizes_and_designs_are_one_line_errors():
    with pytest.raises(ValueError, match="must be >= 1"):
        WarmStartRows(rows=0)
    with pytest.raises(ValueError, match="unknown poker strategies"):
        StrategyReplies(("bluff",))
    with pytest.raises(ValueError, match="counts must be >= 1"):
        TinyLMDesign(warm_steps=0)
    with pytest.raises(ValueError, match="seeds must be distinct"):
        TinyLMDesign(seeds=(1, 1))


# ------------------------------------------------------------------ the study at a micro size


@pytest.fixture(scope="module")
def micro(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        for key in ("TINKER_API_KEY", "TINKER_BASE_URL"):  # the in-process service
            mp.delenv(key, raising=False)
        root = tmp_path_factory.mktemp("tiny") / "runs"
        return run_tiny_lm_study(MICRO, root), root


def test_the_micro_study_runs_every_stage(micro):
    study, root = micro
    assert not study.stopped and list(study.runs) == ["tiny_lm_seed0"]
    run = study.runs["tiny_lm_seed0"]
    assert run.finished and run.record.backend == "tinker" and run.record.experiment == TINY_LM_EXPERIMENT
    assert run.record.provider["trainer"]["task"]["base_model"] == study.warm_start.path
    assert study.warm_start.path == str(warm_start_dir(MICRO, root).resolve())
    assert [r["epoch"] for r in study.epoch_rows()] == list(range(MICRO.epochs))
    assert set(study.evaluation) == {*REFERENCES, WARM_BASE, TRAINED}
    assert all(len(rows) == MICRO.eval_rows for rows in study.evaluation.values())
    assert [r["policy"] for r in study.policy_rows()] == list(study.evaluation)
    assert study.cpu_seconds > 0 and study.warm_rows()[0]["step"] == MICRO.warm_steps
    assert study.reused == {"warm start": False, "tiny_lm_seed0": False}


def test_the_trained_policy_and_the_references_saw_the_same_cards(micro):
    study, _ = micro
    first_prompt = {
        label: {r["row_id"]: r["messages"][1]["content"] for r in recs}
        for label, recs in study.records.items()
    }
    prompts = list(first_prompt.values())
    assert all(p == prompts[0] for p in prompts) and len(prompts[0]) == MICRO.eval_rows
    assert all("Your hand: [" in text for text in prompts[0].values())  # the hole cards are in it
    hands = {label: {r["row_id"]: r["hand_id"] for r in recs} for label, recs in study.records.items()}
    assert all(h == hands["call"] for h in hands.values())
    # the references' rewards are what the PokerEnv path gives the same strategies on the same rows
    ids = [r["row_id"] for r in study.evaluation["call"]]
    for name, policy in (("call", AlwaysCall()), ("exploit", Exploit(samples=EQUITY))):
        expected = rft_episode_rows(play_rft(policy, ids, hands=MICRO.hands))
        got = [r["reward_mean_instance"] for r in study.evaluation[name]]
        assert got == pytest.approx([r["reward_mean_instance"] for r in expected])
    moved = {k: [dict(r) for r in v] for k, v in study.evaluation.items()}
    moved[TRAINED][0]["card_seed"] += 1
    with pytest.raises(ValueError, match="did not play the same deals"):
        same_deals(moved)


def test_the_contrasts_are_paired_differences_by_deal(micro):
    study, _ = micro
    rows = tiny_lm_contrasts(study, reps=500)
    assert {r["comparison"] for r in rows} == {f"{TRAINED} − {o}" for o in (*REFERENCES, WARM_BASE)}
    for other in (*REFERENCES, WARM_BASE):
        ref = {r["row_id"]: r for r in study.records[other]}
        diffs = np.array(
            [r["reward"] - ref[r["row_id"]]["reward"] for r in study.records[TRAINED]], dtype=float
        )
        overall = next(
            r for r in rows if r["comparison"] == f"{TRAINED} − {other}" and r["opponent"] == "all"
        )
        assert overall["deals"] == MICRO.eval_rows and overall["mean"] == pytest.approx(diffs.mean())
        assert (overall["better"], overall["worse"]) == (
            int((diffs > 1e-12).sum()),
            int((diffs < -1e-12).sum()),
        )
        assert overall["low"] <= overall["mean"] + 1e-9 and overall["high"] >= overall["mean"] - 1e-9


def test_a_group_with_equal_rewards_counts_as_zero_advantage(micro):
    study, _ = micro
    run = study.runs["tiny_lm_seed0"]
    for row in run.metrics():
        groups: dict[str, list[dict]] = {}
        for rec in run.rollouts(int(row["epoch"])):
            groups.setdefault(rec["row_id"], []).append(rec)
        equal = [
            g for g in groups.values() if max(r["reward"] for r in g) - min(r["reward"] for r in g) < 1e-12
        ]
        assert equal, "the micro model's calls are all refused, so its candidates' rewards are equal"
        assert row["zero_advantage_groups"] == len(equal)
        assert all(r["advantage"] == 0.0 for g in equal for r in g)


def test_the_study_stops_with_a_diagnosis_below_the_threshold(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    study = run_tiny_lm_study(dataclasses.replace(MICRO, min_valid_rate=1.01), root)
    assert study.stopped and not study.runs and not study.evaluation
    history = study.warm_rows()
    assert history and all(0.0 <= h["held-out valid-call rate"] <= 1.0 for h in history)
    assert study.warm_start.refused_examples and all(
        isinstance(e, str) for e in study.warm_start.refused_examples
    )
    assert RunStore(root).runs(TINY_LM_EXPERIMENT) == [] and tiny_lm_contrasts(study) == []


def test_with_two_seeds_the_seed_is_the_unit():
    from scipy import stats

    design = TinyLMDesign(seeds=(0, 1), eval_rows=3)
    ids = ["eval_s1000", "eval_s1001", "eval_s1002"]

    def rows(values):
        return [{"row_id": i, "reward_mean_instance": v} for i, v in zip(ids, values, strict=True)]

    evaluation = {
        "exploit": rows([1.0, 2.0, 3.0]), "call": rows([0.0, 0.0, 0.0]), WARM_BASE: rows([0.5, 0.5, 0.5]),
        f"{TRAINED} seed 0": rows([1.0, 1.0, 4.0]), f"{TRAINED} seed 1": rows([0.0, 2.0, 3.0]),
    }  # fmt: skip
    study = TinyLMStudy(design, None, runs={"a": None, "b": None}, evaluation=evaluation)
    out = {r["comparison"]: r for r in seed_contrasts(study)}
    per = np.array([2.0, 5.0 / 3.0])  # each seed's mean difference from call over the three deals
    call = out[f"{TRAINED} − call"]
    assert call["per seed"] == pytest.approx(per) and call["seeds above 0"] == 2 and call["seeds"] == 2
    low, high = stats.t.interval(0.95, df=1, loc=per.mean(), scale=stats.sem(per))
    assert (call["mean"], call["low"], call["high"]) == pytest.approx((per.mean(), low, high))
    exploit = out[f"{TRAINED} − exploit"]
    assert exploit["per seed"] == pytest.approx([0.0, -1.0 / 3.0]) and exploit["seeds above 0"] == 0
    assert out[f"{TRAINED} − {WARM_BASE}"]["per seed"] == pytest.approx(per - 0.5)
    assert seed_contrasts(dataclasses.replace(study, design=TinyLMDesign())) == []


def test_each_warm_start_setting_has_its_own_folder(tmp_path):
    base = warm_start_dir(MICRO, tmp_path)
    assert warm_start_dir(dataclasses.replace(MICRO, warm_steps=3), tmp_path) != base
    assert warm_start_dir(dataclasses.replace(MICRO, warm_rows=3), tmp_path) != base
    assert warm_start_dir(dataclasses.replace(MICRO, hands=2), tmp_path) != base
    # settings of the GRPO runs and of the gate leave the warm start as it was
    for change in ({"min_valid_rate": 0.9}, {"epochs": 3}, {"eval_rows": 5}, {"seeds": (4,)}, {"rows": 2}):
        assert warm_start_dir(dataclasses.replace(MICRO, **change), tmp_path) == base


@pytest.mark.slow
def test_a_second_call_reuses_the_warm_start_and_the_run_and_gives_the_same_evaluation(micro):
    study, root = micro
    with pytest.MonkeyPatch.context() as mp:
        for key in ("TINKER_API_KEY", "TINKER_BASE_URL"):
            mp.delenv(key, raising=False)
        again = run_tiny_lm_study(MICRO, root)
    assert again.reused == {"warm start": True, "tiny_lm_seed0": True}
    assert again.runs["tiny_lm_seed0"].path == study.runs["tiny_lm_seed0"].path
    assert again.evaluation == study.evaluation  # seeded sampling: the same episodes
