"""``rftlab serve tinker`` driven by the unmodified tinker 0.38 SDK (only its public API on the client side).

The numbers are checked against independent computations: sampled logprobs against ``compute_logprobs`` of
the same tokens, ``cross_entropy`` against -Σ w·logp of the targets, ``importance_sampling`` against
-Σ exp(logp - sampler logp)·A (with a bfloat16 sampler, so the ratios are not 1), Adam against the
in-process client, and save → load → sample against the live weights.
"""

from __future__ import annotations

import math
import stat
import threading
from dataclasses import replace

import httpx
import numpy as np
import pytest
import tinker
import torch
from tinker import types
from tinker_helpers import advantage_weighted, sft_datum

from rftlab.runs.serving import is_loopback
from rftlab.training.local_tinker import TINY_MODEL, LocalServiceClient
from rftlab.training.local_tinker.server import (
    ServeConfig,
    ServeError,
    ServerThread,
    client_config,
    make_private,
    resolve_keys,
)
from rftlab.training.local_tinker.service import Log

KEY = "tml-local-tests"


@pytest.fixture(scope="module")
def bf16_server(tmp_path_factory):
    config = ServeConfig(
        port=0,
        storage=tmp_path_factory.mktemp("bf16"),
        sampler_dtype="bfloat16",
        log_level="warning",
        api_keys=[KEY],
    )
    with ServerThread(config) as srv:
        yield srv


@pytest.fixture(scope="module")
def trained(sc):
    """A client whose LoRA ``B`` matrices are non-zero (one SFT step), so every logprob depends on them."""
    tc = sc.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result()
    tc.forward_backward(
        [sft_datum(tc.get_tokenizer(), "Sam has 3 pens. \\boxed{3}")], "cross_entropy"
    ).result()
    tc.optim_step(types.AdamParams(learning_rate=0.05)).result()
    return tc


def _is_datum(prompt: types.ModelInput, toks, lps, adv: float) -> types.Datum:
    ob = prompt.length - 1
    return types.Datum(
        model_input=prompt.append(types.EncodedTextChunk(tokens=list(toks[:-1]))),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.array([0] * ob + list(toks), dtype=np.int64)),
            "logprobs": types.TensorData.from_numpy(np.array([0.0] * ob + list(lps), dtype=np.float32)),
            "advantages": types.TensorData.from_numpy(
                np.array([0.0] * ob + [adv] * len(toks), dtype=np.float32)
            ),
        },
    )


def _prompt(tc, text="Ann has 7 apples.") -> types.ModelInput:
    return types.ModelInput.from_ints(tc.get_tokenizer().encode(text))


# ------------------------------------------------------------------------------------------ done means


def test_sample_logprobs_equal_compute_logprobs_of_the_same_tokens(trained):
    sampler = trained.save_weights_and_get_sampling_client().result()
    prompt = _prompt(trained)
    res = sampler.sample(
        prompt, 4, types.SamplingParams(max_tokens=8, temperature=1.0, stop=[], seed=0)
    ).result()
    assert len({tuple(s.tokens) for s in res.sequences}) > 1
    for seq in res.sequences:
        assert isinstance(seq.sequence_id, str) and seq.sequence_id  # stamped from the submission
        full = sampler.compute_logprobs(prompt.append(types.EncodedTextChunk(tokens=seq.tokens))).result()
        assert full[0] is None and len(full) == prompt.length + len(seq.tokens)
        assert full[-len(seq.tokens) :] == pytest.approx(seq.logprobs, abs=2e-5)


