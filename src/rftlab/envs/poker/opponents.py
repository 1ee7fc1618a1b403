"""The three exploitable opponents (docs/poker.md §A.8): deterministic functions of the game state, no RNG.

Each takes the game (the bot to act) and returns ``(ActionType, total)`` with ``total`` the raise-to
amount for RAISE (else ``None``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from texasholdem import ActionType, TexasHoldEm
from texasholdem.card.card import Card
from texasholdem.game.hand_phase import HandPhase
from texasholdem.game.player_state import PlayerState

from rftlab.envs.poker.engine import is_legal_move, min_raise_total, strength

Decision = tuple[ActionType, int | None]
Opponent = Callable[[TexasHoldEm], Decision]
RANKS = "23456789TJQKA"


def card_value(card: Card) -> int:
    """2..14 (ace high)."""
    return RANKS.index(str(card)[0]) + 2


def card_suit(card: Card) -> str:
    return str(card)[1]


def has_draw(hole: Sequence[Card], board: Sequence[Card]) -> bool:
    """Board ≥ 3: a suit with ≥ 4 cards among hole + board, or 4 consecutive distinct values (ace also
    counts as 1). Includes made flushes/straights and board-only draws; still evaluated on the river."""
    if len(board) < 3:
        return False
    cards = list(hole) + list(board)
    suits: dict[str, int] = {}
    for c in cards:
        suits[card_suit(c)] = suits.get(card_suit(c), 0) + 1
    if max(suits.values()) >= 4:
        return True
    values = {card_value(c) for c in cards}
    if 14 in values:
        values.add(1)
    return any(all(v + k in values for k in range(4)) for v in values)


def pair_or_better(hole: Sequence[Card], board: Sequence[Card]) -> bool:
    """Board ≥ 3: a hole-card value occurs ≥ 2 times among hole + board (pocket pair, or pairing the
    board), or ``strength ≥ 0.8``. A board-only pair or a straight does not count."""
    if len(board) < 3:
        return False
    all_values = [card_value(c) for c in list(hole) + list(board)]
    if any(all_values.count(card_value(h)) >= 2 for h in hole):
        return True
    return strength(hole, board) >= 0.8


def is_connector(hole: Sequence[Card], low_at_least: int, suited: bool = False) -> bool:
    """Values differ by exactly 1 with the lower ≥ ``low_at_least`` (A-2 is not a connector)."""
    a, b = sorted((card_value(c) for c in hole), reverse=True)
    if a - b != 1 or b < low_at_least:
        return False
    return not suited or card_suit(hole[0]) == card_suit(hole[1])


def facing_bet(game: TexasHoldEm) -> bool:
    return game.chips_to_call(game.current_player) > 0


def call_or_check(game: TexasHoldEm) -> Decision:
    return (ActionType.CALL, None) if facing_bet(game) else (ActionType.CHECK, None)


def fold_or_check(game: TexasHoldEm) -> Decision:
    return (ActionType.FOLD, None) if facing_bet(game) else (ActionType.CHECK, None)


def raise_to_min(game: TexasHoldEm) -> Decision:
    """RAISE to ``value_to_total(min_raise())`` if legal; else ``call_or_check`` preflop, CHECK postflop."""
    pid = game.current_player
    total = min_raise_total(game, pid)
    if is_legal_move(game, pid, ActionType.RAISE, total):
        return ActionType.RAISE, total
    if game.hand_phase == HandPhase.PREFLOP:
        return call_or_check(game)
    return ActionType.CHECK, None


def calling_station(game: TexasHoldEm) -> Decision:
    """The engine's ``call_agent``: CALL when it owes chips (state TO_CALL), else CHECK."""
    if game.players[game.current_player].state == PlayerState.TO_CALL:
        return ActionType.CALL, None
    return ActionType.CHECK, None


def fit_or_fold(game: TexasHoldEm) -> Decision:
    hole = game.get_hand(game.current_player)
    board = game.board
    if game.hand_phase == HandPhase.PREFLOP:
        values = sorted((card_value(c) for c in hole), reverse=True)
        suited = card_suit(hole[0]) == card_suit(hole[1])
        keep = (
            values[0] == values[1] or (suited and values[0] == 14) or values[1] >= 10 or is_connector(hole, 8)
        )
    else:
        keep = pair_or_better(hole, board) or has_draw(hole, board)
    return call_or_check(game) if keep else fold_or_check(game)


def loose_aggressive(game: TexasHoldEm) -> Decision:
    hole = game.get_hand(game.current_player)
    board = game.board
    phase = game.hand_phase
    if phase == HandPhase.PREFLOP:
        values = sorted((card_value(c) for c in hole), reverse=True)
        opens = (
            values[0] == values[1]
            or values[0] >= 12
            or is_connector(hole, 6, suited=True)
            or is_connector(hole, 8)
        )
        if opens:
            return raise_to_min(game)
        if values[1] >= 6:
            return call_or_check(game)
        return fold_or_check(game)
    s = strength(hole, board)
    draw = has_draw(hole, board)
    if phase == HandPhase.FLOP:
        if not facing_bet(game):
            high = max(card_value(c) for c in board)
            return raise_to_min(game) if (s >= 0.35 or draw or high >= 13) else (ActionType.CHECK, None)
        return (ActionType.CALL, None) if (s >= 0.40 or draw) else (ActionType.FOLD, None)
    if not facing_bet(game):
        bet = s >= 0.65 or (draw and phase == HandPhase.TURN)
        return raise_to_min(game) if bet else (ActionType.CHECK, None)
    return (ActionType.CALL, None) if s >= 0.60 else (ActionType.FOLD, None)


OPPONENTS: dict[str, Opponent] = {
    "calling_station": calling_station,
    "fit_or_fold": fit_or_fold,
    "loose_aggressive": loose_aggressive,
}
OPPONENT_NAMES = {"calling_station": "Tom", "fit_or_fold": "Adam", "loose_aggressive": "Alex"}
