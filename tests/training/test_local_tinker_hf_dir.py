"""``base_model`` as a local Hugging Face model directory (model and tokenizer loaded from it), and the
full-parameter client used by the warm start."""

from __future__ import annotations

import pytest
import torch
from tinker import types

from rftlab.training.local_tinker import LocalServiceClient, byte_tokenizer


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok = byte_tokenizer()
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny_hf")
    Qwen3ForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_hf_directory_trains_and_samples_like_the_saved_model(hf_dir):
    from tinker_cookbook import renderers
    from tinker_cookbook.tokenizer_utils import get_tokenizer
    from transformers import AutoModelForCausalLM

    sc = LocalServiceClient()
    tc = sc.create_lora_training_client(str(hf_dir), rank=4, seed=0).result()
    assert str(hf_dir) in {m.model_name for m in sc.get_server_capabilities().supported_models}
    renderer = renderers.get_renderer("qwen3_5_disable_thinking", get_tokenizer(str(hf_dir)))
    prompt = renderer.build_generation_prompt([{"role": "user", "content": "What is 2+3?"}])
    sampler = tc.save_weights_and_get_sampling_client().result()
    res = sampler.sample(prompt, 2, types.SamplingParams(max_tokens=5, temperature=0.0, stop=[])).result()
    toks = res.sequences[0].tokens
    # a fresh LoRA (B = 0) leaves the saved model's function unchanged: greedy tokens and logprobs match it
    ref = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    ids = prompt.to_ints() + toks
    with torch.no_grad():
        logp = torch.log_softmax(ref(input_ids=torch.tensor([ids])).logits[0], -1)
    expected = [float(logp[len(prompt.to_ints()) - 1 + t, tok]) for t, tok in enumerate(toks)]
    assert res.sequences[0].logprobs == pytest.approx(expected, abs=1e-5)
    assert all(int(logp[len(prompt.to_ints()) - 1 + t].argmax()) == tok for t, tok in enumerate(toks))
    ob = prompt.length - 1
    datum = types.Datum(
        model_input=prompt.append(types.EncodedTextChunk(tokens=toks[:-1])),
        loss_fn_inputs={"target_tokens": [0] * ob + toks, "weights": [0.0] * ob + [1.0] * len(toks)},
    )
    before = tc.forward([datum], "cross_entropy").result().metrics["loss:sum"]
    assert before == pytest.approx(-sum(expected), rel=1e-5)
    for _ in range(3):
        tc.forward_backward([datum], "cross_entropy").result()
        tc.optim_step(types.AdamParams(learning_rate=0.01)).result()
    assert tc.forward([datum], "cross_entropy").result().metrics["loss:sum"] < before


def test_full_parameter_client_trains_every_weight_and_saves_a_loadable_directory(hf_dir, tmp_path):
    sc = LocalServiceClient()
    tc = sc.create_full_training_client(str(hf_dir), seed=0).result()
    n_weights = sum(p.numel() for p in tc.model.parameters())
    assert sum(t.numel() for t in tc.lora_state().values()) == n_weights
    tok = tc.get_tokenizer()
    ids = tok.encode("3+4=7 \\boxed{7}")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * (len(ids) - 1)},
    )
    before = tc.forward([datum], "cross_entropy").result().metrics["loss:sum"]
    for _ in range(5):
        tc.forward_backward([datum], "cross_entropy").result()
        tc.optim_step(types.AdamParams(learning_rate=0.01)).result()
    after = tc.forward([datum], "cross_entropy").result().metrics["loss:sum"]
    assert after < before
    tc.model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    tc2 = sc.create_lora_training_client(str(tmp_path), rank=2, seed=0).result()
    assert tc2.forward([datum], "cross_entropy").result().metrics["loss:sum"] == pytest.approx(
        after, rel=1e-5
    )


def test_unknown_base_model_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="neither a built-in"):
        LocalServiceClient().create_lora_training_client("Qwen/Qwen3.5-2B", rank=4).result()
    with pytest.raises(ValueError, match="no config.json"):
        LocalServiceClient().create_lora_training_client(str(tmp_path), rank=4).result()
