"""Both ``@evaluation_test`` entry modules, run by pytest in a subprocess through the real eval-protocol
stack (litellm, MCP server subprocess) against the local policy server, scored exactly as the env scores
the same policy's actions when played directly. A sitecustomize guard refuses every non-loopback
connection and DNS lookup in the subprocesses (and records the attempt); a sentinel API key must not
appear in any output, record or request."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv, session_band_seed
from rftlab.policies.server import PolicyServer
from rftlab.policies.spectrum.reference import RFT_POLICIES
from rftlab.rollout.spectrum.dataset import dataset_rows
from rftlab.rollout.spectrum.eval_runner import run_entry_module
from rftlab.rollout.spectrum.mcp import mcp_config
from rftlab.rollout.spectrum.scoring import METRIC_KEYS

SENTINEL = "sk-rftlab-SENTINEL-0b5e9c"
POLICIES = ("memoryless", "accumulate")
ROWS = 2

GUARD = """
import os, socket

# Loopback only: the no-network guard of ``tests/conftest.py`` on every test here.
pytestmark = pytest.mark.usefixtures("no_network")
_LOG = os.environ["RFTLAB_NET_GUARD_LOG"]
_LOCAL = {"127.0.0.1", "::1", "localhost", "0.0.0.0", None}
def _refuse(what):
    with open(_LOG, "a") as f:
        f.write(what + "\\n")
    raise OSError("network access refused by the test guard: " + what)
_connect = socket.socket.connect
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOCAL:
        _refuse(f"connect {address!r}")
    return _connect(self, address)
socket.socket.connect = connect
_gai = socket.getaddrinfo
def getaddrinfo(host, *a, **k):
    h = host.decode() if isinstance(host, bytes) else host
    if h not in _LOCAL:
        _refuse(f"getaddrinfo {h!r}")
    return _gai(host, *a, **k)
socket.getaddrinfo = getaddrinfo
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def policy_server():
    with PolicyServer({name: RFT_POLICIES[name] for name in POLICIES}) as srv:
        yield srv


def _run_entry(module: str, server: PolicyServer, tmp_path: Path, extra_env: dict[str, str] | None = None):
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(GUARD)
    guard_log = tmp_path / "net_guard.log"
    params = [
        {"model": f"openai/{p}", "base_url": server.base_url, "temperature": 0.0, "max_tokens": 256}
        for p in POLICIES
    ]
    env = {"RFTLAB_NET_GUARD_LOG": str(guard_log), "OPENAI_API_KEY": SENTINEL, **(extra_env or {})}
    work = tmp_path / "work"
    rows, stdout, stderr = run_entry_module(
        module, params, rows=ROWS, workdir=work, env=env, python_path=[str(guard_dir)], timeout=300
    )
    assert not guard_log.exists(), guard_log.read_text()
    # the sentinel key: sent by litellm to the local server, but never in any output, record or request body
    texts = [stdout, stderr, json.dumps(server.requests)]
    texts += [p.read_text(errors="replace") for p in work.rglob("*") if p.is_file()]
    assert not any(SENTINEL in t for t in texts)
    return rows


def _direct_metrics(config: SpectrumRFTConfig, policy: str, *, row_id=None, seed=None) -> dict:
    env = SpectrumRFTEnv(config)
    obs = env.reset(row_id, seed=seed)
    first = obs.text
    p = RFT_POLICIES[policy]()
    while not obs.done:
        obs = env.step(p.act(obs)).observation
    return env.metrics() | {"_scan1": first}


def _check_row(row: dict, direct: dict) -> None:
    res = row["evaluation_result"]
    assert res["is_score_valid"], res["reason"]
    assert res["score"] == direct["reward"]
    for k in METRIC_KEYS:
        m = res["metrics"][k]
        if direct[k] is None:
            assert not m["is_score_valid"]
        else:
            assert m["is_score_valid"] and m["score"] == direct[k], k


def _by_policy(rows):
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["input_metadata"]["completion_params"]["model"].split("/")[-1], []).append(r)
    return out


