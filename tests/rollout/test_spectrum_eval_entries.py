"""Both ``@evaluation_test`` entry modules, run by pytest in a subprocess through the real eval-protocol
stack (litellm, MCP server subprocess) against the local policy server, scored exactly as the env scores
the same policy's actions when played directly. A sitecustomize guard refuses every non-loopback
connection and DNS lookup in the subprocesses (and records the attempt); a sentinel API key must not
appear in any output, record or request."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import rftlab
from rftlab.envs.spectrum.dataset import dataset_rows
from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv, session_band_seed
from rftlab.policies.server import PolicyServer
from rftlab.policies.spectrum import RFT_POLICIES
from rftlab.rollout.eval_entries.scoring import METRIC_KEYS
from rftlab.rollout.spectrum_mcp import mcp_config

ENTRIES = Path(rftlab.__file__).resolve().parent / "rollout" / "eval_entries"
SRC = Path(rftlab.__file__).resolve().parents[1]
SENTINEL = "sk-rftlab-SENTINEL-0b5e9c"
POLICIES = ("memoryless", "accumulate")
ROWS = 2

GUARD = """
import os, socket
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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FIREWORKS", "TINKER", "WANDB", "EP_"))}
    env.update(
        HOME=str(tmp_path / "home"),
        PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=os.pathsep.join([str(guard_dir), str(SRC)]),
        RFTLAB_NET_GUARD_LOG=str(guard_log),
        OPENAI_API_KEY=SENTINEL,
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        EP_NO_UPLOAD="1",
        EP_DISABLE_AUTO_BROWSER="1",
        DISABLE_EP_SQLITE_LOG="1",
        EP_MAX_RETRY="1",
        RFTLAB_EP_BASE_URL=server.base_url,
        RFTLAB_EP_TEMPERATURE="0",
        RFTLAB_EP_MAX_TOKENS="256",
        RFTLAB_SPECTRUM_ROWS=str(ROWS),
        **(extra_env or {}),
    )
    (tmp_path / "home").mkdir(exist_ok=True)
    out_dir = tmp_path / "out"
    params = [
        json.dumps(
            {"model": f"openai/{p}", "base_url": server.base_url, "temperature": 0.0, "max_tokens": 256}
        )
        for p in POLICIES
    ]
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(ENTRIES / module),
        "--ep-output-dir",
        str(out_dir),
    ]
    for p in params:
        cmd += ["--ep-completion-params", p]
    # own process group: on a timeout the pytest run and the MCP server it spawned are stopped together
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail("the entry module's pytest run timed out:\n" + stdout[-3000:] + stderr[-3000:])
    proc = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [
        json.loads(line)
        for f in sorted((out_dir / "experiment_results").glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    assert not guard_log.exists(), guard_log.read_text()
    # the sentinel key: sent by litellm to the local server, but never in any output, record or request body
    texts = [proc.stdout, proc.stderr, json.dumps(server.requests)]
    texts += [
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and p.name != "sitecustomize.py"
    ]
    assert not any(SENTINEL in t for t in texts)
    return rows, proc


def _direct_metrics(config: SpectrumRFTConfig, policy: str, *, row_id=None, seed=None) -> dict:
    env = SpectrumRFTEnv(config)
    obs = env.reset(row_id, seed=seed)
    first = obs.text
    p = RFT_POLICIES[policy]()
    while not obs.done:
        obs, *_ = env.step(p(obs))
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
    rows, _ = _run_entry("spectrum_turn.py", policy_server, tmp_path)
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

    rows, _ = _run_entry(
        "spectrum_mcp_eval.py", policy_server, tmp_path, {"RFTLAB_MCP_PORT": str(_free_port())}
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
