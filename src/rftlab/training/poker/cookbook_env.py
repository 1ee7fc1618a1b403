"""The poker RFT task as a tinker-cookbook RL environment (``tinker_cookbook.rl.types``, cookbook 0.5.8).

    config = PokerCookbookConfig.from_arm_spec(load_poker_arm_spec("data/specs/poker_seed.json"),
                                               base_model="rftlab/tiny-qwen3")
    dataset = PokerRLDataset(config, epochs=range(2))           # the cookbook's RLDataset
    builders = dataset.get_batch(0)                             # PokerEnvGroupBuilder, one per row
    group = await do_group_rollout(builders[0], TinkerTokenCompleter(sampler, max_tokens=config.max_tokens,
                                                                     temperature=config.temperature))

**What the model sees.** Exactly the chat of the McpGym path (``rftlab.rollout.poker.mcp`` driven by
eval-protocol's ``MCPGymRolloutProcessor``; docs/poker.md §B.1, B.2, B.4), built by the same functions
(``rftlab.rollout.poker.turns``): the row's system prompt (``rftlab.rollout.poker.dataset.dataset_rows``,
`` /no_think`` when the arm's ``thinking`` is off), the first hand's prompt as the user message, then after
every ``poker_act`` call its tool result as eval-protocol delivers it (``json.dumps`` of
``{"observation", "instance_complete"}``: ``FEEDBACK: …`` mid-hand, ``FEEDBACK FROM PREVIOUS INSTANCE: …``,
the notepad and the next hand's prompt after a hand). Each call's input is the hand window
``window_chat(system + chat, marker=HAND_MARKER)`` (B.4: the current hand only). The ``poker_act`` tool is
advertised in the renderer's own tool format (``renderer.create_conversation_prefix_with_tools``: for Qwen3
the ``<tools>`` block in the system message), with the schema eval-protocol builds from the FastMCP server
(``POKER_ACT_TOOL``).

**What it must answer.** A ``poker_act`` call in the renderer's format; for Qwen3
``<tool_call>\\n{"name": "poker_act", "arguments": {"action": "CALL", "amount": -1, ...}}\\n</tool_call>``,
ended by ``<|im_end|>``. Each call steps the env as the McpGym tool does (``PokerSession.act``: notepad
update first, action upper-cased, ``amount < 0`` = none), calls in order, stopping when the episode ends
(as eval-protocol executes a message's calls). The reply is read by the cookbook renderer
(``renderer.parse_response``); what cannot be read as a ``poker_act`` call is an **unreadable action**,
which the env refuses with ``Invalid poker action: Could not read the action ({why}).`` and counts toward
the retry limit (docs/poker.md §A.6, B.1: the third consecutive refusal of a decision applies the forced
CHECK/FOLD/CALL). That is the spec's consequence of an illegal or unreadable action, and it is what
happens here, never an exception:

- no tool call, a reply cut at ``max_tokens`` or without its stop token, a renderer error → one refusal
  (reason: what was wrong), its text delivered as a ``user`` message (there is no call to answer);
- a tool-call block the renderer could not parse: recovered when it still holds a JSON object with a string
  ``name`` (arguments missing, or given as a JSON string), else one refusal (``not valid JSON``);
- another tool's name → one refusal (``unknown tool``), answered as that call's tool result;
- ``poker_act`` arguments that are not an object, an ``action`` that is not a string, an ``amount`` the
  env cannot read (A.6) → one refusal; a readable but illegal action → the env's own refusal (A.6).

On the McpGym path itself most of these cannot happen (guided decoding and ``tool_choice="required"``),
and eval-protocol handles the rest at the transport: a reply without a call ends the rollout, a wrong
tool or bad arguments get the MCP error text without stepping the env. A training env must score every
reply by the env's rules instead, so those replies cost a refusal here.

**Rewards.** The arm's reward, as the row names it (``environment_context.reward``, else the config's):
``rftlab.rewards.poker.REWARDS[reward](hand_bb, illegal)`` with the env's per-hand results and the
evaluator's illegal count (refusal texts shown to the model; a streak ended by a forced action shows two,
B.3), so it equals the Fireworks evaluator's score of the same transcript
(``rftlab.rollout.poker.scoring.score_poker_row``). The mean-instance reward's format term (B.5) is 1.0
once any ``poker_act`` call was read (always so on the McpGym path), else 0. The cookbook's return is the
sum of the step rewards: every step reward is 0 except the last, which is the episode score, so
``TrajectoryGroup.get_total_rewards()`` is the evaluator's reward. A step's metrics carry the env's own step
reward (``env_reward``: BB of the hands it completed), refusals, forced actions and parse counts;
``compute_group_rewards`` adds nothing and returns each episode's metrics (the evaluator's
``bb_per_hand``, ``memory_gain``, ``illegal_actions``, ``hands_completed``, the task metrics, the env's
own counters and the reply counts).

**A row's candidates share a deal** (§B.1, row-shared): a ``PokerEnvGroupBuilder`` is one dataset row;
its ``group_size`` envs all play the row's opponent and card seed (``environment_context.opponent`` /
``card_seed``, i.e. ``row_assignment(row_id)``). The McpGym server keys the same draw on eval-protocol's
session id (a hash of row and model, which only eval-protocol can compute); here the row's own draw,
which the dataset records, is used. The rows have no epoch salt, so every epoch replays the same deals,
as every Fireworks epoch does.

**Why a token-level ``Env``** (and not the cookbook's ``MessageEnv``): ``EnvFromMessageEnv`` ends the
episode on a reply that did not end cleanly, with its own reward; the poker spec refuses that reply and
plays on. **What the cookbook provides**: the interfaces, the renderer and tokenizer
(``get_renderer(renderer_name, get_tokenizer(base_model))``, ``qwen3`` by default), the tool-call format
and its parser, the rollout loop (``do_group_rollout``) and what a training loop does with the
trajectories. **What the project adds**: the env, the prompts and observation texts, windowing, the
mapping from parsed replies to tool calls and refusals, the rewards and the rollout record
(``PokerCookbookEnv.record``). The user-facing account is "The tinker-cookbook env" in docs/poker.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import chz
import tinker
from tinker_cookbook.rl.types import (
    STOP_METRIC_PREFIX,
    Env,
    RLDatasetBuilder,
    StepResult,
    StopReason,
)

from rftlab.envs.model_json import load_model_json
from rftlab.envs.poker.env import ILLEGAL_RETRY_LIMIT, RFT_HANDS, PokerEnvConfig, row_assignment
from rftlab.envs.poker.task import PokerAction
from rftlab.rewards.poker import REWARDS, gain_reward, mean_instance_reward
from rftlab.rollout.poker.dataset import dataset_rows
from rftlab.rollout.poker.entry import MCP_STEPS
from rftlab.rollout.poker.turns import (
    HAND_MARKER,
    POKER_ACT_TOOL,
    POKER_TOOL,
    PokerSession,
    tool_result_content,
)
from rftlab.rollout.windowing import window_chat
from rftlab.training.cookbook_envs import (
    DEFAULT_RENDERER,
    ArmRowsDataset,
    EpisodeRewardGroup,
    decode,
    make_renderer,
    message_text,
    numeric,
)

DEFAULT_BASE_MODEL = "rftlab/tiny-qwen3"


# ------------------------------------------------------------------------------------ the arm


@dataclass(frozen=True)
class PokerCookbookConfig:
    """What the cookbook env of one arm needs: the arm spec's task fields (``from_arm_spec``) plus the
    model (``base_model``, ``renderer_name``) and the rows per batch."""

    rows: int = 64
    hands: int = RFT_HANDS
    reward: str = "mean_instance"
    illegal_retry_limit: int = ILLEGAL_RETRY_LIMIT
    thinking: bool = False  # False: the rows' system prompt ends with " /no_think"
    group_size: int = 8  # the arm's response_candidates
    seed: int = 0
    temperature: float = 1.0  # for the caller's sampler; the env does not sample
    max_tokens: int = 1024  # the arm's fireworks.max_output_tokens; for the caller's sampler
    row_prefix: str = "poker"
    base_model: str = DEFAULT_BASE_MODEL
    renderer_name: str = DEFAULT_RENDERER
    batch_rows: int = 8
    max_env_steps: int = MCP_STEPS  # the McpGym rollout's steps (B.4): env steps per episode at most

    def __post_init__(self) -> None:
        if self.rows < 1 or self.group_size < 1 or self.batch_rows < 1 or self.hands < 1:
            raise ValueError("rows, hands, group_size and batch_rows must be >= 1")
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {', '.join(REWARDS)}, got {self.reward!r}")

    @classmethod
    def from_arm_spec(cls, spec: Any, **overrides: Any) -> PokerCookbookConfig:
        """The config of a poker arm spec (``rftlab.launch.poker.spec.PokerArmSpec`` or anything with its
        fields); ``overrides`` set the model and batching."""
        fw = getattr(spec, "fireworks", None)
        values: dict[str, Any] = {
            "rows": spec.rows,
            "hands": spec.hands,
            "reward": spec.reward,
            "illegal_retry_limit": spec.illegal_retry_limit,
            "thinking": spec.thinking,
            "group_size": spec.response_candidates,
            "seed": spec.seed,
            "temperature": spec.temperature,
        }
        if fw is not None and getattr(fw, "max_output_tokens", None):
            values["max_tokens"] = fw.max_output_tokens
        values.update(overrides)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def dataset_rows(self) -> list[dict[str, Any]]:
        """The arm's rows, as the Fireworks launch writes them (``rftlab.rollout.poker.dataset.dataset_rows``
        with the arm's hands, thinking and reward)."""
        return list(
            dataset_rows(
                self.rows,
                hands=self.hands,
                prefix=self.row_prefix,
                thinking=self.thinking,
                reward=self.reward,
            )
        )


