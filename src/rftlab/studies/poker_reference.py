"""The reference-strategy part of the poker study (``rftlab.studies.poker`` re-exports every name).

``make_strategy`` builds a reference strategy by name. ``schedule_summary`` plays it over a CLBench
schedule. ``reference_study`` plays every reference strategy over a schedule and over RFT-mode rows, plus
the shortcut strategies. ``analyse_reference`` turns what it played into the notebook's typed results:
BB per hand by stage, paired differences, rewards, and how each dealing ranks a pair. Bad input raises
``ValueError``. The family's modules are listed in ``rftlab.studies.poker``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from rftlab.analysis.paired import EquivalenceReading, equivalence_reading
from rftlab.analysis.poker import (
    REWARD_COLUMNS,
    bb_summary,
    excludes_zero,
    luck_spread,
    pair_ordering,
    pair_ordering_interval,
    paired_rft_table,
    paired_schedule_table,
    paired_sentence,
    reward_mean_se,
    reward_table,
    rft_episode_rows,
)
from rftlab.envs.poker import SCHEDULES, PokerQuery, PokerTask
from rftlab.policies.poker.reference import POKER_POLICIES, Exploit, RandomLegal, Sandbag
from rftlab.rollout.episode import transcript
from rftlab.rollout.poker.play import hand_rows, play_rft, play_runs

MAX_RUNS = 5  # a CLBench schedule has five permuted runs
STRATEGIES = ("random", "call", "exploit")
BLIND_COUNTERS = {name: f"blind {name}" for name in Exploit.NAMES}  # assumed opponent -> strategy label
SANDBAG = "sandbag"


def make_strategy(name: str, seed: int = 0, **options: Any):
    """The reference strategy ``name`` (``random``, ``call`` or ``exploit``); ``call`` takes no seed."""
    if name not in POKER_POLICIES:
        raise ValueError(f"unknown strategy {name!r}: choose one of {', '.join(POKER_POLICIES)}")
    if seed < 0:
        raise ValueError("the seed must be >= 0")
    return POKER_POLICIES[name]() if name == "call" else POKER_POLICIES[name](seed=seed, **options)


def schedule_summary(name: str, schedule: str = "default", runs: int = 1, seed: int = 0) -> dict[str, Any]:
    """``name`` played over the first ``runs`` permuted runs of ``schedule``: BB per hand overall and by
    stage, with 95% intervals over deals (``rftlab.analysis.poker.bb_summary``)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r}: choose one of {', '.join(SCHEDULES)}")
    if not 1 <= runs <= MAX_RUNS:
        raise ValueError(f"runs must be between 1 and {MAX_RUNS} (the schedule's permuted runs)")
    policy = make_strategy(name, seed)
    rows = hand_rows(play_runs(policy, schedule=schedule, runs=range(runs), policy_seed=seed))
    return {"policy": name, "schedule": schedule, **bb_summary(rows)}


def rft_row_ids(n: int, prefix: str = "poker") -> list[str]:
    """The RFT dataset's row ids (``rftlab.rollout.poker.dataset``): ``poker_s1000`` … in order."""
    if n < 1:
        raise ValueError(f"rows must be >= 1, got {n}")
    return [f"{prefix}_s{1000 + i}" for i in range(n)]


@dataclass
class ReferenceStudy:
    """What ``reference_study`` played: per strategy, the schedule's hand rows (``hand_rows``) and the RFT
    episodes (``rft_episode_rows``); ``shortcut_rows`` are the RFT episodes of the strategies that show how
    each reward can be earned without memory: the blind counters (``blind Tom`` …: ``Exploit(assume=name)``,
    the counter to one opponent played against whoever is dealt) and ``sandbag`` (random legal in the first
    half of the hands, exploit in the second: ``Sandbag``)."""

    schedule: str
    runs: int
    rows: int
    hands: int
    seed: int
    equity_samples: int
    schedule_rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rft_rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    shortcut_rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # per block ("schedule" or "rft") and strategy label, each episode as chat messages (``transcript``)
    transcripts: dict[tuple[str, str], list[list[dict[str, str]]]] = field(default_factory=dict)


