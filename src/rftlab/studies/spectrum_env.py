"""The spectrum environment study: the driver notebook ``01_spectrum_env`` calls (part of the spectrum
family, whose driver is ``rftlab.studies.spectrum``).

``run_reward_study`` plays the RFT reference policies on random bands in each memory arm and computes
the paired readings the notebook prints. ``run_bench_study`` plays the bench policies and the RFT
policies through the bridge on the official 90-scan schedule. ``keep_bench90`` keeps those episodes in
the run store (``save_bench90_rollouts``). ``bench_shaped_eval`` runs the reference policies through
eval-protocol offline. Every result is a frozen dataclass with named fields.

The CLI calls one more: ``bench_baselines`` gives the bench policies' scores at 4 dp
(``rftlab spectrum baselines --variant bench``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pandas as pd

from rftlab.analysis.display import pm
from rftlab.analysis.paired import equivalence_reading, paired_t_interval
from rftlab.analysis.spectrum.summaries import bench90_row, policy_table_rows, rft_reference_runs
from rftlab.analysis.summaries import MeanSE, mean_se
from rftlab.envs.spectrum.rft import NUM_SCANS
from rftlab.policies.spectrum.reference import BENCH_POLICIES, RFT_POLICIES, RFTPolicyOnBench
from rftlab.rewards.spectrum import early_late
from rftlab.rollout.spectrum.evaluation import PolicyFactory, evaluate_bench90
from rftlab.runs import Run, RunStore
from rftlab.runs.paths import runs_root

__all__ = [
    "BENCH90_EXPERIMENT",
    "BENCH_POLICY_NAMES",
    "HALF",
    "NUM_SCANS",
    "RFT_POLICY_NAMES",
    "AvailableReading",
    "BenchBaseline",
    "BenchScore",
    "BenchStudy",
    "KeptBench",
    "PolicySummary",
    "RewardStudy",
    "bench_baselines",
    "bench_shaped_eval",
    "keep_bench90",
    "run_bench_study",
    "run_reward_study",
    "save_bench90_rollouts",
]

HALF = max(1, NUM_SCANS // 2)  # early = scans 1..HALF, late = the rest (docs/spectrum.md §B.8)
RFT_POLICY_NAMES: tuple[str, ...] = tuple(RFT_POLICIES)
BENCH_POLICY_NAMES: tuple[str, ...] = tuple(BENCH_POLICIES)


@dataclass(frozen=True)
class PolicySummary:
    """One policy's episode summary in one memory arm (``summarize_episodes``): means over bands, and
    the standard error of ``memory_gain`` over bands."""

    reward: float
    mean_occ: float
    early_occ: float
    late_occ: float
    memory_gain: float
    memory_gain_se: float | None
    mean_avail: float
    carry_rate: float | None
    report_size: float

    @classmethod
    def of(cls, summary: Mapping[str, Any]) -> PolicySummary:
        """The typed view of a ``summarize_episodes`` dict."""
        return cls(
            reward=summary["reward"],
            mean_occ=summary["mean_occ"],
            early_occ=summary["early_occ"],
            late_occ=summary["late_occ"],
            memory_gain=summary["memory_gain"],
            memory_gain_se=summary.get("memory_gain_se"),
            mean_avail=summary["mean_avail"],
            carry_rate=summary["carry_rate"],
            report_size=summary["report_size"],
        )


@dataclass(frozen=True)
class AvailableReading:
    """Accumulate − memoryless over bands in the echo arm: available-IoU and occupied-IoU, each a mean
    ± s.e. and a paired 95% t interval. ``resolved`` is the smallest margin the available interval rules
    out (``equivalence_reading``)."""

    avail: MeanSE
    avail_low: float
    avail_high: float
    resolved: float
    occ: MeanSE
    occ_low: float
    occ_high: float


@dataclass(frozen=True)
class RewardStudy:
    """The RFT reference policies on ``n_bands`` bands in every memory arm: the raw rows, the per-cell
    summaries, and the paired readings the notebook prints (echo arm unless named)."""

    arms: tuple[str, ...]
    policies: tuple[str, ...]
    n_bands: int
    episodes: pd.DataFrame  # one row per (arm, policy, band) episode
    scans: pd.DataFrame  # one row per scan of every episode
    raw_summaries: dict[tuple[str, str], dict[str, Any]]
    carpet_share: float  # carpet's reward / accumulate's
    carpet_vs_acc: MeanSE  # carpet − accumulate, mean occupied-IoU, paired over bands
    acc_vs_memless: MeanSE  # accumulate − memoryless, mean occupied-IoU
    available: AvailableReading
    acc_avail_gain: MeanSE  # accumulate's late − early available-IoU
    scramble_rows: list[dict[str, str]]  # scrambled − echo per policy
    curves: pd.DataFrame  # per arm, policy and scan: mean and s.e.m. of occupied-IoU
    sizes: pd.DataFrame  # per arm, policy and scan: mean and s.e.m. of the report size
    acc_early_late: tuple[float, float]  # accumulate's early- and late-half means of the per-scan curve

    def summary(self, arm: str, policy: str) -> PolicySummary:
        return PolicySummary.of(self.raw_summaries[arm, policy])

    def policy_rows(self, arm: str, descriptions: Mapping[str, str]) -> list[dict[str, Any]]:
        """The display rows of every policy in ``arm`` (``policy_table_rows``)."""
        return policy_table_rows({n: self.raw_summaries[arm, n] for n in self.policies}, descriptions)

    def channels_placed(self) -> tuple[int, int, float]:
        """Fewest and most channels placed on a band, and the mean over the oracle's episodes."""
        placed = self.episodes["channels_placed"].to_numpy()
        oracle = placed[(self.episodes["policy"] == "oracle").to_numpy()]
        return int(placed.min()), int(placed.max()), float(oracle.mean())

    def available_rows(self, policies: Sequence[str]) -> list[dict[str, str]]:
        """Occupied- and available-IoU with their late − early gains, ± 1 s.e. over bands (echo arm)."""
        rows = []
        for name in policies:
            sub = self.episodes[(self.episodes["arm"] == "echo") & (self.episodes["policy"] == name)]
            occ, av = mean_se(sub["mean_occ"]), mean_se(sub["mean_avail"])
            gain, av_gain = mean_se(sub["memory_gain"]), mean_se(sub["avail_gain"])
            rows.append(
                {
                    "policy": name,
                    "mean_occ ± 1 s.e.": _pm(occ, signed=False),
                    "memory_gain (occ) ± 1 s.e.": _pm(gain),
                    "mean_avail ± 1 s.e.": _pm(av, signed=False),
                    "avail_gain ± 1 s.e.": _pm(av_gain),
                }
            )
        return rows


