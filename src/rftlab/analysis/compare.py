"""Runs side by side: ``rftlab runs compare`` and the notebooks call ``compare_runs`` (docs/statistics.md §7).

Given runs of the run store (two arms, or one spec on two backends), ``compare_runs`` returns a
``RunComparison``:

- **per-epoch metrics**: for every metric of ``metrics.jsonl``, each run's value per epoch (the mean of the
  epoch's rows that hold the metric; one row per epoch in the spectrum runs) and its **final** value (its
  last epoch's);
- **final evaluation**: each run's mean of every numeric field of ``eval.jsonl`` (when it has one), and for
  every pair evaluated on the same items (``item_id``) the paired difference (``EvalContrast``);
- **paired contrasts** of one per-rollout metric (default ``reward``) for every pair of runs whose rollouts
  cover the same epochs with the same row ids and the same band seeds (the same epoch salts): each row's
  value is its candidates' mean, ``d = left − right`` per (row, epoch); the mean difference gets a
  cluster-robust (CR1) standard error with the row as the cluster and ``t`` on ``G − 1`` degrees of freedom,
  the slope per epoch is ``rftlab.analysis.contrasts.contrast_slope``, and the sign test
  (``rftlab.analysis.paired.sign_test``) counts rows by their mean difference over epochs. A pair whose rows
  do not match is **not paired**, with the reason (different rows, different salts, different epochs, no
  rollouts), and gets no contrast: two unpaired runs' difference would carry their bands' luck;
- **same spec**: runs of one spec hash grouped, flagged ``cross_backend`` when they come from different
  backends (local simulation against Tinker or Fireworks: the comparison across backends).

``comparison_figure(result)`` draws the per-epoch metric of every run and the paired contrasts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from rftlab.analysis.contrasts import contrast_slope, paired_differences
from rftlab.analysis.paired import sign_test
from rftlab.runs.errors import CorruptRunError
from rftlab.runs.store import Run, RunStore, load_run

__all__ = [
    "ComparedRun",
    "EvalContrast",
    "EvalField",
    "MetricSeries",
    "PairedContrast",
    "RunComparison",
    "SpecGroup",
    "cluster_robust_mean",
    "compare_runs",
    "pairing_problem",
    "comparison_figure",
    "contrast_table",
    "resolve_runs",
]

Records = list[dict[str, Any]]


@dataclass(frozen=True)
class ComparedRun:
    label: str  # the name the tables use: the arm, with @backend or the run id where that is ambiguous
    experiment: str
    arm: str
    run_id: str
    backend: str
    spec_sha256: str
    status: str
    path: str


@dataclass(frozen=True)
class MetricSeries:
    """One metric of ``metrics.jsonl`` for every run: ``values[i][k]`` is run ``i``'s value in ``epochs[k]``
    (``None`` where it has none); ``final[i]`` is run ``i``'s value in its last epoch with the metric."""

    metric: str
    epochs: tuple[int, ...]
    values: tuple[tuple[float | None, ...], ...]
    final: tuple[float | None, ...]


@dataclass(frozen=True)
class EvalField:
    """A numeric field of ``eval.jsonl``: each run's mean over its items (``None`` without one)."""

    field: str
    means: tuple[float | None, ...]
    items: tuple[int, ...]


@dataclass(frozen=True)
class PairedContrast:
    """``left − right`` of one per-rollout metric over matching rows, or why the runs are not paired."""

    left: str
    right: str
    metric: str
    paired: bool
    reason: str = ""  # empty when paired
    n_rows: int = 0  # clusters
    n_epochs: int = 0
    n_obs: int = 0  # (row, epoch) pairs
    level: float = 0.95
    mean_difference: float | None = None
    mean_se: float | None = None
    mean_ci: tuple[float, float] | None = None
    mean_p: float | None = None
    slope: float | None = None  # per epoch; None with one epoch
    slope_se: float | None = None
    slope_ci: tuple[float, float] | None = None
    slope_p: float | None = None
    epoch_differences: tuple[float, ...] = ()
    epoch_half_widths: tuple[float, ...] = ()
    sign_positive: int = 0
    sign_negative: int = 0
    sign_ties: int = 0
    sign_p: float | None = None


