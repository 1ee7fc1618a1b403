"""Registered plans and the pre-registration audit (``rftlab.runs.registration``, ``rftlab.runs.plan_audit``),
on temporary git repositories built here: hashes against ``hashlib``/``git hash-object``, the registering
commit against a brute-force walk of the history, the amendment's diff applied back with ``git apply``,
and every way a contrast falls back to exploratory."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.cli import main
from rftlab.runs.plan_audit import NOT_AUDITABLE, RunEvidence, audit_contrasts, plan_checks
from rftlab.runs.registration import (
    RegistrationError,
    UnregisteredPlanError,
    amend_plan,
    find_version,
    first_commit_holding,
    git_blob_id,
    load_registry,
    register_plan,
    require_registered,
)
from rftlab.runs.store import RunStore, load_run

PLAN_V1 = b'{"plan": "p", "arms": ["A", "B"], "margin": 0.01}\n'
PLAN_V2 = b'{"plan": "p", "arms": ["A", "B", "C"], "margin": 0.01}\n'


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = dict(os.environ)
    if date is not None:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def commit(repo: Path, message: str, date: str = "2020-01-01T00:00:00Z") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message, date=date)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "test@example.org")
    git(root, "config", "user.name", "Test")
    (root / "README").write_text("a project\n")
    commit(root, "start", "2020-01-01T00:00:00Z")
    return root


def write_plan(repo: Path, data: bytes = PLAN_V1) -> Path:
    path = repo / "specs" / "plan.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path


def registered(
    repo: Path, data: bytes = PLAN_V1, date: str = "2020-01-02T00:00:00Z"
) -> tuple[Path, Path, str]:
    plan = write_plan(repo, data)
    sha = commit(repo, "the plan", date)
    reg = repo / "registrations"
    register_plan(plan, repo=repo, registry_dir=reg, note="test registration")
    commit(repo, "the plan's registration record", date)
    return plan, reg, sha


def evidence(
    name: str, commit_sha: str | None, plan: Path | bytes | None, started: str = "2021-01-01T00:00:00Z"
):
    digest = None
    if isinstance(plan, Path):
        digest = hashlib.sha256(plan.read_bytes()).hexdigest()
    elif isinstance(plan, bytes):
        digest = hashlib.sha256(plan).hexdigest()
    return RunEvidence(name, commit_sha, started, digest)


# ------------------------------------------------------------------------------------- registration


def test_registration_records_the_hash_the_blob_and_the_first_commit(repo):
    plan, reg, sha = registered(repo)
    commit(repo, "later work", "2020-02-01T00:00:00Z")  # the plan's bytes unchanged: still the first commit
    record = load_registry(reg / "plan.json")
    assert record is not None and record.plan == "plan" and len(record.versions) == 1
    v1 = record.versions[0]
    assert v1.sha256 == hashlib.sha256(PLAN_V1).hexdigest()
    assert v1.blob == git(repo, "hash-object", str(plan)) == git_blob_id(PLAN_V1)
    assert v1.commit == sha and v1.commit_time == "2020-01-02T00:00:00Z"
    assert v1.file == "specs/plan.json" and v1.note == "test registration" and v1.diff is None
    assert find_version(plan, reg) == ("plan", v1)


def test_the_first_commit_is_the_earliest_holding_the_bytes_found_by_brute_force(repo):
    plan = write_plan(repo, PLAN_V1)
    first = commit(repo, "v1", "2020-01-02T00:00:00Z")
    plan.write_bytes(PLAN_V2)
    commit(repo, "v2", "2020-01-03T00:00:00Z")
    plan.write_bytes(PLAN_V1)  # reverted: the same bytes again, in a later commit
    commit(repo, "back to v1", "2020-01-04T00:00:00Z")
    brute = []
    for c in git(repo, "rev-list", "--reverse", "HEAD").split():
        shown = subprocess.run(["git", "-C", str(repo), "show", f"{c}:specs/plan.json"], capture_output=True)
        if shown.returncode == 0 and shown.stdout == PLAN_V1:
            brute.append(c)
    assert brute[0] == first and len(brute) == 2
    assert first_commit_holding(repo, "specs/plan.json", git_blob_id(PLAN_V1))[0] == first
    assert first_commit_holding(repo, "specs/plan.json", git_blob_id(b"never committed")) is None


def test_uncommitted_bytes_are_refused_and_nothing_is_written(repo):
    plan = write_plan(repo)
    reg = repo / "registrations"
    with pytest.raises(RegistrationError, match="not committed yet; commit the plan first"):
        register_plan(plan, repo=repo, registry_dir=reg)
    assert not reg.exists()


def test_registering_again_or_a_changed_plan_is_refused(repo):
    plan, reg, _ = registered(repo)
    with pytest.raises(RegistrationError, match="registered already"):
        register_plan(plan, repo=repo, registry_dir=reg)
    plan.write_bytes(PLAN_V2)
    commit(repo, "add an arm", "2020-01-05T00:00:00Z")
    with pytest.raises(RegistrationError, match="is an amendment: rftlab plan amend .* --from 1"):
        register_plan(plan, repo=repo, registry_dir=reg)
    assert len(load_registry(reg / "plan.json").versions) == 1


def test_an_amendment_is_a_new_version_that_keeps_the_old_and_its_diff_applies(repo, tmp_path):
    plan, reg, _ = registered(repo)
    plan.write_bytes(PLAN_V2)
    with pytest.raises(RegistrationError, match="not committed yet"):
        amend_plan(plan, 1, repo=repo, registry_dir=reg)
    sha2 = commit(repo, "add an arm", "2020-01-05T00:00:00Z")
    with pytest.raises(RegistrationError, match=r"latest version \(v1\), not v2"):
        amend_plan(plan, 2, repo=repo, registry_dir=reg)
    v2 = amend_plan(plan, 1, repo=repo, registry_dir=reg, note="arm C added")
    versions = load_registry(reg / "plan.json").versions
    assert [v.version for v in versions] == [1, 2]
    assert versions[0].sha256 == hashlib.sha256(PLAN_V1).hexdigest()  # the old one kept
    assert v2.previous_sha256 == versions[0].sha256 and v2.commit == sha2
    assert v2.sha256 == hashlib.sha256(PLAN_V2).hexdigest()
    # the diff, applied to v1's bytes by git, gives v2's bytes
    work = tmp_path / "apply"
    (work / "specs").mkdir(parents=True)
    (work / "specs" / "plan.json").write_bytes(PLAN_V1)
    (work / "change.diff").write_text(v2.diff)
    subprocess.run(["git", "apply", "change.diff"], cwd=work, check=True, capture_output=True)
    assert (work / "specs" / "plan.json").read_bytes() == PLAN_V2
    with pytest.raises(RegistrationError, match="registered already"):
        amend_plan(plan, 2, repo=repo, registry_dir=reg)


def test_a_plan_edited_in_place_is_refused_in_one_line(repo):
    plan, reg, _ = registered(repo)
    assert require_registered(plan, reg)[1].version == 1
    plan.write_bytes(PLAN_V2)
    with pytest.raises(UnregisteredPlanError) as info:
        require_registered(plan, reg)
    message = str(info.value)
    assert "\n" not in message and "edited after registration" in message
    assert "rftlab plan amend" in message and "--from 1" in message
    other = repo / "specs" / "other.json"
    other.write_bytes(b"{}")
    with pytest.raises(
        UnregisteredPlanError, match="not a registered plan; commit it and run: rftlab plan register"
    ):
        require_registered(other, reg)


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(str.encode),
        st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=4).map(
            lambda d: json.dumps(d).encode()
        ),
    )
)
def test_any_bytes_in_a_registry_file_load_or_give_a_one_line_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("reg") / "plan.json"
    path.write_bytes(data)
    try:
        record = load_registry(path)
    except RegistrationError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert record is not None and isinstance(record.versions, list)


# ------------------------------------------------------------------------------------- the audit


def test_a_registered_plan_and_later_descendant_runs_make_a_contrast_confirmatory(repo):
    plan, reg, _ = registered(repo)
    code = commit(repo, "the runs' code", "2020-03-01T00:00:00Z")
    runs = [evidence("A/1", code, plan), evidence("B/1", code, plan)]
    audit = audit_contrasts(plan, {"A-B": runs}, repo=repo, registry_dir=reg)
    verdict = audit.contrasts["A-B"]
    assert verdict.confirmatory and verdict.reasons == () and verdict.runs == 2
    assert audit.version.version == 1 and audit.auditable
    assert "v1" in audit.registration_line()


def test_an_edited_plan_makes_every_contrast_exploratory(repo):
    plan, reg, _ = registered(repo)
    plan.write_bytes(PLAN_V2)
    code = commit(repo, "edited in place", "2020-03-01T00:00:00Z")
    audit = audit_contrasts(plan, {"A-B": [evidence("A/1", code, plan)]}, repo=repo, registry_dir=reg)
    assert not audit.contrasts["A-B"].confirmatory
    assert any("match no registered version" in r for r in audit.contrasts["A-B"].reasons)


def test_a_run_from_before_registration_is_exploratory(repo):
    before = git(repo, "rev-parse", "HEAD")  # the commit before the plan's
    plan, reg, _ = registered(repo, date="2020-01-02T00:00:00Z")
    old_run = evidence("A/old", before, plan, started="2020-01-01T12:00:00Z")
    audit = audit_contrasts(plan, {"A-B": [old_run]}, repo=repo, registry_dir=reg)
    reasons = " | ".join(audit.contrasts["A-B"].reasons)
    assert audit.contrasts["A-B"].family == "exploratory"
    assert "does not descend from the plan's commit" in reasons
    assert "started at 2020-01-01T12:00:00Z, not after the plan's commit" in reasons


def test_a_run_on_a_branch_not_descending_from_the_registration_is_exploratory(repo):
    fork = git(repo, "rev-parse", "HEAD")
    plan, reg, _ = registered(repo)
    git(repo, "checkout", "-q", "-b", "side", fork)
    (repo / "side.txt").write_text("other work\n")
    side = commit(repo, "side work", "2020-06-01T00:00:00Z")  # later in time, but not after the plan
    git(repo, "checkout", "-q", "main")
    audit = audit_contrasts(plan, {"A-B": [evidence("A/side", side, plan)]}, repo=repo, registry_dir=reg)
    (reason,) = audit.contrasts["A-B"].reasons
    assert f"commit {side[:12]} does not descend" in reason


def test_runs_lacking_the_plan_hash_or_recording_another_are_exploratory(repo):
    plan, reg, _ = registered(repo)
    code = commit(repo, "code", "2020-03-01T00:00:00Z")
    audit = audit_contrasts(
        plan,
        {
            "none": [evidence("A/1", code, None)],
            "other": [evidence("A/2", code, PLAN_V2)],
            "unknown commit": [evidence("A/3", "f" * 40, plan)],
            "no commit": [evidence("A/4", None, plan)],
            "empty": [],
        },
        repo=repo,
        registry_dir=reg,
    )
    assert audit.contrasts["none"].reasons == ("run A/1 records no plan hash",)
    assert audit.contrasts["other"].reasons[0].startswith("run A/2 records another plan (sha256 ")
    assert audit.contrasts["unknown commit"].reasons == (
        f"run A/3's commit {'f' * 12} is not in this repository",
    )
    assert audit.contrasts["no commit"].reasons == ("run A/4 records no commit",)
    assert audit.contrasts["empty"].reasons == ("no runs",)
    two = audit_contrasts(
        plan, {"A-B": [evidence("A/1", code, None), evidence("B/1", code, plan)]}, repo=repo, registry_dir=reg
    )
    # the sentence a report prints names no run, only how many break which condition
    assert two.contrasts["A-B"].sentence() == "exploratory: 1 of 2 runs record no plan hash"
    assert not any(v.confirmatory for v in audit.contrasts.values())


def test_a_contrast_seen_before_registration_is_exploratory_by_rule_e(repo):
    plan, reg, _ = registered(repo)
    code = commit(repo, "code", "2020-03-01T00:00:00Z")
    runs = [evidence("A/1", code, plan)]
    audit = audit_contrasts(
        plan, {"A-B": runs, "A-C": runs}, seen_before=["A-C"], repo=repo, registry_dir=reg
    )
    assert audit.contrasts["A-B"].confirmatory
    assert audit.contrasts["A-C"].reasons == (
        "its result was seen before the plan was written (the plan says so)",
    )


def test_a_plan_in_a_commit_dated_after_the_runs_started_is_exploratory(repo):
    plan, reg, _ = registered(repo, date="2030-01-01T00:00:00Z")
    code = commit(repo, "code", "2030-01-02T00:00:00Z")
    run = evidence("A/1", code, plan, started="2029-12-31T23:59:59Z")
    audit = audit_contrasts(plan, {"A-B": [run]}, repo=repo, registry_dir=reg)
    assert audit.contrasts["A-B"].reasons == (
        "run A/1 started at 2029-12-31T23:59:59Z, not after the plan's commit",
    )


def test_without_git_nothing_can_be_audited(repo, tmp_path):
    plan, reg, sha = registered(repo)
    tarball = tmp_path / "unpacked"  # a source tarball: the files without the repository
    (tarball / "specs").mkdir(parents=True)
    copied = tarball / "specs" / "plan.json"
    copied.write_bytes(plan.read_bytes())
    audit = audit_contrasts(copied, {"A-B": [evidence("A/1", sha, plan)]}, registry_dir=reg)
    assert not audit.auditable and audit.version is not None  # registered, but its commit cannot be checked
    assert audit.contrasts["A-B"].reasons == (NOT_AUDITABLE,)
    assert "cannot be audited here" in audit.contrasts["A-B"].sentence()


def test_real_runs_record_the_plan_hash_outside_their_spec_hash(repo, tmp_path):
    plan, reg, _ = registered(repo)
    commit(repo, "code", "2020-03-01T00:00:00Z")
    store = RunStore(tmp_path / "runs", repo=repo)
    digest = hashlib.sha256(plan.read_bytes()).hexdigest()
    governed = store.create_run("exp", "A", {"seed": 0}, plan_sha256=digest)
    plain = store.create_run("exp", "B", {"seed": 0})
    assert governed.record.spec_sha256 == plain.record.spec_sha256  # the plan never enters the spec hash
    saved = json.loads((governed.path / "run.json").read_text())
    assert saved["plan_sha256"] == digest
    assert "plan_sha256" not in json.loads((plain.path / "run.json").read_text())  # as before the field
    assert load_run(plain.path).record.plan_sha256 is None
    audit = audit_contrasts(
        plan, {"A": [load_run(governed.path)], "B": [load_run(plain.path)]}, repo=repo, registry_dir=reg
    )
    assert audit.contrasts["A"].confirmatory
    assert audit.contrasts["B"].reasons == (f"run B/{plain.run_id} records no plan hash",)
    reused, origin = store.start_or_reuse("exp", "B", {"seed": 0}, plan_sha256=digest)
    assert origin == "new" and reused.record.plan_sha256 == digest  # B's first run was never finished


# ------------------------------------------------------------------------------------- the CLI


def run_cli(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_plan_commands_register_refuse_amend_and_check(repo, capsys):
    plan = write_plan(repo)
    reg = repo / "registrations"
    code, _, err = run_cli(["plan", "register", plan, "--registry", reg], capsys)
    assert (
        code == 2
        and err.startswith("rftlab: error: ")
        and "not committed yet" in err
        and err.count("\n") == 1
    )
    commit(repo, "plan", "2020-01-02T00:00:00Z")
    code, out, _ = run_cli(["plan", "register", plan, "--registry", reg, "--note", "made now"], capsys)
    assert code == 0 and "registered plan 'plan' v1" in out and hashlib.sha256(PLAN_V1).hexdigest() in out
    code, out, _ = run_cli(["plan", "check", plan, "--registry", reg], capsys)
    assert (
        code == 0 and all(line.startswith("ok ") for line in out.splitlines()) and len(out.splitlines()) >= 3
    )
    plan.write_bytes(PLAN_V2)
    code, out, _ = run_cli(["plan", "check", plan, "--registry", reg], capsys)
    assert code == 1 and out.startswith("FAIL ")
    commit(repo, "arm C", "2020-01-05T00:00:00Z")
    code, out, _ = run_cli(["plan", "amend", plan, "--from", "1", "--registry", reg, "--json"], capsys)
    assert code == 0 and json.loads(out)["version"] == 2
    code, out, _ = run_cli(["plan", "check", plan, "--registry", reg], capsys)
    assert code == 0 and "v2" in out.splitlines()[0]
    assert [v["version"] for v in json.loads((reg / "plan.json").read_text())["versions"]] == [1, 2]


def test_plan_check_with_an_experiment_checks_every_run(repo, tmp_path, capsys):
    plan, reg, _ = registered(repo)
    commit(repo, "code", "2020-03-01T00:00:00Z")
    store = RunStore(tmp_path / "runs", repo=repo)
    digest = hashlib.sha256(plan.read_bytes()).hexdigest()
    store.create_run("exp", "A", {"seed": 0}, plan_sha256=digest)
    store.create_run("exp", "B", {"seed": 1})
    checks = plan_checks(plan, registry_dir=reg, root=tmp_path / "runs", experiment="exp", repo=repo)
    runs = [c for c in checks if "run " in c[1]]
    assert [ok for ok, _ in runs] == [True, False] and "records no plan hash" in runs[1][1]


# ------------------------------------------------------------------------------------- this project's plans


@pytest.mark.parametrize("name", ["study_spectrum_memory.json", "gs1_vs_grpo.json", "arena_gates.json"])
def test_the_projects_plans_are_registered_versions(name):
    from rftlab.runs.paths import PROJECT_ROOT, SPECS_DIR
    from rftlab.runs.registration import REGISTRY_DIR, find_registry, git_toplevel

    plan = SPECS_DIR / name
    found = find_version(plan)
    assert found is not None, (
        f"{name} was changed in place; commit it and register an amendment: rftlab plan amend {plan} --from N"
    )
    registry = find_registry(plan)
    assert (REGISTRY_DIR / f"{registry.plan}.json").is_file()
    assert all(v.note for v in registry.versions)  # each says when and after what it was made
    top = git_toplevel(PROJECT_ROOT)
    if top is None:
        pytest.skip("no git repository here (a source tarball): the recorded blobs cannot be read")
    for v in registry.versions:  # git's blob of each version holds exactly the recorded bytes
        shown = subprocess.run(["git", "-C", str(top), "cat-file", "blob", v.blob], capture_output=True)
        assert shown.returncode == 0 and hashlib.sha256(shown.stdout).hexdigest() == v.sha256


def test_plan_check_fails_a_file_reverted_to_an_older_version(repo):
    plan, reg, _ = registered(repo)
    plan.write_bytes(PLAN_V2)
    commit(repo, "arm C", "2020-01-05T00:00:00Z")
    amend_plan(plan, 1, repo=repo, registry_dir=reg)
    assert all(ok for ok, _ in plan_checks(plan, registry_dir=reg, repo=repo))
    plan.write_bytes(PLAN_V1)  # back to v1's bytes: registered, but not the version in force
    checks = plan_checks(plan, registry_dir=reg, repo=repo)
    assert (False, "the file holds v1, but the latest is v2: restore v2 or amend") in checks
