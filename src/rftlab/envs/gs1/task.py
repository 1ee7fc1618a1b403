"""The GS1 study's task in the loop's format: problems with ids, the prompt format, and the GSM8K rows of
tinker-cookbook's ``math_rl`` recipe turned into problems. Pure (loading the Hub dataset is the launch
layer's job: ``rftlab.launch.gs1.backend``)."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rftlab.envs.gs1.grading import QUESTION_SUFFIX
from rftlab.envs.gs1.problems import test_problems, train_problems


@dataclass(frozen=True)
class Problem:
    """One GSM8K-style item: its id, the question and the final answer (a number as text)."""

    item_id: str
    question: str
    answer: str


@dataclass(frozen=True)
class MathTask:
    """Train and test problems plus the prompt format (the cookbook's math_rl one by default)."""

    name: str
    train: tuple[Problem, ...]
    test: tuple[Problem, ...]
    convo_prefix: tuple[Mapping[str, str], ...] | None = None
    question_suffix: str = QUESTION_SUFFIX

    def prompt(self, renderer: Any, problem: Problem):
        """The rendered prompt of ``problem`` (a tinker ``ModelInput``, which nobody mutates: ``append``
        returns a new one). Memoised per renderer: a study renders each problem hundreds of times, and
        the renderer's tokenizer calls were a tenth of the GS1 study's time."""
        content = problem.question + self.question_suffix
        key = (self._prefix_key, content)
        memo = _PROMPTS.setdefault(renderer, {})
        if key not in memo:
            convo = [dict(m) for m in (self.convo_prefix or ())]
            convo.append({"role": "user", "content": content})
            memo[key] = renderer.build_generation_prompt(convo)
        return memo[key]

    @functools.cached_property
    def _prefix_key(self) -> str:
        """The few-shot prefix as text, once per task (part of ``prompt``'s memo key)."""
        return repr(self.convo_prefix)


_PROMPTS: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], Any]] = weakref.WeakKeyDictionary()
"""``MathTask.prompt``'s memo: per renderer (gone with it), the prompt of each (prefix, question)."""


def cookbook_math_prompt_format() -> dict[str, Any]:
    """The math_rl GSM8K prompt pieces: ``MathEnv.standard_fewshot_prefix()`` and ``question_suffix()``."""
    from tinker_cookbook.recipes.math_rl.math_env import MathEnv

    return {
        "convo_prefix": tuple(dict(m) for m in MathEnv.standard_fewshot_prefix()),
        "question_suffix": MathEnv.question_suffix(),
    }


class GSM8KRowError(ValueError):
    """A GSM8K row that is not ``{"question": str, "answer": str with a '#### N' line}`` (says why)."""


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def gsm8k_final_answer(row: Any) -> str:
    """The final answer of one GSM8K row (the math_rl recipe's ``extract_gsm8k_final_answer``);
    ``GSM8KRowError`` saying what is wrong with any other value."""
    from tinker_cookbook.recipes.math_rl.math_env import extract_gsm8k_final_answer

    if not isinstance(row, Mapping):
        raise GSM8KRowError(f"not an object (got {_kind(row)})")
    for key in ("question", "answer"):
        if key not in row:
            raise GSM8KRowError(f"no {key!r} field")
        if not isinstance(row[key], str):
            raise GSM8KRowError(f"{key!r} must be a string, got {_kind(row[key])}")
    try:
        final = extract_gsm8k_final_answer(row["answer"])
    except ValueError:
        raise GSM8KRowError("'answer' has no '#### <final answer>' line") from None
    if not final:
        raise GSM8KRowError("'answer' has nothing after '####'")
    return final


def gsm8k_problems(rows: Iterable[Mapping[str, Any]], split: str) -> tuple[Problem, ...]:
    """GSM8K rows (``question``, ``answer`` with ``#### N``) as problems with ids ``<split>-<index>``;
    a malformed row is a ``GSM8KRowError`` naming the split and the row (counted from 1)."""
    problems = []
    for i, row in enumerate(rows):
        try:
            final = gsm8k_final_answer(row)  # first: it checks the row has a string question
        except GSM8KRowError as exc:
            raise GSM8KRowError(f"{split} row {i + 1}: {exc}") from None
        problems.append(Problem(f"{split}-{i}", row["question"], final))
    return tuple(problems)


def local_task(n_train: int) -> MathTask:
    """The local GSM8K-style task (``rftlab.envs.gs1.problems``): ``n_train`` train-stream problems and the
    fixed 1319-item test set, without the few-shot prefix."""
    train = train_problems(n_train, 0)
    test = test_problems()
    return MathTask(
        "local_math",
        tuple(Problem(f"train-{i}", p.question, p.final) for i, p in enumerate(train)),
        tuple(Problem(f"test-{i}", p.question, p.final) for i, p in enumerate(test)),
        convo_prefix=None,
        question_suffix=QUESTION_SUFFIX,
    )
