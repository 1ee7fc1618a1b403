"""Summaries of spectrum episodes: the RFT reference-policy summaries and the per-episode / per-scan rows
the spectrum notebook tabulates. Pearson correlation and the group carry statistics live in
``rftlab.training.group_stats`` (the GRPO trainer logs them every epoch and sits below this layer).

    rft_baselines(episodes=200, seed=0)       # what `rftlab spectrum baselines --variant rft` prints
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rftlab.analysis.summaries import mean_se
from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.rewards.spectrum import as_reported
from rftlab.rollout.episode import episode
from rftlab.types import Trajectory

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
    from rftlab.policies.spectrum.reference import RFT_POLICIES

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


def policy_table_rows(
    summaries: Mapping[str, Mapping[str, Any]], descriptions: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One display row per policy of an arm's episode summaries (``summarize_episodes`` output):
    the occupied-IoU halves, ``memory_gain ± 1 s.e.`` (over episodes), available-IoU, carry-rate and report size."""
    from rftlab.analysis.display import MISSING, pm

    rows = []
    for name, s in summaries.items():
        carry = s["carry_rate"]
        rows.append(
            {
                "policy": name,
                "what it does": descriptions[name],
                "reward": s["reward"],
                "mean_occ": s["mean_occ"],
                "early_occ": s["early_occ"],
                "late_occ": s["late_occ"],
                "memory_gain ± 1 s.e.": pm(s["memory_gain"], s["memory_gain_se"]),
                "mean_avail": s["mean_avail"],
                "carry_rate": MISSING if carry is None else f"{carry:.3f}",
                "report size": s["report_size"],
            }
        )
    return rows


def bench90_row(name: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the bench90 table from an ``evaluate_bench90`` result: means over the permuted runs,
    their available-IoU range, the stateless baseline, and the mean normalized gain over the runs where
    it is defined (undefined when the stateless baseline is already perfect)."""
    avail_runs = [r["mean_available_iou"] for r in result["runs"]]
    gains = [r["normalized_gain"] for r in result["runs"] if r.get("normalized_gain") is not None]
    return {
        "policy": name,
        "available-IoU": result["mean_available_iou"],
        "available-IoU range over runs": f"{min(avail_runs):.3f}–{max(avail_runs):.3f}",
        "occupied-IoU": result["mean_occupied_iou"],
        "stateless available-IoU": result["baseline"]["mean_available_iou"],
        "stateless occupied-IoU": result["baseline"]["mean_occupied_iou"],
        "normalized_gain": sum(gains) / len(gains) if gains else None,
    }
