"""Reference poker strategies (docs/poker.md §B.6 calls for references; values are computed, not given).

All act on a ``PokerObservation`` (its ``next_query``) and return ``PokerAction`` fields as a dict.

- ``RandomLegal``: a uniformly random legal action; RAISE to a uniform total in [min, all-in]. Seeded.
- ``AlwaysCall``: CALL when owing chips, else CHECK (the memoryless control's shape).
- ``Exploit``: reads the opponent's name from the query and plays that opponent's counter-strategy
  (it knows the opponent's policy, not its cards): value-shoves a calling station with the better
  half of hands, raises a fit-or-fold player off its weak holdings, and against the loose-aggressive
  player bets whenever he checks (his checking range folds to a bet), calls his wide flop bets and
  folds to his turn/river bets (two pair or better) unless strong. Hand strength is Monte-Carlo equity
  against one random hand, from a generator seeded in ``reset``. ``Exploit`` is memoryless: it needs
  nothing from earlier hands because the prompt names the opponent. ``Exploit(assume="Tom")`` plays one
  counter whatever the prompt says (a *blind counter*: what a memoryless player can do when the name is
  hidden and it has to commit to one counter).
- ``Sandbag(early, late, switch)``: ``early`` in hands ``1 … switch``, ``late`` afterwards, from the hand
  number in the prompt (memoryless but position-aware).
"""

from __future__ import annotations

import random
from typing import Any

from texasholdem.card.card import Card

from rftlab.envs.poker.engine import best_rank, strength
from rftlab.envs.poker.task import PokerQuery

FULL_DECK = [r + s for r in "23456789TJQKA" for s in "shdc"]
_CARDS = {text: Card(text) for text in FULL_DECK}


NO_DECISION = {"action": "CHECK", "amount": None, "thinking": "no decision pending"}


def _query(observation: Any) -> PokerQuery | None:
    """The decision to answer; ``None`` for an episode whose every hand ended before the system acted
    (the env accepts any action then and ends the episode)."""
    query = getattr(observation, "next_query", observation)
    if query is None:
        return None
    if not isinstance(query, PokerQuery):
        raise ValueError("a poker policy acts on a PokerObservation with a next_query")
    return query


def _decision(name: str, amount: int | None = None, why: str = "") -> dict[str, Any]:
    return {"action": name, "amount": amount, "thinking": why}


def equity(hole: tuple[str, ...], board: tuple[str, ...], rng: random.Random, samples: int = 200) -> float:
    """Monte-Carlo probability of beating one uniformly random hand at showdown (ties count half)."""
    known = set(hole) | set(board)
    deck = [c for c in FULL_DECK if c not in known]
    mine = [_CARDS[c] for c in hole]
    board_cards = [_CARDS[c] for c in board]
    need = 5 - len(board)
    score = 0.0
    for _ in range(samples):
        draw = rng.sample(deck, 2 + need)
        theirs = [_CARDS[c] for c in draw[:2]]
        full = board_cards + [_CARDS[c] for c in draw[2:]]
        a, b = best_rank(mine, full), best_rank(theirs, full)
        score += 1.0 if a < b else 0.5 if a == b else 0.0
    return score / samples


class RandomLegal:
    def __init__(self, seed: int = 0):
        self._seed = seed
        self.rng = random.Random(seed)

    def reset(self, seed: int | None = None) -> None:
        self.rng = random.Random(self._seed if seed is None else seed)

    def act(self, observation: Any) -> dict[str, Any]:
        q = _query(observation)
        if q is None:
            return dict(NO_DECISION)
        name = self.rng.choice(q.legal_actions)
        if name != "RAISE":
            return _decision(name)
        low = min(q.metadata["min_raise"], q.metadata["max_raise"])
        return _decision("RAISE", self.rng.randint(low, q.metadata["max_raise"]))


class AlwaysCall:
    def reset(self, seed: int | None = None) -> None:
        return None

    def act(self, observation: Any) -> dict[str, Any]:
        q = _query(observation)
        if q is None:
            return dict(NO_DECISION)
        return _decision("CALL" if "CALL" in q.legal_actions and q.metadata["chips_to_call"] > 0 else "CHECK")


