"""Local GRPO on the spectrum-memory task with the simulated policy (a simulation of the seed's RFT loop).

Per epoch ``e`` (bands are fresh every epoch through the epoch salt, docs/spectrum.md §B.2):

1. the ``rows`` dataset rows are taken in order in batches of ``batch_rows`` rows;
2. for every row of a batch, ``candidates`` rollouts share the row's band (``band_seed(row_id, salt_e)``)
   and are sampled with the current parameters at ``temperature``;
3. advantages are group-normalised within each row (``grpo``) or mean-centred (``mean_only``);
4. the exact score-function gradient ``(1/N) Σ A_i ∇ log π(τ_i)`` takes one Adam ascent step.

All randomness comes from ``numpy.random.default_rng([seed, epoch, row_index])``, so a run is
deterministic for its seed and an epoch replays identically after a resume. The run folder (through
``rftlab.runs``) gets, per epoch: ``rollouts/epoch-<e>.jsonl`` (one record per rollout),
``checkpoints/epoch-<e>.json`` (parameters + Adam state after the epoch) and one ``metrics.jsonl`` row
(written last: an epoch counts as done when its metrics row exists). Re-running on an unfinished run
resumes after its last complete epoch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rftlab.envs.spectrum.rft import epoch_salt
from rftlab.policies.spectrum.simulated import N_PARAMS, PARAM_NAMES, initial_params, params_dict
from rftlab.runs.store import Run, atomic_write_text
from rftlab.training.grpo import ADVANTAGE_KINDS, Adam, group_advantages, policy_gradient
from rftlab.training.spectrum.rollout import BandAssignment, GroupSampler, band_per_row, summarize_rollouts

# Part of every trainer config (and so of run.json): bump it whenever the simulated policy or the trainer
# changes behaviour, so the local launcher stops reusing runs made by the old code.
SIMULATOR_VERSION = "simulated-spectrum-v1"


@dataclass(frozen=True)
class SpectrumGRPOConfig:
    """Everything the local trainer needs (the launcher maps an arm spec onto it)."""

    prompt: str = "weak"  # initial parameters: "explicit" or "weak"
    memory: str = "echo"  # none / echo / scrambled / notepad
    rows: int = 48
    row_prefix: str = "sc2"
    num_scans: int = 12
    epoch_salt: bool = True
    notepad_write_cost: float = 0.0
    epochs: int = 12
    candidates: int = 12
    learning_rate: float = 0.01  # on the simulated policy's parameters (not an LLM's LoRA rate)
    temperature: float = 1.2
    advantage: str = "grpo"
    seed: int = 0
    batch_rows: int = 8  # rows per optimiser step
    merge_tol: float = 4.0
    salt_namespace: str = "rftlab"
    initial_theta: tuple[float, ...] | None = None
    simulator: str = SIMULATOR_VERSION

    def __post_init__(self) -> None:
        if self.advantage not in ADVANTAGE_KINDS:
            raise ValueError(f"advantage must be one of {ADVANTAGE_KINDS}, got {self.advantage!r}")
        if self.rows < 1 or self.epochs < 1 or self.candidates < 2 or self.batch_rows < 1:
            raise ValueError("rows, epochs and batch_rows must be >= 1 and candidates >= 2")
        if self.initial_theta is not None and len(self.initial_theta) != N_PARAMS:
            raise ValueError(f"initial_theta needs {N_PARAMS} values ({', '.join(PARAM_NAMES)})")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["initial_theta"] = None if self.initial_theta is None else list(self.initial_theta)
        return d

    def theta0(self) -> np.ndarray:
        if self.initial_theta is not None:
            return np.asarray(self.initial_theta, dtype=np.float64)
        return initial_params(self.prompt)

    def row_ids(self) -> list[str]:
        return [f"{self.row_prefix}_{i}" for i in range(self.rows)]

    def salt(self, epoch: int) -> str:
        """The epoch's band salt: fresh bands every epoch (and per run seed), or none."""
        if not self.epoch_salt:
            return ""
        return epoch_salt(f"{self.salt_namespace}:seed{self.seed}", epoch)


@dataclass
class TrainResult:
    metrics: list[dict[str, Any]]
    theta: np.ndarray
    resumed_from: int | None = None  # last complete epoch found in the run folder, if any
    epochs_run: list[int] = field(default_factory=list)


def row_rng(seed: int, epoch: int, row_index: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(epoch), int(row_index)])


