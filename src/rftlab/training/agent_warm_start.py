"""Supervised warm start of a tiny language model on reference-policy transcripts, for the multi-turn agent
tasks (spectrum, poker) trained through the Tinker API (issue 30 item 5).

    turns = reference_turns(builders, reply_for, valid_key="valid_submit")   # (prompt, reply) per model call
    result = prepare_agent_base(out_dir, turns, held_out, config)            # an HF model directory

**The transcripts.** A family gives cookbook env group builders (one candidate each) and ``reply_for(env)``:
the reference policy's next action as an assistant message with its ``tool_calls``. Each env plays a whole
episode on those replies. A reply is rendered by the env's own renderer
(``build_supervised_example`` of the conversation so far plus the reply; the reply's tokens are the ones
with weight 1), and the env steps on exactly those tokens. So the env parses what the model will be taught
to write, and a reply the env does not read as a valid call (``valid_key`` of the step's metrics) is an
error here, never a silent training example. The prompt of a turn is the env's own observation (the
ICL-off window, as in RL), so supervised and RL inputs are the same text.

**The training.** ``cross_entropy`` on the reply tokens (the prompt weighted 0) through the local
backend's training client, with all weights trainable (``create_full_training_client``: on a randomly
initialised tiny base a LoRA learns far too slowly, as measured for GS1's warm start,
``rftlab.training.gs1.warm_start``). Batches are drawn without replacement, epoch after epoch, from a
seeded shuffle. Every ``eval_every`` steps one reply per held-out prompt is sampled at the RL temperature
and read by the env's rules (``judge``); the record keeps the valid-call rate per check and up to three
refused replies of the last one (the diagnosis when the model has not learned the format).

**The result** is a Hugging Face model directory with its tokenizer (``save_model_dir``), reused when its
manifest records the same config and the same transcripts (their digest), so RL arms name it as their
``base_model`` and start fresh LoRAs on the same weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tinker import types

from rftlab.training.backend_fields import loss_sum
from rftlab.training.cookbook_envs import run_sync
from rftlab.training.local_tinker.clients import LocalServiceClient, torch_threads
from rftlab.training.local_tinker.model import AGENT_MODEL

MANIFEST = "warm_start.json"


class ReferenceReplyError(ValueError):
    """A reference reply the env did not read as a valid call (the renderer and the env disagree)."""


@dataclass(frozen=True)
class ReferenceTurn:
    """One model call of a reference episode: the env's prompt tokens and the reply tokens to learn."""

    prompt: tuple[int, ...]
    reply: tuple[int, ...]
    tag: str = ""  # which reference policy and row made it

    def datum(self) -> types.Datum:
        """The ``cross_entropy`` datum: the prompt weighted 0, the reply (its stop token included) 1."""
        tokens = list(self.prompt) + list(self.reply)
        n_prompt = len(self.prompt)
        return types.Datum(
            model_input=types.ModelInput.from_ints(tokens[:-1]),
            loss_fn_inputs={
                "target_tokens": types.TensorData.from_torch(torch.tensor(tokens[1:], dtype=torch.long)),
                "weights": types.TensorData.from_torch(
                    torch.tensor([0.0] * (n_prompt - 1) + [1.0] * len(self.reply))
                ),
            },
        )


def reply_tokens(renderer: Any, messages: Sequence[Mapping[str, Any]], reply: Mapping[str, Any]) -> list[int]:
    """The tokens the model writes for ``reply`` after ``messages``: the weighted tail of the renderer's
    supervised example. ``ReferenceReplyError`` when its unweighted head is not the generation prompt."""
    from tinker_cookbook.renderers import TrainOnWhat

    convo = [dict(m) for m in messages]
    prompt = renderer.build_generation_prompt(convo).to_ints()
    full, weights = renderer.build_supervised_example(
        convo + [dict(reply)], TrainOnWhat.LAST_ASSISTANT_MESSAGE
    )
    tokens = full.to_ints()
    n = int((weights > 0).sum())
    if n == 0 or tokens[: len(tokens) - n] != prompt:
        raise ReferenceReplyError("the rendered reply does not extend the generation prompt")
    return tokens[len(tokens) - n :]


