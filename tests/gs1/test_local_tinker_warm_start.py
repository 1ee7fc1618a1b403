"""The local task's supervised warm start: datum layout, the cached base directory, and (slow) that the
warm-started base lands in the GS1 spec's activation window when the RL loop's fresh LoRA samples it."""

from __future__ import annotations

import json

import pytest
from tinker import types

from rftlab.envs.gs1 import QUESTION_SUFFIX, reward, train_problems
from rftlab.training.gs1.warm_start import (
    MANIFEST,
    WarmStartConfig,
    build_prompt,
    prepare_base_model,
    renderer_for,
    response_text,
    sampled_reward,
    sft_datum,
)
from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient

RENDERER = "qwen3_5_disable_thinking"


def test_sft_datum_is_the_prompt_plus_the_weighted_solution_and_stop_token():
    renderer = renderer_for(TINY_MODEL, RENDERER)
    problem = train_problems(1, seed=3)[0]
    datum = sft_datum(renderer, problem)
    tok = renderer.tokenizer
    prompt = build_prompt(renderer, problem).to_ints()
    text = tok.decode(prompt)
    assert text.startswith("<|im_start|>user\n" + problem.question + QUESTION_SUFFIX + "<|im_end|>")
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    response = tok.encode(problem.solution, add_special_tokens=False) + [
        tok.convert_tokens_to_ids("<|im_end|>")
    ]
    assert datum.model_input.to_ints() == prompt + response[:-1]
    targets = datum.loss_fn_inputs["target_tokens"].tolist()
    weights = datum.loss_fn_inputs["weights"].tolist()
    n_prompt = len(prompt) - 1
    assert targets[n_prompt:] == response and weights == [0.0] * n_prompt + [1.0] * len(response)
    # the renderer parses the target back to the solution line, which the grader accepts
    assert reward(response_text(renderer, response), problem.final) == 1.0


class _Scripted:
    """A sampler answering from a fixed list of texts (to check ``sampled_reward``'s bookkeeping)."""

    def __init__(self, tok, texts):
        self.tok, self.texts, self.i = tok, texts, 0

    def sample(self, prompt, num_samples, sampling_params):
        from rftlab.training.local_tinker import LocalFuture

        text = self.texts[self.i]
        self.i += 1
        toks = self.tok.encode(text) + [self.tok.convert_tokens_to_ids("<|im_end|>")]
        seq = types.SampledSequence(
            stop_reason="stop", sequence_id="x", _tokens_list=toks, _logprobs_list=[0.0] * len(toks)
        )
        return LocalFuture.done(types.SampleResponse(sequences=[seq]))


def test_sampled_reward_grades_each_answer():
    renderer = renderer_for(TINY_MODEL, RENDERER)
    problems = train_problems(4, seed=5)
    texts = [
        problems[0].solution,
        "no box",
        f"\\boxed{{{int(problems[2].final) + 1}}}",
        f"x \\boxed{{{problems[3].final}}}",
    ]
    got = sampled_reward(
        _Scripted(renderer.tokenizer, texts), renderer, problems, temperature=1.0, max_tokens=8, seed=0
    )
    assert got == pytest.approx(0.5)


def test_prepare_base_model_writes_a_loadable_directory_and_reuses_it(tmp_path):
    cfg = WarmStartConfig(max_steps=2, eval_every=1, eval_problems=4, batch_size=8, target_reward=1.1)
    out = tmp_path / "base"
    res = prepare_base_model(out, cfg)
    assert res.steps == 2 and not res.reached_target and len(res.history) == 2
    record = json.loads((out / MANIFEST).read_text())
    assert record["config"]["max_steps"] == 2 and record["path"] == str(out.resolve())
    again = prepare_base_model(out, cfg)  # same config: reused, not retrained
    assert again.seconds == res.seconds and again.history == res.history
    sc = LocalServiceClient()
    tc = sc.create_lora_training_client(res.path, rank=4, seed=0).result()
    assert res.path in {m.model_name for m in sc.get_server_capabilities().supported_models}
    assert isinstance(tc.get_tokenizer().encode("1+2"), list)


@pytest.mark.slow
def test_warm_started_base_lands_in_the_activation_window(tmp_path):
    """The cheap version of the study's pilot gate: sampled reward (temperature 1, fresh seed-0 LoRA on
    the warm-started base, 64 train prompts the warm start never checked on) within [0.1, 0.9]."""
    cfg = WarmStartConfig(target_reward=0.2, eval_problems=64, eval_every=20)
    res = prepare_base_model(tmp_path / "base", cfg)
    assert res.reached_target and 0.2 <= res.final_reward
    sc = LocalServiceClient()
    tc = sc.create_lora_training_client(res.path, rank=32, seed=0).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    renderer = renderer_for(res.path, RENDERER)
    pilot = sampled_reward(
        sampler, renderer, train_problems(64, seed=0), temperature=1.0, max_tokens=20, seed=0
    )
    assert 0.1 <= pilot <= 0.9


def test_warm_start_is_deterministic(tmp_path):
    cfg = WarmStartConfig(max_steps=3, eval_every=3, eval_problems=4, batch_size=8, target_reward=1.1)
    a = prepare_base_model(tmp_path / "a", cfg)
    b = prepare_base_model(tmp_path / "b", cfg)
    assert a.history == b.history
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (
        tmp_path / "b" / "model.safetensors"
    ).read_bytes()
