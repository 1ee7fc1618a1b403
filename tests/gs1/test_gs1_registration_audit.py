"""The GS1 study's pre-registration audit (``studies.gs1.audit_decision``, docs/statistics.md §8): the
registered decision over the two arms' runs stays confirmatory only for runs that record the registered
spec's hash and were made after its commit; runs without the hash, and a spec file outside the
repository, are exploratory with the reason said. ``run_arm`` records the hash in a new run."""

from __future__ import annotations

import shutil

import pytest

from rftlab.launch.gs1 import DEFAULT_SPEC
from rftlab.runs import RunStore
from rftlab.runs.paths import PROJECT_ROOT
from rftlab.runs.registration import git_toplevel
from rftlab.studies.gs1 import audit_decision, load_spec


def _runs(root, plan_sha256):
    store = RunStore(root, repo=PROJECT_ROOT)
    return [
        store.create_run("gs1_vs_grpo", arm, {"arm": arm}, backend="local", plan_sha256=plan_sha256)
        for arm in ("gs1_kernel", "grpo_gs8")
    ]


def test_runs_recording_the_registered_specs_hash_keep_the_decision_confirmatory(tmp_path):
    if git_toplevel(PROJECT_ROOT) is None:
        pytest.skip("the audit needs the project as a git checkout")
    spec = load_spec(DEFAULT_SPEC)
    audit = audit_decision(spec, _runs(tmp_path / "with", spec.sha256))
    assert audit.family == "confirmatory", audit.sentence
    assert "gs1_vs_grpo" in audit.registration and spec.sha256[:12] in audit.registration
    assert any("committer's clock" in line for line in audit.limits)
    assert any("after the fact" in line for line in audit.limits)  # the record's own note
    assert any("by construction" in line for line in audit.limits)
    without = audit_decision(spec, _runs(tmp_path / "without", None))
    assert without.family == "exploratory" and "2 of 2 runs" in without.sentence


def test_a_spec_outside_the_repository_cannot_be_audited(tmp_path):
    copy = tmp_path / "gs1_vs_grpo.json"
    shutil.copyfile(DEFAULT_SPEC, copy)
    spec = load_spec(copy)
    audit = audit_decision(spec, _runs(tmp_path / "runs", spec.sha256))
    assert audit.family == "exploratory"
    assert "cannot be audited here" in audit.sentence or "no registered version" in audit.registration


class _Stop(Exception):
    pass


class _NoService:
    """A service client whose first call (the capabilities check) stops the arm: only the run's
    creation is under test here."""

    def get_server_capabilities(self, *args, **kwargs):
        raise _Stop


def test_run_arm_records_the_plan_hash_in_a_new_run(tmp_path):
    from rftlab.training.gs1 import rl_loop

    store = RunStore(tmp_path)
    seen = {}
    real = store.start_or_reuse

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    store.start_or_reuse = spy
    config = rl_loop.GS1ArmConfig(arm="grpo_gs8", estimator="group_mean", group_size=1, groups_per_batch=1)
    with pytest.raises(_Stop):  # the run is made, then the first backend call stops the test
        rl_loop.run_arm(config, _NoService(), None, None, store, "local", plan_sha256="ab" * 32)
    assert seen["plan_sha256"] == "ab" * 32
    (run,) = store.runs()
    assert run.record.plan_sha256 == "ab" * 32
