"""What the RL loop asks the sampler (``rl_loop`` steps 2-4 and the final evaluation): the sampling
parameters and per-request seeds, one request per sample, the step's graded rollouts (``sample_batch``)
with their per-group sample statistics, and the greedy evaluation (``evaluate``).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rftlab.envs.gs1.grading import grade
from rftlab.envs.gs1.task import MathTask, Problem
from rftlab.training.gs1.advantages import prompt_features
from rftlab.training.gs1.config import GS1ArmConfig, prompt_order, step_prompt_indices

if TYPE_CHECKING:
    from tinker.types import ModelInput
    from tinker_cookbook.renderers import Renderer

MAX_RESPONSE_CHARS = 4000  # response text kept per rollout / eval item (the full tokens are not logged)


def sampling_params(config: GS1ArmConfig, renderer: Renderer, seed: int | None, greedy: bool = False):
    from tinker import types

    return types.SamplingParams(
        max_tokens=config.eval_max_tokens if greedy else config.max_tokens,
        temperature=0.0 if greedy else config.temperature,
        stop=renderer.get_stop_sequences(),
        seed=seed,
    )


def response_text(renderer: Renderer, tokens: Sequence[int]) -> str:
    """The text of a sampled response as the renderer parses it. Memoised per renderer: the tiny model
    repeats itself (the GS1 runs hold 45,769 responses and 4,814 distinct texts)."""
    memo = _TEXTS.setdefault(renderer, {})
    key = tuple(tokens)
    text = memo.get(key)
    if text is None:
        from tinker_cookbook import renderers

        message, _ = renderer.parse_response(list(tokens))
        if len(memo) >= MAX_MEMO_TEXTS:
            memo.clear()
        text = memo[key] = renderers.get_text_content(message)
    return text


MAX_MEMO_TEXTS = 100_000
_TEXTS: weakref.WeakKeyDictionary[Renderer, dict[tuple[int, ...], str]] = weakref.WeakKeyDictionary()
"""``response_text``'s memo, per renderer (gone with it)."""


TRAIN_SALT, HELDOUT_SALT, EVAL_SALT = 0, 7, 13


def request_seed(config: GS1ArmConfig, step: int, k: int, g: int = 0, salt: int = TRAIN_SALT) -> int:
    """The sampling seed of sample ``g`` of prompt ``k`` at ``step`` (``salt`` tells training, held-out
    and evaluation requests apart): a ``numpy.random.SeedSequence`` hash of the five numbers, below
    2**31 - 1, so no two requests of a run share a seed (docs/gs1.md §6)."""
    state = np.random.SeedSequence([config.seed, step, k, g, salt]).generate_state(1)[0]
    return int(state) % (2**31 - 1)


IMPLAUSIBLE_DUPLICATE_PROB = 1e-6
"""A pair of identical samples in one group is *implausible* under independent sampling when the
sequence's probability under the sampler's own logprobs, ``exp(Σ logprob)``, is below this: then the
chance of such a pair anywhere in a group of G is at most ``C(G, 2) · 1e-6`` (2.8e-5 for G = 8)."""


def group_sample_stats(groups: Sequence[Sequence[tuple[Sequence[int], float]]]) -> dict[str, Any]:
    """Distinct samples per group and duplicates that independent sampling makes implausible.

    ``groups`` holds, per prompt, its samples as ``(tokens, Σ sampler logprobs)``. Returns
    ``distinct_samples_per_group_mean`` / ``_min`` (distinct token sequences per group),
    ``groups_with_duplicates`` and ``groups_implausible_duplicates`` (a repeated sequence whose
    probability is below ``IMPLAUSIBLE_DUPLICATE_PROB``: the signature of a service that returns one
    sample several times, tinker-feedback #79), over the groups of two or more samples; every value is
    ``None`` when no group has two samples (GS1's groups of one cannot collapse)."""
    distinct, duplicated, implausible = [], 0, 0
    for group in groups:
        if len(group) < 2:
            continue
        seen: dict[tuple[int, ...], list[float]] = {}
        for tokens, logprob_sum in group:
            seen.setdefault(tuple(int(t) for t in tokens), []).append(float(logprob_sum))
        distinct.append(len(seen))
        repeats = [lps for lps in seen.values() if len(lps) > 1]
        duplicated += bool(repeats)
        implausible += any(
            math.exp(max(lps)) < IMPLAUSIBLE_DUPLICATE_PROB for lps in repeats
        )  # the largest of the copies' logprob sums: a copy never makes the pair look less likely
    if not distinct:
        return {
            "distinct_samples_per_group_mean": None,
            "distinct_samples_per_group_min": None,
            "groups_with_duplicates": None,
            "groups_implausible_duplicates": None,
        }
    return {
        "distinct_samples_per_group_mean": float(np.mean(distinct)),
        "distinct_samples_per_group_min": int(min(distinct)),
        "groups_with_duplicates": int(duplicated),
        "groups_implausible_duplicates": int(implausible),
    }


