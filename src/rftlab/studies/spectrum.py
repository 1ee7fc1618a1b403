"""The spectrum-memory study: the driver the notebooks (``01_spectrum_env``, ``02_memory``) and the CLI
(``rftlab arm``, ``rftlab spectrum``) both call.

``launch_arm`` runs one arm spec on a backend (reusing a finished run of the same spec, resuming an
unfinished one), ``launch_arms`` does it for every arm of the study and returns the runs, ``arm_status``
reports the newest run of a spec. ``run_memory_study`` runs the whole memory study its analysis plan
describes (every arm, then as many replicate pairs as the plan's design-power rule asks for), computes
the plan's contrasts and audits its pre-registration (``plan_audit``, docs/statistics.md §8): the plan
must be a registered version (``load_registered_plan``), and each run it launches records the plan's
hash. ``save_bench90_rollouts`` (from ``rftlab.studies.spectrum_env``) keeps the episodes of bench90
evaluations in the run store for ``rftlab view``. Bad input raises ``ValueError``.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- rewards: ``rftlab.rewards.spectrum``
- envs: ``rftlab.envs.spectrum`` (bench and RFT variants)
- policies: ``rftlab.policies.spectrum`` (reference, chat adapter, simulated policy)
- rollout: ``rftlab.rollout.spectrum`` (dataset rows, the turn path's chat, eval-protocol processors and
  McpGym server, scoring,
  bench90 evaluation, ceilings, the offline eval runner, the endpoint check); entry modules
  ``rftlab.rollout.eval_entries.spectrum_turn``, ``rftlab.rollout.eval_entries.spectrum_mcp_eval``,
  ``rftlab.rollout.eval_entries.spectrum_mcp_server``
- training: ``rftlab.training.spectrum`` (local GRPO of the simulated policy, group rollouts, calibration,
  the tinker-cookbook env, GRPO of a language model through the Tinker API)
- launch: ``rftlab.launch.spectrum`` (arm spec, preflight, local launcher, Tinker launcher)
- analysis: ``rftlab.analysis.spectrum`` (the study plan, study summaries and contrasts, design power,
  episode summaries)
- studies: ``rftlab.studies.spectrum``, ``rftlab.studies.spectrum_env`` (the environment study of
  notebook 01, bench90 rollouts), ``rftlab.studies.spectrum_tiny_lm`` (the memory study's arms on a tiny
  language model), ``rftlab.studies.spectrum_memory`` (what notebook 02 reads of the memory study)
- cli: ``rftlab.cli.spectrum``
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rftlab.analysis.spectrum.plan import LoadedPlan, StudyPlan, load_study_plan
from rftlab.analysis.spectrum.power import ReplicateDesign, replicates_for_power
from rftlab.analysis.spectrum.study import (
    ContrastResult,
    TruthCheck,
    compute_contrast,
    small_k_sensitivity,
    study_contrasts,
    truth_checks,
)
from rftlab.launch import launcher_for
from rftlab.launch.spectrum.spec import SpectrumArmSpec, load_arm_spec
from rftlab.runs import Run, RunStore, load_run
from rftlab.runs.parallel import map_processes
from rftlab.runs.paths import runs_root
from rftlab.runs.plan_audit import AUDIT_LIMITS, REBUILD_LIMIT, PlanAudit, audit_contrasts
from rftlab.runs.registration import (
    PlanVersion,
    files_added_in,
    find_registry,
    git_toplevel,
    require_registered,
)
from rftlab.studies.spectrum_env import BENCH90_EXPERIMENT as BENCH90_EXPERIMENT
from rftlab.studies.spectrum_env import save_bench90_rollouts as save_bench90_rollouts
from rftlab.types import RunRef, RunStatus


@dataclass(frozen=True)
class ArmLaunch:
    """What launching an arm gave: the run, its status, and whether a finished run was reused."""

    ref: RunRef
    status: RunStatus
    reused: bool


def as_spec(spec: SpectrumArmSpec | str | Path) -> SpectrumArmSpec:
    """An arm spec, read and validated from its file when given a path."""
    return spec if isinstance(spec, SpectrumArmSpec) else load_arm_spec(spec)


@runtime_checkable
class _RecordsProvenance(Protocol):
    """A launcher that records ``provenance`` in a new run's ``provider`` (local, tinker)."""

    provenance: dict[str, Any]


