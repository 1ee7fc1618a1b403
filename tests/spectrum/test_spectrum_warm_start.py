"""The spectrum warm start's transcripts and judge (``rftlab.training.spectrum.warm_start``) and the generic
supervised warm start on them (``rftlab.training.agent_warm_start``), on the built-in tiny agent model."""

from __future__ import annotations

import asyncio
import json
import math
from functools import cache

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tinker_cookbook.supervised.common import datum_from_model_input_weights

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.launch.tinker import context_window
from rftlab.policies.spectrum.reference import RFT_POLICIES
from rftlab.rollout.spectrum.turns import turn_config
from rftlab.runs.paths import SPECS_DIR
from rftlab.training import agent_warm_start as aws
from rftlab.training.agent_warm_start import AgentWarmStartConfig, ReferenceReplyError, ReferenceTurn
from rftlab.training.cookbook_envs import make_renderer
from rftlab.training.local_tinker import LocalServiceClient
from rftlab.training.local_tinker.model import AGENT_MODEL
from rftlab.training.spectrum.cookbook_env import SpectrumCookbookConfig, SpectrumRLDataset
from rftlab.training.spectrum.warm_start import (
    WARM_SALT_SEED,
    WarmStartRows,
    is_valid_report,
    prepare_spectrum_base,
    spectrum_reference_turns,
    submit_message,
)

SCANS = 3


def arm_config(arm: str = "C", scans: int = SCANS) -> SpectrumCookbookConfig:
    spec = load_arm_spec(SPECS_DIR / f"spectrum_{arm}.json")
    return SpectrumCookbookConfig.from_arm_spec(spec, base_model=AGENT_MODEL, num_scans=scans)


@cache
def c_turns() -> tuple[ReferenceTurn, ...]:
    return tuple(spectrum_reference_turns([arm_config("C")], rows=2))


def reply_json(turn: ReferenceTurn) -> dict:
    text = make_renderer(AGENT_MODEL, "qwen3").tokenizer.decode(list(turn.reply))
    body = text.split("<tool_call>")[1].split("</tool_call>")[0]
    return json.loads(body)


def test_one_valid_call_per_scan_and_the_reference_policy_s_centres():
    turns = c_turns()
    assert len(turns) == 2 * SCANS  # every reply was valid: one model call per scan
    assert [t.tag.split(":")[1] for t in turns[::SCANS]] == ["memoryless", "accumulate"]
    # an independent oracle: the same row's band on the project env, the memoryless policy's first report
    row_id = turns[0].tag.split(":")[0]
    rows = SpectrumCookbookConfig(
        **{**arm_config("C").to_dict(), "row_prefix": "warm-weak-echo"}
    ).dataset_rows()
    (row,) = [r for r in rows if r["input_metadata"]["row_id"] == row_id]
    env = SpectrumRFTEnv(turn_config(row["input_metadata"]["dataset_info"]))
    salt = SpectrumCookbookConfig(seed=WARM_SALT_SEED).salt(0)
    obs = env.reset(row_id, salt=salt)
    expected = [round(f, 1) for f in RFT_POLICIES["memoryless"]().act(obs)]
    got = reply_json(turns[0])
    assert got["name"] == "submit_report"
    assert got["arguments"]["center_freqs"] == expected


def test_accumulate_reports_grow_and_prompts_are_the_env_s_windows():
    acc = c_turns()[SCANS:]
    sizes = [len(reply_json(t)["arguments"]["center_freqs"]) for t in acc]
    assert sizes == sorted(sizes) and sizes[-1] >= sizes[0]
    for t in acc:
        assert context_window(AGENT_MODEL) > len(t.prompt) + len(t.reply)


def test_a_reply_the_env_refuses_is_an_error_not_a_training_example():
    from tinker_cookbook.renderers.base import ToolCall

    cfg = arm_config("C")
    builders = SpectrumRLDataset(
        SpectrumCookbookConfig(**{**cfg.to_dict(), "group_size": 1, "rows": 1}), (0,)
    ).epoch_builders(0)

    def bogus(env):
        call = ToolCall(function=ToolCall.FunctionBody(name="bogus_tool", arguments="{}"))
        return {"role": "assistant", "content": "", "tool_calls": [call]}

    with pytest.raises(ReferenceReplyError, match="valid"):
        aws.reference_turns(builders, bogus, valid_key="valid_submit")


