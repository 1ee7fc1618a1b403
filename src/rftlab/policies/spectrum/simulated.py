"""A **simulated** policy for the spectrum-memory task: a stochastic, differentiable stand-in for the LLM.

This is a simulation, not a language model. It acts through the same interface a model uses in the
RFT env (``submit_report`` with a list of centres; ``notepad_read`` / ``notepad_write`` in the notepad
arm), so the env, the reward, the run store and the analysis are exercised exactly as for a real run,
and it is small enough to train with exact policy gradients on a laptop.

Every choice is an independent log-linear Bernoulli draw ``a ~ Bernoulli(sigmoid(theta . phi / T))`` over
a handful of interpretable features; ``T`` is the sampling temperature (it divides every logit, as it
divides an LLM's token logits). Per scan:

1. *read* (notepad arm only): read the notepad this scan (features: bias).
2. *carry*: for each memory item (the echoed running list, the scrambled echo, or the notepad's list),
   keep it in the report (features: bias, ``corroborated`` = within ``merge_tol`` MHz of a current peak).
3. *report*: for each current peak that is not a near-duplicate of a kept memory item, add it (features:
   bias, power above the noise floor, departure of its width from the 8 MHz channel width; so training
   can learn to drop false alarms and interference, which are weak and narrow).
4. near-duplicate merging (deterministic): a reported peak within ``merge_tol`` MHz of an item already
   in the report is not added twice. The report is the kept memory items in their displayed order, then
   the new peaks in scan order, capped at 16.
5. *write* (notepad arm only): overwrite the notepad with the report (features: bias).

The parameter vector ``theta`` has one entry per name in ``PARAM_NAMES``; each decision's feature vector
``phi`` lives in the same 7-dimensional space (zeros outside its block), so every log-probability and its
gradient have one closed form: ``log p(a) = a·log σ(z) + (1 − a)·log σ(−z)`` and
``∂/∂θ = (a − σ(z))·φ / T`` with ``z = θ·φ / T``. Float64 throughout.

The ``explicit`` and ``weak`` prompt variants are initial parameter settings whose only difference is the
carry bias, calibrated (``calibrate_carry_bias``, measured through the env at temperature 1.2) so the
untrained carry-rate matches what the seed reports for the base model (≈0.97 explicit, ≈0.89 weak).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PARAM_NAMES: tuple[str, ...] = (
    "report.bias",
    "report.snr",
    "report.width",
    "carry.bias",
    "carry.corroborated",
    "read.bias",
    "write.bias",
)
N_PARAMS = len(PARAM_NAMES)
REPORT_SLICE = slice(0, 3)
CARRY_SLICE = slice(3, 5)
READ_INDEX = 5
WRITE_INDEX = 6

NOISE_FLOOR_DBM = -50.0
CHANNEL_BW = 8.0
MAX_REPORT = 16
SNR_CENTRE_DB = 15.0  # the snr feature is (power above the floor - 15 dB) / 10 dB
TARGET_CARRY: dict[str, float] = {"explicit": 0.97, "weak": 0.89}
DEFAULT_TEMPERATURE = 1.2

# Carry biases found by ``calibrate_carry_bias`` (bisection on the carry-rate measured through the env at
# temperature 1.2, echo arm, 48 unsalted "calib_*" rows x 12 candidates, tolerance 5e-4); the notebook
# re-measures and prints them on other bands.
CALIBRATED_CARRY_BIAS: dict[str, float] = {"explicit": 4.2285, "weak": 2.5293}
# Shared by both variants (a base model reports what it sees, a little less for weak peaks; the notepad
# arm's read/write habits are a simulation assumption: about 0.9 of scans at temperature 1.2).
BASE_PARAMS: dict[str, float] = {
    "report.bias": 3.0,
    "report.snr": 1.0,
    "report.width": 0.0,
    "carry.corroborated": 0.0,
    "read.bias": 2.6,
    "write.bias": 2.6,
}


def initial_params(variant: str = "weak", carry_bias: float | None = None) -> np.ndarray:
    """The untrained parameters of a prompt variant (``explicit`` or ``weak``), float64."""
    if variant not in CALIBRATED_CARRY_BIAS:
        raise ValueError(f"prompt variant must be one of {sorted(CALIBRATED_CARRY_BIAS)}, got {variant!r}")
    values = dict(BASE_PARAMS)
    values["carry.bias"] = CALIBRATED_CARRY_BIAS[variant] if carry_bias is None else float(carry_bias)
    return np.array([values[n] for n in PARAM_NAMES], dtype=np.float64)


def params_dict(theta: Sequence[float] | np.ndarray) -> dict[str, float]:
    return {n: float(v) for n, v in zip(PARAM_NAMES, theta, strict=True)}


# ------------------------------------------------------------------------------------------ math


def log_sigmoid(z: np.ndarray) -> np.ndarray:
    """``log σ(z)``, stable for large ``|z|``."""
    return -np.logaddexp(0.0, -z)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(log_sigmoid(z))


def bernoulli_logprob(phi: np.ndarray, actions: np.ndarray, theta: np.ndarray, temperature: float) -> float:
    """``Σ_i log p(a_i)`` of decisions with full-width features ``phi`` (n × N_PARAMS) and actions (n,)."""
    z = (phi @ theta) / temperature
    a = actions.astype(np.float64)
    return float(np.sum(a * log_sigmoid(z) + (1.0 - a) * log_sigmoid(-z)))


def bernoulli_grad(phi: np.ndarray, actions: np.ndarray, theta: np.ndarray, temperature: float) -> np.ndarray:
    """``∂/∂θ Σ_i log p(a_i) = Σ_i (a_i − σ(z_i)) φ_i / T``."""
    z = (phi @ theta) / temperature
    return ((actions.astype(np.float64) - sigmoid(z)) @ phi) / temperature


@dataclass
class Trace:
    """Every Bernoulli decision of an episode (full-width features and actions), for exact recomputation."""

    phi: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)

    def add(self, phi: np.ndarray, actions: np.ndarray) -> None:
        if len(actions):
            self.phi.append(np.array(phi, dtype=np.float64).reshape(-1, N_PARAMS))
            self.actions.append(np.array(actions, dtype=bool).reshape(-1))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.phi:
            return np.zeros((0, N_PARAMS)), np.zeros(0, dtype=bool)
        return np.concatenate(self.phi), np.concatenate(self.actions)

    def logprob(self, theta: np.ndarray, temperature: float) -> float:
        phi, a = self.arrays()
        return bernoulli_logprob(phi, a, np.asarray(theta, dtype=np.float64), temperature)

    def grad(self, theta: np.ndarray, temperature: float) -> np.ndarray:
        phi, a = self.arrays()
        return bernoulli_grad(phi, a, np.asarray(theta, dtype=np.float64), temperature)

    def __len__(self) -> int:
        return sum(len(a) for a in self.actions)


# ------------------------------------------------------------------------------------- features


def peak_features(power_dbm: np.ndarray, width_mhz: np.ndarray) -> np.ndarray:
    """Report-block features of peaks: ``[1, (power − floor − 15)/10, |width − 8|/4]`` (… × 3)."""
    power = np.asarray(power_dbm, dtype=np.float64)
    width = np.asarray(width_mhz, dtype=np.float64)
    return np.stack(
        [
            np.ones_like(power),
            (power - NOISE_FLOOR_DBM - SNR_CENTRE_DB) / 10.0,
            np.abs(width - CHANNEL_BW) / 4.0,
        ],
        axis=-1,
    )


@dataclass
class ScanBatch:
    """What K candidates see at one scan, padded to rectangular arrays.

    ``peak_freq``/``peak_feat``/``peak_valid``: (K, P), (K, P, 3), (K, P). ``mem``/``mem_valid``: (K, M)
    memory items (echo or notepad list; zero-padded)."""

    peak_freq: np.ndarray
    peak_feat: np.ndarray
    peak_valid: np.ndarray
    mem: np.ndarray
    mem_valid: np.ndarray

    @classmethod
    def build(
        cls, peaks: Sequence[Sequence[Mapping]], memories: Sequence[Sequence[float] | None]
    ) -> ScanBatch:
        k = len(peaks)
        p = max((len(x) for x in peaks), default=0)
        m = max((len(x) for x in memories if x), default=0)
        freq = np.zeros((k, p))
        power = np.full((k, p), NOISE_FLOOR_DBM)
        width = np.full((k, p), CHANNEL_BW)
        pvalid = np.zeros((k, p), dtype=bool)
        mem = np.zeros((k, m))
        mvalid = np.zeros((k, m), dtype=bool)
        for i, plist in enumerate(peaks):
            for j, pk in enumerate(plist):
                freq[i, j] = pk["freq_mhz"]
                power[i, j] = pk["power_dbm"]
                width[i, j] = pk["width_mhz"]
                pvalid[i, j] = True
        for i, items in enumerate(memories):
            if items:
                n = len(items)
                mem[i, :n] = items
                mvalid[i, :n] = True
        return cls(freq, peak_features(power, width), pvalid, mem, mvalid)


@dataclass
class ScanDecisions:
    """The outcome of one scan for K candidates: reports, and the exact log-prob / gradient increments."""

    reports: list[list[float]]
    logp: np.ndarray  # (K,)
    grad: np.ndarray  # (K, N_PARAMS)
    carried: np.ndarray  # (K,) memory items kept
    offered: np.ndarray  # (K,) memory items offered


def _carry_decisions(theta, T, batch: ScanBatch, u_carry, merge_tol, logp, grad, trace) -> np.ndarray:
    """Step 2: keep or drop each remembered item (features [1, corroborated by a current peak]); adds the
    log-probabilities and score gradients to ``logp`` and ``grad`` in place. Returns ``keep`` (K, M)."""
    k, m = batch.mem.shape
    p = batch.peak_freq.shape[1]
    if not m:
        return np.zeros((k, 0), dtype=bool)
    if p:
        dist = np.abs(batch.mem[:, :, None] - batch.peak_freq[:, None, :])
        corr = np.any((dist <= merge_tol) & batch.peak_valid[:, None, :], axis=2).astype(np.float64)
    else:
        corr = np.zeros((k, m))
    theta_c = theta[CARRY_SLICE]
    z = (theta_c[0] + theta_c[1] * corr) / T
    prob = sigmoid(z)
    keep = (u_carry[:, :m] < prob) & batch.mem_valid
    valid = batch.mem_valid.astype(np.float64)
    a = keep.astype(np.float64)
    logp += np.sum(valid * (a * log_sigmoid(z) + (1.0 - a) * log_sigmoid(-z)), axis=1)
    resid = valid * (a - prob)
    grad[:, CARRY_SLICE.start] += resid.sum(axis=1) / T
    grad[:, CARRY_SLICE.start + 1] += (resid * corr).sum(axis=1) / T
    if trace is not None:
        for i in range(k):
            sel = batch.mem_valid[i]
            phi = np.zeros((int(sel.sum()), N_PARAMS))
            phi[:, CARRY_SLICE.start] = 1.0
            phi[:, CARRY_SLICE.start + 1] = corr[i, sel]
            trace[i].add(phi, keep[i, sel])
    return keep


def _report_decisions(theta, T, batch: ScanBatch, u_report, keep, merge_tol, logp, grad, trace) -> np.ndarray:
    """Step 3: report or skip each current peak that is not a near-duplicate of a kept memory item; adds to
    ``logp`` and ``grad`` in place. Returns ``add`` (K, P)."""
    k, m = batch.mem.shape
    p = batch.peak_freq.shape[1]
    if not p:
        return np.zeros((k, 0), dtype=bool)
    if m:
        near_kept = np.any(
            (np.abs(batch.peak_freq[:, :, None] - batch.mem[:, None, :]) <= merge_tol) & keep[:, None, :],
            axis=2,
        )
    else:
        near_kept = np.zeros((k, p), dtype=bool)
    decide = batch.peak_valid & ~near_kept
    theta_r = theta[REPORT_SLICE]
    z = (batch.peak_feat @ theta_r) / T
    prob = sigmoid(z)
    add = (u_report[:, :p] < prob) & decide
    d = decide.astype(np.float64)
    a = add.astype(np.float64)
    logp += np.sum(d * (a * log_sigmoid(z) + (1.0 - a) * log_sigmoid(-z)), axis=1)
    resid = d * (a - prob)
    grad[:, REPORT_SLICE] += np.einsum("kp,kpf->kf", resid, batch.peak_feat) / T
    if trace is not None:
        for i in range(k):
            sel = decide[i]
            phi = np.zeros((int(sel.sum()), N_PARAMS))
            phi[:, REPORT_SLICE] = batch.peak_feat[i, sel]
            trace[i].add(phi, add[i, sel])
    return add


def _assemble_reports(batch: ScanBatch, keep, add, merge_tol: float, max_report: int) -> list[list[float]]:
    """Step 4: kept memory (displayed order), then added peaks (scan order) not within ``merge_tol`` of
    what is already in the report, cut at ``max_report``."""
    reports: list[list[float]] = []
    mem_l = batch.mem.tolist()
    freq_l = batch.peak_freq.tolist()
    keep_l = keep.tolist()
    add_l = add.tolist()
    for i in range(len(mem_l)):
        out = [x for x, kept in zip(mem_l[i], keep_l[i], strict=True) if kept]
        for f, added in zip(freq_l[i], add_l[i], strict=True):
            if added and all(abs(f - c) > merge_tol for c in out):
                out.append(f)
        reports.append(out[:max_report])
    return reports


def decide_scan(
    theta: np.ndarray,
    temperature: float,
    batch: ScanBatch,
    u_carry: np.ndarray,
    u_report: np.ndarray,
    merge_tol: float = 4.0,
    max_report: int = MAX_REPORT,
    trace: Sequence[Trace] | None = None,
) -> ScanDecisions:
    """Carry and report decisions of K candidates at one scan (steps 2–4 of the module docstring).

    ``u_carry`` (K, ≥M) and ``u_report`` (K, ≥P) are the uniforms that drive the Bernoulli draws
    (``a = u < p``), so the sampler controls the random stream. ``trace`` (one per candidate) records every
    decision for exact recomputation."""
    T = float(temperature)
    k, m = batch.mem.shape
    p = batch.peak_freq.shape[1]
    if u_carry.shape[1] < m or u_report.shape[1] < p:
        raise ValueError(f"need uniforms for {m} memory items and {p} peaks per candidate")
    logp = np.zeros(k)
    grad = np.zeros((k, N_PARAMS))
    keep = _carry_decisions(theta, T, batch, u_carry, merge_tol, logp, grad, trace)
    add = _report_decisions(theta, T, batch, u_report, keep, merge_tol, logp, grad, trace)
    reports = _assemble_reports(batch, keep, add, merge_tol, max_report)
    return ScanDecisions(reports, logp, grad, keep.sum(axis=1), batch.mem_valid.sum(axis=1))


def decide_bias(
    theta: np.ndarray, index: int, temperature: float, u: np.ndarray, trace: Sequence[Trace] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A bias-only Bernoulli choice (read / write) for K candidates: ``(actions, logp, grad)``."""
    z = float(theta[index]) / temperature
    prob = 1.0 / (1.0 + math.exp(-z))
    act = np.asarray(u) < prob
    a = act.astype(np.float64)
    logp = a * (-math.log1p(math.exp(-z))) + (1.0 - a) * (-math.log1p(math.exp(z)))
    grad = np.zeros((len(a), N_PARAMS))
    grad[:, index] = (a - prob) / temperature
    if trace is not None:
        for i in range(len(a)):
            phi = np.zeros((1, N_PARAMS))
            phi[0, index] = 1.0
            trace[i].add(phi, act[i : i + 1])
    return act, logp, grad


