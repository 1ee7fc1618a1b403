"""The Stage-1 lineage (`rftlab arena sft-run`, docs/arena.md §11 "Procedure") driven end to end at a small
size: the simulated learner through every stage, the stop paths (overfit failure, no eligible checkpoint),
the refused second test evaluation and the diagnosis run, the tiny local model, and the tinker backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stage1_specs import SMALL, write_spec

from rftlab.cli import main
from rftlab.runs import RunStore
from rftlab.runs.paths import SPECS_DIR
from rftlab.studies.arena import lineage_rows, run_stage1
from rftlab.training.arena.stage1 import (
    SingleEvaluationError,
    Stage1Error,
    Stage1Spec,
    claim_final_evaluation,
    load_stage1_spec,
    training_plan,
)


@pytest.fixture
def data(stage1_data):
    return stage1_data


_spec = write_spec


def _runs(root):
    return {str(r.path) for r in RunStore(root).runs()}


def _text_mode(spec, root, data, backend, *extra, code=1):
    """``rftlab arena sft-run`` in text mode: its stdout (after checking the exit code)."""
    import contextlib
    import io

    out = io.StringIO()
    args = ["arena", "sft-run", str(spec), "--backend", backend, "--data", str(data), "--root", str(root)]
    with contextlib.redirect_stdout(out):
        assert main([*args, *extra]) == code
    return out.getvalue()


@pytest.mark.slow
def test_sft_run_prints_the_lineage_in_text_mode(data, tmp_path, capsys):
    spec = _spec(tmp_path, **SMALL)
    root = tmp_path / "runs"
    out = _text_mode(spec, root, data, "simulated")  # a 10-case lineage: promotion FAIL, exit 1
    lines = out.splitlines()
    assert lines[0].startswith("lineage ") and lines[0].endswith(
        "(arena-sft-stage1-simulated-small, backend simulated)"
    )
    folders = ["base_eval", "overfit", "train", "selection", "final_eval", "compare"]
    assert [line.split(".")[0].strip() for line in lines[1:]] == ["1", "2", "3", "4", "5", "6"]
    assert all(line.endswith(f"[{folder}/]") for line, folder in zip(lines[1:], folders, strict=True))
    assert "selected step 80" in lines[4] and "promotion FAIL" in lines[6] and "diagnosis" not in out
    # a second run reads the finished lineage back and prints the same table; no new run
    before = _runs(root)
    capsys.readouterr()
    assert _text_mode(spec, root, data, "simulated") == out
    assert _runs(root) == before and "finished earlier: read back from" in capsys.readouterr().err
    # a diagnosis evaluation says so on the stages it ran again
    diagnosis = _text_mode(spec, root, data, "simulated", "--diagnosis-eval").splitlines()
    assert diagnosis[:5] == lines[:5]
    assert diagnosis[5].endswith("10 frozen cases (diagnosis run, excluded from claims) [final_eval/]")
    assert diagnosis[6].endswith("not supported (diagnosis run, excluded from claims) [compare/]")


@pytest.mark.slow
def test_simulated_learner_goes_through_every_stage_once(data, tmp_path):
    spec = _spec(tmp_path, **SMALL)
    result = run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert result.stopped_at is None
    assert list(result.lineage["stages"]) == [
        "base_eval",
        "overfit",
        "train",
        "selection",
        "final_eval",
        "compare",
    ]
    # the base run keeps every raw reply: 10 cases x 32 generations
    rows = [
        json.loads(x)
        for x in (tmp_path / "runs" / result.runs["base_eval"] / "rows.jsonl").read_text().splitlines()
    ]
    assert (
        len(rows) == 10
        and sum(len(r["messages"]) + sum(len(c["actions"]) for c in r["conditions"]) for r in rows) == 320
    )
    assert all(isinstance(m["raw_response"], str) for r in rows for m in r["messages"])
    assert result.overfit["passed"] and result.overfit["rows"] == 16
    # validation at 0, 40, 80 on all 275 validation rows, each checkpoint saved
    assert [m["step"] for m in result.measurements] == [0, 40, 80]
    assert all(
        m["validation"]["rows"] == 275 and m["sampler_path"].startswith("tinker://")
        for m in result.measurements
    )
    assert len(result.training_metrics) == 80
    # selection on validation only: the earliest eligible step with the best rank keys
    sel = result.selection
    eligible = [r for r in sel["rows"] if r["eligible"]]
    assert sel["selected_step"] == max(eligible, key=lambda r: (r["selection_score"], -r["step"]))["step"]
    assert result.final_summary["checkpoint_step"] == sel["selected_step"]
    assert result.final_summary["validation"] == next(
        m["validation"] for m in result.measurements if m["step"] == sel["selected_step"]
    )
    assert result.test_summary["rows"] == 30 and not result.final_summary["excluded_from_claims"]
    # G5/G7 come from the comparison; a 10-case run is too small for a claim
    checks = {c["metric"]: c for c in result.gates["checks"]}
    assert (
        checks["regret_difference_ci_high"]["observed"]
        == result.comparison["endpoints"]["primary"]["mean_difference_95"][1]
    )
    assert checks["regret_difference_ci_high"]["verdict"] == "INSUFFICIENT N"
    assert [r["step"] for r in lineage_rows(result)] == [1, 2, 3, 4, 5, 6]
    # a rerun reads the finished lineage back: no new run, nothing evaluated again
    before = _runs(tmp_path / "runs")
    again = run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert _runs(tmp_path / "runs") == before
    assert again.gates == result.gates and again.selection == result.selection


@pytest.mark.slow
def test_second_test_evaluation_is_refused_unless_diagnosis(data, tmp_path, monkeypatch):
    spec = _spec(tmp_path, **SMALL)
    root = tmp_path / "runs"
    _crash_final_evaluation(spec, root, data, monkeypatch)  # the test split was opened, nothing finished
    (final,) = RunStore(root).runs("arena_sft_simulated", "final_eval")
    assert final.record.status == "failed"
    with pytest.raises(SingleEvaluationError, match="second evaluation is refused"):
        run_stage1(spec, backend="simulated", store_root=root, data_dir=data)
    assert len(RunStore(root).runs("arena_sft_simulated", "final_eval")) == 1
    # the CLI says the same in one line and exits 1
    args = ["arena", "sft-run", str(spec), "--backend", "simulated", "--data", str(data), "--root", str(root)]
    assert main(args) == 1
    # explicitly a diagnosis run: evaluated again, and marked excluded from claims everywhere
    result = run_stage1(spec, backend="simulated", store_root=root, data_dir=data, diagnosis_eval=True)
    runs = RunStore(root).runs("arena_sft_simulated", "final_eval")
    diagnosis = [r for r in runs if r.record.spec.get("diagnosis")]
    assert len(runs) == 2 and len(diagnosis) == 1 and diagnosis[0].record.spec["excluded_from_claims"] is True
    assert (
        result.final_summary["excluded_from_claims"] is True and result.gates["excluded_from_claims"] is True
    )


def test_claim_refuses_a_second_evaluation_of_something_else(tmp_path):
    store = RunStore(tmp_path)
    run, origin = claim_final_evaluation(store, "exp", "lineage1", {"checkpoint_step": 40}, "local")
    assert origin == "new"
    run.finish()
    assert claim_final_evaluation(store, "exp", "lineage1", {"checkpoint_step": 40}, "local")[1] == "reused"
    with pytest.raises(SingleEvaluationError):
        claim_final_evaluation(store, "exp", "lineage1", {"checkpoint_step": 80}, "local")
    assert claim_final_evaluation(store, "exp", "lineage2", {"checkpoint_step": 80}, "local")[1] == "new"
    diag, origin = claim_final_evaluation(
        store, "exp", "lineage1", {"checkpoint_step": 80}, "local", diagnosis=True
    )
    assert origin == "diagnosis" and diag.record.spec["excluded_from_claims"] is True


def test_overfit_failure_stops_at_step_two(data, tmp_path):
    spec = _spec(tmp_path, **{**SMALL, "overfit__steps": 2})
    result = run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert result.stopped_at == 2 and result.lineage["stop_reason"].startswith("STOP")
    assert list(result.lineage["stages"]) == ["base_eval", "overfit"]
    assert not RunStore(tmp_path / "runs").runs("arena_sft_simulated", "train")
    assert [r["outcome"] for r in lineage_rows(result)][2:] == ["not reached"] * 4
    out = _text_mode(spec, tmp_path / "runs", data, "simulated")  # read back: nothing runs again
    assert "  3. LoRA SFT with validation measurements: not reached [–]" in out
    assert out.splitlines()[-1].startswith("stopped at step 2: STOP")


def test_no_eligible_checkpoint_stops_at_step_four_with_a_diagnosis(data, tmp_path):
    spec = _spec(tmp_path, name="plateau", base_model="rftlab/simulated-arena-learner-plateau", **SMALL)
    result = run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert result.overfit["passed"]  # the format is learned ...
    assert result.stopped_at == 4 and result.selection["selected_step"] is None  # ... the content is not
    diagnosis = result.lineage["stop_reason"]
    assert "none of the 3 measured checkpoints passes G1-G4" in diagnosis and "not relaxed" in diagnosis
    assert "unsupported fact" in diagnosis
    breakdown = result.selection["failure_breakdown"]
    assert breakdown["BROADCAST"]["rows"] == 223 and breakdown["BROADCAST"]["unsupported_fact"] > 0
    assert not RunStore(tmp_path / "runs").runs("arena_sft_simulated", "final_eval")  # test never opened


def test_training_plan_of_the_stage1_spec():
    spec, _ = load_stage1_spec(SPECS_DIR / "arena_sft_stage1.json")
    plan = training_plan(spec.train, 4958)
    assert (plan.steps, plan.warmup_steps) == (310, 10)
    assert plan.validation_steps == (0, 40, 80, 120, 160, 200, 240, 280, 310)
    assert spec.base_model == "Qwen/Qwen3-4B-Instruct-2507" and spec.lora.rank == 32 and spec.lora.alpha == 64


@pytest.mark.parametrize(
    "change, message",
    [
        ({"train__learning_rate": "1e-4"}, "learning_rate"),
        ({"lora__rank": 0}, "rank"),
        ({"evaluation__frozen_case_stride": 61}, "frozen_case_stride"),
        ({"extra": 1}, "extra"),
        ({"overfit__rows": 1}, "overfit.rows"),
        ({"train__batch_size": 10**9}, r"train\.batch_size: .*less than or equal to 4096"),
        ({"overfit__steps": 10**9}, r"overfit\.steps: .*less than or equal to 100000"),
        ({"train__max_steps": 10**200}, r"train\.max_steps: .*less than or equal to 100000"),
        ({"evaluation__test_rows": 10**9}, r"evaluation\.test_rows: .*less than or equal to 1000000"),
        ({"train__epochs": 1000, "train__batch_size": 1}, "optimizer steps, above the limit 100000"),
    ],
)
def test_bad_specs_and_backends_give_one_line(change, message, data, tmp_path, capsys):
    spec = _spec(tmp_path, **change)
    with pytest.raises(Stage1Error, match=message):
        run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert (
        main(
            [
                "arena",
                "sft-run",
                str(spec),
                "--backend",
                "simulated",
                "--data",
                str(data),
                "--root",
                str(tmp_path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_backend_model_mismatch_and_missing_data_are_refused(data, tmp_path):
    spec = _spec(tmp_path, **SMALL)
    with pytest.raises(Stage1Error, match="simulated backend serves exactly"):
        run_stage1(spec, backend="local", store_root=tmp_path / "runs", data_dir=data)
    with pytest.raises(Stage1Error, match="manifest.json is missing"):
        run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=tmp_path / "nothing")
    local = SPECS_DIR / "arena_sft_local.json"
    with pytest.raises(Stage1Error, match="TINKER_API_KEY"):
        run_stage1(local, backend="tinker", store_root=tmp_path / "runs", data_dir=data)


@pytest.mark.slow
def test_tiny_local_model_stops_at_the_overfit_check(data, tmp_path):
    """The real tiny model on the local backend: base evaluation, then an honest stop at step 2."""
    spec = _spec(
        tmp_path,
        base="arena_sft_local.json",
        **{"overfit__steps": 4, "evaluation__frozen_case_stride": 30, "evaluation__max_tokens": 16},
    )
    result = run_stage1(spec, backend="local", store_root=tmp_path / "runs", data_dir=data)
    assert result.base_summary["num_cases"] == 2
    assert result.stopped_at == 2 and not result.overfit["passed"]
    assert result.overfit["template_and_mask_problems"] == []
    assert "template and the loss mask pass every check" in result.lineage["stop_reason"]
    out = _text_mode(spec, tmp_path / "runs", data, "local")
    assert "backend local" in out and "  2. overfit check: STOP" in out and "[overfit/]" in out


@pytest.mark.slow
def test_tinker_backend_runs_through_the_real_sdk_against_the_local_service(data, tmp_path, monkeypatch):
    """`--backend tinker` as a paid run takes it: the unmodified tinker SDK (`tinker.ServiceClient()` with
    TINKER_BASE_URL) against `rftlab serve tinker` on loopback, serving the tiny arena model directory. The
    lineage evaluates the base, runs the overfit check through forward_backward/optim_step/sampling, and
    stops honestly at step 2; every call crossed HTTP (the server's log names the SDK routes)."""
    import io

    from rftlab.training.arena.sft import local_arena_model
    from rftlab.training.local_tinker.server import ServeConfig, ServerThread
    from rftlab.training.local_tinker.service import Log

    model = local_arena_model(tmp_path / "model")
    config = ServeConfig(
        port=0,
        storage=tmp_path / "service",
        model_dirs=[model],
        log_level="info",
        api_keys=["tml-arena-stage1-tests"],
    )
    log_stream = io.StringIO()
    spec = _spec(
        tmp_path,
        base="arena_sft_local.json",
        **{"overfit__steps": 2, "evaluation__frozen_case_stride": 30, "evaluation__max_tokens": 8},
    )
    with ServerThread(config, log=Log(log_stream, level="info")) as server:
        monkeypatch.setenv("TINKER_BASE_URL", server.base_url)
        monkeypatch.setenv("TINKER_API_KEY", "tml-arena-stage1-tests")
        monkeypatch.setenv("TINKER_TELEMETRY", "0")
        result = run_stage1(
            spec, backend="tinker", base_model=str(model), store_root=tmp_path / "runs", data_dir=data
        )
    records = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    routes = {r["path"] for r in records if r["event"] == "request" and r["status"] == 200}
    assert result.lineage["backend"] == "tinker" and result.stopped_at == 2
    assert result.base_summary["num_cases"] == 2
    assert RunStore(tmp_path / "runs").runs("arena_sft_local", "base_eval")[0].record.backend == "tinker"
    assert {
        "/api/v1/create_model",
        "/api/v1/forward_backward",
        "/api/v1/optim_step",
        "/api/v1/asample",
    } <= routes
    out = _text_mode(spec, tmp_path / "runs", data, "tinker", "--base-model", str(model))  # read back
    assert "backend tinker" in out and "  2. overfit check: STOP" in out and "not reached [–]" in out


def test_a_diagnosis_evaluation_needs_a_selected_checkpoint(data, tmp_path):
    spec = _spec(tmp_path, **{**SMALL, "overfit__steps": 2})
    run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    with pytest.raises(Stage1Error, match="needs a selected checkpoint"):
        run_stage1(
            spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data, diagnosis_eval=True
        )
    assert not RunStore(tmp_path / "runs").runs("arena_sft_simulated", "final_eval")


@settings(max_examples=40, deadline=None)
@given(
    name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True),
    description=st.text(max_size=40),
    size_note=st.text(max_size=40),
)
def test_documentation_fields_never_change_what_decides_the_result(name, description, size_note):
    raw = json.loads((SPECS_DIR / "arena_sft_simulated.json").read_text())
    identity = Stage1Spec.model_validate(raw, strict=True).result_identity()
    edited = {**raw, "name": name, "description": description, "size_note": size_note}
    assert Stage1Spec.model_validate(edited, strict=True).result_identity() == identity
    recipe = {**raw, "train": {**raw["train"], "batch_size": raw["train"]["batch_size"] + 1}}
    assert Stage1Spec.model_validate(recipe, strict=True).result_identity() != identity


