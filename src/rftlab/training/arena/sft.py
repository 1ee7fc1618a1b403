"""Arena SFT on the tinker interface: ``cross_entropy`` on assistant tokens only, and the overfit smoke test.

Rows are rendered with the base model's chat template (``tinker_cookbook`` renderer ``qwen3_instruct`` for
Qwen3-Instruct-2507, which has no thinking block), and only the assistant reply plus its end-of-turn
token carry loss weight. ``template_and_mask_problems`` checks exactly the failure modes the seed's smoke
test is meant to expose: weights leaking onto the prompt or header, a missing end-of-turn token, a
generation prompt that differs from the training prefix, and truncation. ``train_sft`` runs AdamW steps
with the recipe's warm-up + cosine schedule, weight decay and gradient clipping; ``overfit_smoke_test``
trains on the overfit rows, samples greedily and scores them with the validation scorer, and stops with a
template/loss-mask diagnosis unless schema validity reaches the threshold in both phases.

The same code runs on ``tinker.ServiceClient`` when ``TINKER_API_KEY`` is set, and otherwise on the
in-process ``rftlab.training.local_tinker`` backend.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.rollout.arena.evaluation import score_validation_reply
from rftlab.training.arena.recipe import STAGE1_RECIPE, SftRecipe

RENDERER_NAME = "qwen3_instruct"
END_OF_TURN = "<|im_end|>"
LOCAL_LONG_CONTEXT = 4096
"""Context of the local stand-in model: arena prompts are about 3,000 byte tokens, beyond the built-in 1,024."""


class SftError(ValueError):
    """Bad input to the SFT path (rows that do not render, an empty set, a missing model)."""


def get_arena_renderer(tokenizer: Any, name: str = RENDERER_NAME) -> Any:
    from tinker_cookbook.renderers import get_renderer

    return get_renderer(name, tokenizer)


def row_example(row: Mapping[str, Any], renderer: Any) -> tuple[Any, Any]:
    """``(ModelInput, weights)`` of a chat row: loss on the last assistant message (+ end-of-turn) only."""
    from tinker_cookbook.renderers import TrainOnWhat

    messages = row["messages"]
    if [m.get("role") for m in messages] != ["system", "user", "assistant"]:
        raise SftError(f"row {row.get('id')}: expected system, user, assistant messages")
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
    step: int, total_steps: int, recipe: SftRecipe = STAGE1_RECIPE, base_lr: float | None = None
) -> float:
    """Linear warm-up over ``ceil(warmup_fraction·total)`` steps, then cosine from ``base_lr`` to ``min_lr``."""
    base = recipe.learning_rate if base_lr is None else base_lr
    warmup = math.ceil(recipe.warmup_fraction * total_steps)
    if step < warmup:
        return base * (step + 1) / warmup
    span = max(1, total_steps - warmup - 1)
    progress = min(1.0, (step - warmup) / span)
    floor = min(recipe.min_learning_rate, base)
    return floor + 0.5 * (base - floor) * (1 + math.cos(math.pi * progress))


@dataclass
class SftRun:
    """What one SFT run did: per-step loss per weighted token and learning rate."""

    base_model: str
    steps: int
    batch_size: int
    losses: list[float] = field(default_factory=list)
    learning_rates: list[float] = field(default_factory=list)
    training_client: Any = None


def train_sft(
    service_client: Any,
    rows: Sequence[Mapping[str, Any]],
    base_model: str,
    steps: int,
    batch_size: int,
    recipe: SftRecipe = STAGE1_RECIPE,
    base_lr: float | None = None,
    weight_decay: float | None = None,
    seed: int = 0,
    max_length: int | None = None,
    on_step: Callable[[int, float, float], None] | None = None,
) -> SftRun:
    """LoRA SFT with ``cross_entropy``: cycle through ``rows`` in order, ``batch_size`` per step."""
    from tinker import types

    if not rows:
        raise SftError("no rows to train on")
    if steps < 1 or batch_size < 1:
        raise SftError("steps and batch_size must be >= 1")
    training = service_client.create_lora_training_client(
        base_model=base_model, rank=recipe.lora_rank, seed=seed
    )
    training = training.result() if hasattr(training, "result") else training
    tokenizer = training.get_tokenizer()
    renderer = get_arena_renderer(tokenizer)
    length = max_length or recipe.max_sequence_length
    datums = [row_datum(row, renderer, length) for row in rows]
    run = SftRun(base_model, steps, batch_size, training_client=training)
    decay = recipe.weight_decay if weight_decay is None else weight_decay
    for step in range(steps):
        batch = [datums[(step * batch_size + i) % len(datums)] for i in range(batch_size)]
        weight_total = sum(float(sum(d.loss_fn_inputs["weights"].to_torch().tolist())) for d in batch)
        result = training.forward_backward(batch, loss_fn="cross_entropy").result()
        lr = learning_rate_at(step, steps, recipe, base_lr)
        params = types.AdamParams(
            learning_rate=lr, weight_decay=decay, grad_clip_norm=recipe.gradient_clip_norm
        )
        training.optim_step(params).result()
        loss = float(result.metrics["loss:sum"]) / max(1.0, weight_total)
        run.losses.append(loss)
        run.learning_rates.append(lr)
        if on_step is not None:
            on_step(step, loss, lr)
    return run


def sample_replies(
    sampling_client: Any, rows: Sequence[Mapping[str, Any]], max_tokens: int = 224
) -> list[str]:
    """Greedy replies to each row's system + user prompt, decoded up to the end-of-turn token."""
    from tinker import types

    tokenizer = sampling_client.get_tokenizer()
    renderer = get_arena_renderer(tokenizer)
    params = types.SamplingParams(max_tokens=max_tokens, temperature=0.0, stop=renderer.get_stop_sequences())
    futures = [
        sampling_client.sample(
            renderer.build_generation_prompt([dict(m) for m in row["messages"][:2]]), 1, params
        )
        for row in rows
    ]
    replies = []
    for future in futures:
        message, _ = renderer.parse_response(future.result().sequences[0].tokens)
        content = message.get("content")
        replies.append(content if isinstance(content, str) else "")
    return replies