@dataclass(frozen=True)
class EvalContrast:
    """``left − right`` of one ``eval.jsonl`` field over the same items (by ``item_id``): the mean paired
    difference with its t interval on ``n − 1`` degrees of freedom (``scipy.stats.ttest_rel``) and the sign
    test over items; or why the evaluations are not paired. Descriptive: a pre-registered decision on these
    items is ``rftlab stats noninferiority``'s (docs/statistics.md §3)."""

    left: str
    right: str
    field: str
    paired: bool
    reason: str = ""
    n_items: int = 0
    level: float = 0.95
    mean_difference: float | None = None
    se: float | None = None
    ci: tuple[float, float] | None = None
    p: float | None = None
    sign_positive: int = 0
    sign_negative: int = 0
    sign_ties: int = 0
    sign_p: float | None = None


@dataclass(frozen=True)
class SpecGroup:
    spec_sha256: str
    labels: tuple[str, ...]
    backends: tuple[str, ...]
    cross_backend: bool


@dataclass(frozen=True)
class RunComparison:
    runs: tuple[ComparedRun, ...]
    contrast_metric: str
    metrics: tuple[MetricSeries, ...]
    evaluation: tuple[EvalField, ...]
    contrasts: tuple[PairedContrast, ...]
    same_spec: tuple[SpecGroup, ...] = field(default=())
    eval_contrasts: tuple[EvalContrast, ...] = field(default=())

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.runs)

    @property
    def cross_backend(self) -> bool:
        """Whether some runs share a spec hash but come from different backends."""
        return any(g.cross_backend for g in self.same_spec)

    def metric(self, name: str) -> MetricSeries:
        for series in self.metrics:
            if series.metric == name:
                return series
        known = ", ".join(s.metric for s in self.metrics) or "none"
        raise ValueError(f"no metric {name!r} in these runs' metrics.jsonl (they have: {known})")

    def contrast(self, left: str, right: str) -> PairedContrast:
        for c in self.contrasts:
            if (c.left, c.right) == (left, right):
                return c
        raise ValueError(f"no contrast {left} − {right}; the runs are {', '.join(self.labels)}")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cross_backend"] = self.cross_backend
        return out


# -- finding the runs --------------------------------------------------------------------------------
def _newest(runs: Sequence[Run]) -> Run:
    return max(runs, key=lambda r: (r.record.status == "finished", r.record.created_at, r.path.name))


def _resolve_one(name: str, runs: Sequence[Run]) -> Run:
    path = Path(name)
    if (path / "run.json").is_file():
        return load_run(path)
    by_id = [r for r in runs if r.record.run_id == name]
    if by_id:
        if len(by_id) > 1:
            where = ", ".join(f"{r.record.experiment}/{r.record.arm}" for r in by_id)
            raise ValueError(f"run id {name} is in several arms ({where}); give its folder")
        return by_id[0]
    arm_part, _, backend = name.partition("@")
    experiment, _, arm = arm_part.rpartition("/")
    found = [
        r
        for r in runs
        if r.record.arm == arm
        and (not experiment or r.record.experiment == experiment)
        and (not backend or r.record.backend == backend)
    ]
    if not found:
        raise ValueError(
            f"{name}: no run folder, run id or arm of that name in the store; give a run folder, a run id, "
            "or [EXPERIMENT/]ARM[@BACKEND] (see `rftlab runs list`)"
        )
    experiments = sorted({r.record.experiment for r in found})
    if len(experiments) > 1:
        raise ValueError(
            f"{name}: arm {arm} is in several experiments ({', '.join(experiments)}); "
            f"name one as EXPERIMENT/{arm}"
        )
    return _newest(found)


def resolve_runs(root: str | Path, names: Sequence[str]) -> list[Run]:
    """The runs named by ``names``: each a run folder, a run id, or ``[EXPERIMENT/]ARM[@BACKEND]`` (the
    newest finished run of that arm, on that backend if given). ``ValueError`` names a name that matches
    nothing or more than one arm, and an unreadable store."""
    runs, problems = RunStore(root).scan()
    out = [_resolve_one(name, runs) for name in names]
    if not out and problems:
        raise CorruptRunError(problems)
    return out


