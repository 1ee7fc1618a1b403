"""The Stage-1 SFT run's pieces on the training side (docs/arena.md §11 "Procedure"): its spec, backends, the
LoRA training with saved, measured checkpoints, and the single-evaluation rule.

- ``Stage1Spec`` (``data/specs/arena_sft_*.json``, pydantic, strict): base model, data, gate spec, LoRA,
  overfit check, training and evaluation sizes. Implementation settings (backend, device, where files go)
  are not in it, so they never change its hash.
- ``make_service(backend, ...)``: ``tinker`` (``tinker.ServiceClient``: the hosted service, or a
  Tinker-compatible server through ``TINKER_BASE_URL``), ``local`` (the in-process
  ``rftlab.training.local_tinker`` backend; the built-in ``rftlab/tiny-qwen3-arena`` or any local Hugging
  Face directory, CPU or CUDA) or ``simulated`` (``rftlab.training.arena.simulated``).
- ``train_with_checkpoints``: LoRA SFT on the seeded mixture schedule (``train_mixture.jsonl``); at step 0,
  every N steps and at the end it saves the checkpoint (sampler weights and optimizer state) and hands a
  sampling client to the caller, who scores validation (the scorer lives in higher layers).
- ``claim_final_evaluation``: the selected checkpoint sees ``test`` and the frozen cases once per lineage;
  a second evaluation is refused unless it is a diagnosis run, which is marked excluded from claims.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rftlab.runs.locks import LockPathError, open_lock_file
from rftlab.runs.paths import PROJECT_ROOT
from rftlab.runs.strictjson import read_json_file
from rftlab.training.arena.sft import (
    LOCAL_ARENA_MODEL,
    OptimizerSettings,
    SftError,
    create_training_client,
    get_arena_renderer,
    local_arena_model,
    row_datum,
    tinker_service,
    train_steps,
    warmup_steps_for,
)
from rftlab.training.arena.simulated import SIMULATED_MODELS, SimulatedArenaService

BACKENDS: tuple[str, ...] = ("local", "tinker", "simulated")
PositiveInt = Annotated[int, Field(strict=True, ge=1)]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]
# Upper limits of the spec's sizes: far above any Stage-1 run (310 steps of 32 rows, 224 tokens), low
# enough that a typo such as 10^9 is refused when the spec is read instead of filling the memory.
MAX_STEPS = 100_000
MAX_BATCH = 4_096
MAX_ROWS = 1_000_000
MAX_TOKENS = 131_072
Steps = Annotated[int, Field(strict=True, ge=1, le=MAX_STEPS)]
Batch = Annotated[int, Field(strict=True, ge=1, le=MAX_BATCH)]
Rows = Annotated[int, Field(strict=True, ge=1, le=MAX_ROWS)]
Tokens = Annotated[int, Field(strict=True, ge=1, le=MAX_TOKENS)]
# Fields that describe a spec without changing what it runs: they never enter the lineage key.
DOCUMENTATION_FIELDS = frozenset({"name", "description", "size_note"})
Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class Stage1Error(ValueError):
    """A Stage-1 spec, backend or lineage request that cannot be carried out (one line saying why)."""


class SingleEvaluationError(Stage1Error):
    """A second test/frozen evaluation of a lineage was requested without marking it a diagnosis run."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class LoraConfig(_Strict):
    rank: int = Field(strict=True, ge=1, le=1024)
    alpha: Finite = Field(gt=0)
    dropout: Finite = Field(ge=0, lt=1)
    targets: list[str] = Field(min_length=1, max_length=64)
    max_sequence_length: Tokens


class OverfitConfig(_Strict):
    rows: Rows | None = None
    steps: Steps
    batch_size: Batch
    learning_rate: Finite = Field(gt=0)
    weight_decay: Finite = Field(ge=0)
    warmup_steps: int = Field(strict=True, ge=0, le=MAX_STEPS)
    min_schema_valid: Finite = Field(gt=0, le=1)


