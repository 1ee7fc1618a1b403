"""BSM-official as an env: queries, the ``ScanReport`` action, available-IoU scoring, feedback, task
metrics, the stateless baseline, and the bench90 evaluation of any policy (docs/spectrum.md §A.5–A.9, A.12, B.13).

    env = SpectrumBenchEnv(run_index=0)
    obs = env.reset()                      # BenchObservation: obs.next_query is the scan to answer
    while True:
        result = env.step(policy.act(obs))  # StepResult(observation, reward, done, info: BenchStepInfo)
        if result.done:
            break
        obs = result.observation
    env.evaluate()            # CLBench task metrics

(``rftlab.rollout.episode(env, policy)`` is that loop.) The observation is always a ``BenchObservation``:
after ``reset`` it carries no feedback (``content is None``) and the first query; after a step it carries
the feedback on the scan just scored and the next query (``None`` when the run is over). The bench90
evaluation lives in ``rftlab.rollout.spectrum.evaluation``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
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
from rftlab.rewards.spectrum import OccupiedBitset, available_iou, task_metrics
from rftlab.types import StepResult

BAND = official.BAND_WIDTH


class Transmitter(BaseModel):
    """One transmitter the agent believes occupies spectrum over the long run (its interval is
    unavailable)."""

    center_freq: float = Field(
        description="Centre frequency of the occupied region in MHz.", allow_inf_nan=False
    )
    bandwidth: float = Field(description="Width of the occupied region in MHz.", allow_inf_nan=False)
    currently_active: bool = Field(description="Whether the transmitter shows up in the current scan.")
    estimated_power: float = Field(description="Estimated power in dBm.", allow_inf_nan=False)


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


@dataclass(frozen=True)
class BenchObservation:
    """What a bench policy sees: ``content`` = feedback on the scan just scored (``None`` right after
    ``reset``), ``instance_complete`` (every BSM scan is one instance), ``next_query`` = the scan to answer
    now (``None`` when the run is over)."""

    content: str | None
    instance_complete: bool
    next_query: BenchQuery | None


@dataclass(frozen=True, slots=True)
class BenchStepInfo:
    """The typed per-step record of ``SpectrumBenchEnv.step``.

    - ``outcome``: CLBench's ``instance_outcomes`` entry (instance id/index, rounded reward, success,
      unsafe/missed bandwidth), as the upstream JSON object;
    - ``scoring``: CLBench's ``scan_results[j].scoring`` object;
    - ``occupied_iou``: occupied-IoU of the report on the B.13 raster (tracked, not the reward);
    - ``warning``: why the action was scored as an empty report (``None`` when it was a valid report);
    - ``position`` / ``canonical_index`` / ``corpus_index`` / ``stage_idx``: where the scan sits in the run,
      in the canonical schedule, in the corpus and in the 3-stage schedule.
    """

    outcome: dict[str, Any]
    scoring: dict[str, Any]
    occupied_iou: float
    warning: str | None
    position: int
    canonical_index: int
    corpus_index: int
    stage_idx: int


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
        self._occ = OccupiedBitset(self._gt, BAND)
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

    def reset(self, key: int | None = None, /) -> BenchObservation:
        """Start the run again. ``key`` (optional) selects another permuted run (``run_index``), or, for a
        stateless-baseline env, another canonical scan (``baseline_index``)."""
        if key is not None:
            if self.baseline_index is not None:
                official.stage_of(key)
                self.baseline_index = key
                self.order = [key]
            else:
                self.order = official.run_order(key)
                self.run_index = key
        self.position = 0
        self.outcomes: list[dict[str, Any]] = []
        self.scan_results: list[dict[str, Any]] = []
        self.scores: list[float] = []
        self.occupied: list[float] = []
        self.warnings: list[str] = []
        self.current_query = self.query_at(0)
        return BenchObservation(content=None, instance_complete=False, next_query=self.current_query)

    @property
    def done(self) -> bool:
        return self.position >= len(self.order)

    def step(self, action: Any, *, timed_out: bool = False) -> StepResult[BenchObservation, BenchStepInfo]:
        """Score ``action`` on the current scan → ``StepResult(observation, reward, done, info)``. Never
        raises on a bad action: it is scored as an empty report and the reason is in ``info.warning``."""
        if self.done:
            raise RuntimeError("episode finished: call reset() (or build a new env) before stepping again")
        q = self.current_query
        if q is None:  # reset() and every step that leaves scans to go set the next query
            raise RuntimeError("no current query: call reset() before stepping")
        if timed_out:
            report, warning = ScanReport(transmitters=[]), "latency_timeout"
        else:
            report, warning = coerce_scan_report(action)
        regions = report_regions(report)
        result = available_iou(self._gt, regions, BAND)
        score = 0.0 if timed_out else result.score
        reward = round(score, 4)
        occ = self._occ.score_regions(regions) if regions else 0.0
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
        info = BenchStepInfo(
            outcome=outcome,
            scoring=scoring,
            occupied_iou=occ,
            warning=warning,
            position=q.position,
            canonical_index=q.canonical_index,
            corpus_index=q.hidden["corpus_index"],
            stage_idx=q.stage_idx,
        )
        return StepResult(obs, reward, last, info)

    def metrics(self) -> dict[str, Any]:
        """CLBench task metrics of the (finished or partial) run (``mean_score``, halves, ...)."""
        return task_metrics(self.scores)

    def evaluate(self) -> dict[str, Any]:
        """CLBench task metrics of the (finished or partial) run, plus ``scan_results``."""
        m = self.metrics()
        m["scan_results"] = list(self.scan_results)
        return m
