"""Run store: layout, hashing, atomic writes, immutability, reuse, tidy loading and corruption reports."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pytest

from rftlab.cli import main as cli_main
from rftlab.runs import (
    CorruptRunError,
    FinishedRunError,
    RunStore,
    canonical_json,
    file_sha256,
    load_metrics,
    load_run,
    spec_sha256,
)
from rftlab.runs.store import RunStoreError


@dataclass(frozen=True)
class ArmSpec:
    prompt: str
    memory: str
    epochs: int


def test_canonical_json_sorts_keys_and_is_compact():
    assert canonical_json({"b": 1, "a": [1, 2.5, "é"]}) == '{"a":[1,2.5,"é"],"b":1}'
    expected = hashlib.sha256(b'{"a":1,"b":2}').hexdigest()
    assert spec_sha256({"b": 2, "a": 1}) == expected


def test_spec_hash_is_the_same_for_dataclass_and_dict():
    spec = ArmSpec(prompt="weak", memory="echo", epochs=3)
    assert spec_sha256(spec) == spec_sha256({"epochs": 3, "memory": "echo", "prompt": "weak"})
    assert spec_sha256(spec) != spec_sha256(ArmSpec(prompt="weak", memory="scrambled", epochs=3))


def test_canonical_json_refuses_nan():
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_file_sha256_matches_hashlib(tmp_path):
    path = tmp_path / "data.bin"
    payload = bytes(range(256)) * 5000
    path.write_bytes(payload)
    assert file_sha256(path, chunk_size=1000) == hashlib.sha256(payload).hexdigest()


def test_create_run_writes_record_with_spec_hash_git_and_inputs(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"row_id": 1}\n')
    store = RunStore(tmp_path / "runs")
    spec = ArmSpec(prompt="explicit", memory="echo", epochs=2)
    run = store.create_run("spectrum", "A", spec, inputs=[data])
    assert run.path.parent == tmp_path / "runs" / "spectrum" / "A"
    record = json.loads((run.path / "run.json").read_text())
    assert record["spec"] == {"prompt": "explicit", "memory": "echo", "epochs": 2}
    assert record["spec_sha256"] == spec_sha256(spec)
    assert record["status"] == "running" and record["backend"] == "local"
    assert record["inputs"] == [{"path": str(data), "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}]
    assert set(record["git"]) == {"commit", "dirty"}


def test_full_run_lifecycle_and_immutability(tmp_path):
    store = RunStore(tmp_path)
    run = store.create_run("gs1", "grpo", {"lr": 1e-5})
    run.append_metrics({"step": 0, "reward": 0.25})
    run.append_metrics([{"step": 1, "epoch": 0, "reward": 0.5}])
    run.write_rollouts(0, [{"row_id": "r1", "candidate": 0, "reward": 1.0}])
    run.write_eval([{"item_id": "q1", "correct": 1}])
    run.save_provider_snapshot("job-poll-000.json", {"state": "JOB_STATE_COMPLETED"})
    run.set_provider(job_name="accounts/x/rftJobs/abc")
    run.finish()

    reopened = load_run(run.path)
    assert reopened.record.status == "finished" and reopened.record.finished_at
    assert reopened.record.provider == {"job_name": "accounts/x/rftJobs/abc"}
    assert reopened.metrics() == [
        {"epoch": 0, "step": 0, "reward": 0.25},
        {"step": 1, "epoch": 0, "reward": 0.5},
    ]
    assert reopened.rollouts(0)[0]["row_id"] == "r1"
    assert reopened.eval_items() == [{"item_id": "q1", "correct": 1}]
    for write in (
        lambda: reopened.append_metrics({"step": 2}),
        lambda: reopened.write_eval([]),
        lambda: reopened.finish(),
        lambda: reopened.save_provider_snapshot("x.json", {}),
    ):
        with pytest.raises(FinishedRunError):
            write()
    # No temporary files are left behind by atomic writes.
    assert not [p for p in run.path.rglob("*") if p.name.endswith(".tmp")]


def test_rollouts_of_an_epoch_are_written_once(tmp_path):
    run = RunStore(tmp_path).create_run("e", "a", {})
    run.write_rollouts(3, [{"reward": 1}])
    with pytest.raises(FinishedRunError):
        run.write_rollouts(3, [{"reward": 2}])
    assert run.rollouts(3) == [{"reward": 1}]


def test_bad_rows_are_refused(tmp_path):
    run = RunStore(tmp_path).create_run("e", "a", {})
    with pytest.raises(ValueError, match="no 'step'"):
        run.append_metrics({"reward": 1})
    with pytest.raises(ValueError, match="no 'item_id'"):
        run.write_eval([{"correct": 1}])
    with pytest.raises(ValueError):
        RunStore(tmp_path).create_run("bad/name", "a", {})


def test_reuse_by_spec_hash_unless_forced(tmp_path):
    store = RunStore(tmp_path)
    first, origin = store.start_or_reuse("e", "a", {"seed": 1})
    assert origin == "new"
    # An unfinished run is never reused (only resumed on request).
    second, origin = store.start_or_reuse("e", "a", {"seed": 1})
    assert origin == "new" and second.path != first.path
    second.finish()
    again, origin = store.start_or_reuse("e", "a", {"seed": 1})
    assert origin == "reused" and again.path == second.path
    other, origin = store.start_or_reuse("e", "a", {"seed": 2})
    assert origin == "new"
    forced, origin = store.start_or_reuse("e", "a", {"seed": 1}, force=True)
    assert origin == "new" and forced.path not in (first.path, second.path)
    # The same spec on another backend is another experiment run.
    remote, origin = store.start_or_reuse("e", "a", {"seed": 1}, backend="fireworks")
    assert origin == "new" and remote.record.backend == "fireworks"


def test_resume_continues_the_newest_unfinished_run(tmp_path):
    store = RunStore(tmp_path)
    crashed, _ = store.start_or_reuse("e", "a", {"seed": 3}, run_id="r1")
    crashed.append_metrics([{"step": 0, "x": 1.0}, {"step": 1, "x": 2.0}])
    newer, _ = store.start_or_reuse("e", "a", {"seed": 3}, run_id="r2")
    resumed, origin = store.start_or_reuse("e", "a", {"seed": 3}, resume=True)
    assert origin == "resumed" and resumed.path == newer.path
    newer.finish("failed", error="preempted")
    resumed, origin = store.start_or_reuse("e", "a", {"seed": 3}, resume=True)
    assert origin == "resumed" and resumed.path == crashed.path
    assert [row["step"] for row in resumed.metrics()] == [0, 1]
    resumed.append_metrics({"step": 2, "x": 3.0})
    resumed.finish()
    done, origin = store.start_or_reuse("e", "a", {"seed": 3}, resume=True)
    assert origin == "reused" and done.path == crashed.path


def test_same_run_id_gets_a_unique_folder(tmp_path):
    store = RunStore(tmp_path)
    a = store.create_run("e", "a", {}, run_id="fixed")
    b = store.create_run("e", "a", {}, run_id="fixed")
    assert a.path.name == "fixed" and b.path.name == "fixed-2"


def test_load_metrics_is_one_tidy_frame(tmp_path):
    store = RunStore(tmp_path)
    for arm, rewards in (("A", [0.1, 0.2]), ("C", [0.3])):
        run = store.create_run("spectrum", arm, {"arm": arm}, backend="local")
        for step, reward in enumerate(rewards):
            run.append_metrics({"step": step, "epoch": step, "mean_occ": reward})
        run.finish()
    frame = load_metrics(tmp_path)
    assert list(frame.columns) == [
        "experiment",
        "arm",
        "run_id",
        "backend",
        "status",
        "step",
        "epoch",
        "mean_occ",
    ]
    assert len(frame) == 3
    assert frame.groupby("arm")["mean_occ"].sum().round(6).to_dict() == {"A": 0.3, "C": 0.3}
    assert len(load_metrics(tmp_path, arm="C")) == 1


def test_corrupt_folders_are_reported_by_path_never_skipped(tmp_path):
    store = RunStore(tmp_path)
    good = store.create_run("e", "a", {"k": 1})
    good.append_metrics({"step": 0, "x": 1})
    half = tmp_path / "e" / "a" / "half-created"
    half.mkdir()
    garbled = store.create_run("e", "b", {"k": 2})
    (garbled.path / "run.json").write_text("{not json")
    with pytest.raises(CorruptRunError) as caught:
        load_metrics(tmp_path)
    assert set(caught.value.problems) == {str(half / "run.json"), str(garbled.path / "run.json")}

    truncated = store.create_run("e2", "a", {})
    (truncated.path / "metrics.jsonl").write_text('{"step": 0, "x": 1}\n{"step": 1, "x"')
    with pytest.raises(CorruptRunError, match="line 2 is not JSON"):
        load_metrics(tmp_path, experiment="e2")


def test_secrets_from_the_environment_never_reach_a_run_file(tmp_path, monkeypatch):
    monkeypatch.setenv("FIREWORKS_API_KEY", "sentinel-not-a-real-key-123")
    run = RunStore(tmp_path).create_run("e", "a", {"model": "qwen"})
    with pytest.raises(RunStoreError, match="credential"):
        run.save_provider_snapshot("job.json", {"headers": {"auth": "Bearer sentinel-not-a-real-key-123"}})
    with pytest.raises(RunStoreError, match="credential"):
        RunStore(tmp_path).create_run("e", "b", {"api_key": "sentinel-not-a-real-key-123"})
    assert not list(tmp_path.rglob("job.json"))
    assert not (tmp_path / "e" / "b").exists()


def test_cli_lists_runs_and_exports_metrics(tmp_path, capsys):
    run = RunStore(tmp_path).create_run("poker", "base", {})
    run.append_metrics({"step": 0, "reward": 0.5})
    assert cli_main(["runs", "list", "--root", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["arm"] for r in listed] == ["base"]
    assert cli_main(["runs", "metrics", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(",0,0,0.5")
    (run.path / "run.json").write_text("")
    assert cli_main(["runs", "list", "--root", str(tmp_path)]) == 2
    assert "run.json" in capsys.readouterr().err


def test_resume_refuses_a_metrics_file_with_a_repeated_step(tmp_path):
    store = RunStore(tmp_path)
    run, _ = store.start_or_reuse("e", "a", {"seed": 3})
    run.append_metrics([{"step": 0, "x": 1.0}, {"step": 1, "x": 2.0}, {"step": 2, "x": 3.0}])
    metrics = run.path / "metrics.jsonl"
    with open(metrics, "ab") as handle:  # step 1 written twice (a copy, a bad merge)
        handle.write(b'{"step": 1, "epoch": 1, "x": 2.5}\n')
    with pytest.raises(CorruptRunError) as caught:
        store.start_or_reuse("e", "a", {"seed": 3}, resume=True)
    assert str(caught.value) == (
        f"{metrics}: line 4 repeats step 1 of line 2 (steps are unique within a run); refusing to resume "
        f"run {run.path}: start a fresh run instead (`rftlab arm launch SPEC --no-resume`, or move the run "
        "folder aside)"
    )
    fresh, origin = store.start_or_reuse("e", "a", {"seed": 3}, resume=False)
    assert origin == "new" and fresh.path != run.path


def test_a_symlink_planted_at_a_run_file_is_never_written_through(tmp_path):
    victim = tmp_path / "victim.jsonl"
    victim.write_bytes(b'{"step": 7}\n')
    run = RunStore(tmp_path / "runs").create_run("e", "a", {"x": 1})
    (run.path / "eval.jsonl").symlink_to(victim)
    run.write_eval([{"item_id": "q1", "correct": True}])  # the link is replaced by the run's file
    assert not (run.path / "eval.jsonl").is_symlink() and run.eval_items() == [
        {"item_id": "q1", "correct": True}
    ]
    (run.path / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(CorruptRunError, match="metrics.jsonl: is a symlink; the run store never appends"):
        run.append_metrics({"step": 0, "x": 1.0})
    assert victim.read_bytes() == b'{"step": 7}\n'