def _labels(runs: Sequence[Run]) -> list[str]:
    arms = [r.record.arm for r in runs]
    with_backend = [f"{r.record.arm}@{r.record.backend}" for r in runs]
    labels = []
    for r, arm, wb in zip(runs, arms, with_backend, strict=True):
        if arms.count(arm) == 1:
            labels.append(arm)
        elif with_backend.count(wb) == 1:
            labels.append(wb)
        else:
            labels.append(f"{wb}/{r.record.run_id}")
    if len(set(labels)) != len(labels):
        raise ValueError("the same run is named twice; compare different runs")
    return labels


# -- metrics and evaluation --------------------------------------------------------------------------
def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _epoch_means(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[int, float]]:
    """``{metric: {epoch: mean over the epoch's rows with the metric}}`` (``step`` where rows have no
    ``epoch``)."""
    sums: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        epoch = row.get("epoch", row.get("step"))
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            continue
        for key, value in row.items():
            v = _number(value)
            if key in ("step", "epoch") or v is None:
                continue
            acc = sums.setdefault(key, {}).setdefault(epoch, [0.0, 0])
            acc[0] += v
            acc[1] += 1
    return {m: {e: s / n for e, (s, n) in by.items()} for m, by in sums.items()}


def _metric_series(
    per_run: Sequence[dict[str, dict[int, float]]], names: Sequence[str]
) -> list[MetricSeries]:
    out = []
    for name in names:
        columns = [by.get(name, {}) for by in per_run]
        epochs = tuple(sorted(set().union(*columns)))
        out.append(
            MetricSeries(
                metric=name,
                epochs=epochs,
                values=tuple(tuple(col.get(e) for e in epochs) for col in columns),
                final=tuple(col[max(col)] if col else None for col in columns),
            )
        )
    return out


def _evaluation(items: Sequence[Records]) -> list[EvalField]:
    names: dict[str, None] = {}
    for rows in items:
        for row in rows:
            names.update(dict.fromkeys(k for k, v in row.items() if _number(v) is not None))
    out = []
    for name in names:
        means, counts = [], []
        for rows in items:
            values = [v for v in (_number(r.get(name)) for r in rows) if v is not None]
            means.append(float(np.mean(values)) if values else None)
            counts.append(len(values))
        out.append(EvalField(field=name, means=tuple(means), items=tuple(counts)))
    return out


def _items(rows: Records, name: str, label: str) -> tuple[dict[Any, float], str]:
    """``({item id: value}, "")`` or ``({}, why not)``."""
    values: dict[Any, float] = {}
    for row in rows:
        item = row.get("item_id")
        if item is None or isinstance(item, (dict, list)):
            return {}, f"{label}'s eval.jsonl items have no item_id"
        if item in values:
            return {}, f"{label}'s eval.jsonl has item {item} twice"
        v = _number(row.get(name))
        if v is not None:
            values[item] = v
    return values, ""


def _eval_contrast(x: Records, y: Records, names: tuple[str, str], name: str, level: float) -> EvalContrast:
    (xv, xwhy), (yv, ywhy) = _items(x, name, names[0]), _items(y, name, names[1])
    why = xwhy or ywhy
    if not why and set(xv) != set(yv):
        only = len(set(xv) ^ set(yv))
        why = f"the items differ ({len(xv)} and {len(yv)} items with {name}, {only} in one only)"
    if not why and len(xv) < 2:
        why = f"fewer than 2 items with {name}"
    if why:
        return EvalContrast(names[0], names[1], name, paired=False, reason=why, level=level)
    d = np.array([xv[item] - yv[item] for item in xv])
    n = d.size
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(n))
    half = float(sps.t.ppf(0.5 + level / 2.0, n - 1)) * se
    p = float(2 * sps.t.sf(abs(mean) / se, n - 1)) if se > 0 else (0.0 if mean != 0 else 1.0)
    signs = sign_test(d.tolist())
    return EvalContrast(
        names[0], names[1], name, paired=True, n_items=n, level=level, mean_difference=mean, se=se,
        ci=(mean - half, mean + half), p=p, sign_positive=signs.positive, sign_negative=signs.negative,
        sign_ties=signs.ties, sign_p=signs.p_value,
    )  # fmt: skip


