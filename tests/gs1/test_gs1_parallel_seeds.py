"""The run-level plan's seeds in two worker processes equal the same seeds run one after the other: every
run's rollouts and evaluation items, on the local backend at quick size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rftlab.launch.gs1.backend import make_gs1_backend
from rftlab.runs.store import RunStore
from rftlab.studies.gs1 import (
    DEFAULT_SPEC,
    RUN_PLAN,
    evaluate_base,
    load_run_plan,
    load_spec,
    study_seeds,
    train_arms,
)


def _run_files(result) -> dict:
    """Every seed's runs by arm: their rollouts and evaluation items (the bytes a result is read from)."""
    out = {}
    for seed in result.seeds:
        for arm, ref in seed.runs.items():
            folder = Path(ref.path)
            files = sorted(p for p in folder.rglob("*.jsonl") if p.name != "metrics.jsonl")
            out[(seed.seed, arm)] = {p.relative_to(folder).as_posix(): p.read_bytes() for p in files}
    return out


@pytest.mark.slow
def test_seeds_in_two_workers_equal_the_serial_seeds(tmp_path, monkeypatch):
    spec = load_spec(DEFAULT_SPEC)
    backend = make_gs1_backend("local", spec, root=str(tmp_path / "backend"), quick=True)
    assert backend.recipe is not None and backend.recipe.quick
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({**json.loads(RUN_PLAN.read_text()), "seeds": [0, 1, 2]}))
    plan = load_run_plan(plan_file)
    bandwidth = backend.arms["gs1_kernel"].bandwidth
    results = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("RFTLAB_WORKERS", workers)
        store = RunStore(tmp_path / f"runs-{workers}")
        seed0 = train_arms(backend, store, ("grpo_gs8", "gs1_kernel"), bandwidth, spec)
        seed0["base"] = evaluate_base(backend, store)
        results[workers] = study_seeds(backend, spec, store, plan, bandwidth, seed0, None)
    serial, parallel = _run_files(results["1"]), _run_files(results["2"])
    assert sorted(serial) == [(s, a) for s in (0, 1, 2) for a in ("base", "grpo_gs8", "gs1_kernel")]
    assert all(serial.values()) and serial == parallel
    assert results["1"].treatment_vs_control.differences == results["2"].treatment_vs_control.differences
