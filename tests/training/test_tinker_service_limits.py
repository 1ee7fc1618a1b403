"""``rftlab serve tinker`` refuses oversize and invalid requests at once with a typed 4xx (the SDK's
``BadRequestError``...), never a 500 and never after building what was asked for: bodies, metadata,
sample counts, tensor shapes, JSON nesting and number length, non-finite floats, damaged run records and
configuration flags that are not finite numbers."""

from __future__ import annotations

import json
import math

import httpx
import numpy as np
import pytest
import tinker
from hypothesis import given, settings
from hypothesis import strategies as st
from tinker import types
from tinker.proto.request_conv import forward_backward_request_to_proto
from tinker_helpers import KEY, quiet_server, sft_datum

from rftlab.cli import main
from rftlab.training.local_tinker import TINY_MODEL
from rftlab.training.local_tinker.limits import (
    MAX_JSON_BODY_BYTES,
    MAX_JSON_DEPTH,
    MAX_METADATA_BYTES,
    MAX_NUM_SAMPLES,
    LimitError,
    check_shape,
    parse_json,
)
from rftlab.training.local_tinker.wire import WireError, decode_forward_backward

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(value=JSON)
def test_ordinary_json_parses_as_json_does(value):
    raw = json.dumps(value).encode()
    assert parse_json(raw) == json.loads(raw)


@settings(max_examples=200, deadline=None)
@given(
    raw=st.binary(max_size=200)
    | st.text(alphabet='[]{}":,0123456789.eE-+ NaInfity', max_size=200).map(str.encode)
)
def test_any_body_is_json_or_a_limit_error(raw):
    try:
        parse_json(raw)
    except LimitError as exc:
        assert str(exc) and exc.status == 400


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1),
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        b'{"n": ' + b"9" * 5000 + b"}",
        b'{"x": 1e999}',
        b'{"lr": NaN}',
        b"[-Infinity]",
    ],
    ids=["deep", "very-deep", "5000-digits", "overflow", "nan", "infinity"],
)
def test_deep_long_or_non_finite_json_is_refused(raw):
    with pytest.raises(LimitError):
        parse_json(raw)


@settings(max_examples=100, deadline=None)
@given(shape=st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=10), size=st.integers(0, 64))
def test_a_shape_is_accepted_only_when_it_fits_its_values(shape, size):
    ok = len(shape) <= 8 and all(d >= 0 for d in shape) and math.prod(shape) == size
    try:
        check_shape("t", shape, size)
    except LimitError:
        assert not ok
    else:
        assert ok


def test_a_negative_protobuf_shape_is_refused_by_the_codec():
    datum = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3, 4]),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(np.arange(4, dtype=np.int64)),
            "weights": types.TensorData.from_numpy(np.ones(4, dtype=np.float32)),
        },
    )
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=[datum], loss_fn="cross_entropy"),
        model_id="m",
        seq_id=1,
    )
    msg = forward_backward_request_to_proto(request)
    del msg.data[0].loss_fn_inputs["weights"].shape[:]
    msg.data[0].loss_fn_inputs["weights"].shape.extend([-2, -2])
    with pytest.raises(WireError, match="negative dimension"):
        decode_forward_backward(msg.SerializeToString())


# ------------------------------------------------------------------------------ through the server


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    storage = tmp_path_factory.mktemp("limits")
    with quiet_server(storage) as srv:
        sc = tinker.ServiceClient(base_url=srv.base_url, api_key=KEY)
        tc = sc.create_lora_training_client(base_model=TINY_MODEL, rank=2, seed=0).result()
        sampler = tc.save_weights_and_get_sampling_client().result()
        http = httpx.Client(base_url=srv.base_url + "/api/v1", headers={"X-API-Key": KEY}, timeout=60)
        yield {"srv": srv, "storage": storage, "sc": sc, "tc": tc, "sampler": sampler, "http": http}
        http.close()
        sc.close("success").result()


def _ordinary(limited):
    """The server (and this client's model) still serve after a refusal."""
    tc = limited["tc"]
    assert limited["http"].get("/healthz").status_code == 200
    assert tc.forward([sft_datum(tc.get_tokenizer())], "cross_entropy").result().metrics["loss:sum"] > 0