# -- paired contrasts --------------------------------------------------------------------------------
def cluster_robust_mean(
    d: Sequence[float] | np.ndarray, groups: Sequence[Any] | np.ndarray, level: float = 0.95
) -> tuple[float, float, tuple[float, float], float, int]:
    """Mean of ``d`` with the CR1 cluster-robust standard error (``groups`` the clusters):
    ``se² = G/(G−1) · Σ_g (Σ_{i∈g} (d_i − d̄))² / N²``; interval and two-sided ``p`` on ``t(G − 1)``.
    Returns ``(mean, se, ci, p, G)``: the OLS of ``d`` on a constant with ``cov_type="cluster"``, written
    out because statsmodels' least-squares solve leaves rounding noise in the mean (1.0000000000000002 for
    a mean of exactly 1); the test checks the two agree to 1e-12."""
    dv = np.asarray(d, dtype=float)
    labels, codes = np.unique(np.asarray(groups), return_inverse=True)
    g, n = labels.size, dv.size
    if g < 2:
        raise ValueError("need at least 2 rows (clusters) for a cluster-robust standard error")
    mean = float(dv.mean())
    sums = np.zeros(g)
    np.add.at(sums, codes, dv - mean)
    se = math.sqrt(g / (g - 1) * float(np.sum(sums**2)) / n**2)
    half = float(sps.t.ppf(0.5 + level / 2.0, g - 1)) * se
    if se > 0:
        p = float(2 * sps.t.sf(abs(mean) / se, g - 1))
    else:
        p = 0.0 if mean != 0 else 1.0
    return mean, se, (mean - half, mean + half), p, int(g)


def _rollout_epochs(run: Run) -> list[Records]:
    folder = run.path / "rollouts"
    epochs = (
        sorted(
            int(p.stem.split("-", 1)[1])
            for p in folder.glob("epoch-*.jsonl")
            if p.stem.split("-", 1)[1].isdigit()
        )
        if folder.is_dir()
        else []
    )
    if epochs != list(range(len(epochs))):
        raise ValueError(f"{run.path}: rollout epochs {epochs} are not 0..{len(epochs) - 1}")
    return [run.rollouts(e) for e in epochs]


def _rows(records: Records) -> dict[Any, Any]:
    """``{row id: band seed}`` in the order rows first appear (``None`` when a row's records disagree)."""
    bands: dict[Any, Any] = {}
    for r in records:
        row, band = r.get("row_id"), (r.get("band_seed"), r.get("salt"))
        bands[row] = band if bands.get(row, band) == band else None
    return bands


def _first(rows: Mapping[Any, Any]) -> str:
    shown = [str(r) for r in list(rows)[:2]]
    return ", ".join(shown) + (", …" if len(rows) > 2 else "") + f" ({len(rows)} rows)"


def pairing_problem(x: Sequence[Records], y: Sequence[Records], names: tuple[str, str], metric: str) -> str:
    """Why the rollouts of two runs cannot be paired row by row, or ``""`` when they can."""
    for label, epochs in zip(names, (x, y), strict=True):
        if not epochs:
            return f"{label} has no per-rollout records"
        if not any(metric in r for e in epochs for r in e):
            return f"{label}'s rollout records have no field {metric!r}"
        if any("row_id" not in r for e in epochs for r in e):
            return f"{label}'s rollout records have no row ids"
    if len(x) != len(y):
        return f"{names[0]} has {len(x)} epochs of rollouts, {names[1]} {len(y)}"
    for e, (xr, yr) in enumerate(zip(x, y, strict=True)):
        bx, by = _rows(xr), _rows(yr)
        if set(bx) != set(by):
            return (
                f"epoch {e}: the row ids differ ({names[0]}: {_first(bx)}; {names[1]}: {_first(by)}); "
                "different datasets or row prefixes"
            )
        differ = [row for row in bx if bx[row] is None or bx[row] != by[row]]
        if differ:
            return (
                f"epoch {e}: {len(differ)} of {len(bx)} rows saw different bands (band seed or epoch salt "
                "differs)"
            )
    return ""


