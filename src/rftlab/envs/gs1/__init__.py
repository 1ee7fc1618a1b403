"""A local GSM8K-style task: seeded synthetic arithmetic word problems (a fixed 1319-item test set and
a train stream) graded with tinker-cookbook's GSM8K grader. Pure: no I/O, clocks or global RNG."""

from .grading import QUESTION_SUFFIX, boxed_answer, is_correct, reward
from .problems import N_TEST, MathProblem, generate, test_problems, train_problems

__all__ = [
    "N_TEST",
    "QUESTION_SUFFIX",
    "MathProblem",
    "boxed_answer",
    "generate",
    "is_correct",
    "reward",
    "test_problems",
    "train_problems",
]
