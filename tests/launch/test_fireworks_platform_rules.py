"""Issue 32 on the firectl path: the launcher against the strict fake firectl (tests/launch/fake_firectl.py)
and the fireworks-ai SDK against the loopback API stub (tests/launch/fireworks_api_stub.py).

A failed job resumed and one relaunched as a new attempt; an evaluator that is missing, failed its build or
is still building; W&B settings firectl would refuse; an epoch dataset missing a chunk; an ARCHIVED job;
paginated ``dataset list``; the strict fake's own refusals; and the new explicit job settings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.cli import main as cli_main
from rftlab.launch.firectl import Firectl, job_create_flags, job_id_for, output_model_for, rollout_dataset_id
from rftlab.launch.fireworks import FireworksLauncher, LaunchRefused, evaluator_id
from rftlab.launch.specs import JOB_DEFAULTS, FireworksJobSettings
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.runs import load_run

sys.path.insert(0, str(Path(__file__).parent))
from fake_firectl_env import install_fake_firectl  # noqa: E402
from fireworks_api_stub import FireworksApiStub  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KEY = "fw-platform-rules-key-0123456789"
ACCOUNT = "acct-rules"


class Passed:
    passed = True

    def to_dict(self):
        return {"passed": True, "checks": []}


def spec(epochs=2, rows=2, k=2, **fw_changes):
    s = load_arm_spec(REPO / "data" / "specs" / "spectrum_A.json")
    fw = s.fireworks.model_copy(update={"max_context_length": 32768, **fw_changes})
    return s.model_copy(update={"epochs": epochs, "rows": rows, "response_candidates": k, "fireworks": fw})


@pytest.fixture
def fake(tmp_path, monkeypatch, request):
    installed = install_fake_firectl(tmp_path, monkeypatch)
    scenario = installed.dir
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", ACCOUNT)
    api = FireworksApiStub(account=ACCOUNT).__enter__()
    request.addfinalizer(lambda: api.__exit__(None, None, None))
    monkeypatch.setenv("FIREWORKS_BASE_URL", api.base_url)
    api.states[evaluator_id(spec(), ACCOUNT)] = "ACTIVE"

    class Fake:
        dir = scenario
        evaluators = api

        calls = staticmethod(installed.calls)

        @staticmethod
        def replies(*bodies, prefix="job_get"):
            for i, body in enumerate(bodies):
                (scenario / f"{prefix}.{i}.json").write_text(json.dumps(body))

        @staticmethod
        def epoch(job_id, k, groups=2, candidates=2, chunks=None):
            rows = [{"input_metadata": {"row_id": f"r{g}"}, "evaluation_result": {"score": 0.1 * c + k}}
                    for g in range(groups) for c in range(candidates)]  # fmt: skip
            base = rollout_dataset_id(job_id, k)
            parts = {base: rows} if chunks is None else {f"{base}-chunk-{n}": rows[n : n + 1] for n in chunks}
            for name, part in parts.items():
                (scenario / "datasets" / f"{name}.jsonl").write_text(
                    "".join(json.dumps(r) + "\n" for r in part)
                )

    return Fake


def job(state, epoch=None, percent=None, message=None):
    body = {"state": f"JOB_STATE_{state}", "jobProgress": {"epoch": epoch, "percent": percent}}
    if message:
        body["status"] = {"code": "RESOURCE_EXHAUSTED", "message": message}
    return body


def launcher(**kw):
    kw.setdefault("sleep", lambda seconds: None)
    return FireworksLauncher(preflight=lambda s: Passed(), **kw)


def creates(fake):
    return [c for c in fake.calls() if c[1] == "create"]


def failed_first_run(fake, tmp_path, s):
    """A launch whose job then FAILS (RESOURCE_EXHAUSTED) after epoch 0; returns the failed run."""
    fake.replies(job("RUNNING", 1, 40), job("FAILED", 1, 40, message="RESOURCE_EXHAUSTED: no capacity"))
    fake.epoch(job_id_for(s), 0)
    ref = launcher().launch(s, root=tmp_path / "runs")
    result = launcher().watch(ref, every=0, sleep=lambda _: None)
    assert result.status.state == "failed" and load_run(ref.path).record.status == "failed"
    return ref


# ------------------------------------------------------------------------------------- item 1


def test_a_failed_job_stops_a_plain_relaunch_and_names_both_ways_out(fake, tmp_path):
    s = spec()
    failed_first_run(fake, tmp_path, s)
    with pytest.raises(LaunchRefused) as refused:
        launcher().launch(s, root=tmp_path / "runs")
    message = str(refused.value)
    assert "ended FAILED" in message and "RESOURCE_EXHAUSTED" in message
    assert "--resume" in message and "--new-attempt" in message and job_id_for(s, 2) in message
    assert len([c for c in creates(fake) if c[0] != "dataset"]) == 1  # the dead job was not reused or re-made
    assert not any(c[1] == "resume" for c in fake.calls())


def test_a_failed_job_is_resumed_and_polled_in_the_same_run(fake, tmp_path):
    s = spec()
    failed = failed_first_run(fake, tmp_path, s)
    fake.replies(job("FAILED", 1, 40), job("RUNNING", 1, 60), job("COMPLETED", 2, 100), prefix="resumed_get")
    fake.epoch(job_id_for(s), 1)
    lau = launcher()
    ref = lau.launch(s, root=tmp_path / "runs", failed_job="resume")
    assert ref.path != failed.path
    assert [c for c in fake.calls() if c[1] == "resume"] == [["reinforcement-fine-tuning-job", "resume"]]
    provider = load_run(ref.path).record.provider
    assert provider["job_id"] == job_id_for(s) and provider["attempt"] == 1
    (earlier,) = provider["attempts"]
    assert earlier["state"] == "FAILED" and "RESOURCE_EXHAUSTED" in earlier["status"]
    assert earlier["run_dir"] == str(failed.path)
    # the first poll after the resume still reads FAILED: within the grace it is pending, not the end
    result = lau.watch(ref, every=0, sleep=lambda _: None)
    assert result.status.state == "completed" and result.epochs_recorded == [0, 1]
    assert load_run(ref.path).record.status == "finished"
    assert (ref.path / "provider" / "failed_attempt.json").exists()


def test_a_failed_job_gets_a_new_attempt_in_a_new_linked_run(fake, tmp_path, capsys):
    s = spec()
    failed = failed_first_run(fake, tmp_path, s)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(s.to_dict()))
    monkey_launcher = launcher()
    import rftlab.cli.fireworks as cli_fw

    original = cli_fw._launcher
    cli_fw._launcher = lambda args: monkey_launcher
    try:
        code = cli_main(["fireworks", "launch", str(path), "--root", str(tmp_path / "runs"), "--new-attempt"])
    finally:
        cli_fw._launcher = original
    assert code == 0, capsys.readouterr().err
    (run_dir,) = [p for p in (tmp_path / "runs" / "spectrum_memory" / "A").iterdir() if p != failed.path]
    provider = load_run(run_dir).record.provider
    assert provider["job_id"] == job_id_for(s, 2) and provider["attempt"] == 2
    assert provider["previous_attempt"]["job_id"] == job_id_for(s)
    assert provider["previous_attempt"]["run_dir"] == str(failed.path)
    assert provider["output_model"] == output_model_for(s, 2) != output_model_for(s, 1)
    job_creates = [c for c in creates(fake) if c[0] != "dataset"]
    assert len(job_creates) == 2  # the new attempt is a second job


def test_resume_of_a_cancelled_job_is_refused_with_the_reason(fake, tmp_path):
    s = spec()
    fake.replies(job("CANCELLED", 0, 5))
    ref = launcher().launch(s, root=tmp_path / "runs")
    launcher().watch(ref, every=0, sleep=lambda _: None)
    with pytest.raises(LaunchRefused, match="resume for FAILED jobs only"):
        launcher().launch(s, root=tmp_path / "runs", failed_job="resume")
    assert not any(c[1] == "resume" for c in fake.calls())


# ------------------------------------------------------------------------------------- item 3


@pytest.mark.parametrize(
    ("state", "message"),
    [(None, "does not exist on Fireworks"), ("BUILD_FAILED", r"failed its build \(pip install failed")],
)
def test_a_missing_or_failed_evaluator_is_refused_before_any_dataset_or_job(fake, tmp_path, state, message):
    s = spec()
    ev = evaluator_id(s, ACCOUNT)
    if state is None:
        del fake.evaluators.states[ev]
    else:
        fake.evaluators.states[ev] = state
    with pytest.raises(LaunchRefused, match=message):
        launcher().launch(s, root=tmp_path / "runs")
    assert creates(fake) == []  # neither the dataset nor the job
    assert ("GET", f"/v1/accounts/{ACCOUNT}/evaluators/{ev}") in fake.evaluators.calls
    (run_dir,) = (tmp_path / "runs" / "spectrum_memory" / "A").iterdir()
    assert load_run(run_dir).record.status == "failed"


def test_a_building_evaluator_is_waited_for_then_used(fake, tmp_path):
    s = spec()
    ev = evaluator_id(s, ACCOUNT)
    fake.evaluators.states[ev] = ["BUILDING", "BUILDING", "ACTIVE"]
    slept = []
    ref = launcher(sleep=slept.append, evaluator_poll=7.0).launch(s, root=tmp_path / "runs")
    assert slept == [7.0, 7.0]
    assert load_run(ref.path).record.provider["evaluator"] == f"accounts/{ACCOUNT}/evaluators/{ev}"


def test_an_evaluator_still_building_at_the_deadline_is_refused(fake, tmp_path):
    s = spec()
    fake.evaluators.states[evaluator_id(s, ACCOUNT)] = "BUILDING"
    now = [0.0]
    lau = launcher(
        clock=lambda: now[0], sleep=lambda dt: now.__setitem__(0, now[0] + dt), evaluator_timeout=30
    )
    with pytest.raises(LaunchRefused, match="still BUILDING after 30 s"):
        lau.launch(s, root=tmp_path / "runs")
    assert creates(fake) == []


# ------------------------------------------------------------------------------------- item 4


@pytest.mark.parametrize(
    ("fw", "key", "missing"),
    [
        ({"wandb_project": "p"}, "wandb-key-0123456789", "fireworks.wandb_entity"),
        ({"wandb_entity": "e"}, "wandb-key-0123456789", "fireworks.wandb_project"),
        ({"wandb_project": "p", "wandb_entity": "e"}, None, "$WANDB_API_KEY"),
    ],
)
def test_wandb_settings_firectl_would_refuse_stop_before_any_platform_call(
    fake, tmp_path, monkeypatch, fw, key, missing
):
    if key:
        monkeypatch.setenv("WANDB_API_KEY", key)
    with pytest.raises(LaunchRefused, match=f"missing: {missing.replace('$', '[$]')}"):
        launcher().launch(spec(**fw), root=tmp_path / "runs")
    assert fake.calls() == [] and fake.evaluators.calls == []
    assert not (tmp_path / "runs").exists()


def test_complete_wandb_settings_pass_the_strict_fake(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "wandb-key-0123456789")
    ref = launcher().launch(spec(wandb_project="p", wandb_entity="e"), root=tmp_path / "runs")
    job_json = json.loads((ref.path / "provider" / "job_create.json").read_text())
    assert job_json["wandbConfig"] == {"enabled": True, "project": "p", "entity": "e"}
    assert "wandb-key-0123456789" not in (ref.path / "provider" / "firectl_calls.jsonl").read_text()


# ------------------------------------------------------------------------------------- item 7


def test_an_epoch_missing_a_chunk_is_recorded_and_marked_incomplete(fake, tmp_path):
    s = spec(epochs=1)
    fake.replies(job("COMPLETED", 1, 100))
    fake.epoch(job_id_for(s), 0, chunks=[0, 2])  # chunk 1 never appeared
    for n in range(60):  # other datasets fill the first listing pages: the chunks are on a later one
        (fake.dir / "datasets" / f"aaa-other-{n:03d}.jsonl").write_text("{}\n")
    lau = launcher()
    ref = lau.launch(s, root=tmp_path / "runs")
    result = lau.watch(ref, every=0, sleep=lambda _: None)
    assert result.done and result.incomplete_epochs == [0] and "incomplete" in result.status.message
    gaps = load_run(ref.path).record.provider["incomplete_epochs"]["0"]
    assert gaps["missing_chunks"] == [1] and gaps["chunks"] == [0, 2]
    assert gaps["rollouts"] == 2 and gaps["expected_rollouts"] == 4
    assert load_run(ref.path).metrics()[0]["rollouts"] == 2  # what arrived is kept, never dropped


def test_a_complete_epoch_is_not_marked(fake, tmp_path):
    s = spec(epochs=1)
    fake.replies(job("COMPLETED", 1, 100))
    fake.epoch(job_id_for(s), 0)
    lau = launcher()
    ref = lau.launch(s, root=tmp_path / "runs")
    assert lau.watch(ref, every=0, sleep=lambda _: None).incomplete_epochs == []
    assert "incomplete_epochs" not in load_run(ref.path).record.provider


def test_dataset_list_reads_every_page(fake):
    for n in range(130):
        (fake.dir / "datasets" / f"ds-{n:03d}.jsonl").write_text("{}\n")
    fc = Firectl(account_id=ACCOUNT, api_key=KEY)
    names = [d["name"].rsplit("/", 1)[-1] for d in fc.dataset_list()]
    assert names == [f"ds-{n:03d}" for n in range(130)]
    pages = [c for c in fake.calls() if c[1] == "list"]
    assert len(pages) == 1  # 200 a page: one call; the fake's default of 50 would need three


# ------------------------------------------------------------------------------------- item 8


def test_an_archived_job_ends_the_poll_instead_of_stalling(fake, tmp_path, capsys):
    s = spec()
    fake.replies(job("RUNNING", 1, 50), job("ARCHIVED", 1, 50))
    fake.epoch(job_id_for(s), 0)
    ref = launcher().launch(s, root=tmp_path / "runs")
    assert cli_main(["fireworks", "poll", str(ref.path), "--every", "5", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == "failed" and out["stalled"] is False and out["epochs_recorded"] == [0]
    assert "ARCHIVED" in load_run(ref.path).record.error


def test_run_json_records_versions_and_every_explicit_setting(fake, tmp_path):
    s = spec()
    ref = launcher().launch(s, root=tmp_path / "runs")
    provider = load_run(ref.path).record.provider
    assert provider["firectl_version"].startswith("firectl version 0.0.0-fake")
    from importlib.metadata import version

    assert provider["eval_protocol_version"] == version("eval-protocol")
    assert provider["job_settings"] == {**JOB_DEFAULTS, "max_context_length": 32768}
    (create,) = [json.loads(line) for line in (fake.dir.parent / "argv.log").read_text().splitlines()
                 if json.loads(line)[:2] == ["reinforcement-fine-tuning-job", "create"]]  # fmt: skip
    for flag in ("--max-context-length", "--top-k", "--top-p", "--rl-loss-method", "--rl-kl-beta",
                 "--chunk-size", "--batch-size", "--lora-rank"):  # fmt: skip
        assert flag in create
    assert create[create.index("--output-model") + 1] == f"rftlab-spectrum-a-{s.sha256()[:8]}"


def test_a_zero_learning_rate_is_refused_before_any_call(fake, tmp_path):
    with pytest.raises(LaunchRefused, match="proto3"):
        launcher().launch(spec().model_copy(update={"learning_rate": 0.0}), root=tmp_path / "runs")
    assert fake.calls() == []


def test_the_default_context_length_cannot_hold_a_twelve_scan_episode(fake, tmp_path):
    s = spec(max_context_length=None)
    with pytest.raises(LaunchRefused, match="context_length_holds_episode") as refused:
        launcher().launch(s, root=tmp_path / "runs")
    assert "> max_context_length 8192" in str(refused.value) and creates(fake) == []


# ------------------------------------------------------------------------------ the strict fake


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            [
                "reinforcement-fine-tuning-job",
                "create",
                "--job-id",
                "j",
                "--dataset",
                "d",
                "--evaluator",
                "e",
                "--max-tokens",
                "5",
            ],
            "Error: unknown flag: --max-tokens",
        ),  # fmt: skip
        (["reinforcement-fine-tuning-job", "resume", "j", "-o", "json"], "Error: unknown shorthand flag: -o"),
        (["dataset", "download", "d", "-o", "json"], "Error: unknown shorthand flag: -o"),
        (
            [
                "reinforcement-fine-tuning-job",
                "create",
                "--job-id",
                "j",
                "--dataset",
                "d",
                "--evaluator",
                "e",
                "--epochs",
                "two",
            ],
            'Error: invalid argument "two" for "--epochs"',
        ),  # fmt: skip
        (
            [
                "reinforcement-fine-tuning-job",
                "create",
                "--job-id",
                "j",
                "--dataset",
                "d",
                "--evaluator",
                "e",
                "--wandb",
                "--wandb-project",
                "p",
            ],
            "Error: --wandb-api-key, --wandb-entity required",
        ),  # fmt: skip
    ],
)
def test_the_fake_refuses_what_firectl_refuses(fake, argv, error):
    import subprocess

    res = subprocess.run(["firectl", *argv, "--api-key", KEY], capture_output=True, text=True, check=False)
    assert res.returncode == 1 and res.stderr.startswith(error)


# --------------------------------------------------------------------------- the spec fields


def test_each_new_setting_is_validated_with_its_documented_range():
    base = {"dataset_id": "d", "evaluator": "accounts/<acct>/evaluators/e", "output_model": "m"}
    for bad in ({"top_k": 101}, {"top_p": 1.5}, {"lora_rank": 12}, {"lora_rank": 256}, {"chunk_size": 0},
                {"kl_beta": -0.1}, {"loss_method": "ppo"}, {"max_context_length": 100},
                {"batch_size": True}):  # fmt: skip
        with pytest.raises(ValueError):
            FireworksJobSettings(**base, **bad)
    ok = FireworksJobSettings(
        **base, top_k=0, top_p=0.0, lora_rank=128, chunk_size=-1, loss_method="gspo-token"
    )
    assert ok.top_k == 0 and ok.chunk_size == -1


def test_an_unset_setting_leaves_the_spec_hash_alone():
    for path in sorted((REPO / "data" / "specs").glob("spectrum_*.json")):
        raw = json.loads(path.read_text())
        from rftlab.runs.hashing import spec_sha256

        assert load_arm_spec(path).sha256() == spec_sha256(raw)  # the shipped files' hashes are unchanged


@settings(max_examples=60, deadline=None)
@given(
    top_k=st.integers(-5, 120),
    top_p=st.floats(-0.5, 1.5, allow_nan=False),
    kl=st.floats(-0.5, 1.5, allow_nan=False),
    rank=st.integers(0, 300),
)
def test_any_setting_is_sent_exactly_or_refused_at_load(top_k, top_p, kl, rank):
    s = spec()
    data = {**s.to_dict()}
    data["fireworks"] = {
        **data["fireworks"],
        "top_k": top_k,
        "top_p": top_p,
        "kl_beta": kl,
        "lora_rank": rank,
    }
    valid = 0 <= top_k <= 100 and 0 <= top_p <= 1 and 0 <= kl <= 1 and rank in (4, 8, 16, 32, 64, 128)
    try:
        loaded = type(s).model_validate(data)
    except ValueError:
        assert not valid
        return
    assert valid
    flags = job_create_flags(loaded, account_id=ACCOUNT)
    value = dict(zip(flags[::2], flags[1::2], strict=True))
    assert int(value["--top-k"]) == top_k and float(value["--top-p"]) == top_p
    assert float(value["--rl-kl-beta"]) == kl and int(value["--lora-rank"]) == rank
    assert loaded.sha256() != s.sha256()  # a setting that is set enters the hash
