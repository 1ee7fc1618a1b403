"""GS1 with the training run as the unit (``docs/gs1.md`` §12): several seeds per arm, paired by seed.

The pre-registered rule bounds the item sampling of two fixed checkpoints; run-to-run variation of RL
fine-tuning is not in it. The run-level plan (``data/specs/gs1_runlevel.json``, written after the review
and after the seed-0 results, so **exploratory**) runs every arm once per seed, both arms of a seed sharing
it, and decides with the run as the unit:

* ``run_level_verdict``: per-seed differences of the runs' evaluation accuracy
  (``rftlab.analysis.runlevel.paired_by_seed``: mean, percentile bootstrap interval over seeds, exact
  two-sided sign-flip p against 0 with its floor 2/2^n), and the noninferiority decision: the one-sided
  exact sign-flip test of "mean difference = −margin" on the differences shifted by the margin (floor
  1/2^n; valid when the shifted differences are symmetric about 0 under that null);
* ``sign_flip_power`` / ``run_level_power``: what the n seeds can detect, by Monte Carlo on common random
  numbers with the exact test inside (a normal model of the per-seed difference with a given
  run-to-run standard deviation);
* ``discordant_sign_test``: the exact two-sided sign test of one contrast's discordant items (gained vs
  lost) — unit: the item of two fixed checkpoints.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rftlab.analysis.gs1.results import Record
from rftlab.analysis.io import AnalysisInputError, parse_json_bytes, validation_message
from rftlab.analysis.runlevel import MAX_EXACT_PAIRS, paired_by_seed, runs_needed_for_exact_level

POWER_REPS = 20_000
POWER_SEED = 0


class RunLevelPlan(BaseModel):
    """The run-level plan file: the seeds every arm runs and the run-level rule."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str = Field(min_length=1)
    status: str = Field(pattern=r"^(exploratory|registered)$")
    written: str = Field(min_length=1)
    revision_of: dict[str, str]
    seeds: tuple[int, ...] = Field(min_length=2, max_length=MAX_EXACT_PAIRS)
    statistic: str = "per-run greedy test accuracy"
    treatment: str = "gs1_kernel"
    control: str = "grpo_gs8"
    margin: float = Field(gt=0, lt=1)
    alpha: float = Field(gt=0, lt=0.5)
    bootstrap_reps: int = Field(default=10_000, ge=100, le=1_000_000)
    bootstrap_seed: int = Field(default=0, ge=0)
    bootstrap_level: float = Field(default=0.95, gt=0, lt=1)
    planning_run_sd: float = Field(gt=0, lt=1)
    note: str = ""

    def model_post_init(self, _context) -> None:
        if any(s < 0 for s in self.seeds) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct non-negative integers, got {list(self.seeds)}")


def parse_run_plan(raw: bytes, path: str | Path) -> RunLevelPlan:
    """The plan in ``raw`` (the bytes of ``path``); any refusal is one line naming the file and field."""
    data = parse_json_bytes(raw, Path(path), "run-level plan")
    if not isinstance(data, dict):
        raise AnalysisInputError(f"run-level plan {path}: expected a JSON object, got {type(data).__name__}")
    try:
        return RunLevelPlan.model_validate(data)
    except ValidationError as exc:
        raise AnalysisInputError(f"{path}: {validation_message(exc, limit=1)}") from None
    except ValueError as exc:  # model_post_init
        raise AnalysisInputError(f"{path}: {' '.join(str(exc).split())}") from None


def discordant_sign_test(gained: int, lost: int) -> float:
    """Exact two-sided sign test of ``gained`` vs ``lost`` discordant items (binomial, p = 1/2): twice
    the smaller tail, capped at 1 (1 when there is no discordant item)."""
    if gained < 0 or lost < 0:
        raise ValueError("gained and lost must be non-negative counts")
    n = gained + lost
    if n == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(gained, n, 0.5, alternative="two-sided").pvalue)