def test_datum_is_the_cookbook_s_next_token_datum():
    turn = c_turns()[1]
    tokens = list(turn.prompt) + list(turn.reply)
    weights = torch.tensor([0.0] * len(turn.prompt) + [1.0] * len(turn.reply))
    from tinker import types

    ref = datum_from_model_input_weights(types.ModelInput.from_ints(tokens), weights)
    ours = turn.datum()
    assert ours.model_input.to_ints() == ref.model_input.to_ints()
    for key in ("target_tokens", "weights"):
        assert ours.loss_fn_inputs[key].to_torch().tolist() == ref.loss_fn_inputs[key].to_torch().tolist()


@st.composite
def edited_replies(draw):
    reply = list(draw(st.sampled_from(c_turns())).reply)
    kind = draw(st.sampled_from(["delete", "insert", "truncate", "replace", "keep"]))
    i = draw(st.integers(0, len(reply) - 1))
    if kind == "delete":
        j = draw(st.integers(i, len(reply)))
        reply = reply[:i] + reply[j:]
    elif kind == "insert":
        reply = reply[:i] + draw(st.lists(st.integers(0, 1366), min_size=1, max_size=4)) + reply[i:]
    elif kind == "truncate":
        reply = reply[:i]
    elif kind == "replace":
        reply[i] = draw(st.integers(0, 1366))
    return reply


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited_replies())
def test_the_judge_agrees_with_the_cookbook_env_s_valid_submit(tokens):
    cfg = arm_config("C")
    builder = SpectrumRLDataset(
        SpectrumCookbookConfig(**{**cfg.to_dict(), "group_size": 1, "rows": 1}), (0,)
    ).epoch_builders(0)[0]
    env = asyncio.run(builder.make_envs())[0]
    result = asyncio.run(env.step(tokens))
    judged = is_valid_report(env.renderer, tokens, "stop", SpectrumRFTConfig(memory="echo", num_scans=SCANS))
    assert judged == (result.metrics["valid_submit"] == 1.0)


def test_submit_message_rounds_to_the_display():
    msg = submit_message([12.34, 100.06])
    assert json.loads(msg["tool_calls"][0].function.arguments) == {"center_freqs": [12.3, 100.1]}


def test_warm_start_learns_is_saved_and_reused(tmp_path, monkeypatch):
    out = tmp_path / "base"
    config = AgentWarmStartConfig(steps=6, eval_every=3, batch_size=2, max_tokens=40)
    rows = WarmStartRows(rows=1, held_out=1)
    first = prepare_spectrum_base(out, [arm_config("C", scans=2)], rows, config)
    assert [h["step"] for h in first.history] == [3, 6]
    assert all(0.0 <= h["valid_rate"] <= 1.0 for h in first.history)
    # learning: with 2 transcripts and batches of 2, every step sees the same batch, whose loss falls from
    # about a uniform guess over the vocabulary
    nll = [h["nll_per_token"] for h in first.history]
    assert nll[1] < nll[0] < math.log(1367)
    assert first.train_turns == 2 and (out / "warm_start.json").is_file()
    assert context_window(str(out)) == context_window(AGENT_MODEL)

    def no_training(*a, **k):
        raise AssertionError("a matching warm start must be reused, not retrained")

    original = aws.train_agent_warm_start
    monkeypatch.setattr(aws, "train_agent_warm_start", no_training)
    again = prepare_spectrum_base(out, [arm_config("C", scans=2)], rows, config)
    assert again.history == first.history and again.turns_sha256 == first.turns_sha256
    # the saved directory is a base model the Tinker API trains LoRAs on
    tc = LocalServiceClient(storage_dir=tmp_path / "svc").create_lora_training_client(
        base_model=str(out), rank=4, seed=0
    )
    tc = tc.result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    from tinker import types

    prompt = types.ModelInput.from_ints(list(c_turns()[0].prompt))
    res = sampler.sample(prompt, 1, types.SamplingParams(max_tokens=5, temperature=1.0, seed=1)).result()
    assert len(res.sequences[0].tokens) >= 1
    # another config is another model: not reused
    monkeypatch.setattr(aws, "train_agent_warm_start", original)
    shorter = AgentWarmStartConfig(steps=3, eval_every=3, batch_size=2, max_tokens=40)
    other = prepare_spectrum_base(out, [arm_config("C", scans=2)], rows, shorter)
    assert other.steps == 3