class TrainConfig(_Strict):
    learning_rate: Finite = Field(gt=0)
    min_learning_rate: Finite = Field(ge=0)
    weight_decay: Finite = Field(ge=0)
    warmup_fraction: Finite = Field(ge=0, lt=1)
    batch_size: Batch
    epochs: int = Field(strict=True, ge=1, le=1_000)
    max_steps: Steps | None = None
    gradient_clip_norm: Finite = Field(gt=0)
    validation_every_steps: Steps
    min_validation_measurements: int = Field(strict=True, ge=1, le=1_000)
    validation_rows: Rows | None = None


class EvalConfig(_Strict):
    frozen_case_stride: int = Field(strict=True, ge=1, le=60)
    max_tokens: Tokens
    test_rows: Rows | None = None


class Stage1Spec(_Strict):
    """One Stage-1 lineage's configuration (see the module docstring)."""

    name: str = Field(pattern=NAME)
    description: str = ""
    experiment: str = Field(pattern=NAME)
    base_model: str = Field(min_length=1)
    renderer: Literal["qwen3_instruct"]
    data_dir: str = Field(min_length=1)
    gate_spec: str = Field(min_length=1)
    seed: NonNegativeInt = 0
    lora: LoraConfig
    overfit: OverfitConfig
    train: TrainConfig
    evaluation: EvalConfig
    size_note: str = ""

    @model_validator(mode="after")
    def _sizes(self) -> Stage1Spec:
        if self.train.min_learning_rate > self.train.learning_rate:
            raise ValueError("train.min_learning_rate exceeds train.learning_rate")
        if self.overfit.rows is not None and self.overfit.rows < 2:
            raise ValueError("overfit.rows must be >= 2 (one row of each phase) or null for all")
        return self

    def resolve(self, relative: str) -> Path:
        path = Path(relative)
        return path if path.is_absolute() else PROJECT_ROOT / path

    def result_identity(self) -> dict[str, Any]:
        """What of the spec decides a lineage's results: the recipe (LoRA, overfit, training), the
        evaluation sizes and cases, the renderer, the seed and the experiment. Left out: the documentation
        fields (:data:`DOCUMENTATION_FIELDS`), the paths of the data and the gate spec (the lineage key
        names their content hashes instead) and the base model (the key names the one trained)."""
        left_out = DOCUMENTATION_FIELDS | {"data_dir", "gate_spec", "base_model"}
        return self.model_dump(mode="json", exclude=set(left_out))


def load_stage1_spec(path: str | Path) -> tuple[Stage1Spec, dict[str, Any]]:
    """``(spec, its JSON)``; ``Stage1Error`` with one line for a missing, non-JSON or invalid spec."""
    path = Path(path)
    raw = read_json_file(path, "spec", Stage1Error)
    if not isinstance(raw, dict):
        raise Stage1Error(f"spec {path} is not a JSON object")
    try:
        return Stage1Spec.model_validate(raw, strict=True), raw
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "the top level"
        raise Stage1Error(f"spec {path} is not a valid Stage-1 spec: {where}: {error['msg']}") from None


# ---------------------------------------------------------------- schedule


@dataclass(frozen=True)
class TrainingPlan:
    """Optimizer steps, warm-up and the steps at which validation is measured (step 0 = before training)."""

    steps: int
    warmup_steps: int
    validation_every: int
    validation_steps: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "optimizer_steps": self.steps,
            "warmup_steps": self.warmup_steps,
            "validation_every_steps": self.validation_every,
            "validation_steps": list(self.validation_steps),
        }


