"""``rftlab stats``: paired noninferiority bounds, training-curve trends and pre-registered decision rules.

* ``stats noninferiority --treatment T.jsonl --baseline B.jsonl --margin 0.03 --alpha 0.05 [--json]``
* ``stats trend --metrics metrics.jsonl --metric NAME [--x epoch] [--json]``
* ``stats decision-rule --spec SPEC.json --treatment T.jsonl --baseline B.jsonl [--json]``

Every command exits 0 whatever the statistical decision, and 2 with a message on bad input.
"""

from __future__ import annotations

import argparse
import json
import math

from rftlab.cli import UsageError

# The analysis modules pull in scipy and statsmodels (~1 s): each handler imports what it needs, so
# `rftlab --help` and the other commands start fast. AnalysisInputError is a ValueError.


def register(subparsers: argparse._SubParsersAction) -> None:
    stats = subparsers.add_parser("stats", help="noninferiority bounds, trends and decision rules")
    commands = stats.add_subparsers(dest="stats_command", metavar="STATS_COMMAND")
    commands.required = True

    ni = commands.add_parser(
        "noninferiority",
        help="paired noninferiority of treatment vs baseline per-item outcomes (all bounds)",
        description="Joins two per-item JSONL files by item_id (fields: item_id and correct 0/1 or score in "
        "[0,1]) and reports every bound of treatment minus baseline against the margin. The top-level "
        "decision is the pre-registered Hoeffding one. Exit 0 whatever the decision.",
    )
    ni.add_argument("--treatment", required=True, help="per-item JSONL of the treatment arm")
    ni.add_argument("--baseline", required=True, help="per-item JSONL of the baseline arm")
    ni.add_argument(
        "--margin", type=float, required=True, help="noninferiority margin delta > 0 (0.03 = 3 points)"
    )
    ni.add_argument("--alpha", type=float, default=0.05, help="one-sided alpha (default 0.05)")
    ni.add_argument(
        "--seed", type=int, default=0, help="permutation seed for order-dependent bounds (default 0)"
    )
    ni.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ni.set_defaults(func=noninferiority_command)

    trend = commands.add_parser(
        "trend",
        help="OLS/Theil-Sen slope and early/late halves of one metric over epochs",
        description="Fits y = a + b*x over one point per x (rows sharing an x are averaged). x defaults to "
        "'epoch' when present, else 'step'.",
    )
    trend.add_argument("--metrics", required=True, help="metrics.jsonl (one row per step/epoch)")
    trend.add_argument("--metric", required=True, help="metric column to fit")
    trend.add_argument("--x", default=None, help="x column (default: epoch if present, else step)")
    trend.add_argument(
        "--hac-maxlags", type=int, default=None, help="Newey-West (HAC) standard errors with these lags"
    )
    trend.add_argument(
        "--epsilon", type=float, default=None, help="declared flatness band: TOST on the slope"
    )
    trend.add_argument("--json", action="store_true", help="print JSON instead of a table")
    trend.set_defaults(func=trend_command)

    rule = commands.add_parser(
        "decision-rule",
        help="evaluate a spec's pre-registered decision_rule on treatment and baseline per-item files",
    )
    rule.add_argument("--spec", required=True, help="spec JSON with a 'decision_rule' block (or a bare rule)")
    rule.add_argument("--treatment", required=True, help="per-item JSONL of the treatment arm")
    rule.add_argument("--baseline", required=True, help="per-item JSONL of the baseline arm")
    rule.add_argument("--seed", type=int, default=0, help="permutation seed for order-dependent bounds")
    rule.add_argument("--json", action="store_true", help="print JSON instead of a table")
    rule.set_defaults(func=decision_rule_command)


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}"


def noninferiority_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.io import load_paired_items
    from rftlab.analysis.noninferiority import paired_noninferiority

    if not args.margin > 0:
        raise UsageError(f"--margin must be > 0 (got {args.margin}); the threshold is -margin")
    if not 0 < args.alpha < 0.5:
        raise UsageError(f"--alpha must be in (0, 0.5) (got {args.alpha})")
    try:
        items = load_paired_items(args.treatment, args.baseline)
        report = paired_noninferiority(
            items.treatment, items.baseline, margin=args.margin, alpha=args.alpha, permutation_seed=args.seed
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    print(
        f"paired noninferiority: treatment {args.treatment} vs baseline {args.baseline}\n"
        f"n = {report.n} items, mean difference = {report.mean_difference:+.4f}, margin = {args.margin:g} "
        f"(threshold {-args.margin:+g}), one-sided alpha = {args.alpha:g}\n"
    )
    print(f"{'method':<28} {'lower':>8} {'upper':>8}  {'decision':<14} validity")
    for name, bound in report.bounds.items():
        print(
            f"{name:<28} {_fmt(bound.lower):>8} {_fmt(bound.upper):>8}  {bound.decision:<14} {bound.validity}"
        )
    print(f"\ndecision (pre-registered, {report.decision_method}): {report.decision}")
    return 0


def trend_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.io import load_metric_series
    from rftlab.analysis.trends import fit_trend, slope_flatness

    try:
        x, y, x_name, n_rows = load_metric_series(args.metrics, args.metric, args.x)
        fit = fit_trend(x, y, hac_maxlags=args.hac_maxlags)
        flatness = slope_flatness(fit, args.epsilon) if args.epsilon is not None else None
    except ValueError as exc:
        raise UsageError(
            f"{args.metrics}: {exc}" if not str(exc).startswith(str(args.metrics)) else str(exc)
        ) from None
    out = {"metric": args.metric, "x": x_name, "rows_used": n_rows, **fit.to_dict()}
    if flatness is not None:
        out["flatness"] = {
            "flat": flatness.flat,
            "label": flatness.label,
            "epsilon": flatness.epsilon,
            "tost_p_value": flatness.tost_p_value,
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    lo, hi = fit.slope_ci
    print(f"trend of {args.metric} over {x_name}: n = {fit.n} points ({n_rows} rows), SE {fit.se_type}")
    print(
        f"  slope      {fit.slope:+.5g}  {fit.level:.0%} CI [{lo:+.5g}, {hi:+.5g}]  p = {fit.p_value:.3g}  R² = {fit.r2:.3f}"
    )
    print(
        f"  Theil-Sen  {fit.theil_sen_slope:+.5g}  CI [{fit.theil_sen_ci[0]:+.5g}, {fit.theil_sen_ci[1]:+.5g}]"
    )
    print(f"  early {fit.early:.5g}  late {fit.late:.5g}  delta {fit.delta:+.5g}")
    if flatness is not None:
        print(f"  flatness (eps = {flatness.epsilon:g}): {flatness.label}")
    return 0


def decision_rule_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.decision_rules import evaluate_decision_rule_file

    try:
        result = evaluate_decision_rule_file(
            args.spec, args.treatment, args.baseline, permutation_seed=args.seed
        )
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(f"decision rule of {args.spec} (sha256 {result.spec_sha256[:12]}...)")
    for c in result.criteria:
        print(
            f"  {c.id}: {c.method} n={c.n} mean={c.statistic_mean:+.4f} lower={_fmt(c.lower)} "
            f"margin={c.margin:+g} -> {c.decision}"
        )
    print(f"decision: {result.decision}")
    return 0