def _crash_final_evaluation(spec, root, data, monkeypatch):
    """A lineage whose final evaluation opened the test split and crashed (nothing finished)."""
    import rftlab.studies.arena_lineage as study

    real = study._evaluate_sampler
    calls = {"n": 0}

    def crash_on_final(ctx, sampler, model, rows=None):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the GPU went away")
        return real(ctx, sampler, model, rows)

    with monkeypatch.context() as patch:
        patch.setattr(study, "_evaluate_sampler", crash_on_final)
        with pytest.raises(RuntimeError, match="GPU went away"):
            run_stage1(spec, backend="simulated", store_root=root, data_dir=data)


def test_a_new_description_does_not_buy_a_second_test_evaluation(data, tmp_path, monkeypatch, capsys):
    root = tmp_path / "runs"
    _crash_final_evaluation(_spec(tmp_path, **SMALL), root, data, monkeypatch)
    edited = _spec(tmp_path, name="renamed", description="the same run, described again", **SMALL)
    with pytest.raises(SingleEvaluationError, match="second evaluation is refused"):
        run_stage1(edited, backend="simulated", store_root=root, data_dir=data)
    args = [
        "arena",
        "sft-run",
        str(edited),
        "--backend",
        "simulated",
        "--data",
        str(data),
        "--root",
        str(root),
    ]
    capsys.readouterr()
    assert main(args) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("rftlab: refused: lineage ") and "second evaluation is refused" in err[-1]
    assert len(RunStore(root).runs("arena_sft_simulated", "final_eval")) == 1
    assert len({r.record.spec_sha256 for r in RunStore(root).runs("arena_sft_simulated", "lineage")}) == 1