def _sign_patterns(n: int) -> np.ndarray:
    return np.array(list(itertools.product((1.0, -1.0), repeat=n)))


def sign_flip_one_sided_p(differences: Sequence[float], shift: float = 0.0) -> float:
    """One-sided exact sign-flip p of "the mean of ``differences`` is at most −``shift``": the share of the
    ``2**n`` sign patterns of ``d + shift`` whose sum is at least the observed one."""
    d = np.asarray(differences, dtype=float) + float(shift)
    if d.size == 0 or d.size > MAX_EXACT_PAIRS or not np.all(np.isfinite(d)):
        raise ValueError(f"the exact sign-flip test needs 1 to {MAX_EXACT_PAIRS} finite differences")
    observed = d.sum()
    totals = _sign_patterns(d.size) @ d
    return float(np.mean(totals >= observed - 1e-12 * max(1.0, float(np.abs(d).sum()))))


class RunLevelVerdict(Record):
    """Treatment − control with the run as the unit (``run_level_verdict``)."""

    treatment: str
    control: str
    seeds: tuple[int, ...]
    treatment_scores: tuple[float, ...]
    control_scores: tuple[float, ...]
    differences: tuple[float, ...]
    mean: float
    sd: float | None
    ci: tuple[float, float]
    level: float
    p_two_sided: float
    p_floor_two_sided: float
    better: int
    worse: int
    ties: int
    margin: float
    alpha: float
    p_noninferiority: float
    p_floor_one_sided: float
    decision: str
    status: str
    unit: str = "seed-matched pair of runs"

    def sentence(self) -> str:
        """Report text: the run-level contrast and its decision."""
        return (
            f"{self.treatment} − {self.control} {self.mean:+.4f} over {len(self.seeds)} seed-matched pairs "
            f"of runs ({self.better} better, {self.worse} worse, {self.ties} tied; between-seed SD "
            f"{self.sd:.4f}), {self.level:.0%} bootstrap interval [{self.ci[0]:+.4f}, {self.ci[1]:+.4f}]; "
            f"exact sign-flip p = {self.p_two_sided:.3g} against 0 (two-sided; the smallest attainable with "
            f"{len(self.seeds)} pairs is {self.p_floor_two_sided:.3g})"
        )

    def decision_sentence(self) -> str:
        return (
            f"noninferiority at margin {self.margin:g} with the run as the unit: one-sided exact sign-flip "
            f"p = {self.p_noninferiority:.3g} (floor {self.p_floor_one_sided:.3g}) against α = {self.alpha:g}: "
            f"**{self.decision}** ({self.status})"
        )


def run_level_verdict(
    treatment: Mapping[int, float],
    control: Mapping[int, float],
    plan: RunLevelPlan,
    treatment_name: str | None = None,
    control_name: str | None = None,
) -> RunLevelVerdict:
    """The plan's run-level contrast of two arms' per-seed scores (seed → accuracy each)."""
    pair = paired_by_seed(
        treatment, control, reps=plan.bootstrap_reps, seed=plan.bootstrap_seed, level=plan.bootstrap_level
    )
    d = np.asarray(pair.differences)
    p_ni = sign_flip_one_sided_p([float(v) for v in pair.differences], plan.margin)
    return RunLevelVerdict(
        treatment=treatment_name or plan.treatment,
        control=control_name or plan.control,
        seeds=pair.seeds,
        treatment_scores=tuple(float(treatment[s]) for s in pair.seeds),
        control_scores=tuple(float(control[s]) for s in pair.seeds),
        differences=pair.differences,
        mean=pair.mean,
        sd=float(d.std(ddof=1)) if d.size > 1 else None,
        ci=pair.ci,
        level=pair.level,
        p_two_sided=pair.p_value,
        p_floor_two_sided=pair.smallest_p,
        better=pair.better,
        worse=pair.worse,
        ties=pair.ties,
        margin=plan.margin,
        alpha=plan.alpha,
        p_noninferiority=p_ni,
        p_floor_one_sided=1.0 / 2**d.size,
        decision="noninferior" if p_ni <= plan.alpha else "inconclusive",
        status=f"{plan.status}: the run-level plan was written after the review and the seed-0 results",
    )


