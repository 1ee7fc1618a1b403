"""Class 10 of issue 24: two launches of the same arm at once — the second refuses with the run's path (a
lock in the run store), no traceback, and the first's run is untouched; and the McpGym modules' import race
(litellm's background cost-map retry thread, started when ``LITELLM_LOCAL_MODEL_COST_MAP`` is unset) is
gone because importing ``rftlab`` sets the variable first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.cli import main
from rftlab.runs import RunBusyError, RunStore, load_run
from rftlab.runs.locks import LOCK_DIR, LockPathError

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"

HOLDER = """
import json, sys, time
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.runs import RunStore
spec = load_arm_spec(sys.argv[2]).model_copy(update=json.loads(sys.argv[3]))
run, origin = RunStore(sys.argv[1]).start_or_reuse(spec.experiment, spec.arm, spec.to_dict(), backend="local", resume=True)
print(run.path, flush=True)
time.sleep(120)
"""


def _holder(root: Path, spec: Path, update: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root), str(spec), json.dumps(update)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )


def test_a_second_arm_launch_refuses_with_the_run_path(tmp_path, capsys):
    small = {"rows": 3, "epochs": 2, "response_candidates": 3}
    spec_file = tmp_path / "spec.json"
    base = json.loads((REPO / "data" / "specs" / "spectrum_A.json").read_text())
    spec_file.write_text(json.dumps({**base, **small}))
    root = tmp_path / "runs"
    holder = _holder(root, spec_file, {})
    try:
        run_path = holder.stdout.readline().strip()
        assert run_path, "the holder did not start"
        code = main(["arm", "launch", str(spec_file), "--backend", "local", "--root", str(root)])
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if line.startswith("rftlab: error:")]
        assert code == 2 and len(errors) == 1 and "Traceback" not in err  # besides it: the progress line
        assert f"run {run_path} is being trained by another process (pid {holder.pid})" in err
        assert load_run(run_path).metrics() == []  # the refused launch touched nothing
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone (its lock died with it): the same command resumes the run and finishes it
    assert main(["arm", "launch", str(spec_file), "--backend", "local", "--root", str(root)]) == 0
    assert load_run(run_path).record.status == "finished"
    assert not [p for p in root.iterdir() if p.name != LOCK_DIR and p.name.startswith(".")]


def test_claims_are_reentrant_in_one_process_and_released_by_finish(tmp_path):
    store = RunStore(tmp_path / "runs")
    run, origin = store.start_or_reuse("e", "a", {"x": 1}, resume=True)
    again, origin2 = store.start_or_reuse("e", "a", {"x": 1}, resume=True)  # a notebook cell run twice
    assert origin == "new" and origin2 == "resumed" and again.path == run.path
    run.finish()
    code = (
        "import sys; from rftlab.runs import load_run; r = load_run(sys.argv[1]); r.claim(); print('claimed')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(run.path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert out.stdout.strip() == "claimed", out.stderr  # finish() released it


@settings(max_examples=60, deadline=None)
@given(name=st.text(max_size=30))
def test_any_arm_name_is_refused_or_locked_inside_the_store(name, tmp_path_factory):
    root = tmp_path_factory.mktemp("store") / "runs"
    try:
        run, _origin = RunStore(root).start_or_reuse("exp", name, {"x": 1})
    except ValueError as exc:
        assert "must be letters, digits" in str(exc)
        assert not root.exists() or not any(p for p in root.rglob("*") if p.is_file())
        return
    # a valid name: every file the lock machinery made lies in the store's hidden lock folder
    made = [p for p in root.rglob("*") if p.is_file() and LOCK_DIR in p.parts]
    assert made and all(p.parent == root / LOCK_DIR for p in made)
    assert run.path.parent.name == name
    run.release()


def test_a_claim_waits_out_a_forked_child_that_still_holds_the_released_lock(tmp_path):
    """The CI failure of stop 40: a thread of the process forked a subprocess while a claim was held, the
    claim was released, and the next claim of the same run met the child's copy of the lock and called
    the run busy "by another process" (its own pid). A child forked with the lock open keeps it until it
    exits; the next claim waits for it instead of refusing. A real other holder still refuses at once."""
    import time

    from rftlab.runs import locks

    store = RunStore(tmp_path / "runs")
    run, _origin = store.start_or_reuse("e", "a", {"x": 1}, resume=True)
    child = os.fork()
    if child == 0:  # the child: holds its copy of the lock file for a moment, then exits
        time.sleep(0.5)
        os._exit(0)
    try:
        run.release()
        start = time.monotonic()
        run.claim("polled")  # would raise RunBusyError without the wait
        waited = time.monotonic() - start
        assert 0.2 < waited < locks.FORK_GRACE_S, waited
    finally:
        os.waitpid(child, 0)
        run.release()
    # another process holding the lock is still refused at once, naming its pid
    code = (
        "import sys, time; from rftlab.runs import load_run; r = load_run(sys.argv[1]); r.claim(); "
        "print('claimed', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(run.path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    try:
        assert holder.stdout.readline().strip() == "claimed"
        start = time.monotonic()
        with pytest.raises(RunBusyError, match=f"pid {holder.pid}"):
            run.claim("polled")
        assert time.monotonic() - start < 1.0
    finally:
        holder.kill()
        holder.wait()


def test_busy_error_is_a_run_store_error_printed_in_one_line(tmp_path):
    from rftlab.runs import RunStoreError

    assert issubclass(RunBusyError, RunStoreError)


# ---------------------------------------------------------------------------- the import race

PROBE = """
import os, threading
# the project's venv also sets the variable at interpreter start-up (a .pth file written by make setup);
# drop it here so the probe sees what importing the modules alone does
os.environ.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
{first}
print(sorted(t.name for t in threading.enumerate()))
import rftlab.rollout.spectrum.mcp, rftlab.rollout.poker.mcp
import rftlab.rollout.eval_entries.spectrum_mcp_server, rftlab.rollout.eval_entries.poker_mcp_server
print(os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"))
print(sorted(t.name for t in threading.enumerate()))
"""


def _probe(first: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env["PYTHONPATH"] = str(SRC)
    return subprocess.run(
        [sys.executable, "-c", PROBE.format(first=first)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_the_mcp_modules_import_without_litellms_retry_thread():
    """The cause of the ~1-in-10 failure: without LITELLM_LOCAL_MODEL_COST_MAP, importing litellm fetches
    the cost map and, offline, starts a retry thread whose first log record races the importing thread
    into litellm's lazily imported logging filter (a deadlock on ``litellm.rust_bridge.catalog``). The
    project's modules now set the variable before litellm loads, so the thread never starts."""
    done = _probe("")
    assert done.returncode == 0, done.stderr[-2000:]
    value, threads = done.stdout.strip().splitlines()[-2:]
    assert value == "True" and "litellm-model-cost-map-retry" not in threads


@pytest.mark.slow
def test_the_probe_sees_the_retry_thread_when_litellm_loads_first():
    """The check above can fail: importing litellm before rftlab, with the variable unset, starts the
    thread (and sometimes dies of the race itself)."""
    done = _probe("import litellm")
    if done.returncode != 0:
        assert "rust_bridge.catalog" in done.stderr or "deadlock" in done.stderr, done.stderr[-2000:]
        return
    assert "litellm-model-cost-map-retry" in done.stdout.strip().splitlines()[0]


# ---------------------------------------------------------------------------- a shared store's lock files


def _small_spec(tmp_path: Path) -> tuple[Path, str, str]:
    """A small spectrum arm spec file, with its experiment and arm."""
    base = json.loads((REPO / "data" / "specs" / "spectrum_A.json").read_text())
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({**base, "rows": 3, "epochs": 2, "response_candidates": 3}))
    return spec_file, base["experiment"], base["arm"]