@dataclass
class SampledBatch:
    """One step's graded rollouts: ``records`` (logged per rollout) and, aligned with them, ``seqs``
    (prompt ``ModelInput``, response tokens, sampler logprobs) for building datums; ``group_stats`` and
    ``heldout_group_stats`` are ``group_sample_stats`` of the training and held-out groups."""

    records: list[dict[str, Any]]
    seqs: list[tuple[ModelInput, list[int], list[float]]]
    group_stats: dict[str, Any] = field(default_factory=dict)
    heldout_group_stats: dict[str, Any] = field(default_factory=dict)


def sample_requests(
    config: GS1ArmConfig,
    sampler: Any,
    renderer: Renderer,
    prompt: ModelInput,
    n: int,
    step: int,
    k: int,
    salt: int = TRAIN_SALT,
    send_seeds: bool = True,
    prompt_logprobs: bool = False,
) -> list[Any]:
    """``n`` samples of ``prompt`` as ``n`` requests of ``num_samples=1`` (futures, in order); with
    ``prompt_logprobs`` the first request also asks for the prompt's logprobs (``include_prompt_logprobs``).

    One request per sample keeps the members of a group independent whatever the service does with
    ``seed``: tinker-feedback #79 reports token-identical samples when a seed is combined with
    ``num_samples > 1``, tinker-cookbook #206 a seed without effect. With ``send_seeds`` each request
    carries its own ``request_seed`` (the local backend: reproducible runs); without, no seed is sent (the
    ``tinker`` backend). docs/gs1.md §6."""
    return [
        sampler.sample(
            prompt=prompt,
            num_samples=1,
            sampling_params=sampling_params(
                config, renderer, request_seed(config, step, k, g, salt) if send_seeds else None
            ),
            **({"include_prompt_logprobs": True} if prompt_logprobs and g == 0 else {}),
        )
        for g in range(n)
    ]


def prompt_logprobs_of(future: Any) -> list[float | None]:
    """The ``prompt_logprobs`` of a sample request sent with ``include_prompt_logprobs``; a service that
    returns none (a Tinker-API backend without prompt logprobs in its sample replies) is named, never a
    ``TypeError`` further on."""
    lps = future.result().prompt_logprobs
    if lps is None:
        raise RuntimeError(
            "the service returned no prompt_logprobs for a sample request with include_prompt_logprobs=True; "
            "GS1's feature needs them (a gap of this Tinker-API backend: the hosted service and rftlab serve "
            "tinker return them)"
        )
    return list(lps)


def _one_sequence(future: Any) -> Any:
    sequences = future.result().sequences
    if len(sequences) != 1:
        raise RuntimeError(f"backend returned {len(sequences)} samples for num_samples=1")
    return sequences[0]