def _prompt_logprobs_both_ways(sampler, tok, burst: bool):
    """Each prompt's ``compute_logprobs`` beside a sample request of it with ``include_prompt_logprobs`` (and
    the same request without it, to show the flag leaves the sampled tokens alone).

    ``burst``: GS1's request pattern (issue 35), many prompts of mixed lengths in flight at once. The
    in-process client batches a burst the same way every time. The server batches what arrives within a
    few milliseconds, so under load a burst can split differently from one call to the next, and a
    prompt's forward pass then runs beside other prompts. Its last bits depend on that company (padding
    width), so over HTTP the requests go one at a time: every batch is then one request."""
    prompts = [
        types.ModelInput.from_ints(tok.encode(f"Item {i}: " + "Ann has 7 apples. " * (i % 5)))
        for i in range(24 if burst else 8)
    ]
    params = [
        types.SamplingParams(max_tokens=6, temperature=1.0, stop=[], seed=k) for k in range(len(prompts))
    ]
    calls = [lambda p=p: sampler.compute_logprobs(p) for p in prompts]
    calls += [
        lambda p=p, q=q: sampler.sample(p, 1, q, include_prompt_logprobs=True)
        for p, q in zip(prompts, params, strict=True)
    ]
    calls += [lambda p=p, q=q: sampler.sample(p, 1, q) for p, q in zip(prompts, params, strict=True)]
    if burst:
        futures = [call() for call in calls]
        results = [f.result() for f in futures]
    else:
        results = [call().result() for call in calls]
    n = len(prompts)
    return results[:n], results[n : 2 * n], results[2 * n :]


@pytest.mark.parametrize("where", ["http", "in-process"])
def test_sample_prompt_logprobs_equal_compute_logprobs_bit_for_bit(trained, where, tmp_path):
    """The SDK's ``compute_logprobs`` is a sample request with ``include_prompt_logprobs`` (tinker 0.38's
    ``SamplingClient.compute_logprobs``); the served and in-process local backends give the two the same
    bits, so GS1 takes its feature φ from the first sample of each prompt and sends no separate request."""
    if where == "http":
        sampler, tok = trained.save_weights_and_get_sampling_client().result(), trained.get_tokenizer()
    else:
        local = LocalServiceClient(storage_dir=tmp_path)
        tc = local.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result()
        sampler, tok = tc.save_weights_and_get_sampling_client().result(), tc.get_tokenizer()
    lps, with_lp, without = _prompt_logprobs_both_ways(sampler, tok, burst=where == "in-process")
    for expected, a, b in zip(lps, with_lp, without, strict=True):
        assert a.prompt_logprobs == expected  # exact: equal lists of Python floats (None first)
        assert expected[0] is None and all(isinstance(x, float) for x in expected[1:])
        assert b.prompt_logprobs is None
        assert [s.tokens for s in a.sequences] == [s.tokens for s in b.sequences]


def test_cross_entropy_loss_sum_is_minus_the_weighted_target_logprobs(trained):
    tok = trained.get_tokenizer()
    texts = ["Ben has 12 cards. \\boxed{12}", "Add 4 and 5. \\boxed{9}<|im_end|>"]
    data, expected = [], 0.0
    sampler = trained.save_weights_and_get_sampling_client().result()  # same weights as the trainer
    for k, text in enumerate(texts):
        ids = tok.encode(text)
        weights = [0.0] * 4 + [1.0 + k] * (len(ids) - 5)
        data.append(sft_datum(tok, text, weights))
        lps = sampler.compute_logprobs(types.ModelInput.from_ints(ids)).result()[
            1:
        ]  # logp(ids[t+1] | ids[:t+1])
        expected -= sum(w * lp for w, lp in zip(weights, lps, strict=True))
    out = trained.forward(data, "cross_entropy").result()
    assert out.metrics["loss:sum"] == pytest.approx(expected, rel=1e-5)
    fb = trained.forward_backward(data, "cross_entropy").result()  # gradients accumulate, weights unchanged
    assert fb.metrics["loss:sum"] == pytest.approx(expected, rel=1e-5)
    for d, o in zip(data, out.loss_fn_outputs, strict=True):
        assert o["logprobs"].shape == [d.model_input.length]


