"""Preflight of a spectrum-memory arm: cheap local checks that the GRPO setup can learn at all, to run
before any paid launch (the Fireworks launcher calls ``spectrum_preflight`` first).

Checks (each ``{name, passed, detail}``):

- ``candidates_share_band``: every candidate of a row faces the same band (same band seed) — the
  precondition of group-normalised advantages.
- ``deterministic_policy_zero_group_variance``: a deterministic reference policy played as every
  candidate of a row earns identical rewards; any spread is band luck.
- ``reward_separates_memory``: on the spec's bands, accumulating detections across scans (and following
  the echo, in the echo arm) earns more reward than reporting only the current scan, with a 95% lower
  bound above zero over bands.
- ``stochastic_policy_group_variance``: the simulated stochastic policy at the spec's temperature gives
  non-zero within-group reward variance (otherwise every advantage is zero).
- ``epoch_salt_changes_bands``: the bands of epoch 0 and epoch 1 differ (no band is seen twice).

A band drawn per rollout instead of per row — the seed's historical bug, which froze six runs at every
learning rate — fails the first two checks with an explanation. The band-assignment function is
injectable so a test can plant that bug.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rftlab.launch.spectrum.local import trainer_config
from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.training.spectrum.rollout import BandAssignment, GroupSampler, band_per_row

BAND_LUCK = (
    "GRPO normalises each rollout's reward against the other candidates of its row, so they must face "
    "the same band; with a band drawn per rollout the advantage measures band luck instead of policy "
    "and the policy does not move at any learning rate (the seed's historical bug that froze six runs). "
    "Seed the band from the row id (plus the epoch salt), never per rollout."
)


class PreflightFailed(RuntimeError):
    """A spec failed its preflight; the message lists every failed check (``report`` has them all)."""

    def __init__(self, report: PreflightReport):
        self.report = report
        failed = [c for c in report.checks if not c["passed"]]
        lines = "\n".join(f"  {c['name']}: {c['detail']}" for c in failed)
        super().__init__(f"preflight of arm {report.arm} failed {len(failed)} check(s):\n{lines}")


@dataclass
class PreflightReport:
    arm: str
    spec_sha256: str
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks)

    def add(self, name: str, passed: bool, detail: str, **numbers: Any) -> None:
        self.checks.append({"name": name, "passed": bool(passed), "detail": detail, **numbers})

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "spec_sha256": self.spec_sha256,
            "passed": self.passed,
            "checks": self.checks,
        }

    def render(self) -> str:
        lines = [f"preflight {self.arm}: {'PASSED' if self.passed else 'FAILED'}"]
        for c in self.checks:
            lines.append(f"  [{'ok' if c['passed'] else 'FAIL'}] {c['name']}: {c['detail']}")
        return "\n".join(lines)


def _reference_rewards(policy_name: str, memory: str, row_ids, salt: str, seeds) -> np.ndarray:
    from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
    from rftlab.policies.spectrum.reference import RFT_POLICIES
    from rftlab.rollout.episode import episode

    env = SpectrumRFTEnv(SpectrumRFTConfig(memory=memory, render=False))  # type: ignore[arg-type]
    out = []
    for row, seed in zip(row_ids, seeds, strict=True):
        out.append(episode(env, RFT_POLICIES[policy_name](), row, salt=salt, seed=seed).metrics["reward"])
    return np.asarray(out, dtype=np.float64)


def _check_shared_band(report, band_assignment, check_rows, salt0, k) -> None:
    """1. The candidates of a row share a band."""
    bad = []
    for row in check_rows:
        seeds = {int(band_assignment(row, salt0, c)) for c in range(k)}
        if len(seeds) > 1:
            bad.append((row, len(seeds)))
    if bad:
        row, n = bad[0]
        detail = f"row {row}: its {k} candidates face {n} different bands ({len(bad)}/{len(check_rows)} rows checked). {BAND_LUCK}"
    else:
        detail = f"{len(check_rows)} rows checked: all {k} candidates of each row share one band seed"
    report.add("candidates_share_band", not bad, detail)


def _check_deterministic_spread(report, band_assignment, check_rows, salt0, k, memory) -> None:
    """2. A deterministic policy has zero within-group variance (any spread is band luck)."""
    spreads = []
    for row in check_rows[:2]:
        seeds = [int(band_assignment(row, salt0, c)) for c in range(k)]
        r = _reference_rewards("accumulate", memory, [row] * k, salt0, seeds)
        spreads.append(float(np.ptp(r)))
    worst = max(spreads)
    ok = worst == 0.0
    detail = (
        f"the deterministic 'accumulate' policy earns identical rewards across a row's {k} candidates"
        if ok
        else f"the deterministic 'accumulate' policy's rewards differ by up to {worst:.4f} within a row: the spread is band luck. {BAND_LUCK}"
    )
    report.add("deterministic_policy_zero_group_variance", ok, detail, max_within_group_range=worst)


def _check_reward_separates_memory(report, spec, config, row_ids, salt0, bands, memory) -> None:
    """3. The reward separates memory use from memoryless play (one band per row, the epoch-0 bands)."""
    band_rows = (
        row_ids[: min(bands, len(row_ids))]
        if len(row_ids) >= 8
        else [f"{config.row_prefix}_{i}" for i in range(bands)]
    )
    seeds = [int(band_per_row(r, salt0, 0)) for r in band_rows]
    base = _reference_rewards("memoryless", memory, band_rows, salt0, seeds)
    names = ["accumulate"] + (["echo_follower"] if spec.memory == "echo" else [])
    parts, ok = [], True
    numbers: dict[str, Any] = {"memoryless_reward": float(base.mean())}
    for name in names:
        other = _reference_rewards(name, memory, band_rows, salt0, seeds)
        d = other - base
        se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else float("inf")
        lower = float(d.mean() - 1.96 * se)
        ok = ok and lower > 0.0
        numbers[f"{name}_minus_memoryless"] = float(d.mean())
        parts.append(f"{name} − memoryless = {d.mean():+.3f} reward (95% lower bound {lower:+.3f})")
    detail = f"over {len(band_rows)} bands: " + "; ".join(parts)
    if not ok:
        detail += " — the reward does not pay for memory; training cannot select for it"
    report.add("reward_separates_memory", ok, detail, **numbers)


def _check_group_variance(report, config, band_assignment, check_rows, salt0, k) -> None:
    """4. The stochastic policy's groups have reward variance (else no advantage, no gradient)."""
    sampler = GroupSampler(
        config.memory,
        k,
        num_scans=config.num_scans,
        notepad_write_cost=config.notepad_write_cost,
        salt_namespace=config.salt_namespace,
    )
    sds = []
    theta = config.theta0()
    for i, row in enumerate(check_rows):
        res = sampler.run(
            theta, config.temperature, row, salt0, np.random.default_rng([config.seed, 0, i]), band_assignment
        )
        sds.append(float(res.rewards.std(ddof=1)))
    zero = sum(sd == 0.0 for sd in sds)
    ok = zero == 0
    detail = (
        f"simulated policy at temperature {config.temperature:g}: mean within-group reward sd {np.mean(sds):.4f}, "
        f"{zero}/{len(sds)} groups with zero variance"
    )
    if not ok:
        detail += " — zero-variance groups give zero advantages and no gradient"
    report.add("stochastic_policy_group_variance", ok, detail, mean_within_group_sd=float(np.mean(sds)))