def launch_arm(
    spec: SpectrumArmSpec | str | Path,
    backend: str | None = None,
    root: str | Path | None = None,
    resume: bool = True,
    force: bool = False,
    plan_sha256: str | None = None,
    provenance: Mapping[str, Any] | None = None,
    **launcher_options: Any,
) -> ArmLaunch:
    """Run one arm on ``backend``: reuse a finished run of the same spec, resume an unfinished one (unless
    ``resume`` is false), or start a new one (always, with ``force``). ``backend`` ``None``: the spec's own
    ``backend``, else ``local``. ``launcher_options`` go to the launcher (``tinker``: ``base_model``,
    ``service``, implementation settings such as ``max_tokens``). ``plan_sha256``: the hash of the plan
    that governs the arm, recorded in a new run's ``run.json`` (a reused run keeps what it recorded).
    ``provenance`` (the ``--set`` overrides that made the spec) is recorded in a new run's ``provider``;
    an unfinished run left by an asynchronous launcher (Fireworks) gets it after the launch."""
    spec = as_spec(spec)
    backend = backend or spec.backend or "local"
    root = runs_root() if root is None else root
    launcher = launcher_for(backend, **launcher_options)
    if provenance and isinstance(launcher, _RecordsProvenance):  # Fireworks gets it after the launch
        launcher.provenance = dict(provenance)
    before = RunStore(root).find_run(spec.experiment, spec.arm, spec.to_dict(), "finished", backend)
    extra: dict[str, Any] = {"force": True} if force else {}
    if plan_sha256 is not None:
        extra["plan_sha256"] = plan_sha256
    ref = launcher.launch(spec, root=root, resume=resume, **extra)
    reused = before is not None and before.path == ref.path and not force
    if provenance and not reused:
        run = load_run(ref.path)
        if not run.finished and any(run.record.provider.get(k) != v for k, v in provenance.items()):
            run.set_provider(**provenance)
    return ArmLaunch(ref, launcher.poll(ref), reused)


def launch_arms(
    specs: Mapping[str, SpectrumArmSpec] | Iterable[SpectrumArmSpec | str | Path],
    backend: str = "local",
    root: str | Path | None = None,
    plan_sha256: str | None = None,
    **launcher_options: Any,
) -> dict[str, Run]:
    """Launch (or load) every arm and return its run, keyed by arm name, in the order given
    (``plan_sha256``: the governing plan's hash, recorded in every new run; ``launcher_options`` as for
    ``launch_arm``). The arms are independent, so they run in worker processes, one per core
    (``rftlab.runs.parallel``: the runs are the same with any number of workers)."""
    items = list(specs.values()) if isinstance(specs, Mapping) else [as_spec(s) for s in specs]
    root = runs_root() if root is None else root
    jobs = [(spec, backend, str(root), plan_sha256, launcher_options) for spec in items]
    paths = map_processes(_launched_path, jobs)
    return {spec.arm: load_run(path) for spec, path in zip(items, paths, strict=True)}


def _launched_path(job: tuple[SpectrumArmSpec, str, str, str | None, dict[str, Any]]) -> str:
    """One ``launch_arms`` job in a worker: the run folder of the launched (or reused) arm."""
    spec, backend, root, plan_sha256, options = job
    return str(launch_arm(spec, backend, root, plan_sha256=plan_sha256, **options).ref.path)


def arm_status(
    spec: SpectrumArmSpec | str | Path, backend: str | None = None, root: str | Path | None = None
) -> ArmLaunch:
    """The status of the newest ``backend`` run of ``spec`` (``None``: the spec's backend, else ``local``);
    ``ValueError`` when there is none."""
    label = spec.arm if isinstance(spec, SpectrumArmSpec) else str(spec)
    spec = as_spec(spec)
    backend = backend or spec.backend or "local"
    root = runs_root() if root is None else root
    runs = [
        r
        for r in RunStore(root).runs(spec.experiment, spec.arm)
        if r.record.spec_sha256 == spec.sha256() and r.record.backend == backend
    ]
    if not runs:
        raise ValueError(f"no {backend} run of {label} under {root}")
    run = max(runs, key=lambda r: (r.record.created_at, r.path.name))
    ref = RunRef(spec.experiment, spec.arm, run.run_id, run.path, backend)
    return ArmLaunch(ref, launcher_for(backend).poll(ref), reused=True)


# ------------------------------------------------------------------------------ the memory study


