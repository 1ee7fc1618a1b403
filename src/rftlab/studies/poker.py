"""The exploitable-poker study: the driver the notebook (``06_poker``) and the CLI (``rftlab poker``) both call.

``make_strategy`` builds a reference strategy by name, ``schedule_summary`` plays it over a CLBench
schedule and summarises BB per hand with intervals over deals, ``reference_study`` plays every reference
strategy over a schedule and over RFT-mode rows, plus the shortcut strategies (blind counters, which ignore
the opponent's name, and the position-aware sandbagger) for the notebook's tables, and
``analyse_reference`` gives those tables as typed results. These live in ``rftlab.studies.poker_reference``
and are re-exported here. ``fireworks_launcher`` is the Fireworks launcher with the poker preflight and
dataset rows (what ``rftlab poker launch`` runs and ``arm_plans`` shows), ``launch_arm`` runs an arm spec
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
- studies: ``rftlab.studies.poker`` (this driver), ``rftlab.studies.poker_reference`` (the reference study)
- cli: ``rftlab.cli.poker``
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rftlab.analysis.poker import REWARD_COLUMNS
from rftlab.envs.poker import R_MAX
from rftlab.runs.paths import notebook_runs_root
from rftlab.studies.poker_reference import (
    BLIND_COUNTERS,
    MAX_RUNS,
    REFERENCE_EXPERIMENT,
    SANDBAG,
    STRATEGIES,
    PairedDifference,
    ReferenceAnalysis,
    ReferenceStudy,
    analyse_reference,
    find_pair,
    first_decision,
    make_strategy,
    paired_differences,
    reference_study,
    rft_row_ids,
    save_reference_rollouts,
    schedule_opponents,
    schedule_summary,
)
from rftlab.types import resolve

if TYPE_CHECKING:
    import pandas as pd

    from rftlab.launch.poker.spec import PokerArmSpec

# what notebook 06, the CLI and the tests take from here besides the driver's own functions: the reference
# study (``rftlab.studies.poker_reference``), two constants of lower layers and the notebooks' run store
__all__ = [
    "BLIND_COUNTERS", "MAX_RUNS", "R_MAX", "REFERENCE_EXPERIMENT", "REWARD_COLUMNS", "SANDBAG", "STRATEGIES",
    "PairedDifference", "ReferenceAnalysis", "ReferenceStudy", "analyse_reference", "first_decision",
    "make_strategy", "notebook_runs_root", "reference_study", "rft_row_ids", "save_reference_rollouts",
    "schedule_opponents", "schedule_summary",
]  # fmt: skip


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


POKER_ARM_SPECS = ("poker_seed.json", "poker_gain.json")  # the seed's two arms, one per reward


@dataclass(frozen=True)
class ArmPlan:
    """An arm spec of ``data/specs``, the Fireworks launch plan for it (nothing run) and how each Prime
    setting of the seed lands in that job (``prime_mapping``)."""

    spec: PokerArmSpec
    job_id: str
    commands: tuple[str, ...]  # each shell command of the plan as one line
    prime_mapping: tuple[dict[str, str], ...]


def arm_plans(
    spec_files: Sequence[str] = POKER_ARM_SPECS, account_id: str | None = None
) -> tuple[ArmPlan, ...]:
    """The launch plan of each arm spec in ``spec_files`` (names under ``data/specs``)."""
    from rftlab.launch.poker.spec import load_poker_arm_spec, prime_mapping
    from rftlab.runs.paths import SPECS_DIR

    launcher = fireworks_launcher(account_id=account_id)
    out = []
    for name in spec_files:
        spec = load_poker_arm_spec(SPECS_DIR / name)
        plan = launcher.plan(spec)
        commands = tuple(" ".join(argv) for argv in plan.commands)
        out.append(ArmPlan(spec, plan.job_id, commands, tuple(prime_mapping(spec))))
    return tuple(out)


def arm_metrics(experiment: str, root: str | Path | None = None) -> pd.DataFrame:
    """Every polled epoch's metrics of ``experiment``'s runs (``rftlab.runs.load_metrics``: a DataFrame)."""
    from rftlab.runs import load_metrics
    from rftlab.runs.paths import runs_root

    return load_metrics(runs_root() if root is None else root, experiment=experiment)


# ------------------------------------------------------------------------------ a tiny language model

TINY_LM_EXPERIMENT = "poker_tiny_lm"
EVAL_PREFIX = "eval"  # the evaluation's rows: neither a warm-start row (warm, held) nor a GRPO row (poker)
TRAINED = "tiny LM, trained"
WARM_BASE = "tiny LM, warm start"
REFERENCES = ("exploit", "call")
EVAL_SEED_TAG = "rftlab-poker-tiny-lm-eval"


@dataclass(frozen=True)
class TinyLMDesign:
    """The poker arm on a tiny language model through the Tinker API (docs/poker.md, "A tiny language
    model"): the warm start (SFT on ``exploit`` and ``call`` transcripts), ``len(seeds)`` GRPO runs at these
    sizes, and the evaluation of each trained policy, of the warm-started base and of the reference
    strategies on the same ``eval_rows`` deals (``eval_samples`` sampled episodes per row for a model). The
    study stops after the warm start when its held-out valid-call rate is below ``min_valid_rate``. Every
    field is part of the design the report prints; none is an implementation setting."""

    seeds: tuple[int, ...] = (0,)
    rows: int = 4
    candidates: int = 4
    hands: int = 1
    epochs: int = 2
    learning_rate: float = 1e-3
    temperature: float = 0.7
    max_tokens: int = 64
    eval_rows: int = 24
    eval_samples: int = 1
    warm_rows: int = 8
    warm_held_out: int = 4
    warm_steps: int = 150
    warm_batch: int = 2
    warm_learning_rate: float = 5e-3
    warm_checks: int = 3
    equity_samples: int = 200
    min_valid_rate: float = 0.5

    def __post_init__(self) -> None:
        counts = (self.rows, self.hands, self.epochs, self.eval_rows, self.eval_samples, self.warm_rows,
                  self.warm_held_out, self.warm_batch, self.warm_checks, self.equity_samples, self.max_tokens)  # fmt: skip
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise ValueError(f"seeds must be distinct integers >= 0, got {self.seeds}")
        if min(counts) < 1 or self.candidates < 2 or self.warm_steps < 1:
            raise ValueError("the design's counts must be >= 1 (candidates >= 2)")

    def arm_spec(self, seed: int) -> Any:
        """The GRPO arm of ``seed`` (experiment ``poker_tiny_lm``, backend ``tinker``, mean-instance reward)."""
        from rftlab.launch.poker.spec import PokerArmSpec

        return PokerArmSpec.model_validate(
            {
                "experiment": TINY_LM_EXPERIMENT,
                "arm": f"tiny_lm_seed{seed}",
                "description": "Poker on a tiny language model through the Tinker API (exploratory, no plan).",
                "rows": self.rows,
                "hands": self.hands,
                "reward": "mean_instance",
                "epochs": self.epochs,
                "response_candidates": self.candidates,
                "learning_rate": self.learning_rate,
                "temperature": self.temperature,
                "seed": seed,
                "backend": "tinker",
            }
        )

    def task(self, base_model: str) -> Any:
        """The cookbook env's config of the design's arm on ``base_model`` (for the warm start and the
        evaluation: same hands, reward, prompt and renderer as the GRPO runs)."""
        from rftlab.training.poker.cookbook_env import PokerCookbookConfig

        spec = self.arm_spec(self.seeds[0])
        return PokerCookbookConfig.from_arm_spec(spec, base_model=base_model, max_tokens=self.max_tokens)


@dataclass
class TinyLMStudy:
    """The tiny-LM study as run: the design, the warm start and, unless its valid-call rate stopped the
    study, every seed's GRPO run and the evaluation on the shared deals. ``evaluation`` maps a policy
    label (``TRAINED`` or ``TRAINED seed k`` with several seeds, ``WARM_BASE``, ``exploit``, ``call``) to one
    row per evaluation deal (``evaluation_rows``); ``records`` keeps each policy's episode records (the
    transcripts); ``cpu_seconds`` is this call's CPU time (less when runs or the warm start were reused:
    ``reused`` says which)."""

    design: TinyLMDesign
    warm_start: Any  # rftlab.training.agent_warm_start.AgentWarmStartResult
    specs: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    cpu_seconds: float = 0.0
    reused: dict[str, bool] = field(default_factory=dict)

    @property
    def stopped(self) -> bool:
        """Whether the warm-started model wrote too few valid calls for RL to be run."""
        return not self.runs

    @property
    def trained_labels(self) -> list[str]:
        return [trained_label(self.design, s) for s in self.design.seeds]

    def warm_rows(self) -> list[dict[str, Any]]:
        """The warm start's held-out checks: step, SFT epoch (passes over the training replies), train NLL
        per reply token, held-out valid-call rate."""
        per_epoch = max(self.warm_start.train_turns, 1) / self.design.warm_batch
        return [
            {"step": int(h["step"]), "SFT epoch": h["step"] / per_epoch, "train NLL / reply token":
             h["nll_per_token"], "held-out valid-call rate": h["valid_rate"]}
            for h in self.warm_start.history
        ]  # fmt: skip

    def epoch_rows(self) -> list[dict[str, Any]]:
        """One row per GRPO run and epoch from its metrics: reward, BB/hand, valid-call rate, refusals of
        unreadable replies, model calls per episode, zero-advantage groups, sampled tokens."""
        keys = {
            "reward": "reward", "bb_per_hand": "BB/hand", "valid_call_rate": "valid-call rate",
            "refusals_unreadable": "unreadable replies", "mean_model_calls": "model calls / episode",
            "zero_advantage_groups": "zero-advantage groups", "n_groups": "groups",
            "sampled_tokens": "sampled tokens",
        }  # fmt: skip
        return [
            {"run": arm, "epoch": int(m["epoch"]), **{v: m.get(k) for k, v in keys.items()}}
            for arm, run in self.runs.items()
            for m in run.metrics()
        ]

    def policy_rows(self) -> list[dict[str, Any]]:
        """Per evaluated policy: deals, mean-instance reward and BB/hand (means over deals), valid-call
        rate (valid calls per model call) and illegal actions per deal."""
        out = []
        for label, rows in self.evaluation.items():
            n = len(rows)
            out.append({
                "policy": label, "deals": n,
                "reward (mean-instance)": sum(r["reward_mean_instance"] for r in rows) / n,
                "BB/hand": sum(r["bb_per_hand"] for r in rows) / n,
                "valid-call rate": sum(r["valid_calls"] for r in rows) / max(sum(r["model_calls"] for r in rows), 1),
                "illegal actions / deal": sum(r["illegal_actions"] for r in rows) / n,
            })  # fmt: skip
        return out


def trained_label(design: TinyLMDesign, seed: int) -> str:
    return TRAINED if len(design.seeds) == 1 else f"{TRAINED} seed {seed}"


def evaluation_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per deal (``row_id``) from a policy's episode records (several samples of a row averaged):
    the columns ``paired_rft_table`` pairs on (``reward_mean_instance``, ``bb_per_hand``), the deal
    (``opponent``, ``card_seed``, ``hand_id``) and the call counts."""
    by_row: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_row.setdefault(str(r["row_id"]), []).append(r)
    out = []
    for row_id, recs in by_row.items():
        n = len(recs)
        out.append({
            "row_id": row_id, "opponent": recs[0]["opponent"], "card_seed": recs[0]["card_seed"],
            "hand_id": list(recs[0]["hand_id"]), "episodes": n,
            "reward_mean_instance": sum(float(r["reward"]) for r in recs) / n,
            "bb_per_hand": sum(float(r["bb_per_hand"]) for r in recs) / n,
            "illegal_actions": sum(float(r["illegal_actions"]) for r in recs) / n,
            "valid_calls": sum(float(r["valid_calls"]) for r in recs),
            "model_calls": sum(float(r["model_calls"]) for r in recs),
        })  # fmt: skip
    return out


