"""``@evaluation_test`` entry: the poker RFT env on the McpGym path (``rftlab.rollout.poker.mcp`` started
by ``MCPGymRolloutProcessor`` through the project's ``SpectrumMcpGymProcessor``, windowed as B.4: the
model sees the system prompt and the messages from the last ``FEEDBACK FROM PREVIOUS INSTANCE`` onward,
the row keeps the full transcript; the first hand's prompt as the first user message, later prompts as ``poker_act`` results),
scored from the env-authored messages (``poker_scoring.score_poker_row``). Settings from the environment:
``settings`` (model, base URL, sampling, concurrency), ``$RFTLAB_POKER_ROWS`` (default 96),
``$RFTLAB_POKER_HANDS`` (default 16), ``$RFTLAB_POKER_THINK`` (default 0: ``/no_think``),
``$RFTLAB_POKER_REWARD`` (``mean_instance`` or ``gain``), ``$RFTLAB_MCP_PORT`` (default 9701). No
``from __future__ import annotations`` here: eval-protocol inspects the decorated function at import."""

import os
from pathlib import Path

from eval_protocol.models import EvaluationRow
from eval_protocol.pytest import evaluation_test

from rftlab.rollout.eval_entries import settings
from rftlab.rollout.poker.dataset import dataset_rows
from rftlab.rollout.poker.mcp import poker_hands
from rftlab.rollout.poker.scoring import score_poker_row
from rftlab.rollout.spectrum.processors import SpectrumMcpGymProcessor

SERVER_SCRIPT = str(Path(__file__).resolve().with_name("poker_mcp_server.py"))
MCP_STEPS = 300  # B.4
HAND_MARKER = "FEEDBACK FROM PREVIOUS INSTANCE"


def evaluation_rows() -> list[EvaluationRow]:
    n = settings._int("RFTLAB_POKER_ROWS", 96)
    think = os.environ.get("RFTLAB_POKER_THINK", "0") != "0"
    rows = []
    for r in dataset_rows(n, hands=poker_hands(), thinking=think):
        r["input_metadata"]["dataset_info"]["user_prompt_template"] = "{observation}"
        rows.append(EvaluationRow(**r))
    return rows


@evaluation_test(
    input_rows=[evaluation_rows()],
    completion_params=[settings.completion_params()],
    rollout_processor=SpectrumMcpGymProcessor(marker=HAND_MARKER),
    rollout_processor_kwargs={
        "port": int(os.environ.get("RFTLAB_MCP_PORT") or 9701),
        "server_mode": "shared",
    },
    server_script_path=SERVER_SCRIPT,
    steps=MCP_STEPS,
    max_concurrent_rollouts=settings.concurrency(),
    mode="pointwise",
    num_runs=1,
)
def test_poker_mcp(row: EvaluationRow) -> EvaluationRow:
    return score_poker_row(row)
