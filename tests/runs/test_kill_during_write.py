"""A kill -9 during any write leaves the old file or the new one, never a cut one — for every writer of
the project (``kill_harness.WRITERS``), each run in a child process that SIGKILLs itself at the moment the
bytes are being written (``mid-write``), just before the rename into place and just after it. A writer that
bypassed ``rftlab.runs.atomic`` would never reach the hook and would exit normally: that fails too.

Beyond these deterministic kills, a slow test kills a streaming writer from outside at random moments.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import kill_harness as kh
import pytest

HARNESS = Path(kh.__file__).resolve()
LIGHT = sorted(name for name, w in kh.WRITERS.items() if not w.heavy)
HEAVY = sorted(name for name, w in kh.WRITERS.items() if w.heavy)


def _child(name: str, work: Path, mode: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_")}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(kh.REPO / "src"), MPLBACKEND="Agg")
    return subprocess.run(
        [sys.executable, str(HARNESS), name, str(work), mode],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _kill_and_compare(name: str, mode: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = _child(name, work, mode)
    assert proc.returncode == -signal.SIGKILL, (
        f"{name}: the child was not killed inside rftlab.runs.atomic (exit {proc.returncode}); "
        f"does this writer bypass it?\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    )
    before = json.loads((work / "before.json").read_text())
    target = Path(before["target"])
    after = kh.state(target)
    base = target if target.is_dir() or not target.suffix else target.parent
    if name == "firectl private auth file":
        # before the rename the key file never reached its name; after it, it sits in a home only this
        # user can open; either way the next call removes the dead process's home, key and all
        homes = list(target.iterdir())
        assert len(homes) == 1 and oct(homes[0].stat().st_mode & 0o777) == "0o700"
        assert bool(list(target.rglob("auth.ini"))) == (mode == "after-rename")
        from rftlab.launch.firectl import clean_stale_homes

        assert clean_stale_homes(target) == homes and not list(target.iterdir())
        return
    if mode in ("mid-write", "before-rename"):
        assert after == before["files"], f"{name}: a {mode} kill changed the files"
        return
    changed = {rel for rel in after if after[rel] != before["files"].get(rel)}
    assert changed, f"{name}: the rename happened, yet no file changed"
    assert set(before["files"]) <= set(after), f"{name}: a file disappeared"
    for rel in changed:
        path = base / rel
        assert kh.complete(path, path.read_bytes()), f"{name}: {rel} is not a complete file"


# One writer of each mechanism for the moments around the rename (every writer shares them): a single
# file, a streamed file, several files in a folder, a folder written by a library, the private key file.
AROUND_RENAME = (
    "run-store metrics.jsonl",
    "spectrum dataset --out",
    "arena build-sft",
    "arena tiny model folder",
    "firectl private auth file",
)


@pytest.mark.parametrize("name", LIGHT)
def test_a_kill_in_the_middle_of_the_bytes_leaves_the_old_file(name, tmp_path):
    _kill_and_compare(name, "mid-write", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", HEAVY)
def test_a_kill_in_the_middle_of_a_model_write_leaves_the_old_files(name, tmp_path):
    _kill_and_compare(name, "mid-write", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["before-rename", "after-rename"])
@pytest.mark.parametrize("name", AROUND_RENAME)
def test_a_kill_around_the_rename_leaves_old_or_new_files(name, mode, tmp_path):
    _kill_and_compare(name, mode, tmp_path)


def test_the_table_covers_each_writing_module():
    """Each module that the AST scan of test_writers.py shows writing through rftlab.runs.atomic has a row
    here (by the function its row calls): a new writer module must add one."""
    import inspect

    source = inspect.getsource(kh)
    for module in (
        "rftlab.cli.arena", "rftlab.studies.gs1", "rftlab.reports", "rftlab.training.local_tinker.checkpoints",
        "rftlab.training.local_tinker.model",
        "rftlab.training.gs1.warm_start", "rftlab.training.arena.sft", "rftlab.launch.firectl",
        "rftlab.rollout.arena.sft_data", "rftlab.analysis.arena.audit",
    ):  # fmt: skip
        assert module in source, module
    assert {"spectrum corpus --out", "spectrum dataset --out", "poker dataset --out"} <= set(kh.WRITERS)


@pytest.mark.slow
def test_random_sigkills_of_a_streaming_writer_never_leave_a_cut_file(tmp_path):
    """``spectrum dataset --out`` (a streamed write of thousands of rows) killed from outside at random
    moments: the file is always the previous complete one or the new complete one."""
    out = tmp_path / "rows.jsonl"
    out.write_text('{"old": true}\n')
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    rng = random.Random(7)
    outcomes = {"old": 0, "new": 0}
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-m", "rftlab.cli", "spectrum", "dataset", "--n", "1500", "--out", str(out)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.5, 5.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        data = out.read_bytes()
        assert kh.complete(out, data), "a kill left a cut file"
        outcomes["old" if data == b'{"old": true}\n' else "new"] += 1
    from rftlab.runs import find_temporaries

    # the killed writers' temporaries stay behind, recognised as stale (``rftlab runs clean`` removes them)
    assert all(t.stale for t in find_temporaries(tmp_path))
    assert outcomes["old"] + outcomes["new"] == 6