def reference_study(
    *,
    schedule: str = "default",
    runs: int = MAX_RUNS,
    rows: int = 96,
    hands: int = 16,
    seed: int = 0,
    equity_samples: int = 200,
    shortcuts: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ReferenceStudy:
    """Play ``random``, ``call`` and ``exploit`` over ``runs`` permuted runs of ``schedule`` and over
    ``rows`` RFT rows of ``hands`` hands (row-shared: every strategy meets each row's opponent and cards),
    and, with ``shortcuts``, the blind counters and the sandbagger over the same RFT rows. ``progress`` is called with a
    short label before each block (the plays take about a minute at full size)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r}: choose one of {', '.join(SCHEDULES)}")
    if not 1 <= runs <= MAX_RUNS:
        raise ValueError(f"runs must be between 1 and {MAX_RUNS} (the schedule's permuted runs)")
    if hands < 1:
        raise ValueError(f"hands must be >= 1, got {hands}")
    ids = rft_row_ids(rows)
    study = ReferenceStudy(schedule, runs, rows, hands, seed, equity_samples)

    def strategy(name: str, **options: Any):
        if name == "exploit" or options:
            return make_strategy("exploit", seed, samples=equity_samples, **options)
        return make_strategy(name, seed)

    for name in STRATEGIES:
        if progress:
            progress(f"{name}: {runs} run(s) of {schedule}, {rows} RFT rows")
        played = play_runs(strategy(name), schedule=schedule, runs=range(runs), policy_seed=seed)
        study.schedule_rows[name] = hand_rows(played)
        study.transcripts["schedule", name] = [transcript(t) for t in played]
        played = play_rft(strategy(name), ids, hands=hands, policy_seed=seed)
        study.rft_rows[name] = rft_episode_rows(played)
        study.transcripts["rft", name] = [transcript(t) for t in played]
    if shortcuts:
        players = {label: strategy("exploit", assume=assumed) for assumed, label in BLIND_COUNTERS.items()}
        players[SANDBAG] = Sandbag(RandomLegal(seed), strategy("exploit"), switch=hands // 2)
        for label, player in players.items():
            if progress:
                progress(f"{label}: {rows} RFT rows")
            played = play_rft(player, ids, hands=hands, policy_seed=seed)
            study.shortcut_rows[label] = rft_episode_rows(played)
            study.transcripts["rft", label] = [transcript(t) for t in played]
    return study


REFERENCE_EXPERIMENT = "poker_reference"


def _arm_name(block: str, label: str) -> str:
    return f"{block}-{label}".replace(" ", "-")


def _episode_records(study: ReferenceStudy, block: str, label: str) -> list[dict[str, Any]]:
    """The block's episodes of ``label`` as viewer records: the episode's row (RFT) or its run's hands
    summarised (schedule), plus its transcript."""
    messages = study.transcripts[block, label]
    if block == "rft":
        rows = study.rft_rows.get(label) or study.shortcut_rows[label]
        return [
            {**row, "reward": row["reward_mean_instance"], "messages": m}
            for row, m in zip(rows, messages, strict=True)
        ]
    records = []
    for run, m in enumerate(messages):
        hands = [r for r in study.schedule_rows[label] if r["run"] == run]
        bb = sum(r["bb"] for r in hands) / len(hands) if hands else None
        records.append(
            {"row_id": f"{study.schedule}-run{run}", "hands": len(hands), "reward": bb, "messages": m}
        )
    return records


def save_reference_rollouts(study: ReferenceStudy, root: Any = None) -> list[Any]:
    """Keep every episode ``study`` played in the run store (experiment ``poker_reference``, one finished
    run per block and strategy, e.g. arm ``rft-exploit`` or ``schedule-call``) so ``rftlab view`` shows the
    transcripts with their rewards. Runs of the same study settings are reused. Returns the runs."""
    from rftlab.runs import RunStore
    from rftlab.runs.paths import runs_root

    store = RunStore(root if root is not None else runs_root())
    settings = {
        "schedule": study.schedule, "runs": study.runs, "rows": study.rows, "hands": study.hands,
        "seed": study.seed, "equity_samples": study.equity_samples,
    }  # fmt: skip
    saved = []
    for block, label in study.transcripts:
        spec = {**settings, "block": block, "strategy": label}
        run, _ = store.record_rollouts(
            REFERENCE_EXPERIMENT,
            _arm_name(block, label),
            spec,
            lambda b=block, n=label: _episode_records(study, b, n),
        )
        saved.append(run)
    return saved


# ------------------------------------------------------------------------------ typed results

SCHEDULE_PAIRS = (("exploit", "call"), ("random", "call"), ("exploit", "random"))
RFT_PAIRS = (
    ("exploit", "call"),
    ("random", "call"),
    *[("exploit", label) for label in BLIND_COUNTERS.values()],
    (SANDBAG, "exploit"),
)
LUCK_VALUE = "reward_mean_instance"  # the reward whose spread from the deal alone the notebook shows


@dataclass(frozen=True)
class PairedDifference:
    """One row of ``paired_schedule_table`` or ``paired_rft_table``: ``a − b`` over the same deals.

    ``stage`` is set on a schedule row, ``measure`` (the episode column) on an RFT row.
    """

    comparison: str
    opponent: str
    deals: int
    mean: float
    low: float
    high: float
    se: float
    better: int
    worse: int
    ties: int
    sign_p: float
    wilcoxon_p: float
    wilcoxon_method: str
    stage: int | str | None = None
    measure: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PairedDifference:
        return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in row})

    @property
    def excludes_zero(self) -> bool:
        """Whether the bootstrap interval lies wholly on one side of 0."""
        return excludes_zero(asdict(self))

    def sentence(self, unit: str = "BB/hand", over: str = "deals") -> str:
        """The row as report text (``rftlab.analysis.poker.paired_sentence``)."""
        return paired_sentence(asdict(self), unit, over)


def paired_differences(rows: Sequence[Mapping[str, Any]]) -> tuple[PairedDifference, ...]:
    return tuple(PairedDifference.from_row(r) for r in rows)


def find_pair(rows: Sequence[PairedDifference], comparison: str, **match: object) -> PairedDifference:
    """The one row of ``rows`` for ``comparison`` whose fields equal ``match``; else ``ValueError``."""
    found = [
        r for r in rows if r.comparison == comparison and all(getattr(r, k) == v for k, v in match.items())
    ]
    if len(found) != 1:
        raise ValueError(f"{len(found)} rows match {comparison!r} {match}, expected exactly one")
    return found[0]


@dataclass(frozen=True)
class StageBB:
    """BB per hand of one strategy in one stage (or over the schedule: stage and opponent ``all``), with a
    95% interval over deals."""

    stage: int | str
    opponent: str
    hands: int
    bb_per_hand: float
    low: float
    high: float


@dataclass(frozen=True)
class StrategyBB:
    """``bb_summary`` of one strategy's schedule hands: per stage and overall."""

    stages: tuple[StageBB, ...]
    overall: StageBB
    runs: int

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> StrategyBB:
        def stage(s: Mapping[str, Any], **label: Any) -> StageBB:
            s = {**s, **label}
            low, high = s["ci95"]
            return StageBB(s["stage"], s["opponent"], s["hands"], s["bb_per_hand"], low, high)

        overall = stage(summary["overall"], stage="all", opponent="all")
        return cls(tuple(stage(s) for s in summary["stages"]), overall, summary["runs"])


@dataclass(frozen=True)
class RewardSummary:
    """One row of ``reward_table``: a strategy's mean reward (per opponent or ``all``) over rollouts."""

    strategy: str
    reward: str
    opponent: str
    rollouts: int
    mean: float
    se: float
    low: float
    high: float

    def mean_se(self) -> str:
        """``mean ± s.e.`` at 2 decimals (``rftlab.analysis.poker.reward_mean_se``)."""
        return reward_mean_se([asdict(self)], self.strategy, self.reward)


@dataclass(frozen=True)
class OrderShares:
    """``pair_ordering`` under one dealing: shares of pairs where ``exploit`` or ``call`` ranks first."""

    dealing: str
    a_first: float
    b_first: float
    tied: float
    pairs: int


@dataclass(frozen=True)
class ShareInterval:
    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class OrderingInterval:
    """``pair_ordering_interval``: the ``exploit``-first share under each dealing and their difference."""

    row_shared: ShareInterval
    per_rollout: ShareInterval
    difference: ShareInterval


@dataclass(frozen=True)
class ReferenceAnalysis:
    """The reference study's numbers as the notebook shows them (``analyse_reference``).

    ``rft_pairs``, ``ordering`` and ``ordering_interval`` are keyed by reward column
    (``REWARD_COLUMNS``). ``spread`` is ``luck_spread`` of the mean-instance reward per strategy.
    """

    study: ReferenceStudy
    reps: int
    seed: int
    schedule_bb: dict[str, StrategyBB]
    schedule_pairs: tuple[PairedDifference, ...]
    rft_pairs: dict[str, tuple[PairedDifference, ...]]
    rewards: tuple[RewardSummary, ...]
    bb_by_opponent: tuple[RewardSummary, ...]
    ordering: dict[str, tuple[OrderShares, ...]]
    ordering_interval: dict[str, OrderingInterval]
    spread: dict[str, float]

    @property
    def rft_strategies(self) -> tuple[str, ...]:
        """Every strategy played on the RFT rows: the references, then the shortcuts."""
        return (*self.study.rft_rows, *self.study.shortcut_rows)

    def schedule_pair(self, comparison: str, stage: int | str = "all") -> PairedDifference:
        return find_pair(self.schedule_pairs, comparison, stage=stage)

    def rft_pair(self, comparison: str, value: str = LUCK_VALUE, opponent: str = "all") -> PairedDifference:
        return find_pair(self.rft_pairs[value], comparison, opponent=opponent)

    def reward(self, strategy: str, reward: str) -> RewardSummary:
        """The ``reward`` (``mean-instance`` or ``gain``) row of ``strategy`` over all opponents."""
        found = [r for r in self.rewards if r.strategy == strategy and r.reward == reward]
        if len(found) != 1:
            raise ValueError(f"{len(found)} reward rows for {strategy!r}, {reward!r}")
        return found[0]

    @property
    def blind(self) -> dict[str, PairedDifference]:
        """``exploit`` − each blind counter, mean-instance reward, over all rows."""
        return {label: self.rft_pair(f"exploit − {label}") for label in BLIND_COUNTERS.values()}

    @property
    def best_blind(self) -> str:
        """The blind counter closest to ``exploit`` (the smallest mean difference)."""
        blind = self.blind
        return min(blind, key=lambda label: blind[label].mean)

    @property
    def blind_resolved(self) -> EquivalenceReading:
        """What the best blind counter's 95% bootstrap interval resolves."""
        best = self.blind[self.best_blind]
        return equivalence_reading(best.low, best.high)


def _ordering_interval(parts: Mapping[str, Mapping[str, float]]) -> OrderingInterval:
    share = {k: ShareInterval(v["estimate"], v["low"], v["high"]) for k, v in parts.items()}
    return OrderingInterval(share["row_shared"], share["per_rollout"], share["difference"])


def analyse_reference(study: ReferenceStudy, *, reps: int, seed: int = 0) -> ReferenceAnalysis:
    """Every number the notebook shows about ``study``: seeded bootstraps of ``reps`` replications."""
    boot = {"reps": reps, "seed": seed}
    rft_all = {**study.rft_rows, **study.shortcut_rows}
    exploit, call = study.rft_rows["exploit"], study.rft_rows["call"]
    ordering: dict[str, tuple[OrderShares, ...]] = {}
    for value in REWARD_COLUMNS:
        shares = pair_ordering(exploit, call, value)
        ordering[value] = tuple(
            OrderShares(mode, v["a_first"], v["b_first"], v["tied"], int(v["pairs"]))
            for mode, v in shares.items()
        )
    return ReferenceAnalysis(
        study=study,
        reps=reps,
        seed=seed,
        schedule_bb={
            name: StrategyBB.from_summary(bb_summary(rows)) for name, rows in study.schedule_rows.items()
        },
        schedule_pairs=paired_differences(paired_schedule_table(study.schedule_rows, SCHEDULE_PAIRS, **boot)),
        rft_pairs={
            v: paired_differences(paired_rft_table(rft_all, RFT_PAIRS, v, **boot)) for v in REWARD_COLUMNS
        },
        rewards=tuple(RewardSummary(**r) for r in reward_table(rft_all)),
        bb_by_opponent=tuple(
            RewardSummary(**r) for r in reward_table(rft_all, ["bb_per_hand"], by_opponent=True)
        ),
        ordering=ordering,
        ordering_interval={
            v: _ordering_interval(pair_ordering_interval(exploit, call, v, **boot)) for v in REWARD_COLUMNS
        },
        spread={name: luck_spread(rows, LUCK_VALUE) for name, rows in study.rft_rows.items()},
    )


@dataclass(frozen=True)
class ScheduleOpponent:
    """One opponent of a schedule: its variant, its display name and the stages (from 1) it plays."""

    variant: str
    name: str
    stages: tuple[int, ...]


def schedule_opponents(schedule: str) -> tuple[ScheduleOpponent, ...]:
    """The opponents of ``schedule`` in order of first appearance."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r}: choose one of {', '.join(SCHEDULES)}")
    stages = SCHEDULES[schedule]
    names = {st.variant: st.opponent_name for st in stages}
    return tuple(
        ScheduleOpponent(v, names[v], tuple(k + 1 for k, st in enumerate(stages) if st.variant == v))
        for v in dict.fromkeys(st.variant for st in stages)
    )


def first_decision(schedule: str) -> PokerQuery:
    """The first decision of ``schedule``, as the model sees it."""
    query = PokerTask(schedule).reset()
    if query is None:
        raise ValueError(f"schedule {schedule!r} deals no hand")
    return query
