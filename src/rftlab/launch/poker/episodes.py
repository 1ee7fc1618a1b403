"""Rendered poker episodes for the Fireworks context-length check (``rftlab.launch.context_budget``;
docs/poker.md §B.1, B.2, B.4; docs/platforms.md §1.3).

On the McpGym path the model is never sent a whole 16-hand transcript: every call's input is the hand
window (B.4), the row's system message plus the messages from the last ``FEEDBACK FROM PREVIOUS
INSTANCE`` delivery onward (``rftlab.rollout.windowing.window_chat``, which ``SpectrumMcpGymProcessor``
applies before each call), with the ``poker_act`` tool offered beside it. A window only grows within a
hand, so the longest input of a hand is its last call's. For each dataset row the renderer plays whole
episodes and returns the input of the **last call of every hand**; the context check takes the longest.
eval-protocol also calls the model once after the env ended; that input is a window of its own (the final
tool result reports the last hand's end, so it is a hand delivery) and is rendered too.

How an episode is built, as eval-protocol 0.3.33's ``MCPGymRolloutProcessor`` builds it from the row
(``mcp_env.make``, ``ExecutionManager``, ``McpGym`` session manager; read from the installed source):

- the system message: the row's (``get_system_message``);
- the first user message: the row's ``dataset_info.user_prompt_template`` formatted with
  ``observation=<the server's initial observation text>`` and the row's ``environment_context`` (an
  absent template is ``""``, as eval-protocol's default: the model then sees an empty first message);
- after every call: the assistant message with its one ``poker_act`` tool call, then the tool message
  whose content is ``json.dumps({"observation", "instance_complete"})`` (``tool_result_content``);
- the env and the texts are the McpGym server's own (``rftlab.rollout.poker.turns.PokerSession``), with
  the uploaded evaluator's configuration: ``RFT_HANDS`` hands (its env file is empty), retry limit 3.

What the renderer assumes, because it cannot be known offline:

- **The deal.** The server deals from eval-protocol's session id, an MD5 of the row, its environment
  context and the model id the platform injects in training; the model id is not known before the job
  runs, so the renderer deals from the row id (the draw ``environment_context`` records). The hands are
  then a sample of the same opponents and card distribution, not the very hands the job will play.
- **The replies.** The cloud's policy is the model in training. The renderer plays every reference
  strategy of ``RENDER_POLICIES`` (each reseeded per prompt, ``PromptSeeded``), whose tool calls carry
  short ``thinking`` texts, and the first reply of every hand also writes a notepad of
  ``NOTEPAD_MAX_CHARS`` characters, the longest the server keeps, so every window holds one full notepad
  update and, from hand 2 on, the longest notepad block the server can show. A model that rewrites its
  notepad in several replies of one hand, a model that writes longer ``thinking`` texts, or whose actions are refused (each refusal
  re-sends the prompt, at most twice per decision), needs more room than this bound: the check bounds the
  context of play like the reference strategies', not of any play.
- **The template.** The chat template's framing: ``MESSAGE_OVERHEAD`` tokens per message and
  ``TOOLS_OVERHEAD`` for the tool block (``rftlab.launch.context_budget``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rftlab.launch.context_budget import RenderedEpisodes

RENDER_POLICIES = ("call", "exploit", "random")
NOTE_FILL = "n"  # the notepad each rendered reply writes: NOTEPAD_MAX_CHARS of this character
EXPLOIT_SAMPLES = 16  # the exploit strategy's equity samples: its decisions only shape the hands (speed: 4x fewer than the preflight)


def _object_field(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]`` when it is a JSON object, else an empty one."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def first_user_text(row: Mapping[str, Any], initial: str) -> str:
    """The first user message eval-protocol sends: the row's template formatted as its default
    formatter does (``template.format(observation=..., **environment_context)``; no template → ``""``)."""
    info = _object_field(_object_field(row, "input_metadata"), "dataset_info")
    template = info.get("user_prompt_template") or ""
    context = _object_field(info, "environment_context")
    try:
        return str(template).format(observation=initial, **context)
    except (KeyError, IndexError, ValueError) as exc:  # eval-protocol would fail on the same row
        raise ValueError(
            f"row {row_key(row)!r}: user_prompt_template cannot be formatted ({exc!r})"
        ) from None


def row_key(row: Mapping[str, Any]) -> str:
    return str(_object_field(row, "input_metadata").get("row_id") or "row")


def play_transcript(
    row: Mapping[str, Any],
    policy: Any,
    *,
    key: str | None = None,
    hands: int | None = None,
    notepad: Callable[[int, bool], str] = lambda k, first: "",
) -> list[dict[str, Any]]:
    """One whole episode of ``row`` as the McpGym path records it (module docstring): ``policy`` acts on
    the env's observation; reply ``k`` (1-based) writes ``notepad(k, first)``, ``first`` telling whether
    it is its hand's first reply; dealt from ``key`` (default the row id)."""
    from rftlab.envs.poker.env import RFT_HANDS
    from rftlab.rollout.poker.turns import POKER_TOOL, PokerSession, mcp_config, tool_result_content

    session = PokerSession(mcp_config(hands or RFT_HANDS), key or row_key(row))
    system = [dict(m) for m in row.get("messages") or [] if m.get("role") == "system"][:1]
    messages = system + [{"role": "user", "content": first_user_text(row, session.last_text)}]
    observation, k, first = session.first, 0, True
    while not session.done and k < 10_000:
        k += 1
        decision = policy.act(observation)
        amount = decision.get("amount")
        args = {"action": decision["action"], "thinking": str(decision.get("thinking") or ""),
                "amount": int(amount) if amount is not None else -1, "notepad_update": notepad(k, first)}  # fmt: skip
        call_id = f"call_{k:024d}"  # the length of an OpenAI tool-call id ("call_" + 24 characters)
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": POKER_TOOL, "arguments": json.dumps(args)}}
        ]})  # fmt: skip
        text, complete, _reward, _done = session.act(**args)
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "content": tool_result_content(text, complete)}
        )
        observation, first = session.last_result.observation, complete
    return messages


