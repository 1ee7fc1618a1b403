"""The poker family's warm start of a tiny language model (``rftlab.training.agent_warm_start``): reference
transcripts of the strategies ``exploit`` and ``call`` (``rftlab.policies.poker.reference``) played in the
arm's own cookbook env, and the env's rule for a valid ``poker_act`` call.

    base = prepare_poker_base(out_dir, PokerCookbookConfig(hands=2, ...), WarmStartRows(rows=8))

**Rows.** ``rows`` training rows under the row-id prefix ``warm`` and ``held_out`` rows under ``held``
(``dataset_rows``: each row's opponent and cards come from its id, ``row_assignment``), so no warm-start
deal is a deal of the study, whose rows have the arm's prefix (``poker``) or the evaluation's. Rows
alternate between the two strategies: the model sees the name-reading counter (``exploit``) and the
memoryless control (``call``); which it prefers is left to RL.

**Replies.** The strategy's action on the env's current decision (its ``PokerObservation``), as one
``poker_act`` call with ``action`` and ``amount`` only (``-1`` for no amount; the strategy's ``thinking``
and a notepad are left out, so a reply is short), rendered by the arm's renderer (Qwen3 tool-call format)
and stepped by the env on exactly those tokens (``agent_warm_start.reference_turns``): a reference reply the
env does not read as a valid call is an error, never a training example. Each env gets its own strategy,
reset with the row's index as its seed (``exploit`` samples equity), as ``rollout.poker.play.play_rft`` does.

**Valid call.** The env's own metric ``valid_call`` of a step: the reply read by the renderer
(``read_reply``) held a ``poker_act`` call whose arguments the env could read (``poker_act_arguments``).
Readability does not depend on the deal, so the held-out check steps a fresh env of the first held-out row
with each sampled reply (``is_valid_call``). A readable but illegal action is a valid call the env then
refuses (A.6), as in RL.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.policies.poker.reference import POKER_POLICIES
from rftlab.rollout.poker.turns import POKER_TOOL
from rftlab.training.agent_warm_start import (
    DEFAULT_CONFIG,
    AgentWarmStartConfig,
    AgentWarmStartResult,
    ReferenceTurn,
    prepare_agent_base,
    reference_turns,
)
from rftlab.training.cookbook_envs import make_renderer, run_sync
from rftlab.training.poker.cookbook_env import (
    PokerCookbookConfig,
    PokerCookbookEnv,
    PokerEnvGroupBuilder,
    PokerRLDataset,
)

REFERENCE_POLICIES = ("exploit", "call")
VALID_KEY = "valid_call"  # the cookbook env's step metric: a poker_act call whose arguments it could read


@dataclass(frozen=True)
class WarmStartRows:
    """How many reference episodes to learn from (``rows``) and to check on (``held_out``)."""

    rows: int = 8
    held_out: int = 2
    equity_samples: int = 200  # the exploit strategy's Monte-Carlo equity samples per decision

    def __post_init__(self) -> None:
        if self.rows < 1 or self.held_out < 1 or self.equity_samples < 1:
            raise ValueError("warm-start rows, held-out rows and equity samples must be >= 1")


DEFAULT_ROWS = WarmStartRows()


def act_message(action: Mapping[str, Any]) -> dict[str, Any]:
    """A strategy's action (``{"action", "amount", ...}``) as an assistant message holding one ``poker_act``
    call with ``action`` and ``amount`` (``-1`` when it has none), in the cookbook's message format."""
    from tinker_cookbook.renderers.base import ToolCall

    amount = action.get("amount")
    args = json.dumps({"action": str(action["action"]), "amount": -1 if amount is None else int(amount)})
    call = ToolCall(function=ToolCall.FunctionBody(name=POKER_TOOL, arguments=args))
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def current_observation(env: PokerCookbookEnv) -> Any:
    """The env's decision to answer: the ``PokerObservation`` of its last step (of its reset before any)."""
    result = env.session.last_result
    return env.session.first if result is None else result.observation


