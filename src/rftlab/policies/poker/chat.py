"""Chat adapter for the poker RFT env: rebuild a scripted poker policy's observation from chat messages
and turn its decision back into an assistant message with a ``poker_act`` tool call.

The reference policies (``rftlab.policies.poker.reference``) act on a ``PokerQuery``; over an OpenAI-compatible
API they only see the rendered prompt (``rftlab.envs.poker.render.prompt_text``). ``parse_prompt`` is a
strict parser of that layout (the last ``Hand #`` block of a message): hand number and phase, opponent
name, position, hole cards and board (the engine's ``[ J ♣ ]`` strings → ``"Jc"``), pot, chips, the
situation line (→ chips to call and the system's own bet), the minimum raise total. Legal actions are
not printed; they follow from the same facts as the engine's ``validate_move`` (FOLD always; CHECK iff
nothing to call; CALL iff something to call; RAISE iff the system has chips and at least the amount to call:
the engine accepts a raise to ``min(min raise, all-in)``, even an all-in that only matches the bet). ``instance_id``/``instance_index``
are not in the prompt and are left empty.

Where the prompt is in a conversation: the McpGym path's first ``user`` message, then ``tool`` results
(eval-protocol delivers them as JSON text ``{"observation": "<text>", ...}``). The latest env-authored
message holding a ``Hand #`` block is the decision to answer. Policies are stateless per request except
for their seeded generator (``Exploit``'s equity samples), which is reseeded from the prompt text, so an
answer depends on the prompt only (safe under concurrency and windowing).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rftlab.envs.poker.task import PokerQuery

POKER_TOOL = "poker_act"
SUITS = {"♠": "s", "♥": "h", "♦": "d", "♣": "c"}


class PromptParseError(ValueError):
    """The text is not a poker prompt as the env renders it."""


_HEADER = re.compile(r"^Hand #(\d+) - (PREFLOP|FLOP|TURN|RIVER)$")
_CARD = re.compile(r"\[ ([2-9TJQKA]) ([♠♥♦♣]) \]")
_SITUATION = (
    (re.compile(r"^Action to you \(you can check or raise\)$"), "open"),
    (re.compile(r"^Opponent called your bet of (\d+) \(you can check or raise\)$"), "called"),
    (re.compile(r"^Opponent raised to (\d+) \(you need (\d+) to call\)$"), "raised"),
    (re.compile(r"^Opponent bet (\d+) \(you need (\d+) to call\)$"), "bet"),
)
_MIN_RAISE = re.compile(r"^  RAISE X - raise to X total \(min raise to (\d+)\)$")
_CALL_COST = re.compile(r"^  CALL - call the bet \(costs (\d+) chips\)$")


def _cards(text: str, what: str) -> tuple[str, ...]:
    if text == "No cards yet" and what == "board":
        return ()
    found = _CARD.findall(text)
    if " ".join(f"[ {r} {s} ]" for r, s in found) != text or not found:
        raise PromptParseError(f"{what} {text!r} is not a list of cards")
    return tuple(r + SUITS[s] for r, s in found)


def _field(lines: list[str], i: int, label: str) -> str:
    if i >= len(lines) or not lines[i].startswith(label):
        got = lines[i] if i < len(lines) else "<end>"
        raise PromptParseError(f"expected {label!r}, got {got!r}")
    return lines[i][len(label) :]


def _int(text: str, what: str) -> int:
    if not re.fullmatch(r"\d+", text):
        raise PromptParseError(f"{what} {text!r} is not a whole number")
    return int(text)


def parse_prompt(text: str) -> PokerQuery:
    """The ``PokerQuery`` of the last poker prompt in ``text`` (module docstring). Raises
    ``PromptParseError``."""
    if not isinstance(text, str):
        raise PromptParseError("prompt text must be a string")
    start = text.rfind("Hand #")
    if start < 0:
        raise PromptParseError("no 'Hand #' block in the text")
    block = text[start:]
    lines = block.split("\n")
    head = _HEADER.match(lines[0])
    if not head:
        raise PromptParseError(f"bad header {lines[0]!r}")
    hand_num, phase = int(head.group(1)), head.group(2)
    if lines[1] != "Table: Heads-up Texas Hold'em (2 players)":
        raise PromptParseError(f"bad table line {lines[1]!r}")
    opponent = _field(lines, 2, "Opponent: ")
    position = _field(lines, 3, "Your position: ")
    if position not in ("Button / small blind", "Big blind"):
        raise PromptParseError(f"bad position {position!r}")
    hole = _cards(_field(lines, 4, "Your hand: "), "hand")
    board = _cards(_field(lines, 5, "Board: "), "board")
    pot = _int(_field(lines, 6, "Pot: ").removesuffix(" chips"), "pot")
    chips = _int(_field(lines, 7, "Your chips: "), "chips")
    i = 8
    if i < len(lines) and lines[i].startswith("Opponent's action"):
        i += 1
    if lines[i : i + 1] != [""]:
        raise PromptParseError("expected a blank line before the situation")
    situation = _field(lines, i + 1, "Situation: ")
    to_call = own = 0
    for pattern, kind in _SITUATION:
        m = pattern.match(situation)
        if not m:
            continue
        if kind == "called":
            own = int(m.group(1))
        elif kind in ("raised", "bet"):
            bot_bet, to_call = int(m.group(1)), int(m.group(2))
            own = bot_bet - to_call
        break
    else:
        raise PromptParseError(f"bad situation {situation!r}")
    rest = lines[i + 2 :]
    costs = [int(m.group(1)) for line in rest if (m := _CALL_COST.match(line))]
    mins = [int(m.group(1)) for line in rest if (m := _MIN_RAISE.match(line))]
    if costs != [to_call] or len(mins) != 1:
        raise PromptParseError("the action menu does not match the situation")
    min_total = mins[0]
    max_total = own + chips
    legal = ["FOLD"]
    legal.append("CALL" if to_call > 0 else "CHECK")
    if chips >= to_call and chips > 0:  # the engine accepts an all-in "raise" that only matches the bet
        legal.append("RAISE")
    metadata = {
        "hand_num": hand_num,
        "phase": phase,
        "pot": pot,
        "chips_to_call": to_call,
        "player_chips": chips,
        "min_raise": min_total,
        "max_raise": max_total,
        "legal_actions": legal,
        "num_players": 2,
        "position": position,
        "opponent_name": opponent,
        "instance_id": "",
    }
    return PokerQuery(block, "", 0, metadata, hole=hole, board=board)


def message_text(message: Mapping[str, Any]) -> str:
    """An env-authored message's text: a tool result's ``observation`` (JSON) or the plain content."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    if not isinstance(content, str):
        return ""
    if message.get("role") == "tool":
        try:
            decoded = json.loads(content)
        except ValueError:
            return content
        if isinstance(decoded, Mapping) and isinstance(decoded.get("observation"), str):
            return decoded["observation"]
    return content


