"""The GS1 study's one grader: tinker-cookbook's GSM8K grader from its ``math_rl`` recipe (reused, not
copied). The last ``\\boxed{...}`` of the response (``extract_boxed``) is checked against the reference
number with the cookbook's ``safe_grade`` (mathd normalisation, then a sympy equality check, 1 s timeout).
No box, a wrong or unparseable answer, a grader failure or a timeout all score 0."""

from __future__ import annotations

import functools

from tinker_cookbook.recipes.math_rl.math_env import safe_grade
from tinker_cookbook.recipes.math_rl.math_grading import extract_boxed

QUESTION_SUFFIX = " Write your answer in \\boxed{} format."
"""The math_rl environments' question suffix (``MathEnv.question_suffix()``), kept identical."""

GRADE_TIMEOUT_S = 1.0


def boxed_answer(response: str) -> str | None:
    """The content of the last ``\\boxed{}`` in ``response``, or ``None`` when there is none."""
    try:
        return extract_boxed(response)
    except ValueError:
        return None


def grade(response: str, answer: str) -> float:
    """The exact-answer reward of the cookbook's ``rl_loop``: 1.0 when the boxed answer grades equal to
    ``answer``, else 0.0."""
    given = boxed_answer(response)
    return 0.0 if given is None else _grade_boxed(given, answer)


@functools.lru_cache(maxsize=1 << 16)
def _grade_boxed(given: str, answer: str) -> float:
    """``safe_grade`` of one boxed answer, memoised: a pure function of the two strings, and a study grades
    the same few hundred pairs over and over: the GS1 runs hold 45,764 responses and 248 distinct
    (boxed answer, reference) pairs. Each uncached call starts a thread for the timeout."""
    try:
        return 1.0 if safe_grade(given, answer, "sympy", GRADE_TIMEOUT_S) else 0.0
    except Exception:  # the grader's own parse failures on garbage answers
        return 0.0


def is_correct(response: str, final: str) -> bool:
    """Whether ``response``'s boxed answer equals ``final`` under the cookbook's grader."""
    return grade(response, final) == 1.0


reward = grade
"""The reward of one response (the same function as ``grade``)."""