def sign_flip_power(
    n: int,
    mean: float,
    sd: float,
    alpha: float,
    shift: float = 0.0,
    reps: int = POWER_REPS,
    seed: int = POWER_SEED,
) -> float:
    """P(the one-sided exact sign-flip test of "mean ≤ −shift" rejects at ``alpha``) when the ``n``
    per-seed differences are independent N(``mean``, ``sd``²); Monte Carlo from ``default_rng(seed)``
    (the same standard normals for every ``mean``: common random numbers)."""
    if not 1 <= n <= 12:
        raise ValueError(f"n={n} seed pairs: the power simulation enumerates 2**n patterns, n from 1 to 12")
    if sd <= 0 or not 0 < alpha < 1:
        raise ValueError("sd must be positive and alpha in (0, 1)")
    z = np.random.default_rng(seed).standard_normal((reps, n))
    d = mean + shift + sd * z
    totals = d @ _sign_patterns(n).T  # reps x 2**n
    observed = d.sum(axis=1, keepdims=True)
    p = np.mean(totals >= observed - 1e-12, axis=1)
    return float(np.mean(p <= alpha))


class RunLevelPower(Record):
    """What ``n`` seed pairs can detect at a run-to-run SD of the per-seed difference."""

    n: int
    sd: float
    alpha: float
    margin: float
    power_noninferior_at_equality: float
    detectable_difference: float | None  # one-sided test against 0, at ``power``
    power: float
    runs_needed_two_sided: int  # fewest pairs whose two-sided exact test can reach p < alpha
    reps: int
    seed: int


def detectable_difference(
    n: int, sd: float, alpha: float, power: float = 0.8, reps: int = POWER_REPS, seed: int = POWER_SEED
) -> float | None:
    """The smallest true mean difference at which the one-sided exact sign-flip test against 0 rejects
    with probability ≥ ``power`` (bisection on common random numbers); ``None`` when no difference can
    (the test's floor 1/2^n exceeds ``alpha``)."""
    if 1.0 / 2**n > alpha:
        return None
    low, high = 0.0, 10.0 * sd
    if sign_flip_power(n, high, sd, alpha, reps=reps, seed=seed) < power:
        return None
    for _ in range(40):
        mid = 0.5 * (low + high)
        if sign_flip_power(n, mid, sd, alpha, reps=reps, seed=seed) >= power:
            high = mid
        else:
            low = mid
    return high


def run_level_power(plan: RunLevelPlan, sd: float, power: float = 0.8, n: int | None = None) -> RunLevelPower:
    """The plan's rule at ``n`` seeds (default: the plan's): its power at equality, the difference the
    one-sided test against 0 detects with ``power``, and the seeds the two-sided test needs."""
    n = len(plan.seeds) if n is None else int(n)
    if not math.isfinite(sd) or sd <= 0:
        raise ValueError(f"sd={sd} must be a positive number (a run-to-run standard deviation)")
    return RunLevelPower(
        n=n,
        sd=float(sd),
        alpha=plan.alpha,
        margin=plan.margin,
        power_noninferior_at_equality=sign_flip_power(n, 0.0, sd, plan.alpha, shift=plan.margin),
        detectable_difference=detectable_difference(n, sd, plan.alpha, power),
        power=power,
        runs_needed_two_sided=runs_needed_for_exact_level(plan.alpha),
        reps=POWER_REPS,
        seed=POWER_SEED,
    )


class WithinSeed(Record):
    """The pre-registered item-level rule on one seed's two checkpoints."""

    seed: int
    decision: str
    lower: float | None
    mean_difference: float