def test_an_evaluation_under_the_older_raw_spec_key_counts(data, tmp_path):
    """Stores written while the key held the raw spec (description included): their test evaluation is
    this lineage's, and a second one is refused."""
    import rftlab.studies.arena_lineage as study
    from rftlab.runs import spec_sha256

    spec_path = _spec(tmp_path, **SMALL)
    spec, raw = load_stage1_spec(spec_path)
    _, key = study._lineage_key(spec, data, spec.resolve(spec.gate_spec), "simulated", None)
    store = RunStore(tmp_path / "runs")
    old = store.create_run("arena_sft_simulated", "lineage", {**key, "spec": raw}, backend="simulated")
    old.finish("failed", error="RuntimeError: the GPU went away")
    store.create_run(
        "arena_sft_simulated",
        "final_eval",
        {"lineage": spec_sha256({**key, "spec": raw})[:16]},
        backend="simulated",
    ).finish("failed", error="RuntimeError: the GPU went away")
    with pytest.raises(SingleEvaluationError, match="second evaluation is refused"):
        run_stage1(spec_path, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert len(store.runs("arena_sft_simulated", "final_eval")) == 1


def test_the_final_evaluation_lock_never_follows_a_planted_symlink(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    (tmp_path / "runs" / "exp").mkdir(parents=True)
    (tmp_path / "runs" / "exp" / ".final_eval.lock").symlink_to(victim)
    with pytest.raises(Stage1Error, match="is a symlink; refusing to open it"):
        claim_final_evaluation(
            RunStore(tmp_path / "runs"), "exp", "lineage1", {"checkpoint_step": 40}, "local"
        )
    assert victim.read_bytes() == b"precious\n"


def test_a_lineage_finished_under_the_older_raw_spec_key_is_read_back(data, tmp_path):
    import shutil

    import rftlab.studies.arena_lineage as study

    spec_path = _spec(tmp_path, **SMALL)
    root = tmp_path / "runs"
    first = run_stage1(spec_path, backend="simulated", store_root=root, data_dir=data)
    # the same lineage as an older version recorded it: its key held the raw spec
    spec, raw = load_stage1_spec(spec_path)
    _, key = study._lineage_key(spec, data, spec.resolve(spec.gate_spec), "simulated", None)
    store = RunStore(root)
    old = store.create_run("arena_sft_simulated", "lineage", {**key, "spec": raw}, backend="simulated")
    shutil.copy(Path(first.runs["lineage"]) / "lineage.json", old.path / "lineage.json")
    old.finish()
    shutil.rmtree(first.runs["lineage"])
    before = _runs(root)
    again = run_stage1(spec_path, backend="simulated", store_root=root, data_dir=data)
    assert _runs(root) == before and again.gates == first.gates and again.selection == first.selection


def test_a_new_lineage_records_its_gate_specs_hash_and_the_audit_reads_it(data, tmp_path):
    """Every stage run of a lineage records the SHA-256 of the gate spec that governs its gates
    (``run.json`` ``plan_sha256``), so the registered gates' audit (``studies.arena.audit_gates``) can hold
    them confirmatory; runs made without it are exploratory, the reason counted."""
    import hashlib

    from rftlab.runs import load_run
    from rftlab.runs.paths import PROJECT_ROOT
    from rftlab.runs.registration import git_toplevel
    from rftlab.studies.arena import Stage1Result, audit_gates

    spec = _spec(tmp_path, **SMALL)
    gate_spec = load_stage1_spec(spec)[0]
    gate_path = gate_spec.resolve(gate_spec.gate_spec)
    sha = hashlib.sha256(gate_path.read_bytes()).hexdigest()
    result = run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert result.gates and len(result.runs) == 7
    assert {load_run(p).record.plan_sha256 for p in result.runs.values()} == {sha}
    # read back, the lineage lists the same 7 runs (the audit's count must not depend on it)
    again = run_stage1(spec, backend="simulated", store_root=tmp_path / "runs", data_dir=data)
    assert again.runs == result.runs
    if git_toplevel(PROJECT_ROOT) is None:
        pytest.skip("the audit needs the project as a git checkout")
    audit = audit_gates(gate_path, [result])
    assert audit.family == "confirmatory", audit.sentence
    assert "arena_gates" in audit.registration and sha[:12] in audit.registration
    assert any("after the fact" in line for line in audit.limits)
    store = RunStore(tmp_path / "old", repo=PROJECT_ROOT)
    old = Stage1Result(
        lineage={},
        runs={
            a: str(store.create_run("x", a, {"a": a}, backend="simulated").path)
            for a in ("base_eval", "compare")
        },
        gates={"checks": []},
    )
    stopped = Stage1Result(lineage={}, runs={"base_eval": str(store.create_run("x", "s", {}).path)})
    mixed = audit_gates(gate_path, [result, old, stopped])
    assert mixed.family == "exploratory" and "2 of 9 runs" in mixed.sentence, mixed.sentence
