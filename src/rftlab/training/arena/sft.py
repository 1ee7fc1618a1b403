"""Arena SFT on the tinker interface (docs/arena.md §9.5, §11): ``cross_entropy`` on assistant tokens only,
one training loop, the overfit check, greedy sampling as an arena reply provider, and the local model.

Rows are rendered with the base model's chat template (``tinker_cookbook`` renderer ``qwen3_instruct`` for
Qwen3-Instruct-2507, which has no thinking block), and only the assistant reply plus its end-of-turn
token carry loss weight. ``template_and_mask_problems`` checks exactly the failure modes the seed's overfit
check is meant to expose: weights leaking onto the prompt or header, a missing end-of-turn token, a
generation prompt that differs from the training prefix, and truncation.

``train_steps`` is the one optimizer loop (AdamW via ``optim_step``, warm-up + cosine to a floor, weight
decay, gradient clipping); ``overfit_check`` trains on the overfit rows, samples greedily and scores the
same rows with the validation scorer, continuing only if schema validity reaches the threshold in both
phases (else a template/loss-mask diagnosis). ``SamplingProvider`` turns a tinker ``SamplingClient`` into
an arena reply provider (greedy, the reply up to the end-of-turn token), batching a phase's prompts.

The code talks to ``tinker.ServiceClient`` (the hosted service, or a Tinker-compatible server through
``TINKER_BASE_URL``) or to the in-process ``rftlab.training.local_tinker`` backend: the same calls, real
``tinker.types``. The tinker interface sets the LoRA rank and which blocks train (attention, MLP,
unembedding); it has no LoRA alpha or dropout argument (see ``BACKEND_LORA_SUPPORT``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from rftlab.rollout.arena.evaluation import score_validation_reply
from rftlab.training.backend_fields import loss_sum

RENDERER_NAME = "qwen3_instruct"
END_OF_TURN = "<|im_end|>"
LOCAL_ARENA_MODEL = "rftlab/tiny-qwen3-arena"
"""The local stand-in model's name: a tiny random-init Qwen3 (2 layers, hidden 64) with a 1,024-symbol
byte-level BPE trained on arena prompts and a 2,048-token context, written as a Hugging Face directory by
``local_arena_model``. It checks the plumbing; it is not a language model."""
LOCAL_CONTEXT = 2048
ARENA_BPE_VOCAB = 1024
BACKEND_LORA_SUPPORT: dict[str, str] = {
    "rank": "supported (create_lora_training_client(rank=...))",
    "targets": "attention q/k/v/o and MLP gate/up/down: train_attn=True, train_mlp=True, train_unembed=False",
    "alpha": "not an argument of the tinker interface: the hosted service fixes it; the local backend uses 32",
    "dropout": "not supported by the tinker interface (no dropout on either backend)",
    "gradient_checkpointing": "a server-side memory setting, not exposed by the tinker interface",
}


class SftError(ValueError):
    """Bad input to the SFT path (rows that do not render, an empty set, a missing model)."""


def get_arena_renderer(tokenizer: Any, name: str = RENDERER_NAME) -> Any:
    from tinker_cookbook.renderers import get_renderer

    return get_renderer(name, tokenizer)


def row_example(row: Mapping[str, Any], renderer: Any) -> tuple[Any, Any]:
    """``(ModelInput, weights)`` of a chat row: loss on the last assistant message (+ end-of-turn) only."""
    from tinker_cookbook.renderers import TrainOnWhat

    messages = row.get("messages") if isinstance(row, Mapping) else None
    if not isinstance(messages, list) or [
        m.get("role") if isinstance(m, Mapping) else None for m in messages
    ] != ["system", "user", "assistant"]:
        raise SftError(
            f"row {row.get('id') if isinstance(row, Mapping) else row!r}: expected system, user, assistant messages"
        )
    return renderer.build_supervised_example(
        [dict(m) for m in messages], train_on_what=TrainOnWhat.LAST_ASSISTANT_MESSAGE
    )


def row_datum(row: Mapping[str, Any], renderer: Any, max_length: int) -> Any:
    """A ``tinker.Datum`` for ``cross_entropy`` (right-shifted input, left-shifted targets, weights)."""
    from tinker_cookbook.supervised.common import datum_from_model_input_weights

    model_input, weights = row_example(row, renderer)
    return datum_from_model_input_weights(model_input, weights, max_length=max_length)


def template_and_mask_problems(
    rows: Sequence[Mapping[str, Any]], renderer: Any, tokenizer: Any, max_length: int
) -> list[str]:
    """Template and loss-mask defects, one line per row and problem (empty when everything is right)."""
    problems = []
    for row in rows:
        label = f"row {row.get('id', '?')}"
        model_input, weights = row_example(row, renderer)
        tokens = model_input.to_ints()
        w = [float(x) for x in weights.tolist()]
        weighted = [t for t, x in zip(tokens, w, strict=True) if x > 0]
        expected = row["messages"][2]["content"] + END_OF_TURN
        if tokenizer.decode(weighted) != expected:
            problems.append(
                f"{label}: loss mask covers {tokenizer.decode(weighted)[:60]!r}, not the reply + end-of-turn"
            )
        if any(x not in (0.0, 1.0) for x in w):
            problems.append(f"{label}: weights other than 0/1")
        prompt = renderer.build_generation_prompt([dict(m) for m in row["messages"][:2]]).to_ints()
        if tokens[: len(prompt)] != prompt:
            problems.append(f"{label}: the generation prompt is not a prefix of the training sequence")
        elif any(x > 0 for x in w[: len(prompt)]):
            problems.append(f"{label}: loss weight on prompt or assistant-header tokens")
        if len(tokens) > max_length:
            problems.append(
                f"{label}: {len(tokens)} tokens exceed the sequence length {max_length} (truncated)"
            )
    return problems


def learning_rate_at(
    step: int, total_steps: int, base_lr: float, min_lr: float = 0.0, warmup_steps: int = 0
) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine from ``base_lr`` down to ``min(min_lr, base_lr)``."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps - 1)
    progress = min(1.0, (step - warmup_steps) / span)
    floor = min(min_lr, base_lr)
    return floor + 0.5 * (base_lr - floor) * (1 + math.cos(math.pi * progress))


def warmup_steps_for(total_steps: int, warmup_fraction: float) -> int:
    """``ceil(fraction · total)``: 3% of 310 steps is 10 (docs/arena.md §9.5)."""
    return math.ceil(warmup_fraction * total_steps)


@dataclass(frozen=True)
class OptimizerSettings:
    """What ``train_steps`` needs besides the batches: the learning-rate schedule and AdamW settings."""

    learning_rate: float
    min_learning_rate: float = 0.0
    warmup_steps: int = 0
    weight_decay: float = 0.0
    gradient_clip_norm: float = 1.0


def create_training_client(service: Any, base_model: str, rank: int, seed: int = 0) -> Any:
    """A LoRA training client on the recipe's targets (attention + MLP, not the unembedding)."""
    training = service.create_lora_training_client(
        base_model=base_model, rank=rank, seed=seed, train_mlp=True, train_attn=True, train_unembed=False
    )
    return training.result() if hasattr(training, "result") else training