def sample_batch(
    config: GS1ArmConfig,
    step: int,
    sampler: Any,
    renderer: Renderer,
    task: MathTask,
    send_seeds: bool = True,
) -> SampledBatch:
    """Steps 2-4: the step's prompts, ``group_size`` samples each (the first with the prompt's logprobs,
    φ), graded."""
    problems = [task.train[i] for i in step_prompt_indices(config, step, len(task.train))]
    prompts = [task.prompt(renderer, p) for p in problems]
    sample_futures = [
        sample_requests(
            config,
            sampler,
            renderer,
            p,
            config.group_size,
            step,
            k,
            send_seeds=send_seeds,
            prompt_logprobs=True,
        )
        for k, p in enumerate(prompts)
    ]
    heldout = config.heldout_group_size > 0 and step in config.heldout_steps
    heldout_futures = [
        sample_requests(
            config, sampler, renderer, p, config.heldout_group_size, step, k, HELDOUT_SALT, send_seeds
        )
        for k, p in enumerate(prompts)
        if heldout
    ]
    records: list[dict[str, Any]] = []
    seqs: list[tuple[ModelInput, list[int], list[float]]] = []
    groups, heldout_groups = [], []
    for k, (problem, prompt) in enumerate(zip(problems, prompts, strict=True)):
        phi = prompt_features(prompt.length, prompt_logprobs_of(sample_futures[k][0]))
        sequences = [_one_sequence(f) for f in sample_futures[k]]
        held_mean = None
        if heldout:
            held = [_one_sequence(f) for f in heldout_futures[k]]
            held_mean = float(
                np.mean([grade(response_text(renderer, s.tokens), problem.answer) for s in held])
            )
            heldout_groups.append([(s.tokens, float(np.sum(s.logprobs or [0.0]))) for s in held])
        group = []
        for g, seq in enumerate(sequences):
            tokens = [int(t) for t in seq.tokens]
            if seq.logprobs is None:
                raise RuntimeError(
                    "the sampler returned no logprobs; the importance_sampling loss needs them"
                )
            lps = [float(x) for x in seq.logprobs]
            text = response_text(renderer, tokens)
            records.append(
                {
                    "step": step,
                    "prompt_id": problem.item_id,
                    "sample": g,
                    "reward": grade(text, problem.answer),
                    "phi": [phi[0], phi[1]],
                    "prompt_tokens": prompt.length,
                    "response_tokens": len(tokens),
                    "response_logprob_sum": float(np.sum(lps)),
                    "stop_reason": str(seq.stop_reason),
                    "response": text[:MAX_RESPONSE_CHARS],
                    "heldout_mean_reward": held_mean,
                }
            )
            seqs.append((prompt, tokens, lps))
            group.append((tokens, float(np.sum(lps))))
        groups.append(group)
    return SampledBatch(records, seqs, group_sample_stats(groups), group_sample_stats(heldout_groups))


def eval_items(config: GS1ArmConfig, task: MathTask, n: int) -> list[Problem]:
    """The problems an evaluation decodes: the first ``n`` test items, or with ``eval_split == "train"``
    the last ``n`` train items of the seed's prompt order (a pilot's few steps sample the order from its
    start, so they never train on these), never a test item."""
    if config.eval_split == "test":
        return list(task.test[:n])
    order = prompt_order(len(task.train), config.seed)[::-1][:n]
    return [task.train[int(i)] for i in order]


def evaluate(
    config: GS1ArmConfig,
    sampler: Any,
    renderer: Renderer,
    task: MathTask,
    n_eval: int | None = None,
    send_seeds: bool = True,
) -> list[dict[str, Any]]:
    """Greedy decoding of the first ``n_eval`` test items (with ``config.eval_split == "train"``: train
    items from the end of the seed's prompt order, ``eval_items``): one row per item (``item_id``,
    ``correct``, ``response``, ``answer``, ``stop_reason``, ``response_tokens``)."""
    items = eval_items(config, task, n_eval or config.n_eval)
    futures = [
        sampler.sample(
            prompt=task.prompt(renderer, p),
            num_samples=1,
            sampling_params=sampling_params(
                config,
                renderer,
                request_seed(config, 0, k, 0, EVAL_SALT) if send_seeds else None,
                greedy=True,
            ),
        )
        for k, p in enumerate(items)
    ]
    rows = []
    for problem, fut in zip(items, futures, strict=True):
        seq = fut.result().sequences[0]
        text = response_text(renderer, seq.tokens)
        rows.append(
            {
                "item_id": problem.item_id,
                "correct": int(grade(text, problem.answer)),
                "response": text[:MAX_RESPONSE_CHARS],
                "answer": problem.answer,
                "stop_reason": str(seq.stop_reason),
                "response_tokens": len(seq.tokens),
            }
        )
    return rows
