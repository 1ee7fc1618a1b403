"""A Tinker preflight's gradient/weight checks (which the service cannot run) completed by a passed local
preflight of the same spec and the same committed code — and refused in every other case."""

from __future__ import annotations

import json
import subprocess

import pytest

from rftlab.launch.gs1.preflight import complete_with_reference
from rftlab.runs import RunStore
from rftlab.studies.gs1 import reference_completion

CLEAN = {"commit": "a" * 40, "dirty": False}


def report(backend, statuses, sha="s" * 64):
    checks = [{"id": cid, "status": st, "detail": f"{cid} on {backend}"} for cid, st in statuses.items()]
    status = (
        "failed"
        if "failed" in statuses.values()
        else "passed"
        if set(statuses.values()) == {"passed"}
        else "unresolved"
    )
    return {
        "status": status,
        "passed": status == "passed",
        "backend": backend,
        "spec_sha256": sha,
        "checks": checks,
    }


TINKER = {"estimators_offline": "passed", "treatment_disabled_datums": "passed", "loss_and_gradient": "not_run",
          "one_step_grpo_gs8": "passed", "one_step_gs1_kernel": "passed", "restoration": "not_run"}  # fmt: skip
LOCAL = dict.fromkeys(TINKER, "passed")


def test_gradient_checks_are_completed_by_a_matching_local_preflight():
    done, why = complete_with_reference(
        report("tinker", TINKER), report("local", LOCAL), preflight_git=CLEAN, reference_git=CLEAN,
        reference_path="runs/x/preflight.json",
    )  # fmt: skip
    assert why == "" and done["status"] == "passed" and done["completed_by"] == "runs/x/preflight.json"
    by_id = {c["id"]: c for c in done["checks"]}
    assert "passed on the local backend" in by_id["loss_and_gradient"]["detail"]
    assert (
        by_id["one_step_grpo_gs8"]["detail"] == "one_step_grpo_gs8 on tinker"
    )  # the service's own checks stay


@pytest.mark.parametrize(
    "tinker, local, git_a, git_b, expected",
    [
        ({**TINKER, "one_step_gs1_kernel": "failed"}, LOCAL, CLEAN, CLEAN, "failed"),
        ({**TINKER, "one_step_gs1_kernel": "not_run"}, LOCAL, CLEAN, CLEAN, "only a backend-side run"),
        (TINKER, {**LOCAL, "restoration": "failed"}, CLEAN, CLEAN, "no passed preflight"),
        (TINKER, LOCAL, CLEAN, {"commit": "b" * 40, "dirty": False}, "other code"),
        (TINKER, LOCAL, CLEAN, {"commit": "a" * 40, "dirty": True}, "uncommitted"),
        (TINKER, LOCAL, {"commit": None, "dirty": None}, CLEAN, "other code"),
    ],
)
def test_refusals(tinker, local, git_a, git_b, expected):
    done, why = complete_with_reference(report("tinker", tinker), report("local", local),
                                        preflight_git=git_a, reference_git=git_b)  # fmt: skip
    assert done is None and expected in why


def test_other_spec_is_refused():
    done, why = complete_with_reference(report("tinker", TINKER), report("local", LOCAL, sha="t" * 64),
                                        preflight_git=CLEAN, reference_git=CLEAN)  # fmt: skip
    assert done is None and "another spec" in why


def _repo(tmp_path):
    repo = tmp_path / "code"
    repo.mkdir()
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    (repo / "loop.py").write_text("x = 1\n")
    for args in (["init", "-q"], ["add", "loop.py"], ["commit", "-qm", "loop"]):
        subprocess.run(
            ["git", *args], cwd=repo, check=True, env={**env, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        )
    return repo


def _preflight_run(store, backend, payload):
    run = store.create_run(
        "gs1_vs_grpo", "preflight", {"kind": "gs1_preflight", "backend": backend}, backend=backend
    )
    (run.path / "preflight.json").write_text(json.dumps(payload))
    run.finish()
    return run.path / "preflight.json"


def test_the_store_lookup_uses_the_newest_matching_local_preflight(tmp_path):
    repo = _repo(tmp_path)
    store = RunStore(tmp_path / "runs", repo=repo)
    local_path = _preflight_run(store, "local", report("local", LOCAL))
    pre_path = _preflight_run(store, "tinker", report("tinker", TINKER))
    done, why = reference_completion(store, report("tinker", TINKER), pre_path)
    assert why == "" and done["status"] == "passed" and done["completed_by"] == str(local_path)


def test_a_dirty_tree_blocks_the_completion(tmp_path):
    repo = _repo(tmp_path)
    store = RunStore(tmp_path / "runs", repo=repo)
    _preflight_run(store, "local", report("local", LOCAL))
    (repo / "loop.py").write_text("x = 2\n")  # the loop code changed after the local preflight
    pre_path = _preflight_run(store, "tinker", report("tinker", TINKER))
    done, why = reference_completion(store, report("tinker", TINKER), pre_path)
    assert done is None and "uncommitted" in why


@pytest.mark.live
def test_live_tinker_serves_the_spec_base_model():
    """With RFTLAB_LIVE=1 and TINKER_API_KEY: the service lists the pre-registered base model as trainable
    and sampleable before anything is paid for (never runs in CI)."""
    from pathlib import Path

    import tinker

    from rftlab.training.gs1.rl_loop import check_model_served, service_capabilities

    spec = json.loads(
        (Path(__file__).resolve().parents[2] / "data" / "specs" / "gs1_vs_grpo.json").read_text()
    )
    check_model_served(service_capabilities(tinker.ServiceClient()), spec["base_model"])


@pytest.mark.slow
def test_a_preflight_made_on_a_dirty_tree_is_never_reused(tmp_path):
    """``study_preflight`` reuses a finished preflight only from the commit checked out now with a clean
    tree: a local preflight made on uncommitted code is rerun once the code is committed, and the Tinker
    handoff is then completed by the clean rerun, never by the dirty record."""
    import sys

    from rftlab.studies.gs1 import DEFAULT_SPEC, load_spec, study_preflight

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from test_gs1_fakes import TinyTorchServiceClient
    from test_gs1_study import _backend

    repo = _repo(tmp_path)
    store = RunStore(tmp_path / "runs", repo=repo)
    spec = load_spec(DEFAULT_SPEC)
    sha = spec.sha256
    backend = _backend(TinyTorchServiceClient(), spec)
    (repo / "loop.py").write_text("x = 2\n")  # uncommitted change
    dirty, dirty_path = study_preflight(backend, spec, store)
    assert dirty["status"] == "passed"
    again, again_path = study_preflight(backend, spec, store)
    assert again_path != dirty_path  # still dirty: run again, never reuse
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # fmt: skip
    subprocess.run(["git", "commit", "-qam", "loop 2"], cwd=repo, check=True, env=env)
    clean, clean_path = study_preflight(backend, spec, store)
    assert clean_path not in (dirty_path, again_path)
    assert RunStore(tmp_path / "runs").runs("gs1_vs_grpo", "preflight")[0].record.git["dirty"] is True
    reused, reused_path = study_preflight(backend, spec, store)
    assert reused_path == clean_path  # same commit, clean tree: reused
    tinker = {**report("tinker", TINKER, sha=sha), "status": "unresolved"}
    pre_path = _preflight_run(store, "tinker", tinker)
    done, why = reference_completion(store, tinker, pre_path)
    assert why == "" and done["completed_by"] == str(clean_path)
