"""The local Fireworks control plane driven by the unmodified ``fireworks-ai`` 1.2.30 SDK (and
eval-protocol's own ``verifyApiKey`` call): datasets, pagination, evaluators, jobs and their states,
secrets, refusals, restarts. Nothing here runs an evaluator's pytest (the flows that do are in
``test_local_fireworks_flow.py``)."""

from __future__ import annotations

import io
import json
import os
import stat

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from local_fireworks_helpers import (
    ACCOUNT,
    KEY,
    OTHER,
    OTHER_KEY,
    TINY_TEST,
    client,
    log_events,
    rows_text,
    server,
    tarball,
    wait_for,
)

from rftlab.cli import main as cli_main
from rftlab.launch.local_fireworks.datasets import rows_of
from rftlab.launch.local_fireworks.state import ApiError, page

fireworks = pytest.importorskip("fireworks")
SENTINEL = "sk-SENTINEL-secret-value-9f3a71"
WANDB_SENTINEL = "wandb-SENTINEL-key-42c9d1e0"


@pytest.fixture
def plane(tmp_path, no_network):
    srv, log = server(tmp_path)
    yield srv, log
    srv.stop()


def _job(fw, job_id, evaluator="accounts/acct-under-test/evaluators/nope", **kw):
    return fw.reinforcement_fine_tuning_jobs.create(
        reinforcement_fine_tuning_job_id=job_id,
        dataset=f"accounts/{ACCOUNT}/datasets/ds",
        evaluator=evaluator,
        training_config={"epochs": 1, "base_model": "accounts/fireworks/models/qwen3-1p7b"},
        **kw,
    )


def test_verify_api_key_names_the_key_s_account(plane):
    from eval_protocol.auth import verify_api_key_and_get_account_id

    srv, _ = plane
    assert verify_api_key_and_get_account_id(api_key=KEY, api_base=srv.base_url) == ACCOUNT
    assert verify_api_key_and_get_account_id(api_key=OTHER_KEY, api_base=srv.base_url) == OTHER
    assert verify_api_key_and_get_account_id(api_key="fw_wrong_key_000", api_base=srv.base_url) is None
    assert httpx.get(srv.base_url + "/verifyApiKey").status_code == 401
    with pytest.raises(fireworks.PermissionDeniedError):  # a key reaches its own account only
        client(srv, KEY, OTHER).datasets.list()


def test_datasets_create_upload_get_download(plane):
    srv, _ = plane
    fw = client(srv)
    made = fw.datasets.create(dataset_id="ds", dataset={"display_name": "rows", "format": "CHAT"})
    assert (made.name, made.state) == (f"accounts/{ACCOUNT}/datasets/ds", "UPLOADING")
    text = rows_text(3)
    up = fw.datasets.upload("ds", file=("rows.jsonl", io.BytesIO(text.encode())))
    assert (up.bytes, up.filename) == (len(text.encode()), "rows.jsonl")
    got = fw.datasets.get("ds")
    assert (got.state, got.example_count, got.display_name) == ("READY", "3", "rows")
    urls = fw.datasets.get_download_endpoint("ds").filename_to_signed_urls
    assert list(urls) == ["rows.jsonl"]
    assert httpx.get(urls["rows.jsonl"]).text == text  # the signed URL needs no key
    with pytest.raises(fireworks.ConflictError):
        fw.datasets.create(dataset_id="ds", dataset={})
    with pytest.raises(fireworks.NotFoundError):
        fw.datasets.get("missing")
    fw.datasets.delete("ds")
    with pytest.raises(fireworks.NotFoundError):
        fw.datasets.get("ds")


def test_a_bad_upload_is_refused_with_its_line_and_keeps_nothing(plane):
    srv, _ = plane
    fw = client(srv)
    fw.datasets.create(dataset_id="ds", dataset={})
    with pytest.raises(fireworks.BadRequestError, match="line 2 is not JSON"):
        fw.datasets.upload("ds", file=("rows.jsonl", io.BytesIO(b'{"a": 1}\n{not json\n')))
    assert fw.datasets.get("ds").state == "UPLOADING"
    with pytest.raises(fireworks.BadRequestError, match="unknown field"):
        fw.datasets.create(dataset_id="ds2", dataset={}, extra_body={"bogus": 1})


