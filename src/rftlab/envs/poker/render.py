"""Poker prompt and observation text (docs/poker.md §A.5–A.7).

Formats — the prompt layout, labels, numbers, card strings, the action menu, observation texts — are
reproduced exactly. The brief's sentences are prose: the project writes its own by default; the
upstream-text mode (``text=<folder>``) loads CLBench's from ``upstream_text.json`` in a folder laid out
like ``../shared/data/clbench`` (exact-replay tests only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rftlab.envs.spectrum.render import Brief

ACTION_TAKEN = "Action taken"
AUTO_RESOLVED = "Additional auto-resolved hand while advancing to the next prompt:"
INVALID_SUFFIX = (
    "The hand state was not changed. Choose one of the legal actions for the current betting state."
)


@dataclass(frozen=True)
class PokerText:
    """The prose poker prompts show; ``source`` is ``"project"`` or the upstream folder."""

    brief: str
    source: str = "project"


PROJECT_TEXT = PokerText(
    brief=Brief(
        objective="Win as many chips as you can from one opponent over a series of separate hands.",
        instance_unit="A single hand of poker, from the deal to the result.",
        reward_definition="Your reward for a hand is the number of chips you won or lost in it.",
        completion_definition="A hand is complete once it has been decided and the chip result is shown.",
        constraints=(
            "Answer with the structured poker action described below.",
            "Learn how the opponent plays from earlier hands and take advantage of it.",
        ),
    ).render()
)


def load_upstream_text(folder: str | Path) -> PokerText:
    data = json.loads((Path(folder) / "upstream_text.json").read_text(encoding="utf-8"))
    b = data["exploitable_poker"]["brief"]
    brief = Brief(
        objective=b["objective"],
        instance_unit=b["instance_unit"],
        reward_definition=b["reward_definition"],
        completion_definition=b["completion_definition"],
        constraints=tuple(b["constraints"]),
    )
    return PokerText(brief=brief.render(), source=str(folder))


def resolve_text(text: PokerText | str | Path | None) -> PokerText:
    """``None``/``"project"`` → the project's wording; a folder → upstream-text mode."""
    if text is None or text == "project":
        return PROJECT_TEXT
    if isinstance(text, PokerText):
        return text
    return load_upstream_text(text)


def situation(to_call: int, own: int, bot_bet: int) -> str:
    if to_call == 0:
        if own == 0:
            return "Action to you (you can check or raise)"
        return f"Opponent called your bet of {own} (you can check or raise)"
    if bot_bet > own:
        return f"Opponent raised to {bot_bet} (you need {to_call} to call)"
    return f"Opponent bet {bot_bet} (you need {to_call} to call)"


def prompt_text(
    *,
    notice: str | None,
    brief: str | None,
    hand_num: int,
    phase: str,
    opponent: str,
    position: str,
    hand: str,
    board: str,
    pot: int,
    chips: int,
    opp_actions: Sequence[str],
    to_call: int,
    own: int,
    bot_bet: int,
    min_total: int,
    text: PokerText,
) -> str:
    del text  # the layout below is the format; only the brief (passed in) is prose
    head = ""
    if notice:
        head += f"NOTICE: You are now playing against {notice}.\n\n"
    if brief:
        head += f"{brief}\n\n"
    lines = [
        f"Hand #{hand_num} - {phase}",
        "Table: Heads-up Texas Hold'em (2 players)",
        f"Opponent: {opponent}",
        f"Your position: {position}",
        f"Your hand: {hand}",
        f"Board: {board or 'No cards yet'}",
        f"Pot: {pot} chips",
        f"Your chips: {chips}",
    ]
    if len(opp_actions) == 1:
        lines.append(f"Opponent's action: {opp_actions[0]}")
    elif opp_actions:
        lines.append(f"Opponent's actions: {' -> '.join(opp_actions)}")
    body = "\n".join(lines)
    menu = (
        "What's your action?\n"
        "  FOLD - fold your hand\n"
        f"  CALL - call the bet (costs {to_call} chips)\n"
        "  CHECK - check (if no bet to call)\n"
        f"  RAISE X - raise to X total (min raise to {min_total})"
    )
    schema = (
        'Respond according to the PokerSchema, where "action" is one of FOLD, CALL, CHECK, RAISE and '
        '"amount" is only used for RAISE.'
    )
    return f"{head}{body}\n\nSituation: {situation(to_call, own, bot_bet)}\n\n{menu}\n\n{schema}"


def hand_end_text(
    hand_num: int,
    delta: int,
    pot: int,
    chips: int,
    total: int,
    showdown: tuple[str, str, str] | None,
) -> str:
    """``Hand p complete: You WON|LOST|TIED!`` [+ SHOWDOWN block] + the chip summary (A.7)."""
    verdict = "WON" if delta > 0 else "LOST" if delta < 0 else "TIED"
    out = f"Hand {hand_num} complete: You {verdict}!"
    if showdown is not None:
        board, mine, theirs = showdown
        out += (
            f"\n\nSHOWDOWN:\n  Board: {board or 'No board'}\n  Your hand: {mine}\n  Opponent's hand: {theirs}"
        )
    out += (
        f"\n\nFinal pot: {pot} chips\nEnding stack: {chips} chips\n"
        f"Net chip change this hand: {delta:+d} chips\nTotal profit: {total:+d} chips"
    )
    return out


def invalid_text(reason: str | None) -> str:
    return f"Invalid poker action: {reason}\n{INVALID_SUFFIX}"