def test_importance_sampling_with_a_mismatched_sampler(bf16_server):
    sc = tinker.ServiceClient(base_url=bf16_server.base_url, api_key=KEY)
    tc = sc.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=1).result()
    tc.forward_backward(
        [sft_datum(tc.get_tokenizer(), "Lee has 4 kites. \\boxed{4}")], "cross_entropy"
    ).result()
    tc.optim_step(types.AdamParams(learning_rate=0.05)).result()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = _prompt(tc, "Lee has 4 kites.")
    res = sampler.sample(
        prompt, 4, types.SamplingParams(max_tokens=6, temperature=1.0, stop=[], seed=2)
    ).result()
    advs = [1.0, -0.5, 0.25, 2.0]
    data = [_is_datum(prompt, s.tokens, s.logprobs, a) for s, a in zip(res.sequences, advs, strict=True)]
    # the trainer's logprobs of the sampled tokens, from a cross_entropy forward of the same sequences
    ce = advantage_weighted(data)
    trainer = tc.forward(ce, "cross_entropy").result()
    expected, ratios = 0.0, []
    ob = prompt.length - 1
    for d, o in zip(data, trainer.loss_fn_outputs, strict=True):
        logp = o["logprobs"].tolist()[ob:]
        slp = d.loss_fn_inputs["logprobs"].tolist()[ob:]
        a = d.loss_fn_inputs["advantages"].tolist()[ob:]
        r = [math.exp(x - y) for x, y in zip(logp, slp, strict=True)]
        ratios += r
        expected -= sum(ri * ai for ri, ai in zip(r, a, strict=True))
    assert max(abs(r - 1) for r in ratios) > 1e-3
    out = tc.forward_backward(data, "importance_sampling").result()
    assert out.metrics["loss:sum"] == pytest.approx(expected, rel=1e-5, abs=1e-6)
    sc.close("success").result()


def test_importance_ratio_is_one_when_sampler_and_trainer_agree(trained):
    sampler = trained.save_weights_and_get_sampling_client().result()
    prompt = _prompt(trained)
    res = sampler.sample(
        prompt, 2, types.SamplingParams(max_tokens=6, temperature=1.0, stop=[], seed=9)
    ).result()
    data = [_is_datum(prompt, s.tokens, s.logprobs, 1.0) for s in res.sequences]
    out = trained.forward(data, "importance_sampling").result()
    n_tokens = sum(len(s.tokens) for s in res.sequences)
    assert out.metrics["loss:sum"] == pytest.approx(-n_tokens, abs=1e-3)  # -Σ 1·A with A = 1


