"""Children the project starts use the interpreter running it, with its folder first on PATH, so nothing
needs an activated venv: eval-protocol's McpGym processor starts a bare ``python`` for the env server,
which from a plain ``PATH`` is the system's (without eval-protocol, or none at all)."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("eval_protocol")

from rftlab.policies.server import PolicyServer  # noqa: E402
from rftlab.policies.spectrum.reference import RFT_POLICIES  # noqa: E402
from rftlab.rollout.spectrum.eval_runner import run_entry_module  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_mcp_entry_runs_with_a_plain_path(tmp_path):
    """The pytest child gets PATH=/usr/bin:/bin (no venv): the McpGym server it starts must still be
    this interpreter (before the fix: "No module named 'eval_protocol'" or no ``python`` at all)."""
    with PolicyServer({"accumulate": RFT_POLICIES["accumulate"]}) as srv:
        params = {
            "model": "openai/accumulate",
            "base_url": srv.base_url,
            "temperature": 0.0,
            "max_tokens": 256,
        }
        rows, _out, _err = run_entry_module(
            "spectrum_mcp_eval.py",
            [params],
            rows=1,
            workdir=tmp_path,
            env={"PATH": "/usr/bin:/bin", "RFTLAB_MCP_PORT": str(_free_port()), "RFTLAB_EP_CONCURRENCY": "1"},
            timeout=600,
        )
    assert len(rows) == 1
    assert rows[0]["evaluation_result"]["is_score_valid"] is True
    assert rows[0]["evaluation_result"]["score"] > 0