def _launch(spec_file: Path, root: Path, capsys) -> tuple[int, list[str]]:
    code = main(["arm", "launch", str(spec_file), "--backend", "local", "--root", str(root)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line for line in err.splitlines() if line.startswith("rftlab: error:")]


def test_a_lock_symlink_planted_in_a_shared_store_is_refused(tmp_path, capsys):
    spec_file, experiment, arm = _small_spec(tmp_path)
    root = tmp_path / "runs"
    (root / LOCK_DIR).mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"someone's precious file\n")
    link = root / LOCK_DIR / f"{experiment}.{arm}.lock"
    link.symlink_to(victim)
    code, errors = _launch(spec_file, root, capsys)
    assert code == 2 and errors == [
        f"rftlab: error: lock file {link} is a symlink; refusing to open it (someone else may have planted "
        "it: remove the link and check the store's permissions)"
    ]
    assert victim.read_bytes() == b"someone's precious file\n" and RunStore(root).runs() == []
    # the claim of one run: the same refusal, the target untouched
    run = RunStore(root).create_run("e", "a", {"x": 1})
    claim_link = root / LOCK_DIR / f"e.a.{run.run_id}.lock"
    claim_link.symlink_to(victim)
    with pytest.raises(LockPathError, match="is a symlink; refusing to open it"):
        run.claim()
    # a dangling link (its target not yet there) is not created through either
    claim_link.unlink()
    claim_link.symlink_to(tmp_path / "would-be-created")
    with pytest.raises(LockPathError, match="is a symlink"):
        run.claim()
    assert (
        victim.read_bytes() == b"someone's precious file\n" and not (tmp_path / "would-be-created").exists()
    )


