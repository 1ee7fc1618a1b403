"""Advantage estimators of the GS1-vs-GRPO study (``data/specs/gs1_vs_grpo.json``), pure NumPy in float64.

* ``group_mean`` — GRPO as in tinker-cookbook's ``compute_advantages``: ``A = r - mean(r of its group)``,
  no std scaling. A group is every rollout of one prompt in one step.
* ``kernel_baseline`` — GS1: ``A_i = r_i - b_i`` where ``b_i`` is a Gaussian-kernel-weighted mean of the
  rewards of *other prompts* in a sliding window.

The GS1 window, exactly as implemented (the spec's words: "a sliding window of the last 256 rollouts;
the window covers the current batch excluding i, plus the previous steps"):

1. the window is the current batch plus the most recent earlier rollouts, ``window`` rollouts in all
   (256: with 64 rollouts per step, the current batch and the previous 192); when the current batch alone
   has ``window`` rollouts or more, the window is the current batch;
2. the neighbours of rollout i are the window's rollouts whose prompt differs from i's prompt (so i
   itself, and any other rollout of the same prompt, is excluded);
3. the features φ = (log prompt-token length, mean prompt-token logprob under the sampling policy) are
   standardised over the window (mean 0, population std 1 per column; a column with zero spread is only
   centred), then ``w_ij = exp(-‖φ_i - φ_j‖² / (2 h²))``;
4. ``b_i = Σ w_ij r_j / Σ w_ij``; when the kernel mass ``Σ w_ij`` is below ``min_mass`` (1e-3) the
   estimator falls back to the window mean, the unweighted mean of the same neighbours;
5. a rollout with no neighbour at all (every window rollout shares its prompt) gets ``b_i = 0``.

``kernel_effective_neighbors`` of a rollout is ``(Σ w)² / Σ w²`` over its kernel weights (0 when every
weight underflows to 0); the activation gate uses its 10th percentile over rollouts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rftlab.training.grpo import group_mean

WINDOW = 256
MIN_KERNEL_MASS = 1e-3
BANDWIDTHS = (0.5, 1.0)  # the pre-registered value and its single calibration alternative
ESTIMATORS = ("group_mean", "kernel_baseline")


def _f64(values: Any, name: str, ndim: int = 1) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains a non-finite value")
    return array


def _key(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def kernel_effective_neighbors(weights: Sequence[float]) -> float:
    """``(Σ w)² / Σ w²`` (0.0 for no weights or all-zero weights)."""
    w = np.asarray(weights, dtype=np.float64)
    total_sq = float(np.sum(w * w))
    if w.size == 0 or total_sq == 0.0:
        return 0.0
    return float(np.sum(w)) ** 2 / total_sq


def standardize(phi: np.ndarray) -> np.ndarray:
    """Columns to mean 0 and population std 1 (a zero-spread column is only centred)."""
    centred = phi - phi.mean(axis=0)
    std = phi.std(axis=0)
    return centred / np.where(std > 0, std, 1.0)


@dataclass(frozen=True)
class WindowRollouts:
    """Earlier rollouts the kernel may draw on, oldest first."""

    rewards: np.ndarray
    phi: np.ndarray
    prompt_ids: tuple[Any, ...]

    @classmethod
    def empty(cls) -> WindowRollouts:
        return cls(np.zeros(0), np.zeros((0, 2)), ())

    @classmethod
    def of(cls, rewards: Sequence[float], phi: Sequence[Sequence[float]], prompt_ids: Sequence[Any]):
        r = _f64(rewards, "history rewards")
        p = _f64(phi, "history phi", 2) if len(phi) else np.zeros((0, 2))
        if p.shape != (r.size, 2) or len(prompt_ids) != r.size:
            raise ValueError("history rewards, phi (n x 2) and prompt ids must have the same length")
        return cls(r, p, tuple(_key(x) for x in prompt_ids))

    def __len__(self) -> int:
        return int(self.rewards.size)

    def extend(self, rewards, phi, prompt_ids, keep: int = WINDOW) -> WindowRollouts:
        """This window plus new rollouts, keeping the most recent ``keep``."""
        r = np.concatenate([self.rewards, _f64(rewards, "rewards")])
        p = np.concatenate([self.phi, _f64(phi, "phi", 2).reshape(-1, 2)])
        ids = self.prompt_ids + tuple(_key(x) for x in prompt_ids)
        start = max(0, r.size - keep)
        return WindowRollouts(r[start:], p[start:], ids[start:])


@dataclass(frozen=True)
class KernelBaselineResult:
    """Per-rollout output of ``kernel_baseline`` for one batch (arrays in batch order).

    ``neighbors[i]`` are indices into the window (``window_rewards``: earlier rollouts first, then the
    current batch) and ``weights[i]`` their kernel weights; ``fallback[i]`` is True where the kernel mass
    was below the threshold and ``b_i`` is the window mean.
    """

    advantages: np.ndarray
    baselines: np.ndarray
    effective_neighbors: np.ndarray
    kernel_mass: np.ndarray
    fallback: np.ndarray
    n_neighbors: np.ndarray
    neighbors: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray, ...]
    window_rewards: np.ndarray
    bandwidth: float
    window: int
    min_mass: float
    extra: dict[str, Any] = field(default_factory=dict)


def kernel_baseline(
    rewards: Sequence[float] | np.ndarray,
    phi: Sequence[Sequence[float]] | np.ndarray,
    prompt_ids: Sequence[Any],
    history: WindowRollouts | None = None,
    bandwidth: float = 0.5,
    window: int = WINDOW,
    min_mass: float = MIN_KERNEL_MASS,
) -> KernelBaselineResult:
    """GS1 advantages of one batch given the earlier rollouts in ``history`` (see the module docstring).

    ``phi`` holds the raw features (log prompt-token length, mean prompt-token logprob); they are
    standardised over the window here.
    """
    r = _f64(rewards, "rewards")
    p = _f64(phi, "phi", 2) if len(phi) else np.zeros((0, 2))
    if p.shape != (r.size, 2):
        raise ValueError(f"phi must have shape ({r.size}, 2), got {p.shape}")
    if len(prompt_ids) != r.size:
        raise ValueError(f"{len(prompt_ids)} prompt ids for {r.size} rewards")
    if not bandwidth > 0 or not math.isfinite(bandwidth):
        raise ValueError(f"bandwidth must be a positive number, got {bandwidth}")
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    history = history or WindowRollouts.empty()
    n_prev = max(0, min(len(history), window - r.size))
    prev_r = history.rewards[len(history) - n_prev :]
    prev_p = history.phi[len(history) - n_prev :]
    prev_ids = history.prompt_ids[len(history) - n_prev :]
    win_r = np.concatenate([prev_r, r])
    win_p = standardize(np.concatenate([prev_p, p])) if win_r.size else np.zeros((0, 2))
    win_ids = list(prev_ids) + [_key(x) for x in prompt_ids]

    n = r.size
    baselines = np.zeros(n)
    ess = np.zeros(n)
    mass = np.zeros(n)
    fallback = np.zeros(n, dtype=bool)
    counts = np.zeros(n, dtype=np.int64)
    neighbors: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    ids_arr = np.empty(len(win_ids), dtype=object)
    ids_arr[:] = win_ids
    for i in range(n):
        me = n_prev + i
        idx = np.flatnonzero(ids_arr != ids_arr[me])
        d2 = np.sum((win_p[idx] - win_p[me]) ** 2, axis=1)
        w = np.exp(-d2 / (2.0 * bandwidth * bandwidth))
        neighbors.append(idx)
        weights.append(w)
        counts[i] = idx.size
        mass[i] = float(w.sum())
        ess[i] = kernel_effective_neighbors(w)
        if idx.size == 0:
            baselines[i] = 0.0
        elif mass[i] < min_mass:
            fallback[i] = True
            baselines[i] = float(win_r[idx].mean())
        else:
            baselines[i] = float(np.dot(w, win_r[idx]) / mass[i])
    return KernelBaselineResult(
        advantages=r - baselines,
        baselines=baselines,
        effective_neighbors=ess,
        kernel_mass=mass,
        fallback=fallback,
        n_neighbors=counts,
        neighbors=tuple(neighbors),
        weights=tuple(weights),
        window_rewards=win_r,
        bandwidth=float(bandwidth),
        window=int(window),
        min_mass=float(min_mass),
    )


def prompt_features(prompt_length: int, prompt_logprobs: Sequence[float | None]) -> tuple[float, float]:
    """φ of one prompt: (log prompt-token length, mean of its defined prompt-token logprobs).

    ``prompt_logprobs`` is what ``SamplingClient.compute_logprobs`` returns (``None`` for the first
    token); with no defined logprob the mean is 0.0.
    """
    if prompt_length < 1:
        raise ValueError("a prompt has at least one token")
    defined = [float(x) for x in prompt_logprobs if x is not None and math.isfinite(float(x))]
    return math.log(prompt_length), (float(np.mean(defined)) if defined else 0.0)


# ------------------------------------------------------------------------ batch files (CLI, tests)


def advantages_for_rows(
    rows: Sequence[Mapping[str, Any]],
    estimator: str,
    bandwidth: float = 0.5,
    window: int = WINDOW,
    min_mass: float = MIN_KERNEL_MASS,
) -> list[dict[str, Any]]:
    """Per-row advantages for ``{prompt_id, reward, phi: [x, y], step}`` rows (input order kept).

    Steps are processed in increasing order; for ``kernel_baseline`` each step's rows are the current
    batch and the earlier steps' rows (in file order) the history. ``group_mean`` groups rows by
    ``(step, prompt_id)``. Output rows carry ``advantage``, ``baseline``, ``effective_neighbors``,
    ``kernel_mass``, ``fallback`` and ``n_neighbors`` (the last four are ``None`` for ``group_mean``).
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")
    steps = sorted({row["step"] for row in rows})
    out: list[dict[str, Any] | None] = [None] * len(rows)
    history = WindowRollouts.empty()
    for step in steps:
        members = [i for i, row in enumerate(rows) if row["step"] == step]
        r = [float(rows[i]["reward"]) for i in members]
        ids = [_key(rows[i]["prompt_id"]) for i in members]
        if estimator == "group_mean":
            adv = group_mean(r, ids)
            for k, i in enumerate(members):
                out[i] = {
                    **rows[i],
                    "advantage": float(adv[k]),
                    "baseline": float(r[k] - adv[k]),
                    "effective_neighbors": None,
                    "kernel_mass": None,
                    "fallback": None,
                    "n_neighbors": None,
                }
            continue
        phi = [[float(v) for v in rows[i]["phi"]] for i in members]
        res = kernel_baseline(r, phi, ids, history, bandwidth, window, min_mass)
        for k, i in enumerate(members):
            out[i] = {
                **rows[i],
                "advantage": float(res.advantages[k]),
                "baseline": float(res.baselines[k]),
                "effective_neighbors": float(res.effective_neighbors[k]),
                "kernel_mass": float(res.kernel_mass[k]),
                "fallback": bool(res.fallback[k]),
                "n_neighbors": int(res.n_neighbors[k]),
            }
        history = history.extend(r, phi, ids, keep=window)
    return [row for row in out if row is not None]