def row_context(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's ``environment_context`` (``{}`` when absent)."""
    info = (row.get("input_metadata") or {}).get("dataset_info") or {}
    ctx = info.get("environment_context") if isinstance(info, Mapping) else None
    return dict(ctx) if isinstance(ctx, Mapping) else {}


def row_deal(row: Mapping[str, Any]) -> tuple[str, int]:
    """``(opponent, card_seed)`` of a row: its ``environment_context``, else ``row_assignment(row_id)``."""
    ctx = row_context(row)
    if isinstance(ctx.get("opponent"), str) and isinstance(ctx.get("card_seed"), int):
        return ctx["opponent"], int(ctx["card_seed"])
    return row_assignment(str(row["input_metadata"]["row_id"]))


# ------------------------------------------------------------------------------------ replies


@dataclass(frozen=True)
class ReplyCall:
    """One tool call of a reply: ``name`` and ``arguments`` as the model wrote them (``arguments`` decoded
    when it was JSON text), ``id`` for its tool result; ``why`` set when it is not usable at all."""

    name: str | None
    arguments: Any = None
    id: str | None = None
    why: str | None = None


@dataclass(frozen=True)
class ParsedReply:
    """One sampled reply read through the renderer: its ``calls`` in order, the assistant ``message`` kept in
    the conversation (OpenAI format, as the McpGym path records it), and what went wrong."""

    calls: tuple[ReplyCall, ...]
    message: dict[str, Any]
    parsed_calls: int = 0
    unparsed: tuple[str, ...] = ()  # the renderer's error per unparsable tool-call block
    recovered: int = 0  # unparsable blocks that still named a tool
    structural: str | None = None  # why the reply did not end cleanly


def _arguments(raw: Any) -> Any:
    """Tool arguments as the model meant them: JSON text decoded (an OpenAI-style string), else as is."""
    if isinstance(raw, str):
        try:
            return load_model_json(raw)
        except ValueError:
            return raw
    return raw


def _recover(raw_text: str, error: str) -> ReplyCall:
    """An unparsable tool-call block: the call it still names (a JSON object with a string ``name``), else
    an unusable call with the renderer's reason."""
    body = raw_text.strip()
    for tag in ("<tool_call>", "</tool_call>"):
        body = body.replace(tag, "")
    try:
        obj = load_model_json(body.strip())
    except ValueError:
        obj = None
    if isinstance(obj, Mapping) and isinstance(obj.get("name"), str):
        call_id = obj.get("id")
        return ReplyCall(
            obj["name"], _arguments(obj.get("arguments")), call_id if isinstance(call_id, str) else None
        )
    return ReplyCall(None, why=f"the tool call is not valid JSON ({error[:200]})")


def read_reply(renderer: Any, tokens: Sequence[int], stop_reason: str = "stop") -> ParsedReply:
    """A sampled reply (token ids) → ``ParsedReply`` (rules in the module docstring). Never raises."""
    try:
        message, termination = renderer.parse_response(list(tokens))
    except Exception as exc:  # noqa: BLE001 - e.g. RendererError on two stop tokens; refused, never raised
        text = decode(renderer.tokenizer, tokens)
        reason = f"{type(exc).__name__}: {exc}"[:500]
        return ParsedReply((), {"role": "assistant", "content": text}, structural=reason)
    if not termination.is_clean:
        text = message["content"] if isinstance(message["content"], str) else ""
        why = "cut at max_tokens" if stop_reason == "length" else f"no stop token ({termination.value})"
        return ParsedReply((), {"role": "assistant", "content": text}, structural=why)
    parsed = [
        ReplyCall(tc.function.name, _arguments(tc.function.arguments), tc.id)
        for tc in message.get("tool_calls") or ()
    ]
    unparsed = list(message.get("unparsed_tool_calls") or ())
    recovered = [_recover(u.raw_text, u.error) for u in unparsed]
    text = message_text(message["content"])
    kept = [u.raw_text for u, r in zip(unparsed, recovered, strict=True) if r.name is None]
    if kept:  # the unusable blocks stay in the conversation as text, as a provider would show them
        text = text + "".join(kept)
    return ParsedReply(
        tuple(parsed + recovered),
        {"role": "assistant", "content": text},
        parsed_calls=len(parsed),
        unparsed=tuple(u.error for u in unparsed),
        recovered=sum(r.name is not None for r in recovered),
    )


def poker_act_arguments(arguments: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``poker_act`` keyword arguments from a call's arguments, or ``(None, why)`` when the env cannot read
    them (not an object, ``action`` not a string, an ``amount`` A.6 refuses). Missing optional arguments take
    the tool's defaults; ``thinking`` and ``notepad_update`` that are not strings are ignored."""
    if not isinstance(arguments, Mapping):
        return None, f"the poker_act arguments are not an object ({type(arguments).__name__})"
    action = arguments.get("action")
    amount = arguments.get("amount", -1)
    parsed, why = PokerAction.coerce({"action": action, "amount": amount})
    if parsed is None:
        return None, why
    thinking, notepad = arguments.get("thinking", ""), arguments.get("notepad_update", "")
    return {
        "action": parsed.action,
        "thinking": thinking if isinstance(thinking, str) else "",
        "amount": -1 if parsed.amount is None else parsed.amount,
        "notepad_update": notepad if isinstance(notepad, str) else "",
    }, None


# ------------------------------------------------------------------------------------ the env


def _cookbook_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI-format chat message as a cookbook ``Message`` (tool calls as the renderer's ``ToolCall``)."""
    from tinker_cookbook.renderers import ToolCall

    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            ToolCall(
                id=tc.get("id"),
                function=ToolCall.FunctionBody(
                    name=tc["function"]["name"], arguments=tc["function"]["arguments"]
                ),
            )
            for tc in message["tool_calls"]
        ]
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


class PokerCookbookEnv(Env):
    """One candidate of one row: a poker episode (``PokerSession``: the McpGym tool's env and notepad) behind
    the cookbook's token-level ``Env`` (module docstring)."""

    def __init__(
        self,
        row: Mapping[str, Any],
        renderer: Any,
        *,
        candidate: int = 0,
        epoch: int | None = None,
        reward: str | None = None,
        illegal_retry_limit: int = ILLEGAL_RETRY_LIMIT,
        max_env_steps: int = MCP_STEPS,
    ):
        meta = row["input_metadata"]
        ctx = row_context(row)
        self.row_id = str(meta["row_id"])
        self.candidate = int(candidate)
        self.epoch = epoch
        self.renderer = renderer
        self.reward_name = str(ctx.get("reward") or reward or "mean_instance")
        if self.reward_name not in REWARDS:
            raise ValueError(f"row {self.row_id}: reward must be one of {', '.join(REWARDS)}")
        self.hands = int(ctx.get("hands") or RFT_HANDS)
        self.opponent, self.card_seed = row_deal(row)
        config = PokerEnvConfig(mode="rft", hands=self.hands, illegal_retry_limit=illegal_retry_limit)
        self.session = PokerSession(config, self.row_id, opponent=self.opponent, card_seed=self.card_seed)
        system = [
            {"role": "system", "content": m["content"] if isinstance(m.get("content"), str) else ""}
            for m in row.get("messages") or ()
            if m.get("role") == "system"
        ]
        self.system = system or [{"role": "system", "content": ""}]
        self.chat: list[dict[str, Any]] = [{"role": "user", "content": self.session.last_text}]
        self.max_env_steps = int(max_env_steps)
        self.env_steps = 0
        self.model_calls = 0
        self.valid_calls = 0  # poker_act calls whose arguments the env could read
        self.refusals = (
            0  # refusals of unreadable replies or calls (this client's, on top of illegal actions)
        )
        self.parse_errors = 0
        self.notepad_updates = 0
        self.done = False
        self._stop = renderer.get_stop_sequences()

    @property
    def env(self):
        """The project env (``rftlab.envs.poker.env.PokerEnv``) of this episode."""
        return self.session.env

    def messages(self) -> list[dict[str, Any]]:
        """The model input of the next call as cookbook messages: the hand window (B.4) of the system
        message (tools included) and the conversation."""
        window = window_chat(self.system + self.chat, marker=HAND_MARKER)
        first = window[0]["content"]
        prefix = self.renderer.create_conversation_prefix_with_tools(
            [dict(POKER_ACT_TOOL["function"])], first
        )
        return [dict(m) for m in prefix] + [_cookbook_message(m) for m in window[1:]]

    def _render(self) -> tinker.ModelInput:
        # on the event loop's thread: a group's envs share the renderer, whose HF tokenizer refuses use from
        # two threads at once
        return self.renderer.build_generation_prompt(self.messages())

    async def initial_observation(self) -> tuple[tinker.ModelInput, list[int]]:
        return self._render(), self._stop

    def hand_bb(self) -> list[float]:
        return [float(v) for v in self.env.metrics().get("hand_bb", [])]

    def scores(self) -> dict[str, float]:
        """The evaluator's reward and metrics of the episode so far (module docstring)."""
        hand_bb = self.hand_bb()
        illegal = self.session.refusals_shown
        if self.reward_name == "mean_instance":
            score = mean_instance_reward(hand_bb, illegal, parsed_any=self.valid_calls > 0)["score"]
        else:
            score = REWARDS[self.reward_name](hand_bb, illegal)["score"]
        return {
            "reward": float(score),
            "bb_per_hand": sum(hand_bb) / len(hand_bb) if hand_bb else 0.0,
            "memory_gain": float(gain_reward(hand_bb, illegal)["memory_gain"]),
            "illegal_actions": float(illegal),
            "hands_completed": float(len(hand_bb)),
        }

    def episode_reward(self) -> float:
        return self.scores()["reward"]

    def _deliver(self, call_id: str | None) -> None:
        """The session's latest text as the McpGym path delivers it: a tool result, or a user message."""
        text, complete = self.session.last_text, self.session.instance_complete
        if call_id is None:
            self.chat.append({"role": "user", "content": text})
        else:
            self.chat.append(
                {"role": "tool", "tool_call_id": call_id, "content": tool_result_content(text, complete)}
            )

    def _refuse(self, why: str, call_id: str | None) -> None:
        self.session.refuse(why)
        self.refusals += 1
        self.env_steps += 1
        self._deliver(call_id)

    async def step(self, action: list[int], *, extra: Mapping[str, Any] | None = None) -> StepResult:
        if self.done:
            raise RuntimeError("episode finished: a PokerCookbookEnv is single-use")
        stop_reason = str((extra or {}).get("stop_reason", "stop"))
        reply = read_reply(self.renderer, action, stop_reason)
        self.model_calls += 1
        self.parse_errors += int(reply.structural is not None)
        before_hands = len(self.env.task.records) if self.env.task else 0
        before_illegal, before_forced = self.env.illegal, self.env.forced
        env_reward = 0.0
        message = dict(reply.message)
        calls = []
        for k, call in enumerate(reply.calls):
            call_id = call.id or f"call_{self.model_calls}_{k}"
            calls.append((call, call_id))
        if calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name or "", "arguments": json.dumps(call.arguments)},
                }
                for call, call_id in calls
                if call.name is not None
            ]
            if not message["tool_calls"]:
                del message["tool_calls"]
        self.chat.append(message)
        wrong_tool = bad_arguments = valid = 0
        if not calls:
            why = (
                f"the reply did not end cleanly: {reply.structural}"
                if reply.structural
                else f"no {POKER_TOOL} tool call in the reply"
            )
            self._refuse(why, None)
            env_reward += self._last_reward()
        for call, call_id in calls:
            if self.session.done or self.env_steps >= self.max_env_steps:
                break  # eval-protocol stops executing a message's calls when the episode ends
            answer_id = call_id if call.name is not None else None
            if call.name is None:
                self._refuse(call.why or "the tool call could not be read", None)
            elif call.name != POKER_TOOL:
                wrong_tool += 1
                self._refuse(f"unknown tool {call.name[:60]!r}; the only tool is {POKER_TOOL}", answer_id)
            else:
                kwargs, why = poker_act_arguments(call.arguments)
                if kwargs is None:
                    bad_arguments += 1
                    self._refuse(why or "unreadable arguments", answer_id)
                else:
                    valid += 1
                    self.notepad_updates += int(bool(kwargs["notepad_update"].strip()))
                    self.session.act(**kwargs)
                    self.env_steps += 1
                    self._deliver(answer_id)
            env_reward += self._last_reward()
        self.valid_calls += valid
        hands_now = len(self.env.task.records) if self.env.task else 0
        metrics = numeric(
            {
                "hand_index": self.env.task.position if self.env.task else 0,
                "hands_completed": hands_now - before_hands,
                "env_reward": round(env_reward, 6),
                "illegal": self.env.illegal - before_illegal - (self.env.forced - before_forced),
                "forced": self.env.forced - before_forced,
                "valid_call": valid > 0,
                "parse_error": reply.structural is not None,
                "reply_cut": stop_reason == "length",
                "tool_calls": reply.parsed_calls,
                "tool_calls_unparsed": len(reply.unparsed),
                "tool_calls_recovered": reply.recovered,
                "wrong_tool": wrong_tool,
                "bad_arguments": bad_arguments,
                "env_steps": self.env_steps,
            }
        )
        logs: dict[str, str | int | float] = {}
        if reply.structural:
            logs["parse_error"] = reply.structural
        if reply.unparsed:
            logs["unparsed_tool_calls"] = "; ".join(reply.unparsed)[:2000]
        result = self.session.last_result
        reason = getattr(getattr(result, "info", None), "reason", None)
        if reason:
            logs["refusal"] = str(reason)[:2000]
        out_of_steps = not self.session.done and self.env_steps >= self.max_env_steps
        self.done = bool(self.session.done or out_of_steps)
        if not self.done:
            return StepResult(0.0, False, self._render(), self._stop, metrics, logs)
        stop = StopReason.COMPLETED if self.session.done else StopReason.MAX_TURNS
        metrics[f"{STOP_METRIC_PREFIX}{stop}"] = 1.0
        return StepResult(self.episode_reward(), True, tinker.ModelInput.empty(), self._stop, metrics, logs)

    def _last_reward(self) -> float:
        result = self.session.last_result
        return float(result.reward) if result is not None else 0.0

    def episode_metrics(self) -> dict[str, float]:
        """The evaluator's reward and metrics, the env's task metrics and counters, and the reply counts."""
        m = self.env.metrics()
        out = numeric({k: v for k, v in m.items() if k not in ("illegal_actions",)})
        out.update(self.scores())
        out.update(
            env_illegal_actions=float(m.get("illegal_actions", 0)),
            forced_actions=float(m.get("forced_actions", 0)),
            model_calls=float(self.model_calls),
            env_steps=float(self.env_steps),
            valid_calls=float(self.valid_calls),
            refusals_unreadable=float(self.refusals),
            parse_errors=float(self.parse_errors),
            notepad_updates=float(self.notepad_updates),
            notepad_len=float(len(self.session.notepad)),
            complete=float(self.session.done),
        )
        return out

    def record(self) -> dict[str, Any]:
        """The rollout record of this candidate (JSON-ready): ids, deal, reward and metrics, per-hand
        results, and the whole conversation in the McpGym path's format (for a transcript view)."""
        m = self.env.metrics()
        return json.loads(
            json.dumps(
                {
                    "row_id": self.row_id,
                    "candidate": self.candidate,
                    "epoch": self.epoch,
                    "opponent": self.opponent,
                    "card_seed": self.card_seed,
                    "reward_name": self.reward_name,
                    **self.episode_metrics(),
                    "hand_bb": m.get("hand_bb", []),
                    "hand_id": m.get("hand_id", []),
                    "notepad": self.session.notepad,
                    "tools": [POKER_ACT_TOOL],
                    "messages": self.system + self.chat,
                },
                default=str,
            )
        )


