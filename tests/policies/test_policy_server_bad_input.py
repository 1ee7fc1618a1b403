"""Class 6 of issue 24 and item 9 of issue 23: the local policy server against hostile and odd requests —
wrong shapes get a one-line OpenAI-style 400, oversized bodies 413, ``n`` is capped and each choice has
its own tool-call ids, memory stays bounded; ``/v1/models`` lists only policies that can answer,
``tool_choice="none"`` returns no call, ``stream_options.include_usage`` is honoured, unknown routes answer
an OpenAI-style error and a port in use is one line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv, tool_schemas
from rftlab.policies.server import MAX_N, PolicyServer, RequestLog, create_app
from rftlab.policies.spectrum.reference import RFT_POLICIES

SRC = Path(__file__).resolve().parents[2] / "src"
TOOLS = tool_schemas(SpectrumRFTConfig())
SCAN = SpectrumRFTEnv(SpectrumRFTConfig()).reset("sc1_0").text
GOOD = {"model": "accumulate", "messages": [{"role": "user", "content": SCAN}], "tools": TOOLS}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(), raise_server_exceptions=False)


def _error(r, status: int, fragment: str = "") -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and {"message", "type", "code"} <= set(body["error"])
    assert "\n" not in body["error"]["message"] and fragment in body["error"]["message"]


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({**GOOD, "tools": 5}, "tools"),
        ({**GOOD, "tools": [{"type": "function", "function": 7}]}, "tools.0.function"),
        ({**GOOD, "tools": [{"type": "function", "function": {"parameters": {}}}]}, "name"),
        ({**GOOD, "messages": [{"role": "assistant", "content": None, "tool_calls": 7}]}, "tool_calls"),
        ({**GOOD, "messages": [{"role": "user", "content": 12}]}, "content"),
        ({**GOOD, "messages": [{"role": "wizard", "content": "x"}]}, "role"),
        ({**GOOD, "n": 0}, "n must be an integer from 1"),
        ({**GOOD, "n": MAX_N + 1}, "n must be an integer from 1"),
        ({**GOOD, "n": 5_000_000}, "n must be"),
        ({**GOOD, "n": True}, "n"),
        ({**GOOD, "stream": "yes"}, "stream"),
        ({**GOOD, "tool_choice": "sometimes"}, "tool_choice"),
        (
            {**GOOD, "tool_choice": {"type": "function", "function": {"name": "other"}}},
            "this policy can only call",
        ),
        ({**GOOD, "model": ["accumulate"]}, "model"),
    ],
)
def test_wrong_shapes_get_a_400(client, body, fragment):
    _error(client.post("/v1/chat/completions", json=body), 400, fragment)


@pytest.mark.parametrize(
    "raw, fragment",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"model": "accumulate", "n": ' + b"9" * 5000 + b"}", "not valid JSON"),
        (b'{"model": "accumulate", "temperature": 1e999, "messages": []}', "overflows"),
        (b'{"model": "accumulate", "temperature": NaN, "messages": []}', "not a JSON number"),
        (b"\xff\xfe not utf-8", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
    ],
)
def test_hostile_bodies_get_a_400(client, raw, fragment):
    r = client.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    _error(r, 400, fragment)


def test_oversized_bodies_get_a_413_before_being_read():
    app = create_app({"accumulate": RFT_POLICIES["accumulate"]}, max_body_bytes=10_000)
    c = TestClient(app)
    _error(c.post("/v1/chat/completions", content=b"x" * 20_000), 413, "exceeds the limit of 10000")

    def chunks():  # no Content-Length: the limit is enforced while reading
        for _ in range(50):
            yield b"x" * 1000

    _error(c.post("/v1/chat/completions", content=chunks()), 413, "exceeds the limit")


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    body=st.fixed_dictionaries(
        {},
        optional={
            "model": st.sampled_from(["accumulate", "memoryless", "oracle", "nope"]) | JSON,
            "messages": st.lists(
                st.fixed_dictionaries(
                    {"role": st.sampled_from(["user", "assistant", "tool", "system"]) | JSON},
                    optional={"content": st.just(SCAN) | JSON, "tool_calls": JSON},
                ),
                max_size=3,
            )
            | JSON,
            "tools": st.just(TOOLS) | JSON,
            "n": st.integers(-3, 40) | JSON,
            "stream": st.booleans() | JSON,
            "tool_choice": st.sampled_from(["none", "auto", "required"]) | JSON,
            "stream_options": JSON,
        },
    )
)
def test_any_json_body_gets_an_answer_or_a_one_line_error(client, body):
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code in (200, 400, 404), r.text
    if r.status_code != 200:
        _error(r, r.status_code)
    elif r.headers["content-type"].startswith("application/json"):
        assert r.json()["choices"][0]["message"]["role"] == "assistant"


def test_n_choices_have_distinct_tool_call_ids(client):
    r = client.post("/v1/chat/completions", json={**GOOD, "n": 3})
    choices = r.json()["choices"]
    ids = [tc["id"] for c in choices for tc in c["message"]["tool_calls"]]
    assert len(choices) == 3 and len(set(ids)) == 3
    args = {c["message"]["tool_calls"][0]["function"]["arguments"] for c in choices}
    assert len(args) == 1  # the same answer, three distinct calls


def test_tool_choice_none_returns_text_and_no_tool_call(client):
    r = client.post("/v1/chat/completions", json={**GOOD, "tool_choice": "none"})
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "stop" and "tool_calls" not in choice["message"]
    assert choice["message"]["content"].startswith("submit_report(")


def test_streaming_honours_include_usage_with_the_openai_client():
    import openai

    with PolicyServer({"accumulate": RFT_POLICIES["accumulate"]}) as srv:
        c = openai.OpenAI(base_url=srv.base_url, api_key="dummy")
        kwargs = {"model": "accumulate", "messages": GOOD["messages"], "tools": TOOLS, "stream": True}
        with_usage = list(c.chat.completions.create(**kwargs, stream_options={"include_usage": True}))
        without = list(c.chat.completions.create(**kwargs))
        n2 = list(c.chat.completions.create(**kwargs, n=2))
    assert with_usage[-1].usage is not None and with_usage[-1].usage.total_tokens > 0
    assert not with_usage[-1].choices
    assert all(chunk.usage is None for chunk in without)
    ids = {tc.id for chunk in n2 for ch in chunk.choices for tc in (ch.delta.tool_calls or [])}
    assert {ch.index for chunk in n2 for ch in chunk.choices} == {0, 1} and len(ids) == 2


def test_unknown_routes_and_methods_answer_openai_style(client):
    _error(client.get("/v1/nothing"), 404, "unknown route GET /v1/nothing")
    _error(client.post("/v1/completions", json={}), 404, "unknown route")
    _error(client.get("/v1/chat/completions"), 405, "not allowed")


def test_models_lists_only_policies_that_can_answer(client):
    listed = {m["id"] for m in client.get("/v1/models").json()["data"]}
    assert {"memoryless", "accumulate", "carpet"} <= listed
    assert not listed & {"oracle", "accumulate_filtered", "accumulate_denoised"}
    for name in ("oracle", "accumulate_filtered", "accumulate_denoised"):
        _error(client.post("/v1/chat/completions", json={**GOOD, "model": name}), 404, "hidden ground truth")
    for name in listed:  # and every listed one does answer a scan
        r = client.post("/v1/chat/completions", json={**GOOD, "model": name})
        assert r.status_code == 200, (name, r.text)


def test_the_request_log_and_sessions_stay_bounded():
    log = RequestLog(maxlen=5)
    app = create_app({"accumulate": RFT_POLICIES["accumulate"]}, request_log=log, max_sessions=3)
    c = TestClient(app)
    for i in range(12):
        r = c.post("/v1/chat/completions", json={**GOOD, "user": f"episode-{i}"})
        assert r.status_code == 200
    assert len(log) == 5 and log[-1]["user"] == "episode-11"
    by_size = RequestLog(maxlen=1000, max_bytes=3 * len(json.dumps(GOOD)) + 100)
    for i in range(20):
        by_size.append({**GOOD, "user": f"e{i}"})
    assert 1 <= len(by_size) <= 3 and by_size[-1]["user"] == "e19"


def test_a_port_in_use_is_one_line_and_exit_2():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "rftlab.policies.server", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"python -m rftlab.policies.server: error: port {port} on 127.0.0.1 is already in use (another "
        "server?); choose another with --port, or --port 0 for a free one"
    )


def test_endpoint_check_on_an_unlisted_model_does_not_say_ok(capsys):
    from rftlab.cli import main

    with PolicyServer({"memoryless": RFT_POLICIES["memoryless"]}) as srv:
        assert main(["endpoint", "check", "--base-url", srv.base_url, "--model", "nope"]) == 1
    out = capsys.readouterr().out
    assert "[warn] models: 1 model(s) listed; the model 'nope' is not listed" in out
    assert "[ok  ] models" not in out and "HTTP 404" in out
    assert json.dumps(out)  # printable
