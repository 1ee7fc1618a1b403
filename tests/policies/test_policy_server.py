"""The local OpenAI-compatible policy server: real uvicorn + FastAPI, real openai and litellm clients."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv, tool_schemas
from rftlab.policies.server import HOST, PolicyServer
from rftlab.policies.spectrum.reference import RFT_POLICIES


@pytest.fixture(scope="module")
def server():
    with PolicyServer() as srv:
        yield srv


def _direct(memory, row, name):
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory=memory))
    obs = env.reset(row)
    policy = RFT_POLICIES[name]()
    while not obs.done:
        obs = env.step(policy.act(obs)).observation
    return env.metrics()


def _post(url, body, headers=None):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_binds_loopback_and_lists_models(server):
    import openai

    assert server.base_url.startswith(f"http://{HOST}:") and HOST == "127.0.0.1"
    client = openai.OpenAI(base_url=server.base_url, api_key="dummy")
    assert {"memoryless", "accumulate"} <= {m.id for m in client.models.list().data}


@pytest.mark.parametrize("name", ["memoryless", "accumulate", "echo_follower"])
@pytest.mark.parametrize("memory", ["echo", "none"])
def test_openai_client_windowed_episode_equals_direct_env_episode(server, name, memory):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="dummy")
    cfg = SpectrumRFTConfig(memory=memory)
    env = SpectrumRFTEnv(cfg)
    obs = env.reset("sc1_3")
    while not obs.done:
        r = client.chat.completions.create(
            model=name,
            messages=[{"role": "system", "content": "s"}, {"role": "user", "content": obs.text}],
            tools=tool_schemas(cfg),
            user=f"episode-{name}-{memory}",
        )
        assert r.choices[0].finish_reason == "tool_calls"
        tc = r.choices[0].message.tool_calls[0]
        obs = env.step(
            {"id": tc.id, "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
        ).observation
    assert env.metrics() == _direct(memory, "sc1_3", name)


def test_litellm_full_history_and_streaming(server):
    import litellm

    cfg = SpectrumRFTConfig(memory="echo", delivery="tool", max_calls_per_scan=None)
    env = SpectrumRFTEnv(cfg)
    obs = env.reset("spectrum_0")
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": obs.text}]
    stream = False
    while not obs.done:
        kw = {
            "model": "openai/accumulate",
            "base_url": server.base_url,
            "messages": msgs,
            "tools": tool_schemas(cfg),
        }
        if stream:
            chunks = list(litellm.completion(stream=True, **kw))
            resp = litellm.stream_chunk_builder(chunks, messages=msgs)
        else:
            resp = litellm.completion(**kw)
        stream = not stream
        m = resp.choices[0].message
        call = {
            "id": m.tool_calls[0].id,
            "function": {
                "name": m.tool_calls[0].function.name,
                "arguments": m.tool_calls[0].function.arguments,
            },
        }
        msgs.append({"role": "assistant", "content": None, "tool_calls": [dict(call, type="function")]})
        obs = env.step(call).observation
        # McpGym delivery: the next scan is inside the tool result, as eval-protocol's JSON text
        msgs.append(
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": json.dumps({"observation": obs.tool_results[0]["content"]}),
            }
        )
    assert env.metrics() == _direct("echo", "spectrum_0", "accumulate")
    final = litellm.completion(
        model="openai/accumulate", base_url=server.base_url, messages=msgs, tools=tool_schemas(cfg)
    )
    assert not final.choices[0].message.tool_calls and final.choices[0].finish_reason == "stop"


def test_bad_requests_get_openai_shaped_errors(server):
    url = server.base_url + "/chat/completions"
    tools = tool_schemas(SpectrumRFTConfig())
    scan = SpectrumRFTEnv(SpectrumRFTConfig()).reset("sc1_0").text
    code, body = _post(url, b"{not json")
    assert code == 400 and "not valid JSON" in body["error"]["message"]
    code, body = _post(url, {"model": "nope", "messages": [], "tools": tools})
    assert code == 404 and "not served" in body["error"]["message"]
    code, body = _post(url, {"model": "accumulate", "messages": "x", "tools": tools})
    assert code == 400 and "messages must be a list" in body["error"]["message"]
    code, body = _post(url, {"model": "accumulate", "messages": [{"role": "user", "content": scan}]})
    assert code == 400 and "no submit_report tool" in body["error"]["message"]
    code, body = _post(
        url, {"model": "accumulate", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    )
    assert code == 400 and "no spectrum scan" in body["error"]["message"]
    code, body = _post(
        url, {"model": "oracle", "messages": [{"role": "user", "content": scan}], "tools": tools}
    )
    assert code == 404 and "hidden ground truth" in body["error"]["message"]


def test_api_key_is_enforced_and_never_echoed():
    sentinel = "sk-rftlab-SENTINEL-7f3a"
    with PolicyServer({"memoryless": RFT_POLICIES["memoryless"]}, api_key=sentinel) as srv:
        scan = SpectrumRFTEnv(SpectrumRFTConfig()).reset("sc1_0").text
        body = {
            "model": "memoryless",
            "messages": [{"role": "user", "content": scan}],
            "tools": tool_schemas(SpectrumRFTConfig()),
        }
        code, reply = _post(srv.base_url + "/chat/completions", body, {"Authorization": "Bearer wrong"})
        assert code == 401 and sentinel not in json.dumps(reply)
        code, reply = _post(srv.base_url + "/chat/completions", body, {"Authorization": f"Bearer {sentinel}"})
        assert code == 200 and reply["choices"][0]["message"]["tool_calls"]
        assert sentinel not in json.dumps(srv.requests)


def test_stop_releases_the_port():
    srv = PolicyServer().start()
    port = srv.port
    srv.stop()
    import socket

    with socket.socket() as s:
        s.bind((HOST, port))  # free again


def _message_strategy():
    from hypothesis import strategies as st

    scan = SpectrumRFTEnv(SpectrumRFTConfig()).reset("sc1_0").text
    lines = scan.split("\n")
    fragment = st.builds(
        lambda a, b: "\n".join(lines[a:b]), st.integers(0, len(lines)), st.integers(0, len(lines))
    )
    content = st.one_of(
        st.none(), st.text(max_size=60), fragment, st.just(scan), st.integers(), st.lists(st.text(max_size=5))
    )
    msg = st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool", "bogus"]), "content": content}
    )
    return st.one_of(st.lists(msg, max_size=6), st.text(max_size=20), st.none(), st.integers())


def test_arbitrary_messages_get_a_reply_or_a_one_line_400():
    from fastapi.testclient import TestClient
    from hypothesis import given, settings

    from rftlab.policies.server import create_app

    client = TestClient(create_app({"accumulate": RFT_POLICIES["accumulate"]}))
    tools = tool_schemas(SpectrumRFTConfig())

    @settings(max_examples=120, deadline=None)
    @given(messages=_message_strategy())
    def check(messages):
        r = client.post(
            "/v1/chat/completions", json={"model": "accumulate", "messages": messages, "tools": tools}
        )
        assert r.status_code in (200, 400), r.text
        body = r.json()
        if r.status_code == 400:
            assert "\n" not in body["error"]["message"]
        else:
            assert body["choices"][0]["message"]["role"] == "assistant"

    check()


def test_sessions_are_capped():
    from fastapi.testclient import TestClient

    from rftlab.policies.server import create_app

    client = TestClient(create_app({"accumulate": RFT_POLICIES["accumulate"]}, max_sessions=2))
    tools = tool_schemas(SpectrumRFTConfig(memory="none"))
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="none"))
    s1 = env.reset("sc1_0").text
    s2 = env.step([]).observation.text
    for key in ("a", "b", "c"):  # "a" is evicted when "c" arrives
        r = client.post(
            "/v1/chat/completions",
            headers={"X-Rftlab-Session": key},
            json={"model": "accumulate", "messages": [{"role": "user", "content": s1}], "tools": tools},
        )
        assert r.status_code == 200
    ok = client.post(
        "/v1/chat/completions",
        headers={"X-Rftlab-Session": "c"},
        json={"model": "accumulate", "messages": [{"role": "user", "content": s2}], "tools": tools},
    )
    gone = client.post(
        "/v1/chat/completions",
        headers={"X-Rftlab-Session": "a"},
        json={"model": "accumulate", "messages": [{"role": "user", "content": s2}], "tools": tools},
    )
    assert (
        ok.status_code == 200
        and gone.status_code == 400
        and "last answered scan 0" in gone.json()["error"]["message"]
    )
