"""The methods study: which noninferiority bound to pre-register (notebook ``00_methods``).

Each function runs one section of the notebook and returns a frozen result with named fields. The
formulas live in ``rftlab.analysis.power``, ``rftlab.analysis.multiplicity`` and
``rftlab.analysis.noninferiority``; this driver only calls them and gathers the numbers. Simulations draw
from the ``numpy.random.Generator`` passed in, so calling the sections in the notebook's order reproduces
its numbers. Methods is not a family: it has no env and no runs, and its only module is this driver,
``rftlab.studies.methods`` (``tests/test_layers.py`` checks the list).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rftlab.analysis import multiplicity, power
from rftlab.analysis.display import rate_with_error
from rftlab.analysis.multiplicity import RepeatedLooksSimulation, SeedShoppingSimulation
from rftlab.analysis.noninferiority import (
    BETTING_VALIDITY_CONDITIONS,
    COUNT_ONLY,
    METHODS,
    MIN_DISCORDANT,
    ORDER_DEPENDENT,
    VALIDITY,
    hoeffding_half_width,
)
from rftlab.analysis.power import DegenerateSampleAnatomy, PowerThresholds

# the constants of ``rftlab.analysis.noninferiority`` that notebook 00 reads from here
__all__ = ["BETTING_VALIDITY_CONDITIONS", "METHODS", "MIN_DISCORDANT"]

LABELS = {
    "hoeffding": "Hoeffding (pre-registered)",
    "empirical_bernstein": "empirical Bernstein (Maurer–Pontil)",
    "plugin_empirical_bernstein": "plug-in empirical Bernstein",
    "betting": "betting confidence sequence",
    "paired_t": "paired t (asymptotic)",
    "tango": "Tango score test (asymptotic)",
}
FINITE_SAMPLE = ("hoeffding", "empirical_bernstein", *ORDER_DEPENDENT)  # the bounds valid at every n
ASYMPTOTIC = ("paired_t", "tango")


def bound_table() -> pd.DataFrame:
    """One row per bound: its label, method key, validity and how its power is computed."""
    return pd.DataFrame(
        {
            "bound": [LABELS[m] for m in METHODS],
            "method key": list(METHODS),
            "validity": [VALIDITY[m] for m in METHODS],
            "power computed": [
                "exact (counts only)" if m in COUNT_ONLY else "Monte Carlo (order-dependent)" for m in METHODS
            ],
        }
    )


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in df.to_dict("records")]


def _first_extreme(records: Sequence[Mapping[str, Any]], key: str, largest: bool) -> Mapping[str, Any]:
    """The first record with the largest (or smallest) ``key``, as ``idxmax`` / ``idxmin`` pick it."""
    best = records[0]
    for r in records[1:]:
        if (r[key] > best[key]) if largest else (r[key] < best[key]):
            best = r
    return best


def _wide(cells: pd.DataFrame, column: str, prefix: str) -> pd.DataFrame:
    """``cells``' text column ``cell`` as one row per bound and one column per value of ``column``."""
    wide = cells.pivot(index="method", columns=column, values="cell").loc[list(METHODS)]
    wide.columns = [f"{prefix}{v:g}" for v in wide.columns]
    wide.insert(0, "bound", [LABELS[m] for m in wide.index])
    return wide


@dataclass(frozen=True)
class HoeffdingRule:
    """The Hoeffding rule at ``n`` items: its half-width and the observed difference it needs to clear
    ``-margin``, at ``alpha`` and at the stricter convention ``alpha / 2``."""

    n: int
    margin: float
    alpha: float
    half_width: float
    clearing: float
    strict_clearing: float


def hoeffding_rule(n: int, margin: float, alpha: float) -> HoeffdingRule:
    return HoeffdingRule(
        n,
        margin,
        alpha,
        hoeffding_half_width(n, alpha),
        power.hoeffding_clearing_difference(n, margin, alpha),
        power.hoeffding_clearing_difference(n, margin, alpha / 2),
    )


