"""End to end against the local Fireworks control plane, with the unmodified clients and real files:
rftlab's evaluator uploaded by eval-protocol's own upload code, a job created and polled with the
``fireworks-ai`` SDK, its per-epoch datasets downloaded and turned into the launcher's epoch metrics;
a failed job resumed; eval-protocol's ``upload`` when the signed-URL PUT is refused; eval-protocol's
``create rft`` through to a completed (chunked) job, and stopped by a ``BUILD_FAILED`` evaluator.

Every test runs the evaluator's pytest at least once (seconds each), hence ``slow``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import httpx
import pytest
from local_fireworks_helpers import (
    ACCOUNT,
    KEY,
    TINY_ENTRY,
    TINY_ID,
    client,
    ep_env,
    log_events,
    rows_text,
    server,
    tiny_project,
    wait_for,
)

from rftlab.launch.firectl import job_id_for, rollout_dataset_id
from rftlab.launch.fireworks import dataset_text, epoch_metrics, evaluator_id, upload_evaluator
from rftlab.launch.fireworks.poll import _parse_rows, _rollout_record
from rftlab.launch.fireworks_sdk import sdk_launcher
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.runs import load_run
from rftlab.runs.paths import SPECS_DIR

pytest.importorskip("eval_protocol")
fireworks = pytest.importorskip("fireworks")
pytestmark = pytest.mark.slow
TERMINAL = ("JOB_STATE_COMPLETED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")


@pytest.fixture(scope="module")
def spectrum_plane(tmp_path_factory):
    """A control plane holding rftlab's spectrum evaluator, uploaded by ``rftlab.launch.fireworks.
    upload_evaluator`` (eval-protocol's upload code) and built (ACTIVE)."""
    tmp = tmp_path_factory.mktemp("plane")
    srv, log = server(tmp)
    spec = load_arm_spec(SPECS_DIR / "spectrum_A.json")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (
            ("FIREWORKS_API_KEY", KEY),
            ("FIREWORKS_API_BASE", srv.base_url),
            ("HOME", str(tmp)),
        ):
            mp.setenv(name, value)
        record = upload_evaluator(spec, ACCOUNT, timeout=600)
    ev_id = record["evaluator_id"]
    fw = client(srv)
    ev = wait_for(lambda: fw.evaluators.get(ev_id), lambda e: e.state != "BUILDING", timeout=600)
    assert ev.state == "ACTIVE", ev.status
    yield srv, log, ev_id, spec
    srv.stop()


def _spectrum_dataset(fw, spec, ds_id: str, n: int) -> list[str]:
    from rftlab.rollout.spectrum.dataset import dataset_rows

    rows = list(dataset_rows(n, prompt=spec.prompt, memory=spec.memory, prefix=spec.row_prefix))
    fw.datasets.create(dataset_id=ds_id, dataset={"format": "FORMAT_UNSPECIFIED"})
    fw.datasets.upload(ds_id, file=(f"{ds_id}.jsonl", io.BytesIO(dataset_text(rows).encode())))
    return [r["input_metadata"]["row_id"] for r in rows]


def _job(fw, job_id: str, ds_id: str, ev_id: str, epochs: int, candidates: int):
    return fw.reinforcement_fine_tuning_jobs.create(
        reinforcement_fine_tuning_job_id=job_id,
        dataset=f"accounts/{ACCOUNT}/datasets/{ds_id}",
        evaluator=f"accounts/{ACCOUNT}/evaluators/{ev_id}",
        training_config={
            "base_model": "accounts/fireworks/models/qwen3-1p7b",
            "epochs": epochs,
            "learning_rate": 1e-4,
        },
        inference_parameters={
            "response_candidates_count": candidates,
            "temperature": 1.0,
            "max_output_tokens": 512,
        },
        max_concurrent_rollouts=4,
    )


def _epoch_rows(fw, ds_id: str) -> list[dict]:
    urls = fw.datasets.get_download_endpoint(ds_id).filename_to_signed_urls
    assert list(urls) == ["eval_results_dataset.jsonl"]  # the platform's file name (docs/platforms.md §1.5)
    return _parse_rows(httpx.get(urls["eval_results_dataset.jsonl"]).text)


def _direct_reward(spec, row: dict) -> float:
    """The env's own reward for the served policy on this row: the independent computation."""
    from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
    from rftlab.policies.spectrum.reference import RFT_POLICIES
    from rftlab.rollout.episode import episode

    salt = ((row.get("execution_metadata") or {}).get("extra") or {}).get("spectrum", {}).get("salt", "")
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory=spec.memory))
    return episode(env, RFT_POLICIES["accumulate"](), row["input_metadata"]["row_id"], salt=salt).metrics[
        "reward"
    ]


