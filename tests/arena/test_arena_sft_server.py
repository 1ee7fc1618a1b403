"""The endpoint provider against the local arena policy server (real FastAPI/uvicorn over HTTP)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from rftlab.cli import main
from rftlab.envs.arena.cases import frozen_cases
from rftlab.policies.arena.providers import EndpointError, EndpointProvider, ScriptedProvider
from rftlab.policies.arena.server import ArenaPolicyServer
from rftlab.rollout.arena.evaluation import GENERATIONS_PER_CASE, evaluate_case


@pytest.fixture(scope="module")
def server():
    with ArenaPolicyServer(api_key="arena-test-key") as srv:
        yield srv


def _without_model(record):
    return {k: v for k, v in record.items() if k != "model"}


def test_endpoint_through_the_policy_server_equals_the_in_process_policy(server, monkeypatch):
    monkeypatch.setenv("ARENA_SERVER_KEY", "arena-test-key")
    before = len(server.requests)
    for case in frozen_cases()[10:12]:
        over_http = evaluate_case(
            EndpointProvider("scripted-balanced", server.base_url, "ARENA_SERVER_KEY"), case
        )
        assert _without_model(over_http) == _without_model(evaluate_case(ScriptedProvider(), case))
    assert len(server.requests) - before == 2 * GENERATIONS_PER_CASE
    body = server.requests[-1]
    assert body["temperature"] == 0.0 and body["chat_template_kwargs"] == {"enable_thinking": False}


def test_policy_server_errors_are_clear(server, monkeypatch):
    monkeypatch.setenv("ARENA_SERVER_KEY", "wrong")
    with pytest.raises(EndpointError, match="HTTP 401"):
        EndpointProvider("scripted-balanced", server.base_url, "ARENA_SERVER_KEY").complete([], "")
    monkeypatch.setenv("ARENA_SERVER_KEY", "arena-test-key")
    with pytest.raises(EndpointError, match="HTTP 404"):
        EndpointProvider("gpt-unknown", server.base_url, "ARENA_SERVER_KEY").complete([], "")
    with pytest.raises(EndpointError, match="HTTP 400"):
        EndpointProvider("scripted-balanced", server.base_url, "ARENA_SERVER_KEY").complete(
            [{"role": "user", "content": "hello"}], ""
        )
    request = urllib.request.Request(
        server.base_url + "/models", headers={"Authorization": "Bearer arena-test-key"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        names = [m["id"] for m in json.loads(response.read())["data"]]
    assert names == ["scripted-balanced", "scripted-no-inbox"]


def test_unreachable_endpoint_is_a_one_line_error(tmp_path, capsys):
    code = main(["arena", "eval", "--provider", "endpoint", "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                 "--output-dir", str(tmp_path / "e"), "--case-stride", "60"])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "unreachable" in err and "Traceback" not in err


def test_eval_cli_endpoint_through_the_server(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RFTLAB_ARENA_API_KEY", "arena-test-key")
    out = tmp_path / "served"
    args = ["arena", "eval", "--provider", "endpoint", "--model", "scripted-no-inbox", "--base-url", server.base_url,
            "--output-dir", str(out), "--case-stride", "30"]  # fmt: skip
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == "scripted-no-inbox" and summary["num_cases"] == 2
    assert summary["provider"]["api_key_env"] == "RFTLAB_ARENA_API_KEY"
    assert "arena-test-key" not in (out / "summary.json").read_text() + (out / "rows.jsonl").read_text()
