"""The Fireworks launcher and poller end to end against a fake ``firectl`` on PATH (real subprocesses)."""

from __future__ import annotations

import json
import math
import stat
import sys
from pathlib import Path

import pytest

from rftlab.cli import main as cli_main
from rftlab.launch.firectl import Firectl, job_create_flags, job_id_for, rollout_dataset_id
from rftlab.launch.fireworks import FireworksLauncher, LaunchRefused, epoch_metrics, evaluator_id
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.runs import load_run

sys.path.insert(0, str(Path(__file__).parent))
from fireworks_api_stub import FireworksApiStub  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "data" / "specs").glob("spectrum_*.json"))
# A sentinel key with characters that JSON escapes, so a leak in any encoding is caught. ASCII only: the
# evaluator check sends the key in an HTTP header, which holds ASCII (a real Fireworks key is ASCII).
SENTINEL = 'fw-sentinel-"quote"\\back-0123456789'


class Passed:
    passed = True

    def to_dict(self):
        return {"passed": True, "checks": [{"name": "planted", "passed": True, "detail": "test"}]}


class Failed(Passed):
    passed = False

    def to_dict(self):
        return {"passed": False, "checks": [{"name": "band_per_row", "passed": False, "detail": "planted"}]}


@pytest.fixture
def fake(tmp_path, monkeypatch, request):
    """A scenario folder + a ``firectl`` on PATH that replays it, and the API stub with the arms'
    evaluator ACTIVE; returns helpers to script them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "firectl"
    source = (Path(__file__).parent / "fake_firectl.py").read_text()
    exe.write_text(f"#!{sys.executable}\n{source}")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    scenario = tmp_path / "scenario"
    (scenario / "datasets").mkdir(parents=True)
    log = tmp_path / "firectl.log"
    auth_log = tmp_path / "firectl-auth.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("FAKE_FIRECTL_DIR", str(scenario))
    monkeypatch.setenv("FAKE_FIRECTL_LOG", str(log))
    monkeypatch.setenv("FAKE_FIRECTL_AUTH_LOG", str(auth_log))
    monkeypatch.setenv("FIREWORKS_API_KEY", SENTINEL)
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", "acct-test")
    monkeypatch.delenv("RFTLAB_FIRECTL", raising=False)
    monkeypatch.setattr("rftlab.cli.fireworks._sleep", lambda seconds: None)  # CLI polls never wait in tests
    api = FireworksApiStub(account="acct-test").__enter__()  # the evaluator check's API (the SDK reads it)
    request.addfinalizer(lambda: api.__exit__(None, None, None))
    monkeypatch.setenv("FIREWORKS_BASE_URL", api.base_url)
    api.states[evaluator_id(spec("A"), "acct-test")] = "ACTIVE"  # every spectrum arm shares this code

    class Fake:
        dir = scenario
        evaluators = api

        @staticmethod
        def reset_replies():
            for p in [*scenario.glob("job_get.*"), *scenario.glob(".count.*")]:
                p.unlink()

        @staticmethod
        def calls() -> list[list[str]]:
            return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

        @staticmethod
        def auth() -> list[dict]:
            """Per call: where the fake found the key (``argv`` or ``auth.ini``), the key, file modes."""
            return (
                [json.loads(line) for line in auth_log.read_text().splitlines()] if auth_log.exists() else []
            )

        @staticmethod
        def job_replies(*bodies):
            for i, body in enumerate(bodies):
                if isinstance(body, dict):
                    (scenario / f"job_get.{i}.json").write_text(json.dumps(body))
                elif body.startswith("ERR:"):
                    (scenario / f"job_get.{i}.err").write_text(body[4:])
                else:
                    (scenario / f"job_get.{i}.txt").write_text(body)

        @staticmethod
        def epoch_dataset(job_id, epoch, rows):
            path = scenario / "datasets" / f"{rollout_dataset_id(job_id, epoch)}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    return Fake


def job(state, epoch=None, percent=None, accel=None, message=None):
    body = {"state": f"JOB_STATE_{state}", "jobProgress": {"epoch": epoch, "percent": percent}}
    if accel is not None:
        body["acceleratorSeconds"] = {"NVIDIA_H100_80GB": str(accel)}
    if message:
        body["status"] = {"code": "ERROR", "message": message}
    return body


def eval_rows(epoch, groups=3, candidates=4):
    """Rows shaped like a downloaded EvaluationRow file, with rewards that vary within some groups."""
    rows = []
    for g in range(groups):
        for c in range(candidates):
            score = 0.0 if g == 0 else round(0.1 * epoch + 0.05 * c + 0.01 * g, 6)  # group 0: zero variance
            rows.append(
                {
                    "messages": [{"role": "system", "content": "x"}],
                    "input_metadata": {"row_id": f"sc1_{g}"},
                    "evaluation_result": {
                        "score": score,
                        "metrics": {"memory_gain": {"score": score / 3}, "mean_occ": {"score": score / 2}},
                    },
                }
            )
    return rows


def spec(name="A", context=32768, **changes):
    """An arm spec of data/specs with ``changes``; its Fireworks section gets ``max_context_length``
    ``context`` (the shipped specs leave it unset, and the default 8192 cannot hold a 12-scan episode)."""
    s = load_arm_spec(REPO / "data" / "specs" / f"spectrum_{name}.json")
    if s.fireworks is not None and context is not None:
        changes.setdefault("fireworks", s.fireworks.model_copy(update={"max_context_length": context}))
    return s.model_copy(update=changes) if changes else s


def launcher(**kw):
    rows = [{"messages": [{"role": "system", "content": "s"}], "input_metadata": {"row_id": "r0"}}]
    return FireworksLauncher(
        preflight=kw.pop("preflight", lambda s: Passed()), dataset_rows=lambda s: rows, **kw
    )


def no_sentinel_under(path: Path):
    escaped = json.dumps(SENTINEL)[1:-1]
    ascii_escaped = json.dumps(SENTINEL, ensure_ascii=True)[1:-1]
    for f in path.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            for form in (SENTINEL, escaped, ascii_escaped):
                assert form.encode() not in data, f"key leaked into {f}"


# ------------------------------------------------------------------------------------ argv builders


def test_job_flags_carry_every_hyperparameter_of_the_spec():
    s = spec("C")
    flags = job_create_flags(s, account_id="acct")
    pairs = dict(zip(flags[::2], flags[1::2], strict=True))
    assert pairs["--base-model"] == "accounts/fireworks/models/qwen3-1p7b"
    assert pairs["--dataset"] == "rftlab-spectrum-scafweak48"
    assert pairs["--evaluator"] == "accounts/acct/evaluators/test-spectrum-turn-test-spectrum-turn"
    assert float(pairs["--learning-rate"]) == s.learning_rate == 1e-4
    assert float(pairs["--temperature"]) == 1.2
    assert pairs["--epochs"] == "12" and pairs["--response-candidates-count"] == "12"
    assert pairs["--max-output-tokens"] == "4096" and pairs["--max-concurrent-rollouts"] == "96"


def test_argv_spellings_and_json_flag():
    fc = Firectl(account_id="acct", api_key="k-123456789", exe="firectl")
    assert fc.argv("rftj", "get", "j1") == [
        "firectl",
        "reinforcement-fine-tuning-job",
        "get",
        "j1",
        "-a",
        "acct",
        "-o",
        "json",
    ]  # fmt: skip  (the key travels in a private auth file, never on argv)
    on_argv = Firectl(account_id="acct", api_key="k-123456789", exe="firectl", key_via="argv")
    assert on_argv.argv("rftj", "get", "j1")[-4:] == ["--api-key", "k-123456789", "-o", "json"]
    old = Firectl(account_id="acct", exe="firectl", style="verb-noun")
    assert old.argv("rftj", "list")[:3] == ["firectl", "list", "reinforcement-fine-tuning-jobs"]
    assert "-o" not in old.argv("dataset", "download", "d", json_out=False)


def test_dry_run_prints_every_arm_without_any_key(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a dry run must create no run folder under the default root
    monkeypatch.setenv("FIREWORKS_API_KEY", SENTINEL)
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", "acct-dry")
    assert len(SPECS) == 8
    for path in SPECS:
        if load_arm_spec(path).fireworks is None:  # a local-only arm (D_cost)
            continue
        assert cli_main(["fireworks", "launch", str(path), "--dry-run", "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        s = load_arm_spec(path)
        dataset_cmd, upload_cmd, create_cmd = plan["commands"]
        assert dataset_cmd[1:3] == ["dataset", "create"] and dataset_cmd[3] == plan["dataset_id"]
        assert plan["dataset_id"].startswith(s.fireworks.dataset_id + "-")  # named by its rows' SHA-256
        assert upload_cmd[3:4] == ["upload"] and "--id" in upload_cmd and "--env-file" in upload_cmd
        assert create_cmd[create_cmd.index("--job-id") + 1] == job_id_for(s)
        assert create_cmd[create_cmd.index("--learning-rate") + 1] == repr(s.learning_rate)
        assert create_cmd[-2:] == ["-o", "json"]
        assert "--api-key" not in create_cmd and plan["key_via"] == "auth-file"  # the key is in no argv
        assert SENTINEL not in json.dumps(plan)
    assert not (tmp_path / "runs").exists()


def test_dry_run_text_is_copyable_shell(capsys):
    assert cli_main(["fireworks", "launch", str(SPECS[0]), "--dry-run", "--account-id", "acct"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0].startswith("# arm")
        and out[1].startswith("# firectl reads $FIREWORKS_API_KEY")
        and len(out) == 5
    )
    assert out[4].split()[1:3] == ["reinforcement-fine-tuning-job", "create"]
    assert "--api-key" not in "\n".join(out[2:])
    argv_cmd = [
        "fireworks",
        "launch",
        str(SPECS[0]),
        "--dry-run",
        "--account-id",
        "acct",
        "--key-via",
        "argv",
    ]
    assert cli_main(argv_cmd) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and '--api-key "$FIREWORKS_API_KEY"' in out[3]


# -------------------------------------------------------------------------------- launch and poll


def test_launch_poll_complete_records_every_epoch(fake, tmp_path):
    s = spec("A", epochs=3)
    job_id = job_id_for(s)
    fake.job_replies(
        job("CREATING"), job("RUNNING", 0, 5), job("RUNNING", 1, 40, 100), job("RUNNING", 2, 70, 200),
        job("COMPLETED", 2, 100, 300),
    )  # fmt: skip
    per_epoch = {k: eval_rows(k) for k in range(3)}
    for k, rows in per_epoch.items():
        fake.epoch_dataset(job_id, k, rows)
    root = tmp_path / "runs"
    lau = launcher()
    ref = lau.launch(s, root=root)
    result = lau.watch(ref, every=0, sleep=lambda _: None)
    assert result.status.state == "completed" and result.epochs_recorded == [0, 1, 2]
    run = load_run(ref.path)
    assert run.record.status == "finished" and run.record.provider["job_id"] == job_id
    metrics = run.metrics()
    assert [m["epoch"] for m in metrics] == [0, 1, 2]
    for m in metrics:  # independent recomputation from the canned rows
        rows = per_epoch[m["epoch"]]
        scores = [r["evaluation_result"]["score"] for r in rows]
        assert m["reward"] == pytest.approx(sum(scores) / len(scores))
        assert m["memory_gain"] == pytest.approx(sum(s_ / 3 for s_ in scores) / len(scores))
        assert m["frac_zero_var_groups"] == pytest.approx(1 / 3)
        assert m["rollouts"] == 12 and m["groups"] == 3
    assert len(run.rollouts(1)) == 12
    snapshots = (ref.path / "provider" / "job_snapshots.jsonl").read_text().splitlines()
    assert len(snapshots) == result.polls == 5
    calls = fake.calls()
    assert not any("--api-key" in c or any(SENTINEL in a for a in c) for c in calls)  # never on argv ...
    auth = fake.auth()
    assert len(auth) == len(calls) and {a["source"] for a in auth} == {"auth.ini"}
    assert {a["key"] for a in auth} == {SENTINEL} and {a["account"] for a in auth} == {"acct-test"}
    assert {(a["file_mode"], a["dir_mode"], a["home_mode"]) for a in auth} == {("0o600", "0o700", "0o700")}
    no_sentinel_under(root)  # ... the real key reaches firectl, and nothing written to the run folder has it
    assert not any("cancel" in c for c in calls)


def test_relaunch_reuses_and_never_creates_a_second_job(fake, tmp_path):
    s = spec("B", epochs=1)
    fake.job_replies(job("COMPLETED", 0, 100))
    fake.epoch_dataset(job_id_for(s), 0, eval_rows(0))
    lau = launcher()
    ref = lau.launch(s, root=tmp_path / "runs")
    assert lau.launch(s, root=tmp_path / "runs").path == ref.path  # unfinished: resumed, same job
    lau.watch(ref, every=0, sleep=lambda _: None)
    assert lau.launch(s, root=tmp_path / "runs").path == ref.path  # finished: reused
    creates = [c for c in fake.calls() if c[1] == "create" and c[0] != "dataset"]
    assert len(creates) == 1


def test_failed_job_marks_the_run_failed_and_keeps_its_epochs(fake, tmp_path):
    s = spec("A", epochs=4)
    fake.job_replies(job("RUNNING", 1, 30), job("FAILED", 1, 30, message="Internal error"))
    fake.epoch_dataset(job_id_for(s), 0, eval_rows(0))
    lau = launcher()
    ref = lau.launch(s, root=tmp_path / "runs")
    result = lau.watch(ref, every=0, sleep=lambda _: None)
    run = load_run(ref.path)
    assert result.status.state == "failed" and "Internal error" in run.record.error
    assert run.record.status == "failed" and [m["epoch"] for m in run.metrics()] == [0]


def test_cli_poll_exit_codes_failed_and_completed(fake, tmp_path, capsys):
    s = spec("A", epochs=1)
    fake.job_replies(job("FAILED", 0, 0, message="dataset rejected"))
    ref = launcher().launch(s, root=tmp_path / "runs")
    assert cli_main(["fireworks", "poll", str(ref.path), "--every", "5", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == "failed" and "dataset rejected" in out["message"] and out["exit_code"] == 1


def test_stall_stops_without_cancelling_and_resume_finishes(fake, tmp_path):
    s = spec("A", epochs=2)
    fake.job_replies(job("RUNNING", 0, 0))  # repeats forever: no progress
    lau = launcher()
    ref = lau.launch(s, root=tmp_path / "runs")
    now = [0.0]

    def sleep(seconds):
        now[0] += 60.0

    result = lau.watch(ref, every=60, stall_after=600, clock=lambda: now[0], sleep=sleep)
    assert (
        result.stalled and "NOT cancelled" in result.status.message and "control job" in result.status.message
    )
    assert load_run(ref.path).record.status == "running"
    assert not any("cancel" in c for c in fake.calls())
    # the job moves again: a second watch picks up and finishes
    fake.reset_replies()
    fake.job_replies(job("COMPLETED", 1, 100, 50))
    for k in range(2):
        fake.epoch_dataset(job_id_for(s), k, eval_rows(k))
    assert lau.watch(ref, every=0, sleep=lambda _: None).status.state == "completed"
    assert [m["epoch"] for m in load_run(ref.path).metrics()] == [0, 1]


def test_malformed_json_and_errors_stop_cleanly_then_resume(fake, tmp_path):
    s = spec("A", epochs=1)
    fake.job_replies("Banner\n{not json", "ERR:transient 503\n")
    lau = launcher()
    ref = lau.launch(s, root=tmp_path / "runs")
    result = lau.watch(ref, every=0, max_errors=3, sleep=lambda _: None)
    assert result.status.state == "unknown" and "503" in result.status.message
    assert load_run(ref.path).record.status == "running"
    calls_log = (ref.path / "provider" / "firectl_calls.jsonl").read_text().splitlines()
    assert any(json.loads(line)["returncode"] == 1 for line in calls_log)
    fake.reset_replies()
    fake.job_replies("Some banner line\n" + json.dumps(job("COMPLETED", 0, 100)))
    fake.epoch_dataset(job_id_for(s), 0, eval_rows(0))
    assert lau.watch(ref, every=0, sleep=lambda _: None).status.state == "completed"


def test_interrupted_watch_resumes_without_duplicating_epochs(fake, tmp_path):
    s = spec("A", epochs=3)
    fake.job_replies(job("RUNNING", 1, 30), job("RUNNING", 2, 60), job("COMPLETED", 2, 100))
    for k in range(3):
        fake.epoch_dataset(job_id_for(s), k, eval_rows(k))
    lau = launcher()
    ref = lau.launch(s, root=tmp_path / "runs")

    def interrupt(_):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lau.watch(ref, every=1, sleep=interrupt)
    assert [m["epoch"] for m in load_run(ref.path).metrics()] == [0]
    lau.watch(ref, every=0, sleep=lambda _: None)
    assert [m["epoch"] for m in load_run(ref.path).metrics()] == [0, 1, 2]


def test_chunked_epoch_datasets_are_concatenated(fake, tmp_path):
    s = spec("A", epochs=1)
    fake.job_replies(job("COMPLETED", 0, 100))
    job_id = job_id_for(s)
    rows = eval_rows(0)
    for n, part in enumerate((rows[:5], rows[5:])):
        (fake.dir / "datasets" / f"{rollout_dataset_id(job_id, 0)}-chunk-{n}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in part)
        )
    lau = launcher()
    ref = lau.launch(s, root=tmp_path / "runs")
    lau.watch(ref, every=0, sleep=lambda _: None)
    assert load_run(ref.path).metrics()[0]["rollouts"] == len(rows)


def test_nonzero_exit_on_create_is_a_clear_error_and_relaunch_retries(fake, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("rftlab.launch.fireworks._default_preflight", lambda s: Passed())
    s_path = tmp_path / "spec.json"
    s_path.write_text(json.dumps(spec("A", epochs=1).to_dict()))
    (fake.dir / "create.err").write_text("Error: quota exceeded (429)\n")
    code = cli_main(["fireworks", "launch", str(s_path), "--root", str(tmp_path / "runs"), "--json"])
    err = capsys.readouterr().err
    assert code == 2 and "quota exceeded" in err and SENTINEL not in err
    (failed_dir,) = (tmp_path / "runs" / "spectrum_memory" / "A").iterdir()
    failed = load_run(failed_dir).record  # the failed launch is recorded as failed, with its reason
    assert failed.status == "failed" and "quota exceeded" in failed.error and SENTINEL not in failed.error
    (fake.dir / "create.err").unlink()
    ref = launcher().launch(spec("A", epochs=1), root=tmp_path / "runs")  # a new run, the same job id
    assert ref.path != failed_dir
    assert load_run(ref.path).record.provider["job_id"] == job_id_for(spec("A", epochs=1))
    no_sentinel_under(tmp_path / "runs")


def test_failed_preflight_creates_nothing(fake, tmp_path):
    with pytest.raises(LaunchRefused, match="band_per_row"):
        launcher(preflight=lambda s: Failed()).launch(spec("C"), root=tmp_path / "runs")
    assert fake.calls() == []
    (run_dir,) = (tmp_path / "runs" / "spectrum_memory" / "C").iterdir()
    assert load_run(run_dir).record.status == "failed"


def test_existing_job_with_other_settings_is_refused(fake, tmp_path):
    s = spec("A", epochs=1)
    lau = launcher()
    lau.launch(s, root=tmp_path / "one")  # creates the job on the fake
    changed_lr = s.model_copy(update={"learning_rate": 3e-4})
    fake.job_replies(
        {"state": "JOB_STATE_RUNNING", "trainingConfig": {"epochs": 1, "learningRate": 1e-4},
         "inferenceParameters": {"temperature": 1.2, "responseCandidatesCount": 12}}
    )  # fmt: skip
    # same job id only if the spec hash matches; force the collision by reusing the id
    state = json.loads((fake.dir / "state.json").read_text())
    state["job"].append(job_id_for(changed_lr))
    (fake.dir / "state.json").write_text(json.dumps(state))
    with pytest.raises(LaunchRefused, match="learningRate"):
        lau.launch(changed_lr, root=tmp_path / "two")


def test_missing_key_or_account_refuses_before_any_call(fake, tmp_path, monkeypatch):
    monkeypatch.delenv("FIREWORKS_API_KEY")
    with pytest.raises(LaunchRefused, match="FIREWORKS_API_KEY is not set"):
        launcher().launch(spec("A"), root=tmp_path / "runs")
    monkeypatch.setenv("FIREWORKS_API_KEY", SENTINEL)
    monkeypatch.delenv("FIREWORKS_ACCOUNT_ID")
    with pytest.raises(LaunchRefused, match="account id"):
        launcher().launch(spec("A"), root=tmp_path / "runs")
    assert fake.calls() == [] and not (tmp_path / "runs").exists()


def test_local_only_spec_is_refused(tmp_path):
    s = spec("A").model_copy(update={"fireworks": None})
    with pytest.raises(LaunchRefused, match="local backend"):
        launcher().plan(s)


# ------------------------------------------------------------------------------ metrics and upload


def test_epoch_metrics_tolerates_bad_rows():
    from rftlab.launch.fireworks.poll import _parse_rows, _rollout_record

    text = "\n".join(
        [
            json.dumps({"input_metadata": {"row_id": "a"}, "evaluation_result": {"score": 1.0}}),
            "{truncated",
            json.dumps(
                {
                    "input_metadata": {"row_id": "a"},
                    "evaluation_result": {"score": 0.0, "metrics": {"m": {"score": float("nan")}, "k": 2}},
                }
            ),  # fmt: skip
            json.dumps([1, 2]),
            "",
        ]
    )
    records = [_rollout_record(r, i) for i, r in enumerate(_parse_rows(text))]
    m = epoch_metrics(records)
    assert m["rollouts"] == 4 and m["rollouts_without_score"] == 2
    assert m["reward"] == 0.5 and m["k"] == 2.0 and "m" not in m
    assert m["group_reward_sd"] == pytest.approx(math.sqrt(0.5))


def test_upload_evaluator_stages_a_clean_folder(monkeypatch, tmp_path):
    from rftlab.launch.fireworks import upload_evaluator

    monkeypatch.setenv("FIREWORKS_API_KEY", SENTINEL)
    monkeypatch.setenv("SOME_OTHER_TOKEN", "should-not-pass")
    seen = {}

    class Proc:
        returncode, stdout, stderr = 0, f"uploaded with {SENTINEL}", ""

    def runner(argv, cwd, env, **kw):
        staged = Path(cwd)
        seen.update(argv=argv, env=env, files={p.name for p in staged.iterdir()})
        seen["requirements"] = (staged / "requirements.txt").read_text()
        seen["has_env"] = (staged / ".env").exists()
        seen["entry_exists"] = (staged / "rftlab" / "launch" / "fireworks" / "__init__.py").exists()
        return Proc()

    record = upload_evaluator(spec("A"), "acct", runner=runner, lookup=lambda account, ev: None)
    assert seen["argv"][1:4] == ["-m", "rftlab.launch.ep_upload", "upload"]
    assert seen["argv"][seen["argv"].index("--id") + 1] == evaluator_id(spec("A"), "acct")
    assert evaluator_id(spec("A"), "acct").startswith("test-spectrum-turn-test-spectrum-turn-")
    assert "--force" not in seen["argv"]  # a missing evaluator is created, never deleted first
    assert "eval-protocol==0.3.33" in seen["requirements"] and not seen["has_env"] and seen["entry_exists"]
    assert set(seen["env"]) <= {"PATH", "HOME", "FIREWORKS_API_KEY", "FIREWORKS_ACCOUNT_ID",
                                "LITELLM_LOCAL_MODEL_COST_MAP"}  # fmt: skip
    assert SENTINEL not in json.dumps(record)
