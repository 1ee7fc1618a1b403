"""A GSM8K-style synthetic arithmetic word-problem generator (pure and seeded).

Problems are one- or two-step stories with one-digit operands (sums up to 18, products up to 36,
two-step answers 1-9), kept short and easy enough that a tiny model learns them on CPU in a short
warm start. Each problem carries a GSM8K-format ``answer`` field (a
short worked line, then ``#### <number>``), so code written for ``openai/gsm8k`` rows (the
cookbook's ``extract_gsm8k_final_answer``) reads it unchanged, and a ``solution`` line of the kind
the supervised warm start teaches (``3+4=7 \\boxed{7}``).

Splits: ``test_problems()`` is a fixed set of 1319 distinct items (the size of the GSM8K test
split); ``train_problems(n, seed)`` draws from a different stream and never repeats a test
question.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

N_TEST = 1319
TEST_SEED = 1_319_000
NAMES = (
    "Ann",
    "Ben",
    "Cal",
    "Dee",
    "Eli",
    "Fay",
    "Gus",
    "Ivy",
    "Jo",
    "Kim",
    "Lea",
    "Max",
    "Ned",
    "Ola",
    "Pam",
    "Sam",
)
ITEMS = (
    "apples",
    "books",
    "cards",
    "cups",
    "eggs",
    "pens",
    "shells",
    "stamps",
    "toys",
    "coins",
    "boxes",
    "cakes",
)


@dataclass(frozen=True, slots=True)
class MathProblem:
    """One item: ``question`` (the user text), ``answer`` (GSM8K format, ending ``#### N``),
    ``final`` (the number as a string), ``solution`` (what the warm start teaches), ``kind``."""

    question: str
    answer: str
    final: str
    solution: str
    kind: str

    def as_gsm8k_row(self) -> dict[str, str]:
        """The problem as an ``openai/gsm8k`` row (``question``, ``answer``)."""
        return {"question": self.question, "answer": self.answer}


def _make(question: str, expr: str, value: int, kind: str) -> MathProblem:
    final = str(value)
    return MathProblem(
        question=question,
        answer=f"{expr}={final}\n#### {final}",
        final=final,
        solution=f"{expr}={final} \\boxed{{{final}}}",
        kind=kind,
    )


def _add(rng: random.Random) -> MathProblem:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    return _make(
        f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have?",
        f"{a}+{b}",
        a + b,
        "add",
    )


def _sub(rng: random.Random) -> MathProblem:
    name, other, item = rng.choice(NAMES), rng.choice(NAMES), rng.choice(ITEMS)
    a = rng.randint(2, 18)
    b = rng.randint(max(1, a - 9), min(9, a - 1))
    return _make(
        f"{name} has {a} {item} and gives {b} to {other}. How many {item} are left?", f"{a}-{b}", a - b, "sub"
    )


def _mul(rng: random.Random) -> MathProblem:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(2, 6), rng.randint(2, 6)
    return _make(
        f"{name} buys {a} bags with {b} {item} in each. How many {item} is that?", f"{a}*{b}", a * b, "mul"
    )


def _div(rng: random.Random) -> MathProblem:
    item = rng.choice(ITEMS)
    b, q = rng.randint(2, 6), rng.randint(1, 6)
    return _make(
        f"{b * q} {item} are shared equally by {b} kids. How many {item} does each kid get?",
        f"{b * q}/{b}",
        q,
        "div",
    )


def _two_step(rng: random.Random) -> MathProblem:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    c = rng.randint(max(1, a + b - 9), min(9, a + b - 1))
    return _make(
        f"{name} has {a} {item}, gets {b} more, then loses {c}. How many {item} are left?",
        f"{a}+{b}-{c}",
        a + b - c,
        "two_step",
    )


KINDS: tuple[Callable[[random.Random], MathProblem], ...] = (_add, _sub, _mul, _div, _two_step)


def generate(rng: random.Random) -> MathProblem:
    """One problem drawn with ``rng`` (the kind uniformly, then its template's numbers and names)."""
    return rng.choice(KINDS)(rng)


def _distinct(seed: int, exclude: frozenset[str]) -> Iterator[MathProblem]:
    rng = random.Random(seed)
    seen: set[str] = set()
    while True:
        p = generate(rng)
        if p.question in seen or p.question in exclude:
            continue
        seen.add(p.question)
        yield p


@cache
def test_problems() -> tuple[MathProblem, ...]:
    """The fixed local test set: 1319 distinct problems (the same on every machine)."""
    stream = _distinct(TEST_SEED, frozenset())
    return tuple(next(stream) for _ in range(N_TEST))


@cache
def _test_questions() -> frozenset[str]:
    return frozenset(p.question for p in test_problems())


def train_problems(n: int, seed: int = 0) -> list[MathProblem]:
    """``n`` distinct training problems from stream ``seed``; none is a test question."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if seed == TEST_SEED:
        raise ValueError(f"seed {TEST_SEED} is the test stream's seed")
    stream = _distinct(seed, _test_questions())
    return [next(stream) for _ in range(n)]