def _pm(value: MeanSE, signed: bool = True) -> str:
    """``pm`` of a mean that exists (every cell here has bands)."""
    if value.mean is None:
        raise ValueError("no values to summarise")
    return pm(value.mean, value.se, signed=signed)


def _paired(per_band: pd.DataFrame, metric: str, a: str, b: str) -> list[float]:
    """Per band, ``metric`` of policy ``a`` minus that of policy ``b``."""
    return (per_band[metric, a] - per_band[metric, b]).to_numpy(dtype=float).tolist()


def _available_reading(per_band: pd.DataFrame) -> AvailableReading:
    avail = _paired(per_band, "mean_avail", "accumulate", "memoryless")
    occ = _paired(per_band, "mean_occ", "accumulate", "memoryless")
    _, avail_low, avail_high = paired_t_interval(avail)
    _, occ_low, occ_high = paired_t_interval(occ)
    resolved = equivalence_reading(avail_low, avail_high).resolved
    return AvailableReading(mean_se(avail), avail_low, avail_high, resolved, mean_se(occ), occ_low, occ_high)


def _scramble_rows(episodes: pd.DataFrame, policies: Sequence[str]) -> list[dict[str, str]]:
    wide = episodes.pivot_table(index=["policy", "band"], columns="arm", values=["mean_occ", "memory_gain"])
    rows = []
    for name in policies:
        per_band = wide.loc[name]
        d_occ = mean_se(per_band["mean_occ", "scrambled"] - per_band["mean_occ", "echo"])
        d_gain = mean_se(per_band["memory_gain", "scrambled"] - per_band["memory_gain", "echo"])
        rows.append(
            {
                "policy": name,
                "Δ mean_occ (scrambled − echo) ± 1 s.e.": _pm(d_occ),
                "Δ memory_gain (scrambled − echo) ± 1 s.e.": _pm(d_gain),
            }
        )
    return rows


def _scan_curves(scans: pd.DataFrame, policies: Sequence[str], column: str) -> pd.DataFrame:
    return (
        scans[scans["policy"].isin(policies)]
        .groupby(["arm", "policy", "scan"])[column]
        .agg(["mean", "sem"])
        .reset_index()
    )


