"""The spectrum RFT task as a tinker-cookbook RL environment (``tinker_cookbook.rl.types``, cookbook 0.5.8).

    config = SpectrumCookbookConfig.from_arm_spec(load_arm_spec("data/specs/spectrum_C.json"),
                                                  base_model="rftlab/tiny-qwen3")
    dataset = SpectrumRLDataset(config, epochs=range(12))       # the cookbook's RLDataset
    builders = dataset.get_batch(0)                             # SpectrumEnvGroupBuilder, one per row
    group = await do_group_rollout(builders[0], TinkerTokenCompleter(sampler, max_tokens=4096,
                                                                     temperature=config.temperature))

**What the model sees.** Exactly the chat of the bench-shaped Fireworks path
(``rftlab.rollout.spectrum.processors.run_turn_episode``; docs/spectrum.md §B.9), built by the same
functions (``rftlab.rollout.spectrum.turns``): the row's system prompt (``dataset_rows``, thinking switch
applied), scan 1 as a user message, then after every reply the env's tool results and the next scan (the
running list, or the scrambled list, with it in the echo arms; the notepad tools in arm D). Each call's
input is the ICL-off window ``window_chat(system + chat)`` (§B.5). The ``submit_report`` tool (and the
notepad tools in arm D) is advertised in the renderer's own tool format
(``renderer.create_conversation_prefix_with_tools``: for Qwen3 the ``<tools>`` block in the system
message, as Qwen3's chat template writes it when a provider is sent ``tools=``).

**What it must answer.** A ``submit_report`` call in the renderer's format; for Qwen3
``<tool_call>\\n{"name": "submit_report", "arguments": {"center_freqs": [...]}}\\n</tool_call>``, ended by
``<|im_end|>``. The reply is parsed by the cookbook renderer (``renderer.parse_response``) and becomes one
``AssistantTurn`` that the env steps, so the env applies its own rules (``rftlab.envs.spectrum.actions``):

- each tool call the renderer parsed → a ``ToolCall`` (name, the arguments JSON, id), in order;
- each tool-call block the renderer could not parse (``unparsed_tool_calls``) that still holds a JSON
  object with a string ``name`` (e.g. no ``arguments``, or arguments given as a JSON string) → a
  ``ToolCall`` with whatever ``arguments`` it has, for the env to judge (missing ``center_freqs`` → an
  empty report, scored); any other unparsable block → an entry that is not a tool call (the env answers
  "tool call without a name" and does not advance). The renderer reports parsed and unparsed calls in
  two lists without their relative order, so a reply mixing both runs the parsed ones first;
- a reply that did not end cleanly (no ``<|im_end|>``: cut at ``max_tokens``, or a renderer error such as
  two stop tokens) → a turn with no tool call.

So a malformed or missing call is scored as the spec says and never raises: a turn without a usable
tool call steps the env with an empty, unscored report (``scans_forced``; it shrinks the scans the
reward averages over, B.15 #3); an unknown tool or an unreadable call gets an error result without
advancing (at most 6 calls per scan, then the forced empty step); a ``submit_report`` with bad arguments
is an empty report, scored 0. What happened is in the step's metrics (``parse_error``,
``tool_calls_unparsed``, ``tool_errors``, ``valid_submit``, ...) and logs.

**Rewards and metrics.** The env's own: a transition's metrics carry the env's per-step reward
(``env_reward``: the scan's exact occupied-IoU when a report was scored), ``scored`` / ``forced``, and
``occ`` / ``avail`` on a scored step. The cookbook's return is the sum of the step rewards, while the task's reward is
``3 × mean(occ)`` over the *scored* scans (B.8), which is known only at the end: every step reward is 0
except the last, which is the episode reward ``env.metrics()["reward"]`` minus the arm's notepad write cost
(arm D_cost), so ``TrajectoryGroup.get_total_rewards()`` is the reward the Fireworks evaluator and the
simulated trainer give. ``compute_group_rewards`` adds nothing to it and returns each episode's metrics
(``mean_occ``, ``memory_gain``, ``carry_rate``, ``notepad_writes``, ... unchanged, plus ``model_calls``,
``valid_submits``, ``parse_errors``) for the cookbook's per-trajectory logs.

**A row's candidates share a band** (§B.2): a ``SpectrumEnvGroupBuilder`` is one dataset row in one
epoch; its ``group_size`` envs all reset with ``band_seed(row_id, salt)``, the salt being the epoch's
(``SpectrumCookbookConfig.salt``: ``epoch_salt("rftlab:seed<seed>", epoch)``, the local trainer's rule;
``""`` when the arm has no epoch salt). ``SpectrumRLDataset`` walks the arm's rows epoch after epoch, so
every epoch gets fresh bands without a new dataset.

**Why a token-level ``Env`` and not the cookbook's ``MessageEnv``.** ``EnvFromMessageEnv`` scores a reply
that did not end cleanly (cut at ``max_tokens``) with its own ``failed_parse_reward`` /
``context_overflow_reward`` and ends the episode; the spectrum spec scores that turn as a turn without a
tool call and plays on. Everything else it does (render, parse, stop sequences) is one renderer call
each, made here directly.

**What the cookbook provides**: the interfaces, the renderer and tokenizer (``get_renderer(renderer_name,
get_tokenizer(base_model))``, ``qwen3`` by default: Qwen3 with thinking on, the HF chat template's output),
the tool-call format and its parser, the rollout loop (``do_group_rollout``) and what a training loop does
with the trajectories (advantages, datums, losses). **What the project adds**: the env, the prompts and
the scan text, windowing, the mapping from parsed replies to env actions, the per-epoch bands, and the
rollout record (``SpectrumCookbookEnv.record``). Built-in tokenizers (``rftlab/tiny-qwen3``) are
registered on first use, so a pickled builder works in a fresh process. The user-facing account is the
section "The tinker-cookbook env" of docs/spectrum.md.
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
from rftlab.envs.spectrum.rft import (
    AssistantTurn,
    ReportNote,
    SpectrumRFTConfig,
    SpectrumRFTEnv,
    ToolCall,
    epoch_salt,
)
from rftlab.rollout.spectrum.dataset import dataset_rows
from rftlab.rollout.spectrum.turns import (
    first_messages,
    followup_messages,
    model_call_budget,
    system_messages,
    turn_config,
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
class SpectrumCookbookConfig:
    """What the cookbook env of one arm needs: the arm spec's task fields (``from_arm_spec``) plus the
    model (``base_model``, ``renderer_name``), the thinking switch and the rows per batch."""

    prompt: str = "weak"
    memory: str = "echo"
    rows: int = 48
    row_prefix: str | None = None  # None: dataset_rows' default for (prompt, memory)
    num_scans: int = 12
    epoch_salt: bool = True
    notepad_write_cost: float = 0.0
    group_size: int = 12  # the arm's response_candidates
    seed: int = 0
    temperature: float = 1.2  # for the caller's sampler; the env does not sample
    think: bool = True  # dataset_rows' switch: False appends " /no_think" to the system prompt
    fewshot: bool = False
    base_model: str = DEFAULT_BASE_MODEL
    renderer_name: str = DEFAULT_RENDERER
    batch_rows: int = 8
    salt_namespace: str = "rftlab"

    def __post_init__(self) -> None:
        if self.rows < 1 or self.group_size < 1 or self.batch_rows < 1:
            raise ValueError("rows, group_size and batch_rows must be >= 1")

    @classmethod
    def from_arm_spec(cls, spec: Any, **overrides: Any) -> SpectrumCookbookConfig:
        """The config of an arm spec (``rftlab.launch.spectrum.spec.SpectrumArmSpec`` or anything with its
        fields); ``overrides`` set the model, thinking and batching."""
        values = {
            "prompt": spec.prompt,
            "memory": spec.memory,
            "rows": spec.rows,
            "row_prefix": spec.row_prefix,
            "num_scans": spec.num_scans,
            "epoch_salt": spec.epoch_salt,
            "notepad_write_cost": spec.notepad_write_cost,
            "group_size": spec.response_candidates,
            "seed": spec.seed,
            "temperature": spec.temperature,
        }
        values.update(overrides)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def salt(self, epoch: int) -> str:
        """The epoch's band salt (docs/spectrum.md §B.2): ``epoch_salt("<namespace>:seed<seed>", epoch)``,
        as the local trainer draws it, or ``""`` when the arm has no epoch salt."""
        if not self.epoch_salt:
            return ""
        return epoch_salt(f"{self.salt_namespace}:seed{self.seed}", epoch)

    def dataset_rows(self) -> list[dict[str, Any]]:
        """The arm's rows, as ``rftlab.rollout.spectrum.dataset.dataset_rows`` writes them for Fireworks."""
        return list(
            dataset_rows(
                self.rows,
                prompt=self.prompt,
                memory=self.memory,
                prefix=self.row_prefix,
                think=self.think,
                fewshot=self.fewshot,
                config=SpectrumRFTConfig(memory=self.memory, num_scans=self.num_scans),  # type: ignore[arg-type]
                epoch_salt=self.epoch_salt,
            )
        )


