"""The exploitable-poker study: the driver the notebook (``06_poker``) and the CLI (``rftlab poker``) both call.

``make_strategy`` builds a reference strategy by name, ``schedule_summary`` plays it over a CLBench
schedule and summarises BB per hand with intervals over deals, ``reference_study`` plays every reference
strategy over a schedule and over RFT-mode rows, plus the shortcut strategies (blind counters, which ignore
the opponent's name, and the position-aware sandbagger) for the notebook's tables, ``fireworks_launcher`` is the Fireworks launcher with the poker preflight and
dataset rows (what ``rftlab poker launch`` runs and the notebook's plan shows), ``launch_arm`` runs an arm spec
on the Fireworks or the Tinker backend (``rftlab poker launch --backend tinker``: GRPO of a language model
through the Tinker API). Bad input raises ``ValueError``.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- rewards: ``rftlab.rewards.poker``
- envs: ``rftlab.envs.poker`` (engine, opponents, schedules, prompt rendering, task, env)
- policies: ``rftlab.policies.poker`` (reference strategies, chat adapter)
- rollout: ``rftlab.rollout.poker`` (play, dataset rows, the McpGym path's chat and session, McpGym server,
  scoring, what the entries share);
  entry modules ``rftlab.rollout.eval_entries.poker_mcp_eval`` (mean-instance reward),
  ``rftlab.rollout.eval_entries.poker_mcp_gain_eval`` (gain reward),
  ``rftlab.rollout.eval_entries.poker_mcp_server``
- training: ``rftlab.training.poker`` (the task as a tinker-cookbook RL env: ``cookbook_env``; GRPO of a
  language model through the Tinker API: ``tinker_rl``)
- launch: ``rftlab.launch.poker`` (arm spec and the Prime → Fireworks mapping, preflight, Tinker launcher)
- analysis: ``rftlab.analysis.poker``
- studies: ``rftlab.studies.poker``
- cli: ``rftlab.cli.poker``
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rftlab.analysis.poker import bb_summary, rft_episode_rows
from rftlab.envs.poker import SCHEDULES
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


def fireworks_launcher(account_id: str | None = None):
    """The Fireworks launcher of poker arms: the poker preflight and the poker dataset rows."""
    from rftlab.launch.fireworks import FireworksLauncher
    from rftlab.launch.poker.preflight import poker_preflight
    from rftlab.rollout.poker.dataset import dataset_rows

    return FireworksLauncher(
        account_id=account_id,
        preflight=poker_preflight,
        dataset_rows=lambda s: dataset_rows(s.rows, hands=s.hands, thinking=s.thinking, reward=s.reward),
    )


@dataclass(frozen=True)
class ArmLaunch:
    """What launching an arm gave: the run, its status, and whether a finished run was reused."""

    ref: Any
    status: Any
    reused: bool


def launch_arm(
    spec: Any,
    backend: str | None = None,
    root: Any = None,
    resume: bool = True,
    force: bool = False,
    account_id: str | None = None,
    provenance: dict[str, Any] | None = None,
    **launcher_options: Any,
) -> ArmLaunch:
    """Run one poker arm spec (a ``PokerArmSpec`` or its file) on ``backend`` (``None``: the spec's
    ``backend``, else ``fireworks``): reuse a finished run of the same spec, resume an unfinished one (unless
    ``resume`` is false), or start a new one (always, with ``force``). ``launcher_options`` go to the Tinker
    launcher (``base_model``, ``service``, ``close_session``, implementation settings such as
    ``max_tokens``). ``provenance`` (the ``--set`` overrides that made the spec) is recorded in a new tinker
    run's ``provider``."""
    from rftlab.launch.poker.spec import PokerArmSpec, load_poker_arm_spec
    from rftlab.launch.poker.tinker import PokerTinkerLauncher
    from rftlab.runs import RunStore
    from rftlab.runs.paths import runs_root

    spec = spec if isinstance(spec, PokerArmSpec) else load_poker_arm_spec(spec)
    backend = backend or spec.backend or "fireworks"
    if backend not in ("fireworks", "tinker"):
        raise ValueError(f"unknown poker backend {backend!r}: use 'fireworks' or 'tinker'")
    if launcher_options and backend != "tinker":
        raise ValueError(f"launcher options {sorted(launcher_options)} are for the tinker backend only")
    root = runs_root() if root is None else root
    if backend == "tinker":
        launcher: Any = PokerTinkerLauncher(progress=None, **launcher_options)
        launcher.provenance = dict(provenance or {})
    else:
        launcher = fireworks_launcher(account_id)
    before = RunStore(root).find_run(spec.experiment, spec.arm, spec.to_dict(), "finished", backend)
    ref = launcher.launch(spec, root=root, resume=resume, **({"force": True} if force else {}))
    reused = before is not None and before.path == ref.path and not force
    return ArmLaunch(ref, launcher.poll(ref), reused)
