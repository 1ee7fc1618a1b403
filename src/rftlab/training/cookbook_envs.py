"""What every family's tinker-cookbook RL env shares (``training/spectrum/cookbook_env.py``,
``training/poker/cookbook_env.py``): the renderer of a base model, reading a sampled reply's text, the
cookbook's numeric metrics, the group rewards (the episode's own, on its last step) and a dataset of an
arm's rows in batches, epoch after epoch; and running the cookbook's coroutines from plain code."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RLDataset, Trajectory

if TYPE_CHECKING:
    from tinker_cookbook.renderers import Renderer

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end from synchronous code. Where this thread already runs an event loop (a
    Jupyter kernel does), ``asyncio.run`` refuses, so the coroutine runs on its own loop in a worker thread,
    and this call waits for it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rftlab-sync") as pool:
        return pool.submit(asyncio.run, coro).result()


DEFAULT_RENDERER = "qwen3"
"""Qwen3 with thinking on: the Hugging Face chat template's output, tool calls in ``<tool_call>`` blocks."""


@cache
def make_renderer(base_model: str, renderer_name: str = DEFAULT_RENDERER) -> Renderer:
    """The cookbook renderer ``renderer_name`` on ``base_model``'s tokenizer (cached; built-in tiny models'
    tokenizers are registered first)."""
    from tinker_cookbook import renderers
    from tinker_cookbook.tokenizer_utils import get_tokenizer

    from rftlab.training.local_tinker import BUILTIN_MODELS, register_builtin_tokenizers

    if base_model in BUILTIN_MODELS:
        register_builtin_tokenizers()
    return renderers.get_renderer(renderer_name, get_tokenizer(base_model))


def message_text(content: Any) -> str:
    """A message's text (text parts joined; thinking left out)."""
    if isinstance(content, str):
        return content
    return "".join(
        p.get("text", "") for p in content or () if isinstance(p, Mapping) and p.get("type") == "text"
    )


def decode(tokenizer: Any, tokens: Sequence[int]) -> str:
    """The text of sampled tokens; ``""`` when the tokenizer cannot decode them (ids out of its vocabulary):
    model output never crashes a rollout."""
    try:
        return str(tokenizer.decode(list(tokens)))
    except Exception:  # noqa: BLE001 - see the docstring
        return ""


def numeric(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The cookbook's ``Metrics``: numbers only (``None``, strings and lists left out, booleans as 0/1)."""
    return {k: float(v) for k, v in metrics.items() if isinstance(v, bool | int | float)}


@runtime_checkable
class EpisodeMetricsEnv(Protocol):
    """An env that reports its finished episode's metrics (the family envs here do)."""

    def episode_metrics(self) -> dict[str, float]: ...


class EpisodeRewardGroup(EnvGroupBuilder):
    """A group builder whose envs pay the episode's reward on their last step and report their episode's
    metrics (``episode_metrics()``): the group adds no reward of its own."""

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, dict[str, float]]]:
        return [
            (0.0, env.episode_metrics() if isinstance(env, EpisodeMetricsEnv) else {}) for env in env_group
        ]


class ArmRowsDataset(RLDataset):
    """An arm's rows (``config.dataset_rows()``) in batches of ``config.batch_rows``, epoch after epoch
    (``epochs``, e.g. ``range(12)``; a resumed run passes the epochs still to do). Batch ``i`` is batch
    ``i % batches_per_epoch`` of epoch ``epochs[i // batches_per_epoch]``. A family says how a row becomes a
    group in an epoch (``builder``)."""

    def __init__(self, config: Any, epochs: Iterable[int] = (0,)):
        self.config = config
        self.epochs = [int(e) for e in epochs]
        self.rows = config.dataset_rows()
        self.batches_per_epoch = -(-len(self.rows) // config.batch_rows)

    def __len__(self) -> int:
        return len(self.epochs) * self.batches_per_epoch

    def epoch_of(self, index: int) -> int:
        return self.epochs[index // self.batches_per_epoch]

    def get_batch(self, index: int) -> list[Any]:
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} out of range (the dataset has {len(self)} batches)")
        epoch = self.epoch_of(index)
        start = (index % self.batches_per_epoch) * self.config.batch_rows
        return [self.builder(row, epoch) for row in self.rows[start : start + self.config.batch_rows]]

    def epoch_builders(self, epoch: int) -> list[Any]:
        """Every row's group builder in ``epoch``."""
        return [self.builder(row, epoch) for row in self.rows]

    def builder(self, row: Mapping[str, Any], epoch: int) -> EnvGroupBuilder:
        raise NotImplementedError
