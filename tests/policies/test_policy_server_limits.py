"""The local policy servers (spectrum and arena) through the real ``openai`` client: a ``max_tokens`` outside
1 to the served model's context is a 400 that says so, and a client that hangs up mid-request costs at most
one short log line, never a traceback."""

from __future__ import annotations

import socket
import time

import pytest

from rftlab.envs.arena.cases import frozen_cases
from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv, tool_schemas
from rftlab.policies.arena.server import ArenaPolicyServer
from rftlab.policies.server import CONTEXT_TOKENS, PolicyServer
from rftlab.policies.spectrum.reference import RFT_POLICIES

openai = pytest.importorskip("openai")

TOOLS = tool_schemas(SpectrumRFTConfig())
MESSAGES = [{"role": "user", "content": SpectrumRFTEnv(SpectrumRFTConfig()).reset("sc1_0").text}]
OUT_OF_RANGE = [-1, 0, CONTEXT_TOKENS + 1, 10**12]


@pytest.fixture(scope="module")
def spectrum():
    with PolicyServer({"accumulate": RFT_POLICIES["accumulate"]}) as srv:
        yield openai.OpenAI(base_url=srv.base_url, api_key="dummy", max_retries=0)


@pytest.fixture(scope="module")
def arena():
    with ArenaPolicyServer() as srv:
        yield openai.OpenAI(base_url=srv.base_url, api_key="dummy", max_retries=0)


def _arena_messages():
    from rftlab.policies.arena.providers import ScriptedProvider
    from rftlab.rollout.arena.evaluation import evaluate_case

    seen = []

    class Recorder(ScriptedProvider):
        def complete(self, messages, model):
            seen.append(messages)
            return super().complete(messages, model)

    evaluate_case(Recorder(), frozen_cases()[0])
    return seen[0]


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_an_out_of_range_max_tokens_is_a_400_naming_the_context(spectrum, field, value):
    with pytest.raises(openai.BadRequestError) as caught:
        spectrum.chat.completions.create(model="accumulate", messages=MESSAGES, tools=TOOLS, **{field: value})
    assert caught.value.status_code == 400
    message = caught.value.body["message"]
    assert f"{field} must be an integer from 1 to {CONTEXT_TOKENS} (the served model's context)" in message
    assert repr(value) in message and "\n" not in message


def test_max_tokens_up_to_the_context_is_answered(spectrum):
    for value in (1, CONTEXT_TOKENS):
        reply = spectrum.chat.completions.create(
            model="accumulate", messages=MESSAGES, tools=TOOLS, max_tokens=value
        )
        assert reply.choices[0].message.tool_calls[0].function.name == "submit_report"


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_the_arena_server_refuses_the_same_max_tokens(arena, value):
    messages = _arena_messages()
    with pytest.raises(openai.BadRequestError, match=f"from 1 to {CONTEXT_TOKENS}"):
        arena.chat.completions.create(model="scripted-balanced", messages=messages, max_tokens=value)
    reply = arena.chat.completions.create(model="scripted-balanced", messages=messages, max_tokens=192)
    assert reply.choices[0].message.content


def _hang_up_mid_body(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"model\": ")  # fmt: skip
        time.sleep(0.2)


@pytest.mark.parametrize("server", [PolicyServer, ArenaPolicyServer], ids=["spectrum", "arena"])
def test_a_client_that_hangs_up_mid_request_is_one_short_line(server, capfd):
    disconnects = 5
    with server() as srv:
        for _ in range(disconnects):
            _hang_up_mid_body(srv.port)
        time.sleep(0.5)
        client = openai.OpenAI(base_url=srv.base_url, api_key="dummy", max_retries=0)
        assert [m.id for m in client.models.list().data]  # still serving
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and "ClientDisconnect" not in err
    assert len(lines) <= disconnects and all(len(line) < 120 for line in lines), lines