async def _reference_episode(
    env: Any, reply_for: Callable[[Any], Mapping[str, Any]], valid_key: str, tag: str
) -> list[ReferenceTurn]:
    ob, _stop = await env.initial_observation()
    turns: list[ReferenceTurn] = []
    while True:
        reply = reply_tokens(env.renderer, env.messages(), reply_for(env))
        turns.append(ReferenceTurn(tuple(ob.to_ints()), tuple(reply), tag))
        result = await env.step(reply)
        if result.metrics.get(valid_key) != 1.0:
            raise ReferenceReplyError(
                f"{tag}: the env did not read a reference reply as valid ({result.logs})"
            )
        if result.episode_done:
            return turns
        ob = result.next_observation


def reference_turns(
    builders: Sequence[Any],
    reply_for: Callable[[Any], Mapping[str, Any]],
    *,
    valid_key: str,
    tags: Sequence[str] | None = None,
) -> list[ReferenceTurn]:
    """Every model call of one reference episode per builder (its first candidate); ``reply_for(env)`` is
    the reference policy's next reply, as an assistant message."""
    out: list[ReferenceTurn] = []
    for i, builder in enumerate(builders):
        env = run_sync(builder.make_envs())[0]
        tag = tags[i] if tags is not None else str(i)
        out.extend(run_sync(_reference_episode(env, reply_for, valid_key, tag)))
    return out


def turns_digest(turns: Sequence[ReferenceTurn]) -> str:
    """A SHA-256 of the transcripts' tokens (the manifest's record of what the model was taught)."""
    h = hashlib.sha256()
    for t in turns:
        h.update(json.dumps([t.prompt, t.reply]).encode())
    return h.hexdigest()


@dataclass(frozen=True)
class AgentWarmStartConfig:
    """Everything that determines the warm-started base model besides its transcripts."""

    base_model: str = AGENT_MODEL
    seed: int = 0
    batch_size: int = 16
    learning_rate: float = 3e-3
    steps: int = 120
    eval_every: int = 40
    temperature: float = 1.0  # of the held-out check (the RL arms' own temperature, by default)
    max_tokens: int = 200


DEFAULT_CONFIG = AgentWarmStartConfig()


@dataclass
class AgentWarmStartResult:
    path: str
    config: dict[str, Any]
    turns_sha256: str
    train_turns: int
    steps: int
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    refused_examples: list[str] = field(default_factory=list)  # up to 3 refused replies of the last check

    @property
    def valid_rate(self) -> float:
        """The held-out valid-call rate at the last check."""
        return self.history[-1]["valid_rate"] if self.history else float("nan")


def held_out_check(
    sampler: Any,
    held_out: Sequence[ReferenceTurn],
    judge: Callable[[list[int], str], bool],
    *,
    temperature: float,
    max_tokens: int,
    seed: int,
    stop: Any,
) -> tuple[float, list[list[int]]]:
    """The share of held-out prompts whose one sampled reply ``judge(tokens, stop_reason)`` accepts, and the
    first three replies it refused (their tokens)."""
    params = types.SamplingParams(max_tokens=max_tokens, temperature=temperature, stop=stop)
    futures = [
        sampler.sample(
            types.ModelInput.from_ints(list(t.prompt)), 1, params.model_copy(update={"seed": seed + i})
        )
        for i, t in enumerate(held_out)
    ]
    seqs = [f.result().sequences[0] for f in futures]
    verdicts = [judge(list(s.tokens), s.stop_reason) for s in seqs]
    refused = [list(s.tokens) for s, ok in zip(seqs, verdicts, strict=True) if not ok][:3]
    return sum(verdicts) / max(len(seqs), 1), refused


def shuffled_batches(n_items: int, batch_size: int, seed: int) -> Iterator[list[int]]:
    """Endless batches of item indices: a seeded shuffle of all items, then the next, each batch drawn from
    the queue without replacement (a batch may span two shuffles)."""
    rng = random.Random(seed)
    order: list[int] = []
    while True:
        if len(order) < batch_size:
            fresh = list(range(n_items))
            rng.shuffle(fresh)
            order += fresh
        batch, order = order[:batch_size], order[batch_size:]
        yield batch