# ------------------------------------------------------------------------------------ groups


@dataclass(frozen=True)
class PokerEnvGroupBuilder(EpisodeRewardGroup):
    """One dataset row: ``group_size`` candidates on the row's deal (opponent and card seed). Holds only JSON
    data and names, so it pickles; the renderer is made in ``make_envs``."""

    row: Mapping[str, Any]
    group_size: int
    reward: str = "mean_instance"  # used when the row names none
    illegal_retry_limit: int = ILLEGAL_RETRY_LIMIT
    base_model: str = DEFAULT_BASE_MODEL
    renderer_name: str = DEFAULT_RENDERER
    epoch: int | None = None
    max_env_steps: int = MCP_STEPS
    envs: list[PokerCookbookEnv] = field(default_factory=list, compare=False, repr=False)
    """The candidates of the latest ``make_envs`` call, for an in-process caller's rollout records."""

    @property
    def row_id(self) -> str:
        return str(self.row["input_metadata"]["row_id"])

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the envs of an earlier ``make_envs`` (the engine's tables do not pickle)."""
        return {**self.__dict__, "envs": []}

    async def make_envs(self) -> Sequence[PokerCookbookEnv]:
        renderer = make_renderer(self.base_model, self.renderer_name)
        envs = [
            PokerCookbookEnv(
                self.row,
                renderer,
                candidate=k,
                epoch=self.epoch,
                reward=self.reward,
                illegal_retry_limit=self.illegal_retry_limit,
                max_env_steps=self.max_env_steps,
            )
            for k in range(self.group_size)
        ]
        self.envs[:] = envs
        return envs

    def logging_tags(self) -> list[str]:
        opponent, _seed = row_deal(self.row)
        return ["poker", f"poker_{opponent}"]


class PokerRLDataset(ArmRowsDataset):
    """The arm's rows in batches of ``batch_rows``, epoch after epoch (``epochs``, e.g. ``range(2)``; a
    resumed run passes the epochs still to do). Batch ``i`` is batch ``i % batches_per_epoch`` of epoch
    ``epochs[i // batches_per_epoch]``; the deals are the rows', the same every epoch."""

    def builder(self, row: Mapping[str, Any], epoch: int) -> PokerEnvGroupBuilder:
        cfg = self.config
        return PokerEnvGroupBuilder(
            row=row,
            group_size=cfg.group_size,
            reward=cfg.reward,
            illegal_retry_limit=cfg.illegal_retry_limit,
            base_model=cfg.base_model,
            renderer_name=cfg.renderer_name,
            epoch=epoch,
            max_env_steps=cfg.max_env_steps,
        )


@chz.chz
class PokerRLDatasetBuilder(RLDatasetBuilder):
    """The cookbook's dataset builder: epochs ``first_epoch .. epochs - 1`` of the arm; no test set."""

    config: PokerCookbookConfig
    epochs: int = 1
    first_epoch: int = 0

    async def __call__(self) -> tuple[PokerRLDataset, None]:
        return PokerRLDataset(self.config, range(self.first_epoch, self.epochs)), None
