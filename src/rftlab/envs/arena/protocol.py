"""The arena message protocol (docs/arena.md §8): prompts, strict reply parsers, action-order permutations and the
reference ("oracle") broadcast.

The system wording is the project's own (``rftlab-arena-prompt-v2``); the user message carries the same
compact, key-sorted JSON content as upstream ``arena-v2-structured-priority``. Parsers return the single
error code of the first failing check and never raise: an invalid broadcast is delivered as the empty
broadcast and an invalid action reply becomes WAIT.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rftlab.envs.model_json import duplicate_keys

from .rules import ACTION_KINDS, TRANSFER, WAIT, WAIT_ACTION, Action, legal_actions
from .world import (
    COMPROMISED,
    EXPOSED,
    OWNERS,
    SECURE,
    STATUSES,
    GameState,
    Observation,
    compact_json,
    observation_for,
    team_agent_ids,
)

PROMPT_VERSION = "rftlab-arena-prompt-v2"
UPSTREAM_PROMPT_VERSION = "arena-v2-structured-priority"
MAX_FACTS = 3
BROADCAST_PHASE, ACT_PHASE = "BROADCAST", "ACT"
FACT_KEYS = frozenset({"node", "owner", "status", "value", "critical", "observed_turn"})
BROADCAST_KEYS = frozenset({"facts", "intent", "request_resource"})
INTENT_KEYS = frozenset({"type", "target", "amount"})

# Every error code the two parsers can return, in check order.
BROADCAST_ERROR_CODES: tuple[str, ...] = (
    "invalid_json",
    "not_object",
    "broadcast_schema",
    "facts_schema",
    "fact_schema",
    "fact_node",
    "fact_value",
    "fact_priority",
    "fact_turn",
    "unsupported_fact",
    "illegal_intent",
    "request_schema",
)
ACTION_ERROR_CODES: tuple[str, ...] = (
    "invalid_json",
    "not_object",
    "action_schema",
    "action_id",
    "action_id_range",
)

TEAM_OBJECTIVE = "Hold as much node value as possible, keep critical nodes safe, and do not spend actions on redundant moves."

BASE_SYSTEM_PROMPT = """\
You control a single agent on a four-agent team. Your team competes with four opposing agents in a \
deterministic, abstract game of network control played on a graph of nodes.

Actions:
- WAIT: do nothing this turn.
- SCAN <node>: reveal a neighbouring node you have not observed yet.
- PROBE <node>: spend 1 resource on a non-team neighbour to strip one fortification level, or to expose it \
when it has none.
- CAPTURE <node>: spend 1 resource to take a non-team neighbour; it succeeds only if the node is exposed and \
unfortified after this turn's probes and fortifications resolve.
- FORTIFY <node>: spend 1 resource to add a fortification level to a team node (yours or a neighbour) and \
clear its exposure.
- RECOVER <node>: spend 1 resource to repair a compromised team node.
- TRANSFER <agent>: hand one unit of resource to a teammate on a neighbouring node.

What you see is private to you and may be incomplete; each node observation is stamped with the turn it \
was made. When a direct observation and an older report disagree, trust the newer one. Never make up \
state. The `legal_actions` list is the whole set of moves open to you this turn. Reply with the requested \
JSON alone: no reasoning, no markdown."""

BROADCAST_SYSTEM_PROMPT = (
    BASE_SYSTEM_PROMPT
    + """

Phase: BROADCAST.
Tell your teammates only what your own observation contains, in at most three node facts. You may also \
name one legal action you intend to take and ask for at most one unit of resource. Empty facts, a null \
intent and a request of 0 are all valid when nothing needs saying.

Reply with exactly this shape:
{"facts":[{"node":"<id>","owner":"BLUE|RED|NEUTRAL","status":"SECURE|FORTIFIED|EXPOSED|COMPROMISED",\
"value":1,"critical":false,"observed_turn":0}],"intent":null or {"type":"<KIND>","target":"<id>"},\
"request_resource":0 or 1}

A WAIT intent is written {"type":"WAIT"}; a TRANSFER intent also carries "amount":1. Describe the intent \
by its type and target, never by an action id."""
)

ACT_SYSTEM_PROMPT = (
    BASE_SYSTEM_PROMPT
    + """

Phase: ACT.
All eight agents, on both teams, move at the same time. Pick one legal action that furthers your team's \
objective. Use fresh facts from teammates, go along with declared intents when they help, and do not \
repeat a teammate's target while another useful action is available. A teammate's message is evidence to \
weigh, not an order. Decide without explaining.

Reply with exactly: {"action_id":"<one id copied from legal_actions>"}"""
)


@dataclass(frozen=True)
class Broadcast:
    """One agent's structured message: up to 3 of its own observations, an optional intent and a request."""

    facts: tuple[Observation, ...] = ()
    intent: Action | None = None
    request_resource: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "facts": [fact.to_dict() for fact in self.facts],
            "intent": self.intent.to_dict() if self.intent is not None else None,
            "request_resource": self.request_resource,
        }

    @property
    def is_empty(self) -> bool:
        return not self.facts and self.intent is None and self.request_resource == 0