def evaluation_task(design: TinyLMDesign, base_model: str) -> Any:
    """The evaluation's rows (``eval_s1000 …``, ``eval_samples`` candidates each) on ``base_model``."""
    import dataclasses

    return dataclasses.replace(
        design.task(base_model),
        rows=design.eval_rows,
        row_prefix=EVAL_PREFIX,
        group_size=design.eval_samples,
        batch_rows=design.eval_rows,
    )


def reference_records(task: Any, strategy: str, equity_samples: int = 200) -> list[dict[str, Any]]:
    """``strategy`` played once on every row of ``task`` in the cookbook env (each reply a ``poker_act`` call
    rendered by the env's renderer and read by the env, as a model's would be), seeded per row as
    ``play_rft`` seeds it; the episodes' records."""
    from rftlab.training.agent_warm_start import reference_turns
    from rftlab.training.poker.warm_start import VALID_KEY, StrategyReplies, reference_builders

    builders = reference_builders(task, task.rows, task.row_prefix)
    reference_turns(builders, StrategyReplies((strategy,), equity_samples), valid_key=VALID_KEY)
    return [b.envs[0].record() for b in builders]


async def _group_rollouts(builders: Sequence[Any], policy: Any) -> list[Any]:
    import asyncio

    from tinker_cookbook.rl.rollouts import do_group_rollout

    return list(await asyncio.gather(*[do_group_rollout(b, policy) for b in builders]))


