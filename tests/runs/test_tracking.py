"""Experiment tracking (``rftlab.runs.tracking``): rows appended to a run reach a real MLflow store and W&B's
offline files, read back independently (``MlflowClient``, wandb's own protobuf records); a tracker that
fails costs one warning and no row; credentials never reach a tracker; the run store's bytes and hashes do
not depend on tracking. Every store is a temporary folder (``RFTLAB_TRACKING`` and
``MLFLOW_TRACKING_URI``/``WANDB_DIR`` point there)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

mlflow = pytest.importorskip("mlflow")

from mlflow.tracking import MlflowClient  # noqa: E402

from rftlab.runs import RunStore  # noqa: E402
from rftlab.runs import tracking as tr  # noqa: E402
from rftlab.runs.paths import DEFAULT_RUNS_DIR  # noqa: E402
from rftlab.runs.secrets import assert_file_has_no_secrets  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"
FAKE_KEY = "rk-live-7f3a9c2e41b8d05e6a17c9f4"  # made up: the value a credential variable gets in a test
SPEC = {"arm": "A", "lr": 0.001, "train": {"epochs": 3, "group": 8}, "model": "tiny-lm"}
ROWS = [
    {"step": 0, "reward": 0.25, "loss": 1.5, "note": "warm-up"},
    {"step": 1, "reward": 0.5, "loss": 1.25, "kl": {"mean": 0.01, "max": 0.03}},
    {"step": 2, "reward": 0.75, "loss": 1.0},
]


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory) -> Path:
    """An empty SQLite MLflow store, made once (creating MLflow's tables takes seconds): each test copies it."""
    folder = tmp_path_factory.mktemp("mlflow-template")
    MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}").search_experiments(max_results=1)
    return folder / "mlflow.db"


