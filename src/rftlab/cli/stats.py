"""``rftlab stats``: paired noninferiority bounds, training-curve trends and pre-registered decision rules.

* ``stats noninferiority --treatment T.jsonl --baseline B.jsonl --margin 0.03 --alpha 0.05 [--json]``
* ``stats trend --metrics metrics.jsonl --metric NAME [--x epoch] [--epsilon E] [--json]``
* ``stats decision-rule --spec SPEC.json --treatment T.jsonl --baseline B.jsonl [--json]``

Every command exits 0 whatever the statistical decision, and 2 with a one-line message on bad input.
``--json`` output never holds NaN or Infinity (non-finite values are written as strings).
"""

from __future__ import annotations

import argparse
import math

from rftlab.cli import UsageError, print_json
from rftlab.cli.argtypes import NON_NEGATIVE_INT, number

# The analysis modules pull in scipy and statsmodels (~1 s): each handler imports what it needs, so
# `rftlab --help` and the other commands start fast. AnalysisInputError is a ValueError.

DEFAULT_SEED = 0


def register(subparsers: argparse._SubParsersAction) -> None:
    stats = subparsers.add_parser("stats", help="noninferiority bounds, trends and decision rules")
    commands = stats.add_subparsers(dest="stats_command", metavar="STATS_COMMAND")
    commands.required = True

    ni = commands.add_parser(
        "noninferiority",
        help="paired noninferiority of treatment vs baseline per-item outcomes (all bounds)",
        description="Joins two per-item JSONL files by item_id (fields: item_id and correct 0/1 or score in "
        "[0,1]) and reports every bound of treatment minus baseline against the margin. lower and upper are "
        "each one-sided bounds at level 1-alpha; together they are a two-sided 1-2*alpha interval. The "
        "top-level decision is the pre-registered Hoeffding one. The betting bound is anytime-valid over "
        "the items of this one comparison only: re-running this command on a new checkpoint every epoch is "
        "a new test each time (see rftlab.analysis.multiplicity.repeated_looks_gate). Exit 0 whatever the "
        "decision.",
    )
    ni.add_argument("--treatment", required=True, help="per-item JSONL of the treatment arm")
    ni.add_argument("--baseline", required=True, help="per-item JSONL of the baseline arm")
    ni.add_argument(
        "--margin",
        type=number(gt=0, lt=1, note="per-item differences lie in [-1, 1], and the threshold is -margin"),
        required=True,
        help="noninferiority margin delta, 0 < delta < 1 (0.03 = 3 points; differences lie in [-1, 1])",
    )
    ni.add_argument(
        "--alpha", type=number(gt=0, lt=0.5), default=0.05, help="one-sided alpha in (0, 0.5) (default 0.05)"
    )
    ni.add_argument(
        "--seed",
        type=NON_NEGATIVE_INT,
        default=None,
        help=f"permutation seed for the order-dependent bounds (default {DEFAULT_SEED}); any other seed "
        "labels the result exploratory (a decision uses the seed its spec pre-registers)",
    )
    ni.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ni.set_defaults(func=noninferiority_command)

    trend = commands.add_parser(
        "trend",
        help="OLS/Theil-Sen slope and early/late halves of one metric over epochs",
        description="Fits y = a + b*x over one point per x (rows sharing an x are averaged). x defaults to "
        "'epoch' when present, else 'step'. With --epsilon, reports both whether the slope is flat within "
        "+-epsilon (TOST) and whether it differs from zero.",
    )
    trend.add_argument("--metrics", required=True, help="metrics.jsonl (one row per step/epoch)")
    trend.add_argument("--metric", required=True, help="metric column to fit")
    trend.add_argument("--x", default=None, help="x column (default: epoch if present, else step)")
    trend.add_argument(
        "--hac-maxlags",
        type=NON_NEGATIVE_INT,
        default=None,
        help="Newey-West (HAC) standard errors with these lags (0 <= lags < number of points)",
    )
    trend.add_argument(
        "--epsilon",
        type=number(gt=0),
        default=None,
        help="declared flatness band (finite, > 0): TOST on the slope",
    )
    trend.add_argument("--json", action="store_true", help="print JSON instead of a table")
    trend.set_defaults(func=trend_command)

    rule = commands.add_parser(
        "decision-rule",
        help="evaluate a spec's pre-registered decision_rule on treatment and baseline per-item files",
        description="Evaluates the spec's decision_rule block. Order-dependent methods (paired_betting, "
        "paired_plugin_empirical_bernstein) use the rule's pre-registered 'permutation_seed'; the output "
        "records that seed and the spec file's SHA-256.",
    )
    rule.add_argument("--spec", required=True, help="spec JSON with a 'decision_rule' block (or a bare rule)")
    rule.add_argument("--treatment", required=True, help="per-item JSONL of the treatment arm")
    rule.add_argument("--baseline", required=True, help="per-item JSONL of the baseline arm")
    rule.add_argument(
        "--seed",
        type=NON_NEGATIVE_INT,
        default=None,
        help="optional: must equal the spec's decision_rule.permutation_seed (refused otherwise)",
    )
    rule.add_argument("--json", action="store_true", help="print JSON instead of a table")
    rule.set_defaults(func=decision_rule_command)


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:+.{digits}f}"