def test_adam_steps_match_the_in_process_client(sc, server, tmp_path):
    hp = types.AdamParams(
        learning_rate=0.01, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip_norm=0.5
    )
    remote = sc.create_lora_training_client(base_model=TINY_MODEL, rank=2, seed=3).result()
    local = (
        LocalServiceClient(storage_dir=tmp_path)
        .create_lora_training_client(TINY_MODEL, rank=2, seed=3)
        .result()
    )
    tok = remote.get_tokenizer()
    batches = [
        [sft_datum(tok, "Mia has 9 cups. \\boxed{9}")],
        [sft_datum(tok, "Jo has 1 cat. \\boxed{1}"), sft_datum(tok, "Bo has 8 jars.")],
    ]
    for step in range(3):
        data = batches[step % 2]
        fb, op = remote.forward_backward(data, "cross_entropy"), remote.optim_step(hp)
        r_loss, r_norm = fb.result().metrics["loss:sum"], op.result().metrics["grad_norm:mean"]
        l_loss = local.forward_backward(data, "cross_entropy").result().metrics["loss:sum"]
        l_norm = local.optim_step(hp).result().metrics["grad_norm:mean"]
        assert r_loss == pytest.approx(l_loss, abs=1e-6, rel=1e-6)
        assert r_norm == pytest.approx(l_norm, abs=1e-6, rel=1e-6)
    probe = [sft_datum(tok, "Lia has 6 mugs. \\boxed{6}")]
    r_lp = remote.forward(probe, "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    l_lp = local.forward(probe, "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    assert r_lp == pytest.approx(l_lp, abs=1e-6)
    # and the weights themselves: the server's checkpoint of them against the in-process client's
    path = remote.save_weights_for_sampler("adam-final").result().path
    stored = server.service.backend.checkpoints.load(path)["lora"]
    for name, t in local.lora_state().items():
        assert torch.allclose(stored[name].cpu(), t, atol=1e-6), name


def test_save_load_sample_reproduces(sc, server, trained):
    greedy = types.SamplingParams(max_tokens=8, temperature=0.0, stop=[])
    prompt = _prompt(trained, "Kim has 3 cups.")
    live = trained.save_weights_and_get_sampling_client().result().sample(prompt, 1, greedy).result()
    path = trained.save_weights_for_sampler("reproduce", ttl_seconds=3600).result().path
    assert path.startswith("tinker://") and "/sampler_weights/" in path
    for client in (sc, tinker.ServiceClient(base_url=server.base_url, api_key=KEY)):  # this and a new session
        loaded = client.create_sampling_client(model_path=path).result()
        again = loaded.sample(prompt, 1, greedy).result()
        assert again.sequences[0].tokens == live.sequences[0].tokens
        assert again.sequences[0].logprobs == pytest.approx(live.sequences[0].logprobs, abs=1e-6)
    state = trained.save_state("reproduce-state", ttl_seconds=3600).result().path
    resumed = sc.create_training_client_from_state_with_optimizer(state).result()
    assert resumed.model_id != trained.model_id and resumed.get_info().lora_rank == 4
    probe = [sft_datum(trained.get_tokenizer(), "Ada has 2 hens.")]
    a = trained.forward(probe, "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    b = resumed.forward(probe, "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    assert a == b
    weights_only = sc.create_training_client_from_state(state).result()
    assert weights_only.forward(probe, "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist() == a


def test_rest_client_and_get_info(server, trained):
    rest = tinker.RestClient(base_url=server.base_url, api_key=KEY)
    models = {m.model_name: m for m in rest.get_server_capabilities().result().supported_models}
    assert models[TINY_MODEL].trainable and models[TINY_MODEL].sampleable
    info = trained.get_info()
    assert info.model_data.model_name == TINY_MODEL and info.is_lora and info.lora_rank == 4
    assert info.model_id == trained.model_id and ":train:" in info.model_id
    run = rest.get_training_run(trained.model_id).result()
    assert run.base_model == TINY_MODEL and run.lora_rank == 4
    path = trained.save_state("listed", ttl_seconds=7200, user_metadata={"step": "1"}).result().path
    listed = {c.tinker_path: c for c in rest.list_checkpoints(trained.model_id).result().checkpoints}
    assert listed[path].checkpoint_type == "training" and listed[path].user_metadata == {"step": "1"}
    assert listed[path].expires_at is not None
    rest.delete_checkpoint_from_tinker_path(path).result()
    assert path not in {c.tinker_path for c in rest.list_checkpoints(trained.model_id).result().checkpoints}
    tok = trained.get_tokenizer()  # AutoTokenizer.from_pretrained(tokenizer_id): offline
    assert tok.decode(tok.encode("Ann has 7 apples.")) == "Ann has 7 apples."


# ------------------------------------------------------------------------------------------ errors


def test_refusals_arrive_as_the_sdks_typed_errors(sc, trained):
    datum = sft_datum(trained.get_tokenizer(), "Tom has 5 hats.")
    with pytest.raises(tinker.RequestFailedError, match="'gspo' is not supported") as caught:
        trained.forward_backward([datum], "gspo").result()
    assert caught.value.category == types.RequestErrorCategory.User
    with pytest.raises(tinker.RequestFailedError, match="LoRA rank must be"):
        sc.create_lora_training_client(base_model=TINY_MODEL, rank=0).result()
    with pytest.raises(tinker.RequestFailedError, match="not served here"):
        sc.create_lora_training_client(base_model="Qwen/Qwen3.5-2B", rank=4).result()
    with pytest.raises(tinker.RequestFailedError, match="not found"):
        sc.create_training_client_from_state("tinker://nobody:train:0/weights/missing").result()
    with pytest.raises(tinker.NotFoundError, match="not found"):
        sc.create_sampling_client(model_path="tinker://nobody:train:0/sampler_weights/missing").result()
    with pytest.raises(tinker.BadRequestError, match="not a checkpoint path"):
        sc.create_sampling_client(model_path="tinker://only-two/parts").result()
    bad = types.Datum(
        model_input=datum.model_input,
        loss_fn_inputs={**datum.loss_fn_inputs, "advantages": datum.loss_fn_inputs["weights"]},
    )
    with pytest.raises(tinker.RequestFailedError, match="extra \\['advantages'\\]"):
        trained.forward([bad], "cross_entropy").result()
    with pytest.raises(ValueError, match="No data provided"):  # the SDK's own, before any request
        trained.forward_backward([], "cross_entropy")
    with pytest.raises(tinker.RequestFailedError, match="between 3600"):
        trained.save_state("short-ttl", ttl_seconds=60).result()
    # the client still works after every refusal
    assert trained.forward([datum], "cross_entropy").result().metrics["loss:sum"] > 0


def test_malformed_and_unknown_requests_get_http_errors_not_tracebacks(server):
    with httpx.Client(base_url=server.base_url, headers={"X-API-Key": KEY}) as http:
        r = http.post("/api/v1/create_model", content=b"{not json")
        assert r.status_code == 400 and "valid JSON" in r.json()["detail"]
        r = http.post("/api/v1/create_model", json={"session_id": "s"})
        assert r.status_code == 400 and "CreateModelRequest" in r.json()["detail"]
        r = http.post("/api/v1/forward_backward", json={"model_id": "m"})
        assert r.status_code == 415 and "protobuf" in r.json()["detail"]
        r = http.post(
            "/api/v1/forward_backward",
            content=b"\xff\x00garbage",
            headers={"Content-Type": "application/x-protobuf"},
        )
        assert r.status_code == 400
        r = http.post("/api/v1/retrieve_future", json={"request_id": "req-unknown"})
        assert r.status_code == 404 and "unknown request id" in r.json()["detail"]
        r = http.get("/api/v1/no/such/thing")
        assert r.status_code == 404 and "no such endpoint" in r.json()["detail"]
        assert http.get("/api/v1/healthz", headers={"X-API-Key": ""}).status_code == 401
        assert "Traceback" not in r.text
    rest = tinker.RestClient(base_url=server.base_url, api_key=KEY)
    with pytest.raises(tinker.NotFoundError):
        rest.get_audit_log().result()  # an endpoint the local service does not implement


def test_the_client_config_switches_off_what_the_server_does_not_do():
    cfg = types.ClientConfigResponse.model_validate(client_config())
    assert not cfg.pjwt_auth_enabled and not cfg.parallel_fwdbwd_chunks
    assert not cfg.proto_compress_fwdbwd and not cfg.sample_use_retrieve_futures


# ------------------------------------------------------------------------------------------ keys


def test_api_key_rules(tmp_path, monkeypatch):
    """No key given: one is generated into the storage folder (0600) and kept for the next start; a key
    in the environment variable wins; a keys file gives one identity per key; others are refused."""
    monkeypatch.delenv("RFTLAB_T_KEY", raising=False)
    storage = tmp_path / "s"
    make_private(storage)
    config = ServeConfig(port=0, storage=storage, api_key_env="RFTLAB_T_KEY")
    keys, generated = resolve_keys(config, storage)
    key_file = storage / "api_key"
    key = key_file.read_text().strip()
    assert (
        generated
        and key.startswith("tml-")
        and len(key) > 40
        and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    )
    assert keys.accepts(key) and not keys.accepts("tml-whatever") and not keys.accepts(None)
    again, generated = resolve_keys(config, storage)
    assert not generated and again.accepts(key)
    monkeypatch.setenv("RFTLAB_T_KEY", "tml-the-one-key")
    exact, _ = resolve_keys(config, storage)
    assert (
        exact.accepts("tml-the-one-key") and not exact.accepts(key) and not exact.accepts("tml-another-key")
    )
    monkeypatch.setenv("RFTLAB_T_KEY", "no-prefix")
    with pytest.raises(ServeError, match="must start with 'tml-'"):
        resolve_keys(config, storage)
    monkeypatch.delenv("RFTLAB_T_KEY")
    key_file.chmod(0o644)
    with pytest.raises(ServeError, match="readable by others"):
        resolve_keys(config, storage)
    group = tmp_path / "keys"
    group.write_text("# the group\ntml-alice-key-0001\n\ntml-bob-key-00002\n")
    group.chmod(0o600)
    shared, _ = resolve_keys(replace(config, keys_file=group), storage)
    assert shared.owner("tml-alice-key-0001") != shared.owner("tml-bob-key-00002")
    assert shared.owner("tml-alice-key-0001") and not shared.accepts(key)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


def test_a_server_with_a_key_accepts_exactly_it_and_never_logs_it(tmp_path, monkeypatch):
    import io

    secret = "tml-secret-7d4c2b-" + "q" * 12
    monkeypatch.setenv("RFTLAB_T_KEY", secret)
    stream = io.StringIO()
    config = ServeConfig(port=0, storage=tmp_path / "store", api_key_env="RFTLAB_T_KEY", log_level="debug")
    with ServerThread(config, Log(stream, "debug")) as srv:
        with pytest.raises(tinker.AuthenticationError):
            tinker.ServiceClient(base_url=srv.base_url, api_key="tml-wrong").create_lora_training_client(
                base_model=TINY_MODEL, rank=2
            ).result()
        sc = tinker.ServiceClient(base_url=srv.base_url, api_key=secret)
        tc = sc.create_lora_training_client(base_model=TINY_MODEL, rank=2).result()
        tc.save_state("k", user_metadata={"note": "no key here"}).result()
        sc.close("success").result()
    log = stream.getvalue()
    assert '"status":401' in log and '"event":"session_created"' in log
    assert secret not in log and secret[4:] not in log
    files = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert files and not [p for p in files if secret.encode() in p.read_bytes()]


# ------------------------------------------------------------------------------------ concurrency


def test_several_clients_at_once_get_what_they_would_get_alone(server):
    def work(seed: int) -> tuple[float, list[int]]:
        sc = tinker.ServiceClient(base_url=server.base_url, api_key=KEY)
        tc = sc.create_lora_training_client(base_model=TINY_MODEL, rank=2, seed=seed).result()
        tok = tc.get_tokenizer()
        fb = tc.forward_backward([sft_datum(tok, f"Pat has {seed} owls. \\boxed{{{seed}}}")], "cross_entropy")
        tc.optim_step(types.AdamParams(learning_rate=0.05)).result()
        sampler = tc.save_weights_and_get_sampling_client().result()
        res = sampler.sample(_prompt(tc), 2, types.SamplingParams(max_tokens=5, stop=[], seed=seed)).result()
        sc.close("success").result()
        return fb.result().metrics["loss:sum"], res.sequences[1].tokens

    alone = [work(s) for s in (1, 2, 3)]
    together: dict[int, tuple[float, list[int]]] = {}
    threads = [threading.Thread(target=lambda s=s: together.__setitem__(s, work(s))) for s in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert [together[s] for s in (1, 2, 3)] == alone


def test_sampled_logprobs_option_reports_the_distribution_sampled_from(tmp_path):
    """``--sampled-logprobs sampling``: a sampled token's logprob is that of the tempered distribution
    (log_softmax(logits / T)), computed here independently from the model's logprobs of every token."""
    config = ServeConfig(
        port=0, storage=tmp_path, sampled_logprobs="sampling", log_level="warning", api_keys=[KEY]
    )
    with ServerThread(config) as srv:
        client = tinker.ServiceClient(base_url=srv.base_url, api_key=KEY)
        try:
            tc = client.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result()
            tok = tc.get_tokenizer()
            sampler = tc.save_weights_and_get_sampling_client().result()
            prompt = types.ModelInput.from_ints(tok.encode("Kim has"))
            params = types.SamplingParams(max_tokens=1, temperature=0.5, seed=4, stop=[])
            seq = sampler.sample(prompt, 1, params).result().sequences[0]
        finally:
            client.close("success").result()
    local = LocalServiceClient(storage_dir=tmp_path / "twin")
    twin = local.create_lora_training_client(base_model=TINY_MODEL, rank=4, seed=0).result()
    host = twin._host
    with torch.no_grad():
        logits = host.model(input_ids=torch.tensor([prompt.to_ints()])).logits[0, -1].double()
    expected = torch.log_softmax(logits / 0.5, dim=-1)[seq.tokens[0]].item()
    model_lp = torch.log_softmax(logits, dim=-1)[seq.tokens[0]].item()
    assert seq.logprobs[0] == pytest.approx(expected, abs=1e-4)
    assert abs(seq.logprobs[0] - model_lp) > 1e-3