@dataclass(frozen=True)
class Consequence:
    """The exact P(Hoeffding passes) at each (true difference, discordance) pair (``grid``)."""

    grid: pd.DataFrame

    @property
    def table(self) -> pd.DataFrame:
        """The grid as text: one row per true difference, one column per discordance rate."""
        wide = self.grid.pivot(index="difference", columns="discordance", values="pass_rate")
        wide = wide.map(lambda v: "– (θ > r)" if pd.isna(v) else power.exact_probability_text(v))
        wide.columns = [f"P(pass), r = {r:g}" for r in wide.columns]
        wide = wide.reset_index()
        wide["true difference θ"] = [f"{100 * d:+.2f} points" for d in wide.pop("difference")]
        return wide.reindex(columns=["true difference θ", *wide.columns[:-1]])

    @property
    def equal_arms(self) -> tuple[float, ...]:
        """P(pass) at a true difference of 0, one per discordance rate."""
        return tuple(float(r["pass_rate"]) for r in _records(self.grid) if r["difference"] == 0.0)

    @property
    def equal_range_text(self) -> str:
        return f"{power.exact_probability_text(min(self.equal_arms))} to {max(self.equal_arms):.4f}"


def hoeffding_consequence(
    n: int, margin: float, alpha: float, differences: Sequence[float], discordances: Sequence[float]
) -> Consequence:
    return Consequence(power.exact_pass_rate_grid("hoeffding", n, margin, alpha, differences, discordances))


@dataclass(frozen=True)
class WorstCell:
    """The largest error rate among some bounds' cells, with where it was found."""

    method: str
    error_rate: float
    mc_se: float
    at: float  # the cell's grid value: a discordance rate or a number of items


@dataclass(frozen=True)
class CoverageGrid:
    """Null-boundary error rates (``power.coverage_table`` rows) over one grid ``column``, each with its
    text ``cell``; count-only bounds exact."""

    cells: pd.DataFrame
    column: str  # "discordance" or "n"

    def table(self, prefix: str) -> pd.DataFrame:
        return _wide(self.cells, self.column, prefix)

    @property
    def largest_mc_se(self) -> float:
        """The largest Monte Carlo standard error of the simulated cells."""
        return max(float(r["mc_se"]) for r in _records(self.cells) if not r["exact"])

    def worst(self, methods: Sequence[str] = FINITE_SAMPLE) -> WorstCell:
        return worst_cell(self.cells, methods, self.column)


def worst_cell(cells: pd.DataFrame, methods: Sequence[str], column: str) -> WorstCell:
    """The cell of ``methods`` with the largest error rate (the first of ties)."""
    row = _first_extreme([r for r in _records(cells) if r["method"] in methods], "error_rate", largest=True)
    return WorstCell(str(row["method"]), float(row["error_rate"]), float(row["mc_se"]), float(row[column]))


def _coverage(tables: Sequence[pd.DataFrame], column: str) -> CoverageGrid:
    cells = pd.concat(tables, ignore_index=True)
    cells["cell"] = [rate_with_error(r["error_rate"], r["mc_se"], r["exact"]) for r in _records(cells)]
    return CoverageGrid(cells, column)


def coverage_by_discordance(
    n: int, margin: float, alpha: float, discordances: Sequence[float], rng: np.random.Generator, reps: int
) -> CoverageGrid:
    """Error rates at ``n`` items for each discordance rate, simulated cells ``reps`` times each."""
    tables = [
        power.coverage_table(n, margin, alpha, r, rng, reps=reps, exact=True).assign(discordance=r)
        for r in discordances
    ]
    return _coverage(tables, "discordance")


def coverage_by_size(
    sizes: Sequence[int], margin: float, alpha: float, discordance: float, rng: np.random.Generator, reps: int
) -> CoverageGrid:
    """Error rates at one discordance rate for each number of items."""
    tables = [
        power.coverage_table(n, margin, alpha, discordance, rng, reps=reps, exact=True).assign(n=n)
        for n in sizes
    ]
    return _coverage(tables, "n")


@dataclass(frozen=True)
class PairedTGuard:
    """Where the paired t error at a small n comes from (``anatomy``), and its exact error at ``large_n``
    items with the same discordance rate."""

    anatomy: DegenerateSampleAnatomy
    large_n: int
    large_n_error: float


def paired_t_guard(
    small_n: int, large_n: int, margin: float, alpha: float, discordance: float
) -> PairedTGuard:
    model = power.DiscordanceModel.from_difference(-margin, discordance)
    return PairedTGuard(
        power.degenerate_sample_anatomy(small_n, margin, alpha, discordance),
        large_n,
        power.exact_pass_rate("paired_t", large_n, model, margin, alpha),
    )


