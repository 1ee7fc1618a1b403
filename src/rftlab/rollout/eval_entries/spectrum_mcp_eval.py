"""``@evaluation_test`` entry: the spectrum RFT env on the McpGym path (``rftlab.rollout.spectrum.mcp``
started by ``MCPGymRolloutProcessor``; scan 1 as the first user message, later scans as tool results),
scored by the env's replay of the executed tool calls (``scoring.score_mcp_row``). Settings come from the
environment (``settings``; ``$RFTLAB_MCP_PORT`` picks the server port, default 9700). No
``from __future__ import annotations`` here: eval-protocol inspects the decorated function at import."""

import os
from pathlib import Path

from eval_protocol.models import EvaluationRow
from eval_protocol.pytest import evaluation_test

from rftlab.rollout.eval_entries import settings
from rftlab.rollout.spectrum.mcp import MCP_MAX_TOTAL_CALLS, mcp_config
from rftlab.rollout.spectrum.processors import SpectrumMcpGymProcessor
from rftlab.rollout.spectrum.scoring import score_mcp_row

SERVER_SCRIPT = str(Path(__file__).resolve().with_name("spectrum_mcp_server.py"))
CONFIG = mcp_config()


@evaluation_test(
    input_rows=[settings.evaluation_rows(CONFIG.memory, CONFIG)],
    completion_params=[settings.completion_params()],
    rollout_processor=SpectrumMcpGymProcessor(),
    rollout_processor_kwargs={
        "port": int(os.environ.get("RFTLAB_MCP_PORT") or 9700),
        "server_mode": "shared",
    },
    server_script_path=SERVER_SCRIPT,
    steps=MCP_MAX_TOTAL_CALLS,
    max_concurrent_rollouts=settings.concurrency(),
    mode="pointwise",
    num_runs=1,
)
def test_spectrum_mcp(row: EvaluationRow) -> EvaluationRow:
    return score_mcp_row(row, CONFIG)