def call_points(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Where the model is called: before every assistant message, and once more after the tool result
    that ends the episode (eval-protocol's ``ExecutionManager`` makes "one last policy call" when the env
    ends, so that every rollout ends with an assistant message)."""
    points = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if messages and messages[-1].get("role") == "tool":
        points.append(len(messages))
    return points


def call_inputs(messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """The model input of every call of a transcript (``call_points``): the B.4 window of the messages
    before it."""
    from rftlab.rollout.poker.turns import HAND_MARKER
    from rftlab.rollout.windowing import window_chat

    return [window_chat(messages[:i], marker=HAND_MARKER) for i in call_points(messages)]


def hand_final_inputs(messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """The input of the last call before every hand delivery, and of the very last call: the longest
    input of each window, since a window only grows until the next delivery (the call after the episode
    ended has a window of its own, started by the final result, which reports the last hand's end)."""
    from rftlab.rollout.poker.turns import HAND_MARKER
    from rftlab.rollout.windowing import window_chat

    points, hands, delivered = call_points(messages), [], 0
    at = set(points)
    for i, m in enumerate([*messages, {}]):  # the hand of a call at i: the deliveries before it
        if i in at:
            hands.append(delivered)
        delivered += m.get("role") == "tool" and HAND_MARKER in str(m.get("content"))
    last = [p for n, p in enumerate(points) if n == len(points) - 1 or hands[n + 1] != hands[n]]
    return [window_chat(messages[:i], marker=HAND_MARKER) for i in last]


def rendered_episodes(rows: Iterable[Mapping[str, Any]], *, hands: int | None = None) -> RenderedEpisodes:
    """For every row and every strategy of ``RENDER_POLICIES``: the input of each hand's last call, with
    the ``poker_act`` tool offered (module docstring)."""
    from rftlab.policies.poker.chat import PromptSeeded
    from rftlab.policies.poker.reference import POKER_POLICIES, Exploit
    from rftlab.rollout.poker.turns import NOTEPAD_MAX_CHARS, POKER_ACT_TOOL

    factories = {**POKER_POLICIES, "exploit": lambda: Exploit(samples=EXPLOIT_SAMPLES)}
    full = NOTE_FILL * NOTEPAD_MAX_CHARS
    episodes = []
    for row in rows:
        for name in RENDER_POLICIES:
            transcript = play_transcript(
                row,
                PromptSeeded(factories[name]),
                hands=hands,
                notepad=lambda k, first: full if first else "",
            )
            episodes.extend(hand_final_inputs(transcript))
    return RenderedEpisodes(
        episodes,
        tools=(POKER_ACT_TOOL,),
        unit="model inputs (each B.4 hand window's last call, every row and reference strategy)",
    )