def test_signed_upload_needs_the_declared_size(plane):
    srv, _ = plane
    fw = client(srv)
    fw.datasets.create(dataset_id="ds", dataset={})
    data = rows_text(2).encode()
    urls = fw.datasets.get_upload_endpoint("ds", filename_to_size={"a.jsonl": str(len(data))})
    url = urls.filename_to_signed_urls["a.jsonl"]
    assert httpx.put(url, content=data + b"\n").status_code == 400  # not the size announced
    with pytest.raises(fireworks.BadRequestError, match="was not uploaded"):
        fw.datasets.validate_upload("ds", body={})
    assert httpx.put(url, content=data).status_code == 200
    fw.datasets.validate_upload("ds", body={})
    assert (fw.datasets.get("ds").state, fw.datasets.get("ds").example_count) == ("READY", "2")


def test_dataset_list_pages_as_the_rest_api(plane):
    srv, _ = plane
    fw = client(srv)
    for i in range(7):  # created over plain HTTP: quicker than the SDK
        r = httpx.post(
            f"{srv.base_url}/v1/accounts/{ACCOUNT}/datasets",
            json={"datasetId": f"d{6 - i}", "dataset": {}},
            headers={"Authorization": f"Bearer {KEY}"},
        )
        assert r.status_code == 200, r.text
    first = fw.datasets.list(page_size=3)
    assert [d.name.rsplit("/", 1)[-1] for d in first.datasets] == ["d0", "d1", "d2"]
    assert first.has_next_page() and first.next_page_token
    assert [d.name.rsplit("/", 1)[-1] for d in fw.datasets.list(page_size=3)] == [f"d{i}" for i in range(7)]
    assert len(fw.datasets.list().datasets) == 7 and fw.datasets.list().next_page_token is None
    assert not client(srv, OTHER_KEY, OTHER).datasets.list().datasets  # another account's list is its own
    with pytest.raises(fireworks.BadRequestError, match="pageToken"):
        fw.datasets.list(page_token="not-a-token")


@settings(max_examples=60, deadline=None)
@given(names=st.sets(st.text("abc0123-", min_size=1, max_size=6), max_size=260), size=st.integers(0, 260))
def test_pages_cover_every_item_once_in_order(names, size):
    items = [{"name": n} for n in names]
    seen, token = [], ""
    for _ in range(len(items) + 2):
        query = {"pageSize": str(size)} | ({"pageToken": token} if token else {})
        answer = page(items, query, "items")
        assert len(answer["items"]) <= min(size or 50, 200)
        seen += [i["name"] for i in answer["items"]]
        token = answer.get("nextPageToken", "")
        if not token:
            break
    assert seen == sorted(names)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_dataset_rows_parse_or_refuse_in_one_line(data):
    try:
        count = rows_of(data, "f.jsonl")
    except ApiError as exc:
        assert exc.status == 400 and "\n" not in exc.message
    else:
        lines = [ln for ln in data.decode("utf-8").splitlines() if ln.strip()]
        assert count == len(lines) and all(isinstance(json.loads(ln), dict) for ln in lines)


def _upload_code(fw, srv, ev_id, files):
    fw.evaluators.create(evaluator_id=ev_id, evaluator={"entry_point": "test_tiny.py::test_tiny"})
    data = tarball(files)
    urls = fw.evaluators.get_upload_endpoint(ev_id, filename_to_size={"code.tar.gz": str(len(data))})
    assert httpx.put(urls.filename_to_signed_urls["code.tar.gz"], content=data).status_code == 200
    fw.evaluators.validate_upload(ev_id, body={})


def test_an_evaluator_without_requirements_fails_to_build_and_so_does_its_job(plane):
    srv, _ = plane
    fw = client(srv)
    fw.evaluators.create(evaluator_id="bare", evaluator={})
    assert fw.evaluators.get("bare").state == "STATE_UNSPECIFIED"  # no code yet
    _upload_code(fw, srv, "nocode", {"test_tiny.py": "def test_tiny(): pass\n"})
    ev = wait_for(lambda: fw.evaluators.get("nocode"), lambda e: e.state != "BUILDING")
    assert ev.state == "BUILD_FAILED" and "requirements.txt is missing" in ev.status.message
    fw.datasets.create(dataset_id="ds", dataset={})
    fw.datasets.upload("ds", file=("r.jsonl", io.BytesIO(rows_text(1).encode())))
    for job_id, evaluator, why in (
        ("j-missing", f"accounts/{ACCOUNT}/evaluators/nope", "not found"),
        ("j-failed", f"accounts/{ACCOUNT}/evaluators/nocode", "failed to build"),
        ("j-nocode", f"accounts/{ACCOUNT}/evaluators/bare", "has no code"),
    ):
        _job(fw, job_id, evaluator)  # accepted, as the platform accepts it, then failed
        job = wait_for(
            lambda j=job_id: fw.reinforcement_fine_tuning_jobs.get(j), lambda j: j.state == "JOB_STATE_FAILED"
        )
        assert why in job.status.message
    names = [j.name.rsplit("/", 1)[-1] for j in fw.reinforcement_fine_tuning_jobs.list()]
    assert names == ["j-failed", "j-missing", "j-nocode"]


