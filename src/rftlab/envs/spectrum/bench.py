"""BSM-official as an env: queries, the ``ScanReport`` action, available-IoU scoring, feedback, task
metrics, the stateless baseline, and the bench90 evaluation of any policy (spec A.5–A.9, A.12, B.13).

    env = SpectrumBenchEnv(run_index=0)
    query = env.reset()
    while query is not None:
        obs, reward, done, info = env.step(policy(query))
        query = obs.next_query
    env.evaluate()            # CLBench task metrics

Policies are callables ``policy(query) -> action`` with an optional ``reset()``; a *policy factory*
(``() -> policy``) lets the baseline protocol build a fresh system per instance.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from rftlab.envs.spectrum import official
from rftlab.envs.spectrum.render import (
    TIMEOUT_FEEDBACK,
    SpectrumText,
    compose_prompt,
    render_feedback,
    render_instance,
    resolve_text,
    timestamp_utc,
)
from rftlab.rewards.spectrum import OccupiedRaster, available_iou, normalized_gain, task_metrics

BAND = official.BAND_WIDTH


class Transmitter(BaseModel):
    """One transmitter the agent believes occupies spectrum over the long run (its interval is
    unavailable)."""

    center_freq: float = Field(description="Centre frequency of the occupied region in MHz.")
    bandwidth: float = Field(description="Width of the occupied region in MHz.")
    currently_active: bool = Field(description="Whether the transmitter shows up in the current scan.")
    estimated_power: float = Field(description="Estimated power in dBm.")


class ScanReport(BaseModel):
    """Structured report of the transmitters and long-run occupied regions of the band."""

    transmitters: list[Transmitter] = Field(
        description=(
            "Every transmitter region believed to persist in the band; an empty list only when nothing "
            "credible points to a transmitter."
        )
    )


def coerce_scan_report(action: Any) -> tuple[ScanReport, str | None]:
    """A ``ScanReport`` from an action; anything that is not one (after validating a mapping) is an empty
    report plus a warning (A.7). Never raises."""
    if isinstance(action, ScanReport):
        return action, None
    if isinstance(action, Mapping):
        try:
            return ScanReport.model_validate(dict(action)), None
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {}
            where = ".".join(str(x) for x in first.get("loc", ()))
            return ScanReport(transmitters=[]), f"invalid ScanReport ({where}: {first.get('msg', 'error')})"
    return ScanReport(transmitters=[]), f"action of type {type(action).__name__} is not a ScanReport"


def report_regions(report: ScanReport) -> list[tuple[float, float]]:
    return [(t.center_freq, t.bandwidth) for t in report.transmitters]


@dataclass
class BenchQuery:
    """What a system sees for one scan. ``peaks`` omit the hidden ``source``; ``hidden`` holds ground
    truth and peak sources for oracle / ceiling policies only (never rendered)."""

    prompt: str
    instance_id: str
    instance_index: int
    metadata: dict[str, Any]
    position: int
    canonical_index: int
    stage_idx: int
    variant_id: str
    scan_num: int
    stated_horizon: int
    peaks: list[dict[str, Any]]
    instance_block: str
    hidden: dict[str, Any] = field(repr=False, default_factory=dict)
    response_schema: type[BaseModel] = ScanReport


@dataclass
class BenchObservation:
    content: str
    instance_complete: bool
    next_query: BenchQuery | None


class SpectrumBenchEnv:
    """One CLBench BSM run (``run_index`` ordering) or one stateless-baseline instance (``baseline_index``)."""

    def __init__(
        self,
        run_index: int = 0,
        *,
        text: SpectrumText | str | None = None,
        repeat_instructions: bool = True,
        probe_mode: bool = False,
        rows: Sequence[Mapping[str, Any]] | None = None,
        baseline_index: int | None = None,
    ):
        self.text = resolve_text(text)
        self.repeat_instructions = repeat_instructions
        self.probe_mode = probe_mode
        self._rows = [dict(r) for r in rows] if rows is not None else official.build_corpus()
        self.baseline_index = baseline_index
        if baseline_index is not None:
            official.stage_of(baseline_index)
            self.order = [baseline_index]
        else:
            self.order = official.run_order(run_index)
        self.run_index = run_index
        self.stated_horizon = official.STATED_HORIZON
        self._gt = official.ground_truth_channels()
        self._occ = OccupiedRaster(self._gt, BAND)
        self._brief = self.text.brief.render()
        self.reset()

    # ------------------------------------------------------------------ queries

    def _canonical(self, position: int) -> int:
        """Canonical index used in ids/timestamps: the position in a run, the corpus index in a baseline."""
        return self.order[position] if self.baseline_index is not None else position

    def query_at(self, position: int) -> BenchQuery:
        corpus_idx = self.order[position]
        canon = self._canonical(position)
        stage = official.stage_of(canon)
        scan = dict(self._rows[corpus_idx])
        scan["scan_idx"] = canon
        ts = timestamp_utc(canon)
        block = render_instance(
            scan,
            scan_num=position + 1,
            stated_horizon=self.stated_horizon,
            timestamp=ts,
            band_start=0.0,
            band_end=BAND,
        )
        show = position == 0 or self.repeat_instructions
        prompt = compose_prompt(self._brief, self.text.instructions if show else None, block)
        instance_id = f"{official.TASK_NAME}:{stage.variant_id}:corpus:{official.CORPUS_ID}:scan:{canon + 1}"
        metadata = {
            "instance_index": canon,
            "active_instance_index": position,
            "instance_id": instance_id,
            "step": 0,
            "scan_id": scan["scan_id"],
            "timestamp_utc": ts,
        }
        peaks = [{k: v for k, v in p.items() if k != "source"} for p in scan["detected_peaks"]]
        hidden = {
            "corpus_index": corpus_idx,
            "ground_truth_channels": list(self._gt),
            "peak_sources": [p["source"] for p in scan["detected_peaks"]],
            "scan_ground_truth": copy.deepcopy(scan["ground_truth"]),
        }
        return BenchQuery(
            prompt=prompt,
            instance_id=instance_id,
            instance_index=canon,
            metadata=metadata,
            position=position,
            canonical_index=canon,
            stage_idx=stage.stage_idx,
            variant_id=stage.variant_id,
            scan_num=position + 1,
            stated_horizon=self.stated_horizon,
            peaks=peaks,
            instance_block=block,
            hidden=hidden,
        )

    # ------------------------------------------------------------------ episode

    def reset(self) -> BenchQuery:
        self.position = 0
        self.outcomes: list[dict[str, Any]] = []
        self.scan_results: list[dict[str, Any]] = []
        self.scores: list[float] = []
        self.occupied: list[float] = []
        self.warnings: list[str] = []
        self.current_query = self.query_at(0)
        return self.current_query

    @property
    def done(self) -> bool:
        return self.position >= len(self.order)

    def step(self, action: Any, *, timed_out: bool = False):
        """Score ``action`` on the current scan → ``(observation, reward, done, info)``. Never raises on a
        bad action: it is scored as an empty report and the warning is in ``info["warning"]``."""
        if self.done:
            raise RuntimeError("episode finished: call reset() (or build a new env) before stepping again")
        q = self.current_query
        if timed_out:
            report, warning = ScanReport(transmitters=[]), "latency_timeout"
        else:
            report, warning = coerce_scan_report(action)
        regions = report_regions(report)
        result = available_iou(self._gt, regions, BAND)
        score = 0.0 if timed_out else result.score
        reward = round(score, 4)
        occ = self._occ.score([c for c, _ in regions], [bw for _, bw in regions]) if regions else 0.0
        outcome = {
            "instance_id": q.instance_id,
            "instance_index": q.instance_index,
            "reward": reward,
            "success": score >= 0.5,
            "metadata": result.outcome_metadata(),
        }
        scoring = result.scoring()
        if timed_out:
            scoring["score"] = 0.0
        self.outcomes.append(outcome)
        self.scan_results.append(
            {"scan_idx": q.canonical_index, "scoring": scoring, "report": report.model_dump()}
        )
        self.scores.append(score)
        self.occupied.append(occ)
        if warning:
            self.warnings.append(warning)
        self.position += 1
        last = self.done
        if timed_out:
            content = TIMEOUT_FEEDBACK
        else:
            content = render_feedback(q.scan_num, last=last, probe_mode=self.probe_mode)
        self.current_query = None if last else self.query_at(self.position)
        obs = BenchObservation(content=content, instance_complete=True, next_query=self.current_query)
        info = {
            "outcome": outcome,
            "scoring": scoring,
            "occupied_iou": occ,
            "warning": warning,
            "position": q.position,
            "canonical_index": q.canonical_index,
            "corpus_index": q.hidden["corpus_index"],
            "stage_idx": q.stage_idx,
        }
        return obs, reward, last, info

    def evaluate(self) -> dict[str, Any]:
        """CLBench task metrics of the (finished or partial) run, plus ``scan_results``."""
        m = task_metrics(self.scores)
        m["scan_results"] = list(self.scan_results)
        return m


# ------------------------------------------------------------------------------ bench90 evaluation

Policy = Callable[[BenchQuery], Any]
PolicyFactory = Callable[[], Policy]


def _reset(policy: Any) -> None:
    reset = getattr(policy, "reset", None)
    if callable(reset):
        reset()


def _feed(policy: Any, observation: BenchObservation) -> None:
    observe = getattr(policy, "observe", None)
    if callable(observe):
        observe(observation)


def run_episode(policy: Policy, env: SpectrumBenchEnv) -> dict[str, Any]:
    """Play one env to the end with ``policy``; returns per-position records and the task metrics."""
    query = env.reset()
    _reset(policy)
    records = []
    while query is not None:
        action = policy(query)
        obs, reward, _done, info = env.step(action)
        _feed(policy, obs)
        records.append(
            {
                "position": info["position"],
                "corpus_index": info["corpus_index"],
                "stage_idx": info["stage_idx"],
                "avail": reward,
                "occ": info["occupied_iou"],
                "warning": info["warning"],
            }
        )
        query = obs.next_query
    return {"records": records, "metrics": env.evaluate()}


def _stage_means(records: Sequence[Mapping[str, Any]], key: str, by: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for stage in official.STAGES:
        vals = [r[key] for r in records if official.stage_of(r[by]).stage_idx == stage.stage_idx]
        out[stage.variant_id] = sum(vals) / len(vals) if vals else 0.0
    return out


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def evaluate_bench90(
    policy_factory: PolicyFactory,
    *,
    runs: Iterable[int] = (0,),
    baseline: bool = True,
    text: SpectrumText | str | None = None,
    repeat_instructions: bool = True,
) -> dict[str, Any]:
    """Run a policy on the official 90-scan schedule (each listed permuted run) and, optionally, on the
    stateless-baseline protocol (a fresh policy per canonical scan). Reports available-IoU (the official
    score), occupied-IoU (B.13 raster on 168 MHz against the 13 GT channels) and gain over the baseline.
    """
    text = resolve_text(text)
    rows = official.build_corpus()
    out: dict[str, Any] = {"runs": []}
    for r in runs:
        env = SpectrumBenchEnv(r, text=text, repeat_instructions=repeat_instructions, rows=rows)
        ep = run_episode(policy_factory(), env)
        recs = ep["records"]
        m = ep["metrics"]
        out["runs"].append(
            {
                "run_index": r,
                "mean_available_iou": _mean([x["avail"] for x in recs]),
                "mean_occupied_iou": _mean([x["occ"] for x in recs]),
                "first_half_score": m["first_half_score"],
                "second_half_score": m["second_half_score"],
                "learning_delta": m["learning_delta"],
                "available_by_stage": _stage_means(recs, "avail", "position"),
                "occupied_by_stage": _stage_means(recs, "occ", "position"),
                "rewards": [x["avail"] for x in recs],
                "occupied": [x["occ"] for x in recs],
                "warnings": sum(1 for x in recs if x["warning"]),
            }
        )
    if baseline:
        b_recs = []
        for i in range(official.TOTAL_SCANS):
            env = SpectrumBenchEnv(
                text=text, repeat_instructions=repeat_instructions, rows=rows, baseline_index=i
            )
            b_recs.extend(run_episode(policy_factory(), env)["records"])
        base_rewards = [x["avail"] for x in b_recs]
        out["baseline"] = {
            "mean_available_iou": _mean(base_rewards),
            "mean_occupied_iou": _mean([x["occ"] for x in b_recs]),
            "available_by_stage": _stage_means(b_recs, "avail", "corpus_index"),
            "occupied_by_stage": _stage_means(b_recs, "occ", "corpus_index"),
            "rewards": base_rewards,
        }
        for run in out["runs"]:
            run.update(normalized_gain(run["rewards"], base_rewards))
    if out["runs"]:
        out["mean_available_iou"] = _mean([x["mean_available_iou"] for x in out["runs"]])
        out["mean_occupied_iou"] = _mean([x["mean_occupied_iou"] for x in out["runs"]])
    return out


# ------------------------------------------------------------------------ RFT policies on the bench


class _BenchAsRFTObservation:
    """A ``BenchQuery`` seen through the RFT observation interface (``peaks``, ``echo``, ``hidden``)."""

    def __init__(self, query: BenchQuery, echo: list[float] | None):
        self.text = query.prompt
        self.scan_num = query.scan_num
        self.num_scans = query.stated_horizon
        self.tool_results: list[dict[str, Any]] = []
        self.done = False
        self.echo = echo
        self.peaks = [dict(p) for p in query.peaks]
        centres = [c for c, _ in query.hidden["ground_truth_channels"]]
        sources = list(query.hidden["peak_sources"])
        # The official corpus does not record which channel emitted a peak; the channels' spans never
        # touch (A.1), so a channel peak's true centre is the nearest ground-truth centre.
        self.hidden = {
            "channel_centers": centres,
            "peak_sources": sources,
            "peak_true_centers": [
                min(centres, key=lambda c, f=p["freq_mhz"]: abs(c - f)) if s == "channel" else None
                for p, s in zip(self.peaks, sources, strict=True)
            ],
        }


class RFTPolicyOnBench:
    """The bridge from the training variant to the official benchmark: an RFT-style policy
    (``obs -> centre list``) answers bench queries; its centres become transmitters of fixed width
    ``bandwidth`` (8 MHz, as in training; the 16-region cap and input rules of ``submit_report`` apply).
    With ``running_list`` the previous report is offered as ``obs.echo`` (the scaffold arms' memory)."""

    def __init__(self, policy: Any, *, bandwidth: float = 8.0, running_list: bool = True):
        self.policy = policy
        self.bandwidth = bandwidth
        self.running_list = running_list
        self.reset()

    def reset(self) -> None:
        _reset(self.policy)
        self.last: list[float] = []

    def __call__(self, query: BenchQuery) -> dict[str, Any]:
        from rftlab.envs.spectrum.rft import normalize_center_freqs

        echo = [round(x, 1) for x in self.last] if (self.running_list and self.last) else None
        centres, _note = normalize_center_freqs(self.policy(_BenchAsRFTObservation(query, echo)), band=BAND)
        self.last = centres
        return {
            "transmitters": [
                {
                    "center_freq": c,
                    "bandwidth": self.bandwidth,
                    "currently_active": True,
                    "estimated_power": -30.0,
                }
                for c in centres
            ]
        }
