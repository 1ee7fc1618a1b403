"""The endpoint policy client and ``rftlab endpoint check`` against the real local policy server."""

from __future__ import annotations

import socket

import pytest
from option_errors import refused_option

from rftlab.cli import main
from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.policies.endpoint import EndpointPolicy
from rftlab.policies.server import PolicyServer
from rftlab.policies.spectrum.reference import RFT_POLICIES
from rftlab.rollout import episode

SENTINEL = "sk-rftlab-SENTINEL-44d1e0"


class _Says:
    """A scripted 'model' that answers with a fixed action (text, or a raw tool call)."""

    def __init__(self, action):
        self.action = action

    def reset(self, seed=None):
        pass

    def act(self, obs):
        return self.action


@pytest.fixture(scope="module")
def server():
    policies = {n: RFT_POLICIES[n] for n in ("memoryless", "accumulate")}
    policies["chatty"] = lambda: _Says("I would rather describe the band in words.")
    policies["badjson"] = lambda: _Says({"name": "submit_report", "arguments": "{not json"})
    policies["badargs"] = lambda: _Says({"name": "submit_report", "arguments": {"center_freqs": "lots"}})
    with PolicyServer(policies) as srv:
        yield srv


@pytest.mark.parametrize("name", ["memoryless", "accumulate"])
def test_endpoint_policy_plays_the_same_episode_as_the_policy_itself(server, name):
    cfg = SpectrumRFTConfig(memory="echo")
    remote = episode(SpectrumRFTEnv(cfg), EndpointPolicy(server.base_url, name, config=cfg), "sc1_5")
    local = episode(SpectrumRFTEnv(cfg), RFT_POLICIES[name](), "sc1_5")
    assert remote.metrics == local.metrics
    assert len(remote) == 12


def test_check_passes_against_the_local_server(server, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["endpoint", "check", "--base-url", server.base_url, "--model", "accumulate"]) == 0
    out = capsys.readouterr().out
    assert "[ok  ] tool_call: submit_report with" in out and out.strip().endswith("PASSED")
    assert "unset: sent a placeholder" in out


def test_check_with_a_key_from_the_environment_never_prints_it(capsys, monkeypatch):
    monkeypatch.setenv("RFTLAB_TEST_KEY", SENTINEL)
    with PolicyServer({"memoryless": RFT_POLICIES["memoryless"]}, api_key=SENTINEL) as srv:
        code = main(
            [
                "endpoint",
                "check",
                "--base-url",
                srv.base_url,
                "--model",
                "memoryless",
                "--api-key-env",
                "RFTLAB_TEST_KEY",
                "--json",
            ]
        )
        out = capsys.readouterr()
        assert code == 0 and '"passed": true' in out.out
        monkeypatch.setenv("RFTLAB_TEST_KEY", SENTINEL + "-wrong")
        code = main(
            [
                "endpoint",
                "check",
                "--base-url",
                srv.base_url,
                "--model",
                "memoryless",
                "--api-key-env",
                "RFTLAB_TEST_KEY",
            ]
        )
        out2 = capsys.readouterr()
        assert code == 1 and "HTTP 401" in out2.out and "FAILED" in out2.out
    for text in (out.out, out.err, out2.out, out2.err):
        assert SENTINEL not in text


@pytest.mark.parametrize(
    "model, why",
    [
        ("chatty", "no submit_report tool call"),
        ("badjson", "arguments are not JSON"),
        ("badargs", "center_freqs is not a list of numbers"),
        ("nosuchmodel", "HTTP 404"),
    ],
)
def test_check_fails_clearly_on_bad_replies(server, capsys, model, why):
    assert main(["endpoint", "check", "--base-url", server.base_url, "--model", model]) == 1
    out = capsys.readouterr().out
    assert why in out and "Traceback" not in out and out.strip().endswith("FAILED")


def test_check_unreachable_endpoint_and_bad_arguments(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    assert (
        main(
            [
                "endpoint",
                "check",
                "--base-url",
                f"http://127.0.0.1:{port}/v1",
                "--model",
                "m",
                "--timeout",
                "5",
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "[FAIL] chat: APIConnectionError" in out
    argv = ["endpoint", "check", "--base-url", "localhost:8000", "--model", "m"]
    refused_option(argv, capsys, "--base-url", "must be an http(s) URL", "got 'localhost:8000'")


def test_redact_text_masks_an_explicit_key():
    from rftlab.runs.secrets import redact_text

    assert redact_text(f"bad key {SENTINEL}!", [SENTINEL], environ={}) == "bad key ***!"
    assert redact_text("EMPTY stays", [], environ={}) == "EMPTY stays"