def test_upload_create_poll_and_per_epoch_metrics(spectrum_plane):
    srv, log, ev_id, spec = spectrum_plane
    fw = client(srv)
    row_ids = _spectrum_dataset(fw, spec, "spec-rows", 2)
    assert _job(fw, "flow", "spec-rows", ev_id, epochs=2, candidates=2).state == "JOB_STATE_CREATING"
    seen = set()
    job = wait_for(
        lambda: fw.reinforcement_fine_tuning_jobs.get("flow"),
        lambda j: seen.add(j.state) or j.state in TERMINAL,
        timeout=600,
    )
    assert job.state == "JOB_STATE_COMPLETED", job.status
    assert "JOB_STATE_RUNNING" in seen and job.job_progress.percent == 100
    for k in range(2):
        rows = _epoch_rows(fw, rollout_dataset_id("flow", k))
        metrics = epoch_metrics([_rollout_record(r, i) for i, r in enumerate(rows)])
        assert (metrics["rollouts"], metrics["groups"], metrics["rollouts_without_score"]) == (4, 2, 0)
        assert sorted(r["input_metadata"]["row_id"] for r in rows) == sorted(
            row_ids * 2
        )  # 2 candidates a row
        for row in rows:
            assert row["evaluation_result"]["score"] == pytest.approx(_direct_reward(spec, row))
        assert fw.datasets.get(rollout_dataset_id("flow", k)).source_job_name == job.name


def test_a_failed_job_is_resumed_from_the_epoch_it_failed_in(spectrum_plane):
    srv, _, ev_id, spec = spectrum_plane
    fw = client(srv)
    _spectrum_dataset(fw, spec, "one-row", 1)
    srv.runner.fail_epoch = 1  # the first attempt fails with RESOURCE_EXHAUSTED at epoch 1
    try:
        _job(fw, "resumed", "one-row", ev_id, epochs=2, candidates=1)
        job = wait_for(
            lambda: fw.reinforcement_fine_tuning_jobs.get("resumed"),
            lambda j: j.state in TERMINAL,
            timeout=600,
        )
        assert (job.state, job.status.code) == ("JOB_STATE_FAILED", "RESOURCE_EXHAUSTED")
        first = fw.datasets.get(rollout_dataset_id("resumed", 0))
        with pytest.raises(fireworks.NotFoundError):
            fw.datasets.get(rollout_dataset_id("resumed", 1))
        assert fw.reinforcement_fine_tuning_jobs.resume("resumed", body={}).state == "JOB_STATE_PENDING"
        job = wait_for(
            lambda: fw.reinforcement_fine_tuning_jobs.get("resumed"),
            lambda j: j.state in TERMINAL,
            timeout=600,
        )
    finally:
        srv.runner.fail_epoch = None
    assert job.state == "JOB_STATE_COMPLETED", job.status
    assert (
        fw.datasets.get(rollout_dataset_id("resumed", 0)).create_time == first.create_time
    )  # kept, not re-run
    assert len(_epoch_rows(fw, rollout_dataset_id("resumed", 1))) == 1