def run_epoch(
    config: SpectrumGRPOConfig,
    theta: np.ndarray,
    adam: Adam,
    epoch: int,
    sampler: GroupSampler,
    band_assignment: BandAssignment = band_per_row,
    progress: Callable[[int], object] | None = None,
) -> tuple[np.ndarray, list[dict[str, Any]], dict[str, Any]]:
    """One epoch of batches → ``(theta, rollout records, update stats)``; ``adam`` is updated in place."""
    salt = config.salt(epoch)
    rows = config.row_ids()
    records: list[dict[str, Any]] = []
    grad_norms = []
    for start in range(0, len(rows), config.batch_rows):
        batch = range(start, min(start + config.batch_rows, len(rows)))
        rewards, grads = [], []
        for idx in batch:
            res = sampler.run(
                theta, config.temperature, rows[idx], salt, row_rng(config.seed, epoch, idx), band_assignment
            )
            rewards.append(res.rewards)
            grads.append(res.grads)
            adv = group_advantages(res.rewards[None, :], config.advantage)[0]
            for rec, a in zip(res.records, adv, strict=True):
                rec["epoch"] = epoch
                rec["advantage"] = float(a)
                records.append(rec)
        adv = group_advantages(np.stack(rewards), config.advantage)
        g = policy_gradient(adv, np.stack(grads))
        grad_norms.append(float(np.linalg.norm(g)))
        theta = theta + adam.step(g)
        if progress is not None:
            progress(len(batch))
    return theta, records, {"updates": len(grad_norms), "grad_norm": float(np.mean(grad_norms))}


def _checkpoint_path(run: Run, epoch: int) -> Path:
    return run.path / "checkpoints" / f"epoch-{int(epoch)}.json"


def _load_checkpoint(run: Run, epoch: int) -> tuple[np.ndarray, Adam]:
    path = _checkpoint_path(run, epoch)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        return np.asarray(state["theta"], dtype=np.float64), Adam.from_state(state["adam"])
    except (OSError, ValueError, KeyError) as exc:
        raise RuntimeError(f"cannot resume {run.path}: checkpoint {path.name} unreadable ({exc})") from None


def train_spectrum_grpo(
    config: SpectrumGRPOConfig,
    run: Run,
    *,
    band_assignment: BandAssignment = band_per_row,
    progress: bool | None = None,
    on_epoch_end: Callable[[int, Mapping[str, Any]], None] | None = None,
    finish: bool = True,
) -> TrainResult:
    """Train (or resume) into ``run``'s folder; returns every epoch's metrics and the final parameters.

    ``progress``: a tqdm bar over rows (``None`` = only on a terminal). ``on_epoch_end(epoch, metrics)`` is
    called after an epoch is fully written (a test raises there to simulate an interruption)."""
    from tqdm import tqdm

    done_rows = run.metrics()
    done_epochs = sorted({int(r["epoch"]) for r in done_rows})
    if done_epochs != list(range(len(done_epochs))):
        raise RuntimeError(f"cannot resume {run.path}: epochs on record are {done_epochs}")
    resumed_from = done_epochs[-1] if done_epochs else None
    if resumed_from is None:
        theta = config.theta0()
        adam = Adam(lr=config.learning_rate)
    else:
        theta, adam = _load_checkpoint(run, resumed_from)
    start = 0 if resumed_from is None else resumed_from + 1
    # leftovers of an interrupted epoch (written before its metrics row) are recomputed identically
    for folder, pattern in (("rollouts", "epoch-*.jsonl"), ("checkpoints", "epoch-*.json")):
        for path in (run.path / folder).glob(pattern):
            if int(path.name.split("-")[1].split(".")[0]) >= start:
                path.unlink()
    sampler = GroupSampler(
        config.memory,
        config.candidates,
        num_scans=config.num_scans,
        merge_tol=config.merge_tol,
        notepad_write_cost=config.notepad_write_cost,
        salt_namespace=config.salt_namespace,
    )
    metrics = list(done_rows)
    bar = tqdm(
        total=config.epochs * config.rows,
        initial=start * config.rows,
        desc=f"simulated GRPO {run.record.arm}",
        unit="row",
        disable=(not progress) if progress is not None else None,
        leave=False,
    )
    epochs_run = []
    try:
        for epoch in range(start, config.epochs):
            theta_before = theta
            theta, records, upd = run_epoch(
                config, theta, adam, epoch, sampler, band_assignment, progress=bar.update
            )
            row = {"step": epoch, "epoch": epoch, "salt": config.salt(epoch)}
            row.update(summarize_rollouts(records))
            row.update(upd)
            row.update({f"theta.{k}": v for k, v in params_dict(theta_before).items()})
            state = {
                "epoch": epoch,
                "theta": theta.tolist(),
                "adam": adam.state_dict(),
                "config": config.to_dict(),
            }
            atomic_write_text(_checkpoint_path(run, epoch), json.dumps(state) + "\n")
            run.write_rollouts(epoch, records)
            run.append_metrics(row)
            metrics.append(row)
            epochs_run.append(epoch)
            if on_epoch_end is not None:
                on_epoch_end(epoch, row)
    finally:
        bar.close()
    if finish and not run.finished:
        run.finish()
    return TrainResult(metrics, theta, resumed_from, epochs_run)


def final_theta(run: Run) -> np.ndarray | None:
    """Parameters after the last complete epoch of a run (``None`` if none is on record)."""
    epochs = [int(r["epoch"]) for r in run.metrics()]
    if not epochs:
        return None
    return _load_checkpoint(run, max(epochs))[0]