def training_plan(config: TrainConfig, train_rows: int) -> TrainingPlan:
    """``ceil(epochs·rows/batch)`` steps (or ``max_steps``), ``ceil(3%)`` warm-up, validation at 0, every
    N and the end, N shortened on a short run so at least ``min_validation_measurements`` are taken."""
    steps = config.max_steps or math.ceil(config.epochs * train_rows / config.batch_size)
    if steps > MAX_STEPS:
        raise Stage1Error(
            f"train: {config.epochs} epoch(s) of {train_rows} rows in batches of {config.batch_size} make "
            f"{steps} optimizer steps, above the limit {MAX_STEPS}; set train.max_steps or fewer epochs"
        )
    every = min(
        config.validation_every_steps, max(1, steps // max(1, config.min_validation_measurements - 1))
    )
    points = tuple(sorted({0, *range(every, steps, every), steps}))
    return TrainingPlan(steps, warmup_steps_for(steps, config.warmup_fraction), every, points)


# ---------------------------------------------------------------- backends


@dataclass
class Backend:
    """A tinker-interface service and the base model name or directory it trains."""

    name: str
    service: Any
    base_model: str
    max_length: int


def make_service(
    backend: str,
    spec: Stage1Spec,
    work_dir: str | Path,
    base_model: str | None = None,
    device: str = "cpu",
) -> Backend:
    """The backend's service for ``spec`` (``base_model`` overrides the spec's, e.g. a local directory of
    the same model on a GPU machine); ``Stage1Error`` when it cannot be built here."""
    model = base_model or spec.base_model
    if backend not in BACKENDS:
        raise Stage1Error(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if (model in SIMULATED_MODELS) != (backend == "simulated"):
        raise Stage1Error(
            f"the simulated backend serves exactly the simulated learners {sorted(SIMULATED_MODELS)} "
            f"(got backend {backend!r}, model {model!r})"
        )
    if backend == "simulated":
        return Backend(backend, SimulatedArenaService(spec.seed), model, spec.lora.max_sequence_length)
    if backend == "tinker":
        try:
            return Backend(backend, tinker_service(), model, spec.lora.max_sequence_length)
        except SftError as exc:
            raise Stage1Error(str(exc)) from None
    from rftlab.training.local_tinker import LocalServiceClient

    work = Path(work_dir)
    if model == LOCAL_ARENA_MODEL:
        model = local_arena_model(work / "models" / "tiny-qwen3-arena")
    elif not Path(model).is_dir():
        raise Stage1Error(
            f"the local backend trains {LOCAL_ARENA_MODEL!r} or a local Hugging Face model directory; "
            f"{model!r} is neither (pass --base-model DIR with the downloaded weights)"
        )
    service = LocalServiceClient(storage_dir=work / "checkpoints", model_dirs=[model], device=device)
    return Backend(backend, service, model, spec.lora.max_sequence_length)


# ---------------------------------------------------------------- training with measured checkpoints


@dataclass(frozen=True)
class Checkpoint:
    step: int
    sampler_path: str
    state_path: str | None


def train_with_checkpoints(
    backend: Backend,
    spec: Stage1Spec,
    rows_by_id: Mapping[str, Mapping[str, Any]],
    schedule: Sequence[str],
    plan: TrainingPlan,
    on_checkpoint: Callable[[Checkpoint, Any], None],
    on_step: Callable[[int, float, float], None] | None = None,
    resume_from: Checkpoint | None = None,
) -> list[float]:
    """Train on ``schedule`` (row ids in draw order; step k takes draws ``[k·B, (k+1)·B)``, wrapping), and at
    every ``plan.validation_steps`` save the checkpoint and call ``on_checkpoint(checkpoint, sampler)``.

    ``resume_from`` (a checkpoint this plan saved, with its ``state_path``) continues an interrupted run: the
    weights and optimizer state are loaded from it (``create_training_client_from_state_with_optimizer``)
    and training goes on from its step, with the same batches and learning rates as an uninterrupted run."""
    if not schedule:
        raise Stage1Error("the training schedule is empty")
    missing = sorted({i for i in schedule if i not in rows_by_id})
    if missing:
        raise Stage1Error(
            f"{len(missing)} scheduled row id(s) are not in train.jsonl, e.g. {missing[0][:16]}"
        )
    cfg = spec.train
    if resume_from is None:
        training = create_training_client(backend.service, backend.base_model, spec.lora.rank, spec.seed)
    else:
        if resume_from.state_path is None or resume_from.step not in plan.validation_steps:
            raise Stage1Error(
                f"checkpoint at step {resume_from.step} cannot be resumed (no saved state in this plan)"
            )
        training = backend.service.create_training_client_from_state_with_optimizer(resume_from.state_path)
        training = training.result() if hasattr(training, "result") else training
    renderer = get_arena_renderer(training.get_tokenizer())
    datums: dict[str, Any] = {}

    def batch(step: int) -> list[Any]:
        ids = [schedule[(step * cfg.batch_size + i) % len(schedule)] for i in range(cfg.batch_size)]
        for row_id in ids:
            if row_id not in datums:
                datums[row_id] = row_datum(rows_by_id[row_id], renderer, backend.max_length)
        return [datums[row_id] for row_id in ids]

    optimizer = OptimizerSettings(
        learning_rate=cfg.learning_rate,
        min_learning_rate=cfg.min_learning_rate,
        warmup_steps=plan.warmup_steps,
        weight_decay=cfg.weight_decay,
        gradient_clip_norm=cfg.gradient_clip_norm,
    )

    def checkpoint(step: int) -> None:
        name = f"step-{step:06d}"
        sampler_path = training.save_weights_for_sampler(name).result().path
        state = training.save_state(name).result().path if hasattr(training, "save_state") else None
        sampler = backend.service.create_sampling_client(model_path=sampler_path)
        sampler = sampler.result() if hasattr(sampler, "result") else sampler
        on_checkpoint(Checkpoint(step, sampler_path, state), sampler)

    losses: list[float] = []
    done = 0 if resume_from is None else resume_from.step
    for point in plan.validation_steps:
        if point <= done and resume_from is not None:
            continue  # measured before the interruption
        if point > done:
            losses += train_steps(training, batch, range(done, point), plan.steps, optimizer, on_step)
            done = point
        checkpoint(point)
    return losses


def sampling_client(backend: Backend, model_path: str | None = None) -> Any:
    """A sampling client of a saved checkpoint, or of the base model when ``model_path`` is ``None``."""
    if model_path is None:
        client = backend.service.create_sampling_client(base_model=backend.base_model)
    else:
        client = backend.service.create_sampling_client(model_path=model_path)
    return client.result() if hasattr(client, "result") else client


# ---------------------------------------------------------------- the single-evaluation rule


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fd = open_lock_file(folder / ".final_eval.lock")  # never through a planted symlink
    except LockPathError as exc:
        raise Stage1Error(str(exc)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def claim_final_evaluation(
    store: Any,
    experiment: str,
    lineage: str,
    stage_spec: Mapping[str, Any],
    backend: str,
    diagnosis: bool = False,
    aliases: Collection[str] = (),
    plan_sha256: str | None = None,
) -> tuple[Any, str]:
    """The run that holds the lineage's one test/frozen evaluation: ``(run, "reused")`` when it finished
    already, ``(run, "new")`` the first time. Any earlier evaluation of this lineage that did not finish,
    or that evaluated something else, means the test split was opened: a new one is refused
    (``SingleEvaluationError``) unless ``diagnosis=True``, which creates a run marked
    ``diagnosis: true, excluded_from_claims: true`` (``(run, "diagnosis")``). An evaluation of a lineage
    in ``aliases`` (the same data, recipe, backend and base model under an older key) counts as an earlier
    one. A lock file serialises concurrent claims of one experiment. ``plan_sha256``: the governing gate
    spec's hash, recorded in a new run."""
    arm = "final_eval"
    with _locked(Path(store.root) / experiment):
        prior = [
            r
            for r in store.runs(experiment, arm)
            if r.record.spec.get("lineage") in {lineage, *aliases} and not r.record.spec.get("diagnosis")
        ]
        if diagnosis:
            spec = {**stage_spec, "lineage": lineage, "diagnosis": True, "excluded_from_claims": True}
            run = store.create_run(experiment, arm, spec, backend=backend, plan_sha256=plan_sha256)
            return run, "diagnosis"
        spec = {**stage_spec, "lineage": lineage}
        same = [r for r in prior if r.record.spec == spec and r.record.status == "finished"]
        prior.sort(key=lambda r: r.record.spec.get("lineage") == lineage)  # an older key's run first
        if same:
            return max(same, key=lambda r: r.record.created_at), "reused"
        if prior:
            first = prior[0]
            raise SingleEvaluationError(
                f"lineage {lineage} already opened its test split and frozen cases in run {first.path} "
                f"(status {first.record.status}); a second evaluation is refused. Re-run it as a diagnosis "
                "run (excluded from claims) if you need to look again"
            )
        return store.create_run(experiment, arm, spec, backend=backend, plan_sha256=plan_sha256), "new"