def _in_order(records: Records, order: Sequence[Any]) -> Records:
    rank = {row: k for k, row in enumerate(order)}
    return sorted(records, key=lambda r: rank[r["row_id"]])


def _contrast(x: Sequence[Records], y: Sequence[Records], names: tuple[str, str], metric: str, level: float):
    why = pairing_problem(x, y, names, metric)
    if why:
        return PairedContrast(names[0], names[1], metric, paired=False, reason=why, level=level)
    y = [_in_order(yr, list(_rows(xr))) for xr, yr in zip(x, y, strict=True)]
    diffs = paired_differences(x, y, metric)
    mean, se, ci, p, groups = cluster_robust_mean(diffs.d, diffs.row, level)
    fit = contrast_slope(diffs, level) if len(x) > 1 else None
    per_row = [float(diffs.d[diffs.row == k].mean()) for k in np.unique(diffs.row)]
    signs = sign_test(per_row)
    return PairedContrast(
        names[0],
        names[1],
        metric,
        paired=True,
        n_rows=groups,
        n_epochs=len(x),
        n_obs=int(diffs.d.size),
        level=level,
        mean_difference=mean,
        mean_se=se,
        mean_ci=ci,
        mean_p=p,
        slope=fit.slope if fit else None,
        slope_se=fit.slope_se if fit else None,
        slope_ci=(float(fit.slope_ci[0]), float(fit.slope_ci[1])) if fit else None,
        slope_p=fit.p_value if fit else None,
        epoch_differences=tuple(float(v) for v in diffs.epoch_means()),
        epoch_half_widths=tuple(float(v) for v in diffs.epoch_half_widths(level)),
        sign_positive=signs.positive,
        sign_negative=signs.negative,
        sign_ties=signs.ties,
        sign_p=signs.p_value,
    )


def _same_spec(compared: Sequence[ComparedRun]) -> list[SpecGroup]:
    groups: dict[str, list[ComparedRun]] = {}
    for run in compared:
        groups.setdefault(run.spec_sha256, []).append(run)
    return [
        SpecGroup(
            spec_sha256=digest,
            labels=tuple(r.label for r in members),
            backends=tuple(r.backend for r in members),
            cross_backend=len({r.backend for r in members}) > 1,
        )
        for digest, members in groups.items()
        if len(members) > 1
    ]


