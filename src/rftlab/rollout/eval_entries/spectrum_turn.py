"""``@evaluation_test`` entry: the spectrum RFT env on the bench-shaped path (scans as user messages,
``SpectrumTurnProcessor``), scored by the env's replay (``scoring.score_turn_row``). Settings come from
the environment (``settings``). No ``from __future__ import annotations`` here: eval-protocol inspects
the decorated function's annotations at import time."""

from eval_protocol.models import EvaluationRow
from eval_protocol.pytest import evaluation_test

from rftlab.rollout.eval_entries import settings
from rftlab.rollout.spectrum.processors import SpectrumTurnProcessor
from rftlab.rollout.spectrum.scoring import score_turn_row


@evaluation_test(
    input_rows=[settings.evaluation_rows("echo")],
    completion_params=[settings.completion_params()],
    rollout_processor=SpectrumTurnProcessor(),
    max_concurrent_rollouts=settings.concurrency(),
    mode="pointwise",
    num_runs=1,
)
def test_spectrum_turn(row: EvaluationRow) -> EvaluationRow:
    return score_turn_row(row)
