"""Poker summaries (docs/poker.md §B.6, docs/statistics.md §6): BB per hand by stage and overall with
intervals over deals, early/late gains, both RFT rewards with standard errors, and paired comparisons of two
strategies over the same deals.

The replication unit is the **deal**. On a schedule it is the hand id: with several permuted runs the same
deals recur in another order, so a deal's result is first averaged over runs and intervals are taken over
deals. In RFT mode it is the rollout's row id, whose opponent and 16 hands every strategy meets alike
(row-shared). Two strategies are compared **paired** — the difference on each deal — with a seeded
bootstrap over deals (hand results are heavy-tailed: one stack-sized pot can be 100 BB), the exact sign
test and Wilcoxon's signed-rank test beside it (``rftlab.analysis.paired``): the sign test ignores the size
of a difference, the signed-rank test uses it only through its rank, the bootstrap uses it in full.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import product
from typing import Any

import numpy as np

from rftlab.analysis.display import interval, number, one_row
from rftlab.analysis.intervals import normal_mean_interval
from rftlab.analysis.paired import DEFAULT_REPS, bootstrap_mean_interval, sign_test, wilcoxon_signed_rank

REWARD_COLUMNS = {"reward_mean_instance": "mean-instance", "reward_gain": "gain"}


def _interval(values: list[float]) -> dict[str, Any]:
    mean, low, high = normal_mean_interval(values)
    return {"hands": len(values), "bb_per_hand": mean, "ci95": [low, high]}


def bb_summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"overall": {...}, "stages": [{stage, opponent, hands, bb_per_hand, ci95}, ...]}`` from
    ``rollout.poker_play.hand_rows`` rows; means over deals, each deal averaged over runs."""
    per_deal: dict[str, list[float]] = defaultdict(list)
    stage_of: dict[str, tuple[int, str]] = {}
    for row in rows:
        per_deal[row["hand_id"]].append(float(row["bb"]))
        stage_of[row["hand_id"]] = (int(row["stage"]), str(row["opponent"]))
    if not per_deal:
        raise ValueError("no hands to summarise")
    deal_means = {h: sum(v) / len(v) for h, v in per_deal.items()}
    stages: dict[tuple[int, str], list[float]] = defaultdict(list)
    for hand_id, value in deal_means.items():
        stages[stage_of[hand_id]].append(value)
    return {
        "overall": _interval(list(deal_means.values())),
        "runs": max(len(v) for v in per_deal.values()),
        "stages": [
            {"stage": k + 1, "opponent": name, **_interval(vals)}
            for (k, name), vals in sorted(stages.items())
        ],
    }


