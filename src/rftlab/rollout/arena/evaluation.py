"""Frozen 60-case arena evaluation under message interventions (docs/arena.md §10.2, §10.4) and the validation scorer (§11).

A *provider* (``rftlab.policies.arena.providers``) turns chat messages into reply text; a provider that
also has ``complete_batch(requests)`` gets each phase's prompts of a case in one call (one round trip to
a sampling service instead of one per prompt); the replies are the same either way.

``evaluate_case`` runs one case: four broadcasts, then the ACT phase under the generated (3 action-order
permutations), dropped, reference, cross-case shuffled and within-case shuffled conditions; every raw
response is kept in the record. ``score_validation_reply`` is the per-row validation scorer with the
strict type rules of §8.4; ``reply_schema_valid`` is its schema check alone, which needs only the reply.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeGuard, runtime_checkable

from rftlab.envs.arena.cases import FROZEN_MANIFEST_SHA256, FrozenCase, frozen_cases
from rftlab.envs.arena.oracle import OPTIMAL_REGRET_TOLERANCE, solve_joint_action
from rftlab.envs.arena.protocol import (
    ACT_PHASE,
    EMPTY_BROADCAST,
    PROMPT_VERSION,
    Broadcast,
    action_or_wait,
    action_prompt,
    broadcast_or_empty,
    broadcast_prompt,
    encode_action,
    encode_broadcast,
    inbox_for,
    oracle_broadcast,
    parse_action,
    parse_broadcast,
)
from rftlab.envs.arena.rules import (
    redundant_agents,
    step,
)
from rftlab.envs.arena.world import (
    ARENA_VERSION,
    BLUE,
    GENERATOR_VERSION,
    RED,
    compact_json,
    generate_state,
    team_agent_ids,
)
from rftlab.policies.arena.providers import Provider, action_json
from rftlab.policies.arena.scripted import deterministic_policy

EVAL_VERSION = "rftlab-arena-eval-v3"
"""v3 = v2 (upstream ``arena-eval-v2`` fields plus the per-permutation block) plus the within-case
shuffled condition (docs/arena.md §10.2)."""
CONDITIONS: tuple[str, ...] = ("generated", "dropped", "reference", "shuffled", "shuffled_within")
SEED_CONDITIONS: tuple[str, ...] = ("generated", "dropped", "reference", "shuffled")
"""The four conditions of the seed's evaluation; ``shuffled_within`` is rftlab's addition."""
CONDITION_LABELS: dict[str, str] = {
    "generated": "generated",
    "dropped": "dropped",
    "reference": "reference",
    "shuffled": "shuffled (cross-case)",
    "shuffled_within": "shuffled (within case)",
}
PERMUTATIONS = 3
GENERATIONS_PER_CASE = 4 + 4 * (PERMUTATIONS + len(CONDITIONS) - 1)

Request = tuple[list[dict[str, str]], str]


@runtime_checkable
class BatchProvider(Protocol):
    """A provider that answers many requests in one call (the tinker sampler's ``complete_batch``)."""

    def complete_batch(self, requests: Sequence[Request]) -> Sequence[str]: ...


def complete_all(provider: Provider, requests: Sequence[Request]) -> list[str]:
    """Replies to ``(messages, target)`` requests in order: one ``complete_batch`` call when the provider
    has one, else one ``complete`` call per request."""
    if isinstance(provider, BatchProvider):
        replies = list(provider.complete_batch(list(requests)))
        if len(replies) != len(requests):
            raise RuntimeError(f"provider returned {len(replies)} replies for {len(requests)} prompts")
        return replies
    return [provider.complete(messages, target) for messages, target in requests]


# ---------------------------------------------------------------- one case


def _reference_broadcasts(state, solution) -> dict[str, Broadcast]:
    return {a: oracle_broadcast(state, a, solution.canonical_assignment[a]) for a in team_agent_ids(BLUE)}


def shuffled_broadcasts(case_index: int, style: str, cases: Sequence[FrozenCase]) -> dict[str, Broadcast]:
    """Reference broadcasts of case ``(i+1) mod n``, solved against RED playing *this* case's style (§10.2)."""
    other = cases[(case_index + 1) % len(cases)]
    state = generate_state(other.seed, other.size)
    solution = solve_joint_action(state, BLUE, deterministic_policy(state, RED, style))
    return _reference_broadcasts(state, solution)


def within_case_permutation(seed: int, agents: Sequence[str]) -> dict[str, str]:
    """A derangement of ``agents`` drawn from ``random.Random(seed)`` (shuffle until no agent keeps its own
    slot): ``slot → agent whose message fills it``. The same seed always gives the same permutation."""
    agents = list(agents)
    if len(agents) < 2:
        raise ValueError("a derangement needs at least two agents")
    rng = random.Random(seed)
    order = list(agents)
    while True:
        rng.shuffle(order)
        if all(a != b for a, b in zip(agents, order, strict=True)):
            return dict(zip(agents, order, strict=True))


def within_case_shuffled(generated: Mapping[str, Broadcast], seed: int) -> dict[str, Broadcast]:
    """The case's own generated broadcasts under the wrong senders (§10.2 ``shuffled_within``): every node a
    message names exists in this case, only who said it is wrong."""
    permutation = within_case_permutation(seed, sorted(generated))
    return {slot: generated[source] for slot, source in permutation.items()}


def evaluate_case(
    provider: Provider, case: FrozenCase, all_cases: Sequence[FrozenCase] | None = None
) -> dict[str, Any]:
    """One frozen case under the five message conditions; the record of §10.2 (raw responses kept)."""
    all_cases = all_cases if all_cases is not None else frozen_cases()
    state = generate_state(case.seed, case.size)
    red = deterministic_policy(state, RED, case.style)
    solution = solve_joint_action(state, BLUE, red)
    blue = team_agent_ids(BLUE)
    reference_broadcasts = _reference_broadcasts(state, solution)

    requests = [
        (
            broadcast_prompt(state, agent_id, case.seed + i)[0],
            encode_broadcast(reference_broadcasts[agent_id]),
        )
        for i, agent_id in enumerate(blue)
    ]
    messages_record = []
    generated: dict[str, Broadcast] = {}
    for agent_id, raw in zip(blue, complete_all(provider, requests), strict=True):
        parsed = parse_broadcast(raw, state, agent_id)
        generated[agent_id] = broadcast_or_empty(parsed)
        messages_record.append(
            {"agent_id": agent_id, "valid": parsed.valid, "errors": list(parsed.errors), "raw_response": raw}
        )

    delivered = {
        "generated": generated,
        "dropped": dict.fromkeys(blue, EMPTY_BROADCAST),
        "reference": reference_broadcasts,
        "shuffled": shuffled_broadcasts(case.index, case.style, all_cases),
        "shuffled_within": within_case_shuffled(generated, case.seed),
    }
    plan = [
        (condition, k)
        for condition in CONDITIONS
        for k in range(PERMUTATIONS if condition == "generated" else 1)
    ]
    prompts = {key: _act_prompts(state, case, solution, key[1], delivered[key[0]]) for key in plan}
    replies = complete_all(provider, [req for key in plan for req, _ in prompts[key]])
    rows = []
    for j, (condition, k) in enumerate(plan):
        chunk = replies[4 * j : 4 * j + 4]
        displayed = [shown for _, shown in prompts[(condition, k)]]
        rows.append(_act_row(state, red, solution, condition, k, chunk, displayed))

    consistent = True
    for i in range(len(blue)):
        actions = [row["actions"][i] for row in rows if row["condition"] == "generated"]
        if (
            not all(a["valid"] for a in actions)
            or len({json.dumps(a["selected_action"]) for a in actions}) != 1
        ):
            consistent = False
    return {
        "eval_version": EVAL_VERSION,
        "arena_version": ARENA_VERSION,
        "generator_version": GENERATOR_VERSION,
        "prompt_version": PROMPT_VERSION,
        "manifest_sha256": FROZEN_MANIFEST_SHA256,
        "model": provider.describe().get("model"),
        "case_index": case.index,
        "seed": case.seed,
        "size": case.size,
        "opponent_style": case.style,
        "oracle_reward": solution.reward,
        "solver_joint_actions_explored": solution.explored,
        "solver_optimal_count": solution.optimal_count,
        "message_strict_rate": sum(m["valid"] for m in messages_record) / len(blue),
        "action_order_consistent": consistent,
        "within_case_permutation": within_case_permutation(case.seed, blue),
        "messages": messages_record,
        "conditions": rows,
    }


def _act_prompts(state, case, solution, k, broadcasts) -> list[tuple[Request, list]]:
    """The four ACT requests of one condition row (with each agent's displayed action list)."""
    out = []
    for i, agent_id in enumerate(team_agent_ids(BLUE)):
        inbox = inbox_for(agent_id, {a: b for a, b in broadcasts.items() if a != agent_id})
        prompt, displayed = action_prompt(state, agent_id, inbox, case.seed + i + k)
        out.append(((prompt, encode_action(solution.canonical_assignment[agent_id], displayed)), displayed))
    return out


def _act_row(state, red, solution, condition, k, replies, displayed_lists) -> dict[str, Any]:
    blue = team_agent_ids(BLUE)
    actions_record, selected = [], {}
    for agent_id, raw, displayed in zip(blue, replies, displayed_lists, strict=True):
        parsed = parse_action(raw, displayed)
        selected[agent_id] = action_or_wait(parsed)
        actions_record.append(
            {
                "agent_id": agent_id,
                "valid": parsed.valid,
                "errors": list(parsed.errors),
                "selected_action": selected[agent_id].to_dict(),
                "raw_response": raw,
            }
        )
    joint = {**red, **selected}
    result = step(state, joint, check=False)
    reward = result.rewards[BLUE]
    regret = solution.reward - reward
    strict_team = all(a["valid"] for a in actions_record)
    return {
        "condition": condition,
        "permutation": k,
        "strict_action_rate": sum(a["valid"] for a in actions_record) / len(blue),
        "strict_team_protocol": strict_team,
        "environment_reward": reward,
        "oracle_reward": solution.reward,
        "regret": regret,
        "optimal_outcome": strict_team and regret <= OPTIMAL_REGRET_TOLERANCE,
        "duplicate_targets": list(result.duplicate_targets.get(BLUE, ())),
        "redundant_agents": list(redundant_agents(state, joint, BLUE)),
        "invalid_environment_actions": [a for a in result.invalid_agents if a.startswith("blue-")],
        "actions": actions_record,
    }


def run_frozen_eval(
    provider: Provider,
    case_indices: Sequence[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate the frozen cases (all 60 by default, or the given indices) in case order."""
    cases = frozen_cases()
    chosen = [cases[i] for i in (case_indices if case_indices is not None else range(len(cases)))]
    records = []
    for n, case in enumerate(chosen, start=1):
        records.append(evaluate_case(provider, case, cases))
        if progress is not None:
            progress(n, len(chosen))
    return records


# ---------------------------------------------------------------- validation scorer (§11)


def _canon(value: object) -> str:
    return compact_json(value)


def reply_object(text: Any) -> dict[str, Any] | None:
    """``json.loads(text.strip())`` when that is a JSON object, else ``None`` (the scorer's reading, §11)."""
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text.strip())
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _schema_valid(phase: str, predicted: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    """ACT = exactly ``{"action_id": <string>}``; BROADCAST = exactly the keys ``facts``, ``intent``,
    ``request_resource``."""
    if predicted is None:
        return False
    if phase == ACT_PHASE:
        return set(predicted) == {"action_id"} and isinstance(predicted["action_id"], str)
    return set(predicted) == {"facts", "intent", "request_resource"}


def reply_schema_valid(phase: str, text: Any) -> bool:
    """The scorer's ``schema_valid`` (§11), which needs only the reply (``_schema_valid`` of its object)."""
    return _schema_valid(phase, reply_object(text))


def score_validation_reply(row: Mapping[str, Any], text: Any) -> dict[str, Any]:
    """Per-row booleans of §11 with the strict type rules of §8.4 (``2.0`` is not ``2``, ``1`` is not ``true``)."""
    phase = row["metadata"]["phase"]
    user = json.loads(row["messages"][1]["content"])
    target = json.loads(row["messages"][2]["content"])
    predicted = reply_object(text)
    out = {"phase": phase, "parsed": predicted is not None, "unsupported_fact_response": False}
    valid = predicted if _schema_valid(phase, predicted) else None  # the reply, when schema-valid
    schema = valid is not None
    if phase == ACT_PHASE:
        legal = valid is not None and valid["action_id"] in {e["id"] for e in user["legal_actions"]}
        exact = predicted is not None and _canon(predicted) == _canon(target)
        out.update(schema_valid=schema, legal=legal, supported=legal, exact=exact, ordered_exact=exact)
        return out
    known = {_canon(n) for n in user["observation"]["known_nodes"]}
    facts_ok = False
    if valid is not None:
        facts = valid["facts"]
        if isinstance(facts, list) and len(facts) <= 3 and all(isinstance(f, dict) for f in facts):
            canon = [_canon(f) for f in facts]
            facts_ok = len(set(canon)) == len(canon) and all(c in known for c in canon)
        out["unsupported_fact_response"] = not facts_ok
    intents = {_canon(action_json(e)) for e in user["legal_actions"]}
    intent_ok = valid is not None and (valid["intent"] is None or _canon(valid["intent"]) in intents)
    request = valid.get("request_resource") if valid is not None else None
    request_ok = type(request) is int and request in (0, 1)
    supported = bool(schema and facts_ok and intent_ok and request_ok)
    exact = False
    if valid is not None and isinstance(valid["facts"], list):
        exact = (
            Counter(_canon(f) for f in valid["facts"]) == Counter(_canon(f) for f in target["facts"])
            and _canon(valid["intent"]) == _canon(target["intent"])
            and request_ok
            and request == target["request_resource"]
        )
    out.update(
        schema_valid=schema,
        legal=supported,
        supported=supported,
        exact=exact,
        ordered_exact=predicted is not None and _canon(predicted) == _canon(target),
    )
    return out


def run_validation(provider: Provider, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Generate one reply per row (prompt = system + user) and score it; raw replies are kept."""
    requests = [([dict(m) for m in row["messages"][:2]], row["messages"][2]["content"]) for row in rows]
    replies = complete_all(provider, requests) if requests else []
    return [
        {"id": row["id"], "raw_response": raw, **score_validation_reply(row, raw)}
        for row, raw in zip(rows, replies, strict=True)
    ]