def test_cancel_and_resume_follow_the_job_states(tmp_path, no_network):
    srv, _ = server(tmp_path, build_seconds=60)  # its evaluator stays BUILDING for a minute
    try:
        fw = client(srv)
        _upload_code(fw, srv, "slow", {"test_tiny.py": "def test_tiny(): pass\n"})
        assert fw.evaluators.get("slow").state == "BUILDING"
        _job(fw, "waits", f"accounts/{ACCOUNT}/evaluators/slow")
        wait_for(
            lambda: fw.reinforcement_fine_tuning_jobs.get("waits"), lambda j: j.state == "JOB_STATE_PENDING"
        )
        with pytest.raises(fireworks.BadRequestError, match="only a FAILED job"):
            fw.reinforcement_fine_tuning_jobs.resume("waits", body={})
        fw.reinforcement_fine_tuning_jobs.cancel("waits", body={})
        job = wait_for(
            lambda: fw.reinforcement_fine_tuning_jobs.get("waits"), lambda j: j.state == "JOB_STATE_CANCELLED"
        )
        assert job.completed_time is not None
        with pytest.raises(fireworks.BadRequestError, match="nothing to cancel"):
            fw.reinforcement_fine_tuning_jobs.cancel("waits", body={})
        _job(fw, "lost")  # a missing evaluator: FAILED; resumed, it runs (and fails) again
        wait_for(
            lambda: fw.reinforcement_fine_tuning_jobs.get("lost"), lambda j: j.state == "JOB_STATE_FAILED"
        )
        assert fw.reinforcement_fine_tuning_jobs.resume("lost", body={}).state == "JOB_STATE_PENDING"
        wait_for(
            lambda: fw.reinforcement_fine_tuning_jobs.get("lost"), lambda j: j.state == "JOB_STATE_FAILED"
        )
        assert srv.plane.records[("jobs", ACCOUNT, "lost")]["_attempt"] == 2
    finally:
        srv.stop()


@pytest.mark.slow  # an evaluator build (pytest --collect-only) and a job: about 30 s
def test_an_archived_job_is_terminal_and_does_not_resume(tmp_path, no_network):
    """``--archive-epoch 0``: a job reaching epoch 0 becomes ARCHIVED (terminal: a completion time, no epoch
    dataset written) and, unlike a FAILED one, is refused by resume."""
    srv, _ = server(tmp_path, archive_epoch=0)
    try:
        fw = client(srv)
        files = {"test_tiny.py": TINY_TEST, "requirements.txt": "eval-protocol==0.3.33\n"}
        _upload_code(fw, srv, "tiny", files)
        assert wait_for(lambda: fw.evaluators.get("tiny"), lambda e: e.state != "BUILDING").state == "ACTIVE"
        fw.datasets.create(dataset_id="ds", dataset={})
        fw.datasets.upload("ds", file=("r.jsonl", io.BytesIO(rows_text(2).encode())))
        _job(fw, "arch", f"accounts/{ACCOUNT}/evaluators/tiny")
        job = wait_for(
            lambda: fw.reinforcement_fine_tuning_jobs.get("arch"),
            lambda j: j.state in ("JOB_STATE_ARCHIVED", "JOB_STATE_FAILED", "JOB_STATE_COMPLETED"),
        )
        assert job.state == "JOB_STATE_ARCHIVED" and "archived at epoch 0" in job.status.message
        assert job.completed_time is not None
        with pytest.raises(fireworks.BadRequestError, match="only a FAILED job"):
            fw.reinforcement_fine_tuning_jobs.resume("arch", body={})
        assert [d.name.rsplit("/", 1)[-1] for d in fw.datasets.list()] == ["ds"]
    finally:
        srv.stop()


def test_serve_fireworks_refuses_a_bad_drop_chunk_or_archive_epoch(tmp_path, capsys):
    base = ["serve", "fireworks", "--port", "0", "--storage", str(tmp_path / "s")]
    for bad in ("1", "-1:2", "a:b"):
        with pytest.raises(SystemExit) as stopped:  # argparse's usage error
            cli_main([*base, f"--drop-chunk={bad}"])
        assert stopped.value.code == 2
        assert (
            f"--drop-chunk: must be EPOCH:CHUNK, two non-negative integers, got {bad!r}"
            in capsys.readouterr().err
        )
    assert cli_main([*base, "--archive-epoch=-1"]) == 2
    err = capsys.readouterr().err
    assert "--archive-epoch must be from 0 to 1000" in err and "Traceback" not in err