def test_a_hard_linked_lock_file_is_refused(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    run = RunStore(tmp_path / "runs").create_run("e", "a", {"x": 1})
    (tmp_path / "runs" / LOCK_DIR).mkdir()
    os.link(victim, tmp_path / "runs" / LOCK_DIR / f"e.a.{run.run_id}.lock")
    with pytest.raises(LockPathError, match="not a plain file of its own"):
        run.claim()
    assert victim.read_bytes() == b"precious\n"


def test_a_file_in_place_of_the_lock_folder_is_one_clear_line(tmp_path, capsys):
    spec_file, _, _ = _small_spec(tmp_path)
    root = tmp_path / "runs"
    root.mkdir()
    (root / LOCK_DIR).write_text("not a folder\n")
    code, errors = _launch(spec_file, root, capsys)
    assert code == 2 and errors == [
        f"rftlab: error: {root / LOCK_DIR} is a file, not a folder; the run store keeps its lock files "
        "there (move the file aside)"
    ]
    assert (root / LOCK_DIR).read_text() == "not a folder\n"


def test_lock_files_are_group_writable_under_umask_002(tmp_path):
    saved = os.umask(0o002)
    try:
        run, _ = RunStore(tmp_path / "runs").start_or_reuse("e", "a", {"x": 1})
    finally:
        os.umask(saved)
    locks = sorted((tmp_path / "runs" / LOCK_DIR).iterdir())
    assert locks and all(p.stat().st_mode & 0o777 == 0o664 for p in locks)
    run.release()


def test_arm_launch_refuses_to_resume_a_run_with_a_repeated_step(tmp_path, capsys):
    from rftlab.launch.spectrum.spec import load_arm_spec

    spec_file, experiment, arm = _small_spec(tmp_path)
    root = tmp_path / "runs"
    spec = load_arm_spec(spec_file)
    run = RunStore(root).create_run(experiment, arm, spec.to_dict(), backend="local")
    metrics = run.path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": s, "epoch": s, "reward": 0.5}) + "\n" for s in (0, 1, 1)))
    code, errors = _launch(spec_file, root, capsys)
    assert code == 2 and errors == [
        f"rftlab: error: {metrics}: line 3 repeats step 1 of line 2 (steps are unique within a run); "
        f"refusing to resume run {run.path}: start a fresh run instead (`rftlab arm launch SPEC "
        "--no-resume`, or move the run folder aside)"
    ]
    assert [row["step"] for row in load_run(run.path).metrics()] == [0, 1, 1]  # left as it was