def stage_gains(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per run and stage, the later half's mean BB minus the earlier half's, in play order — the
    within-opponent learning signal (a memoryless policy's expected gain is zero)."""
    by: dict[tuple[Any, int, str], list[tuple[int, float]]] = defaultdict(list)
    for row in rows:
        by[(row["run"], int(row["stage"]), str(row["opponent"]))].append(
            (int(row["position"]), float(row["bb"]))
        )
    out = []
    for (run, stage, opponent), items in sorted(by.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        values = [bb for _, bb in sorted(items)]
        half = len(values) // 2
        if half == 0:
            continue
        early = sum(values[:half]) / half
        late = sum(values[half:]) / (len(values) - half)
        out.append({"run": run, "stage": stage + 1, "opponent": opponent, "early": early, "late": late,
                    "gain": late - early})  # fmt: skip
    return out


def rft_episode_rows(trajectories: Iterable[Any]) -> list[dict[str, Any]]:
    """One row per RFT-mode episode: opponent, BB/hand, both evaluator rewards (docs/poker.md §B.3 gain-based and the
    B.5 mean-instance rubric), illegal and forced actions."""
    from rftlab.rewards.poker import gain_reward, mean_instance_reward

    rows = []
    for traj in trajectories:
        m = traj.metrics
        hand_bb = list(m["hand_bb"])
        gain = gain_reward(hand_bb, m["illegal_actions"])
        mean = mean_instance_reward(hand_bb, m["illegal_actions"])
        rows.append(
            {
                "row_id": traj.key,
                "opponent": m["opponent"],
                "bb_per_hand": m["bb_per_hand"],
                "reward_gain": gain["score"],
                "memory_gain": gain["memory_gain"],
                "reward_mean_instance": mean["score"],
                "illegal_actions": m["illegal_actions"],
                "forced_actions": m["forced_actions"],
            }
        )
    return rows


def opponent_table(rows: Iterable[Mapping[str, Any]], value: str = "bb_per_hand") -> list[dict[str, Any]]:
    """Mean of ``value`` per opponent with a 95% interval over episodes (each episode is its own deal
    set, so episodes are independent)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        groups[str(row["opponent"])].append(float(row[value]))
    out = []
    for opponent, values in sorted(groups.items()):
        mean, low, high = normal_mean_interval(values)
        out.append({"opponent": opponent, "episodes": len(values), value: mean, "ci95": [low, high]})
    return out


def deal_results(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{hand_id: {"stage", "opponent", "bb", "runs"}}``: each deal's BB averaged over the runs that
    played it (``hand_rows`` rows)."""
    per_deal: dict[str, list[float]] = defaultdict(list)
    where: dict[str, tuple[int, str]] = {}
    for row in rows:
        per_deal[row["hand_id"]].append(float(row["bb"]))
        where[row["hand_id"]] = (int(row["stage"]) + 1, str(row["opponent"]))
    return {
        h: {"stage": where[h][0], "opponent": where[h][1], "bb": sum(v) / len(v), "runs": len(v)}
        for h, v in per_deal.items()
    }


def _paired_row(label: dict[str, Any], diffs: Sequence[float], reps: int, seed: int, strata=None):
    boot = bootstrap_mean_interval(diffs, reps=reps, seed=seed, strata=strata)
    sign = sign_test(diffs)
    ranked = wilcoxon_signed_rank(diffs)
    return {**label, "deals": boot.n, "mean": boot.mean, "low": boot.low, "high": boot.high, "se": boot.se,
            "better": sign.positive, "worse": sign.negative, "ties": sign.ties, "sign_p": sign.p_value,
            "wilcoxon_p": ranked.p_value, "wilcoxon_method": ranked.method}  # fmt: skip


def paired_schedule_table(
    schedule_rows: Mapping[str, Iterable[Mapping[str, Any]]],
    pairs: Sequence[tuple[str, str]],
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """``a − b`` BB/hand over the same schedule deals, by stage and overall, for each ``(a, b)`` in
    ``pairs``. Per row: deals, mean difference, percentile bootstrap 95% interval and standard error
    (overall: stratified by stage, so every resample keeps the schedule's stage sizes), the sign test
    (``better`` = deals where ``a`` won more, ``worse``, ``ties``, exact two-sided ``sign_p``) and Wilcoxon's
    signed-rank test (``wilcoxon_p``, ``wilcoxon_method``: ``paired.wilcoxon_signed_rank``).
    ``ValueError`` when the two strategies did not play the same deals."""
    deals = {name: deal_results(rows) for name, rows in schedule_rows.items()}
    out = []
    for a, b in pairs:
        if deals[a].keys() != deals[b].keys():
            raise ValueError(f"{a} and {b} did not play the same deals: a paired comparison needs them")
        ids = sorted(deals[a], key=lambda h: (deals[a][h]["stage"], h))
        diffs = {h: deals[a][h]["bb"] - deals[b][h]["bb"] for h in ids}
        for stage in sorted({deals[a][h]["stage"] for h in ids}):
            members = [h for h in ids if deals[a][h]["stage"] == stage]
            label = {"comparison": f"{a} − {b}", "stage": stage, "opponent": deals[a][members[0]]["opponent"]}
            out.append(_paired_row(label, [diffs[h] for h in members], reps, seed))
        label = {"comparison": f"{a} − {b}", "stage": "all", "opponent": "all"}
        strata = [deals[a][h]["stage"] for h in ids]
        out.append(_paired_row(label, [diffs[h] for h in ids], reps, seed, strata=strata))
    return out


def paired_rft_table(
    rft_rows: Mapping[str, Iterable[Mapping[str, Any]]],
    pairs: Sequence[tuple[str, str]],
    value: str = "reward_mean_instance",
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """``a − b`` of an episode column (a reward, ``bb_per_hand``) over the same RFT rows (row-shared: both
    met the row's opponent and cards), per opponent and over all rows; columns as
    ``paired_schedule_table`` (the unit is the row, counted in ``deals``)."""
    by_row = {name: {str(r["row_id"]): r for r in rows} for name, rows in rft_rows.items()}
    out = []
    for a, b in pairs:
        if by_row[a].keys() != by_row[b].keys():
            raise ValueError(f"{a} and {b} did not play the same rows: a paired comparison needs them")
        ids = sorted(by_row[a])
        for row_id in ids:
            if by_row[a][row_id]["opponent"] != by_row[b][row_id]["opponent"]:
                raise ValueError(f"row {row_id}: {a} and {b} met different opponents (not row-shared)")
        diffs = {i: float(by_row[a][i][value]) - float(by_row[b][i][value]) for i in ids}
        for opponent in sorted({by_row[a][i]["opponent"] for i in ids}):
            members = [i for i in ids if by_row[a][i]["opponent"] == opponent]
            label = {"comparison": f"{a} − {b}", "measure": value, "opponent": opponent}
            out.append(_paired_row(label, [diffs[i] for i in members], reps, seed))
        label = {"comparison": f"{a} − {b}", "measure": value, "opponent": "all"}
        out.append(_paired_row(label, [diffs[i] for i in ids], reps, seed))
    return out


def reward_table(
    rft_rows: Mapping[str, Iterable[Mapping[str, Any]]],
    columns: Sequence[str] = tuple(REWARD_COLUMNS),
    *,
    by_opponent: bool = False,
) -> list[dict[str, Any]]:
    """Mean of each reward column per strategy (and opponent), its standard error over rollouts and a 95%
    interval (``normal_mean_interval``: Student's t below 30 rollouts). Rollouts of one strategy are
    independent deal sets, so they are the unit."""
    out = []
    for name, rows in rft_rows.items():
        rows = list(rows)
        groups = {"all": rows}
        if by_opponent:
            groups = defaultdict(list)
            for r in rows:
                groups[str(r["opponent"])].append(r)
        for opponent in sorted(groups):
            for column in columns:
                values = [float(r[column]) for r in groups[opponent]]
                mean, low, high = normal_mean_interval(values)
                n = len(values)
                sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else float("nan")
                out.append({"strategy": name, "reward": REWARD_COLUMNS.get(column, column), "opponent": opponent,
                            "rollouts": n, "mean": mean, "se": sd / n**0.5, "low": low, "high": high})  # fmt: skip
    return out


def pair_ordering(
    rows_a: Iterable[Mapping[str, Any]], rows_b: Iterable[Mapping[str, Any]], value: str
) -> dict[str, dict[str, float]]:
    """How often a GRPO group holding one rollout of ``a`` and one of ``b`` ranks ``a`` first, by how the
    two were dealt: ``row_shared`` pairs the two on the same row (same opponent, same cards), ``per_rollout``
    pairs every row of ``a`` with every *other* row of ``b`` (each candidate draws its own opponent and
    cards, as upstream's ``os.urandom`` draw did, docs/poker.md §B.1). Each entry: shares of pairs where
    ``a`` scores higher, lower, or the same on ``value``, and the number of pairs."""
    a = {str(r["row_id"]): float(r[value]) for r in rows_a}
    b = {str(r["row_id"]): float(r[value]) for r in rows_b}
    if a.keys() != b.keys():
        raise ValueError("pair_ordering needs both strategies on the same rows")

    def shares(pairs: list[tuple[float, float]]) -> dict[str, float]:
        n = len(pairs)
        higher = sum(1 for x, y in pairs if x > y)
        lower = sum(1 for x, y in pairs if x < y)
        return {"a_first": higher / n, "b_first": lower / n, "tied": (n - higher - lower) / n, "pairs": n}

    shared = [(a[i], b[i]) for i in a]
    crossed = [(a[i], b[j]) for i, j in product(a, b) if i != j]
    return {"row_shared": shares(shared), "per_rollout": shares(crossed)}


def pair_ordering_interval(
    rows_a: Iterable[Mapping[str, Any]],
    rows_b: Iterable[Mapping[str, Any]],
    value: str,
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, dict[str, float]]:
    """Percentile bootstrap over **rows** of ``pair_ordering``'s ``a_first`` shares and their difference.

    The row is the unit: each replication draws the rows with replacement (``rng.integers`` with
    ``rng = numpy.random.default_rng(seed)``), and recomputes, on the drawn rows, the row-shared share (a
    drawn row's own ``a`` against its own ``b``) and the per-rollout share (every ordered pair of draws that
    are different rows, ``a`` of one against ``b`` of the other — two draws of the same row are the same
    deal, not a per-rollout pair). ``{"row_shared"|"per_rollout"|"difference": {"estimate", "low", "high"}}``
    with ``difference`` = row-shared − per-rollout, the estimates those of ``pair_ordering``."""
    a = {str(r["row_id"]): float(r[value]) for r in rows_a}
    b = {str(r["row_id"]): float(r[value]) for r in rows_b}
    if a.keys() != b.keys():
        raise ValueError("pair_ordering_interval needs both strategies on the same rows")
    if len(a) < 2:
        raise ValueError("pair_ordering_interval needs at least two rows")
    if reps < 2 or not 0.0 < level < 1.0:
        raise ValueError(f"need reps >= 2 and level in (0, 1), got reps={reps}, level={level}")
    ids = sorted(a)
    x = np.array([a[i] for i in ids])
    y = np.array([b[i] for i in ids])
    n = len(ids)
    wins = (x[:, None] > y[None, :]).astype(float)  # wins[i, j]: a on row i beats b on row j
    own = np.diag(wins).copy()
    np.fill_diagonal(wins, 0.0)
    draws = np.random.default_rng(seed).integers(0, n, size=(reps, n))
    weights = np.zeros((reps, n))
    np.add.at(weights, (np.repeat(np.arange(reps), n), draws.ravel()), 1.0)
    shared = weights @ own / n
    pairs = n * n - (weights**2).sum(axis=1)  # ordered pairs of draws that are different rows
    crossed = np.einsum("ri,ij,rj->r", weights, wins, weights) / pairs
    point = pair_ordering(rows_a, rows_b, value)
    estimates = {"row_shared": point["row_shared"]["a_first"], "per_rollout": point["per_rollout"]["a_first"]}
    estimates["difference"] = estimates["row_shared"] - estimates["per_rollout"]
    replicated = {"row_shared": shared, "per_rollout": crossed, "difference": shared - crossed}
    tails = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
    out = {}
    for key, series in replicated.items():
        low, high = np.quantile(series, tails)
        out[key] = {"estimate": estimates[key], "low": float(low), "high": float(high)}
    return out


def luck_spread(rows: Iterable[Mapping[str, Any]], value: str) -> float:
    """Root-mean-square difference of ``value`` between two rollouts of **one** strategy dealt different
    rows: ``sqrt(mean over ordered pairs i ≠ j of (v_i − v_j)²)``, which equals ``√2 ×`` the sample
    standard deviation. Under per-rollout dealing two GRPO candidates of a deterministic strategy differ
    by this much from the deal alone; under row-shared dealing they do not differ at all."""
    values = [float(r[value]) for r in rows]
    n = len(values)
    if n < 2:
        raise ValueError("luck_spread needs at least two rollouts")
    mean = sum(values) / n
    return (2.0 * sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5


def paired_sentence(row: Mapping[str, Any], unit: str = "BB/hand", over: str = "deals") -> str:
    """A paired-difference row (``paired_schedule_table`` / ``paired_rft_table``) as report text: the mean,
    its bootstrap interval, the number of units, the sign test and (when the row has it) Wilcoxon's
    signed-rank p-value."""
    wilcoxon = f", Wilcoxon p = {row['wilcoxon_p']:.2g}" if "wilcoxon_p" in row else ""
    return (
        f"{number(row['mean'], 2, signed=True)} {unit}, 95% bootstrap "
        f"{interval(row['low'], row['high'], signed=True, digits=2)} over {row['deals']} {over}; "
        f"{row['better']} won, {row['worse']} lost, {row['ties']} tied (sign test p = {row['sign_p']:.2g}"
        f"{wilcoxon})"
    )


def excludes_zero(row: Mapping[str, Any]) -> bool:
    """Whether a row's interval (``low``, ``high``) lies wholly on one side of 0."""
    return row["low"] > 0 or row["high"] < 0


def reward_mean_se(rewards: Sequence[Mapping[str, Any]], strategy: str, reward: str) -> str:
    """``mean ± s.e.`` of ``strategy`` under ``reward`` from a ``reward_table``, at 2 decimals."""
    r = one_row(rewards, strategy=strategy, reward=reward)
    return f"{number(r['mean'], 2, signed=True)} ± {number(r['se'], 2)}"