def train_steps(
    training: Any,
    batches: Callable[[int], Sequence[Any]],
    steps: range,
    total_steps: int,
    optimizer: OptimizerSettings,
    on_step: Callable[[int, float, float], None] | None = None,
) -> list[float]:
    """The one SFT loop: for each step, ``forward_backward`` (``cross_entropy``) on ``batches(step)`` and an
    AdamW ``optim_step``; returns the loss per weighted token of each step. ``on_step(step, loss, lr)``
    is called after each step (progress, metrics)."""
    from tinker import types

    losses = []
    for step in steps:
        batch = list(batches(step))
        if not batch:
            raise SftError(f"step {step} has no rows")
        weight_total = sum(float(sum(d.loss_fn_inputs["weights"].to_torch().tolist())) for d in batch)
        result = training.forward_backward(batch, loss_fn="cross_entropy").result()
        lr = learning_rate_at(
            step, total_steps, optimizer.learning_rate, optimizer.min_learning_rate, optimizer.warmup_steps
        )
        params = types.AdamParams(
            learning_rate=lr, weight_decay=optimizer.weight_decay, grad_clip_norm=optimizer.gradient_clip_norm
        )
        training.optim_step(params).result()
        loss = loss_sum(result) / max(1.0, weight_total)
        losses.append(loss)
        if on_step is not None:
            on_step(step, loss, lr)
    return losses


# ---------------------------------------------------------------- sampling as an arena provider


