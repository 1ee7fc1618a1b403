"""Reference evaluations of spectrum policies, played through the one episode loop.

- ``evaluate_bench90(policy_factory, runs=..., baseline=...)``: a bench policy on the official 90-scan
  schedule (each listed permuted run) and on the stateless-baseline protocol (docs/spectrum.md §A.9, B.13).
- ``bench_records(trajectory)``: the per-position rows of one bench episode.
- ``rft_trajectories(env, policy_factory, row_ids)``: one RFT episode per row id, a fresh policy each.

Means here are plain means of per-scan scores (the official metrics); summary statistics with standard
errors live in ``rftlab.analysis.summaries``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rftlab.envs.spectrum import official
from rftlab.envs.spectrum.bench import SpectrumBenchEnv
from rftlab.envs.spectrum.render import SpectrumText, resolve_text
from rftlab.rewards.spectrum import mean_score, normalized_gain
from rftlab.rollout.episode import episode, transcript
from rftlab.types import Env, Policy, Trajectory

PolicyFactory = Callable[[], Policy[Any, Any]]


def bench_records(trajectory: Trajectory) -> list[dict[str, Any]]:
    """One row per scored scan of a bench episode: position, corpus index, stage, available-IoU (the
    reward), occupied-IoU and the coercion warning."""
    return [
        {
            "position": t.info.position,
            "corpus_index": t.info.corpus_index,
            "stage_idx": t.info.stage_idx,
            "avail": t.reward,
            "occ": t.info.occupied_iou,
            "warning": t.info.warning,
        }
        for t in trajectory.transitions
    ]


def _stage_means(records: Sequence[Mapping[str, Any]], key: str, by: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for stage in official.STAGES:
        vals = [r[key] for r in records if official.stage_of(r[by]).stage_idx == stage.stage_idx]
        out[stage.variant_id] = sum(vals) / len(vals) if vals else 0.0
    return out


def evaluate_bench90(
    policy_factory: PolicyFactory,
    *,
    runs: Iterable[int] = (0,),
    baseline: bool = True,
    text: SpectrumText | str | None = None,
    repeat_instructions: bool = True,
    transcripts: bool = False,
) -> dict[str, Any]:
    """Run a policy on the official 90-scan schedule (each listed permuted run) and, optionally, on the
    stateless-baseline protocol (a fresh policy per canonical scan). Reports available-IoU (the official
    score), occupied-IoU (B.13 raster on 168 MHz against the 13 GT channels) and gain over the baseline.
    With ``transcripts`` each run also carries ``messages``, its episode as chat messages (``transcript``).
    """
    text = resolve_text(text)
    rows = official.build_corpus()
    out: dict[str, Any] = {"runs": []}
    for r in runs:
        env = SpectrumBenchEnv(r, text=text, repeat_instructions=repeat_instructions, rows=rows)
        traj = episode(env, policy_factory())
        recs = bench_records(traj)
        m = traj.metrics
        out["runs"].append(
            {
                "run_index": r,
                "mean_available_iou": mean_score([x["avail"] for x in recs]),
                "mean_occupied_iou": mean_score([x["occ"] for x in recs]),
                "first_half_score": m["first_half_score"],
                "second_half_score": m["second_half_score"],
                "learning_delta": m["learning_delta"],
                "available_by_stage": _stage_means(recs, "avail", "position"),
                "occupied_by_stage": _stage_means(recs, "occ", "position"),
                "rewards": [x["avail"] for x in recs],
                "occupied": [x["occ"] for x in recs],
                "warnings": sum(1 for x in recs if x["warning"]),
                **({"messages": transcript(traj)} if transcripts else {}),
            }
        )
    if baseline:
        b_recs = []
        env = SpectrumBenchEnv(
            text=text, repeat_instructions=repeat_instructions, rows=rows, baseline_index=0
        )
        for i in range(official.TOTAL_SCANS):
            b_recs.extend(bench_records(episode(env, policy_factory(), i)))
        base_rewards = [x["avail"] for x in b_recs]
        out["baseline"] = {
            "mean_available_iou": mean_score(base_rewards),
            "mean_occupied_iou": mean_score([x["occ"] for x in b_recs]),
            "available_by_stage": _stage_means(b_recs, "avail", "corpus_index"),
            "occupied_by_stage": _stage_means(b_recs, "occ", "corpus_index"),
            "rewards": base_rewards,
        }
        for run in out["runs"]:
            run.update(normalized_gain(run["rewards"], base_rewards))
    if out["runs"]:
        out["mean_available_iou"] = mean_score([x["mean_available_iou"] for x in out["runs"]])
        out["mean_occupied_iou"] = mean_score([x["mean_occupied_iou"] for x in out["runs"]])
    return out


def rft_trajectories(
    env: Env[Any, Any, Any], policy_factory: PolicyFactory, row_ids: Iterable[Any], **reset_options: Any
) -> list[Trajectory]:
    """One episode per row id (a fresh policy each), in order."""
    return [episode(env, policy_factory(), row_id, **reset_options) for row_id in row_ids]