# --------------------------------------------------------------------------- notepad text format

_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")


def format_notepad(centres: Sequence[float]) -> str:
    """The notepad text the simulated policy writes: comma-separated centres, one decimal."""
    return ", ".join(f"{x:.1f}" for x in centres)


def parse_notepad(text: str | None, limit: int = 64) -> list[float]:
    """Numbers in a notepad text, in order (the empty-notepad message has none)."""
    if not text:
        return []
    out = []
    for tok in _NUMBER_RE.findall(text)[:limit]:
        try:
            out.append(float(tok))
        except ValueError:
            continue
    return out


# ------------------------------------------------------------------------ a single-episode policy


class SimulatedSpectrumPolicy:
    """One candidate of the simulated policy, as a ``rftlab.types.Policy`` for the RFT env.

    ``act(obs)`` returns the env action: a list of centres (``submit_report``) in the echo/none arms; in the
    notepad arm a ``notepad_read`` tool call, then (after the read result) one assistant turn with
    ``notepad_write`` (when it decides to write) and ``submit_report``. ``logp`` and ``grad`` hold the exact
    log-probability of the episode's choices so far and its gradient with respect to ``theta``;
    ``trace`` records every decision when ``record=True``.
    """

    def __init__(
        self,
        theta: Sequence[float] | None = None,
        *,
        variant: str = "weak",
        memory: str = "echo",
        temperature: float = DEFAULT_TEMPERATURE,
        merge_tol: float = 4.0,
        record: bool = False,
    ):
        self.theta = initial_params(variant) if theta is None else np.asarray(theta, dtype=np.float64)
        if self.theta.shape != (N_PARAMS,):
            raise ValueError(f"theta must have {N_PARAMS} entries ({', '.join(PARAM_NAMES)})")
        self.memory = memory
        self.temperature = float(temperature)
        self.merge_tol = float(merge_tol)
        self.record = record
        self.reset(0)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.logp = 0.0
        self.grad = np.zeros(N_PARAMS)
        self.trace = Trace()
        self.notepad_items: list[float] | None = None
        self._phase = "start"
        self.carried = 0
        self.offered = 0

    def _traces(self):
        return [self.trace] if self.record else None

    def _submit(self, obs, memory_items: Sequence[float] | None) -> list[float]:
        peaks = obs.peaks
        items = list(memory_items)[:MAX_REPORT] if memory_items else None  # a report holds at most 16
        batch = ScanBatch.build([peaks], [items])
        u = self.rng.random(MAX_REPORT * 2 + len(peaks))
        dec = decide_scan(
            self.theta,
            self.temperature,
            batch,
            u[None, : batch.mem.shape[1]],
            u[None, MAX_REPORT * 2 : MAX_REPORT * 2 + len(peaks)],
            self.merge_tol,
            trace=self._traces(),
        )
        self.logp += float(dec.logp[0])
        self.grad += dec.grad[0]
        self.carried += int(dec.carried[0])
        self.offered += int(dec.offered[0])
        return dec.reports[0]

    def act(self, obs) -> Any:
        if self.memory != "notepad":
            return self._submit(obs, obs.echo)
        from rftlab.envs.spectrum.rft import AssistantTurn, ToolCall, submit

        if self._phase != "read_done":
            act, lp, g = decide_bias(
                self.theta, READ_INDEX, self.temperature, self.rng.random(1), self._traces()
            )
            self.logp += float(lp[0])
            self.grad += g[0]
            if bool(act[0]):
                self._phase = "read_done"
                return AssistantTurn((ToolCall("notepad_read", {}),))
            items = None
        else:
            text = obs.tool_results[-1]["content"] if obs.tool_results else ""
            items = parse_notepad(text)
        self._phase = "start"
        report = self._submit(obs, items)
        act, lp, g = decide_bias(
            self.theta, WRITE_INDEX, self.temperature, self.rng.random(1), self._traces()
        )
        self.logp += float(lp[0])
        self.grad += g[0]
        calls = []
        if bool(act[0]):
            calls.append(ToolCall("notepad_write", {"text": format_notepad(report)}))
        calls.append(submit(report))
        return AssistantTurn(tuple(calls))

    __call__ = act