def replicate_spec(spec: SpectrumArmSpec, seed: int, arm: str) -> SpectrumArmSpec:
    """``spec`` run again with another ``seed`` (so other bands every epoch) under the arm name ``arm``; a
    Fireworks block gets its own output model."""
    update: dict[str, Any] = {
        "seed": seed,
        "arm": arm,
        "description": f"{spec.description} Replicate, seed {seed}.",
    }
    if spec.fireworks is not None:
        fw = spec.fireworks.model_copy(update={"output_model": f"{spec.fireworks.output_model}-seed{seed}"})
        update["fireworks"] = fw
    return spec.model_copy(update=update)


def study_specs(
    plan: StudyPlan, spec_dir: str | Path, size_overrides: Mapping[str, Any] | None = None
) -> dict[str, SpectrumArmSpec]:
    """The spec of every arm the plan names (``<spec_dir>/spectrum_<arm>.json``), with ``size_overrides``
    (rows, candidates, epochs: quick runs) applied."""
    specs = {arm: load_arm_spec(Path(spec_dir) / f"spectrum_{arm}.json") for arm in plan.arms}
    if size_overrides:
        specs = {arm: s.model_copy(update=dict(size_overrides)) for arm, s in specs.items()}
    return specs


def replicate_specs(
    plan: StudyPlan, specs: Mapping[str, SpectrumArmSpec], runs: int
) -> dict[str, SpectrumArmSpec]:
    """Seeds 0..runs−1 of both replicated arms (seed 0 and named replicates are the plan's own arms)."""
    out: dict[str, SpectrumArmSpec] = {}
    for arm in plan.replicates.arms:
        for seed in range(runs):
            name = plan.replicate_name(arm, seed)
            out[name] = specs[name] if name in specs else replicate_spec(specs[arm], seed, name)
    return out


@dataclass
class MemoryStudy:
    """The memory study as run: its plan, every arm's spec and run (replicates included), the per-epoch
    rollout records, the replicate design and the plan's contrasts."""

    plan: LoadedPlan
    specs: dict[str, SpectrumArmSpec]
    runs: dict[str, Run]
    rollouts: dict[str, list[list[dict[str, Any]]]]
    replicate_design: ReplicateDesign
    contrasts: list[ContrastResult]
    registration: PlanVersion | None = None
    audit: PlanAudit | None = None

    def contrast(self, contrast_id: str) -> ContrastResult:
        for c in self.contrasts:
            if c.id == contrast_id:
                return c
        raise KeyError(contrast_id)

    @property
    def primary(self) -> ContrastResult:
        return self.contrast(self.plan.plan.primary_contrast)

    def audited_family(self, contrast_id: str) -> str:
        """The audited family of a registered confirmatory contrast; the plan's family of any other."""
        if self.audit is not None and contrast_id in self.audit.contrasts:
            return self.audit.contrasts[contrast_id].family
        return self.plan.plan.family_of(contrast_id)


def rollouts_of(run: Run) -> list[list[dict[str, Any]]]:
    return [run.rollouts(e) for e in range(len(run.metrics()))]


def replicate_design(plan: StudyPlan, rollouts: Mapping[str, list[list[dict[str, Any]]]]) -> ReplicateDesign:
    """The plan's replicate rule: the seed-0 pair's primary contrast gives the standard error per run."""
    primary = {c.id: c for c in plan.contrasts}[plan.primary_contrast]
    fits, _ = compute_contrast(
        plan, primary, {k: v for k, v in rollouts.items() if k in (primary.treatment, primary.control)}
    )
    rep = plan.replicates
    return replicates_for_power(
        plan.per_epoch(plan.design_effect),
        fits[0][3].slope_se,
        alpha=plan.alpha / len(plan.confirmatory()),
        target=rep.power,
        min_runs=rep.min_runs,
        max_runs=rep.max_runs,
    )