EMPTY_BROADCAST = Broadcast()


@dataclass(frozen=True)
class ParseResult:
    """A strict parse: ``valid`` with the parsed ``value``, or invalid with exactly one error code.
    ``notes`` records what was accepted only as an upstream quirk (docs/arena.md §13 #6): ``duplicate_key:<key>``
    for each object key the reply repeated (the last value wins, as in Python's ``json``)."""

    valid: bool
    value: Any = None
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def error(self) -> str | None:
        return self.errors[0] if self.errors else None


def _fail(code: str) -> ParseResult:
    return ParseResult(False, None, (code,))


# ---------------------------------------------------------------- displayed actions and prompts


def displayed_actions(state: GameState, agent_id: str, permutation: int = 0) -> tuple[Action, ...]:
    """The sorted legal list rotated left by ``permutation mod n``; ids ``A0..`` follow this order (§8.2)."""
    actions = legal_actions(state, agent_id)
    shift = permutation % len(actions)
    return actions[shift:] + actions[:shift]


def permutation_for(seed: int, agent_index: int, k: int = 0) -> int:
    """``p = seed + i + k``: BLUE agent ``i`` (0..3) under evaluation permutation ``k`` (§8.2)."""
    return seed + agent_index + k


def legal_action_entries(displayed: Sequence[Action]) -> list[dict[str, Any]]:
    """Each displayed action's JSON form with its ``"id": "A<i>"``."""
    return [dict(action.to_dict(), id=f"A{index}") for index, action in enumerate(displayed)]


def inbox_for(agent_id: str, broadcasts: Mapping[str, Broadcast]) -> list[dict[str, Any]]:
    """The ACT inbox: every teammate in sorted order, empty broadcasts included (a missing one is empty)."""
    team = agent_id.split("-")[0].upper()
    return [
        {"sender": sender, "broadcast": broadcasts.get(sender, EMPTY_BROADCAST).to_dict()}
        for sender in team_agent_ids(team)
        if sender != agent_id
    ]


def broadcast_prompt(
    state: GameState, agent_id: str, permutation: int = 0
) -> tuple[list[dict[str, str]], tuple[Action, ...]]:
    """BROADCAST-phase chat messages (system + compact JSON user body) and the displayed action list."""
    displayed = displayed_actions(state, agent_id, permutation)
    body = {
        "phase": BROADCAST_PHASE,
        "team_objective": TEAM_OBJECTIVE,
        "observation": observation_for(state, agent_id),
        "legal_actions": legal_action_entries(displayed),
    }
    return [
        {"role": "system", "content": BROADCAST_SYSTEM_PROMPT},
        {"role": "user", "content": compact_json(body)},
    ], displayed


def action_prompt(
    state: GameState, agent_id: str, inbox: list[dict[str, Any]], permutation: int = 0
) -> tuple[list[dict[str, str]], tuple[Action, ...]]:
    """ACT-phase chat messages (with the teammates' inbox) and the displayed action list."""
    displayed = displayed_actions(state, agent_id, permutation)
    body = {
        "phase": ACT_PHASE,
        "team_objective": TEAM_OBJECTIVE,
        "observation": observation_for(state, agent_id),
        "inbox": inbox,
        "legal_actions": legal_action_entries(displayed),
    }
    return [
        {"role": "system", "content": ACT_SYSTEM_PROMPT},
        {"role": "user", "content": compact_json(body)},
    ], displayed


# ---------------------------------------------------------------- parsers


def _strict_object(raw: Any) -> ParseResult:
    if not isinstance(raw, str):
        return _fail("invalid_json")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nesting too deep to decode
        return _fail("invalid_json")
    if not isinstance(value, dict):
        return _fail("not_object")
    # duplicate keys: last-wins is a kept upstream quirk (§13 #6), recorded rather than silent
    notes = tuple(f"duplicate_key:{k}" for k in duplicate_keys(raw))
    return ParseResult(True, value, (), notes)


def intent_from_json(value: object) -> Action | None:
    """A well-formed intent object as an ``Action`` (type upper-cased), or ``None`` when malformed."""
    if not isinstance(value, dict) or not set(value) <= INTENT_KEYS or not isinstance(value.get("type"), str):
        return None
    if not value["type"].isascii():  # "ſcan".upper() == "SCAN", "waıt".upper() == "WAIT": not kinds
        return None
    kind = value["type"].upper()
    if kind not in ACTION_KINDS:
        return None
    target, amount = value.get("target"), value.get("amount")
    if target is not None and not isinstance(target, str):
        return None
    if amount is not None and not isinstance(amount, int):  # bools pass, as upstream
        return None
    if kind == WAIT:
        return WAIT_ACTION if target is None and amount is None else None
    if target is None:
        return None
    if kind == TRANSFER:
        return Action(kind, target, 1) if amount == 1 else None
    return Action(kind, target) if amount is None else None