class Exploit:
    """Counter-strategies by opponent name (Tom = calling station, Adam = fit-or-fold, Alex = LAG)."""

    NAMES = ("Tom", "Adam", "Alex")

    def __init__(self, seed: int = 0, samples: int = 200, assume: str | None = None):
        if assume is not None and assume not in self.NAMES:
            raise ValueError(f"assume must be one of {', '.join(self.NAMES)}, got {assume!r}")
        self._seed = seed
        self.samples = samples
        self.assume = assume
        self.rng = random.Random(seed)

    def reset(self, seed: int | None = None) -> None:
        self.rng = random.Random(self._seed if seed is None else seed)

    def act(self, observation: Any) -> dict[str, Any]:
        q = _query(observation)
        if q is None:
            return dict(NO_DECISION)
        legal = q.legal_actions
        m = q.metadata
        owes = m["chips_to_call"] > 0
        passive = "CALL" if owes else "CHECK"
        opponent = self.assume or m["opponent_name"]
        if opponent == "Adam":  # folds without a fit: keep betting the minimum, he never bets back
            if "RAISE" in legal:
                return _decision(
                    "RAISE", min(m["min_raise"], m["max_raise"]), "pressure a fit-or-fold player"
                )
            return _decision(passive)
        eq = equity(q.hole, q.board, self.rng, self.samples)
        if opponent == "Tom":  # calls everything and never raises: value-bet big, never bluff
            if eq >= 0.55 and "RAISE" in legal:
                return _decision("RAISE", m["max_raise"], f"equity {eq:.2f}: shove for value")
            if owes and eq < 0.35:
                return _decision("FOLD", why=f"equity {eq:.2f}")
            return _decision(passive)
        # Alex: opens and bets light, but folds to any bet once he has checked (his checking range
        # is below his calling thresholds), and bets turn/river only with two pair or better (or a
        # turn draw): bet whenever checked to, call the flop wide, give up on later streets unless strong.
        if m["phase"] == "PREFLOP":
            if owes:
                return _decision("CALL" if eq >= (0.4 if m["chips_to_call"] <= 5 else 0.5) else "FOLD")
            if eq >= 0.6 and "RAISE" in legal:
                return _decision("RAISE", min(m["min_raise"], m["max_raise"]), f"equity {eq:.2f}")
            return _decision("CHECK")
        if not owes:
            if "RAISE" in legal:
                return _decision("RAISE", min(m["min_raise"], m["max_raise"]), "bet: his checks fold to bets")
            return _decision("CHECK")
        made = strength([_CARDS[c] for c in q.hole], [_CARDS[c] for c in q.board])
        if m["phase"] == "FLOP":
            return _decision("CALL" if made >= 0.45 or eq >= 0.55 else "FOLD", why=f"made {made:.2f}")
        return _decision("CALL" if made >= 0.70 else "FOLD", why=f"made {made:.2f} vs two pair+")


class Sandbag:
    """Plays ``early`` in hands ``1 … switch`` and ``late`` from hand ``switch + 1`` on, reading the hand
    number from the prompt (``Hand #p``, query ``hand_num``). Memoryless — it keeps nothing between hands —
    but position-aware: with ``early`` = random legal and ``late`` = exploit it loses in the first half and
    wins in the second, which is exactly what the gain reward (late − early, docs/poker.md §B.3) pays for.
    Both halves are reset with the same seed."""

    def __init__(self, early: Any, late: Any, switch: int = 8):
        if switch < 0:
            raise ValueError(f"switch must be >= 0, got {switch}")
        self.early, self.late, self.switch = early, late, switch

    def reset(self, seed: int | None = None) -> None:
        self.early.reset(seed)
        self.late.reset(seed)

    def act(self, observation: Any) -> dict[str, Any]:
        q = _query(observation)
        if q is None:
            return dict(NO_DECISION)
        return (self.early if q.metadata["hand_num"] <= self.switch else self.late).act(observation)


POKER_POLICIES = {"random": RandomLegal, "call": AlwaysCall, "exploit": Exploit}