def run_memory_study(
    plan_path: str | Path,
    spec_dir: str | Path,
    backend: str = "local",
    root: str | Path | None = None,
    size_overrides: Mapping[str, Any] | None = None,
) -> MemoryStudy:
    """Run (or reuse) every arm of the plan, size the replicates by the plan's rule from the seed-0 pair,
    run them, compute every planned contrast and audit the confirmatory ones (``plan_audit``). A plan
    whose bytes match no registered version is refused (``load_registered_plan``); every new run records
    the plan's hash."""
    loaded, version = load_registered_plan(plan_path)
    plan = loaded.plan
    specs = study_specs(plan, spec_dir, size_overrides)
    runs = launch_arms(specs, backend, root, plan_sha256=loaded.sha256)
    rollouts = {arm: rollouts_of(run) for arm, run in runs.items()}
    design = replicate_design(plan, rollouts)
    extra = {k: v for k, v in replicate_specs(plan, specs, design.runs).items() if k not in specs}
    if extra:
        new = launch_arms(extra, backend, root, plan_sha256=loaded.sha256)
        runs.update(new)
        rollouts.update({arm: rollouts_of(run) for arm, run in new.items()})
        specs.update(extra)
    study = MemoryStudy(loaded, specs, runs, rollouts, design, study_contrasts(plan, rollouts), version)
    study.audit = plan_audit(study)
    return study


def load_registered_plan(plan_path: str | Path) -> tuple[LoadedPlan, PlanVersion]:
    """The plan at ``plan_path`` and its registered version; a plan edited after registration (its bytes
    match no registered version) is a one-line ``ValueError`` saying to register an amendment."""
    _, version = require_registered(plan_path)
    return load_study_plan(plan_path), version


def plan_audit(study: MemoryStudy, repo: str | Path | None = None) -> PlanAudit:
    """The pre-registration audit (``rftlab.runs.plan_audit``) of the plan's confirmatory contrasts, each
    with the runs it pools (both arms of every seed-matched pair); the plan's ``seen_before`` contrasts
    are exploratory by rule (e)."""
    runs: dict[str, list[Run]] = {}
    for c in study.contrasts:
        if c.planned.family == "confirmatory":
            arms = dict.fromkeys(arm for _, t, k, _ in c.fits for arm in (t, k))
            runs[c.id] = [study.runs[a] for a in arms]
    return audit_contrasts(study.plan.path, runs, study.plan.plan.seen_before, repo=repo)


@dataclass(frozen=True)
class AuditStatement:
    """What a report says about the plan's registration: every registered version, the audit's verdict
    on each confirmatory contrast (names no run), and what the audit cannot show."""

    versions: tuple[PlanVersion, ...]
    rows: tuple[dict[str, str], ...]
    limits: tuple[str, ...]


def audit_statement(study: MemoryStudy) -> AuditStatement:
    """The registration versions, one row per confirmatory contrast (its registered family, the audit's,
    and why) and the audit's limits for this study: a rebuild's runs always start after the plan's commit,
    and whether the plan's first commit also added the arms it governs (checked with git)."""
    if study.audit is None:
        raise ValueError("the study has no audit (run it with run_memory_study)")
    registry = find_registry(study.plan.path)
    versions = tuple(registry.versions if registry is not None else ())
    plan = study.plan.plan
    rows = tuple(
        {
            "contrast": f"{c.treatment} − {c.control}",
            "metric": c.metric,
            "hypothesis": c.hypothesis,
            "registered as": c.family,
            "audited as": study.audit.contrasts[c.id].family,
            "why": study.audit.contrasts[c.id].sentence(),
        }
        for c in plan.confirmatory()
        if c.id in study.audit.contrasts
    )
    limits = [REBUILD_LIMIT]
    top = git_toplevel(study.plan.path)
    added = files_added_in(top, versions[0].commit) if top is not None and versions else None
    if added is None:
        limits.append(
            "Whether the plan's first commit also added the arms it governs cannot be checked here."
        )
    else:
        arms = [a for a in plan.arms if f"data/specs/spectrum_{a}.json" in added]
        if arms:
            limits.append(
                f"The plan's first version entered the repository in commit {versions[0].commit[:12]} together "
                f"with the spec of arm{'s' if len(arms) > 1 else ''} {', '.join(arms)}, which it says it "
                "precedes: the history shows no order between the plan and "
                f"{'those arms' if len(arms) > 1 else 'that arm'}."
            )
    limits.append(AUDIT_LIMITS)
    return AuditStatement(versions, rows, tuple(limits))


TRUTH_EXPERIMENT = "spectrum_memory_truth"
TRUTH_FIRST_SEED = 1000  # far from the study's seeds 0..max_runs-1: the truth never reuses a study band


