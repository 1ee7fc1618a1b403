"""Grading with the GSM8K grader of tinker-cookbook's ``math_rl`` recipe (reused, not copied):
the last ``\\boxed{...}`` of the response (``extract_boxed``) against the reference number
(``grade_answer``: mathd normalisation, then a sympy equality check)."""

from __future__ import annotations

from tinker_cookbook.recipes.math_rl.math_grading import extract_boxed, grade_answer

QUESTION_SUFFIX = " Write your answer in \\boxed{} format."
"""The math_rl environments' question suffix (``MathEnv.question_suffix()``), kept identical."""


def boxed_answer(response: str) -> str | None:
    """The content of the last ``\\boxed{}`` in ``response``, or ``None`` when there is none."""
    try:
        return extract_boxed(response)
    except ValueError:
        return None


def is_correct(response: str, final: str) -> bool:
    """Whether ``response``'s boxed answer equals ``final`` under the cookbook's grader."""
    given = boxed_answer(response)
    return given is not None and bool(grade_answer(given, final))


def reward(response: str, final: str) -> float:
    """1.0 for a correct boxed answer, else 0.0 (the cookbook ``rl_loop`` reward)."""
    return 1.0 if is_correct(response, final) else 0.0
