"""GRPO of a language model through the Tinker API for every family's tinker-cookbook env (issue 30 item 3):
the loop, its run-store bookkeeping and its determinism; a family says only what differs (``TinkerTask``).

    train_tinker(SPECTRUM_TASK, config, run, service)   # LocalServiceClient() or tinker.ServiceClient(...)

``config`` is a ``TinkerRLConfig`` (a family subclasses it): the cookbook env's config ``task`` (rows,
group size, batch rows, base model, temperature, seed) plus the optimiser and sampling settings. Per epoch
``e``, per batch of ``task.batch_rows`` rows:

1. ``save_weights_and_get_sampling_client`` → a sampler on the current weights;
2. every row's group builder (``task.dataset(...).epoch_builders(e)``) → the cookbook's ``do_group_rollout``
   with ``TinkerTokenCompleter`` (``context_window`` set: a reply never asks for more tokens than the model
   has room for);
3. the cookbook's ``compute_advantages`` (group-mean centring), divided by the group's reward SD when the
   arm's ``advantage`` is ``grpo`` (``rftlab.training.grpo.group_advantages``' rule, so ``grpo`` means the
   same on every backend), then the cookbook's ``assemble_training_data``;
4. the cookbook's ``train_step``: ``forward_backward(..., loss_fn="importance_sampling")`` then
   ``optim_step(AdamParams(learning_rate=lr))``.

After the epoch: ``save_state`` (its ``tinker://`` path in ``checkpoints/epoch-<e>.json``), the rollout records
(``rollouts/epoch-<e>.jsonl``: the env's ``record()`` with ``advantage``, ``logp``, ``sampled_tokens`` and the
family's extra fields) and one ``metrics.jsonl`` row (the family's ``epoch_row`` over the common fields),
written last (an epoch counts as done when its row exists). Groups whose rewards are all equal are kept, as
the cookbook does by default (``remove_constant_reward_groups=False``; their datums carry zero advantage) and
counted (``zero_advantage_groups``).

**Why not ``tinker_cookbook.rl.train.main``.** It cannot run unmodified here: (a) its dataset is a flat
sequence of batches with one log folder and its own ``checkpoints.jsonl``, while an arm's run is a run-store
folder whose epochs are the unit of resume and whose metrics and rollout records must match the simulated
and Fireworks runs field for field; (b) it resumes from its last *batch* checkpoint through
``create_training_client_from_state_with_optimizer`` but samples with the service's default seeds, so a
resumed run is not the uninterrupted one; (c) it writes its own metrics names (``env/all/...``) and no
per-rollout records with the deal or band and the transcript. So this module keeps only the loop and the
run-store bookkeeping, and calls the cookbook's rollout, advantage, datum and train-step functions.

**Determinism.** Every sample request carries an explicit seed (``SeededSampler``): a hash of the family's
tag, the arm seed, the epoch, the batch, the prompt tokens and how many times the same prompt was asked for
before in that batch (the candidates of a row start from the same prompt and are asked for in candidate
order). So the samples do not depend on the service's sampler counters, and a run resumed after its last
finished epoch (a fresh training client from the saved state, with its optimizer) is bit-identical to an
uninterrupted one on the local backend.

**Context.** A prompt the model has no room to answer is refused before the run with a ``ValueError`` naming
the prompt's length and the model's context (``check_context``); a later turn that outgrows it is answered by
the completer's ``ValueError``, re-raised as ``ContextTooLong`` with the rows and epoch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import numpy as np

from rftlab.runs.store import Run, atomic_write_text
from rftlab.training.cookbook_envs import ArmRowsDataset, run_sync
from rftlab.types import resolve

if TYPE_CHECKING:
    import torch
    from tinker_cookbook.rl.types import Trajectory, TrajectoryGroup

DEFAULT_LORA_RANK = 32


class ContextTooLong(ValueError):
    """A prompt longer than the model's context (the message names the row, the lengths and the model)."""


class RecordingEnv(Protocol):
    """A family's cookbook env as a rollout record sees it: its fields and transcript."""

    def record(self) -> dict[str, Any]: ...