def truth_specs(
    study: MemoryStudy, n_pairs: int, first_seed: int = TRUTH_FIRST_SEED
) -> dict[str, SpectrumArmSpec]:
    """Seed-matched pairs of the plan's replicated arms (C and B′) at seeds the study never ran, as the
    study ran them (same sizes), kept apart in the run store under ``spectrum_memory_truth``."""
    out: dict[str, SpectrumArmSpec] = {}
    for seed in range(first_seed, first_seed + n_pairs):
        for arm in study.plan.plan.replicates.arms:
            name = f"{arm}_truth_seed{seed}"
            spec = replicate_spec(study.specs[arm], seed, name)
            out[name] = spec.model_copy(
                update={
                    "experiment": TRUTH_EXPERIMENT,
                    "description": f"{spec.description} Simulation truth.",
                }
            )
    return out


def simulation_truth(
    study: MemoryStudy,
    n_pairs: int,
    backend: str = "local",
    root: str | Path | None = None,
    first_seed: int = TRUTH_FIRST_SEED,
) -> list[TruthCheck]:
    """The simulator's expected C − B′ contrasts, from ``n_pairs`` independent replicate pairs run (or
    reused) only for this, and whether each confirmatory interval of ``study`` covers them (plain and
    truncated Hartung–Knapp). Only meaningful on the local backend, where the policy is a simulation."""
    if backend != "local":
        raise ValueError("the simulation truth exists only for the simulated policy (backend 'local')")
    specs = truth_specs(study, n_pairs, first_seed)
    runs = launch_arms(specs, backend, root)
    rollouts = {arm: rollouts_of(run) for arm, run in runs.items()}
    arms = study.plan.plan.replicates.arms
    pairs = [
        {arm: f"{arm}_truth_seed{seed}" for arm in arms} for seed in range(first_seed, first_seed + n_pairs)
    ]
    truncated = study_contrasts(study.plan.plan, study.rollouts, truncated_hk=True)
    return truth_checks(study.plan.plan, study.contrasts, truncated, rollouts, pairs)


MORE_PAIRS_EXPERIMENT = "spectrum_memory_more_pairs"


@dataclass(frozen=True)
class MorePairs:
    """The confirmatory C − B′ contrasts pooled over ``pairs`` seed-matched pairs instead of the plan's:
    the plan's own pairs plus seeds ``plan pairs .. pairs−1`` run for this only (experiment
    ``spectrum_memory_more_pairs``, no plan hash: they are governed by no registered plan). Exploratory:
    added after the registered results were seen, to show what the small-``k`` readings give with more
    pairs. ``rows`` are ``small_k_sensitivity`` rows (plain and truncated Hartung–Knapp, Holm over the same
    family, sign-flip over pairs); ``covers`` maps a contrast id to whether each interval holds the
    simulator's truth (``None`` without a truth for it)."""

    pairs: int
    rows: list[dict[str, Any]]
    covers: dict[str, tuple[bool, bool] | None]


def more_pairs(
    study: MemoryStudy,
    pairs: int,
    truth: Sequence[TruthCheck] = (),
    backend: str = "local",
    root: str | Path | None = None,
) -> MorePairs:
    """Run (or reuse) the extra seed-matched C/B′ pairs up to ``pairs`` in all and pool every pair as the
    plan pools its own (``MorePairs``). ``truth``: ``simulation_truth``'s checks, for coverage."""
    plan = study.plan.plan
    if pairs <= study.replicate_design.runs:
        raise ValueError(f"pairs must exceed the plan's {study.replicate_design.runs}, got {pairs}")
    wider = plan.model_copy(
        update={"replicates": plan.replicates.model_copy(update={"min_runs": pairs, "max_runs": pairs})}
    )
    extra = {
        arm: spec.model_copy(update={"experiment": MORE_PAIRS_EXPERIMENT})
        for arm, spec in replicate_specs(wider, study.specs, pairs).items()
        if arm not in study.specs
    }
    runs = launch_arms(extra, backend, root)
    rollouts = {**study.rollouts, **{arm: rollouts_of(run) for arm, run in runs.items()}}
    pooled = study_contrasts(wider, rollouts)
    rows = small_k_sensitivity(wider, rollouts, pooled)
    truths = {t.contrast.id: t.truth for t in truth}
    covers: dict[str, tuple[bool, bool] | None] = {}
    for row in rows:
        value = truths.get(row["id"])
        if value is None:
            covers[row["id"]] = None
        else:
            (plan_lo, plan_hi), (hk_lo, hk_hi) = row["CI, plan (HK)"], row["CI, truncated HK"]
            covers[row["id"]] = (bool(plan_lo <= value <= plan_hi), bool(hk_lo <= value <= hk_hi))
    return MorePairs(pairs, rows, covers)