def test_secret_values_and_the_wandb_key_are_never_kept(tmp_path, no_network):
    srv, log = server(tmp_path)
    try:
        fw = client(srv)
        made = fw.secrets.create(key_name="MY_TOKEN", name="my-token", value=SENTINEL)
        assert made.value is None and made.key_name == "MY_TOKEN"
        assert fw.secrets.get("my-token").value is None
        job = _job(
            fw, "wb", wandb_config={"enabled": True, "api_key": WANDB_SENTINEL, "project": "p", "entity": "e"}
        )
        assert job.wandb_config.api_key is None and job.wandb_config.project == "p"
        wait_for(lambda: fw.reinforcement_fine_tuning_jobs.get("wb"), lambda j: j.state == "JOB_STATE_FAILED")
    finally:
        srv.stop()
    stored = b"".join(p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file())
    for value in (SENTINEL, WANDB_SENTINEL):
        assert value.encode() not in stored
        assert value not in log.getvalue()
    assert any(r["path"].endswith("/secrets") and r["status"] == 200 for r in log_events(log))


def test_a_restart_keeps_resources_and_fails_the_jobs_it_interrupted(tmp_path, no_network):
    srv, _ = server(tmp_path, build_seconds=60)
    fw = client(srv)
    fw.datasets.create(dataset_id="ds", dataset={})
    fw.datasets.upload("ds", file=("r.jsonl", io.BytesIO(rows_text(2).encode())))
    _upload_code(fw, srv, "slow", {"test_tiny.py": "def test_tiny(): pass\n"})
    _job(fw, "waits", f"accounts/{ACCOUNT}/evaluators/slow")
    wait_for(lambda: fw.reinforcement_fine_tuning_jobs.get("waits"), lambda j: j.state == "JOB_STATE_PENDING")
    srv.stop()
    srv2, _ = server(tmp_path)  # the same storage folder
    try:
        fw = client(srv2)
        assert fw.datasets.get("ds").example_count == "2"
        job = fw.reinforcement_fine_tuning_jobs.get("waits")
        assert job.state == "JOB_STATE_FAILED" and job.status.code == "ABORTED"
        ev = wait_for(lambda: fw.evaluators.get("slow"), lambda e: e.state != "BUILDING")
        assert ev.state == "BUILD_FAILED"  # built again at start
    finally:
        srv2.stop()
    store = tmp_path / "store"
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    for p in store.rglob("*"):
        if p.is_file():
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


def test_serve_fireworks_refuses_what_it_cannot_honour(tmp_path, capsys):
    assert cli_main(["serve", "fireworks", "--host", "0.0.0.0", "--storage", str(tmp_path / "s")]) == 2
    assert "loopback addresses only" in capsys.readouterr().err
    keys = tmp_path / "keys"
    keys.write_text(f"{ACCOUNT} {KEY}\n")
    os.chmod(keys, 0o644)
    assert (
        cli_main(
            ["serve", "fireworks", "--port", "0", "--keys-file", str(keys), "--storage", str(tmp_path / "s")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "readable by others" in err and KEY not in err and "Traceback" not in err


def test_serve_fireworks_stops_cleanly_on_sigterm(tmp_path):
    import signal
    import subprocess
    import sys

    storage = tmp_path / "s"
    argv = [
        sys.executable,
        "-m",
        "rftlab.cli",
        "serve",
        "fireworks",
        "--port",
        "0",
        "--storage",
        str(storage),
    ]
    env = {k: v for k, v in os.environ.items() if k != "FIREWORKS_ACCOUNT_ID"}
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = ""
        while '"event":"listening"' not in line:
            line = proc.stderr.readline()
            assert line, "the server exited before listening"
        url = json.loads(line)["url"]
        key = (storage / "api_key").read_text().strip()  # generated at the first start, mode 0600
        assert stat.S_IMODE((storage / "api_key").stat().st_mode) == 0o600
        r = httpx.get(url + "/verifyApiKey", headers={"Authorization": f"Bearer {key}"})
        assert (r.status_code, r.headers["x-fireworks-account-id"]) == (200, "local")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        rest = proc.stderr.read()
        assert '"event":"stopped"' in rest and key not in rest and "Traceback" not in rest
    finally:
        if proc.poll() is None:
            proc.kill()