class TinkerService(Protocol):
    """The two calls of a tinker-compatible ``ServiceClient`` the loop makes; each answers a future."""

    def create_lora_training_client(
        self, base_model: str, rank: int = 32, seed: int | None = None
    ) -> object: ...

    def create_training_client_from_state_with_optimizer(self, path: str) -> object: ...


@dataclass(frozen=True)
class TinkerRLConfig:
    """One arm on a Tinker backend: the cookbook env's config (task, model, group size, batch rows) and the
    optimiser and sampling settings. A family subclasses it with its own ``task`` type and ``trainer``."""

    task: Any
    epochs: int = 12
    learning_rate: float = 1e-4
    max_tokens: int = 4096
    lora_rank: int = DEFAULT_LORA_RANK
    advantage: str = "grpo"
    context_window: int | None = None  # the model's positions when known (built-in or local models)
    trainer: str = "tinker-v1"

    def __post_init__(self) -> None:
        if self.advantage not in ("grpo", "mean_only"):
            raise ValueError(f"advantage must be 'grpo' or 'mean_only', got {self.advantage!r}")
        if self.epochs < 1 or self.max_tokens < 1 or self.lora_rank < 1:
            raise ValueError("epochs, max_tokens and lora_rank must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TinkerTask:
    """What a family tells the loop: its name, the tag its sample seeds start from, its dataset (an
    ``rftlab.training.cookbook_envs.ArmRowsDataset``), its record's extra fields and its metrics row."""

    family: str = ""
    seed_tag: str = ""

    def dataset(self, config: TinkerRLConfig, epochs: Sequence[int]) -> ArmRowsDataset:
        raise NotImplementedError

    def salt(self, config: TinkerRLConfig, epoch: int) -> str:
        """The epoch's salt for the checkpoint and the progress line (``""``: the family has none)."""
        return ""

    def extra_record(self, env: Any) -> dict[str, Any]:
        """Fields the family adds to every rollout record after the common ones."""
        return {}

    def epoch_row(
        self, config: TinkerRLConfig, epoch: int, records: list[dict[str, Any]], common: CommonFields
    ) -> dict[str, Any]:
        """The epoch's metrics row (without ``seconds``, which the loop appends) from its records and the
        common fields (``common_fields``)."""
        raise NotImplementedError


@dataclass
class TinkerTrainResult:
    metrics: list[dict[str, Any]]
    state_path: str | None  # the last finished epoch's saved state
    resumed_from: int | None = None
    epochs_run: list[int] = field(default_factory=list)
    training_client: Any = None


def _mix(*parts: object) -> int:
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class SeededSampler:
    """A sampling client whose every request carries an explicit seed (module docstring, "Determinism")."""

    def __init__(self, client: Any, *key: object):
        self.client = client
        self.key = key
        self._seen: Counter[str] = Counter()

    def seed_for(self, tokens: Sequence[int]) -> int:
        digest = hashlib.sha256(np.asarray(tokens, dtype=np.int64).tobytes()).hexdigest()
        k = self._seen[digest]
        self._seen[digest] += 1
        return _mix(*self.key, digest, k)

    async def sample_async(self, prompt: Any, num_samples: int, sampling_params: Any, **kw: Any) -> Any:
        params = sampling_params.model_copy(update={"seed": self.seed_for(prompt.to_ints())})
        return await self.client.sample_async(
            prompt=prompt, num_samples=num_samples, sampling_params=params, **kw
        )


def check_context(config: TinkerRLConfig, dataset: ArmRowsDataset, family: str = "") -> int:
    """The longest first prompt of the arm's rows; ``ContextTooLong`` when one leaves no room for a reply."""
    longest = 0
    for builder in dataset.epoch_builders(dataset.epochs[0]):
        env = run_sync(_first_env(builder))
        longest = max(longest, run_sync(env.initial_observation())[0].length)
    window = config.context_window
    if window is not None and longest >= window:
        what = f"a {family} prompt" if family else "a prompt"
        raise ContextTooLong(
            f"{what} of {longest} tokens does not fit {config.task.base_model}'s context of "
            f"{window} tokens (pick a model with a longer context, e.g. rftlab/tiny-qwen3-agent)"
        )
    return longest


async def _first_env(builder: Any) -> Any:
    """The first candidate of a row's group (a one-candidate copy of the builder, so the original's
    ``envs`` stay untouched)."""
    one = dataclasses.replace(builder, group_size=1, envs=[])
    return (await one.make_envs())[0]


ZERO_SD = 1e-12
"""A group whose rewards' SD is at most this has zero advantage (rewards equal up to rounding)."""


def group_advantages(groups: Sequence[TrajectoryGroup], kind: str) -> list[torch.Tensor]:
    """The cookbook's group-centred advantages; ``grpo`` divides each by its group's reward SD (ddof 1).
    A group whose rewards are equal (SD <= ``ZERO_SD``) gets exactly zero advantages either way."""
    from tinker_cookbook.rl.data_processing import compute_advantages

    out = []
    for group, adv in zip(groups, compute_advantages(list(groups)), strict=True):
        sd = float(np.std(group.get_total_rewards(), ddof=1)) if len(adv) > 1 else 0.0
        if sd <= ZERO_SD:
            out.append(adv * 0.0)
        else:
            out.append(adv / sd if kind == "grpo" else adv)
    return out


def rollout_record(env: RecordingEnv, traj: Trajectory, advantage: float) -> dict[str, Any]:
    """A rollout record: the env's record (its fields and the transcript ``messages``) with the advantage,
    the sampled log-probability of the whole reply sequence and the sampled token count."""
    rec = env.record()
    logprobs = [lp for t in traj.transitions for lp in t.ac.logprobs]
    rec["advantage"] = float(advantage)
    rec["logp"] = float(sum(logprobs))
    rec["sampled_tokens"] = len(logprobs)
    return rec


async def run_batch(
    config: TinkerRLConfig,
    training_client: Any,
    builders: Sequence[Any],
    seed_key: tuple[object, ...],
    extra_record: Callable[[Any], Mapping[str, Any]] = lambda env: {},
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """One optimiser step: sample the batch's groups, advantages, datums, ``train_step``."""
    from tinker_cookbook.completers import TinkerTokenCompleter
    from tinker_cookbook.rl.data_processing import assemble_training_data
    from tinker_cookbook.rl.rollouts import do_group_rollout
    from tinker_cookbook.rl.train import train_step

    sampler = await training_client.save_weights_and_get_sampling_client_async()
    policy = TinkerTokenCompleter(
        SeededSampler(sampler, *seed_key),  # type: ignore[arg-type]
        max_tokens=config.max_tokens,
        temperature=config.task.temperature,
        context_window=config.context_window,
    )
    try:
        groups = list(await asyncio.gather(*[do_group_rollout(b, policy) for b in builders]))
    except ValueError as exc:
        if "context window" in str(exc):
            rows = [b.row_id for b in builders]
            raise ContextTooLong(f"{exc} (epoch {builders[0].epoch}, rows {rows})") from None
        raise
    advantages = group_advantages(groups, config.advantage)
    records = []
    for builder, group, adv in zip(builders, groups, advantages, strict=True):
        for env, traj, a in zip(builder.envs, group.trajectories_G, adv.tolist(), strict=True):
            records.append({**rollout_record(env, traj, a), **extra_record(env)})
    data, _meta = assemble_training_data(groups, advantages)
    optim: dict[str, Any] = {}
    await train_step(data, training_client, config.learning_rate, 1, "importance_sampling", metrics=optim)
    stats = {
        "zero_advantage_groups": float(sum(bool((a == 0).all()) for a in advantages)),
        "datums": float(len(data)),
    }
    stats.update({f"optim.{k}": float(v) for k, v in optim.items() if isinstance(v, int | float)})
    return records, stats


class CommonFields(TypedDict):
    """``common_fields``: what every family's metrics row holds about the steps and the sampling."""

    updates: int
    grad_norm: None
    zero_advantage_groups: int
    datums: int
    sampled_tokens: int


def common_fields(records: list[dict[str, Any]], batches: list[dict[str, float]]) -> CommonFields:
    """What every family's metrics row holds about the optimiser steps and the sampling."""
    return {
        "updates": len(batches),
        "grad_norm": None,  # the Tinker API reports no gradient norm
        "zero_advantage_groups": int(sum(b["zero_advantage_groups"] for b in batches)),
        "datums": int(sum(b["datums"] for b in batches)),
        "sampled_tokens": int(sum(r["sampled_tokens"] for r in records)),
    }


def _checkpoint_path(run: Run, epoch: int) -> Path:
    return run.path / "checkpoints" / f"epoch-{int(epoch)}.json"


def saved_state(run: Run, epoch: int) -> str:
    """The ``tinker://`` path of the state saved after ``epoch``."""
    path = _checkpoint_path(run, epoch)
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["state_path"])
    except (OSError, ValueError, KeyError) as exc:
        raise RuntimeError(f"cannot resume {run.path}: checkpoint {path.name} unreadable ({exc})") from None


def train_tinker(
    task: TinkerTask,
    config: TinkerRLConfig,
    run: Run,
    service: TinkerService,
    *,
    on_epoch_end: Callable[[int, Mapping[str, Any]], None] | None = None,
    finish: bool = True,
    progress: Callable[[str], None] | None = None,
) -> TinkerTrainResult:
    """Train (or resume after its last finished epoch) ``task``'s arm into ``run``'s folder on ``service``
    (any tinker-compatible ``ServiceClient``). ``on_epoch_end(epoch, row)`` runs after an epoch is written."""
    done_rows = run.metrics()
    done = sorted({int(r["epoch"]) for r in done_rows})
    if done != list(range(len(done))):
        raise RuntimeError(f"cannot resume {run.path}: epochs on record are {done}")
    resumed_from = done[-1] if done else None
    start = 0 if resumed_from is None else resumed_from + 1
    for path in (run.path / "rollouts").glob("epoch-*.jsonl"):  # leftovers of an interrupted epoch
        if int(path.name.split("-")[1].split(".")[0]) >= start:
            path.unlink()
    dataset = task.dataset(config, range(start, config.epochs)) if start < config.epochs else None
    metrics = list(done_rows)
    if resumed_from is None:
        state_path = None
        assert dataset is not None
        check_context(config, dataset, task.family)
        tc = service.create_lora_training_client(
            base_model=config.task.base_model, rank=config.lora_rank, seed=config.task.seed
        )
    else:
        state_path = saved_state(run, resumed_from)
        if dataset is None:
            return TinkerTrainResult(metrics, state_path, resumed_from, [])
        tc = service.create_training_client_from_state_with_optimizer(state_path)
    tc = resolve(tc)  # the SDK and the local service answer with a future
    epochs_run: list[int] = []
    assert dataset is not None
    for epoch in dataset.epochs:
        t0 = time.perf_counter()
        builders = dataset.epoch_builders(epoch)
        records: list[dict[str, Any]] = []
        batches: list[dict[str, float]] = []
        for b, lo in enumerate(range(0, len(builders), config.task.batch_rows)):
            key = (task.seed_tag, config.task.seed, epoch, b)
            chunk = builders[lo : lo + config.task.batch_rows]
            recs, stats = run_sync(run_batch(config, tc, chunk, key, task.extra_record))
            records += recs
            batches.append(stats)
        state_path = tc.save_state(f"{run.run_id}-epoch-{epoch}").result().path
        row = task.epoch_row(config, epoch, records, common_fields(records, batches))
        row["seconds"] = round(time.perf_counter() - t0, 3)
        atomic_write_text(
            _checkpoint_path(run, epoch),
            json.dumps({"epoch": epoch, "state_path": state_path, "config": config.to_dict()}) + "\n",
        )
        run.write_rollouts(epoch, records)
        run.append_metrics(row)
        metrics.append(row)
        epochs_run.append(epoch)
        if progress is not None:
            progress(f"epoch {epoch}: reward {row['reward']:.3f}, {row['seconds']:.1f} s")
        if on_epoch_end is not None:
            on_epoch_end(epoch, row)
    if finish and not run.finished:
        run.finish()
    return TinkerTrainResult(metrics, state_path, resumed_from, epochs_run, tc)