def run_reward_study(
    arms: Sequence[str],
    n_bands: int,
    seed: int = 0,
    curve_policies: Sequence[str] = ("memoryless", "accumulate", "echo_follower", "oracle"),
) -> RewardStudy:
    """Play every RFT reference policy on bands ``bl{seed}_0 ..`` in each memory arm
    (``rft_reference_runs``) and compute the readings of notebook 01. The arms must include ``echo``
    and ``scrambled``. ``curve_policies`` get per-scan occupied-IoU curves."""
    runs = rft_reference_runs(arms, RFT_POLICIES, n_bands, seed)
    episodes, scans, summaries = pd.DataFrame(runs.episodes), pd.DataFrame(runs.scans), runs.summaries
    echo = episodes[episodes["arm"] == "echo"]
    per_band = echo.pivot_table(index="band", columns="policy", values=["mean_occ", "mean_avail"])
    curves = _scan_curves(scans, curve_policies, "occ")
    acc_curve = pd.DataFrame(curves[(curves["arm"] == "echo") & (curves["policy"] == "accumulate")])
    acc_curve = acc_curve.sort_values("scan")
    return RewardStudy(
        arms=tuple(arms),
        policies=RFT_POLICY_NAMES,
        n_bands=n_bands,
        episodes=episodes,
        scans=scans,
        raw_summaries=summaries,
        carpet_share=summaries["echo", "carpet"]["reward"] / summaries["echo", "accumulate"]["reward"],
        carpet_vs_acc=mean_se(_paired(per_band, "mean_occ", "carpet", "accumulate")),
        acc_vs_memless=mean_se(_paired(per_band, "mean_occ", "accumulate", "memoryless")),
        available=_available_reading(per_band),
        acc_avail_gain=mean_se(echo[echo["policy"] == "accumulate"]["avail_gain"]),
        scramble_rows=_scramble_rows(episodes, RFT_POLICY_NAMES),
        curves=curves,
        sizes=_scan_curves(scans, ["accumulate", "echo_follower"], "report_size"),
        acc_early_late=early_late(acc_curve["mean"].tolist()),
    )


# ------------------------------------------------------------------------------ the official bench


@dataclass(frozen=True)
class BenchScore:
    """A policy's bench90 scores: means over the permuted runs, and the mean normalized gain over the
    stateless baseline (``None`` where undefined)."""

    available: float
    occupied: float
    normalized_gain: float | None


@dataclass(frozen=True)
class BenchStudy:
    """The bench policies and the RFT policies through the bridge on permuted runs ``0..runs−1`` of the
    official 90-scan schedule: the raw ``evaluate_bench90`` results (with transcripts), keyed by name."""

    runs: int
    bench: dict[str, dict[str, Any]]
    bridge: dict[str, dict[str, Any]]

    def bench_rows(self) -> list[dict[str, Any]]:
        return [bench90_row(n, r) for n, r in self.bench.items()]

    def bridge_rows(self) -> list[dict[str, Any]]:
        return [bench90_row(f"rft:{n}", r) for n, r in self.bridge.items()]

    def bench_score(self, name: str) -> BenchScore:
        return _score(name, self.bench[name])

    def bridge_score(self, name: str) -> BenchScore:
        return _score(f"rft:{name}", self.bridge[name])

    def best_bench(self) -> str:
        """The bench policy with the highest available-IoU, the oracle left out."""
        names = [n for n in self.bench if n != "oracle"]
        return max(names, key=lambda n: self.bench_score(n).available)

    def best_bridge(self) -> str:
        """The RFT policy with the highest available-IoU through the bridge."""
        return max(self.bridge, key=lambda n: self.bridge_score(n).available)


def _score(name: str, result: Mapping[str, Any]) -> BenchScore:
    gain = bench90_row(name, result)["normalized_gain"]
    return BenchScore(result["mean_available_iou"], result["mean_occupied_iou"], gain)


def _bridged(name: str) -> PolicyFactory:
    """A factory of RFT policy ``name`` through the bridge. ``RFTPolicyOnBench.act`` names its argument
    ``obs`` where the ``Policy`` protocol says ``observation``; the episode loop passes it by position."""
    return cast("PolicyFactory", lambda: RFTPolicyOnBench(RFT_POLICIES[name]()))


def run_bench_study(runs: int, bridge_policies: Sequence[str]) -> BenchStudy:
    """Play every bench reference policy, and each RFT policy in ``bridge_policies`` through the bridge
    (``RFTPolicyOnBench``), on permuted runs ``0..runs−1`` with the stateless baseline and transcripts."""
    bench = {
        name: evaluate_bench90(factory, runs=range(runs), baseline=True, transcripts=True)
        for name, factory in BENCH_POLICIES.items()
    }
    bridge = {
        name: evaluate_bench90(_bridged(name), runs=range(runs), baseline=True, transcripts=True)
        for name in bridge_policies
    }
    return BenchStudy(runs, bench, bridge)


@dataclass(frozen=True)
class BenchBaseline:
    """A bench policy on permuted runs ``0..runs−1`` and on the stateless baseline, at 4 dp.

    The means and the normalized gain are ``BenchScore``'s. The halves, the learning delta and the
    stage means of ``run0_*`` are run 0's. The halves and the delta are not rounded.
    """

    mean_available_iou: float
    run0_available_iou: float
    stateless_available_iou: float
    mean_occupied_iou: float
    stateless_occupied_iou: float
    first_half_score: float
    second_half_score: float
    learning_delta: float
    normalized_gain: float | None
    run0_available_by_stage: dict[str, float]
    stateless_available_by_stage: dict[str, float]
    run0_occupied_by_stage: dict[str, float]
    runs: int

    def to_dict(self) -> dict[str, Any]:
        """Every field in order (what ``--json`` prints)."""
        return dataclasses.asdict(self)