def compare_runs(
    runs: Sequence[Run], metric: str = "reward", metrics: Sequence[str] | None = None, level: float = 0.95
) -> RunComparison:
    """Compare ``runs`` (module docstring): every metric of their ``metrics.jsonl`` (or ``metrics``) per
    epoch, their evaluation means, the paired contrast of the per-rollout ``metric`` for every pair (the
    earlier run on the left), and which runs share a spec hash across backends."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be in (0, 1)")
    labels = _labels(runs)
    compared = [
        ComparedRun(
            label,
            r.record.experiment,
            r.record.arm,
            r.record.run_id,
            r.record.backend,
            r.record.spec_sha256,
            r.record.status,
            str(r.path),
        )
        for label, r in zip(labels, runs, strict=True)
    ]
    per_run = [_epoch_means(r.metrics()) for r in runs]
    names = list(metrics) if metrics is not None else list(dict.fromkeys(m for by in per_run for m in by))
    rollouts = [_rollout_epochs(r) for r in runs]
    pairs = [(i, j) for i in range(len(runs)) for j in range(i + 1, len(runs))]
    contrasts = [_contrast(rollouts[i], rollouts[j], (labels[i], labels[j]), metric, level) for i, j in pairs]
    items = [r.eval_items() for r in runs]
    evaluation = _evaluation(items)
    eval_contrasts = [
        _eval_contrast(items[i], items[j], (labels[i], labels[j]), ev.field, level)
        for ev in evaluation
        for i, j in pairs
        if ev.items[i] and ev.items[j]
    ]
    return RunComparison(
        runs=tuple(compared),
        contrast_metric=metric,
        metrics=tuple(_metric_series(per_run, names)),
        evaluation=tuple(evaluation),
        contrasts=tuple(contrasts),
        same_spec=tuple(_same_spec(compared)),
        eval_contrasts=tuple(eval_contrasts),
    )


def contrast_table(result: RunComparison, digits: int = 4) -> list[dict[str, Any]]:
    """One table row per paired contrast of ``result`` (the notebooks' form of ``rftlab runs compare``'s
    contrast lines): the mean row-paired difference with its interval and p, the slope per epoch when
    there are several epochs, and the sign test over rows; an unpaired pair says why and nothing else."""
    from rftlab.analysis.display import MISSING, interval, number
    from rftlab.analysis.paired import format_p

    rows: list[dict[str, Any]] = []
    for c in result.contrasts:
        row: dict[str, Any] = {"contrast": f"{c.left} − {c.right}", "metric": c.metric}
        if not c.paired:
            rows.append({**row, "paired": f"no: {c.reason}"})
            continue
        level = f"{round(100 * c.level)}%"
        row |= {
            "paired": f"{c.n_rows} rows × {c.n_epochs} epochs",
            "mean difference": number(c.mean_difference, digits, signed=True),
            f"{level} CI": interval(*c.mean_ci, signed=True, digits=digits) if c.mean_ci else MISSING,
            "p": format_p(c.mean_p),
            "slope / epoch": number(c.slope, digits, signed=True),
            f"slope {level} CI": interval(*c.slope_ci, signed=True, digits=digits) if c.slope_ci else MISSING,
            "rows better / worse / tied": f"{c.sign_positive} / {c.sign_negative} / {c.sign_ties}",
            "sign test p": format_p(c.sign_p),
        }
        rows.append(row)
    return rows


# -- the figure --------------------------------------------------------------------------------------
def comparison_figure(result: RunComparison, metric: str | None = None):
    """Left: ``metric`` (default: the contrast metric, else the first) per epoch for every run. Right: each
    paired contrast's mean difference per epoch with its ``level`` interval over rows (pairs that are not
    paired are named in the legend's title). Returns the matplotlib ``Figure``."""
    from matplotlib.figure import Figure  # no pyplot: no global figure, no GUI backend

    names = [s.metric for s in result.metrics]
    name = metric or (result.contrast_metric if result.contrast_metric in names else (names or [None])[0])
    fig = Figure(figsize=(10, 3.6))
    left, right = fig.subplots(1, 2)
    if name is not None:
        series = result.metric(name)
        for run, values in zip(result.runs, series.values, strict=True):
            pts = [(e, v) for e, v in zip(series.epochs, values, strict=True) if v is not None]
            left.plot(
                [e for e, _ in pts], [v for _, v in pts], marker="o", label=f"{run.label} ({run.backend})"
            )
        left.set_ylabel(name)
        left.legend(fontsize=8)
    left.set_xlabel("epoch")
    left.set_title("per epoch")
    paired = [c for c in result.contrasts if c.paired]
    for c in paired:
        epochs = np.arange(len(c.epoch_differences))
        half = np.nan_to_num(np.asarray(c.epoch_half_widths, dtype=float))
        right.errorbar(
            epochs, c.epoch_differences, yerr=half, marker="o", capsize=3, label=f"{c.left} − {c.right}"
        )
    right.axhline(0, color="black", linewidth=0.8)
    right.set_xlabel("epoch")
    right.set_ylabel(f"paired difference in {result.contrast_metric}")
    unpaired = [f"{c.left} − {c.right}" for c in result.contrasts if not c.paired]
    right.set_title(
        "paired by row" + (f" (not paired: {', '.join(unpaired)})" if unpaired else ""), fontsize=9
    )
    if paired:
        right.legend(fontsize=8)
    from matplotlib.ticker import MaxNLocator

    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    return fig