class RunLevelBrief(Record):
    """What the report's summary needs from the run-level result (``rftlab.studies.gs1.RunLevelResult``)."""

    treatment_vs_control: RunLevelVerdict
    control_vs_base: RunLevelVerdict
    base_vs_control: RunLevelVerdict
    power_planning: RunLevelPower
    power_observed: RunLevelPower | None
    within_seed: tuple[WithinSeed, ...]
    base_identical_across_seeds: bool


def _detects(p: RunLevelPower) -> str:
    return "no difference" if p.detectable_difference is None else f"{p.detectable_difference:.4f}"


def run_level_bullets(brief: RunLevelBrief, tag: str = "") -> list[str]:
    """The summary's run-level bullets: the decision with the run as the unit (exploratory), the
    within-seed item-level checks, and the power at the planning and the observed run-to-run SD."""
    main, within = brief.treatment_vs_control, brief.within_seed
    calls = [w.decision for w in within]
    lowers = [w.lower for w in within if w.lower is not None]
    n = len(main.seeds)
    first = (
        f"**Decision with the training run as the unit (added after review: exploratory){tag}:** "
        f"{main.sentence()}; {main.decision_sentence()}. Within each seed the pre-registered item-level "
        f"rule says {', '.join(f'{c} at {calls.count(c)} of {n}' for c in sorted(set(calls)))} seeds "
        f"(lower bounds {min(lowers):+.4f} to {max(lowers):+.4f} against {-main.margin:+.2f}). The same "
        f"run-level rule on the untrained base as if it were the treatment says "
        f"**{brief.base_vs_control.decision}** (one-sided p = {brief.base_vs_control.p_noninferiority:.3g})."
    )
    pp, po = brief.power_planning, brief.power_observed
    second = (
        f"**Run-level power ({n} seed pairs, one-sided α = {pp.alpha:g}):** at a per-seed SD of the "
        f"difference of {pp.sd:g} (planning: one point) the run-level rule says noninferior with probability "
        f"{pp.power_noninferior_at_equality:.3f} when the arms are equal, and the one-sided exact test against 0 "
        f"detects {_detects(pp)} with {pp.power:.0%} power"
    )
    if po is not None:
        second += (
            f"; at the observed SD {po.sd:.4f}: {po.power_noninferior_at_equality:.3f} and {_detects(po)}"
        )
    second += (
        f"; a two-sided exact test can reach p < {pp.alpha:g} only from {pp.runs_needed_two_sided} seed pairs "
        f"(with {n} its floor is {main.p_floor_two_sided:.4g}). Normal model of the per-seed difference, "
        f"Monte Carlo {pp.reps} replications."
    )
    return [first, second]


def control_effect_bullet(at_seed0_gained: int, at_seed0_lost: int, brief: RunLevelBrief | None) -> str:
    """Is the active control's gain over the untrained base real? The exact sign test on seed 0's
    discordant items (unit: the item) and, with seeds, the run-level contrast (unit: the run)."""
    p = discordant_sign_test(at_seed0_gained, at_seed0_lost)
    text = (
        f"**Is GRPO's effect over the base real?** At seed 0, grpo_gs8 − base: {at_seed0_gained} items "
        f"gained vs {at_seed0_lost} lost, exact two-sided sign test p = {p:.3g} (unit: the item of two "
        "fixed checkpoints)"
    )
    if brief is not None:
        cb = brief.control_vs_base
        text += f"; with the run as the unit, {cb.sentence()}"
        shown = cb.ci[0] > 0
    else:
        shown = at_seed0_gained > at_seed0_lost and p < 0.05
    return text + (
        ". **Shown**: GRPO beats the base."
        if shown
        else ". **Not shown**: GRPO does not beat the untrained base here, so at this margin a noninferiority "
        "verdict cannot tell GS1 from no training."
    )