@dataclass(frozen=True)
class PowerCurves:
    """P(noninferiority claimed) of every bound at each (discordance, true difference) (``curves``)."""

    curves: pd.DataFrame

    @property
    def largest_mc_se(self) -> float:
        return max(float(r["mc_se"]) for r in _records(self.curves))

    @property
    def t_tango_gap(self) -> dict[float, float]:
        """The largest |paired t − Tango| pass-rate difference at each discordance rate."""
        rates = {
            (r["method"], r["discordance"], r["difference"]): r["pass_rate"] for r in _records(self.curves)
        }
        gaps: dict[float, float] = {}
        for (method, r, d), rate in sorted(rates.items(), key=lambda kv: (kv[0][1], kv[0][2])):
            if method == "paired_t" and ("tango", r, d) in rates:
                gaps[r] = max(gaps.get(r, 0.0), abs(float(rate) - float(rates["tango", r, d])))
        return gaps


def power_curves(
    n: int,
    margin: float,
    alpha: float,
    discordances: Sequence[float],
    differences: Sequence[float],
    rng: np.random.Generator,
    reps: int,
) -> PowerCurves:
    return PowerCurves(
        power.power_curve(n, margin, alpha, discordances, differences, rng, reps=reps, methods=METHODS)
    )


def _mdd_cell(row: Mapping[str, Any]) -> str:
    if pd.isna(row["mdd"]):
        return f"none ≤ r (power {row['achieved_power']:.3f} at θ = r)"
    if row["exact"]:
        return f"{row['mdd']:+.4f} (exact)"
    return f"{row['mdd']:+.4f} (power {row['achieved_power']:.3f} ± {row['mc_se']:.3f})"


@dataclass(frozen=True)
class DetectableDifferences:
    """Each bound's minimum detectable difference per discordance rate (``cells``, with a text ``cell``),
    and the exact power of an earlier report's paired t estimate (``previous_mdd`` at
    ``previous_discordance``)."""

    cells: pd.DataFrame
    previous_mdd: float
    previous_discordance: float
    previous_power: float

    @property
    def table(self) -> pd.DataFrame:
        return _wide(self.cells, "discordance", "r = ")

    @property
    def mc_reps(self) -> int:
        """The replications of the simulated cells."""
        return max(int(r["reps"]) for r in _records(self.cells) if not r["exact"])

    def _by_rate(self, methods: Sequence[str]) -> dict[float, list[dict[str, Any]]]:
        """The cells of ``methods`` per discordance rate, ``mdd`` a float (NaN: no θ ≤ r suffices)."""
        out: dict[float, list[dict[str, Any]]] = {}
        for r in _records(self.cells):
            if r["method"] in methods:
                out.setdefault(float(r["discordance"]), []).append({**r, "mdd": _float(r["mdd"])})
        return out

    def reach(self, method: str) -> Reach:
        cells = {rate: rows[0]["mdd"] for rate, rows in self._by_rate([method]).items()}
        reached = {rate: v for rate, v in cells.items() if not math.isnan(v)}
        return Reach(reached, tuple(rate for rate, v in cells.items() if math.isnan(v)))

    @property
    def exact_paired_t_mdd(self) -> float:
        return self._by_rate(["paired_t"])[self.previous_discordance][0]["mdd"]

    def smallest_is(self, method: str, among: Sequence[str] = FINITE_SAMPLE) -> bool:
        """Whether ``method`` has the smallest difference among ``among`` at every discordance rate."""
        by_rate = self._by_rate(among)
        for rows in by_rate.values():
            reached = [r for r in rows if not math.isnan(r["mdd"])]  # idxmin skips "none ≤ r"
            if not reached or _first_extreme(reached, "mdd", largest=False)["method"] != method:
                return False
        return True

    def largest_is(self, method: str) -> bool:
        """Whether ``method`` has the largest difference of all bounds at every rate ("none ≤ r" largest)."""
        for rows in self._by_rate(METHODS).values():
            ranked = [{**r, "mdd": math.inf if math.isnan(r["mdd"]) else r["mdd"]} for r in rows]
            if _first_extreme(ranked, "mdd", largest=True)["method"] != method:
                return False
        return True


def _float(value: float | None) -> float:
    """A cell as a float: ``None`` and NaN as NaN."""
    return math.nan if value is None or math.isnan(value) else float(value)


@dataclass(frozen=True)
class Reach:
    """One bound's minimum detectable difference at each discordance rate where some θ ≤ r reaches the
    target (``reached``), and the rates where none does (``unreached``)."""

    reached: Mapping[float, float]
    unreached: tuple[float, ...]

    @property
    def low(self) -> float:
        return min(self.reached.values())

    @property
    def high(self) -> float:
        return max(self.reached.values())

    @property
    def rates(self) -> tuple[float, float]:
        """The lowest and the highest discordance rate reached."""
        return min(self.reached), max(self.reached)