def _ep(argv: list[str], project, srv, tmp_path) -> subprocess.CompletedProcess:
    """eval-protocol's own CLI (its ``__main__``) in the evaluator project."""
    (tmp_path / "home").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "eval_protocol", *argv],
        cwd=project,
        env=ep_env(srv, tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_refused_code_upload_leaves_an_evaluator_without_code(tmp_path):
    """eval-protocol 0.3.33 when the signed-URL PUT is refused: it logs the failure, skips validateUpload
    and still exits 0 saying the evaluator was uploaded; the evaluator has no code, and a job on it fails."""
    srv, log = server(tmp_path, signed_url_ttl_s=0.0)  # every signed URL has expired when it is used
    try:
        proc = _ep(["upload", "--entry", TINY_ENTRY, "--yes"], tiny_project(tmp_path / "ev"), srv, tmp_path)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert "Code upload failed (evaluator created but code not uploaded)" in out
        assert f"Successfully uploaded evaluator: {TINY_ID}" in out
        requests = log_events(log)
        assert any(
            r["method"] == "PUT" and r["path"] == "/signed/***" and r["status"] == 400 for r in requests
        )
        assert not any(r["path"].endswith(":validateUpload") for r in requests)
        fw = client(srv)
        assert fw.evaluators.get(TINY_ID).state == "STATE_UNSPECIFIED"
        fw.datasets.create(dataset_id="tiny", dataset={})
        fw.datasets.upload("tiny", file=("t.jsonl", io.BytesIO(rows_text(1).encode())))
        _job(fw, "on-nothing", "tiny", TINY_ID, epochs=1, candidates=1)
        job = wait_for(
            lambda: fw.reinforcement_fine_tuning_jobs.get("on-nothing"), lambda j: j.state in TERMINAL
        )
        assert job.state == "JOB_STATE_FAILED" and "has no code" in job.status.message
        assert KEY not in log.getvalue()
    finally:
        srv.stop()


CREATE_RFT = ["create", "rft", "--yes", "--skip-validation", "--dataset", "tiny", "--job-id", "tj",
              "--base-model", "accounts/fireworks/models/qwen3-1p7b", "--output-model", "tiny-out",
              "--epochs", "1", "--response-candidates-count", "2", "--chunk-size", "2"]  # fmt: skip


def test_create_rft_runs_a_chunked_job_to_completion(tmp_path):
    srv, _ = server(tmp_path)
    try:
        fw = client(srv)
        fw.datasets.create(dataset_id="tiny", dataset={})
        fw.datasets.upload("tiny", file=("t.jsonl", io.BytesIO(rows_text(3).encode())))
        proc = _ep(CREATE_RFT, tiny_project(tmp_path / "ev"), srv, tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Evaluator is ACTIVE" in proc.stdout and "Created Reinforcement Fine-tuning Job" in proc.stdout
        job = wait_for(
            lambda: fw.reinforcement_fine_tuning_jobs.get("tj"), lambda j: j.state in TERMINAL, timeout=600
        )
        assert job.state == "JOB_STATE_COMPLETED", job.status
        assert (job.chunk_size, job.inference_parameters.response_candidates_count) == (2, 2)
        names = {d.name.rsplit("/", 1)[-1] for d in fw.datasets.list()}
        epoch = rollout_dataset_id("tj", 0)
        assert {f"{epoch}-chunk-0", f"{epoch}-chunk-1"} <= names and epoch not in names
        rows = _epoch_rows(fw, f"{epoch}-chunk-0") + _epoch_rows(fw, f"{epoch}-chunk-1")
        assert sorted(r["input_metadata"]["row_id"] for r in rows) == ["r0", "r0", "r1", "r1", "r2", "r2"]
        for r in rows:  # the tiny evaluator's score is min(1, length / 10); row r<i> has i + 1 characters
            i = int(r["input_metadata"]["row_id"][1:])
            assert r["evaluation_result"]["score"] == pytest.approx((i + 1) / 10)
    finally:
        srv.stop()


def test_create_rft_stops_at_a_build_failure_and_creates_no_job(tmp_path):
    srv, _ = server(tmp_path)
    try:
        fw = client(srv)
        fw.datasets.create(dataset_id="tiny", dataset={})
        fw.datasets.upload("tiny", file=("t.jsonl", io.BytesIO(rows_text(1).encode())))
        project = tiny_project(tmp_path / "ev", requirements="rftlab-no-such-package==1.0\n")
        proc = _ep(CREATE_RFT, project, srv, tmp_path)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Evaluator build failed" in proc.stdout
        ev = fw.evaluators.get(TINY_ID)
        assert ev.state == "BUILD_FAILED" and "rftlab-no-such-package is not installed" in ev.status.message
        assert not fw.reinforcement_fine_tuning_jobs.list().reinforcement_fine_tuning_jobs
    finally:
        srv.stop()


class _Passed:
    """The spectrum preflight's verdict, passed (the preflight has its own tests)."""

    passed = True

    def to_dict(self):
        return {"passed": True, "checks": []}


WANDB = "wandb-SENTINEL-in-the-body-7c1d"


def test_the_sdk_launcher_launches_polls_and_records_epoch_metrics(spectrum_plane, tmp_path, monkeypatch):
    from rftlab.rollout.spectrum.dataset import dataset_rows

    srv, log, ev_id, base = spectrum_plane
    fw_section = base.fireworks.model_copy(
        update={"wandb_project": "p", "wandb_entity": "e", "max_concurrent_rollouts": 4}
    )
    spec = base.model_copy(update={"epochs": 1, "response_candidates": 2, "fireworks": fw_section})
    assert evaluator_id(spec, ACCOUNT) == ev_id  # the evaluator uploaded above is the one the job names
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    monkeypatch.setenv("WANDB_API_KEY", WANDB)
    rows = list(
        dataset_rows(
            2, prompt=spec.prompt, memory=spec.memory, prefix=spec.row_prefix, epoch_salt=spec.epoch_salt
        )
    )
    launcher = sdk_launcher(
        account_id=ACCOUNT, base_url=srv.base_url, preflight=lambda s: _Passed(), dataset_rows=lambda s: rows
    )
    ref = launcher.launch(spec, root=tmp_path / "runs")
    result = launcher.watch(ref, every=0, stall_after=600, sleep=lambda s: time.sleep(0.5))
    assert result.done and result.status.state == "completed", result.status
    run = load_run(ref.path)
    assert run.record.status == "finished" and run.record.provider["job_id"] == job_id_for(spec)
    (metrics,) = run.metrics()
    assert (metrics["epoch"], metrics["rollouts"], metrics["groups"], metrics["rollouts_without_score"]) == (
        0,
        4,
        2,
        0,
    )
    calls = [json.loads(x) for x in (ref.path / "provider" / "firectl_calls.jsonl").read_text().splitlines()]
    assert calls and all(c["argv"][0] == "sdk" for c in calls)
    job = client(srv).reinforcement_fine_tuning_jobs.get(job_id_for(spec))
    assert (job.wandb_config.project, job.wandb_config.enabled, job.wandb_config.api_key) == ("p", True, None)
    for folder in (ref.path, srv.plane.storage):
        for f in folder.rglob("*"):
            assert not f.is_file() or WANDB.encode() not in f.read_bytes(), f
    assert WANDB not in log.getvalue()


def test_the_sdk_launcher_resumes_a_failed_job_and_relaunches_one_as_a_new_attempt(
    spectrum_plane, tmp_path, monkeypatch
):
    """Issue 32's failed-job path through the SDK launcher: a job that failed on the platform makes the
    next launch stop and say so; ``resume`` resumes it and polls it to the end in the same kind of run;
    ``new-attempt`` creates job ``...-a2`` in a new run linked to the failed one."""
    from rftlab.launch.fireworks import LaunchRefused
    from rftlab.rollout.spectrum.dataset import dataset_rows

    srv, _log, ev_id, base = spectrum_plane
    spec = base.model_copy(update={"epochs": 2, "response_candidates": 1, "seed": 7})
    assert evaluator_id(spec, ACCOUNT) == ev_id
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    rows = list(
        dataset_rows(
            1, prompt=spec.prompt, memory=spec.memory, prefix=spec.row_prefix, epoch_salt=spec.epoch_salt
        )
    )
    launcher = sdk_launcher(
        account_id=ACCOUNT, base_url=srv.base_url, preflight=lambda s: _Passed(), dataset_rows=lambda s: rows
    )

    def watch(ref):
        return launcher.watch(ref, every=0, stall_after=600, sleep=lambda s: time.sleep(0.5))

    srv.runner.fail_epoch = 1  # every job's first attempt fails with RESOURCE_EXHAUSTED at epoch 1
    try:
        first = launcher.launch(spec, root=tmp_path / "runs")
        assert watch(first).status.state == "failed"
        with pytest.raises(LaunchRefused, match="--resume") as refused:
            launcher.launch(spec, root=tmp_path / "runs")
        assert "--new-attempt" in str(refused.value)
        resumed = launcher.launch(spec, root=tmp_path / "runs", failed_job="resume")
        assert watch(resumed).status.state == "completed"
    finally:
        srv.runner.fail_epoch = None
    record = load_run(resumed.path).record
    assert record.provider["job_id"] == job_id_for(spec)
    assert [a["job_id"] for a in record.provider["attempts"]] == [job_id_for(spec)]  # the failed attempt
    assert [m["epoch"] for m in load_run(resumed.path).metrics()] == [0, 1]

    # a new attempt of another seed's job that failed: a new job id and a link back
    other = spec.model_copy(update={"seed": 8})
    srv.runner.fail_epoch = 0
    try:
        failed = launcher.launch(other, root=tmp_path / "runs")
        assert watch(failed).status.state == "failed"
    finally:
        srv.runner.fail_epoch = None
    again = launcher.launch(other, root=tmp_path / "runs", failed_job="new-attempt")
    assert watch(again).status.state == "completed"
    provider = load_run(again.path).record.provider
    assert provider["job_id"] == job_id_for(other, 2) != job_id_for(other)
    assert provider["previous_attempt"]["job_id"] == job_id_for(other)


def _sdk_run(spectrum_plane, tmp_path, monkeypatch, rows_n: int, **changes):
    """A launch and a watch to the end through the SDK launcher, the spectrum evaluator of the fixture."""
    from rftlab.rollout.spectrum.dataset import dataset_rows

    srv, _log, ev_id, base = spectrum_plane
    fw_changes = changes.pop("fireworks", {})
    spec = base.model_copy(update={**changes, "fireworks": base.fireworks.model_copy(update=fw_changes)})
    assert evaluator_id(spec, ACCOUNT) == ev_id
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    rows = list(dataset_rows(rows_n, prompt=spec.prompt, memory=spec.memory, prefix=spec.row_prefix,
                             epoch_salt=spec.epoch_salt))  # fmt: skip
    launcher = sdk_launcher(
        account_id=ACCOUNT, base_url=srv.base_url, preflight=lambda s: _Passed(), dataset_rows=lambda s: rows
    )
    ref = launcher.launch(spec, root=tmp_path / "runs")
    return launcher, spec, ref, launcher.watch(ref, every=0, stall_after=600, sleep=lambda s: time.sleep(0.5))


def test_the_sdk_launcher_marks_an_epoch_whose_chunk_never_arrived(spectrum_plane, tmp_path, monkeypatch):
    """``rftlab serve fireworks --drop-chunk 0:1``: epoch 0 of a job chunked one row a chunk is written as
    chunks 0 and 2 only; the poll records what arrived and marks the epoch incomplete, as the firectl
    launcher does against the strict fake."""
    srv = spectrum_plane[0]
    srv.runner.drop_chunk = (0, 1)
    try:
        _launcher, spec, ref, result = _sdk_run(
            spectrum_plane, tmp_path, monkeypatch, 3, epochs=1, rows=3, response_candidates=1, seed=11,
            fireworks={"chunk_size": 1},
        )  # fmt: skip
    finally:
        srv.runner.drop_chunk = None
    listed = [d.name.rsplit("/", 1)[-1] for d in client(srv).datasets.list()]
    base_id = rollout_dataset_id(job_id_for(spec), 0)
    assert sorted(n for n in listed if n.startswith(base_id)) == [f"{base_id}-chunk-0", f"{base_id}-chunk-2"]
    assert result.done and result.status.state == "completed", result.status
    assert result.incomplete_epochs == [0] and "incomplete" in result.status.message
    run = load_run(ref.path)
    gaps = run.record.provider["incomplete_epochs"]["0"]
    assert (gaps["chunks"], gaps["missing_chunks"]) == ([0, 2], [1])
    assert (gaps["rollouts"], gaps["expected_rollouts"]) == (2, 3)
    assert run.metrics()[0]["rollouts"] == 2  # what arrived is kept


def test_the_sdk_launcher_ends_the_poll_of_an_archived_job(spectrum_plane, tmp_path, monkeypatch):
    """``rftlab serve fireworks --archive-epoch 1``: the job is ARCHIVED once epoch 0 is written; the poll
    ends (no false stall) with the run failed and epoch 0 recorded, and a relaunch offers a new attempt only
    (an ARCHIVED job does not resume)."""
    from rftlab.launch.fireworks import LaunchRefused

    srv = spectrum_plane[0]
    srv.runner.archive_epoch = 1
    try:
        launcher, spec, ref, result = _sdk_run(
            spectrum_plane, tmp_path, monkeypatch, 1, epochs=2, response_candidates=1, seed=12
        )
    finally:
        srv.runner.archive_epoch = None
    job = client(srv).reinforcement_fine_tuning_jobs.get(job_id_for(spec))
    assert job.state == "JOB_STATE_ARCHIVED"
    assert result.status.state == "failed" and not result.stalled and result.epochs_recorded == [0]
    record = load_run(ref.path).record
    assert record.status == "failed" and "ARCHIVED" in record.error
    assert [m["epoch"] for m in load_run(ref.path).metrics()] == [0]
    with pytest.raises(LaunchRefused, match="ARCHIVED") as refused:
        launcher.launch(spec, root=tmp_path / "runs")
    assert "--new-attempt" in str(refused.value) and "--resume" not in str(refused.value)