@dataclass(frozen=True)
class OverfitResult:
    """The smoke test verdict: schema validity per phase on the training rows themselves, and a diagnosis."""

    passed: bool
    schema_valid: dict[str, float | None]
    threshold: float
    losses: tuple[float, ...]
    problems: tuple[str, ...]
    diagnosis: str

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
    """Score replies with the validation scorer; pass iff schema validity >= threshold in both phases."""
    scored = [score_validation_reply(row, reply) for row, reply in zip(rows, replies, strict=True)]
    rates: dict[str, float | None] = {}
    for phase in ("BROADCAST", "ACT"):
        flags = [s["schema_valid"] for s in scored if s["phase"] == phase]
        rates[phase] = sum(flags) / len(flags) if flags else None
    passed = all(rate is None or rate >= threshold for rate in rates.values()) and any(
        rate is not None for rate in rates.values()
    )
    if passed:
        diagnosis = "strict JSON reached the threshold on the overfit rows: template and loss mask look right"
    elif problems:
        diagnosis = f"STOP: {len(problems)} template/loss-mask defects found, e.g. {problems[0]}"
    else:
        diagnosis = (
            "STOP: the model cannot reproduce rows it was trained on, yet the rendered template and the loss "
            "mask pass every check; look at the chat template used at serving time, tokenizer special tokens "
            "and the learning rate before adding data"
        )
    return OverfitResult(passed, rates, threshold, tuple(losses), tuple(problems), diagnosis)


def overfit_smoke_test(
    service_client: Any,
    rows: Sequence[Mapping[str, Any]],
    base_model: str,
    recipe: SftRecipe = STAGE1_RECIPE,
    steps: int | None = None,
    batch_size: int | None = None,
    base_lr: float | None = None,
    max_tokens: int = 224,
    max_length: int | None = None,
) -> OverfitResult:
    """Train on ``rows`` (the overfit set), then score greedy replies to the same rows (seed step 2)."""
    run = train_sft(
        service_client,
        rows,
        base_model,
        steps=steps or recipe.overfit_steps,
        batch_size=batch_size or recipe.overfit_batch_size,
        recipe=recipe,
        base_lr=base_lr,
        weight_decay=recipe.overfit_weight_decay,
        max_length=max_length,
    )
    tokenizer = run.training_client.get_tokenizer()
    problems = template_and_mask_problems(
        rows, get_arena_renderer(tokenizer), tokenizer, max_length or recipe.max_sequence_length
    )
    sampler = run.training_client.save_weights_and_get_sampling_client()
    sampler = sampler.result() if hasattr(sampler, "result") else sampler
    replies = sample_replies(sampler, rows, max_tokens)
    return overfit_verdict(rows, replies, recipe.overfit_min_schema_valid, run.losses, problems)


def service_client(storage_dir: str | Path | None = None, model_dirs: Sequence[str | Path] = ()) -> Any:
    """``tinker.ServiceClient`` when ``TINKER_API_KEY`` is set, else the in-process local backend."""
    if os.environ.get("TINKER_API_KEY"):
        import tinker

        return tinker.ServiceClient()
    from rftlab.training.local_tinker import LocalServiceClient

    return LocalServiceClient(storage_dir=storage_dir, model_dirs=list(model_dirs))


def local_long_context_model(directory: str | Path, max_positions: int = LOCAL_LONG_CONTEXT) -> str:
    """Write the built-in tiny Qwen3 architecture with a ``max_positions`` context (and the byte tokenizer) to
    ``directory`` as a Hugging Face model, so the local backend can hold a whole arena prompt."""
    import torch
    from transformers import Qwen3ForCausalLM

    from rftlab.training.local_tinker import byte_tokenizer
    from rftlab.training.local_tinker.model import TinyModelSpec, tiny_config

    path = Path(directory)
    if (path / "config.json").is_file():
        return str(path)
    tokenizer = byte_tokenizer()
    spec = TinyModelSpec(max_position_embeddings=max_positions)
    config = tiny_config(spec, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.init_seed)
        model = Qwen3ForCausalLM(config)
    from rftlab.runs.atomic import atomic_directory

    tokenizer.model_max_length = max_positions
    # config.json moves in last: its presence (checked above) means the rest is there
    with atomic_directory(path, last=("config.json",)) as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
    return str(path)