def parse_batch_rows(obj: object) -> list[dict[str, Any]]:
    """Validate a batch file's content: a list of ``{prompt_id, reward, phi: [x, y], step}`` objects
    (or ``{"rows": [...]}``). Raises ``ValueError`` naming the first bad row."""
    if isinstance(obj, Mapping) and "rows" in obj:
        obj = obj["rows"]
    if not isinstance(obj, list) or not obj:
        raise ValueError("expected a non-empty JSON list of {prompt_id, reward, phi, step} rows")
    rows = []
    for n, row in enumerate(obj):
        if not isinstance(row, Mapping):
            raise ValueError(f"row {n}: expected an object, got {type(row).__name__}")
        missing = [k for k in ("prompt_id", "reward", "phi", "step") if k not in row]
        if missing:
            raise ValueError(f"row {n}: missing {', '.join(missing)}")
        if not isinstance(row["prompt_id"], str | int) or isinstance(row["prompt_id"], bool):
            raise ValueError(f"row {n}: prompt_id must be a string or an integer")
        reward, phi, step = row["reward"], row["phi"], row["step"]
        if not _finite_number(reward):
            raise ValueError(
                f"row {n}: reward must be a finite number of magnitude <= {MAX_INPUT_MAGNITUDE:g}"
            )
        if not isinstance(phi, list) or len(phi) != 2 or not all(_finite_number(v) for v in phi):
            raise ValueError(
                f"row {n}: phi must be a list of two finite numbers of magnitude <= {MAX_INPUT_MAGNITUDE:g}"
            )
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= MAX_STEP:
            raise ValueError(f"row {n}: step must be an integer from 0 to {MAX_STEP}")
        rows.append(dict(row))
    return rows


MAX_INPUT_MAGNITUDE = 1e12  # rewards and features beyond this overflow the kernel's squares and means
MAX_STEP = 10**9


def _finite_number(value: object) -> bool:
    """A number the estimators can use: not a bool, finite, at most ``MAX_INPUT_MAGNITUDE`` in size (an
    integer of 400 digits is neither, and is refused instead of overflowing ``float``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return abs(value) <= MAX_INPUT_MAGNITUDE
    return math.isfinite(value) and abs(value) <= MAX_INPUT_MAGNITUDE