def tool_specs(env: SpectrumRFTEnv) -> list[dict[str, Any]]:
    """The env's tools as cookbook ``ToolSpec``s (the ``function`` part of the OpenAI schemas)."""
    return [dict(t["function"]) for t in env.tools()]


# ------------------------------------------------------------------------------------ replies


@dataclass(frozen=True)
class ParsedReply:
    """One sampled reply read through the renderer (module docstring): the ``turn`` the env steps, the
    assistant ``message`` kept in the conversation, and what went wrong."""

    turn: AssistantTurn
    message: dict[str, Any]
    parsed_calls: int = 0
    unparsed: tuple[str, ...] = ()  # the renderer's error per unparsable tool-call block
    recovered: int = 0  # unparsable blocks that still named a tool
    structural: str | None = None  # why the reply did not end cleanly

    @property
    def text(self) -> str:
        return message_text(self.message.get("content"))


def _recover(raw_text: str) -> ToolCall | None:
    """An unparsable tool-call block that still holds a JSON object with a string ``name``."""
    body = raw_text.strip()
    for tag in ("<tool_call>", "</tool_call>"):
        body = body.replace(tag, "")
    try:
        obj = load_model_json(body.strip())
    except ValueError:
        return None
    if isinstance(obj, Mapping) and isinstance(obj.get("name"), str):
        call_id = obj.get("id")
        return ToolCall(obj["name"], obj.get("arguments"), call_id if isinstance(call_id, str) else None)
    return None


