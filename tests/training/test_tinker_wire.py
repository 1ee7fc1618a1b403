"""The server's protobuf codec against the tinker SDK's own: every request the SDK can encode decodes to
the same datums, and every response the server encodes reads back, through the SDK's decoders, as what was
encoded (hypothesis). Garbage bodies are refused with a ``WireError``, never a crash."""

from __future__ import annotations

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from tinker import types
from tinker.proto.request_conv import forward_backward_request_to_proto
from tinker.proto.response_conv import deserialize_forward_backward_output, deserialize_sample_response

from rftlab.training.local_tinker.wire import (
    WireError,
    decode_forward_backward,
    encode_forward_backward_output,
    encode_sample_response,
)

tokens = st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=12)
floats = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@st.composite
def datums(draw):
    chunks = draw(st.lists(tokens, min_size=1, max_size=3))
    n = sum(len(c) for c in chunks)
    kind = draw(st.sampled_from(["cross_entropy", "importance_sampling"]))
    ints = np.array(draw(st.lists(st.integers(-(2**40), 2**40), min_size=n, max_size=n)), dtype=np.int64)
    inputs = {"target_tokens": types.TensorData.from_numpy(ints)}
    names = ["weights"] if kind == "cross_entropy" else ["logprobs", "advantages"]
    for name in names:
        vals = np.array(draw(st.lists(floats, min_size=n, max_size=n)), dtype=np.float32)
        inputs[name] = types.TensorData.from_numpy(vals)
    model_input = types.ModelInput(chunks=[types.EncodedTextChunk(tokens=c) for c in chunks])
    return types.Datum(model_input=model_input, loss_fn_inputs=inputs)


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(datums(), min_size=1, max_size=4),
    seq=st.integers(1, 2**31 - 1),
    forward_only=st.booleans(),
    config=st.none()
    | st.dictionaries(st.sampled_from(["clip_low", "clip_high", "mode"]), floats | st.text(max_size=5)),
    compress=st.booleans(),
)
def test_requests_the_sdk_encodes_decode_to_the_same_datums(data, seq, forward_only, config, compress):
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(
            data=data, loss_fn="importance_sampling", loss_fn_config=config
        ),
        model_id="s:train:0",
        seq_id=seq,
    )
    msg = forward_backward_request_to_proto(request)
    msg.forward_only = forward_only
    body = msg.SerializeToString()
    if compress:
        body = zstandard.ZstdCompressor().compress(body)
    call = decode_forward_backward(body, "zstd" if compress else None)
    assert (call.model_id, call.seq_id, call.loss_fn, call.forward_only) == (
        "s:train:0",
        seq,
        "importance_sampling",
        forward_only,
    )
    expected = {k: v if isinstance(v, str) else pytest.approx(v) for k, v in (config or {}).items()}
    assert call.loss_fn_config == (expected or None)
    for got, want in zip(call.data, data, strict=True):
        assert got.model_input.to_ints() == want.model_input.to_ints()
        assert set(got.loss_fn_inputs) == set(want.loss_fn_inputs)
        for key, tensor in want.loss_fn_inputs.items():
            assert got.loss_fn_inputs[key].dtype == tensor.dtype
            np.testing.assert_array_equal(got.loss_fn_inputs[key].to_numpy(), tensor.to_numpy())


@settings(max_examples=60, deadline=None)
@given(
    seqs=st.lists(
        st.tuples(tokens, st.sampled_from(["stop", "length"]), st.booleans()), min_size=1, max_size=5
    ),
    prompt=st.none() | st.lists(floats, min_size=1, max_size=10),
)
def test_sample_responses_read_back_through_the_sdk(seqs, prompt):
    sequences = [
        types.SampledSequence(
            stop_reason=reason,
            sequence_id=f"s-{i}",
            tokens_np=np.array(toks, dtype=np.int32),
            logprobs_np=np.linspace(-3, 0, len(toks), dtype=np.float32) if with_lp else None,
        )
        for i, (toks, reason, with_lp) in enumerate(seqs)
    ]
    prompt_np = None if prompt is None else np.array([np.nan] + prompt, dtype=np.float32)
    sent = types.SampleResponse(sequences=sequences, prompt_logprobs_np=prompt_np)
    back = deserialize_sample_response(encode_sample_response(sent))
    for a, b in zip(back.sequences, sequences, strict=True):
        assert a.tokens == b.tokens and a.stop_reason == b.stop_reason
        assert (a.logprobs is None) == (b.logprobs is None)
        if b.logprobs is not None:
            assert a.logprobs == b.logprobs
    if prompt is None:
        assert back.prompt_logprobs is None
    else:
        assert back.prompt_logprobs[0] is None and back.prompt_logprobs[1:] == pytest.approx(prompt)


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 9), min_size=0, max_size=5),
    metrics=st.dictionaries(st.sampled_from(["loss:sum", "tokens:sum", "kl:mean"]), floats),
)
def test_forward_backward_outputs_read_back_through_the_sdk(lengths, metrics):
    rng = np.random.default_rng(len(lengths))
    outputs = [
        {
            "logprobs": types.TensorData.from_numpy(rng.normal(size=n).astype(np.float32)),
            "elementwise_loss": types.TensorData.from_numpy(rng.normal(size=n).astype(np.float32)),
        }
        for n in lengths
    ]
    sent = types.ForwardBackwardOutput(
        loss_fn_output_type="ArrayRecord", loss_fn_outputs=outputs, metrics=metrics
    )
    back = deserialize_forward_backward_output(encode_forward_backward_output(sent))
    assert back.metrics == pytest.approx(metrics)
    assert len(back.loss_fn_outputs) == len(outputs)
    for a, b in zip(back.loss_fn_outputs, outputs, strict=True):
        for key in b:
            np.testing.assert_array_equal(a[key].to_numpy(), b[key].to_numpy())
            assert a[key].shape == b[key].shape


@settings(max_examples=80, deadline=None)
@given(body=st.binary(max_size=200))
def test_garbage_bodies_are_refused_with_a_reason(body):
    try:
        call = decode_forward_backward(body)
    except WireError as exc:
        assert str(exc)
    else:  # a few byte strings happen to parse as a (near-empty) message: decoded faithfully
        assert isinstance(call.data, list)


def test_unsupported_encodings_and_chunks_are_refused():
    with pytest.raises(WireError, match="Content-Encoding"):
        decode_forward_backward(b"", "gzip")
    with pytest.raises(WireError, match="zstd"):
        decode_forward_backward(b"not zstd", "zstd")
    image = types.ImageChunk(data=b"\x89PNG", format="png", expected_tokens=4)
    datum = types.Datum(
        model_input=types.ModelInput(chunks=[image]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.zeros(4, dtype=np.int64)),
            "weights": types.TensorData.from_numpy(np.ones(4, dtype=np.float32)),
        },
    )
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=[datum], loss_fn="cross_entropy"),
        model_id="m",
        seq_id=1,
    )
    with pytest.raises(WireError, match="text tokens only"):
        decode_forward_backward(forward_backward_request_to_proto(request).SerializeToString())