def train_agent_warm_start(
    service: LocalServiceClient,
    turns: Sequence[ReferenceTurn],
    held_out: Sequence[ReferenceTurn],
    judge: Callable[[list[int], str], bool],
    stop: Any,
    config: AgentWarmStartConfig = DEFAULT_CONFIG,
    log: Callable[[dict[str, float]], None] | None = None,
) -> tuple[Any, AgentWarmStartResult]:
    """Run the warm start (module docstring); returns the trained client and its record."""
    if not turns:
        raise ValueError("no reference transcripts to learn from")
    t0 = time.perf_counter()
    tc = service.create_full_training_client(config.base_model, seed=config.seed).result()
    datums = [t.datum() for t in turns]
    adam = types.AdamParams(learning_rate=config.learning_rate, beta1=0.9, beta2=0.95, eps=1e-8)
    history: list[dict[str, float]] = []
    refused: list[list[int]] = []
    batches = shuffled_batches(len(datums), config.batch_size, config.seed)
    for step in range(1, config.steps + 1):
        batch = next(batches)
        fb = tc.forward_backward([datums[i] for i in batch], "cross_entropy")
        tc.optim_step(adam).result()
        n_tokens = sum(len(turns[i].reply) for i in batch)
        nll = loss_sum(fb.result()) / max(n_tokens, 1)
        if step % config.eval_every == 0 or step == config.steps:
            sampler = tc.save_weights_and_get_sampling_client().result()
            rate, refused = held_out_check(
                sampler,
                held_out,
                judge,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                seed=10_000 + step,
                stop=stop,
            )
            history.append({"step": step, "nll_per_token": nll, "valid_rate": rate})
            if log is not None:
                log(history[-1])
    result = AgentWarmStartResult(
        path="",
        config=asdict(config),
        turns_sha256=turns_digest(list(turns) + list(held_out)),
        train_turns=len(turns),
        steps=config.steps,
        history=history,
        seconds=time.perf_counter() - t0,
        refused_examples=[tc.get_tokenizer().decode(t) for t in refused],
    )
    return tc, result


def save_model_dir(
    training_client: Any, out: Path, record: Mapping[str, Any], threads: int | None = 1
) -> None:
    """The client's model and tokenizer as a Hugging Face directory, every file atomically; the manifest
    (``record``) last, so a folder without one is rebuilt."""
    from rftlab.runs.atomic import atomic_directory, atomic_write_text

    with atomic_directory(out) as staging, torch_threads(threads):
        training_client.model.save_pretrained(staging)
        training_client.get_tokenizer().save_pretrained(staging)
    atomic_write_text(out / MANIFEST, json.dumps(dict(record), indent=2) + "\n")


def read_manifest(out: Path, match: Mapping[str, Any]) -> dict[str, Any] | None:
    """The directory's manifest when it exists, with a model, and agrees with ``match`` on every key."""
    file = out / MANIFEST
    if not file.is_file() or not (out / "config.json").is_file():
        return None
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return record if all(record.get(k) == v for k, v in match.items()) else None


def prepare_agent_base(
    out_dir: str | Path,
    turns: Sequence[ReferenceTurn],
    held_out: Sequence[ReferenceTurn],
    judge: Callable[[list[int], str], bool],
    stop: Any,
    config: AgentWarmStartConfig = DEFAULT_CONFIG,
    *,
    num_threads: int | None = 1,
    log: Callable[[dict[str, float]], None] | None = None,
) -> AgentWarmStartResult:
    """The warm-started base model directory (built once for a config and its transcripts, then reused)."""
    out = Path(out_dir)
    digest = turns_digest(list(turns) + list(held_out))
    if (record := read_manifest(out, {"config": asdict(config), "turns_sha256": digest})) is not None:
        names = [f.name for f in dataclasses.fields(AgentWarmStartResult)]
        return AgentWarmStartResult(**{k: record[k] for k in names if k in record})
    service = LocalServiceClient(num_threads=num_threads)
    tc, result = train_agent_warm_start(service, turns, held_out, judge, stop, config, log)
    result.path = str(out.resolve())
    save_model_dir(tc, out, asdict(result), num_threads)
    return result
