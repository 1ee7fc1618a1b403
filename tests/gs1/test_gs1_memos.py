"""The GS1 study's memos change its speed only: the memoised grade equals the cookbook's ``safe_grade``
called afresh, and the memoised prompt and response text equal a fresh render and parse."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tinker_cookbook.recipes.math_rl.math_env import safe_grade

import rftlab.envs.gs1 as gs1
from rftlab.envs.gs1.grading import GRADE_TIMEOUT_S, boxed_answer, grade
from rftlab.envs.gs1.task import cookbook_math_prompt_format, local_task
from rftlab.training.gs1.sampling import response_text
from rftlab.training.gs1.warm_start import renderer_for
from rftlab.training.local_tinker import TINY_MODEL

ANSWERS = st.one_of(
    st.integers(-10_000, 10_000).map(str),
    st.sampled_from(["1,234", "18.00", "18 dollars", "3/4", "0.75", "\\frac{3}{4}", "x", "", "2^{10}"]),
    st.text(max_size=12),
)


@pytest.fixture(scope="module")
def tiny_renderer():
    return renderer_for(TINY_MODEL, "qwen3_5_disable_thinking")


def _fresh(given_answer: str, reference: str) -> float:
    try:
        return 1.0 if safe_grade(given_answer, reference, "sympy", GRADE_TIMEOUT_S) else 0.0
    except Exception:
        return 0.0


@settings(max_examples=150, deadline=None)
@given(ANSWERS, st.integers(0, 2_000).map(str), st.booleans())
def test_memoised_grade_equals_a_fresh_cookbook_grade(answer, reference, twice):
    response = f"so the answer is \\boxed{{{answer}}}"
    expected = _fresh(boxed_answer(response), reference) if boxed_answer(response) is not None else 0.0
    assert grade(response, reference) == expected
    if twice:  # the second call is answered by the memo
        assert grade(response, reference) == expected


def test_memoised_prompt_equals_a_fresh_render(tiny_renderer):
    task = local_task(8)
    cookbook = type(task)(task.name, task.train, task.test, **cookbook_math_prompt_format())
    for t in (task, cookbook):
        for problem in t.train[:4] + tuple(gs1.test_problems()[:2]):
            convo = [dict(m) for m in (t.convo_prefix or ())]
            convo.append({"role": "user", "content": problem.question + t.question_suffix})
            fresh = tiny_renderer.build_generation_prompt(convo)
            assert t.prompt(tiny_renderer, problem) == fresh
            assert t.prompt(tiny_renderer, problem).to_ints() == fresh.to_ints()  # from the memo
    # the two formats never share a memo entry: same question, different prompts
    p = task.train[0]
    assert task.prompt(tiny_renderer, p).to_ints() != cookbook.prompt(tiny_renderer, p).to_ints()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet="0123456789 \\boxed{}+=.abc", max_size=40))
def test_memoised_response_text_equals_a_fresh_parse(tiny_renderer, text):
    from tinker_cookbook import renderers

    tokens = tiny_renderer.tokenizer.encode(text, add_special_tokens=False)
    message, _ = tiny_renderer.parse_response(list(tokens))
    fresh = renderers.get_text_content(message)
    assert response_text(tiny_renderer, tokens) == fresh
    assert response_text(tiny_renderer, list(tokens)) == fresh  # the memo's answer
