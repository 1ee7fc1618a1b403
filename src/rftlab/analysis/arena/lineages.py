"""Several Stage-1 lineages of the simulated learner: the lineage as the unit of the method-level claim,
and every interval set against the simulation's truth (issue 31).

A *lineage* is one full Stage-1 run (base evaluation, overfit check, SFT with validation, selection, one
test evaluation, comparison, gates) with its own seed, so its corruption draws are independent of the
others'. Within a lineage every interval is over the 60 frozen cases (or the replies); across lineages
the unit is the lineage:

- ``coverage_rows``: for one lineage, each reported quantity's observed value and 95% interval beside the
  simulation's truth at the lineage's own checkpoints (``rftlab.training.arena.truth``; the truth of the
  selected checkpoint's competence, since that is what its single evaluation measures) and whether the
  interval covers it. Reply rates use the two-sided Wilson interval over replies; paired endpoints and mean
  regrets the interval of their summaries (mean ± 1.96·SD/√n over cases).
- ``method_level``: SFT − base regret with the lineage as the unit, paired by seed
  (``rftlab.analysis.runlevel.paired_by_seed``): the mean over lineages, its bootstrap interval, the exact
  sign-flip p whose floor is ``2 / 2**n`` (0.25 with 3 lineages: n lineages can show a consistent sign
  and its size, not significance below that floor), the interquartile mean, and the truth. A percentile
  bootstrap over 3 lineages cannot reach beyond their range (it under-covers at such n), so the Student-t
  interval over lineages (n − 1 degrees of freedom) is given beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rftlab.analysis.intervals import wilson_interval
from rftlab.analysis.runlevel import interquartile_mean, paired_by_seed

ENDPOINTS = (
    "primary",
    "generated_minus_dropped",
    "generated_minus_shuffled",
    "generated_minus_shuffled_within",
)
RATES = (("act_schema_valid", "act", "schema_valid"), ("act_legal", "act", "legal"))


def _row(
    quantity: str, observed: float, interval: Sequence[float], truth: float, unit: str
) -> dict[str, Any]:
    low, high = float(interval[0]), float(interval[1])
    return {
        "quantity": quantity,
        "unit": unit,
        "observed": float(observed),
        "95% low": low,
        "95% high": high,
        "truth": float(truth),
        "covered": bool(low - 1e-12 <= truth <= high + 1e-12),
    }


def _endpoints(comparison: Mapping[str, Any]) -> dict[str, Any]:
    return {**comparison["endpoints"], **comparison.get("rftlab_additions", {}).get("endpoints", {})}


def coverage_rows(
    base_summary: Mapping[str, Any],
    final_summary: Mapping[str, Any],
    comparison: Mapping[str, Any],
    truth_base: Mapping[str, Any],
    truth_sft: Mapping[str, Any],
    truth_contrasts: Mapping[str, float],
) -> list[dict[str, Any]]:
    """One lineage's quantities with their intervals and truths (see the module docstring); the truths
    come from ``expected_frozen`` at the base's and the selected checkpoint's competence and from
    ``expected_contrasts``."""
    rows = []
    for label, summary, truth in (("base", base_summary, truth_base), ("SFT", final_summary, truth_sft)):
        g = summary["conditions"]["generated"]
        rows.append(
            _row(f"{label}: mean regret, generated", g["mean_oracle_regret"], g["mean_oracle_regret_95"],
                 truth["mean_regret"]["generated"], "case")
        )  # fmt: skip
    replies = final_summary["replies"]
    for metric, phase, key in (*RATES, ("broadcast_schema_valid", "broadcast", "schema_valid")):
        k, n = replies[phase][key], replies[phase]["n"]
        rows.append(_row(f"SFT: {metric}", k / n, wilson_interval(k, n), truth_sft[metric], "reply"))
    n_cases = final_summary["num_cases"]
    k = round(final_summary["action_order_consistency_rate"] * n_cases)
    rows.append(
        _row("SFT: action_order_consistency_rate", k / n_cases, wilson_interval(k, n_cases),
             truth_sft["action_order_consistency_rate"], "case")
    )  # fmt: skip
    endpoints = _endpoints(comparison)
    for name in ENDPOINTS:
        e = endpoints[name]
        rows.append(
            _row(
                f"paired: {name}",
                e["mean_difference"],
                e["mean_difference_95"],
                truth_contrasts[name],
                "case",
            )
        )
    return rows


def method_level(
    sft_regret: Mapping[int, float],
    base_regret: Mapping[int, float],
    truth_primary: Mapping[int, float],
    reps: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """SFT − base mean regret (generated messages) with the lineage as the unit (see the module
    docstring); ``truth_primary`` maps each lineage's seed to its true SFT − base regret."""
    missing = sorted(set(sft_regret) ^ set(truth_primary))
    if missing:
        raise ValueError(f"every lineage needs its truth and its scores; seeds without both: {missing}")
    from rftlab.analysis.paired import paired_t_interval

    contrast = paired_by_seed(sft_regret, base_regret, reps=reps, seed=seed)
    truth = sum(truth_primary[s] for s in contrast.seeds) / contrast.n_pairs
    _, t_low, t_high = paired_t_interval(contrast.differences)
    t_ci = (t_low, t_high)
    return {
        "contrast": contrast,
        "lineages": contrast.n_pairs,
        "iqm": interquartile_mean(contrast.differences),
        "truth": truth,
        "covered": bool(contrast.ci[0] <= truth <= contrast.ci[1]),
        "t_ci": t_ci,
        "t_covered": bool(t_ci[0] <= truth <= t_ci[1]),
        "smallest_p": contrast.smallest_p,
        "sentence": contrast.sentence("regret"),
    }


VALIDATION_SERIES = (
    ("ACT schema valid (G1 ≥ 0.995)", "act", "schema_valid"),
    ("BROADCAST schema valid (G2 ≥ 0.99)", "broadcast", "schema_valid"),
    ("ACT legal (G4 ≥ 0.95)", "act", "legal"),
    ("BROADCAST without an unsupported fact (G3: none allowed)", "broadcast", "unsupported"),
)


def validation_series(measurements: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, float]]]:
    """Per series of ``VALIDATION_SERIES``, one point per validation measurement: the step, the rate on the
    validation split and its two-sided 95% Wilson interval over the phase's rows. The unsupported-fact
    series is ``1 − unsupported_fact_responses / BROADCAST rows`` (what G3 counts)."""
    out: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in VALIDATION_SERIES}
    for m in measurements:
        v = m["validation"]
        for label, phase, key in VALIDATION_SERIES:
            n = int(v[phase]["rows"])
            bad = v["unsupported_fact_responses"] if key == "unsupported" else v[phase]["failures"][key]
            low, high = wilson_interval(n - int(bad), n)
            out[label].append(
                {"step": m["step"], "rate": (n - int(bad)) / n, "low": low, "high": high, "n": n}
            )
    return out
