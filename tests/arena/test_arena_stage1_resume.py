"""An interrupted Stage-1 training stage resumes from its last measured checkpoint (weights and optimizer
state from ``save_state``) instead of starting again: the lineage ends where an uninterrupted one ends, the
same run holds the whole training, and only the steps after the checkpoint are trained again. Checked on the
simulated learner through ``run_stage1`` and, for the optimizer state, on the real local backend."""

from __future__ import annotations

import json

import pytest
from stage1_specs import SMALL, write_spec

import rftlab.training.arena.stage1 as stage1
from rftlab.runs import RunStore
from rftlab.studies.arena import run_stage1
from rftlab.training.arena.stage1 import (
    Backend,
    Checkpoint,
    load_stage1_spec,
    train_with_checkpoints,
    training_plan,
)


@pytest.fixture
def data(stage1_data):
    return stage1_data


def _spec(tmp_path, base="arena_sft_simulated.json", **changes):
    return write_spec(tmp_path, base, "resume", **changes)


TRAIN_STEPS = stage1.train_steps  # the real loop, before any test wraps it


class Interrupt(RuntimeError):
    """A crash (a service outage, a killed connection) at a given optimizer step."""


def _interrupt_at(monkeypatch, step: int, trained: list[int]):
    """Make the training loop fail when it reaches optimizer step ``step``; every step it
    trains is appended to ``trained``."""
    real = TRAIN_STEPS

    def train_steps(training, batches, steps, total, optimizer, on_step=None):
        def counted(k, loss, lr):
            trained.append(k)
            if on_step is not None:
                on_step(k, loss, lr)

        if step in steps:
            real(training, batches, range(steps.start, step), total, optimizer, counted)
            raise Interrupt(f"interrupted at step {step}")
        return real(training, batches, steps, total, optimizer, counted)

    monkeypatch.setattr(stage1, "train_steps", train_steps)


def _validation(result):
    return [(m["step"], m["validation"]) for m in result.measurements]


@pytest.mark.slow
def test_an_interrupted_training_stage_resumes_from_its_last_checkpoint(data, tmp_path, monkeypatch):
    spec = _spec(tmp_path, **SMALL)
    whole = run_stage1(spec, backend="simulated", store_root=tmp_path / "whole", data_dir=data)

    first: list[int] = []
    _interrupt_at(monkeypatch, 60, first)
    with pytest.raises(Interrupt):
        run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert first == list(range(60))
    (interrupted,) = RunStore(tmp_path / "runs").runs("arena_sft_simulated", "train")
    assert interrupted.record.status == "running"  # left to resume, not marked failed
    measured = (interrupted.path / "validation.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in measured] == [0, 40]

    second: list[int] = []
    _interrupt_at(monkeypatch, 10_000, second)  # counts, never interrupts
    resumed = run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert second == list(range(40, 80))  # only the steps after the step-40 checkpoint
    (train_run,) = RunStore(tmp_path / "runs").runs("arena_sft_simulated", "train")
    assert train_run.path == interrupted.path and train_run.finished
    assert [row["step"] for row in train_run.metrics()] == list(range(80))
    assert _validation(resumed) == _validation(whole)
    assert resumed.selection["selected_step"] == whole.selection["selected_step"]
    assert [r["loss"] for r in resumed.training_metrics] == [r["loss"] for r in whole.training_metrics]
    assert resumed.gates == whole.gates


def test_a_run_interrupted_before_its_first_checkpoint_starts_again(data, tmp_path, monkeypatch):
    spec = _spec(tmp_path, **SMALL)
    real = stage1.create_training_client
    calls = {"n": 0}

    def broken(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise Interrupt("interrupted while creating the training client")
        return real(*args, **kwargs)

    monkeypatch.setattr(stage1, "create_training_client", broken)
    with pytest.raises(Interrupt):
        run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    result = run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert result.stopped_at is None and [m["step"] for m in result.measurements] == [0, 40, 80]
    runs = {r.record.status: r for r in RunStore(tmp_path / "runs").runs("arena_sft_simulated", "train")}
    assert set(runs) == {"failed", "finished"}
    assert "before its first checkpoint" in runs["failed"].record.error


def test_resuming_restores_the_optimizer_state_on_the_local_backend(data, tmp_path):
    """The real local backend: losses after a resume equal those of an uninterrupted run to the last bit,
    which needs the Adam moments back as well as the weights (a fresh optimizer would change them)."""
    from rftlab.studies.arena import read_rows
    from rftlab.training.arena.sft import local_arena_model
    from rftlab.training.local_tinker import LocalServiceClient

    spec_path = _spec(
        tmp_path, base="arena_sft_local.json", **{"train__max_steps": 6, "train__validation_every_steps": 3}
    )
    spec, _ = load_stage1_spec(spec_path)
    model = local_arena_model(tmp_path / "model")
    rows = {row["id"]: row for row in read_rows(data / "train.jsonl")}
    schedule = list(rows)[:24]
    plan = training_plan(spec.train, len(rows))
    assert plan.validation_steps == (0, 1, 2, 3, 4, 5, 6)  # 6 steps, at least 8 measurements asked for

    def run(resume_from=None, service=None):
        service = service or LocalServiceClient(storage_dir=tmp_path / "ckpt", model_dirs=[model])
        backend = Backend("local", service, model, spec.lora.max_sequence_length)
        saved: list[Checkpoint] = []
        losses = train_with_checkpoints(
            backend, spec, rows, schedule, plan, lambda c, s: saved.append(c), resume_from=resume_from
        )
        return losses, saved, service

    whole, saved, service = run()
    assert all(loss > 0 for loss in whole)  # the replies are inside the context: every step has a loss
    middle = next(c for c in saved if c.step == 3)
    resumed, later, _ = run(resume_from=middle, service=service)
    assert resumed == whole[3:]
    assert [c.step for c in later] == [4, 5, 6]
    # the control: the same weights with a fresh optimizer give other losses, so the equality above
    # needs the restored Adam moments
    service.create_training_client_from_state_with_optimizer = service.create_training_client_from_state
    fresh, _, _ = run(resume_from=middle, service=service)
    assert fresh[0] == whole[3] and fresh[1:] != whole[4:]


def test_a_checkpoint_without_state_is_refused(data, tmp_path):
    spec, _ = load_stage1_spec(_spec(tmp_path, **SMALL))
    plan = training_plan(spec.train, 100)
    backend = stage1.make_service("simulated", spec, tmp_path)
    with pytest.raises(stage1.Stage1Error, match="cannot be resumed"):
        train_with_checkpoints(
            backend, spec, {"a": {}}, ["a"], plan, lambda c, s: None, resume_from=Checkpoint(40, "p", None)
        )
