"""The arena's Stage-1 lineage (part of the ``rftlab.studies.arena`` driver).

``run_stage1(spec)`` is the seed's experiment order as one lineage in the run store
(``runs/<experiment>/<stage>/<run_id>/``, docs/arena.md §11 "Procedure"): 1 the base model on the frozen
cases (raw replies kept), 2 the overfit check (stop with a template/loss-mask diagnosis unless schema
validity reaches 0.99 in both phases), 3 LoRA SFT on the mixture with validation measurements and saved
checkpoints, 4 selection on validation only (stop with a diagnosis when nothing is eligible), 5 the
selected checkpoint on ``test`` and the frozen cases exactly once (a second evaluation is refused unless it
is a diagnosis run, excluded from claims), 6 the base-vs-SFT comparison (§10.6) and gates G1–G7. Each
stage is a run whose spec names the lineage; a finished stage is reused, so a rerun continues where the
last one stopped and a finished lineage is only read back.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.analysis.arena.evaluation import summarize_validation
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT
from rftlab.rollout.arena.evaluation import run_validation
from rftlab.studies.arena_frozen import (
    FrozenEvaluation,
    _json,
    _jsonl,
    evaluate_frozen,
    read_rows,
)
from rftlab.studies.arena_lineage_store import (
    Stage1Result,
    _Lineage,
    _lineage_key,
    _lineage_run,
    _read_back,
    _resume_point,
    balanced_prefix,
)
from rftlab.training.sessions import closing_session


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
        result = _read_back(store, spec.experiment, _Lineage.read(lineage_run, "lineage.json"))
        result.runs["lineage"] = str(lineage_run.path)  # as a lineage run now lists it
        return result
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

    final_run, final_summary = Path(result.runs["final_eval"]), result.final_summary
    if final_summary is None:
        raise ValueError("the compare stage needs the final evaluation's summary")
    run, reused = ctx.lineage.stage("compare", {"final_eval_run": final_run.name, "diagnosis": diagnosis})
    if not reused:

        def work() -> None:
            try:
                comparison: Any = compare_evaluations(base, final)
            except NotComparableError as exc:
                comparison = f"refused: {exc}"
            evaluation = evaluate_arena_gates(final_summary, comparison, ctx.gate_path)
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
    result.gates = gates = _Lineage.read(run, "gates.json")
    _record(result, "compare", run, reused, verdicts=gates["verdicts"], excluded_from_claims=diagnosis)
