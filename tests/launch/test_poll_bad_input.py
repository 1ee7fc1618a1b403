"""Class 5 of issue 24 and items 5 and 8 of issue 23: ``fireworks launch`` and ``poll`` on bad numbers,
bad answers from the service, failed launches and missing epoch datasets — every exit code matches what
was printed (``--once`` included), every number read from the service is checked against the spec, polls
are never closer than the minimum interval and each prints one status line."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.cli import main as cli_main
from rftlab.launch.firectl import job_id_for, job_progress, rollout_dataset_id
from rftlab.launch.fireworks import MIN_POLL_INTERVAL_S, FireworksLauncher, evaluator_id
from rftlab.launch.fireworks.poll import _finished_epochs, _status_of
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.runs import RunBusyError, load_run

sys.path.insert(0, str(Path(__file__).parent))
from fake_firectl_env import install_fake_firectl  # noqa: E402
from fireworks_api_stub import FireworksApiStub  # noqa: E402
from option_errors import refused_option  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KEY = "fw-poll-test-key-0123456789"


class Passed:
    passed = True

    def to_dict(self):
        return {"passed": True, "checks": []}


@pytest.fixture
def fake(tmp_path, monkeypatch, request):
    scenario = install_fake_firectl(tmp_path, monkeypatch).dir
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", "acct")
    sleeps: list[float] = []
    monkeypatch.setattr("rftlab.cli.fireworks._sleep", sleeps.append)
    api = FireworksApiStub(account="acct").__enter__()  # the evaluator check's API (the SDK reads it)
    request.addfinalizer(lambda: api.__exit__(None, None, None))
    monkeypatch.setenv("FIREWORKS_BASE_URL", api.base_url)
    api.states[evaluator_id(_spec(), "acct")] = "ACTIVE"

    class Fake:
        dir = scenario
        slept = sleeps

        @staticmethod
        def replies(*bodies):
            for p in [*scenario.glob("job_get.*"), *scenario.glob(".count.*")]:
                p.unlink()
            for i, body in enumerate(bodies):
                if isinstance(body, str) and body.startswith("ERR:"):
                    (scenario / f"job_get.{i}.err").write_text(body[4:])
                else:
                    (scenario / f"job_get.{i}.json").write_text(json.dumps(body))

        @staticmethod
        def epochs(job_id, *ks):
            for k in ks:
                rows = [{"input_metadata": {"row_id": f"r{g}"}, "evaluation_result": {"score": 0.1 * g + k}}
                        for g in range(3)]  # fmt: skip
                (scenario / "datasets" / f"{rollout_dataset_id(job_id, k)}.jsonl").write_text(
                    "".join(json.dumps(r) + "\n" for r in rows)
                )

    return Fake


def _spec(epochs=3):
    spec = load_arm_spec(REPO / "data" / "specs" / "spectrum_A.json")
    fw = spec.fireworks.model_copy(update={"max_context_length": 32768})  # holds a 12-scan episode
    return spec.model_copy(update={"epochs": epochs, "fireworks": fw})


def _launched(tmp_path, epochs=3):
    spec = _spec(epochs)
    launcher = FireworksLauncher(preflight=lambda s: Passed(), dataset_rows=lambda s: [{"messages": []}])
    return spec, launcher, launcher.launch(spec, root=tmp_path / "runs")


def job(state, epoch=None, percent=None, **extra):
    return {"state": f"JOB_STATE_{state}", "jobProgress": {"epoch": epoch, "percent": percent}, **extra}


# -------------------------------------------------------------------------------- CLI numbers


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--stall-after", "nan"], "must be a finite number of seconds > 0, got 'nan'"),
        (["--stall-after", "inf"], "must be a finite number of seconds > 0, got 'inf'"),
        (["--stall-after", "0"], "must be a finite number of seconds > 0, got '0'"),
        (["--every", "nan"], "must be a finite number of seconds >= 5, got 'nan'"),
        (["--every", "inf"], "must be a finite number of seconds >= 5, got 'inf'"),
        (["--every", "0"], f"must be a finite number of seconds >= {MIN_POLL_INTERVAL_S:g}, got '0'"),
        (["--every", "-1"], "got '-1'"),
        (["--dataset-grace", "inf"], "must be a finite number of seconds >= 0, got 'inf'"),
    ],
)
def test_bad_poll_numbers_are_refused_by_argparse(fake, tmp_path, capsys, flags, message):
    _spec_, _lau, ref = _launched(tmp_path)
    refused_option(["fireworks", "poll", str(ref.path), *flags], capsys, flags[0], message)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    every=st.floats(allow_nan=True, allow_infinity=True), stall=st.floats(allow_nan=True, allow_infinity=True)
)
def test_any_poll_numbers_run_or_are_refused_cleanly(fake, tmp_path, capsys, every, stall):
    run_dir = next((tmp_path / "runs").rglob("run.json"), None)
    if run_dir is None:
        fake.replies(job("COMPLETED", 3, 100))
        fake.epochs(job_id_for(_spec()), 0, 1, 2)
        _launched(tmp_path)
        run_dir = next((tmp_path / "runs").rglob("run.json"))
    argv = [
        "fireworks",
        "poll",
        str(run_dir.parent),
        f"--every={every!r}",
        f"--stall-after={stall!r}",
        "--json",
    ]
    valid = math.isfinite(every) and every >= MIN_POLL_INTERVAL_S and math.isfinite(stall) and stall > 0
    if valid:
        code = cli_main(argv)
        assert code == 0 and json.loads(capsys.readouterr().out)["state"] == "completed"
    else:
        every_ok = math.isfinite(every) and every >= MIN_POLL_INTERVAL_S
        flag, value = ("--stall-after", stall) if every_ok else ("--every", every)
        refused_option(argv, capsys, flag, f"got '{value!r}'")


# ------------------------------------------------------------------- numbers from the service


def test_a_trillion_epochs_is_ignored_not_allocated(fake, tmp_path, capsys):
    spec, launcher, ref = _launched(tmp_path)
    fake.replies(job("RUNNING", "1000000000000", 50), job("COMPLETED", 3, 100))
    fake.epochs(job_id_for(spec), 0, 1, 2)
    assert cli_main(["fireworks", "poll", str(ref.path), "--every", "5", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "jobProgress.epoch '1000000000000' is not an integer in 0..3; ignored" in err
    assert json.loads(out)["epochs_recorded"] == [0, 1, 2]
    snapshots = (ref.path / "provider" / "job_snapshots.jsonl").read_text().splitlines()
    assert '"1000000000000"' in snapshots[0]  # the raw answer is kept, only not trusted


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=25),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    epochs=st.integers(1, 1000),
    state=st.sampled_from(["RUNNING", "COMPLETED", "FAILED", "PENDING", "??", ""]) | st.text(max_size=10),
    epoch=JSONISH | st.integers(-(10**30), 10**30) | st.from_regex(r"\d{1,40}", fullmatch=True),
    percent=JSONISH,
    accel=JSONISH,
)
def test_every_number_from_the_service_is_checked_against_the_spec(epochs, state, epoch, percent, accel):
    body = {"state": state, "jobProgress": {"epoch": epoch, "percent": percent}, "acceleratorSeconds": accel}
    status = _status_of(body, epochs)
    p = status.provider
    assert p["epoch"] is None or (isinstance(p["epoch"], int) and 0 <= p["epoch"] <= epochs)
    assert p["percent"] is None or 0 <= p["percent"] <= 100
    assert all(math.isfinite(v) and v >= 0 for v in p["accelerator_seconds"].values())
    finished = _finished_epochs(status)
    assert finished == list(range(len(finished))) and len(finished) <= epochs
    json.dumps(status.provider, allow_nan=False)  # what is kept can be written
    if p["epoch"] is None and epoch is not None and job_progress(body, epochs)["problems"]:
        assert "ignored" in status.message


# ------------------------------------------------------------------------- exit codes, --once


@pytest.mark.parametrize(
    "reply, code, printed",
    [
        (job("COMPLETED", 1, 100), 0, "completed"),
        (job("RUNNING", 0, 10), 0, "running"),
        (job("FAILED", 0, 0, status={"message": "dataset rejected"}), 1, "failed"),
        (job("CANCELLED", 0, 0), 1, "cancelled"),
        ("ERR:Error: service unavailable (503)\n", 3, "unknown"),
    ],
)
def test_poll_once_exit_code_matches_what_it_prints(fake, tmp_path, capsys, reply, code, printed):
    spec, _lau, ref = _launched(tmp_path, epochs=1)
    fake.replies(reply)
    fake.epochs(job_id_for(spec), 0)
    assert cli_main(["fireworks", "poll", str(ref.path), "--once", "--json"]) == code
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == printed and out["exit_code"] == code
    assert cli_main(["fireworks", "poll", str(ref.path), "--once"]) in (
        code,
        0 if printed == "completed" else code,
    )
    text = capsys.readouterr().out
    assert text.startswith(f"A: {printed}")


def test_a_launch_without_firectl_marks_the_run_failed_and_poll_says_so(fake, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", "/nonexistent")
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(_spec(1).to_dict()))
    monkeypatch.setattr("rftlab.launch.fireworks._default_preflight", lambda s: Passed())
    assert cli_main(["fireworks", "launch", str(spec_path), "--root", str(tmp_path / "runs")]) == 2
    assert "firectl not found on PATH" in capsys.readouterr().err
    (run_dir,) = [p.parent for p in (tmp_path / "runs").rglob("run.json")]
    record = load_run(run_dir).record
    assert record.status == "failed" and "firectl not found" in record.error
    assert cli_main(["fireworks", "poll", str(run_dir), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == "failed" and out["epochs_recorded"] == [] and "firectl not found" in out["message"]
    assert cli_main(["fireworks", "poll", str(run_dir), "--once"]) == 1
    assert capsys.readouterr().out.startswith("A: failed, epochs recorded []")


# --------------------------------------------------------------- grace, interval, status lines


def test_completed_without_all_datasets_finishes_after_the_grace_period(fake, tmp_path):
    spec, launcher, ref = _launched(tmp_path, epochs=3)
    fake.replies(job("COMPLETED", 3, 100))
    fake.epochs(job_id_for(spec), 0)  # epochs 1 and 2 never appear
    now = [1000.0]
    sleeps: list[float] = []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    result = launcher.watch(ref, every=60, dataset_grace=300, clock=lambda: now[0], sleep=sleep)
    assert result.status.state == "completed" and result.done and result.missing_epochs == [1, 2]
    assert "[1, 2]" in result.status.message and "did not appear within 300 s" in result.status.message
    record = load_run(ref.path).record
    assert record.status == "finished" and record.provider["missing_epochs"] == [1, 2]
    assert [m["epoch"] for m in load_run(ref.path).metrics()] == [0]
    assert 300 <= sum(sleeps) <= 300 + 60  # waited the grace period, not the 30-minute stall rule


def test_datasets_that_arrive_during_the_grace_are_recorded(fake, tmp_path):
    spec, launcher, ref = _launched(tmp_path, epochs=2)
    fake.replies(job("COMPLETED", 2, 100))
    fake.epochs(job_id_for(spec), 0)
    calls = [0]

    def sleep(_seconds):
        calls[0] += 1
        if calls[0] == 2:
            fake.epochs(job_id_for(spec), 1)

    result = launcher.watch(ref, every=5, sleep=sleep)
    assert result.done and result.missing_epochs == [] and result.epochs_recorded == [0, 1]


def test_polls_are_never_closer_than_the_minimum_and_print_one_line_each(fake, tmp_path, capsys):
    _spec_, _launcher, ref = _launched(tmp_path, epochs=2)
    fake.replies(job("PENDING"), job("RUNNING", 0, 10), job("RUNNING", 1, 60), job("COMPLETED", 2, 100))
    fake.epochs(job_id_for(_spec(2)), 0, 1)
    assert cli_main(["fireworks", "poll", str(ref.path), "--every", "5"]) == 0
    err = capsys.readouterr().err.splitlines()
    lines = [line for line in err if " poll " in line]
    assert len(lines) == 4 and len(fake.slept) == 3 and min(fake.slept) >= MIN_POLL_INTERVAL_S
    assert "pending" in lines[0] and "epoch 1/2" in lines[2] and "recorded [0, 1]" in lines[3]
    slept: list[float] = []
    _s, lau2, ref2 = _launched(tmp_path / "second", epochs=2)
    fake.replies(job("RUNNING", 0, 1), job("COMPLETED", 2, 100))
    lau2.watch(ref2, every=0, sleep=slept.append)  # the library too: 0 means "as often as allowed"
    assert slept == [MIN_POLL_INTERVAL_S]


def test_two_polls_of_one_run_at_once_refuse_with_the_run_path(fake, tmp_path):
    _spec_, launcher, ref = _launched(tmp_path, epochs=1)
    fake.replies(job("RUNNING", 0, 1))
    import subprocess

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from rftlab.runs import load_run; r = load_run(sys.argv[1]); r.claim('polled'); "
                "print('held', flush=True); time.sleep(60)"
            ),
            str(ref.path),
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(
            RunBusyError, match=f"run {ref.path} is being polled by another process \\(pid {holder.pid}\\)"
        ):
            launcher.watch(ref, every=5, sleep=lambda s: None)
    finally:
        holder.kill()
        holder.wait()