class SamplingProvider:
    """An arena reply provider on a tinker ``SamplingClient``: greedy (temperature 0), at most
    ``max_tokens`` tokens, stopped at the end-of-turn token; the reply is the parsed assistant content.
    ``complete_batch`` submits every prompt before waiting for any (one round trip per phase)."""

    name = "tinker"

    def __init__(self, sampling_client: Any, model: str, max_tokens: int = 224, renderer: Any = None):
        self.client = sampling_client
        self.model = model
        self.max_tokens = max_tokens
        self.renderer = renderer or get_arena_renderer(sampling_client.get_tokenizer())

    def complete(self, messages: list[dict[str, str]], target: str) -> str:
        return self.complete_batch([(messages, target)])[0]

    def complete_batch(self, requests: Sequence[tuple[list[dict[str, str]], str]]) -> list[str]:
        from tinker import types

        params = types.SamplingParams(
            max_tokens=self.max_tokens, temperature=0.0, stop=self.renderer.get_stop_sequences()
        )
        futures = [
            self.client.sample(self.renderer.build_generation_prompt([dict(m) for m in messages]), 1, params)
            for messages, _target in requests
        ]
        replies = []
        for future in futures:
            message, _ = self.renderer.parse_response(future.result().sequences[0].tokens)
            content = message.get("content")
            replies.append(content if isinstance(content, str) else "")
        return replies

    def describe(self) -> dict[str, Any]:
        return {
            "provider": "tinker-sampling",
            "model": self.model,
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
            "renderer": RENDERER_NAME,
        }


def sample_replies(
    sampling_client: Any, rows: Sequence[Mapping[str, Any]], max_tokens: int = 224
) -> list[str]:
    """Greedy replies to each row's system + user prompt."""
    provider = SamplingProvider(sampling_client, "replies", max_tokens)
    return provider.complete_batch([([dict(m) for m in row["messages"][:2]], "") for row in rows])


# ---------------------------------------------------------------- the overfit check (seed step 2)


@dataclass(frozen=True)
class OverfitResult:
    """The overfit verdict: schema validity per phase on the training rows themselves, and a diagnosis."""

    passed: bool
    schema_valid: dict[str, float | None]
    threshold: float
    losses: tuple[float, ...]
    problems: tuple[str, ...]
    diagnosis: str
    replies: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "schema_valid": self.schema_valid,
            "threshold": self.threshold,
            "first_loss": self.losses[0] if self.losses else None,
            "last_loss": self.losses[-1] if self.losses else None,
            "steps": len(self.losses),
            "template_and_mask_problems": list(self.problems),
            "diagnosis": self.diagnosis,
        }


def overfit_verdict(
    rows: Sequence[Mapping[str, Any]],
    replies: Sequence[str],
    threshold: float,
    losses: Sequence[float] = (),
    problems: Sequence[str] = (),
) -> OverfitResult:
    """Score replies with the validation scorer; pass iff both phases are present and each reaches
    ``threshold`` schema validity."""
    scored = [score_validation_reply(row, reply) for row, reply in zip(rows, replies, strict=True)]
    rates: dict[str, float | None] = {}
    for phase in ("BROADCAST", "ACT"):
        flags = [s["schema_valid"] for s in scored if s["phase"] == phase]
        rates[phase] = sum(flags) / len(flags) if flags else None
    passed = all(rate is not None and rate >= threshold for rate in rates.values())
    if passed:
        diagnosis = "strict JSON reached the threshold on the overfit rows: template and loss mask look right"
    elif any(rate is None for rate in rates.values()):
        diagnosis = "STOP: the overfit rows lack a phase, so the check cannot pass; use rows of both phases"
    elif problems:
        diagnosis = f"STOP: {len(problems)} template/loss-mask defects found, e.g. {problems[0]}"
    else:
        diagnosis = (
            "STOP: the model cannot reproduce rows it was trained on, yet the rendered template and the loss "
            "mask pass every check; look at the chat template used at serving time, tokenizer special tokens "
            "and the learning rate (and, for a tiny model, its capacity) before adding data"
        )
    return OverfitResult(passed, rates, threshold, tuple(losses), tuple(problems), diagnosis, tuple(replies))


def overfit_check(
    service: Any,
    rows: Sequence[Mapping[str, Any]],
    base_model: str,
    *,
    rank: int,
    steps: int,
    batch_size: int,
    optimizer: OptimizerSettings,
    threshold: float,
    max_tokens: int = 224,
    max_length: int = 2048,
    seed: int = 0,
    on_step: Callable[[int, float, float], None] | None = None,
) -> OverfitResult:
    """Train on ``rows`` (in order, ``batch_size`` per step, cycling), then score greedy replies to the
    same rows (seed step 2)."""
    if not rows:
        raise SftError("no rows to train on")
    if steps < 1 or batch_size < 1:
        raise SftError("steps and batch_size must be >= 1")
    training = create_training_client(service, base_model, rank, seed)
    tokenizer = training.get_tokenizer()
    renderer = get_arena_renderer(tokenizer)
    problems = template_and_mask_problems(rows, renderer, tokenizer, max_length)
    datums = [row_datum(row, renderer, max_length) for row in rows]

    def batches(step: int) -> list[Any]:
        return [datums[(step * batch_size + i) % len(datums)] for i in range(batch_size)]

    losses = train_steps(training, batches, range(steps), steps, optimizer, on_step)
    sampler = training.save_weights_and_get_sampling_client()
    sampler = sampler.result() if hasattr(sampler, "result") else sampler
    replies = sample_replies(sampler, rows, max_tokens)
    return overfit_verdict(rows, replies, threshold, losses, problems)


