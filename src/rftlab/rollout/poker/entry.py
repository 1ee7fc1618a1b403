"""What the poker ``@evaluation_test`` entries share (docs/poker.md §B.4, §B.5): rows, rollout processor and
settings. Each entry module (``rftlab.rollout.eval_entries.poker_mcp_eval`` for the mean-instance reward,
``rftlab.rollout.eval_entries.poker_mcp_gain_eval`` for the gain reward) decorates its test with
``evaluation_test(**entry_kwargs())`` and scores with **its own** reward: the reward is fixed by the
uploaded code, because the evaluator is uploaded with an empty env file and Fireworks gives it no
environment of ours.

Settings read from the environment (local runs; unset on Fireworks): ``settings`` (model, base URL,
sampling, concurrency), ``$RFTLAB_POKER_ROWS`` (default 96), ``$RFTLAB_POKER_HANDS`` (default 16),
``$RFTLAB_POKER_THINK`` (default 0: ``/no_think``), ``$RFTLAB_MCP_PORT`` (default 9701).
``$RFTLAB_POKER_REWARD`` is refused: it used to choose the reward and silently did nothing on Fireworks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rftlab.rollout.poker.turns import HAND_MARKER

MCP_STEPS = 300  # B.4
RETIRED_REWARD_VARIABLE = "RFTLAB_POKER_REWARD"


def server_script() -> str:
    """The McpGym server launcher beside the entry modules (what ``MCPGymRolloutProcessor`` runs)."""
    from rftlab.rollout import eval_entries

    return str(Path(eval_entries.__file__).resolve().with_name("poker_mcp_server.py"))


def refuse_reward_variable() -> None:
    """``ValueError`` when ``$RFTLAB_POKER_REWARD`` is set: the entry, not the environment, picks the reward."""
    if os.environ.get(RETIRED_REWARD_VARIABLE):
        raise ValueError(
            f"{RETIRED_REWARD_VARIABLE} is no longer read: each entry fixes its reward "
            "(poker_mcp_eval.py scores mean_instance, poker_mcp_gain_eval.py scores gain); unset it and run "
            "the entry of the reward you want"
        )


def evaluation_rows() -> list[Any]:
    """The entry's dataset rows (``dataset_rows`` with the first hand's prompt as the first user message)."""
    from eval_protocol.models import EvaluationRow

    from rftlab.rollout.eval_entries import settings
    from rftlab.rollout.poker.dataset import dataset_rows
    from rftlab.rollout.poker.turns import poker_hands

    n = settings._int("RFTLAB_POKER_ROWS", 96)
    think = os.environ.get("RFTLAB_POKER_THINK", "0") != "0"
    rows = []
    for r in dataset_rows(n, hands=poker_hands(), thinking=think):
        r["input_metadata"]["dataset_info"]["user_prompt_template"] = "{observation}"
        rows.append(EvaluationRow(**r))
    return rows


def entry_kwargs() -> dict[str, Any]:
    """``evaluation_test`` arguments of a poker entry (McpGym, windowed as B.4, pointwise)."""
    from rftlab.rollout.eval_entries import settings
    from rftlab.rollout.spectrum.processors import SpectrumMcpGymProcessor

    refuse_reward_variable()
    return {
        "input_rows": [evaluation_rows()],
        "completion_params": [settings.completion_params()],
        "rollout_processor": SpectrumMcpGymProcessor(marker=HAND_MARKER),
        "rollout_processor_kwargs": {
            "port": int(os.environ.get("RFTLAB_MCP_PORT") or 9701),
            "server_mode": "shared",
        },
        "server_script_path": server_script(),
        "steps": MCP_STEPS,
        "max_concurrent_rollouts": settings.concurrency(),
        "mode": "pointwise",
        "num_runs": 1,
    }