@pytest.mark.slow
def test_turn_entry_scores_equal_the_envs_own_scoring(policy_server, tmp_path):
    rows = _run_entry("spectrum_turn.py", policy_server, tmp_path)
    grouped = _by_policy(rows)
    assert sorted(grouped) == sorted(POLICIES)
    cfg = SpectrumRFTConfig(memory="echo")
    ids = [r["input_metadata"]["row_id"] for r in dataset_rows(ROWS, memory="echo")]
    for policy, prs in grouped.items():
        assert sorted(r["input_metadata"]["row_id"] for r in prs) == sorted(ids)
        for r in prs:
            direct = _direct_metrics(cfg, policy, row_id=r["input_metadata"]["row_id"])
            _check_row(r, direct)
            # windowed: one user scan per request, the policy kept per-episode state through `user`
            assert r["messages"][1]["content"] == direct["_scan1"]
    assert {r["evaluation_result"]["score"] for r in grouped["accumulate"]} != {
        r["evaluation_result"]["score"] for r in grouped["memoryless"]
    }
    # the model input was windowed: no request carried more than one scan
    assert all(
        sum("[[SCAN_BOUNDARY]]" in str(m.get("content")) for m in req["messages"]) == 1
        for req in policy_server.requests
    )


@pytest.mark.slow
def test_mcp_entry_scores_equal_the_envs_own_scoring(policy_server, tmp_path):
    from eval_protocol.mcp_env import gen_session_id
    from eval_protocol.types import DatasetRow

    before = len(policy_server.requests)
    # concurrency 1: the windowed requests of a scripted policy carry no per-episode key on this path
    env = {"RFTLAB_MCP_PORT": str(_free_port()), "RFTLAB_EP_CONCURRENCY": "1"}
    rows = _run_entry("spectrum_mcp_eval.py", policy_server, tmp_path, env)
    requests = policy_server.requests[before:]
    # ICL-off on the McpGym path too: every model call saw exactly one scan delivery
    assert len(requests) == len(POLICIES) * ROWS * 13
    assert all(
        sum("[[SCAN_BOUNDARY]]" in str(m.get("content")) for m in r["messages"]) == 1 for r in requests
    )
    grouped = _by_policy(rows)
    assert sorted(grouped) == sorted(POLICIES)
    cfg = mcp_config("notepad")
    for policy, prs in grouped.items():
        assert len(prs) == ROWS
        for r in prs:
            ctx = r["input_metadata"]["dataset_info"]["environment_context"]
            sid = gen_session_id(
                DatasetRow(
                    id=r["input_metadata"]["row_id"],
                    seed=None,
                    system_prompt="",
                    user_prompt_template="",
                    environment_context=ctx,
                ),
                f"openai/{policy}",
            )
            direct = _direct_metrics(cfg, policy, seed=session_band_seed(sid))
            # the server seeded the band from the session id: scan 1 is that band's scan 1
            assert r["messages"][1]["content"] == direct["_scan1"]
            _check_row(r, direct)
            # per-step control-plane rewards are the env's exact per-scan occupied-IoU
            cp = [m["control_plane_step"]["reward"] for m in r["messages"] if m.get("control_plane_step")]
            assert len(cp) == 12 and abs(3 * sum(cp) / 12 - direct["reward"]) < 1e-3


@pytest.mark.slow
def test_run_bench_shaped_eval_puts_ep_scores_beside_the_envs():
    from rftlab.rollout.spectrum.eval_runner import run_bench_shaped_eval

    df = run_bench_shaped_eval(2, "accumulate")
    assert list(df["row_id"]) == ["sc1_0", "sc1_1"]
    assert df["match"].all()
    assert (df["ep_reward"] == df["env_reward"]).all() and (
        df["ep_memory_gain"] == df["env_memory_gain"]
    ).all()
    with pytest.raises(ValueError, match="unknown policy"):
        run_bench_shaped_eval(1, "nope")


def test_the_entries_send_no_model_unless_one_is_named(monkeypatch):
    """An uploaded evaluator gets the job's model from the platform (issue 32 item 8): the entries name none
    of their own; a local run names one with RFTLAB_EP_MODEL."""
    from rftlab.rollout.eval_entries import settings

    monkeypatch.delenv("RFTLAB_EP_MODEL", raising=False)
    assert "model" not in settings.completion_params()
    monkeypatch.setenv("RFTLAB_EP_MODEL", "openai/accumulate")
    assert settings.completion_params()["model"] == "openai/accumulate"