def overfit_subset(rows: Sequence[Mapping[str, Any]], count: int | None) -> list[Mapping[str, Any]]:
    """The overfit rows to use: all of them (``None``), or a phase-balanced prefix of ``count`` rows (the
    first ⌈count/2⌉ ACT and ⌊count/2⌋ BROADCAST rows in file order), so both phases are checked."""
    if count is None or count >= len(rows):
        return list(rows)
    acts = [r for r in rows if r["metadata"]["phase"] == "ACT"][: (count + 1) // 2]
    broadcasts = [r for r in rows if r["metadata"]["phase"] == "BROADCAST"][: count // 2]
    return acts + broadcasts


# ---------------------------------------------------------------- services and the local model


def tinker_service() -> Any:
    """``tinker.ServiceClient()``: a Tinker-API server named by ``TINKER_BASE_URL`` or hosted Tinker, with
    ``TINKER_API_KEY`` (``rftlab.training.tinker_target``); ``SftError`` when it cannot authenticate."""
    from rftlab.training.tinker_target import TinkerTargetError, sdk_service_client

    try:
        return sdk_service_client()
    except TinkerTargetError as exc:
        raise SftError(str(exc)) from None


def service_client(storage_dir: str | Path | None = None, model_dirs: Sequence[str | Path] = ()) -> Any:
    """The SDK's client when the Tinker target is a server or hosted Tinker (``tinker_target``), else the
    in-process local backend."""
    from rftlab.training.tinker_target import uses_sdk

    if uses_sdk():
        return tinker_service()
    from rftlab.training.local_tinker import LocalServiceClient

    return LocalServiceClient(storage_dir=storage_dir, model_dirs=list(model_dirs))


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars and advisory log messages (sequence-length notices, weight
    loading) while the local model is built, loaded and run: reports carry no progress bars."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _arena_corpus() -> list[str]:
    """A fixed corpus of arena chat text for the local tokenizer: every message of a small seeded build
    (system, user and assistant turns of both phases) plus the chat-template words."""
    from rftlab.rollout.arena.sft_data import SftConfig, build_rows

    built = build_rows(SftConfig(num_seeds=48, targeted_mechanics_per_kind=3, targeted_silence_examples=8))
    corpus = [m["role"] + "\n" + m["content"] for row in built.rows for m in row["messages"]]
    return corpus + ["user\n", "assistant\n", "system\n", "\n\n"] * 20


@cache
def arena_bpe_tokenizer() -> Any:
    """A deterministic byte-level BPE (≤ 1,024 symbols, digits single) with the Qwen chat special tokens,
    trained on ``_arena_corpus``: arena prompts are about 4x shorter than with plain bytes. Any text still
    round-trips (all 256 byte symbols are in the vocabulary)."""
    from rftlab.training.local_tinker.model import train_chat_bpe

    return train_chat_bpe(_arena_corpus(), ARENA_BPE_VOCAB, LOCAL_CONTEXT)


def local_arena_model(directory: str | Path) -> str:
    """Write ``LOCAL_ARENA_MODEL`` (deterministic init, the arena BPE, a 2,048-token context) to ``directory``
    as a Hugging Face model directory, unless it is already there; returns the directory."""
    import torch
    from transformers import Qwen3ForCausalLM

    from rftlab.training.local_tinker.model import TinyModelSpec, tiny_config

    path = Path(directory)
    if (path / "config.json").is_file() and (path / "tokenizer.json").is_file():
        return str(path)
    tokenizer = arena_bpe_tokenizer()
    spec = TinyModelSpec(max_position_embeddings=LOCAL_CONTEXT)
    config = tiny_config(spec, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    with quiet_transformers(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.init_seed)
        model = Qwen3ForCausalLM(config)
        from rftlab.runs.atomic import atomic_directory

        # config.json moves in last: its presence (checked above) means the rest is there
        with atomic_directory(path, last=("config.json",)) as staging:
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
    return str(path)


@dataclass
class LossLog:
    """Losses and learning rates per step (an ``on_step`` callback that keeps them)."""

    losses: list[float] = field(default_factory=list)
    learning_rates: list[float] = field(default_factory=list)

    def __call__(self, step: int, loss: float, lr: float) -> None:
        self.losses.append(loss)
        self.learning_rates.append(lr)