def parse_broadcast(raw: Any, state: GameState, agent_id: str) -> ParseResult:
    """Strictly parse a BROADCAST reply against the sender's knowledge and legal actions (§8.4). Never
    raises: an ``agent_id`` that is not an agent of ``state`` (``"blue-9"``, ``None``, ``0``) is a sender
    with no knowledge and no legal actions, so any fact fails ``unsupported_fact`` and any non-null intent
    ``illegal_intent``."""
    parsed = _strict_object(raw)
    if not parsed.valid:
        return parsed
    value = parsed.value
    if set(value) != BROADCAST_KEYS:
        return _fail("broadcast_schema")
    raw_facts = value["facts"]
    if not isinstance(raw_facts, list) or len(raw_facts) > MAX_FACTS:
        return _fail("facts_schema")
    sender_known = isinstance(agent_id, str) and agent_id in state.agents
    known = state.knowledge[agent_id] if sender_known else {}
    facts: list[Observation] = []
    seen: set[str] = set()
    for item in raw_facts:
        if not isinstance(item, dict) or set(item) != FACT_KEYS:
            return _fail("fact_schema")
        node = item["node"]
        if not isinstance(node, str) or node in seen:
            return _fail("fact_node")
        owner, status = item["owner"], item["status"]
        if not (
            isinstance(owner, str) and owner in OWNERS and isinstance(status, str) and status in STATUSES
        ):
            return _fail("fact_value")
        if (
            type(item["value"]) is not int
            or item["value"] not in (1, 2, 3)
            or type(item["critical"]) is not bool
        ):
            return _fail("fact_priority")
        if not isinstance(item["observed_turn"], int):  # bools pass, as upstream
            return _fail("fact_turn")
        stored = known.get(node)
        claimed = (owner, status, item["value"], item["critical"], item["observed_turn"])
        if stored is None or claimed != (
            stored.owner,
            stored.status,
            stored.value,
            stored.critical,
            stored.observed_turn,
        ):
            return _fail("unsupported_fact")
        seen.add(node)
        facts.append(stored)
    intent = None
    if value["intent"] is not None:
        intent = intent_from_json(value["intent"])
        if intent is None or not sender_known or intent not in legal_actions(state, agent_id):
            return _fail("illegal_intent")
    request = value["request_resource"]
    if type(request) is not int or request not in (0, 1):
        return _fail("request_schema")
    return ParseResult(True, Broadcast(tuple(facts), intent, request), (), parsed.notes)


def parse_action(raw: Any, displayed: Sequence[Action]) -> ParseResult:
    """Strictly parse an ACT reply ``{"action_id": "A<i>"}`` against the displayed list (§8.4)."""
    parsed = _strict_object(raw)
    if not parsed.valid:
        return parsed
    value = parsed.value
    if set(value) != {"action_id"} or not isinstance(value["action_id"], str):
        return _fail("action_schema")
    action_id = value["action_id"]
    digits = action_id[1:]
    if len(action_id) < 2 or action_id[0] != "A" or any(ch not in "0123456789" for ch in digits):
        return _fail("action_id")
    significant = digits.lstrip("0") or "0"  # leading zeros are accepted, as upstream ("A01" is A1)
    if len(significant) > 9 or not 0 <= int(significant) < len(displayed):
        return _fail("action_id_range")
    return ParseResult(True, displayed[int(significant)], (), parsed.notes)


def broadcast_or_empty(result: ParseResult) -> Broadcast:
    """What teammates receive: the parsed broadcast, or the empty broadcast for an invalid reply."""
    return result.value if result.valid else EMPTY_BROADCAST


def action_or_wait(result: ParseResult) -> Action:
    """What the environment resolves: the parsed action, or WAIT for an invalid reply."""
    return result.value if result.valid else WAIT_ACTION


# ---------------------------------------------------------------- encoders and the reference broadcast


def encode_broadcast(broadcast: Broadcast) -> str:
    """The target broadcast string: compact JSON of ``{facts, intent, request_resource}``."""
    return compact_json(broadcast.to_dict())


def encode_action(action: Action, displayed: Sequence[Action]) -> str:
    """The target action string ``{"action_id":"A<i>"}`` for ``action``'s index in the displayed list."""
    if action not in displayed:
        raise ValueError(f"action {action} is not among the displayed actions {list(displayed)}")
    return compact_json({"action_id": f"A{list(displayed).index(action)}"})


def _is_useful(observation: Observation, team: str, intent: Action) -> bool:
    return (
        observation.node == intent.target
        or observation.owner != team
        or observation.status != SECURE
        or observation.critical
    )


def oracle_broadcast(state: GameState, agent_id: str, intent_action: Action) -> Broadcast:
    """The reference broadcast (§8.5): the agent's most relevant useful facts and ``intent_action``."""
    agent = state.agents[agent_id]
    ranked = sorted(
        state.knowledge[agent_id].values(),
        key=lambda o: (
            o.node == intent_action.target,
            o.status in (COMPROMISED, EXPOSED) or o.critical,
            o.observed_turn,
            o.node,
        ),
        reverse=True,
    )
    facts = tuple(o for o in ranked if _is_useful(o, agent.team, intent_action))[:MAX_FACTS]
    is_wait = intent_action.kind == WAIT
    return Broadcast(
        facts=facts,
        intent=None if is_wait else intent_action,
        request_resource=1 if agent.resource == 0 and is_wait else 0,
    )
