"""The local GSM8K-style task: seeded splits, answers that are right, and the cookbook's grader."""

from __future__ import annotations

import random
import re

from hypothesis import given, settings
from hypothesis import strategies as st

import rftlab.envs.gs1 as mt
from rftlab.envs.gs1 import (
    N_TEST,
    QUESTION_SUFFIX,
    boxed_answer,
    generate,
    is_correct,
    reward,
    train_problems,
)

NUM = re.compile(r"\d+")


def _recompute(question: str, kind: str) -> int:
    """The answer recomputed from the question text alone (independent of the generator's arithmetic)."""
    nums = [int(x) for x in NUM.findall(question)]
    if kind == "add":
        return nums[0] + nums[1]
    if kind == "sub":
        return nums[0] - nums[1]
    if kind == "mul":
        return nums[0] * nums[1]
    if kind == "div":
        assert nums[0] % nums[1] == 0
        return nums[0] // nums[1]
    assert kind == "two_step"
    return nums[0] + nums[1] - nums[2]


def test_test_set_is_fixed_distinct_and_gsm8k_sized():
    tests = mt.test_problems()
    assert len(tests) == N_TEST == 1319
    assert len({p.question for p in tests}) == N_TEST
    assert {p.kind for p in tests} == {"add", "sub", "mul", "div", "two_step"}
    # a fixed set: the first items are part of the contract (changing them changes every local study)
    assert tests[0].question == "Max has 7 apples, gets 8 more, then loses 9. How many apples are left?"
    assert tests[0].final == "6"


def test_answers_are_correct_and_in_gsm8k_format():
    from tinker_cookbook.recipes.math_rl.math_grading import extract_boxed

    for p in list(mt.test_problems()) + train_problems(300, seed=0):
        value = _recompute(p.question, p.kind)
        assert 0 <= value <= 36
        assert p.final == str(value)
        assert p.answer.endswith(f"\n#### {value}")
        assert extract_boxed(p.solution) == p.final
        assert reward(p.solution, p.final) == 1.0


def test_train_split_is_seeded_and_never_contains_a_test_question():
    a, b, c = train_problems(500, seed=0), train_problems(500, seed=0), train_problems(500, seed=1)
    assert a == b and a != c
    assert len({p.question for p in a}) == 500
    assert not {p.question for p in a} & {p.question for p in mt.test_problems()}


def test_grader_is_the_cookbook_gsm8k_grader():
    # reference behaviour of math_rl grading (docs/platforms.md §3.7)
    assert reward("so \\boxed{1,234}", "1234") == 1.0
    assert reward("\\boxed{18.00}", "18") == 1.0
    assert reward("\\boxed{18 dollars}", "18") == 0.0
    assert reward("\\boxed{18.5}", "18") == 0.0
    assert reward("the answer is 18", "18") == 0.0  # no box, no credit
    assert reward("\\boxed{17} then \\boxed{18}", "18") == 1.0  # the last box counts
    assert boxed_answer("nothing") is None
    assert QUESTION_SUFFIX == " Write your answer in \\boxed{} format."


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_grading_never_raises_on_arbitrary_model_output(text):
    assert reward(text, "12") in (0.0, 1.0)
    assert isinstance(is_correct(text, "7"), bool)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_generate_is_pure_given_the_rng_seed(seed):
    assert generate(random.Random(seed)) == generate(random.Random(seed))
