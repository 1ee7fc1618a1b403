"""``best_rank`` against the engine's own evaluator (texasholdem's ``evaluate``), hand by hand."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from texasholdem.card.card import Card
from texasholdem.evaluator import evaluator

from rftlab.envs.poker.engine import best_rank
from rftlab.policies.poker.reference import FULL_DECK, equity

DECK = [Card(text) for text in FULL_DECK]


@settings(max_examples=3000, deadline=None)
@given(st.permutations(range(52)), st.integers(min_value=3, max_value=5))
def test_best_rank_equals_the_engine_evaluator(order, board_size):
    cards = [DECK[i] for i in order[: 2 + board_size]]
    hole, board = cards[:2], cards[2:]
    assert best_rank(hole, board) == evaluator.evaluate(hole, board)


@pytest.mark.parametrize(
    ("hole", "board", "rank"),
    [
        (("As", "Ks"), ("Qs", "Js", "Ts", "2d", "3c"), 1),  # royal flush: the best rank there is
        (("7s", "5d"), ("4c", "3h", "2s"), 7462),  # seven-high: the worst five-card hand
        (("Ah", "Ad"), ("Ac", "As", "Kd", "2c", "3h"), 11),  # four aces, king kicker
    ],
)
def test_best_rank_known_hands(hole, board, rank):
    assert best_rank([Card(c) for c in hole], [Card(c) for c in board]) == rank


def test_best_rank_flush_and_paired_boards_equal_the_engine():
    """Hands a uniform draw seldom gives: six or seven cards of one suit, and a flush beside a full
    house (the full house ranks higher)."""
    hands = [
        (("2h", "9h"), ("4h", "7h", "Jh", "Kh", "Qh")),
        (("Th", "Td"), ("Tc", "4h", "4d", "8h", "2h")),
        (("5c", "6c"), ("7c", "8c", "9c", "9d", "9h")),
        (("Ac", "2c"), ("3c", "4c", "5d", "Kc", "Kd")),
    ]
    for hole, board in hands:
        h, b = [Card(c) for c in hole], [Card(c) for c in board]
        assert best_rank(h, b) == evaluator.evaluate(h, b)


def test_best_rank_refuses_fewer_than_five_cards():
    with pytest.raises(ValueError, match="five cards"):
        best_rank([Card("As"), Card("Kd")], [Card("2c"), Card("3h")])


def test_equity_equals_the_engine_evaluators_monte_carlo():
    """The exploit strategy's equity, recomputed sample by sample with the engine's ``evaluate`` on the
    same draws (the same generator, the same ``sample`` calls)."""
    hole, board = ("Ah", "Td"), ("9h", "4h", "2c")
    deck = [c for c in FULL_DECK if c not in set(hole) | set(board)]
    rng = random.Random(7)
    score = 0.0
    for _ in range(300):
        draw = rng.sample(deck, 4)
        full = [Card(c) for c in (*board, *draw[2:])]
        a = evaluator.evaluate([Card(c) for c in hole], full)
        b = evaluator.evaluate([Card(c) for c in draw[:2]], full)
        score += 1.0 if a < b else 0.5 if a == b else 0.0
    assert equity(hole, board, random.Random(7), samples=300) == score / 300
