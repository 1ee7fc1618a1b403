"""The arena Stage-1 SFT study: the driver the notebooks (``04_arena_env``, ``05_arena``) and the CLI
(``rftlab arena``) both call.

``evaluate_frozen`` runs a provider on the frozen cases (and optionally the validation rows) and
summarises it; ``write_evaluation`` writes ``rows.jsonl``, ``validation.jsonl`` and ``summary.json``
atomically; ``read_rows`` reads a JSONL split. Bad input raises ``ValueError``.

``run_stage1(spec)`` is the seed's experiment order as one lineage in the run store
(``runs/<experiment>/<stage>/<run_id>/``, docs/arena.md §11 "Procedure"): 1 the base model on the frozen
cases (raw replies kept), 2 the overfit check (stop with a template/loss-mask diagnosis unless schema
validity reaches 0.99 in both phases), 3 LoRA SFT on the mixture with validation measurements and saved
checkpoints, 4 selection on validation only (stop with a diagnosis when nothing is eligible), 5 the
selected checkpoint on ``test`` and the frozen cases exactly once (a second evaluation is refused unless it
is a diagnosis run, excluded from claims), 6 the base-vs-SFT comparison (§10.6) and gates G1–G7. Each
stage is a run whose spec names the lineage; a finished stage is reused, so a rerun continues where the
last one stopped and a finished lineage is only read back.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- envs: ``rftlab.envs.arena`` (world, rules, reward, oracle, protocol, frozen cases, env)
- policies: ``rftlab.policies.arena`` (scripted table and baselines, reply providers, the local server)
- rollout: ``rftlab.rollout.arena`` (SFT data, frozen evaluation and validation scorer)
- training: ``rftlab.training.arena`` (the Stage-1 recipe, LoRA SFT on the tinker interface, the Stage-1
  spec, backends and single-evaluation rule, the simulated learner)
- analysis: ``rftlab.analysis.arena`` (evaluation summaries, the §10.6 comparison, gates, checkpoint
  selection, comparisons of baselines, the data audit, handoff)
- studies: ``rftlab.studies.arena``
- cli: ``rftlab.cli.arena``
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.analysis.arena.evaluation import summarize_eval, summarize_validation
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT
from rftlab.policies.arena.providers import Provider
from rftlab.rollout.arena.evaluation import run_frozen_eval, run_validation
from rftlab.runs import atomic_write_text
from rftlab.training.sessions import closing_session


@dataclass(frozen=True)
class FrozenEvaluation:
    """One provider's frozen evaluation: per-case records, validation records (or ``None``), summary."""

    records: list[dict[str, Any]]
    validation: list[dict[str, Any]] | None
    summary: dict[str, Any]


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The JSON rows of a JSONL file (blank lines skipped); ``ValueError`` naming the file otherwise."""
    path = Path(path)
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc


def check_sft_rows(rows: Sequence[Any], where: str) -> None:
    """``ValueError`` naming the first row that is not an SFT chat row the scorer can read (an object with
    an ``id``, ``metadata.phase`` BROADCAST/ACT and system, user, assistant messages whose user content is
    a JSON object with ``observation.known_nodes`` and ``legal_actions`` lists)."""
    for number, row in enumerate(rows, start=1):
        label = f"{where}:{number}"
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise ValueError(f"{label}: not an SFT row (an object with a string 'id')")
        meta = row.get("metadata")
        if not isinstance(meta, dict) or meta.get("phase") not in ("BROADCAST", "ACT"):
            raise ValueError(f"{label}: metadata.phase must be BROADCAST or ACT")
        messages = row.get("messages")
        if (
            not isinstance(messages, list)
            or [m.get("role") if isinstance(m, dict) else None for m in messages]
            != ["system", "user", "assistant"]
            or not all(isinstance(m.get("content"), str) for m in messages)
        ):
            raise ValueError(f"{label}: messages must be system, user, assistant with string content")
        try:
            user = json.loads(messages[1]["content"])
            target = json.loads(messages[2]["content"])
        except (ValueError, RecursionError):
            raise ValueError(f"{label}: the user or assistant content is not JSON") from None
        observation = user.get("observation") if isinstance(user, dict) else None
        if not (
            isinstance(observation, dict)
            and isinstance(observation.get("known_nodes"), list)
            and isinstance(user.get("legal_actions"), list)
            and all(isinstance(e, dict) and isinstance(e.get("id"), str) for e in user["legal_actions"])
            and all(isinstance(n, dict) for n in observation["known_nodes"])
        ):
            raise ValueError(
                f"{label}: the user JSON lacks observation.known_nodes or legal_actions with ids"
            )
        if not isinstance(target, dict) or (
            meta["phase"] == "BROADCAST" and not isinstance(target.get("facts"), list)
        ):
            raise ValueError(f"{label}: the assistant target is not a {meta['phase']} reply object")


def evaluate_frozen(
    provider: Provider,
    cases: Sequence[int] | None = None,
    validation_rows: Sequence[Mapping[str, Any]] | None = None,
) -> FrozenEvaluation:
    """``provider`` on the frozen cases (all 60 by default) and on ``validation_rows`` when given."""
    indices = range(FROZEN_CASE_COUNT) if cases is None else cases
    records = run_frozen_eval(provider, indices)
    validation = run_validation(provider, validation_rows) if validation_rows is not None else None
    return FrozenEvaluation(records, validation, summarize_eval(records, provider.describe(), validation))


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_evaluation(out_dir: str | Path, evaluation: FrozenEvaluation) -> list[Path]:
    """Write ``rows.jsonl``, ``validation.jsonl`` (when there is one) and ``summary.json`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"rows.jsonl": _jsonl(evaluation.records)}
    if evaluation.validation is not None:
        files["validation.jsonl"] = _jsonl(evaluation.validation)
    files["summary.json"] = json.dumps(evaluation.summary, indent=2, sort_keys=True) + "\n"
    for name, text in files.items():
        atomic_write_text(out / name, text)
    return [out / name for name in files]


# ------------------------------------------------------------------------------------ the Stage-1 lineage

STAGES: tuple[tuple[int, str, str], ...] = (
    (1, "base_eval", "base model on the frozen cases"),
    (2, "overfit", "overfit check"),
    (3, "train", "LoRA SFT with validation measurements"),
    (4, "selection", "selection on validation"),
    (5, "final_eval", "selected checkpoint on test and the frozen cases, once"),
    (6, "compare", "base vs SFT comparison and gates G1-G7"),
)


@dataclass
class Stage1Result:
    """What a Stage-1 run did: the lineage record (``lineage.json``) and every stage's outputs that exist."""

    lineage: dict[str, Any]
    runs: dict[str, str] = field(default_factory=dict)
    base_summary: dict[str, Any] | None = None
    overfit: dict[str, Any] | None = None
    training_metrics: list[dict[str, Any]] = field(default_factory=list)
    measurements: list[dict[str, Any]] = field(default_factory=list)
    selection: dict[str, Any] | None = None
    final_summary: dict[str, Any] | None = None
    test_summary: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None
    gates: dict[str, Any] | None = None

    @property
    def stopped_at(self) -> int | None:
        return self.lineage.get("stopped_at")


def balanced_prefix(rows: Sequence[Mapping[str, Any]], count: int | None) -> list[Mapping[str, Any]]:
    """All rows (``None``), or a phase-balanced prefix: the first ``count`` rows in file order with at
    most ⌈count/2⌉ of each phase while both last (so a small size still scores both phases)."""
    if count is None or count >= len(rows):
        return list(rows)
    acts = [r for r in rows if r["metadata"]["phase"] == "ACT"]
    broadcasts = [r for r in rows if r["metadata"]["phase"] == "BROADCAST"]
    n_act = min(len(acts), max(count - len(broadcasts), (count + 1) // 2))
    return acts[:n_act] + broadcasts[: count - n_act]


class _Lineage:
    """The run-store side of one lineage: stage runs keyed by the lineage id, files written atomically."""

    def __init__(
        self,
        store: Any,
        experiment: str,
        lineage_id: str,
        backend: str,
        progress,
        plan_sha256: str | None = None,
    ):
        self.store, self.experiment, self.id, self.backend = store, experiment, lineage_id, backend
        self.plan_sha256 = plan_sha256  # the gate spec's: it governs the lineage's gates (new runs record it)
        self.aliases: set[str] = set()  # ids of equivalent lineages (see _equivalent_lineages)
        self.progress = progress or (lambda message: None)

    def stage(self, arm: str, spec: Mapping[str, Any]) -> tuple[Any, bool]:
        """``(run, reused)`` of a stage: a finished run of the same stage spec is reused."""
        run, origin = self.open_stage(arm, spec)
        return run, origin == "reused"

    def open_stage(self, arm: str, spec: Mapping[str, Any], resume: bool = False) -> tuple[Any, str]:
        """``(run, origin)`` of a stage: a finished run of the same stage spec is ``"reused"``; with
        ``resume`` an unfinished one is ``"resumed"``; else a ``"new"`` run."""
        run, origin = self.store.start_or_reuse(
            self.experiment,
            arm,
            {"lineage": self.id, "stage": arm, **spec},
            backend=self.backend,
            resume=resume,
            plan_sha256=self.plan_sha256,
        )
        self.progress(f"stage {arm}: {'' if origin == 'new' else origin + ' '}{run.path}")
        return run, origin

    @staticmethod
    def write(run: Any, name: str, text: str) -> None:
        path = run.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)

    @staticmethod
    def read(run: Any, name: str) -> Any:
        path = run.path / name
        if name.endswith(".jsonl"):
            return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        return json.loads(path.read_text(encoding="utf-8"))

    def finish(self, run: Any, work: Callable[[], None]) -> None:
        """Run ``work`` on a new stage run and mark it finished, or failed (and re-raise) on an error."""
        with run.working():
            work()

    @staticmethod
    def finish_resumable(run: Any, work: Callable[[], None]) -> None:
        """Run ``work`` and mark the run finished; an error or an interruption leaves it unfinished (and
        released), so the next call of the lineage resumes it from its last checkpoint."""
        with run.working(resumable=True):
            work()


def _resume_point(run: Any) -> tuple[list[dict[str, Any]], Any, set[int]]:
    """What an interrupted training run left: ``(measurements, last checkpoint or None, recorded steps)``;
    the checkpoint is the last measured one with a saved state (``None``: nothing to continue from)."""
    from rftlab.training.arena.stage1 import Checkpoint

    measured = (run.path / "validation.jsonl").exists()
    measurements = _Lineage.read(run, "validation.jsonl") if measured else []
    recorded = {int(row["step"]) for row in run.metrics()}
    last = measurements[-1] if measurements else None
    if last is None or not last.get("state_path"):
        return measurements, None, recorded
    return measurements, Checkpoint(last["step"], last["sampler_path"], last["state_path"]), recorded


def _data_identity(data_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from rftlab.analysis.arena.handoff import HandoffError, read_manifest, verify_files
    from rftlab.training.arena.stage1 import Stage1Error

    try:
        manifest = read_manifest(data_dir)
        verify_files(data_dir, manifest)
    except HandoffError as exc:
        raise Stage1Error(str(exc)) from None
    identity = {
        "content_sha256": manifest.get("content_sha256"),
        "structural_sha256": (manifest.get("structural_sha256") or {}).get("all"),
        "files": manifest["files"],
    }
    return manifest, identity


def _lineage_key(
    spec: Any, data: Path, gate_path: Path, backend: str, base_model: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(data manifest, lineage key)``: what decides a lineage's results (the spec's recipe, sizes and
    cases, never its name or description; the data's hashes, the gate spec's hash, the backend and the
    base model); its SHA-256 prefix is the lineage id."""
    from rftlab.analysis.arena.gates import load_gate_spec
    from rftlab.training.arena.stage1 import Stage1Error

    try:
        _, gate_sha = load_gate_spec(gate_path)
    except ValueError as exc:
        raise Stage1Error(str(exc)) from None
    manifest, data_identity = _data_identity(data)
    key = {
        "spec": spec.result_identity(),
        "data": data_identity,
        "gate_spec_sha256": gate_sha,
        "backend": backend,
        "base_model": base_model or spec.base_model,
    }
    return manifest, key


def _equivalent_lineages(store: Any, experiment: str, key: Mapping[str, Any], lineage_id: str) -> list[Any]:
    """The experiment's other lineage runs with the same results-deciding key: records written before
    the key left out the spec's documentation fields (their key holds the raw spec). Their test
    evaluation counts as this lineage's (never evaluated a second time); a finished one is read back."""
    from rftlab.training.arena.stage1 import Stage1Spec

    same = []
    for run in store.runs(experiment, "lineage"):
        recorded = run.record.spec
        try:
            identity = Stage1Spec.model_validate(recorded["spec"], strict=True).result_identity()
        except (KeyError, TypeError, ValueError):
            identity = recorded.get("spec") if isinstance(recorded, dict) else None
        if {**recorded, "spec": identity} == dict(key) and run.record.spec_sha256[:16] != lineage_id:
            same.append(run)
    return same


def _lineage_run(lineage: _Lineage, key: Mapping[str, Any]) -> tuple[Any, str]:
    """``(lineage run, origin)``: a finished equivalent lineage recorded under an older key is
    ``"reused"``; else the run store's answer for ``key``. Notes the older ids in ``lineage.aliases``."""
    older = _equivalent_lineages(lineage.store, lineage.experiment, key, lineage.id)
    lineage.aliases = {run.record.spec_sha256[:16] for run in older}
    done = [run for run in older if run.record.status == "finished"]
    if done:
        return done[-1], "reused"
    return lineage.store.start_or_reuse(
        lineage.experiment, "lineage", key, backend=lineage.backend, plan_sha256=lineage.plan_sha256
    )


def _quiet(backend: str) -> Any:
    """Silence transformers' progress bars and notices while the local model runs (no-op otherwise)."""
    if backend != "local":
        return contextlib.nullcontext()
    from rftlab.training.arena.sft import quiet_transformers

    return quiet_transformers()


def run_stage1(
    spec_path: str | Path,
    *,
    backend: str = "local",
    store_root: str | Path | None = None,
    data_dir: str | Path | None = None,
    work_dir: str | Path | None = None,
    base_model: str | None = None,
    device: str = "cpu",
    diagnosis_eval: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Stage1Result:
    """Run (or continue, or read back) the Stage-1 lineage of ``spec_path`` on ``backend`` (see the module
    docstring). ``data_dir`` overrides the spec's data directory, ``base_model`` its base model (e.g. a
    local directory of the same weights); ``work_dir`` holds the local model and checkpoints (default
    ``<store_root>/.arena_sft_work``). ``diagnosis_eval`` evaluates the selected checkpoint again as a
    diagnosis run excluded from claims. Raises ``Stage1Error`` (one line) on bad input and
    ``SingleEvaluationError`` when a second evaluation of the lineage is requested without it."""
    from rftlab.runs import RunStore, spec_sha256
    from rftlab.runs.paths import runs_root
    from rftlab.training.arena.stage1 import Stage1Error, load_stage1_spec, make_service, training_plan

    spec, _ = load_stage1_spec(spec_path)
    root = Path(store_root) if store_root is not None else runs_root()
    data = Path(data_dir) if data_dir is not None else spec.resolve(spec.data_dir)
    gate_path = spec.resolve(spec.gate_spec)
    manifest, key = _lineage_key(spec, data, gate_path, backend, base_model)
    train_rows = (manifest.get("examples_by_split") or {}).get("train")
    if isinstance(train_rows, int):
        training_plan(spec.train, train_rows)  # a plan above the step limit is refused before any stage
    lineage_id = spec_sha256(key)[:16]
    store = RunStore(root)
    lineage = _Lineage(store, spec.experiment, lineage_id, backend, progress, key["gate_spec_sha256"])
    lineage_run, lineage_origin = _lineage_run(lineage, key)
    if lineage_origin == "reused" and not diagnosis_eval:
        lineage.progress(f"lineage {lineage_id} finished earlier: read back from {lineage_run.path}")
        return _read_back(store, spec.experiment, _Lineage.read(lineage_run, "lineage.json"))
    if lineage_origin == "reused":
        lineage_run = None  # a diagnosis evaluation leaves the finished lineage record as it is
    work = Path(work_dir) if work_dir is not None else root / ".arena_sft_work"
    started = time.perf_counter()
    service = make_service(backend, spec, work, base_model, device)
    context = _Context(spec, data, gate_path, service, lineage, manifest)
    result = Stage1Result(
        lineage={
            "lineage": lineage_id,
            "experiment": spec.experiment,
            "spec_name": spec.name,
            "base_model": key["base_model"],
            "backend": backend,
            "data": key["data"],
            "gate_spec_sha256": key["gate_spec_sha256"],
            "stages": {},
            "stopped_at": None,
            "stop_reason": None,
        }
    )
    try:
        with _quiet(backend), closing_session(service.service, f"rftlab arena sft-run {spec.name}"):
            _run_stages(context, result, diagnosis_eval)
    except BaseException as exc:
        if lineage_run is not None:
            lineage_run.finish("failed", error=f"{type(exc).__name__}: {exc}"[:500])
        raise
    result.lineage["seconds"] = time.perf_counter() - started
    if lineage_run is not None:
        _Lineage.write(lineage_run, "lineage.json", _json(result.lineage))
        lineage_run.finish()
        result.runs["lineage"] = str(lineage_run.path)
    if diagnosis_eval and result.stopped_at is not None:
        raise Stage1Error(
            f"--diagnosis-eval needs a selected checkpoint; lineage {lineage_id} stopped at step {result.stopped_at}"
        )
    return result


@dataclass
class _Context:
    spec: Any
    data: Path
    gate_path: Path
    backend: Any
    lineage: _Lineage
    manifest: dict[str, Any]


def _record(result: Stage1Result, arm: str, run: Any, reused: bool, **facts: Any) -> None:
    result.runs[arm] = str(run.path)
    result.lineage["stages"][arm] = {"run": run.run_id, "path": str(run.path), "reused": reused, **facts}


def _stop(result: Stage1Result, step: int, reason: str) -> None:
    result.lineage.update(stopped_at=step, stop_reason=reason)


def _run_stages(ctx: _Context, result: Stage1Result, diagnosis_eval: bool) -> None:
    base = _stage_base_eval(ctx, result)
    if not _stage_overfit(ctx, result):
        return
    measurements = _stage_train(ctx, result)
    selected = _stage_selection(ctx, result, measurements)
    if selected is None:
        return
    final = _stage_final_eval(ctx, result, selected, diagnosis_eval)
    _stage_compare(ctx, result, base, final, diagnosis_eval)


def _frozen_cases(spec) -> list[int]:
    return list(range(0, FROZEN_CASE_COUNT, spec.evaluation.frozen_case_stride))


def _evaluate_sampler(ctx: _Context, sampler: Any, model: str, rows=None) -> FrozenEvaluation:
    from rftlab.training.arena.sft import SamplingProvider

    provider = SamplingProvider(sampler, model, ctx.spec.evaluation.max_tokens)
    return evaluate_frozen(provider, _frozen_cases(ctx.spec), rows)


def _write_frozen(run: Any, evaluation: FrozenEvaluation, summary: Mapping[str, Any]) -> None:
    _Lineage.write(run, "rows.jsonl", _jsonl(evaluation.records))
    _Lineage.write(run, "summary.json", _json(summary))


def _stage_base_eval(ctx: _Context, result: Stage1Result) -> Any:
    from rftlab.analysis.arena.compare import evaluation_from_records
    from rftlab.training.arena.stage1 import sampling_client

    spec = ctx.spec
    stage = {
        "model": result.lineage["base_model"],
        "cases": _frozen_cases(spec),
        "max_tokens": spec.evaluation.max_tokens,
    }
    run, reused = ctx.lineage.stage("base_eval", stage)
    if not reused:

        def work() -> None:
            evaluation = _evaluate_sampler(ctx, sampling_client(ctx.backend), result.lineage["base_model"])
            _write_frozen(run, evaluation, evaluation.summary)

        ctx.lineage.finish(run, work)
    summary = _Lineage.read(run, "summary.json")
    result.base_summary = summary
    _record(result, "base_eval", run, reused, cases=summary["num_cases"], message_strict_rate=summary["message_strict_rate"],
            generated_regret=summary["conditions"]["generated"]["mean_oracle_regret"])  # fmt: skip
    return evaluation_from_records(_Lineage.read(run, "rows.jsonl"), summary, str(run.path))


def _stage_overfit(ctx: _Context, result: Stage1Result) -> bool:
    from rftlab.training.arena.sft import OptimizerSettings, overfit_check, overfit_subset

    spec = ctx.spec
    cfg = spec.overfit
    rows = overfit_subset(
        read_rows(ctx.data / ctx.manifest.get("overfit_file", "overfit_256.jsonl")), cfg.rows
    )
    run, reused = ctx.lineage.stage("overfit", {"config": cfg.model_dump(), "rows": [r["id"] for r in rows]})
    if not reused:

        def work() -> None:
            verdict = overfit_check(
                ctx.backend.service,
                rows,
                ctx.backend.base_model,
                rank=spec.lora.rank,
                steps=cfg.steps,
                batch_size=cfg.batch_size,
                optimizer=OptimizerSettings(
                    learning_rate=cfg.learning_rate,
                    min_learning_rate=spec.train.min_learning_rate,
                    warmup_steps=cfg.warmup_steps,
                    weight_decay=cfg.weight_decay,
                    gradient_clip_norm=spec.train.gradient_clip_norm,
                ),
                threshold=cfg.min_schema_valid,
                max_tokens=spec.evaluation.max_tokens,
                max_length=ctx.backend.max_length,
                seed=spec.seed,
                on_step=lambda step, loss, lr: run.append_metrics(
                    {"step": step, "loss": loss, "learning_rate": lr}
                ),
            )
            replies = [
                {"id": r["id"], "phase": r["metadata"]["phase"], "raw_response": t}
                for r, t in zip(rows, verdict.replies, strict=True)
            ]
            _Lineage.write(run, "replies.jsonl", _jsonl(replies))
            _Lineage.write(run, "overfit.json", _json({**verdict.to_dict(), "rows": len(rows)}))

        ctx.lineage.finish(run, work)
    overfit = _Lineage.read(run, "overfit.json")
    result.overfit = overfit
    _record(result, "overfit", run, reused, passed=overfit["passed"], schema_valid=overfit["schema_valid"])
    if not overfit["passed"]:
        _stop(result, 2, overfit["diagnosis"])
    return bool(overfit["passed"])


def _stage_train(ctx: _Context, result: Stage1Result) -> list[dict[str, Any]]:
    from rftlab.training.arena.stage1 import train_with_checkpoints, training_plan

    spec = ctx.spec
    train_rows = read_rows(ctx.data / "train.jsonl")
    schedule = [row["id"] for row in read_rows(ctx.data / ctx.manifest["training_mixture"]["schedule_file"])]
    validation_rows = balanced_prefix(read_rows(ctx.data / "validation.jsonl"), spec.train.validation_rows)
    plan = training_plan(spec.train, len(train_rows))
    stage = {
        "train": spec.train.model_dump(),
        "lora": spec.lora.model_dump(),
        "plan": plan.to_dict(),
        "validation_rows": len(validation_rows),
    }
    run, origin = ctx.lineage.open_stage("train", stage, resume=True)
    reused = origin == "reused"
    if not reused:
        measurements, resume_from, recorded = _resume_point(run) if origin == "resumed" else ([], None, set())
        if origin == "resumed" and resume_from is None:
            run.finish("failed", error="interrupted before its first checkpoint; training started again")
            run, _ = ctx.lineage.open_stage("train", stage)
            measurements, recorded = [], set()
        elif resume_from is not None:
            ctx.lineage.progress(f"  resuming training after step {resume_from.step} (its saved state)")

        def on_checkpoint(checkpoint, sampler) -> None:
            from rftlab.training.arena.sft import SamplingProvider

            provider = SamplingProvider(sampler, f"step-{checkpoint.step}", spec.evaluation.max_tokens)
            records = run_validation(provider, validation_rows)
            _Lineage.write(run, f"validation/step-{checkpoint.step:06d}.jsonl", _jsonl(records))
            measurements.append(
                {
                    "step": checkpoint.step,
                    "sampler_path": checkpoint.sampler_path,
                    "state_path": checkpoint.state_path,
                    "validation": summarize_validation(records),
                }
            )
            _Lineage.write(run, "validation.jsonl", _jsonl(measurements))
            ctx.lineage.progress(
                f"  validation at step {checkpoint.step}: selection score {measurements[-1]['validation']['selection_score']}"
            )

        def on_step(step: int, loss: float, lr: float) -> None:
            if step not in recorded:  # a resumed run replays the steps after its checkpoint
                run.append_metrics({"step": step, "loss": loss, "learning_rate": lr})
            if (step + 1) % 10 == 0 or step + 1 == plan.steps:
                ctx.lineage.progress(
                    f"  step {step + 1}/{plan.steps}: loss {loss:.4f}, learning rate {lr:.3g}"
                )

        def work() -> None:
            rows_by_id = {row["id"]: row for row in train_rows}
            train_with_checkpoints(
                ctx.backend, spec, rows_by_id, schedule, plan, on_checkpoint, on_step=on_step,
                resume_from=resume_from,
            )  # fmt: skip

        ctx.lineage.finish_resumable(run, work)
    measurements = _Lineage.read(run, "validation.jsonl")
    result.measurements = measurements
    result.training_metrics = run.metrics()
    _record(result, "train", run, reused, steps=plan.steps, measurements=len(measurements))
    return measurements


def _stage_selection(ctx: _Context, result: Stage1Result, measurements: list[dict[str, Any]]) -> dict | None:
    from rftlab.analysis.arena.selection import select_checkpoint

    train_run = Path(result.runs["train"])
    steps = [m["step"] for m in measurements]
    run, reused = ctx.lineage.stage("selection", {"train_run": train_run.name, "steps": steps})
    if not reused:

        def work() -> None:
            records = {
                m["step"]: read_rows(train_run / "validation" / f"step-{m['step']:06d}.jsonl")
                for m in measurements
            }
            _Lineage.write(
                run, "selection.json", _json(select_checkpoint(measurements, ctx.gate_path, records))
            )

        ctx.lineage.finish(run, work)
    selection = _Lineage.read(run, "selection.json")
    result.selection = selection
    _record(result, "selection", run, reused, selected_step=selection["selected_step"])
    if selection["selected_step"] is None:
        _stop(result, 4, selection["diagnosis"])
        return None
    return next(m for m in measurements if m["step"] == selection["selected_step"])


def _stage_final_eval(ctx: _Context, result: Stage1Result, selected: Mapping[str, Any], diagnosis: bool):
    from rftlab.analysis.arena.compare import evaluation_from_records
    from rftlab.training.arena.stage1 import claim_final_evaluation, sampling_client

    spec = ctx.spec
    test_rows = balanced_prefix(read_rows(ctx.data / "test.jsonl"), spec.evaluation.test_rows)
    stage = {
        "stage": "final_eval",
        "checkpoint_step": selected["step"],
        "sampler_path": selected["sampler_path"],
        "cases": _frozen_cases(spec),
        "test_rows": len(test_rows),
        "max_tokens": spec.evaluation.max_tokens,
    }
    run, origin = claim_final_evaluation(
        ctx.lineage.store,
        spec.experiment,
        ctx.lineage.id,
        stage,
        ctx.lineage.backend,
        diagnosis,
        aliases=ctx.lineage.aliases,
        plan_sha256=ctx.lineage.plan_sha256,
    )
    ctx.lineage.progress(f"stage final_eval ({origin}): {run.path}")
    if origin != "reused":

        def work() -> None:
            sampler = sampling_client(ctx.backend, selected["sampler_path"])
            from rftlab.training.arena.sft import SamplingProvider

            model = f"{result.lineage['base_model']}+sft@step{selected['step']}"
            test_records = run_validation(
                SamplingProvider(sampler, model, spec.evaluation.max_tokens), test_rows
            )
            _Lineage.write(run, "test.jsonl", _jsonl(test_records))
            evaluation = _evaluate_sampler(ctx, sampler, model)
            summary = {
                **evaluation.summary,
                "validation": selected["validation"],
                "test": summarize_validation(test_records),
                "checkpoint_step": selected["step"],
                "diagnosis": diagnosis,
                "excluded_from_claims": diagnosis,
            }
            _write_frozen(run, evaluation, summary)

        ctx.lineage.finish(run, work)
    summary = _Lineage.read(run, "summary.json")
    result.final_summary, result.test_summary = summary, summary["test"]
    _record(
        result, "final_eval", run, origin == "reused", diagnosis=diagnosis, checkpoint_step=selected["step"]
    )
    return evaluation_from_records(_Lineage.read(run, "rows.jsonl"), summary, str(run.path))


def _stage_compare(ctx: _Context, result: Stage1Result, base, final, diagnosis: bool) -> None:
    from rftlab.analysis.arena.compare import NotComparableError, compare_evaluations
    from rftlab.analysis.arena.gates import evaluate_arena_gates, gate_rows, license_rows

    final_run = Path(result.runs["final_eval"])
    run, reused = ctx.lineage.stage("compare", {"final_eval_run": final_run.name, "diagnosis": diagnosis})
    if not reused:

        def work() -> None:
            try:
                comparison: Any = compare_evaluations(base, final)
            except NotComparableError as exc:
                comparison = f"refused: {exc}"
            evaluation = evaluate_arena_gates(result.final_summary, comparison, ctx.gate_path)
            gates = {
                **evaluation.to_dict(),
                "rows": gate_rows(evaluation),
                "licenses_table": license_rows(evaluation),
                "excluded_from_claims": diagnosis,
            }
            _Lineage.write(
                run,
                "comparison.json",
                _json(comparison if isinstance(comparison, dict) else {"refused": comparison}),
            )
            _Lineage.write(run, "gates.json", _json(gates))

        ctx.lineage.finish(run, work)
    result.comparison = _Lineage.read(run, "comparison.json")
    result.gates = _Lineage.read(run, "gates.json")
    _record(result, "compare", run, reused, verdicts=result.gates["verdicts"], excluded_from_claims=diagnosis)


def _read_back(store: Any, experiment: str, lineage: dict[str, Any]) -> Stage1Result:
    """A finished lineage's result from its stage runs (nothing is evaluated again)."""
    from rftlab.runs import load_run

    result = Stage1Result(lineage=lineage)
    for arm, info in lineage["stages"].items():
        run = load_run(info["path"])
        result.runs[arm] = info["path"]
        if arm == "base_eval":
            result.base_summary = _Lineage.read(run, "summary.json")
        elif arm == "overfit":
            result.overfit = _Lineage.read(run, "overfit.json")
        elif arm == "train":
            result.measurements = _Lineage.read(run, "validation.jsonl")
            result.training_metrics = run.metrics()
        elif arm == "selection":
            result.selection = _Lineage.read(run, "selection.json")
        elif arm == "final_eval":
            result.final_summary = _Lineage.read(run, "summary.json")
            result.test_summary = result.final_summary.get("test")
        elif arm == "compare":
            result.comparison = _Lineage.read(run, "comparison.json")
            result.gates = _Lineage.read(run, "gates.json")
    return result


def lineage_rows(result: Stage1Result) -> list[dict[str, Any]]:
    """The lineage as a table: one row per stage of the seed's order, with the run-store folder that holds
    its run (``runs/<experiment>/<folder>/``; the run ids stay in the run store and the lineage record) and
    its outcome."""
    rows = []
    for number, arm, title in STAGES:
        info = result.lineage["stages"].get(arm)
        if info is None:
            outcome = (
                "not reached" if result.stopped_at is not None and number > result.stopped_at else "not run"
            )
            rows.append({"step": number, "stage": title, "run folder": "–", "outcome": outcome})
            continue
        rows.append(
            {"step": number, "stage": title, "run folder": f"{arm}/", "outcome": _outcome(arm, result)}
        )
    return rows


_DIAGNOSIS = " (diagnosis run, excluded from claims)"


def _outcome(arm: str, result: Stage1Result) -> str:
    if arm == "base_eval" and result.base_summary:
        s = result.base_summary
        return (
            f"{s['num_cases']} cases, message strict rate {s['message_strict_rate']:.3f}, "
            f"generated regret {s['conditions']['generated']['mean_oracle_regret']:.3f}"
        )
    if arm == "overfit" and result.overfit:
        o = result.overfit
        rates = ", ".join(f"{k} {v:.2f}" for k, v in o["schema_valid"].items() if v is not None)
        return f"{'PASS' if o['passed'] else 'STOP'}: schema validity {rates} (threshold {o['threshold']})"
    if arm == "train":
        return f"{len(result.measurements)} validation measurements at steps {[m['step'] for m in result.measurements]}"
    if arm == "selection" and result.selection:
        s = result.selection
        return (
            f"selected step {s['selected_step']}"
            if s["selected_step"] is not None
            else "STOP: no eligible checkpoint"
        )
    if arm == "final_eval" and result.final_summary:
        t = result.test_summary or {}
        exact = t.get("overall", {}).get("exact", float("nan"))
        text = f"test exact {exact:.3f} on {t.get('rows')} rows; {result.final_summary['num_cases']} frozen cases"
        return text + _DIAGNOSIS if result.final_summary.get("excluded_from_claims") else text
    if arm == "compare" and result.gates:
        v = result.gates["verdicts"]
        text = (
            f"promotion {'PASS' if v['promotion'] else 'FAIL'}, "
            f"communication claim {'supported' if v['communication_claim'] else 'not supported'}"
        )
        return text + _DIAGNOSIS if result.gates.get("excluded_from_claims") else text
    return ""


def write_spec_variant(spec_path: str | Path, out_path: str | Path, changes: Mapping[str, Any]) -> str:
    """A copy of a Stage-1 spec file with ``changes`` (``{section: {field: value}}``, or ``{field: value}``
    for a top-level scalar it declares, such as ``seed``) applied, written
    atomically to ``out_path`` (a smoke-size lineage in quick mode); returns its path. A section or field
    the spec does not have is a ``ValueError``: a variant only resizes what the spec already declares."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    for section, fields in changes.items():
        if not isinstance(fields, Mapping) and section in spec and not isinstance(spec[section], dict):
            spec[section] = fields  # a top-level scalar the spec declares (the seed, the name)
            continue
        if not isinstance(spec.get(section), dict):
            raise ValueError(f"{spec_path}: no section {section!r} to change")
        unknown = sorted(set(fields) - set(spec[section]))
        if unknown:
            raise ValueError(f"{spec_path}: section {section!r} has no field(s) {', '.join(unknown)}")
        spec[section].update(fields)
    atomic_write_text(Path(out_path), json.dumps(spec, indent=2) + "\n")
    return str(out_path)


# ------------------------------------------------------------------ several lineages (issue 31)


def simulated_lineages(
    spec_path: str | Path,
    seeds: Sequence[int],
    *,
    store_root: str | Path | None = None,
    data_dir: str | Path | None = None,
    variant_dir: str | Path,
    progress: Callable[[str], None] | None = None,
) -> dict[int, Stage1Result]:
    """One Stage-1 lineage of the simulated learner per seed (each a full lineage in the run store). The
    spec's own seed runs from the spec file unchanged (its lineage key and id stay those recorded);
    every other seed from a copy in ``variant_dir`` that differs only in its seed and name."""
    from rftlab.training.arena.stage1 import load_stage1_spec

    spec, _ = load_stage1_spec(spec_path)
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be distinct and at least one, got {list(seeds)}")
    out = {}
    for seed in seeds:
        path = spec_path
        if seed != spec.seed:
            path = write_spec_variant(
                spec_path,
                Path(variant_dir) / f"{spec.name}-seed{seed}.json",
                {"seed": seed, "name": f"{spec.name}-seed{seed}"},
            )
        out[seed] = run_stage1(
            path, backend="simulated", store_root=store_root, data_dir=data_dir, progress=progress
        )
    return out


def audit_gates(gate_spec: str | Path, results: Sequence[Stage1Result]) -> Any:
    """The pre-registration audit (``rftlab.runs.plan_audit.audit_decision``) of the promotion gates that
    ``gate_spec`` registers, over every stage run of the lineages in ``results`` that reached their gates
    (the runs whose records the gates read, and the runs that produced them)."""
    from rftlab.runs import load_run
    from rftlab.runs.plan_audit import audit_decision

    runs = [load_run(path) for r in results if r.gates for path in r.runs.values()]
    return audit_decision(gate_spec, runs)


def final_records(result: Stage1Result) -> list[dict[str, Any]]:
    """The frozen-evaluation records of a lineage's selected checkpoint (its ``final_eval`` run)."""
    if "final_eval" not in result.runs:
        raise ValueError(f"lineage {result.lineage.get('lineage')} has no final evaluation")
    return read_rows(Path(result.runs["final_eval"]) / "rows.jsonl")


@dataclass
class LineageStudy:
    """The lineages of the simulated learner with their truth, coverage, lineage-level contrast and the
    gates after review (``rftlab.analysis.arena.lineages`` and ``.review``)."""

    results: dict[int, Stage1Result]
    selected_steps: dict[int, int]
    competence: dict[int, float]
    truth_contrasts: dict[int, dict[str, float]]
    coverage: dict[int, list[dict[str, Any]]]
    method: dict[str, Any] | None
    revised_gates: dict[int, list[dict[str, Any]]]
    gate_errors: dict[int, list[dict[str, Any]]]
    revision_sha256: str
    analysis_cpu_seconds: float
    base_competence: dict[int, float] = field(default_factory=dict)
    expected_corrupted_replies: dict[int, float] = field(default_factory=dict)
    """per lineage: (1 − q(s)) × the final evaluation's frozen replies (ACT and BROADCAST)"""


def lineage_study(results: Mapping[int, Stage1Result]) -> LineageStudy:
    """Truth, coverage, the lineage-level SFT − base regret and the revised gates of the lineages that
    reached their comparison (the others are left out and say so by their absence)."""
    from rftlab.analysis.arena.lineages import coverage_rows, method_level
    from rftlab.analysis.arena.review import gate_error_rows, load_revised_spec, revised_gate_rows
    from rftlab.training.arena.simulated import SIMULATED_MODELS
    from rftlab.training.arena.truth import expected_contrasts, expected_frozen, frozen_outcomes

    done = {s: r for s, r in results.items() if r.gates and r.comparison and "endpoints" in r.comparison}
    revision, revision_sha = load_revised_spec()
    started = time.process_time()
    cases = sorted({rec["case_index"] for r in done.values() for rec in final_records(r)})
    outcomes = {o.case_index: o for o in frozen_outcomes(cases)} if cases else {}
    study = LineageStudy(dict(results), {}, {}, {}, {}, None, {}, {}, revision_sha, 0.0)
    for seed, r in done.items():
        records = final_records(r)
        mine = [outcomes[rec["case_index"]] for rec in records]
        q = SIMULATED_MODELS[r.lineage["base_model"]]
        step_ = r.selection["selected_step"]
        truth_base, truth_sft = expected_frozen(mine, q(0)), expected_frozen(mine, q(step_))
        contrasts = expected_contrasts(mine, q(0), q(step_))
        study.selected_steps[seed], study.competence[seed], study.base_competence[seed] = (
            step_,
            q(step_),
            q(0),
        )
        replies = r.final_summary["replies"]
        study.expected_corrupted_replies[seed] = (1 - q(step_)) * (
            replies["act"]["n"] + replies["broadcast"]["n"]
        )
        study.truth_contrasts[seed] = contrasts
        study.coverage[seed] = coverage_rows(
            r.base_summary, r.final_summary, r.comparison, truth_base, truth_sft, contrasts
        )
        study.revised_gates[seed] = revised_gate_rows(r.gates["rows"], records, revision, r.test_summary)
        study.gate_errors[seed] = gate_error_rows(
            r.gates["rows"], records, r.comparison, r.final_summary, contrasts, revision, r.test_summary
        )
    if len(done) >= 2:
        regret = lambda s: s["conditions"]["generated"]["mean_oracle_regret"]  # noqa: E731
        study.method = method_level(
            {s: regret(r.final_summary) for s, r in done.items()},
            {s: regret(r.base_summary) for s, r in done.items()},
            {s: c["primary"] for s, c in study.truth_contrasts.items()},
        )
    study.analysis_cpu_seconds = time.process_time() - started
    return study