def detectable_differences(
    n: int,
    margin: float,
    alpha: float,
    discordances: Sequence[float],
    rng: np.random.Generator,
    target: float,
    reps: int | None,
    previous_mdd: float,
    previous_discordance: float,
) -> DetectableDifferences:
    """Minimum detectable differences at power ``target`` (``reps`` simulations; ``None``: ±0.01)."""
    cells = power.minimum_detectable_difference_table(
        n, margin, alpha, discordances, rng, power=target, reps=reps, methods=METHODS
    )
    cells["cell"] = [_mdd_cell(r) for r in _records(cells)]
    old_model = power.DiscordanceModel.from_difference(previous_mdd, previous_discordance)
    old_power = power.exact_pass_rate("paired_t", n, old_model, margin, alpha)
    return DetectableDifferences(cells, previous_mdd, previous_discordance, old_power)


@dataclass(frozen=True)
class Planning:
    """The items each bound needs for power ``target`` at each true difference (``sizes``; ``None``: more
    than the search's maximum), found on the search path, and the notebook's text table."""

    discordance: float
    sizes: Mapping[tuple[str, float], int | None]
    table: pd.DataFrame

    def items(self, method: str, difference: float) -> int | None:
        return self.sizes[method, difference]


def _planning_text(found: power.PowerSearch) -> str:
    if found.value is None:
        return "> 200000"
    if found.exact:
        return f"{found.value} (exact)"
    return f"{found.value} (power {found.achieved_power:.3f} ± {found.mc_se:.3f})"


def planning(
    differences: Sequence[float],
    margin: float,
    alpha: float,
    discordance: float,
    rng: np.random.Generator,
    target: float,
    reps: int | None,
) -> Planning:
    """``power.required_n`` of every bound at each difference; an order-dependent bound starts its search
    at the exact paired t answer, to save simulation time."""
    sizes: dict[tuple[str, float], int | None] = {}  # a search's value is an integer size
    rows = []
    for method in METHODS:
        row = {"bound": LABELS[method]}
        for theta in differences:
            hint = sizes.get(("paired_t", theta)) if method in ORDER_DEPENDENT else None
            found = power.required_n(
                method, theta, margin, alpha, discordance, rng, power=target, reps=reps, n_hint=hint
            )
            sizes[method, theta] = None if found.value is None else int(found.value)
            row[f"n for θ = {theta:+g}"] = _planning_text(found)
        rows.append(row)
    return Planning(discordance, sizes, pd.DataFrame(rows))


@dataclass(frozen=True)
class HoeffdingReadings:
    """Both readings of the items Hoeffding needs (``PowerThresholds``) per (true difference, discordance),
    from an exact scan of every size up to ``n_max``, beside the planning search's size."""

    readings: Mapping[tuple[float, float], PowerThresholds]
    table: pd.DataFrame
    n_max: int
    agree: bool  # the first n reaching the target is also the n from which power stays there
    path_agrees: bool  # the planning search found the first n at its discordance rate

    def at(self, difference: float, discordance: float) -> PowerThresholds:
        return self.readings[difference, discordance]


def _reading_row(theta: float, r: float, v: PowerThresholds, plan: Planning) -> dict[str, object]:
    path = plan.items("hoeffding", theta)
    return {
        "discordance r": f"{r:g}",
        "true difference θ": f"{theta:+g}",
        "search path (table above)": f"{path:,}" if r == plan.discordance and path is not None else "–",
        "first n with power ≥ 0.8": f"{v.first_n:,}" if v.first_n else f"> {v.n_max:,}",
        "n from which power stays ≥ 0.8": f"{v.from_then_on_n:,}" if v.from_then_on_n else f"> {v.n_max:,}",
        "sizes above the first n that fall below 0.8": v.dips,
    }


def hoeffding_readings(
    differences: Sequence[float],
    discordances: Sequence[float],
    margin: float,
    alpha: float,
    target: float,
    n_max: int,
    plan: Planning,
) -> HoeffdingReadings:
    readings = {
        (theta, r): power.hoeffding_required_n_readings(theta, margin, alpha, r, power=target, n_max=n_max)
        for r in discordances
        for theta in differences
    }
    table = pd.DataFrame([_reading_row(theta, r, v, plan) for (theta, r), v in readings.items()])
    agree = all(v.first_n == v.from_then_on_n for v in readings.values())
    path_agrees = all(
        plan.items("hoeffding", t) == readings[t, plan.discordance].first_n for t in differences
    )
    return HoeffdingReadings(readings, table, n_max, agree, path_agrees)