def model_records(sampler: Any, task: Any, design: TinyLMDesign) -> list[dict[str, Any]]:
    """``task.group_size`` sampled episodes per row of ``task`` by ``sampler`` at the design's temperature
    and max tokens (the cookbook's rollout; every request seeded from the row's prompt, so two models are
    sampled with the same seeds); the episodes' records."""
    from tinker_cookbook.completers import TinkerTokenCompleter

    from rftlab.launch.tinker import context_window
    from rftlab.training.cookbook_envs import run_sync
    from rftlab.training.poker.cookbook_env import PokerRLDataset
    from rftlab.training.tinker_rl import SeededSampler

    builders = PokerRLDataset(task, (0,)).epoch_builders(0)
    policy = TinkerTokenCompleter(
        SeededSampler(sampler, EVAL_SEED_TAG),  # type: ignore[arg-type]
        max_tokens=design.max_tokens,
        temperature=design.temperature,
        context_window=context_window(task.base_model),
    )
    run_sync(_group_rollouts(builders, policy))
    return [env.record() for b in builders for env in b.envs]


def same_deals(evaluation: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
    """``ValueError`` unless every policy played the same rows with the same opponent, card seed and hands."""
    deals = {
        label: {r["row_id"]: (r["opponent"], r["card_seed"], tuple(r["hand_id"])) for r in rows}
        for label, rows in evaluation.items()
    }
    first = next(iter(deals.values()), {})
    for label, d in deals.items():
        if d != first:
            raise ValueError(f"{label} did not play the same deals as the other policies")


def warm_start_settings(design: TinyLMDesign) -> tuple[Any, Any, Any]:
    """The warm start's ``AgentWarmStartConfig``, ``WarmStartRows`` and env config for ``design``."""
    from rftlab.training.agent_warm_start import AgentWarmStartConfig
    from rftlab.training.local_tinker.model import AGENT_MODEL
    from rftlab.training.poker.warm_start import WarmStartRows

    config = AgentWarmStartConfig(
        base_model=AGENT_MODEL,
        batch_size=design.warm_batch,
        learning_rate=design.warm_learning_rate,
        steps=design.warm_steps,
        eval_every=-(-design.warm_steps // design.warm_checks),
        temperature=design.temperature,
        max_tokens=design.max_tokens,
    )
    rows = WarmStartRows(design.warm_rows, design.warm_held_out, design.equity_samples)
    return config, rows, design.task(AGENT_MODEL)


# the env settings the warm start's transcripts and checks depend on (its rows, groups and seeds are its own)
WARM_ENV_FIELDS = ("hands", "reward", "illegal_retry_limit", "thinking", "renderer_name", "max_env_steps")


def warm_start_dir(design: TinyLMDesign, root: Path) -> Path:
    """The warm-started model's folder beside the run store, one per warm-start setting: a GRPO run names
    its base by this path, so another design's warm start never replaces the weights a run was trained on."""
    from dataclasses import asdict

    from rftlab.launch.tinker import local_storage_dir
    from rftlab.runs.hashing import spec_sha256

    config, rows, task = warm_start_settings(design)
    env = {k: v for k, v in task.to_dict().items() if k in WARM_ENV_FIELDS}
    digest = spec_sha256({"config": asdict(config), "rows": asdict(rows), "env": env})[:12]
    return local_storage_dir(root, "poker") / f"warm_start_tiny_lm-{digest}"


def tiny_warm_start(design: TinyLMDesign, root: Path) -> Any:
    """The warm-started base of the design (built once per setting and transcripts, then reused)."""
    from rftlab.training.poker.warm_start import prepare_poker_base

    config, rows, task = warm_start_settings(design)
    return prepare_poker_base(warm_start_dir(design, root), task, rows, config)


def run_tiny_lm_study(design: TinyLMDesign = TinyLMDesign(), root: str | Path | None = None) -> TinyLMStudy:
    """Warm-start the tiny model on ``exploit`` and ``call`` transcripts; stop there when its held-out
    valid-call rate is below ``design.min_valid_rate`` (the study keeps the rate per check and the refused
    replies); else run one GRPO arm per seed through ``launch_arm(spec, "tinker", ...)`` (the in-process
    service unless ``TINKER_BASE_URL`` or ``TINKER_API_KEY`` say otherwise) and evaluate every trained
    policy, the warm-started base and the reference strategies on the same evaluation deals."""
    from rftlab.runs import load_run
    from rftlab.runs.paths import runs_root

    t0 = time.process_time()
    root = Path(runs_root() if root is None else root)
    built = (warm_start_dir(design, root) / "warm_start.json").is_file()
    warm = tiny_warm_start(design, root)
    study = TinyLMStudy(design, warm, reused={"warm start": built})
    if not warm.valid_rate >= design.min_valid_rate:  # also stops on a rate that was never measured
        study.cpu_seconds = time.process_time() - t0
        return study
    for seed in design.seeds:
        spec = design.arm_spec(seed)
        launched = launch_arm(spec, "tinker", root, base_model=warm.path, max_tokens=design.max_tokens)
        study.specs[spec.arm], study.runs[spec.arm] = spec, load_run(launched.ref.path)
        study.reused[spec.arm] = launched.reused
    evaluate_tiny_lm(study, root)
    study.cpu_seconds = time.process_time() - t0
    return study


def evaluate_tiny_lm(study: TinyLMStudy, root: Path) -> None:
    """Fill ``study.records`` and ``study.evaluation``: the references, the warm-started base and each
    seed's policy after its last epoch, on the evaluation deals; ``ValueError`` unless all saw the same."""
    from rftlab.launch.tinker import make_service
    from rftlab.training.tinker_rl import saved_state

    design, warm = study.design, study.warm_start
    task = evaluation_task(design, warm.path)
    for name in REFERENCES:
        study.records[name] = reference_records(task, name, design.equity_samples)
    service = make_service(root, None, "poker")
    base = resolve(service.create_sampling_client(base_model=warm.path))
    study.records[WARM_BASE] = model_records(base, task, design)
    for seed, run in zip(design.seeds, study.runs.values(), strict=True):
        state = saved_state(run, design.epochs - 1)
        trained = resolve(service.create_training_client_from_state(state))
        sampler = resolve(trained.save_weights_and_get_sampling_client())
        study.records[trained_label(design, seed)] = model_records(sampler, task, design)
    study.evaluation = {label: evaluation_rows(recs) for label, recs in study.records.items()}
    same_deals(study.evaluation)


def tiny_lm_contrasts(
    study: TinyLMStudy, value: str = "reward_mean_instance", *, reps: int | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    """Each trained policy − ``exploit``, − ``call`` and − the warm-started base, paired by evaluation deal
    (``paired_rft_table``: per opponent and over all deals, percentile bootstrap and sign test; the deal is
    the unit). With one seed the interval holds the deals' and the sampling's variation for one training
    run, not the run-to-run variation of training. Empty for a stopped study."""
    from rftlab.analysis.paired import DEFAULT_REPS
    from rftlab.analysis.poker import paired_rft_table

    if study.stopped:
        return []
    pairs = [(t, other) for t in study.trained_labels for other in (*REFERENCES, WARM_BASE)]
    return paired_rft_table(study.evaluation, pairs, value, reps=reps or DEFAULT_REPS, seed=seed)


def seed_contrasts(study: TinyLMStudy, value: str = "reward_mean_instance") -> list[dict[str, Any]]:
    """With two or more seeds the seed is the unit: per comparison (trained − ``exploit``, − ``call``, − the
    warm-started base), each seed's mean paired difference over the deals, their mean and a Student-t 95%
    interval over seeds (``normal_mean_interval``), and how many seeds were above 0. Empty with one seed."""
    from rftlab.analysis.intervals import normal_mean_interval

    if study.stopped or len(study.design.seeds) < 2:
        return []
    out = []
    for other in (*REFERENCES, WARM_BASE):
        ref = {r["row_id"]: float(r[value]) for r in study.evaluation[other]}
        per_seed = []
        for label in study.trained_labels:
            diffs = [float(r[value]) - ref[r["row_id"]] for r in study.evaluation[label]]
            per_seed.append(sum(diffs) / len(diffs))
        mean, low, high = normal_mean_interval(per_seed)
        out.append({"comparison": f"{TRAINED} − {other}", "measure": value, "seeds": len(per_seed),
                    "per seed": per_seed, "mean": mean, "low": low, "high": high,
                    "seeds above 0": sum(d > 0 for d in per_seed)})  # fmt: skip
    return out


@dataclass(frozen=True)
class TinyLMReadout:
    """The tiny-LM study's paired contrasts as the notebook shows them (``tiny_lm_readout``).

    ``paired`` maps each measure (``TINY_MEASURES``) to ``tiny_lm_contrasts``' rows; ``versus`` holds the
    trained policy − ``exploit`` and − ``call`` on the mean-instance reward over all deals. Both are empty
    for a stopped study.
    """

    paired: dict[str, tuple[PairedDifference, ...]]
    versus: dict[str, PairedDifference]


TINY_MEASURES = ("reward_mean_instance", "bb_per_hand")


def tiny_lm_readout(study: TinyLMStudy, *, reps: int | None = None, seed: int = 0) -> TinyLMReadout:
    """``tiny_lm_contrasts`` of every measure in ``TINY_MEASURES``, typed."""
    paired = {v: paired_differences(tiny_lm_contrasts(study, v, reps=reps, seed=seed)) for v in TINY_MEASURES}
    versus = {}
    if not study.stopped:
        rows = paired["reward_mean_instance"]
        versus = {other: find_pair(rows, f"{TRAINED} − {other}", opponent="all") for other in REFERENCES}
    return TinyLMReadout(paired, versus)