def _r4(x: float) -> float:
    """``x`` rounded to 4 dp; adding 0.0 turns -0.0 into 0.0."""
    return round(float(x), 4) + 0.0


def _r4_stages(stages: Mapping[str, float]) -> dict[str, float]:
    return {stage: _r4(value) for stage, value in stages.items()}


def _bench_baseline(name: str, result: Mapping[str, Any], runs: int) -> BenchBaseline:
    score = _score(name, result)
    run0, stateless = result["runs"][0], result["baseline"]
    return BenchBaseline(
        mean_available_iou=_r4(score.available),
        run0_available_iou=_r4(run0["mean_available_iou"]),
        stateless_available_iou=_r4(stateless["mean_available_iou"]),
        mean_occupied_iou=_r4(score.occupied),
        stateless_occupied_iou=_r4(stateless["mean_occupied_iou"]),
        first_half_score=run0["first_half_score"],
        second_half_score=run0["second_half_score"],
        learning_delta=run0["learning_delta"],
        normalized_gain=None if score.normalized_gain is None else _r4(score.normalized_gain),
        run0_available_by_stage=_r4_stages(run0["available_by_stage"]),
        stateless_available_by_stage=_r4_stages(stateless["available_by_stage"]),
        run0_occupied_by_stage=_r4_stages(run0["occupied_by_stage"]),
        runs=runs,
    )


def bench_baselines(runs: int = 5) -> dict[str, BenchBaseline]:
    """Every bench reference policy on permuted runs ``0..runs−1`` and the stateless baseline."""
    return {
        name: _bench_baseline(name, evaluate_bench90(factory, runs=range(runs), baseline=True), runs)
        for name, factory in BENCH_POLICIES.items()
    }


@dataclass(frozen=True)
class KeptBench:
    """The bench episodes kept in the run store: how many, in how many runs."""

    episodes: int
    runs: int


def keep_bench90(bench: BenchStudy, root: str | Path | None = None) -> KeptBench:
    """Keep every bench episode of ``bench`` in the run store (``save_bench90_rollouts``), the bridge
    policies as ``rft:<name>``."""
    results = {**bench.bench, **{f"rft:{n}": r for n, r in bench.bridge.items()}}
    kept = save_bench90_rollouts(results, root)
    return KeptBench(sum(len(r.rollouts(0)) for r in kept), len(kept))


def bench_shaped_eval(rows: int, policies: Sequence[str]) -> pd.DataFrame:
    """Each policy served locally through the bench-shaped eval-protocol path on ``rows`` rows, beside
    the env's own scoring (``run_bench_shaped_eval``), one table."""
    from rftlab.rollout.spectrum.eval_runner import run_bench_shaped_eval

    return pd.concat([run_bench_shaped_eval(rows, name) for name in policies], ignore_index=True)


BENCH90_EXPERIMENT = "spectrum_bench90"
_BENCH_RECORD_KEYS = (
    "mean_available_iou",
    "mean_occupied_iou",
    "learning_delta",
    "normalized_gain",
    "warnings",
)


def save_bench90_rollouts(
    results: Mapping[str, Mapping[str, Any]], root: str | Path | None = None
) -> list[Run]:
    """Keep bench90 episodes in the run store (experiment ``spectrum_bench90``, one finished run per
    policy, arm ``accumulate`` or ``rft-accumulate`` for ``rft:accumulate``): ``results`` maps a policy
    name to its ``evaluate_bench90(..., transcripts=True)`` result; each permuted run becomes one rollout
    with its transcript, its available-IoU as the reward, and its summary numbers. Runs with the same
    policy and permuted runs are reused. Returns the runs."""
    store = RunStore(root if root is not None else runs_root())
    saved = []
    for name, result in results.items():
        episodes = result.get("runs") or []
        if not episodes or any("messages" not in e for e in episodes):
            raise ValueError(
                f"{name}: no transcripts to keep; evaluate with evaluate_bench90(..., transcripts=True)"
            )
        spec = {"policy": name, "runs": [e["run_index"] for e in episodes], "baseline": "baseline" in result}
        records = [
            {
                "row_id": f"bench90-run{e['run_index']}",
                "reward": e["mean_available_iou"],
                **{k: e[k] for k in _BENCH_RECORD_KEYS if k in e},
                "messages": e["messages"],
            }
            for e in episodes
        ]
        run, _ = store.record_rollouts(BENCH90_EXPERIMENT, name.replace(":", "-"), spec, records)
        saved.append(run)
    return saved
