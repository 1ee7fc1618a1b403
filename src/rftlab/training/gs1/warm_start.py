"""Supervised warm start for the local GSM8K-style task, so the base policy's pilot reward lands inside
the GS1 spec's activation window (0.1-0.9) before RL.

The warm start is ordinary ``cross_entropy`` training through the local backend's training client
(same ``forward_backward``/``optim_step`` code, losses and Adam as the RL loop; prompts rendered
exactly as the loop renders them; the target a short worked line such as ``3+4=7 \\boxed{7}``
followed by the renderer's stop token). It trains *all* weights (``create_full_training_client``),
not a LoRA: on the randomly initialised tiny base a LoRA learned far too slowly (measured during
development on this task, batch 64: LoRA rank 32 at lr 1e-2 had sampled reward 0.016 and NLL 1.54
per token after 120 steps, and diverged at step 140; full-parameter training at lr 3e-3 reached
reward 0.27 and NLL 0.15 at step 120). Every ``eval_every`` steps it measures the
sampled reward (temperature 1.0, the RL sampling temperature) on held-out *train-stream* problems and
stops at the first check at or above ``target_reward`` (never on the test set). The trained
weights are saved as a Hugging Face model directory with the tokenizer: the RL arms use that
directory as ``base_model`` and start fresh seed-0 LoRAs on it, so
both arms start from the same base and the loop has no local-only branch.

``prepare_base_model(out_dir, config)`` is idempotent: a directory whose ``warm_start.json`` records
the same config is reused as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tinker import types

from rftlab.envs.gs1 import QUESTION_SUFFIX, MathProblem, reward, train_problems
from rftlab.training.agent_warm_start import MANIFEST as MANIFEST  # the manifest's file name, re-exported
from rftlab.training.agent_warm_start import read_manifest, save_model_dir, shuffled_batches
from rftlab.training.backend_fields import loss_sum
from rftlab.training.local_tinker.clients import LocalServiceClient, LocalTrainingClient
from rftlab.training.local_tinker.model import TINY_MODEL, register_builtin_tokenizers

if TYPE_CHECKING:
    from tinker_cookbook.renderers import Renderer


@dataclass(frozen=True)
class WarmStartConfig:
    """Everything that determines the warm-started base model."""

    base_model: str = TINY_MODEL
    renderer_name: str = "qwen3_5_disable_thinking"
    question_suffix: str = QUESTION_SUFFIX
    seed: int = 0
    data_seed: int = 7
    batch_size: int = 64
    learning_rate: float = 3e-3
    max_steps: int = 400
    eval_every: int = 20
    eval_problems: int = 128
    target_reward: float = 0.35
    max_tokens: int = 24


@dataclass
class WarmStartResult:
    path: str
    config: dict[str, Any]
    steps: int
    reached_target: bool
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def final_reward(self) -> float:
        return self.history[-1]["sampled_reward"] if self.history else float("nan")


def renderer_for(base_model: str, renderer_name: str) -> Any:
    from tinker_cookbook import renderers
    from tinker_cookbook.tokenizer_utils import get_tokenizer

    register_builtin_tokenizers()
    return renderers.get_renderer(renderer_name, get_tokenizer(base_model))


def build_prompt(
    renderer: Renderer, problem: MathProblem, question_suffix: str = QUESTION_SUFFIX
) -> types.ModelInput:
    """The generation prompt for ``problem``: one user turn, ``question + suffix`` (no few-shot prefix)."""
    return renderer.build_generation_prompt([{"role": "user", "content": problem.question + question_suffix}])


def sft_datum(
    renderer: Renderer, problem: MathProblem, question_suffix: str = QUESTION_SUFFIX
) -> types.Datum:
    """A ``cross_entropy`` datum: the prompt unweighted, the solution line and the stop token weighted 1."""
    prompt = build_prompt(renderer, problem, question_suffix)
    stop = renderer.get_stop_sequences()
    if not stop or not isinstance(stop[0], int):
        raise ValueError("the warm start needs a renderer whose stop sequence is a token id")
    response = list(renderer.tokenizer.encode(problem.solution, add_special_tokens=False)) + [int(stop[0])]
    ob = prompt.length - 1
    return types.Datum(
        model_input=prompt.append(types.EncodedTextChunk(tokens=response[:-1])),
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_torch(torch.tensor([0] * ob + response, dtype=torch.long)),
            "weights": types.TensorData.from_torch(torch.tensor([0.0] * ob + [1.0] * len(response))),
        },
    )


def response_text(renderer: Renderer, tokens: list[int]) -> str:
    from tinker_cookbook import renderers

    message, _ = renderer.parse_response(tokens)
    return renderers.get_text_content(message)


def sampled_reward(
    sampler: Any,
    renderer: Renderer,
    problems: list[MathProblem],
    *,
    temperature: float,
    max_tokens: int,
    seed: int,
    question_suffix: str = QUESTION_SUFFIX,
) -> float:
    """Mean reward of one sample per problem (``temperature`` 0 is greedy)."""
    params = types.SamplingParams(
        max_tokens=max_tokens, temperature=temperature, stop=renderer.get_stop_sequences(), seed=seed
    )
    futures = [
        sampler.sample(
            build_prompt(renderer, p, question_suffix), 1, params.model_copy(update={"seed": seed + i})
        )
        for i, p in enumerate(problems)
    ]
    rewards = [
        reward(response_text(renderer, f.result().sequences[0].tokens), p.final)
        for f, p in zip(futures, problems, strict=True)
    ]
    return sum(rewards) / max(len(rewards), 1)


def warm_start(
    service: LocalServiceClient,
    config: WarmStartConfig = WarmStartConfig(),
    log: Callable[[dict[str, float]], None] | None = None,
) -> tuple[LocalTrainingClient, WarmStartResult]:
    """Run the calibrated supervised warm start; returns the trained client and its record."""
    t0 = time.perf_counter()
    renderer = renderer_for(config.base_model, config.renderer_name)
    tc = service.create_full_training_client(config.base_model, seed=config.seed).result()
    pool = train_problems(
        config.max_steps * config.batch_size // 4 + config.eval_problems, seed=config.data_seed
    )
    held_out, train = pool[: config.eval_problems], pool[config.eval_problems :]
    datums = [sft_datum(renderer, p, config.question_suffix) for p in train]
    batches = shuffled_batches(len(datums), config.batch_size, config.seed)
    adam = types.AdamParams(learning_rate=config.learning_rate, beta1=0.9, beta2=0.95, eps=1e-8)
    history: list[dict[str, float]] = []
    reached = False
    step = 0
    while step < config.max_steps:
        batch = next(batches)
        fb = tc.forward_backward([datums[i] for i in batch], "cross_entropy")
        tc.optim_step(adam).result()
        n_tokens = sum(float(datums[i].loss_fn_inputs["weights"].to_torch().sum()) for i in batch)
        nll = loss_sum(fb.result()) / max(n_tokens, 1.0)
        step += 1
        if step % config.eval_every == 0 or step == config.max_steps:
            sampler = tc.save_weights_and_get_sampling_client().result()
            r = sampled_reward(
                sampler,
                renderer,
                held_out,
                temperature=1.0,
                max_tokens=config.max_tokens,
                seed=10_000 + step,
                question_suffix=config.question_suffix,
            )
            history.append({"step": step, "nll_per_token": nll, "sampled_reward": r})
            if log is not None:
                log(history[-1])
            if r >= config.target_reward:
                reached = True
                break
    result = WarmStartResult(
        path="",
        config=asdict(config),
        steps=step,
        reached_target=reached,
        history=history,
        seconds=time.perf_counter() - t0,
    )
    return tc, result


def prepare_base_model(
    out_dir: str | Path,
    config: WarmStartConfig = WarmStartConfig(),
    *,
    num_threads: int | None = 1,
    log: Callable[[dict[str, float]], None] | None = None,
) -> WarmStartResult:
    """The warm-started base model directory for the local task (built once, then reused)."""
    out = Path(out_dir)
    if (record := read_manifest(out, {"config": asdict(config)})) is not None:
        return WarmStartResult(
            **{k: record[k] for k in ("path", "config", "steps", "reached_target", "history", "seconds")}
        )
    service = LocalServiceClient(num_threads=num_threads)
    tc, result = warm_start(service, config, log)
    result.path = str(out.resolve())
    save_model_dir(
        tc, out, asdict(result), num_threads
    )  # the manifest last: without it the folder is rebuilt
    return result
