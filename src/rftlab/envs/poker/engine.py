"""The ``texasholdem==0.11.0`` engine, seeded without touching the global RNG (docs/poker.md §A.1, A.3).

The engine draws from the module-level ``random`` in two places: ``random.choice`` in the
``TexasHoldEm`` constructor (the button) and ``random.shuffle`` in ``Deck()``. ``seeded_hand`` swaps
the ``random`` attribute of those two modules for a private ``random.Random`` restored to a saved
state, for the duration of construct + ``start_hand()``, under a process-wide lock; the deal equals
upstream's and the global generator is never read or advanced.
"""

from __future__ import annotations

import importlib
import math
import random
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from itertools import combinations

from texasholdem import ActionType, TexasHoldEm
from texasholdem.card.card import Card
from texasholdem.evaluator import evaluator
from texasholdem.evaluator.lookup_table import LOOKUP_TABLE

BUYIN, BIG_BLIND, SMALL_BLIND, PLAYERS = 1000, 10, 5, 2
SYSTEM, BOT = 0, 1
MAX_RANK = 7462
_ENGINE_LOCK = threading.Lock()
# The package re-exports names over its submodules (``texasholdem.card.card`` shadows ``.deck`` as an
# attribute path), so take the two modules from the import system directly. Their globals are set
# through ``vars``: a module loaded by name has no typed attributes.
_game_module = importlib.import_module("texasholdem.game.game")
_deck_module = importlib.import_module("texasholdem.card.deck")

RngState = tuple


@contextmanager
def engine_rng(rng: random.Random) -> Iterator[None]:
    """Within the block, the engine's two draws come from ``rng`` (and nothing else changes)."""
    with _ENGINE_LOCK:
        game_globals, deck_globals = vars(_game_module), vars(_deck_module)
        saved = game_globals["random"], deck_globals["random"]
        game_globals["random"] = deck_globals["random"] = rng
        try:
            yield
        finally:
            game_globals["random"], deck_globals["random"] = saved


def new_hand(rng: random.Random) -> TexasHoldEm:
    """Construct a heads-up table and start a hand, drawing the button and the deck from ``rng``."""
    with engine_rng(rng):
        game = TexasHoldEm(buyin=BUYIN, big_blind=BIG_BLIND, small_blind=SMALL_BLIND, max_players=PLAYERS)
        game.start_hand()
    return game


def min_raise_total(game: TexasHoldEm, player_id: int) -> int:
    """The smallest total ``player_id`` may raise to: ``value_to_total(min_raise())``."""
    total = game.value_to_total(game.min_raise(), player_id)
    if total is None:  # the engine's minimum raise is at least the big blind, never 0
        raise RuntimeError("the engine gave no minimum raise")
    return total


def is_legal_move(game: TexasHoldEm, player_id: int, action: ActionType, total: int | None) -> bool:
    """The engine's ``validate_move`` for a move whose raise total (if any) is ``total``."""
    # texasholdem's untyped `deprecated` decorators hide validate_move's parameters from pyright
    return game.validate_move(player_id, action, total=total)  # pyright: ignore[reportCallIssue]


def deal_from_state(state: RngState) -> TexasHoldEm:
    """The hand dealt from a saved generator state (``random.Random().getstate()``)."""
    rng = random.Random()
    rng.setstate(state)
    return new_hand(rng)


def hand_states(seed: int, count: int) -> list[RngState]:
    """Pre-generation (A.3): ``rng = Random(seed)``; before each deal record ``rng.getstate()``, then
    consume exactly what a deal consumes — one ``choice`` over the 2 players and one ``shuffle`` of 52
    cards (the draws depend only on the sequence lengths, so a placeholder list consumes the same) — so
    the next hand starts where the last left off."""
    rng = random.Random(seed)
    states = []
    placeholder = [0] * 52
    for _ in range(count):
        states.append(rng.getstate())
        rng.choice((0, 1))
        rng.shuffle(placeholder)
    return states


def pretty(card: Card) -> str:
    """``[ J ♣ ]``: the engine's ``pretty_string``."""
    return card.pretty_string


def cards_text(cards) -> str:
    return " ".join(pretty(c) for c in cards)


_PRIME_BITS, _SUIT_SHIFT = 0x3F, 12  # a card int's prime (its rank's) and its one-hot suit nibble


@cache
def _best_unsuited(primes: tuple[int, ...]) -> int:
    """The best rank among the five-card subsets of a hand with no flush, from its rank primes (sorted).

    Such a hand's rank depends on its ranks only, so one sorted tuple stands for every deal of them."""
    return min(LOOKUP_TABLE.unsuited_lookup[math.prod(five)] for five in combinations(primes, 5))


def best_rank(hole: Sequence[Card], board: Sequence[Card]) -> int:
    """Cactus-Kev rank (1 best … 7462 worst) of the best five of hole + board (≥ 3 board cards).

    Equal to ``texasholdem.evaluator.evaluate`` for every hand. A hand without five cards of one suit
    has no flush among its subsets: the engine's table gives each subset's rank, and the best of them
    is cached per rank multiset. A hand with a flush suit goes to the engine's own evaluator."""
    cards = (*hole, *board)
    if len(cards) < 5:
        raise ValueError(f"a rank needs at least five cards, got {len(cards)}")
    suits = [c >> _SUIT_SHIFT & 0xF for c in cards]
    if any(suits.count(suit) >= 5 for suit in (1, 2, 4, 8)):
        return evaluator.evaluate(list(hole), list(board))
    return _best_unsuited(tuple(sorted(c & _PRIME_BITS for c in cards)))


def strength(hole, board) -> float:
    """``1 − rank/7462`` of the best five (a rank percentile, not equity); board must have ≥ 3 cards."""
    return 1.0 - best_rank(hole, board) / MAX_RANK