@dataclass(frozen=True)
class RepeatedLooks:
    """Re-checking a gate at ``n_looks`` checkpoints: one simulation per redraw fraction (``sims``, in
    order; the first independent checkpoints, the last the most correlated)."""

    sims: Mapping[float, RepeatedLooksSimulation]
    n_looks: int

    @property
    def independent(self) -> RepeatedLooksSimulation:
        return next(iter(self.sims.values()))

    @property
    def correlated(self) -> RepeatedLooksSimulation:
        return list(self.sims.values())[-1]

    @property
    def largest_split_rate(self) -> float:
        return max(s.split_rate for s in self.sims.values())

    @property
    def table(self) -> pd.DataFrame:
        k = self.n_looks

        def cell(sim: RepeatedLooksSimulation, rate: float) -> str:
            return rate_with_error(rate, sim.se(rate), False)

        return pd.DataFrame(
            [
                {
                    "checkpoints": "independent" if f == 1.0 else f"{f:.0%} of items redrawn per epoch",
                    "one look at alpha": cell(sim, sim.single_rate),
                    f"naive: {k} looks at alpha": cell(sim, sim.naive_rate),
                    f"valid: {k} looks at alpha/{k}": cell(sim, sim.split_rate),
                }
                for f, sim in self.sims.items()
            ]
        )


def repeated_looks(
    method: str,
    n: int,
    margin: float,
    alpha: float,
    discordance: float,
    n_looks: int,
    reps: int,
    rng: np.random.Generator,
    redraw_fractions: Sequence[float],
) -> RepeatedLooks:
    sims = {
        f: multiplicity.simulate_repeated_looks(
            method, n, margin, alpha, discordance, n_looks, reps, rng, redraw_fraction=f
        )
        for f in redraw_fractions
    }
    return RepeatedLooks(sims, n_looks)


@dataclass(frozen=True)
class SeedShopping:
    """One fixed data set under several permutation seeds (``passing``: the seeds that said
    noninferior), and the error of trying them all at the null boundary (``shop``)."""

    example_mean: float
    seeds: tuple[int, ...]
    passing: tuple[int, ...]
    shop: SeedShoppingSimulation


def seed_shopping(
    method: str,
    n: int,
    counts: tuple[int, int],
    margin: float,
    alpha: float,
    discordance: float,
    n_seeds: int,
    reps: int,
    rng: np.random.Generator,
) -> SeedShopping:
    """``counts`` is the fixed data set's (#+1, #−1) among ``n`` paired differences, the rest ties."""
    n_plus, n_minus = counts
    example = np.array([1.0] * n_plus + [-1.0] * n_minus + [0.0] * (n - n_plus - n_minus))
    decisions = multiplicity.seeds_passing(example, method, margin, alpha, range(n_seeds))
    passing = tuple(seed for seed, decision in decisions.items() if decision == "noninferior")
    shop = multiplicity.seed_shopping_error_rate(method, n, margin, alpha, discordance, n_seeds, reps, rng)
    return SeedShopping(float(example.mean()), tuple(range(n_seeds)), passing, shop)


@dataclass(frozen=True)
class Recommendation:
    """The numbers the recommendation quotes, from the coverage grids and the detectable differences."""

    betting_worst: WorstCell
    betting_smallest: bool  # smallest detectable difference of the finite-sample bounds at every rate
    hoeffding_largest: bool  # largest detectable difference of all bounds at every rate
    asymptotic_cells: int
    asymptotic_over: int  # asymptotic cells whose error exceeds alpha
    asymptotic_worst: float


def recommendation(grids: Sequence[CoverageGrid], mdd: DetectableDifferences, alpha: float) -> Recommendation:
    cells = pd.concat([g.cells for g in grids], ignore_index=True)
    asymptotic = [float(r["error_rate"]) for r in _records(cells) if r["method"] in ASYMPTOTIC]
    return Recommendation(
        betting_worst=worst_cell(cells, ["betting"], "discordance"),
        betting_smallest=mdd.smallest_is("betting"),
        hoeffding_largest=mdd.largest_is("hoeffding"),
        asymptotic_cells=len(asymptotic),
        asymptotic_over=sum(rate > alpha for rate in asymptotic),
        asymptotic_worst=max(asymptotic),
    )