def noninferiority_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.io import load_paired_items
    from rftlab.analysis.noninferiority import ORDER_DEPENDENT, paired_noninferiority

    seed = DEFAULT_SEED if args.seed is None else args.seed
    exploratory = seed != DEFAULT_SEED
    try:
        items = load_paired_items(args.treatment, args.baseline)
        report = paired_noninferiority(
            items.treatment, items.baseline, margin=args.margin, alpha=args.alpha, permutation_seed=seed
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    note = (
        f"exploratory: permutation seed {seed} is not the default {DEFAULT_SEED}; trying seeds and keeping "
        "a pass inflates the error of the order-dependent bounds (a decision uses the seed its spec "
        "pre-registers: 'rftlab stats decision-rule')"
        if exploratory
        else ""
    )
    if args.json:
        out = report.to_dict()
        out["exploratory"] = exploratory
        out["seed_note"] = note
        print_json(out)
        return 0
    one_sided = f"{1 - args.alpha:.4g}"
    two_sided = f"{1 - 2 * args.alpha:.4g}"
    print(
        f"paired noninferiority: treatment {args.treatment} vs baseline {args.baseline}\n"
        f"n = {report.n} items, mean difference = {report.mean_difference:+.4f}, margin = {args.margin:g} "
        f"(threshold {-args.margin:+g}), one-sided alpha = {args.alpha:g}\n"
        f"lower, upper: each a one-sided {one_sided} bound; [lower, upper]: a two-sided {two_sided} interval\n"
        f"permutation seed {seed} (order-dependent bounds: {', '.join(sorted(ORDER_DEPENDENT))})"
        + (" -- EXPLORATORY" if exploratory else "")
        + "\n"
    )
    print(
        f"{'method':<28} {'lower(1s ' + one_sided + ')':>15} {'upper(1s ' + one_sided + ')':>15}  "
        f"{'decision':<14} validity"
    )
    for name, bound in report.bounds.items():
        print(
            f"{name:<28} {_fmt(bound.lower):>15} {_fmt(bound.upper):>15}  {bound.decision:<14} {bound.validity}"
            + (f" [{bound.note}]" if bound.note else "")
        )
    print(f"\ndecision (pre-registered, {report.decision_method}): {report.decision}")
    if exploratory:
        print(note)
    return 0


def trend_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.io import load_metric_series
    from rftlab.analysis.trends import fit_trend, slope_flatness

    try:
        x, y, x_name, n_rows = load_metric_series(args.metrics, args.metric, args.x)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.hac_maxlags is not None and args.hac_maxlags >= x.size:
        raise UsageError(
            f"--hac-maxlags {args.hac_maxlags} must be smaller than the {x.size} points of {args.metric!r} "
            f"in {args.metrics} (a few lags, far fewer than the points)"
        )
    try:
        fit = fit_trend(x, y, hac_maxlags=args.hac_maxlags)
        flatness = slope_flatness(fit, args.epsilon) if args.epsilon is not None else None
    except ValueError as exc:
        raise UsageError(f"{args.metrics}: {exc}") from None
    out = {"metric": args.metric, "x": x_name, "rows_used": n_rows, **fit.to_dict()}
    out["slope_ci_sidedness"] = f"two-sided {fit.level:.0%} interval"
    if flatness is not None:
        out["flatness"] = flatness.to_dict()
    if args.json:
        print_json(out)
        return 0
    lo, hi = fit.slope_ci
    print(f"trend of {args.metric} over {x_name}: n = {fit.n} points ({n_rows} rows), SE {fit.se_type}")
    print(
        f"  slope      {fit.slope:+.5g}  two-sided {fit.level:.0%} CI [{lo:+.5g}, {hi:+.5g}]  "
        f"p = {fit.p_value:.3g}  R² = {fit.r2:.3f}"
    )
    print(
        f"  Theil-Sen  {fit.theil_sen_slope:+.5g}  CI [{fit.theil_sen_ci[0]:+.5g}, {fit.theil_sen_ci[1]:+.5g}]"
    )
    print(f"  early {fit.early:.5g}  late {fit.late:.5g}  delta {fit.delta:+.5g}")
    if flatness is not None:
        print(
            f"  flat within ±{flatness.epsilon:g} (TOST p = {flatness.tost_p_value:.3g}): "
            f"{'yes' if flatness.flat_within_epsilon else 'no'}; slope differs from 0: "
            f"{'yes, ' + flatness.direction if flatness.differs_from_zero else 'no'}"
        )
        print(f"  verdict: {flatness.label}")
    return 0


def decision_rule_command(args: argparse.Namespace) -> int:
    from rftlab.analysis.decision_rules import SeedMismatchError, evaluate_decision_rule_file
    from rftlab.analysis.io import validation_message

    try:
        result = evaluate_decision_rule_file(
            args.spec, args.treatment, args.baseline, permutation_seed=args.seed
        )
    except SeedMismatchError as exc:
        raise UsageError(f"--{exc} (spec {args.spec})") from None
    except (ValueError, OSError) as exc:
        message = validation_message(exc)
        if not message.startswith(("spec ", str(args.spec))) and hasattr(exc, "errors"):
            message = f"spec {args.spec}: decision_rule: {message}"
        raise UsageError(message) from None
    if args.json:
        print_json(result.to_dict())
        return 0
    seed = (
        f"permutation seed {result.permutation_seed} (pre-registered in the spec)"
        if result.order_dependent
        else "permutation seed: none (the method does not depend on item order)"
    )
    print(f"decision rule of {args.spec}\n  spec sha256 {result.spec_sha256}\n  {result.method}, {seed}")
    print(
        f"  lower, upper: each a one-sided {1 - result.alpha:.4g} bound; "
        f"[lower, upper]: a two-sided {1 - 2 * result.alpha:.4g} interval"
    )
    for c in result.criteria:
        print(
            f"  {c.id}: {c.method} n={c.n} mean={c.statistic_mean:+.4f} lower={_fmt(c.lower)} "
            f"upper={_fmt(c.upper)} margin={c.margin:+g} -> {c.decision}" + (f" [{c.note}]" if c.note else "")
        )
    print(f"decision: {result.decision}")
    return 0