def latest_prompt(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The latest env-authored message's text; ``None`` when it holds no prompt (the episode is over:
    eval-protocol asks the model once more after the last tool result). Raises ``PromptParseError``
    when there is no env message at all."""
    for m in reversed(messages):
        if m.get("role") in ("user", "tool"):
            text = message_text(m)
            return text if "Hand #" in text else None
    raise PromptParseError("no env message in the conversation")


def prompt_seed(text: str) -> int:
    """The policy seed of a decision: md5 of its ``Hand #`` block (the same for the env's own query)."""
    block = text[text.rfind("Hand #") :]
    return int(hashlib.md5(block.encode()).hexdigest()[:8], 16)


class PromptSeeded:
    """A poker policy reseeded from every decision's prompt, as ``PokerChat`` plays it: direct play
    (``rftlab.rollout.episode``) with this wrapper makes the same decisions as the served policy."""

    def __init__(self, factory: Callable[[], Any]):
        self.policy = factory()

    def reset(self, seed: int | None = None) -> None:
        return None

    def act(self, observation: Any) -> dict[str, Any]:
        query = getattr(observation, "next_query", observation)
        if query is not None:
            self.policy.reset(prompt_seed(query.prompt))
        return self.policy.act(observation)


class PokerChat:
    """A chat adapter (``PolicyServer(chat=PokerChat)``): ``respond(messages)`` → assistant message."""

    tool = POKER_TOOL

    def __init__(self, factory: Callable[[], Any]):
        self.factory = factory

    def respond(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        text = latest_prompt(messages)
        if text is None:  # no decision pending: a plain answer, no tool call
            return {"role": "assistant", "content": "No decision is pending."}
        query = parse_prompt(text)
        policy = self.factory()
        policy.reset(prompt_seed(query.prompt))
        decision = policy.act(query)
        amount = decision.get("amount")
        args = {
            "action": decision["action"],
            "thinking": str(decision.get("thinking") or ""),
            "amount": int(amount) if amount is not None else -1,
            "notepad_update": "",
        }
        call = {
            "id": "call_" + uuid.uuid4().hex[:12],
            "type": "function",
            "function": {"name": POKER_TOOL, "arguments": json.dumps(args)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
