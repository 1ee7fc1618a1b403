"""``@evaluation_test`` entry: the poker RFT env on the McpGym path, scored with the **mean-instance** reward
(docs/poker.md §B.5; the ``poker_seed`` arm's evaluator ``rftlab-poker-mcp``). The server is
``rftlab.rollout.poker.mcp``, started by ``MCPGymRolloutProcessor`` through the project's
``SpectrumMcpGymProcessor``, windowed as B.4 (the model sees the system prompt and the messages from the
last ``FEEDBACK FROM PREVIOUS INSTANCE`` onward; the row keeps the full transcript). Rows and settings:
``rftlab.rollout.poker.entry``; scoring from the env-authored messages: ``score_poker_row``. The gain
reward has its own entry, ``poker_mcp_gain_eval.py``. No ``from __future__ import annotations`` here:
eval-protocol inspects the decorated function at import."""

from eval_protocol.models import EvaluationRow
from eval_protocol.pytest import evaluation_test

from rftlab.rollout.poker.entry import entry_kwargs
from rftlab.rollout.poker.scoring import score_poker_row

REWARD = "mean_instance"


@evaluation_test(**entry_kwargs())
def test_poker_mcp(row: EvaluationRow) -> EvaluationRow:
    return score_poker_row(row, REWARD)
