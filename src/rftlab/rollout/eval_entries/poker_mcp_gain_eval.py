"""``@evaluation_test`` entry: the poker RFT env on the McpGym path, scored with the **gain** reward
(docs/poker.md §B.3; the ``poker_gain`` arm's evaluator ``rftlab-poker-mcp-gain``). Everything but the
reward is ``poker_mcp_eval.py``'s (``rftlab.rollout.poker.entry``). No ``from __future__ import
annotations`` here: eval-protocol inspects the decorated function at import."""

from eval_protocol.models import EvaluationRow
from eval_protocol.pytest import evaluation_test

from rftlab.rollout.poker.entry import entry_kwargs
from rftlab.rollout.poker.scoring import score_poker_row

REWARD = "gain"


@evaluation_test(**entry_kwargs())
def test_poker_mcp_gain(row: EvaluationRow) -> EvaluationRow:
    return score_poker_row(row, REWARD)
