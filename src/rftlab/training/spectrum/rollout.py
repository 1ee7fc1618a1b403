"""Group rollouts of the simulated policy in the RFT env: the K candidates of one dataset row, stepped in
lockstep so the policy's choices are computed with numpy over candidates.

The band each candidate faces comes from a *band assignment* function ``(row_id, salt, candidate) ->
band seed``. The correct one, ``band_per_row``, ignores the candidate (docs/spectrum.md §B.2: every candidate of a row
shares one band); ``band_per_rollout`` reproduces the seed's historical bug (a band per rollout), for the
preflight's tests. Every env call goes through ``_env_reset`` / ``_env_step`` (the one place that knows
the env's call signature). The K episodes advance in lockstep, so this is a vectorised counterpart of
``rftlab.rollout.episode`` (which plays one episode of one ``Policy``; ``SimulatedSpectrumPolicy`` is that
policy, and a test checks both give the same log-probability algebra).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rftlab.envs.spectrum.rft import (
    AssistantTurn,
    SpectrumRFTConfig,
    SpectrumRFTEnv,
    ToolCall,
    band_seed,
    submit,
)
from rftlab.policies.spectrum.simulated import (
    MAX_REPORT,
    N_PARAMS,
    READ_INDEX,
    WRITE_INDEX,
    ScanBatch,
    Trace,
    decide_bias,
    decide_scan,
    format_notepad,
    parse_notepad,
)
from rftlab.training.group_stats import group_carry_stats

BandAssignment = Callable[[str, str, int], int]


def band_per_row(row_id: str, salt: str, candidate: int) -> int:
    """The correct assignment: one band per (row, epoch salt), shared by all candidates."""
    return band_seed(row_id, salt)


def band_per_rollout(row_id: str, salt: str, candidate: int) -> int:
    """The seed's historical bug, for tests: every candidate draws its own band, so a group's reward
    differences are band luck rather than policy."""
    return band_seed(f"{row_id}#rollout{candidate}", salt)


# ------------------------------------------------------------------------- the env boundary


def _env_reset(env: SpectrumRFTEnv, row_id: str, salt: str, seed: int):
    return env.reset(row_id, salt=salt, seed=seed)


def _env_step(env: SpectrumRFTEnv, action: Any):
    """One env call (``rftlab.types.StepResult``); returns the next observation."""
    return env.step(action).observation


# ------------------------------------------------------------------------------------ rollouts


@dataclass
class GroupResult:
    """The K rollouts of one row: rewards, exact score gradients and log-probs, per-rollout records."""

    rewards: np.ndarray  # (K,)
    grads: np.ndarray  # (K, N_PARAMS)
    logp: np.ndarray  # (K,)
    records: list[dict[str, Any]]
    traces: list[Trace] | None = None


METRIC_KEYS = (
    "mean_occ",
    "early_occ",
    "late_occ",
    "memory_gain",
    "mean_avail",
    "carry_rate",
    "carry_rate_tau1",
    "carry_rate_tau4",
    "report_size",
    "scans_completed",
    "notepad_writes",
    "notepad_reads",
)


class GroupSampler:
    """Runs the K candidates of one row with the simulated policy (one env per candidate, reused)."""

    def __init__(
        self,
        memory: str,
        candidates: int,
        *,
        num_scans: int = 12,
        merge_tol: float = 4.0,
        notepad_write_cost: float = 0.0,
        salt_namespace: str = "rftlab",
    ):
        if candidates < 1:
            raise ValueError("candidates must be >= 1")
        self.memory = memory
        self.k = candidates
        self.merge_tol = merge_tol
        self.notepad_write_cost = float(notepad_write_cost)
        # from_dict: ``memory`` is a caller's string, checked by the config like a row's value
        cfg = SpectrumRFTConfig.from_dict(
            {"memory": memory, "render": False, "num_scans": num_scans, "salt_namespace": salt_namespace}
        )
        self.envs = [SpectrumRFTEnv(cfg) for _ in range(candidates)]

    def run(
        self,
        theta: np.ndarray,
        temperature: float,
        row_id: str,
        salt: str,
        rng: np.random.Generator,
        band_assignment: BandAssignment = band_per_row,
        record: bool = False,
    ) -> GroupResult:
        """One group: the ``k`` candidates of ``row_id`` stepped in lockstep through every scan. Per scan one
        ``rng.random((k, 2 + MAX_REPORT + peaks))`` block: the notepad read and write draws, then the
        memory and peak draws of ``decide_scan``."""
        k = self.k
        theta = np.asarray(theta, dtype=np.float64)
        seeds = [int(band_assignment(row_id, salt, c)) for c in range(k)]
        obs = [_env_reset(env, row_id, salt, s) for env, s in zip(self.envs, seeds, strict=True)]
        logp = np.zeros(k)
        grad = np.zeros((k, N_PARAMS))
        carried = np.zeros(k)
        offered = np.zeros(k)
        traces = [Trace() for _ in range(k)] if record else None
        shared = len(set(seeds)) == 1
        while not obs[0].done:
            peaks = [obs[0].peaks] * k if shared else [o.peaks for o in obs]
            p = max(len(x) for x in peaks)
            u = rng.random((k, 2 + MAX_REPORT + p))
            memories = self._memories(obs, theta, temperature, u[:, 0], traces, logp, grad)
            batch = ScanBatch.build(peaks, memories)
            dec = decide_scan(
                theta,
                temperature,
                batch,
                u[:, 2 : 2 + MAX_REPORT],
                u[:, 2 + MAX_REPORT :],
                self.merge_tol,
                trace=traces,
            )
            logp += dec.logp
            grad += dec.grad
            carried += dec.carried
            offered += dec.offered
            obs = self._submit(obs, dec.reports, theta, temperature, u[:, 1], traces, logp, grad)
        rewards, records = self._records(row_id, salt, seeds, carried, offered, logp)
        return GroupResult(rewards, grad, logp, records, traces)

    def _memories(self, obs, theta, temperature, u_read, traces, logp, grad) -> list[list[float] | None]:
        """What each candidate remembers at this scan: the echoed list, or (arm D) the parsed notepad of
        the candidates that decide to read it (the read decision adds to ``logp`` and ``grad`` in place)."""
        if self.memory != "notepad":
            return [(o.echo or None) for o in obs]
        read, lp, g = decide_bias(theta, READ_INDEX, temperature, u_read, traces)
        logp += lp
        grad += g
        memories: list[list[float] | None] = []
        for i in range(self.k):
            if read[i]:
                o = _env_step(self.envs[i], AssistantTurn((ToolCall("notepad_read", {}),)))
                text = o.tool_results[-1]["content"] if o.tool_results else ""
                memories.append(parse_notepad(text)[:MAX_REPORT])
            else:
                memories.append(None)
        return memories

    def _submit(self, obs, reports, theta, temperature, u_write, traces, logp, grad) -> list:
        """Each candidate submits its report; with a notepad it first decides whether to write the report
        down (the write decision adds to ``logp`` and ``grad`` in place). Returns the next observations."""
        if self.memory != "notepad":
            return [_env_step(env, rep) for env, rep in zip(self.envs, reports, strict=True)]
        write, lp, g = decide_bias(theta, WRITE_INDEX, temperature, u_write, traces)
        logp += lp
        grad += g
        for i in range(self.k):
            calls = []
            if write[i]:
                calls.append(ToolCall("notepad_write", {"text": format_notepad(reports[i])}))
            calls.append(submit(reports[i]))
            obs[i] = _env_step(self.envs[i], AssistantTurn(tuple(calls)))
        return obs

    def _records(
        self, row_id, salt, seeds, carried, offered, logp
    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Each candidate's reward (the env's, minus the notepad write cost) and its rollout record."""
        records = []
        rewards = np.zeros(self.k)
        for i, env in enumerate(self.envs):
            m = env.metrics()
            cost = self.notepad_write_cost * m["notepad_writes"]
            rewards[i] = m["reward"] - cost
            rec = {
                "row_id": row_id,
                "candidate": i,
                "band_seed": seeds[i],
                "salt": salt,
                "reward": rewards[i],
                "env_reward": m["reward"],
                "write_cost": cost,
            }
            rec.update({key: m.get(key) for key in METRIC_KEYS})
            rec["memory_carry_rate"] = carried[i] / offered[i] if offered[i] else None
            rec["logp"] = logp[i]
            records.append(rec)
        return rewards, records