def read_reply(renderer: Any, tokens: Sequence[int], stop_reason: str = "stop") -> ParsedReply:
    """A sampled reply (token ids) → ``ParsedReply`` (rules in the module docstring). Never raises."""
    try:
        message, termination = renderer.parse_response(list(tokens))
    except Exception as exc:  # noqa: BLE001 - e.g. RendererError on two stop tokens; scored, never raised
        text = decode(renderer.tokenizer, tokens)
        reason = f"{type(exc).__name__}: {exc}"[:500]
        return ParsedReply(AssistantTurn((), text), {"role": "assistant", "content": text}, structural=reason)
    if not termination.is_clean:
        text = message["content"] if isinstance(message["content"], str) else ""
        why = "cut at max_tokens" if stop_reason == "length" else f"no stop token ({termination.value})"
        return ParsedReply(AssistantTurn((), text), {"role": "assistant", "content": text}, structural=why)
    calls: list[ToolCall | None] = [
        ToolCall(tc.function.name, tc.function.arguments, tc.id) for tc in message.get("tool_calls") or ()
    ]
    unparsed = list(message.get("unparsed_tool_calls") or ())
    recovered = [_recover(u.raw_text) for u in unparsed]
    calls.extend(recovered)
    history: dict[str, Any] = {"role": "assistant", "content": message["content"]}
    if message.get("tool_calls"):
        history["tool_calls"] = list(message["tool_calls"])
    if unparsed:  # keep the unparsable blocks' text in the conversation, as a provider would
        content = history["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        history["content"] = parts + [{"type": "text", "text": u.raw_text} for u in unparsed]
    return ParsedReply(
        AssistantTurn(tuple(calls), message_text(history["content"])),  # type: ignore[arg-type]  # None: not a tool call (the env's rule)
        history,
        parsed_calls=len(message.get("tool_calls") or ()),
        unparsed=tuple(u.error for u in unparsed),
        recovered=sum(c is not None for c in recovered),
    )


# ------------------------------------------------------------------------------------ the env


def valid_step(info: Any) -> bool:
    """Whether a step's report was scored with no malformed note (the ``valid_submit`` metric)."""
    return bool(info.scored and all(note.malformed is None for note in info.actions))


class SpectrumCookbookEnv(Env):
    """One candidate of one row: a ``SpectrumRFTEnv`` episode behind the cookbook's token-level ``Env``
    (module docstring). ``spectrum`` is the project env (its band, records and metrics)."""

    def __init__(
        self,
        row: Mapping[str, Any],
        salt: str,
        renderer: Any,
        *,
        candidate: int = 0,
        epoch: int | None = None,
        notepad_write_cost: float = 0.0,
        think: bool | None = None,
        max_model_calls: int | None = None,
    ):
        meta = row["input_metadata"]
        self.row_id = str(meta["row_id"])
        self.salt = str(salt)
        self.candidate = int(candidate)
        self.epoch = epoch
        self.renderer = renderer
        self.notepad_write_cost = float(notepad_write_cost)
        self.config = turn_config(meta.get("dataset_info"))
        self.spectrum = SpectrumRFTEnv(self.config)
        obs = self.spectrum.reset(self.row_id, salt=self.salt)
        self.observation = obs  # the scan to answer now, as data (for a scripted reference policy)
        self._system = self._with_tools(system_messages(row.get("messages") or (), think))
        self.chat: list[dict[str, Any]] = first_messages(obs)
        self.budget = model_call_budget(self.config, max_model_calls)
        self.model_calls = 0
        self.valid_submits = 0
        self.parse_errors = 0
        self.done = False
        self._stop = renderer.get_stop_sequences()

    def _with_tools(self, system: list[dict[str, Any]]) -> list[dict[str, Any]]:
        first = system[0]["content"] if system else ""
        prefix = self.renderer.create_conversation_prefix_with_tools(tool_specs(self.spectrum), first)
        return [dict(m) for m in prefix] + system[1:]

    def messages(self) -> list[dict[str, Any]]:
        """The model input of the next call as cookbook messages: the ICL-off window (B.5) of the system
        message (tools included) and the conversation."""
        return window_chat(self._system + self.chat, window=self.config.window)

    def _render(self) -> tinker.ModelInput:
        # on the event loop's thread, not asyncio.to_thread: a group's envs share the renderer, and its
        # tokenizer switches state per call (split_special_tokens), which HF fast tokenizers refuse to do
        # from two threads at once ("Already borrowed")
        return self.renderer.build_generation_prompt(self.messages())

    async def initial_observation(self) -> tuple[tinker.ModelInput, list[int]]:
        return self._render(), self._stop

    def episode_reward(self) -> float:
        """The env's episode reward minus the notepad write cost (the trajectory's total reward)."""
        m = self.spectrum.metrics()
        return float(m["reward"]) - self.notepad_write_cost * m["notepad_writes"]

    async def step(self, action: list[int], *, extra: Mapping[str, Any] | None = None) -> StepResult:
        if self.done:
            raise RuntimeError("episode finished: a SpectrumCookbookEnv is single-use")
        stop_reason = str((extra or {}).get("stop_reason", "stop"))
        reply = read_reply(self.renderer, action, stop_reason)
        self.chat.append(reply.message)
        result = self.spectrum.step(reply.turn)
        self.observation = result.observation
        self.chat.extend(followup_messages(result.observation))
        self.model_calls += 1
        info = result.info
        valid = valid_step(info)
        self.valid_submits += int(valid)
        self.parse_errors += int(reply.structural is not None)
        metrics: dict[str, float] = numeric(
            {
                "scan": info.scan,
                "scored": info.scored,
                "forced": info.forced,
                "env_reward": result.reward,
                "occ": info.occ if info.scored else None,  # a forced step's empty report is not scored
                "avail": info.avail if info.scored else None,
                "valid_submit": valid,
                "parse_error": reply.structural is not None,
                "reply_cut": stop_reason == "length",
                "tool_calls": reply.parsed_calls,
                "tool_calls_unparsed": len(reply.unparsed),
                "tool_calls_recovered": reply.recovered,
                "tool_errors": len(info.tool_errors),
            }
        )
        logs: dict[str, str | int | float] = {}
        if reply.structural:
            logs["parse_error"] = reply.structural
        if reply.unparsed:
            logs["unparsed_tool_calls"] = "; ".join(reply.unparsed)[:2000]
        if info.tool_errors:
            logs["tool_errors"] = "; ".join(info.tool_errors)[:2000]
        malformed = [note.malformed for note in info.actions if note.malformed]
        if malformed:
            logs["report"] = "; ".join(malformed)
        out_of_calls = not result.done and self.model_calls >= self.budget
        self.done = bool(result.done or out_of_calls)
        if not self.done:
            return StepResult(0.0, False, self._render(), self._stop, metrics, logs)
        reason = StopReason.COMPLETED if result.done else StopReason.MAX_TURNS
        metrics[f"{STOP_METRIC_PREFIX}{reason}"] = 1.0
        return StepResult(self.episode_reward(), True, tinker.ModelInput.empty(), self._stop, metrics, logs)

    def episode_metrics(self) -> dict[str, float]:
        """The env's episode metrics (numeric ones, unchanged) with the trajectory's reward and counts."""
        m = self.spectrum.metrics()
        out = numeric(
            {k: v for k, v in m.items() if k not in ("band_seed", "channels_drawn", "channels_placed")}
        )
        cost = self.notepad_write_cost * m["notepad_writes"]
        out.update(
            reward=float(m["reward"]) - cost,
            env_reward=float(m["reward"]),
            write_cost=float(cost),
            model_calls=float(self.model_calls),
            valid_submits=float(self.valid_submits),
            parse_errors=float(self.parse_errors),
            complete=float(self.spectrum.done),
        )
        return out

    def record(self) -> dict[str, Any]:
        """The rollout record of this candidate (JSON-ready): ids, band, reward, the env's metrics and
        per-scan records, and the whole conversation (for a transcript view)."""
        m = self.spectrum.metrics()
        cost = self.notepad_write_cost * m["notepad_writes"]
        return {
            "row_id": self.row_id,
            "candidate": self.candidate,
            "epoch": self.epoch,
            "band_seed": self.spectrum.band_seed,
            "salt": self.salt,
            "reward": float(m["reward"]) - cost,
            "env_reward": m["reward"],
            "write_cost": cost,
            **{k: v for k, v in m.items() if k not in ("reward", "band_seed", "salt")},
            "model_calls": self.model_calls,
            "valid_submits": self.valid_submits,
            "parse_errors": self.parse_errors,
            "complete": self.spectrum.done,
            "records": [_jsonable_record(r) for r in self.spectrum.records],
            "messages": [_jsonable(msg) for msg in self._system + self.chat],
        }


def _jsonable_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A per-scan record of the env with its ``ReportNote`` as a dict."""
    note = record.get("action")
    return {**record, "action": note.to_dict() if isinstance(note, ReportNote) else note}


def _jsonable(message: Mapping[str, Any]) -> dict[str, Any]:
    """A cookbook message as plain JSON (tool calls as ``{"name", "arguments"}``)."""
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"name": tc.function.name, "arguments": tc.function.arguments, "id": tc.id}
            for tc in message["tool_calls"]
        ]
    return json.loads(json.dumps(out, default=str))


# ------------------------------------------------------------------------------------ groups


@dataclass(frozen=True)
class SpectrumEnvGroupBuilder(EpisodeRewardGroup):
    """One dataset row in one epoch: ``group_size`` candidates on the row's band ``band_seed(row_id, salt)``.
    Holds only JSON data and names, so it pickles; the renderer is made in ``make_envs``."""

    row: Mapping[str, Any]
    salt: str
    group_size: int
    base_model: str = DEFAULT_BASE_MODEL
    renderer_name: str = DEFAULT_RENDERER
    epoch: int | None = None
    notepad_write_cost: float = 0.0
    envs: list[SpectrumCookbookEnv] = field(default_factory=list, compare=False, repr=False)
    """The candidates of the latest ``make_envs`` call, for an in-process caller's rollout records."""

    @property
    def row_id(self) -> str:
        return str(self.row["input_metadata"]["row_id"])

    async def make_envs(self) -> Sequence[SpectrumCookbookEnv]:
        renderer = make_renderer(self.base_model, self.renderer_name)
        envs = [
            SpectrumCookbookEnv(
                self.row,
                self.salt,
                renderer,
                candidate=k,
                epoch=self.epoch,
                notepad_write_cost=self.notepad_write_cost,
            )
            for k in range(self.group_size)
        ]
        self.envs[:] = envs
        return envs

    def logging_tags(self) -> list[str]:
        memory = self.row["input_metadata"]["dataset_info"]["environment_context"].get("memory", "")
        return ["spectrum", f"spectrum_{memory}"] if memory else ["spectrum"]


class SpectrumRLDataset(ArmRowsDataset):
    """The arm's rows in batches of ``batch_rows``, epoch after epoch (``epochs``, e.g. ``range(12)``; a
    resumed run passes the epochs still to do). Batch ``i`` is batch ``i % batches_per_epoch`` of epoch
    ``epochs[i // batches_per_epoch]``; each epoch has its own salt, so its bands are fresh."""

    def builder(self, row: Mapping[str, Any], epoch: int) -> SpectrumEnvGroupBuilder:
        cfg = self.config
        return SpectrumEnvGroupBuilder(
            row=row,
            salt=cfg.salt(epoch),
            group_size=cfg.group_size,
            base_model=cfg.base_model,
            renderer_name=cfg.renderer_name,
            epoch=epoch,
            notepad_write_cost=cfg.notepad_write_cost,
        )


@chz.chz
class SpectrumRLDatasetBuilder(RLDatasetBuilder):
    """The cookbook's dataset builder: epochs ``first_epoch .. epochs - 1`` of the arm; no test set."""

    config: SpectrumCookbookConfig
    epochs: int = 1
    first_epoch: int = 0

    async def __call__(self) -> tuple[SpectrumRLDataset, None]:
        return SpectrumRLDataset(self.config, range(self.first_epoch, self.epochs)), None
