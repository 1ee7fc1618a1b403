"""Calibration of the simulated policy's prompt variants: the untrained carry-rate, measured through the env.

``measure_untrained(variant)`` plays the untrained policy (echo arm, temperature 1.2) on fresh bands and
returns the measured epoch metrics; ``calibrate_carry_bias(target)`` bisects the carry bias until the
measured carry-rate hits the target (the values stored in ``CALIBRATED_CARRY_BIAS`` came from it).
``calibration_check`` re-measures both variants on the bisection's own rows and RNG seed (which match
by construction) and on held-out rows with another RNG seed (which test the calibration).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rftlab.policies.spectrum.simulated import CARRY_SLICE, DEFAULT_TEMPERATURE, TARGET_CARRY, initial_params
from rftlab.training.spectrum.rollout import GroupSampler, summarize_rollouts


def measure_untrained(
    variant: str = "weak",
    *,
    theta: np.ndarray | None = None,
    memory: str = "echo",
    rows: int = 48,
    candidates: int = 12,
    temperature: float = DEFAULT_TEMPERATURE,
    seed: int = 12345,
    row_prefix: str = "calib",
) -> dict[str, Any]:
    """Epoch-level metrics of the untrained ``variant`` (or ``theta``) on ``rows`` unsalted calibration
    bands (rows ``{row_prefix}_{i}``, never used by an arm) × ``candidates``."""
    th = initial_params(variant) if theta is None else np.asarray(theta, dtype=np.float64)
    sampler = GroupSampler(memory, candidates)
    records = []
    for i in range(rows):
        res = sampler.run(th, temperature, f"{row_prefix}_{i}", "", np.random.default_rng([seed, i]))
        records.extend(res.records)
    out = summarize_rollouts(records)
    per_row: dict[str, list[float]] = {}
    for r in records:
        if r.get("carry_rate") is not None:
            per_row.setdefault(r["row_id"], []).append(float(r["carry_rate"]))
    row_means = np.array([np.mean(v) for v in per_row.values()])
    out["carry_rate_se"] = (
        float(row_means.std(ddof=1) / np.sqrt(row_means.size)) if row_means.size > 1 else None
    )
    out.update(variant=variant, rows=rows, candidates=candidates, temperature=temperature, seed=seed)
    return out


# The bisection's rows and RNG seed (``calibrate_carry_bias`` measures with these), and a held-out set.
BISECTION_SAMPLE: tuple[str, int] = ("calib", 12345)
HELD_OUT_SAMPLE: tuple[str, int] = ("heldout", 20261201)


def calibrate_carry_bias(
    target: float,
    *,
    rows: int = 48,
    candidates: int = 12,
    temperature: float = DEFAULT_TEMPERATURE,
    tol: float = 1e-3,
    max_iter: int = 30,
) -> dict[str, Any]:
    """Bisection on the carry bias so the measured untrained carry-rate equals ``target`` (± ``tol``)."""
    lo, hi = -5.0, 10.0
    history = []
    bias = (lo + hi) / 2
    measured = float("nan")
    for _ in range(max_iter):
        bias = (lo + hi) / 2
        theta = initial_params("weak", carry_bias=bias)
        measured = float(
            measure_untrained(theta=theta, rows=rows, candidates=candidates, temperature=temperature)[
                "carry_rate"
            ]
        )
        history.append((bias, measured))
        if abs(measured - target) <= tol:
            break
        if measured < target:
            lo = bias
        else:
            hi = bias
    return {"target": target, "carry_bias": bias, "measured": measured, "iterations": len(history)}


def calibration_table(rows: int = 48, candidates: int = 12) -> list[dict[str, Any]]:
    """Target vs measured untrained carry-rate of both prompt variants (with the stored biases)."""
    out = []
    for variant, target in TARGET_CARRY.items():
        m = measure_untrained(variant, rows=rows, candidates=candidates)
        out.append(
            {
                "variant": variant,
                "carry_bias": float(initial_params(variant)[CARRY_SLICE.start]),
                "target_carry": target,
                "measured_carry": m["carry_rate"],
                "mean_occ": m["mean_occ"],
                "report_size": m["report_size"],
                "rollouts": m["n_rollouts"],
            }
        )
    return out


def calibration_check(rows: int = 48, candidates: int = 12) -> list[dict[str, Any]]:
    """Both prompt variants' untrained carry-rate against its target on the bisection sample (rows
    ``calib_<i>``, RNG seed 12345: equal by construction) and on a held-out sample (rows ``heldout_<i>``,
    another RNG seed: the real check), with the s.e. over rows and the gap in s.e. units."""
    out = []
    samples = {"bisection rows and seed": BISECTION_SAMPLE, "held-out rows, other seed": HELD_OUT_SAMPLE}
    for variant, target in TARGET_CARRY.items():
        for label, (prefix, seed) in samples.items():
            m = measure_untrained(variant, rows=rows, candidates=candidates, seed=seed, row_prefix=prefix)
            se = m["carry_rate_se"]
            out.append(
                {
                    "variant": variant,
                    "sample": label,
                    "rows": f"{prefix}_0..{rows - 1}",
                    "rng seed": seed,
                    "target carry": target,
                    "measured carry": m["carry_rate"],
                    "s.e. (rows)": se,
                    "gap / s.e.": (m["carry_rate"] - target) / se if se else None,
                    "mean occ": m["mean_occ"],
                }
            )
    return out