def _check_epoch_salt(report, spec, config, band_assignment, check_rows) -> None:
    """5. The epoch salt changes the bands (else the policy can memorise band content)."""
    if config.epochs < 2:
        report.add("epoch_salt_changes_bands", True, "a single epoch: no band can repeat")
        return
    row = check_rows[0]
    s0, s1 = int(band_assignment(row, config.salt(0), 0)), int(band_assignment(row, config.salt(1), 0))
    ok = s0 != s1
    detail = (
        f"row {row}: band seed {s0} at epoch 0, {s1} at epoch 1 (salts {config.salt(0)!r}, {config.salt(1)!r})"
        if ok
        else f"row {row}: the same band every epoch (epoch_salt is {spec.epoch_salt}); the policy can memorise band "
        "content, so a rising curve would not show memory use"
    )
    report.add("epoch_salt_changes_bands", ok, detail)


def spectrum_preflight(
    spec: SpectrumArmSpec,
    *,
    band_assignment: BandAssignment = band_per_row,
    rows: int = 4,
    bands: int = 24,
) -> PreflightReport:
    """Run the checks of the module docstring on ``spec`` (a few seconds)."""
    config = trainer_config(spec)
    report = PreflightReport(spec.arm, spec.sha256())
    row_ids = config.row_ids()
    k = config.candidates
    salt0 = config.salt(0)
    check_rows = row_ids[: max(1, min(rows, len(row_ids)))]
    memory = spec.memory if spec.memory != "notepad" else "echo"
    _check_shared_band(report, band_assignment, check_rows, salt0, k)
    _check_deterministic_spread(report, band_assignment, check_rows, salt0, k, memory)
    _check_reward_separates_memory(report, spec, config, row_ids, salt0, bands, memory)
    _check_group_variance(report, config, band_assignment, check_rows, salt0, k)
    _check_epoch_salt(report, spec, config, band_assignment, check_rows)
    return report


def require_preflight(spec: SpectrumArmSpec, **kwargs: Any) -> PreflightReport:
    """``spectrum_preflight(spec)``, raising ``PreflightFailed`` when any check fails (for launchers that
    must not spend money on a setup that cannot learn)."""
    report = spectrum_preflight(spec, **kwargs)
    if not report.passed:
        raise PreflightFailed(report)
    return report