class StrategyReplies:
    """``reply_for(env)`` of ``reference_turns``: env ``i`` (in first-call order) plays strategy
    ``policies[i % len(policies)]``, reset with seed ``i``; ``actions`` keeps each env's actions in order."""

    def __init__(self, policies: Sequence[str] = REFERENCE_POLICIES, equity_samples: int = 200):
        unknown = [p for p in policies if p not in POKER_POLICIES]
        if unknown or not policies:
            raise ValueError(f"unknown poker strategies {unknown}: choose from {', '.join(POKER_POLICIES)}")
        self.policies = list(policies)
        self.equity_samples = equity_samples
        self._by_env: dict[int, Any] = {}
        self.actions: dict[int, list[dict[str, Any]]] = {}

    def strategy(self, index: int) -> Any:
        name = self.policies[index % len(self.policies)]
        policy = (
            POKER_POLICIES[name](samples=self.equity_samples) if name == "exploit" else POKER_POLICIES[name]()
        )
        policy.reset(index)
        return policy

    def __call__(self, env: PokerCookbookEnv) -> dict[str, Any]:
        policy = self._by_env.get(id(env))
        if policy is None:
            policy = self._by_env[id(env)] = self.strategy(len(self._by_env))
            self.actions[id(env)] = []
        action = policy.act(current_observation(env))
        self.actions[id(env)].append(action)
        return act_message(action)


def reference_rows(task: PokerCookbookConfig, rows: int, kind: str) -> PokerCookbookConfig:
    """``task`` at ``rows`` rows under the prefix ``kind``, one candidate each (a reference episode per row)."""
    return dataclasses.replace(task, rows=rows, row_prefix=kind, group_size=1, batch_rows=rows)


def reference_builders(task: PokerCookbookConfig, rows: int, kind: str) -> list[PokerEnvGroupBuilder]:
    return PokerRLDataset(reference_rows(task, rows, kind), (0,)).epoch_builders(0)


def poker_reference_turns(
    task: PokerCookbookConfig, rows: int, kind: str = "warm", equity_samples: int = 200
) -> list[ReferenceTurn]:
    """Every model call of ``rows`` reference episodes (rows ``{kind}_s1000 …``, module docstring)."""
    builders = reference_builders(task, rows, kind)
    tags = [f"{b.row_id}:{REFERENCE_POLICIES[i % 2]}" for i, b in enumerate(builders)]
    replies = StrategyReplies(REFERENCE_POLICIES, equity_samples)
    return reference_turns(builders, replies, valid_key=VALID_KEY, tags=tags)


def is_valid_call(
    task: PokerCookbookConfig, tokens: list[int], stop_reason: str, row: Mapping[str, Any] | None = None
) -> bool:
    """Whether the env reads a sampled reply as a valid ``poker_act`` call: a fresh env of ``row`` (the first
    held-out row when ``None``) stepped on the reply (module docstring)."""
    if row is None:
        row = reference_rows(task, 1, "held").dataset_rows()[0]
    env = PokerCookbookEnv(
        row,
        make_renderer(task.base_model, task.renderer_name),
        reward=task.reward,
        illegal_retry_limit=task.illegal_retry_limit,
    )
    run_sync(env.initial_observation())
    result = run_sync(env.step(list(tokens), extra={"stop_reason": stop_reason}))
    return result.metrics.get(VALID_KEY) == 1.0


def prepare_poker_base(
    out_dir: str | Path,
    task: PokerCookbookConfig,
    rows: WarmStartRows = DEFAULT_ROWS,
    config: AgentWarmStartConfig = DEFAULT_CONFIG,
    **kwargs: Any,
) -> AgentWarmStartResult:
    """The warm-started base for poker arms of ``task``'s shape (hands, reward, thinking, renderer) on
    ``config.base_model`` (``task.base_model`` is replaced by it)."""
    task = dataclasses.replace(task, base_model=config.base_model)
    train = poker_reference_turns(task, rows.rows, "warm", rows.equity_samples)
    held_out = poker_reference_turns(task, rows.held_out, "held", rows.equity_samples)
    judge_row = reference_rows(task, 1, "held").dataset_rows()[0]
    renderer = make_renderer(task.base_model, task.renderer_name)
    return prepare_agent_base(
        out_dir,
        train,
        held_out,
        lambda tokens, stop_reason: is_valid_call(task, tokens, stop_reason, judge_row),
        renderer.get_stop_sequences(),
        config,
        **kwargs,
    )
