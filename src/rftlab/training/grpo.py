"""GRPO pieces that do not depend on the task: group-normalised advantages and an Adam optimiser (numpy).

Advantages (one group = the candidates of one dataset row in one epoch, all facing the same band):

- ``grpo``: ``A_i = (r_i − mean(r)) / sd(r)`` with the sample standard deviation (``ddof=1``); a group
  whose rewards are all equal has ``A_i = 0`` (no signal, no division by zero).
- ``mean_only`` (the cookbook-style variant): ``A_i = r_i − mean(r)``; ``group_mean`` is the one
  implementation, for any grouping (the GS1 study's GRPO arm uses it with prompt ids as groups).

The policy-gradient estimate is the score-function form ``g = (1/N) Σ_i A_i ∇θ log π(τ_i)`` over the N
rollouts of a batch; Adam then takes an ascent step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ADVANTAGE_KINDS = ("grpo", "mean_only")


def group_mean(rewards: Sequence[float] | np.ndarray, group_ids: Sequence[Any] | np.ndarray) -> np.ndarray:
    """``r - mean(r over the rollouts with the same group id)`` in float64 (the cookbook's GRPO)."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 1:
        raise ValueError(f"rewards must be 1-dimensional, got shape {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rewards contains a non-finite value")
    if len(group_ids) != r.size:
        raise ValueError(f"{len(group_ids)} group ids for {r.size} rewards")
    groups: dict[Any, list[int]] = {}
    for i, g in enumerate(group_ids):
        groups.setdefault(_key(g), []).append(i)
    out = np.empty_like(r)
    for members in groups.values():
        idx = np.asarray(members)
        out[idx] = r[idx] - r[idx].mean()
    return out


def _key(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def group_advantages(rewards: np.ndarray, kind: str = "grpo", eps: float = 1e-12) -> np.ndarray:
    """Advantages of a (groups × candidates) reward array (see the module docstring)."""
    if kind not in ADVANTAGE_KINDS:
        raise ValueError(f"advantage must be one of {ADVANTAGE_KINDS}, got {kind!r}")
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2 or r.shape[1] < 2:
        raise ValueError("rewards must be (groups, candidates) with at least 2 candidates per group")
    rows = np.repeat(np.arange(r.shape[0]), r.shape[1])
    centred = group_mean(r.reshape(-1), rows).reshape(r.shape)
    if kind == "mean_only":
        return centred
    sd = r.std(axis=1, ddof=1, keepdims=True)
    out = np.zeros_like(centred)
    np.divide(centred, sd, out=out, where=sd > eps)
    return out


def policy_gradient(advantages: np.ndarray, score_grads: np.ndarray) -> np.ndarray:
    """``(1/N) Σ_i A_i g_i`` with ``advantages`` (..., ) and per-rollout score gradients (..., P)."""
    a = np.asarray(advantages, dtype=np.float64).reshape(-1)
    g = np.asarray(score_grads, dtype=np.float64).reshape(a.size, -1)
    return (a @ g) / a.size


@dataclass
class Adam:
    """Adam (Kingma & Ba) for gradient *ascent*: ``step(g)`` returns the update to add to the parameters."""

    lr: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    m: np.ndarray | None = field(default=None)
    v: np.ndarray | None = field(default=None)

    def step(self, grad: np.ndarray) -> np.ndarray:
        g = np.asarray(grad, dtype=np.float64)
        if self.m is None or self.v is None:
            self.m = np.zeros_like(g)
            self.v = np.zeros_like(g)
        self.t += 1
        self.m = self.beta1 * self.m + (1.0 - self.beta1) * g
        self.v = self.beta2 * self.v + (1.0 - self.beta2) * g * g
        m_hat = self.m / (1.0 - self.beta1**self.t)
        v_hat = self.v / (1.0 - self.beta2**self.t)
        return self.lr * m_hat / (np.sqrt(v_hat) + self.eps)

    def state_dict(self) -> dict[str, Any]:
        return {
            "lr": self.lr,
            "beta1": self.beta1,
            "beta2": self.beta2,
            "eps": self.eps,
            "t": self.t,
            "m": None if self.m is None else self.m.tolist(),
            "v": None if self.v is None else self.v.tolist(),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Adam:
        m, v = state.get("m"), state.get("v")
        return cls(
            lr=float(state["lr"]),
            beta1=float(state["beta1"]),
            beta2=float(state["beta2"]),
            eps=float(state["eps"]),
            t=int(state["t"]),
            m=None if m is None else np.asarray(m, dtype=np.float64),
            v=None if v is None else np.asarray(v, dtype=np.float64),
        )