def summarize_rollouts(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Epoch-level means of per-rollout records plus the within-group statistics (B.11)."""
    out: dict[str, Any] = {"n_rollouts": len(records)}
    for key in ("reward", *METRIC_KEYS, "memory_carry_rate", "write_cost"):
        vals = [float(r[key]) for r in records if r.get(key) is not None]
        out[key] = float(np.mean(vals)) if vals else None
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(r["row_id"], []).append(r)
    sds = []
    for members in groups.values():
        rewards = np.array([m["reward"] for m in members], dtype=np.float64)
        sds.append(float(rewards.std(ddof=1)) if rewards.size > 1 else 0.0)
    out["n_groups"] = len(groups)
    out["within_group_reward_sd"] = float(np.mean(sds)) if sds else None
    out["frac_zero_variance_groups"] = float(np.mean([sd == 0.0 for sd in sds])) if sds else None
    # the env's carry-rate needs an echo; in the notepad arm use the policy's own carry of what it read
    carry_key = "carry_rate" if any(r.get("carry_rate") is not None for r in records) else "memory_carry_rate"
    out["carry_metric"] = carry_key
    stats = group_carry_stats(
        {row: [(m.get(carry_key), m["reward"]) for m in members] for row, members in groups.items()}
    )
    out["within_group_corr_carry_reward"] = stats["mean_corr_carry_reward"]
    out["within_group_corr_carry_reward_median"] = stats["median_corr_carry_reward"]
    out["within_group_sd_carry"] = stats["mean_sd_carry"]
    out["corr_groups"] = stats["n_groups"]
    return out