def fresh_store(template: Path, folder: Path) -> str:
    folder.mkdir(parents=True)
    shutil.copyfile(template, folder / "mlflow.db")
    return f"sqlite:///{folder / 'mlflow.db'}"


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch, mlflow_template):
    """A fresh SQLite MLflow store in the test's folder, live tracking to it on."""
    folder = tmp_path / "mlruns"
    uri = fresh_store(mlflow_template, folder)
    monkeypatch.setenv("RFTLAB_TRACKING", "mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return folder, uri


def _only_run(client: MlflowClient, experiment: str):
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no MLflow experiment {experiment}"
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, f"expected one MLflow run, found {len(runs)}"
    return runs[0]


def _history(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_appended_rows_reach_mlflow_with_tags_and_params(tmp_path, mlflow_store):
    _, uri = mlflow_store
    run, _ = RunStore(tmp_path / "runs").start_or_reuse("spectrum_memory", "A", SPEC)
    run.append_metrics(ROWS[:2])
    run.append_metrics(ROWS[2])
    assert tr.flush()  # rows reach the trackers from a background thread
    # the independent reading: MLflow's own client against the rows as the run store wrote them
    written = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
    client = MlflowClient(tracking_uri=uri)
    found = _only_run(client, "spectrum_memory")
    for key in ("reward", "loss"):
        assert _history(client, found.info.run_id, key) == [(r["step"], r[key]) for r in written]
    assert _history(client, found.info.run_id, "kl/max") == [(1, 0.03)]
    assert "note" not in found.data.metrics and "epoch" not in found.data.metrics  # text; epoch == step
    record = run.record
    tags = found.data.tags
    assert tags["rftlab.run_id"] == record.run_id == found.info.run_name
    assert tags["rftlab.spec_sha256"] == record.spec_sha256
    assert (tags["rftlab.backend"], tags["rftlab.arm"], tags["rftlab.family"]) == ("local", "A", "spectrum")
    assert tags["rftlab.git_commit"] == record.git["commit"]
    assert found.data.params == {
        "arm": "A",
        "lr": "0.001",
        "train.epochs": "3",
        "train.group": "8",
        "model": "tiny-lm",
    }
    assert found.info.status == "RUNNING"
    run.finish()
    assert tr.flush()
    assert client.get_run(found.info.run_id).info.status == "FINISHED"


def test_tracking_changes_no_byte_of_the_run_store(tmp_path, mlflow_store, monkeypatch):
    tracked, _ = RunStore(tmp_path / "on").start_or_reuse("poker", "seed", SPEC)
    tracked.append_metrics(ROWS)
    assert tr.flush()
    monkeypatch.setenv("RFTLAB_TRACKING", "off")
    plain, _ = RunStore(tmp_path / "off").start_or_reuse("poker", "seed", SPEC)
    plain.append_metrics(ROWS)
    assert tracked.record.spec_sha256 == plain.record.spec_sha256
    assert sorted(p.name for p in tracked.path.iterdir()) == sorted(p.name for p in plain.path.iterdir())
    assert (tracked.path / "metrics.jsonl").read_bytes() == (plain.path / "metrics.jsonl").read_bytes()
    on = json.loads((tracked.path / "run.json").read_text())
    off = json.loads((plain.path / "run.json").read_text())
    assert on.keys() == off.keys() and not any("track" in k or "mlflow" in k for k in on)


RESUME = """
import sys
from rftlab.runs import RunStore
run, origin = RunStore(sys.argv[1]).start_or_reuse("gs1_vs_grpo", "gs1", {"k": 1}, resume=True)
assert origin == "resumed", origin
run.append_metrics([{"step": 3, "reward": 0.9}, {"step": 4, "reward": 1.0}])
run.finish()
"""


def test_a_resumed_run_goes_on_in_the_same_mlflow_run(tmp_path, mlflow_store):
    _, uri = mlflow_store
    root = tmp_path / "runs"
    store = RunStore(root)
    run, _ = store.start_or_reuse("gs1_vs_grpo", "gs1", {"k": 1})
    run.append_metrics([{"step": s, "reward": s / 10} for s in range(3)])
    assert tr.flush()
    run.release()  # the process "dies": another one resumes the run, with no memory of the MLflow run
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", RESUME, str(root)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    client = MlflowClient(tracking_uri=uri)
    found = _only_run(client, "gs1_vs_grpo")  # found again by its tag: never a second MLflow run
    assert _history(client, found.info.run_id, "reward") == [(0, 0.0), (1, 0.1), (2, 0.2), (3, 0.9), (4, 1.0)]
    assert found.info.status == "FINISHED"


def test_a_failing_tracker_costs_one_warning_and_no_row(tmp_path, mlflow_store, monkeypatch, capsys):
    def broken(self, run, rows, skip=None):
        raise RuntimeError("the tracking server fell over")

    monkeypatch.setattr(tr.MlflowTracker, "log_rows", broken)
    run, _ = RunStore(tmp_path / "runs").start_or_reuse("arena_sft", "sft", SPEC)
    for row in ROWS:
        run.append_metrics(row)
    run.finish()
    assert [r["step"] for r in run.metrics()] == [0, 1, 2]  # on disk at once, whatever the tracker does
    assert tr.flush()
    lines = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(lines) == 1, lines
    assert lines[0].startswith("rftlab: warning: tracking: mlflow failed (RuntimeError: the tracking server")
    assert "rftlab runs track" in lines[0]


def test_an_append_never_waits_for_a_slow_tracker(tmp_path, mlflow_store, monkeypatch):
    sent: list[int] = []

    def slow(self, run, rows, skip=None):
        time.sleep(0.5)
        sent.extend(r["step"] for r in rows)

    monkeypatch.setattr(tr.MlflowTracker, "log_rows", slow)
    run, _ = RunStore(tmp_path / "runs").start_or_reuse("poker", "slow", SPEC)
    run.append_metrics(ROWS[0])  # the first append opens the tracker (import, store): not timed
    start = time.perf_counter()
    run.append_metrics(ROWS[1])
    run.append_metrics(ROWS[2])
    assert time.perf_counter() - start < 0.5  # three slow sends (1.5 s) are behind, not in, the appends
    assert tr.flush(timeout=30)
    assert sent == [0, 1, 2]  # in order, none lost


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_tracking_server_is_one_quick_warning(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RFTLAB_TRACKING", "mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://ops:pw-{FAKE_KEY}@127.0.0.1:{_closed_port()}")
    run, _ = RunStore(tmp_path / "runs").start_or_reuse("poker", "gain", SPEC)
    start = time.perf_counter()
    run.append_metrics(ROWS[0])
    run.append_metrics(ROWS[1])
    assert tr.flush()
    assert time.perf_counter() - start < 15  # never MLflow's minutes of retries
    assert [r["step"] for r in run.metrics()] == [0, 1]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "cannot be reached" in lines[0], lines
    assert FAKE_KEY not in lines[0] and "http://ops:***@127.0.0.1:" in lines[0]  # the URI's password


def test_an_unknown_setting_is_one_line_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("RFTLAB_TRACKING", "mlflow,tensorboard")
    with pytest.raises(tr.TrackingSettingError) as caught:
        RunStore(tmp_path / "runs").start_or_reuse("poker", "gain", SPEC)
    assert "unknown tracker 'tensorboard'" in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "runs" / "poker").exists()


def test_the_default_is_mlflow_only_for_the_project_store(tmp_path):
    assert tr.selected_trackers(DEFAULT_RUNS_DIR, {}) == ("mlflow",)
    assert tr.selected_trackers(DEFAULT_RUNS_DIR, {"RFTLAB_QUICK": "1"}) == ()
    assert tr.selected_trackers(tmp_path / "runs", {}) == ()  # the tests' and quick runs' stores
    assert tr.selected_trackers(tmp_path, {"RFTLAB_TRACKING": " MLflow , wandb "}) == ("mlflow", "wandb")
    assert tr.selected_trackers(DEFAULT_RUNS_DIR, {"RFTLAB_TRACKING": "off"}) == ()


def _all_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_no_credential_reaches_mlflow(tmp_path, mlflow_store, monkeypatch):
    folder, uri = mlflow_store
    # a spec field whose value is later a credential's: the run was recorded before the key was set, the
    # tracker is told about it afterwards and must leave that param out
    spec = {**SPEC, "endpoint_token": FAKE_KEY}
    run, _ = RunStore(tmp_path / "runs").start_or_reuse("spectrum_memory", "B", spec)
    monkeypatch.setenv("RFTLAB_FAKE_API_KEY", FAKE_KEY)
    run.append_metrics(ROWS)
    assert tr.flush()
    found = _only_run(MlflowClient(tracking_uri=uri), "spectrum_memory")
    assert "endpoint_token" not in found.data.params and found.data.params["model"] == "tiny-lm"
    assert found.data.tags["rftlab.withheld"] == "1"
    files = _all_files(folder)
    assert files, "the MLflow store folder is empty"
    for path in files:  # every encoded form of the key, in every file of the store
        assert_file_has_no_secrets(path)


def test_backfill_sends_an_existing_store_once(tmp_path, monkeypatch, capsys, mlflow_template):
    from rftlab.cli import main

    uri = fresh_store(mlflow_template, tmp_path / "ml")
    monkeypatch.setenv("RFTLAB_TRACKING", "off")
    store = RunStore(tmp_path / "runs")
    first, _ = store.start_or_reuse("spectrum_memory", "C", SPEC)
    first.append_metrics(ROWS)
    first.finish()
    second, _ = store.start_or_reuse("spectrum_memory", "D", {**SPEC, "arm": "D"})
    second.append_metrics(ROWS[:1])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert main(["runs", "track", "--root", str(tmp_path / "runs"), "--to", "mlflow", "--json"]) == 0
    sent = json.loads(capsys.readouterr().out)
    assert [(s["rows"], s["points"]) for s in sent] == [(3, 8), (1, 2)]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("spectrum_memory")
    runs = {r.data.tags["rftlab.arm"]: r for r in client.search_runs([exp.experiment_id])}
    assert sorted(runs) == ["C", "D"]
    assert _history(client, runs["C"].info.run_id, "reward") == [(0, 0.25), (1, 0.5), (2, 0.75)]
    assert (runs["C"].info.status, runs["D"].info.status) == ("FINISHED", "RUNNING")
    # live tracking from here on, then a second backfill: nothing is sent twice
    monkeypatch.setenv("RFTLAB_TRACKING", "mlflow")
    second.append_metrics(ROWS[1])
    assert tr.flush()
    assert main(["runs", "track", "--root", str(tmp_path / "runs"), "--json"]) == 0
    assert [s["points"] for s in json.loads(capsys.readouterr().out)] == [0, 0]
    assert _history(client, runs["D"].info.run_id, "loss") == [(0, 1.5), (1, 1.25)]
    assert len(client.search_runs([exp.experiment_id])) == 2


def test_backfill_errors_are_one_line(tmp_path, monkeypatch, capsys):
    from rftlab.cli import main

    (tmp_path / "runs").mkdir()
    assert main(["runs", "track", "--root", str(tmp_path / "runs"), "--to", "neptune"]) == 2
    assert (
        capsys.readouterr().err.strip() == "rftlab: error: --to 'neptune': give mlflow, wandb or mlflow,wandb"
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{_closed_port()}")
    assert main(["runs", "track", "--root", str(tmp_path / "runs"), "--to", "mlflow"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rftlab: error: tracking URI http://127.0.0.1:")


# -- W&B, offline (real wandb code writing its run files; the cloud is never reached) ------------------
def _wandb_file(path: Path, rows: int) -> dict:
    """The records of a W&B run file once its history has ``rows`` steps (wandb-core writes the file in
    the background, after ``finish`` returns), or as they are after 30 s."""
    from wandb_records import read_run

    deadline, read = time.monotonic() + 30, read_run(path)
    while len(read["history"]) < rows and time.monotonic() < deadline:
        time.sleep(0.2)
        read = read_run(path)
    return read


def test_wandb_offline_run_holds_the_rows_and_tags(tmp_path, monkeypatch, capfd):
    pytest.importorskip("wandb")
    monkeypatch.setenv("RFTLAB_TRACKING", "wandb")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    monkeypatch.setenv("RFTLAB_FAKE_API_KEY", FAKE_KEY)
    run, _ = RunStore(tmp_path / "runs").start_or_reuse("gs1_vs_grpo", "grpo", SPEC)
    run.append_metrics(ROWS)
    run.finish()
    assert tr.flush()
    files = sorted((tmp_path / "wb" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    read = _wandb_file(files[0], len(ROWS))
    record = read["run"]
    assert (record.project, record.display_name) == ("gs1_vs_grpo", run.record.run_id)
    assert record.run_id == tr.wandb_run_id(tr.run_info(run.record))
    tags = set(record.tags)
    assert {f"run_id:{run.record.run_id}", "backend:local", "arm:grpo", "family:gs1"} <= tags
    assert f"spec_sha256:{run.record.spec_sha256}"[:64] in tags
    assert read["config"]["rftlab"]["spec_sha256"] == run.record.spec_sha256
    assert read["config"]["train.epochs"] == "3"
    steps = [(h["_step"], h.get("reward")) for h in read["history"]]
    assert steps == [(0, 0.25), (1, 0.5), (2, 0.75)]
    for path in _all_files(tmp_path / "wb"):
        assert_file_has_no_secrets(path)
    out, err = capfd.readouterr()
    assert "wandb" not in out + err  # quiet: nothing of wandb's on the terminal (or in a notebook)


WANDB_EXIT = """
import sys
from rftlab.runs import RunStore
run, _ = RunStore(sys.argv[1]).start_or_reuse("poker", "seed", {"k": 2})
run.append_metrics([{"step": 0, "reward": 0.5}, {"step": 1, "reward": 0.25}])
"""  # and exits with the run still running: no finish() closes the W&B run


def test_a_process_that_exits_mid_run_leaves_a_complete_wandb_file(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), *sys.path])}
    env.update(RFTLAB_TRACKING="wandb", WANDB_DIR=str(tmp_path / "wb"))
    done = subprocess.run(
        [sys.executable, "-c", WANDB_EXIT, str(tmp_path / "runs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    (path,) = (tmp_path / "wb" / "wandb").glob("offline-run-*/run-*.wandb")
    read = _wandb_file(path, 2)
    assert [(h["_step"], h["reward"]) for h in read["history"]] == [(0, 0.5), (1, 0.25)]
    assert read["run"].project == "poker"


def test_backfill_to_wandb_writes_complete_offline_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("wandb")
    from rftlab.cli import main

    monkeypatch.setenv("RFTLAB_TRACKING", "off")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wb"))
    run, _ = RunStore(tmp_path / "runs").start_or_reuse("arena_sft", "lineage", SPEC)
    run.append_metrics(ROWS)  # still running: the backfill must end the W&B run itself
    assert main(["runs", "track", "--root", str(tmp_path / "runs"), "--to", "wandb"]) == 0
    assert "wandb   arena_sft/lineage/" in capsys.readouterr().out
    (path,) = (tmp_path / "wb" / "wandb").glob("offline-run-*/run-*.wandb")
    read = _wandb_file(path, len(ROWS))
    assert [h["loss"] for h in read["history"]] == [1.5, 1.25, 1.0]


# -- properties -------------------------------------------------------------------------------------
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(lambda n: n not in ("step", "epoch"))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 10**9), st.dictionaries(names, finite | st.text(max_size=5) | st.booleans(), max_size=8)
)
def test_metric_points_are_the_rows_finite_numbers(step, fields):
    got_step, points = tr.metric_points({"step": step, **fields})
    assert got_step == step
    assert points == {k: float(v) for k, v in fields.items() if not isinstance(v, str)}


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_the_wandb_reader_is_total(data):
    from wandb_records import HEADER, framed_records

    for blob in (data, HEADER + data):
        try:
            records = framed_records(blob)
        except ValueError:
            continue
        assert all(isinstance(r, bytes) for r in records)


def test_a_report_build_does_not_track_unless_asked(tmp_path, monkeypatch):
    """Notebook kernels of a report build (a batch job) get ``RFTLAB_TRACKING=off`` unless it is set."""
    from rftlab.reports import execute_notebook

    notebook = tmp_path / "01_probe.py"
    notebook.write_text(
        "# %%\nfrom rftlab.runs.paths import DEFAULT_RUNS_DIR\nfrom rftlab.runs.tracking import selected_trackers\n"
        "print(repr(selected_trackers(DEFAULT_RUNS_DIR)))\n"
    )

    def printed() -> str:
        nb = execute_notebook(notebook, quick=False, timeout=120)
        return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)

    monkeypatch.delenv("RFTLAB_TRACKING", raising=False)
    assert printed().strip() == "()"
    monkeypatch.setenv("RFTLAB_TRACKING", "wandb")
    assert printed().strip() == "('wandb',)"


def test_a_run_without_rows_starts_no_tracker(tmp_path, mlflow_store, monkeypatch):
    """Finishing a run that logged nothing (a scripted strategy's rollouts) opens no tracker, so MLflow
    is never imported for it."""
    monkeypatch.setattr(tr, "_TRACKERS", {})
    RunStore(tmp_path / "runs").record_rollouts("poker", "scripted", SPEC, [{"episode": 0, "reward": 1.0}])
    assert tr.flush()
    assert tr._TRACKERS == {}
