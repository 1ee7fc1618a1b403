"""``rftlab.runs.parallel``: the worker count, order and errors, and the same runs with any worker count."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from rftlab.runs.parallel import WORKERS_ENV, available_cores, map_processes, worker_count

PLAN_DIR = Path(__file__).resolve().parents[2] / "data" / "specs"


def _pid(_item: object) -> int:
    return os.getpid()


def _nested_pids(_item: object) -> list[int]:
    """Inside a worker: the processes a nested ``map_processes`` call ran in."""
    return map_processes(_pid, range(3))


def test_worker_count_reads_the_setting_and_never_exceeds_the_items(monkeypatch):
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    assert worker_count(100) == available_cores()
    assert worker_count(1) == 1
    assert worker_count(0) == 1
    monkeypatch.setenv(WORKERS_ENV, "3")
    assert worker_count(10) == 3 and worker_count(2) == 2
    assert worker_count(10, workers=5) == 5  # an explicit count wins over the setting
    monkeypatch.setenv(WORKERS_ENV, "two")
    with pytest.raises(ValueError, match=r"\$RFTLAB_WORKERS must be a whole number, got 'two'"):
        worker_count(4)
    with pytest.raises(ValueError, match="at least 1, got 0"):
        worker_count(4, workers=0)


def test_map_processes_keeps_the_order_and_uses_other_processes():
    assert map_processes(abs, [-3, 2, -1, 0, -7], workers=2) == [3, 2, 1, 0, 7]
    pids = map_processes(_pid, range(4), workers=2)
    assert os.getpid() not in pids
    assert map_processes(_pid, range(3), workers=1) == [os.getpid()] * 3  # one worker: here


def test_work_nested_in_a_worker_runs_in_that_worker(monkeypatch):
    monkeypatch.setenv(WORKERS_ENV, "2")
    for pids in map_processes(_nested_pids, range(2)):
        assert len(set(pids)) == 1 and pids[0] != os.getpid()


def test_a_workers_exception_is_raised_in_the_caller():
    with pytest.raises(ValueError, match="invalid literal for int"):
        map_processes(int, ["1", "x", "3"], workers=2)


def _rollout_digests(runs) -> dict[str, str]:
    out = {}
    for arm, run in runs.items():
        for f in sorted(Path(run.path).rglob("*")):
            if f.is_file() and f.name != "run.json":  # run.json holds the run id and the times
                out[f"{arm}/{f.relative_to(run.path)}"] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def test_parallel_and_serial_launches_write_the_same_runs(tmp_path, monkeypatch):
    """Four simulated spectrum arms at a tiny size, launched with one worker and with two."""
    from rftlab.analysis.spectrum.plan import load_study_plan
    from rftlab.studies.spectrum import launch_arms, study_specs

    plan = load_study_plan(PLAN_DIR / "study_spectrum_memory.json").plan
    specs = study_specs(plan, PLAN_DIR, {"rows": 2, "response_candidates": 2, "epochs": 2})
    chosen = {arm: specs[arm] for arm in list(specs)[:4]}
    monkeypatch.setenv(WORKERS_ENV, "1")
    serial = launch_arms(chosen, "local", tmp_path / "serial")
    monkeypatch.setenv(WORKERS_ENV, "2")
    parallel = launch_arms(chosen, "local", tmp_path / "parallel")
    assert list(parallel) == list(chosen)
    digests = _rollout_digests(serial)
    assert digests and any("rollouts" in k for k in digests)
    assert _rollout_digests(parallel) == digests


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_workers_stop_when_their_parent_is_killed_or_interrupted(tmp_path, how):
    """A parent killed with SIGKILL (a notebook kernel restarted) or interrupted with SIGINT (the stop
    button) leaves no worker running."""
    import signal
    import subprocess
    import sys
    import time

    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's; /proc is read")
    (tmp_path / "sleeper.py").write_text(
        "import os, time\n"
        "def nap(folder):\n"
        "    open(os.path.join(folder, str(os.getpid())), 'w').close()\n"
        "    time.sleep(120)\n"
    )
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from rftlab.runs.parallel import map_processes\n"
        "from sleeper import nap\n"
        "if __name__ == '__main__':\n"
        f"    map_processes(nap, [{str(tmp_path)!r}] * 2, workers=2)\n"
    )
    (tmp_path / "parent.py").write_text(script)
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py")], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len([p for p in tmp_path.iterdir() if p.name.isdigit()]) < 2:
            assert time.monotonic() < deadline, "the workers never started"
            assert parent.poll() is None, "the parent exited early"
            time.sleep(0.1)
        pids = [int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()]
        parent.send_signal(getattr(signal, how))  # to the parent alone, as Jupyter interrupts a kernel
        parent.wait(timeout=20)
        deadline = time.monotonic() + 10
        alive = pids
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [pid for pid in pids if _running(pid)]
        assert alive == [], f"workers {alive} outlived their parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False
