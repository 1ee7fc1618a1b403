"""Summaries of episodes: mean ± standard error (the one implementation in the package), Pearson
correlation, group carry statistics (spec B.11), the RFT reference-policy summaries and the
per-episode / per-scan rows the spectrum notebook tabulates.

    mean_se([0.1, 0.3, 0.2])                  # MeanSE(mean=0.2, se=0.0577..., n=3)
    rft_baselines(episodes=200, seed=0)       # what `rftlab spectrum baselines --variant rft` prints
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import mean as _stat_mean
from typing import Any

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.rewards.spectrum import as_reported
from rftlab.rollout.episode import episode
from rftlab.types import Trajectory


@dataclass(frozen=True, slots=True)
class MeanSE:
    """A mean with its standard error (sample sd / √n; ``None`` when n < 2) over ``n`` values."""

    mean: float | None
    se: float | None
    n: int


def mean_se(values: Iterable[float]) -> MeanSE:
    """Mean and standard error ``sd/√n`` (sample sd, n − 1) of ``values``; ``mean`` is ``None`` for no
    values and ``se`` is ``None`` for fewer than two."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return MeanSE(None, None, 0)
    mu = sum(xs) / n
    if n < 2:
        return MeanSE(mu, None, 1)
    sd = math.sqrt(sum((x - mu) ** 2 for x in xs) / (n - 1))
    return MeanSE(mu, sd / math.sqrt(n), n)


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation of paired samples; ``None`` with fewer than two pairs or zero variance."""
    if len(x) < 2:
        return None
    mx, my = _stat_mean(x), _stat_mean(y)
    sx = math.fsum((a - mx) ** 2 for a in x)
    sy = math.fsum((b - my) ** 2 for b in y)
    if sx == 0 or sy == 0:
        return None
    return math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / math.sqrt(sx * sy)


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    k = len(s) // 2
    return s[k] if len(s) % 2 else (s[k - 1] + s[k]) / 2


def group_carry_stats(groups: Mapping[Any, Sequence[tuple[float | None, float]]]) -> dict[str, Any]:
    """Within-group carry statistics (B.11). ``groups`` maps a group key (row, epoch) to the
    ``(carry_rate, reward)`` of each candidate. Per group: sample sd of carry and Pearson
    ``corr(carry, reward)``; then mean and median over groups, skipping groups with zero variance in
    either variable (and candidates whose carry is undefined)."""
    sds, corrs = [], []
    for members in groups.values():
        pairs = [(c, r) for c, r in members if c is not None]
        if len(pairs) < 2:
            continue
        cs = [c for c, _ in pairs]
        rs = [r for _, r in pairs]
        m = _stat_mean(cs)
        sd = math.sqrt(math.fsum((c - m) ** 2 for c in cs) / (len(cs) - 1))
        rho = pearson(cs, rs)
        if sd == 0 or rho is None:
            continue
        sds.append(sd)
        corrs.append(rho)
    return {
        "n_groups": len(sds),
        "mean_sd_carry": _stat_mean(sds) if sds else None,
        "median_sd_carry": _median(sds),
        "mean_corr_carry_reward": _stat_mean(corrs) if corrs else None,
        "median_corr_carry_reward": _median(corrs),
    }


# ------------------------------------------------------------------------------ RFT episodes

SUMMARY_KEYS: tuple[str, ...] = (
    "reward",
    "mean_occ",
    "early_occ",
    "late_occ",
    "memory_gain",
    "mean_avail",
    "scans_completed",
    "report_size",
    "carry_rate",
    "carry_rate_tau1",
    "carry_rate_tau4",
)


def summarize_episodes(metrics: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means over episodes (``carry_rate`` over episodes where it is defined) + s.e. of ``memory_gain``."""
    out: dict[str, Any] = {}
    for k in SUMMARY_KEYS:
        out[k] = mean_se(float(m[k]) for m in metrics if m.get(k) is not None).mean
    gain = mean_se(float(m["memory_gain"]) for m in metrics)
    if gain.se is not None:
        out["memory_gain_se"] = gain.se
    out["episodes"] = len(metrics)
    return out


def rft_baselines(
    episodes: int = 200, seed: int = 0, memory: str = "echo", policies: Iterable[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Reference policies on ``episodes`` random bands (rows ``bl{seed}_{i}``, unsalted; every policy sees
    the same bands), summarised and rounded to 4 dp."""
    from rftlab.policies.spectrum import RFT_POLICIES

    names = list(policies) if policies is not None else list(RFT_POLICIES)
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory=memory, render=False))  # type: ignore[arg-type]
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        factory = RFT_POLICIES[name]
        runs = [episode(env, factory(), f"bl{seed}_{i}").metrics for i in range(episodes)]
        summary = summarize_episodes(runs)
        out[name] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items()}
    return out


def scan_rows(trajectory: Trajectory, **labels: Any) -> list[dict[str, Any]]:
    """One row per scan of an RFT episode (forced scans included): ``labels`` + scan number, occupied-
    and available-IoU at the score line's 4-dp precision (a forced scan's empty report scores as the env
    records it) and the report size (0 for a forced scan)."""
    rows = []
    for t in trajectory.transitions:
        info = t.info
        if not (info.scored or info.forced):
            continue  # a notepad call: no scan ended
        rows.append(
            {
                **labels,
                "scan": info.scan,
                "occ": as_reported(info.occ),
                "avail": as_reported(info.avail),
                "report_size": info.actions[-1].kept if info.scored else 0,
            }
        )
    return rows


@dataclass(frozen=True)
class ReferenceRuns:
    """Every (memory arm, policy, band) episode of the reference policies: ``episodes`` has one row per
    episode (``arm``, ``policy``, ``band`` + ``env.metrics()``), ``scans`` one row per scan
    (``scan_rows``), ``summaries[arm, policy]`` is ``summarize_episodes`` of that cell."""

    episodes: list[dict[str, Any]]
    scans: list[dict[str, Any]]
    summaries: dict[tuple[str, str], dict[str, Any]]


def rft_reference_runs(
    arms: Sequence[str], policies: Mapping[str, Any], n_bands: int, seed: int = 0
) -> ReferenceRuns:
    """Play each policy factory in ``policies`` on bands ``bl{seed}_0 .. bl{seed}_{n_bands-1}`` in each
    memory arm (unrendered env: identical scores) — the rows ``rftlab spectrum baselines --variant rft``
    summarises, kept per episode and per scan."""
    episode_rows: list[dict[str, Any]] = []
    scan_table: list[dict[str, Any]] = []
    summaries: dict[tuple[str, str], dict[str, Any]] = {}
    for arm in arms:
        env = SpectrumRFTEnv(SpectrumRFTConfig(memory=arm, render=False))  # type: ignore[arg-type]
        for name, factory in policies.items():
            metrics = []
            for band in range(n_bands):
                traj = episode(env, factory(), f"bl{seed}_{band}")
                metrics.append(traj.metrics)
                episode_rows.append({"arm": arm, "policy": name, "band": band, **traj.metrics})
                scan_table.extend(scan_rows(traj, arm=arm, policy=name, band=band))
            summaries[arm, name] = summarize_episodes(metrics)
    return ReferenceRuns(episode_rows, scan_table, summaries)