def test_oversize_metadata_and_bodies_are_refused(limited):
    http = limited["http"]
    big = {"note": "x" * (MAX_METADATA_BYTES + 1)}
    answer = http.post("/create_session", json={"tags": [], "user_metadata": big, "sdk_version": "t"})
    assert answer.status_code == 400 and "user_metadata" in answer.json()["detail"]
    with pytest.raises(tinker.BadRequestError, match="user_metadata"):
        limited["tc"].save_state("big", user_metadata=big).result()
    body = b'{"tags": [], "user_metadata": {"n": "' + b"x" * MAX_JSON_BODY_BYTES + b'"}, "sdk_version": "t"}'
    answer = http.post("/create_session", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 413 and "limit" in answer.json()["detail"]
    _ordinary(limited)


def test_too_many_samples_and_non_finite_parameters_are_bad_requests(limited):
    tok = limited["tc"].get_tokenizer()
    prompt = types.ModelInput.from_ints(tok.encode("Kim has"))
    sampler = limited["sampler"]
    with pytest.raises(tinker.BadRequestError, match="num_samples"):
        sampler.sample(prompt, 30_000_000, types.SamplingParams(max_tokens=2)).result()
    with pytest.raises(tinker.BadRequestError, match=str(MAX_NUM_SAMPLES)):
        sampler.sample(prompt, MAX_NUM_SAMPLES + 1, types.SamplingParams(max_tokens=2)).result()
    with pytest.raises(tinker.BadRequestError, match="temperature"):
        sampler.sample(prompt, 1, types.SamplingParams(max_tokens=2, temperature=-1.0)).result()
    tc = limited["tc"]
    tc.forward_backward([sft_datum(tok)], "cross_entropy").result()
    with pytest.raises(tinker.BadRequestError, match="learning_rate"):
        tc.optim_step(types.AdamParams(learning_rate=-1.0)).result()
    # the SDK never sends a NaN (its JSON encoder refuses one); another client can
    http, sampler_id = limited["http"], sampler._sampling_session_id
    raw_prompt = b'{"chunks": [{"type": "encoded_text", "tokens": [1, 2]}]}'
    for number in (b"NaN", b"Infinity", b"-Infinity", b"1e999"):
        adam = (
            b'{"model_id": "no-such-model", "seq_id": 1, "optim_params": {"learning_rate": ' + number + b"}}"
        )
        sample = (
            b'{"sampling_session_id": "' + sampler_id.encode() + b'", "seq_id": 1000000, "prompt": '
            + raw_prompt + b', "sampling_params": {"max_tokens": 1, "temperature": ' + number + b"}}"
        )  # fmt: skip
        for path, body in (("/optim_step", adam), ("/asample", sample)):
            answer = http.post(path, content=body, headers={"content-type": "application/json"})
            detail = answer.json()["detail"]
            assert answer.status_code == 400 and ("finite" in detail or "range" in detail), detail
    _ordinary(limited)


def test_malformed_json_bodies_are_400s_never_500s(limited):
    http, sampler_id = limited["http"], limited["sampler"]._sampling_session_id
    prompt = {"chunks": [{"type": "encoded_text", "tokens": [1, 2]}]}
    bodies = [
        b"[" * 50_000 + b"]" * 50_000,
        b'{"tags": [], "user_metadata": {"n": ' + b"7" * 5000 + b'}, "sdk_version": "t"}',
        b'{"tags": [], "user_metadata": {"x": NaN}, "sdk_version": "t"}',
    ]
    for body in bodies:
        answer = http.post("/create_session", content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 400, answer.text
    target = {"data": [0.0, 0.0], "dtype": "float32", "shape": [-1, -2]}
    sample = {
        "sampling_session_id": sampler_id,
        "seq_id": 10**6,
        "prompt": prompt,
        "sampling_params": {"max_tokens": 1},
        "target_prompt_logprobs": target,
    }
    answer = http.post("/asample", json=sample)
    assert answer.status_code == 400 and "negative dimension" in answer.json()["detail"]
    _ordinary(limited)


def test_a_damaged_run_record_is_skipped_not_a_500(limited):
    rest = limited["sc"].create_rest_client()
    model_id = limited["tc"].model_id
    record = limited["storage"] / model_id / "run.json"
    good = record.read_text()
    try:
        for damage in ("{not json", "[1, 2]", json.dumps({"base_model": 3, "is_lora": "yes"})):
            record.write_text(damage)
            listed = rest.list_training_runs().result().training_runs
            assert model_id not in [r.training_run_id for r in listed]
            with pytest.raises(tinker.NotFoundError):
                rest.get_training_run(model_id).result()
    finally:
        record.write_text(good)
    assert rest.get_training_run(model_id).result().base_model == TINY_MODEL


@pytest.mark.parametrize(
    "flags",
    [
        ["--stop-after", "inf"],
        ["--session-timeout", "nan"],
        ["--session-timeout", "-1"],
        ["--stop-after", "1e300"],
    ],
    ids=["stop-after-inf", "timeout-nan", "timeout-negative", "stop-after-huge"],
)
def test_flags_that_are_not_finite_seconds_are_one_line_usage_errors(flags, tmp_path, capsys):
    code = main(["serve", "tinker", "--port", "0", "--storage", str(tmp_path), *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and flags[0] in err and "Traceback" not in err


ROUTES = [
    *("/create_session", "/session_heartbeat", "/telemetry", "/sessions/x/finish", "/create_model"),
    *("/get_info", "/optim_step", "/save_weights", "/save_weights_for_sampler", "/load_weights"),
    *("/save_weights_external", "/create_sampling_session", "/asample", "/weights_info"),
    *("/retrieve_future", "/cancel_future", "/client/config", "/client/dynamic_config"),
]
ODD_BODIES = [
    *(b"[]", b'"x"', b"3", b"null", b'{"reason": "x"}', b'{"reason": [1]}', b'{"session_id": 5}'),
    *(b'{"model_id": [1], "seq_id": "a"}', b'{"request_id": {"a": 1}}', b'{"tinker_path": 5}', b"\xff\xfe"),
    *(b'{"seq_id": -1, "model_id": "x"}', b'{"sampling_session_id": "x", "seq_id": 1, "num_samples": "5"}'),
]


def test_every_route_answers_odd_bodies_with_a_4xx(limited):
    http = limited["http"]
    answers = {
        (route, body): http.post(
            route, content=body, headers={"content-type": "application/json"}
        ).status_code
        for route in ROUTES
        for body in ODD_BODIES
    }
    assert not {k: v for k, v in answers.items() if v >= 500}
    assert {v for v in answers.values() if v >= 400}  # most of them are refusals
    _ordinary(limited)
