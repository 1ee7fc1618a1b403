"""What the poker McpGym path sends the model and how its ``poker_act`` tool steps the env (docs/poker.md
§B.1, B.2, B.4), without eval-protocol.

Both clients of the poker env build their conversation from these pieces, so the model sees the same
text: the McpGym server (``rftlab.rollout.poker.mcp``, the Fireworks path) and the tinker-cookbook env
(``rftlab.training.poker.cookbook_env``).

- ``mcp_config(hands)`` / ``poker_hands()``: the env configuration of the server (``$RFTLAB_POKER_HANDS``);
- ``PokerSession``: one episode's env and notepad; ``act(**poker_act arguments)`` is the tool,
  ``refuse(why)`` steps the env with an unreadable action (a client that parses the model's text);
- ``initial_text(obs)`` / ``step_text(obs, notepad)``: the first user message and every tool result's
  observation text; ``tool_result_content(text, complete)``: a tool message's content as eval-protocol
  delivers it (``json.dumps`` of the server's ``{"observation", "instance_complete"}``);
- ``POKER_ACT_TOOL``: the tool as the model is offered it (the OpenAI schema eval-protocol builds from the
  FastMCP server's ``list_tools``; a test checks it against the live server).

The model input of a call is ``rftlab.rollout.windowing.window_chat(messages, marker=HAND_MARKER)`` (B.4).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from rftlab.envs.poker.env import ILLEGAL_RETRY_LIMIT, RFT_HANDS, PokerEnv, PokerEnvConfig
from rftlab.envs.poker.task import UnreadableAction

NOTEPAD_MAX_CHARS = 2000
HAND_MARKER = "FEEDBACK FROM PREVIOUS INSTANCE"  # B.4: the model sees the current hand only
PLACEHOLDER_KEY = "unseeded"  # the McpGym base class builds an env before any session exists; never scored
POKER_TOOL = "poker_act"
TOOL_DESCRIPTION = (
    "Take your poker action for the current decision and optionally update your notepad. thinking: your "
    "reasoning. action: FOLD, CALL, CHECK or RAISE. amount: the total to raise to (RAISE only; -1 "
    "otherwise). notepad_update: replaces your notepad entirely (empty keeps it); the notepad is your "
    "only memory across hands."
)
# FastMCP's input schema of ``poker_act(action: str, thinking: str = "", amount: int = -1,
# notepad_update: str = "")``, as eval-protocol offers it to the model (``LiteLLMPolicy``'s conversion).
POKER_ACT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": POKER_TOOL,
        "description": TOOL_DESCRIPTION,
        "parameters": {
            "properties": {
                "action": {"title": "Action", "type": "string"},
                "thinking": {"default": "", "title": "Thinking", "type": "string"},
                "amount": {"default": -1, "title": "Amount", "type": "integer"},
                "notepad_update": {"default": "", "title": "Notepad Update", "type": "string"},
            },
            "required": ["action"],
            "title": "poker_actArguments",
            "type": "object",
        },
    },
}


def poker_hands() -> int:
    raw = (os.environ.get("RFTLAB_POKER_HANDS") or "").strip()
    if not raw:
        return RFT_HANDS
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 4 and 1 <= int(raw) <= 200):
        raise ValueError(f"RFTLAB_POKER_HANDS must be an integer from 1 to 200, got {raw[:40]!r}")
    return int(raw)


def mcp_config(hands: int | None = None, illegal_retry_limit: int = ILLEGAL_RETRY_LIMIT) -> PokerEnvConfig:
    return PokerEnvConfig(mode="rft", hands=hands or poker_hands(), illegal_retry_limit=illegal_retry_limit)


def initial_text(obs: Any) -> str:
    """The first message: the first hand's prompt ("" when every hand ended before the first decision)."""
    return obs.next_query.prompt if obs.next_query is not None else ""


def step_text(obs: Any, notepad: str) -> str:
    """A step's observation text (B.1): mid-hand ``FEEDBACK: {obs}\\n\\n{prompt}``; after a hand ends
    ``FEEDBACK FROM PREVIOUS INSTANCE:\\n{obs}``, the notepad block (if non-empty) and the next prompt."""
    if not obs.instance_complete:
        prompt = obs.next_query.prompt if obs.next_query is not None else ""
        return f"FEEDBACK: {obs.content}\n\n{prompt}"
    parts = [f"{HAND_MARKER}:\n{obs.content}"]
    if notepad:
        parts.append(f"=== YOUR NOTEPAD ===\n{notepad}\n===================")
    if obs.next_query is not None:
        parts.append(obs.next_query.prompt)
    return "\n\n".join(parts)


def tool_result_content(text: str, instance_complete: bool) -> str:
    """A ``poker_act`` result as the model reads it: eval-protocol's ``format_tool_response`` of the
    server's observation (``json.dumps`` of ``{"observation", "instance_complete"}``)."""
    return json.dumps({"observation": text, "instance_complete": bool(instance_complete)})


class PokerSession:
    """One session's env and notepad: ``act`` applies the notepad update, steps the env and returns
    ``(observation text, instance_complete, reward, done)``; ``refuse`` does the same for a reply without
    a readable action. ``refusals_shown`` counts the refusal texts the model was shown (the evaluator's
    illegal count, B.3: a streak ended by a forced action shows two)."""

    def __init__(self, config: PokerEnvConfig, key: Any = PLACEHOLDER_KEY, **deal: Any):
        self.env = PokerEnv(config)
        self.reset(key, **deal)

    def reset(self, key: Any, **deal: Any) -> None:
        """``deal``: ``opponent=`` and ``card_seed=`` given explicitly (else both from ``key``)."""
        self.first = self.env.reset(key, **deal)
        self.notepad = ""
        self.last_text = initial_text(self.first)
        self.instance_complete = False
        self.done = False
        self.refusals_shown = 0
        self.last_result: Any = None

    def act(self, action: str, thinking: str = "", amount: int = -1, notepad_update: str = ""):
        if self.done:  # a call after the episode ended changes nothing
            return self.last_text, self.instance_complete, 0.0, True
        if isinstance(notepad_update, str) and notepad_update.strip():
            self.notepad = notepad_update[:NOTEPAD_MAX_CHARS]
        name = action.strip().upper() if isinstance(action, str) else action
        if isinstance(amount, float) and not math.isfinite(amount):  # int(inf) would raise: refuse it
            return self._step(UnreadableAction(f"'amount' {amount!r} is not a finite number of chips"))
        args = {
            "action": name,
            "amount": int(amount) if isinstance(amount, int | float) and amount >= 0 else None,
            "thinking": thinking if isinstance(thinking, str) else "",
        }
        return self._step(args)

    def refuse(self, why: str):
        """Step the env with ``UnreadableAction(why)``: refused as ``Could not read the action ({why}).``
        and counted toward the retry limit (docs/poker.md §A.6, B.1); the notepad is unchanged."""
        if self.done:
            return self.last_text, self.instance_complete, 0.0, True
        return self._step(UnreadableAction(why))

    def _step(self, action: Any):
        result = self.env.step(action)
        obs = result.observation
        self.last_result = result
        self.refusals_shown += int(bool(obs.illegal) and obs.forced is None)
        self.last_text = step_text(obs, self.notepad)
        self.instance_complete = bool(obs.instance_complete)
        self.done = bool(result.done)
        return self.last_text, self.instance_complete, float(result.reward), self.done
