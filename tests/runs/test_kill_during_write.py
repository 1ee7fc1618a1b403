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
MODES = ("mid-write", "before-rename", "after-rename")


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
        # the key file never reached its final name, and the next call removes the dead process's home
        assert not list(target.rglob("auth.ini"))
        from rftlab.launch.firectl import clean_stale_homes

        assert clean_stale_homes(target) and not list(target.iterdir())
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


@pytest.mark.parametrize("name", LIGHT)
def test_a_kill_in_the_middle_of_the_bytes_leaves_the_old_file(name, tmp_path):
    _kill_and_compare(name, "mid-write", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(kh.WRITERS))
def test_every_writer_at_every_moment(name, mode, tmp_path):
    if mode == "mid-write" and name in LIGHT:
        pytest.skip("covered by the default test above")
    _kill_and_compare(name, mode, tmp_path)


def test_the_table_names_every_writer_kind():
    # every converted writer family is in the table (a new writer joins the AST scan of test_writers.py
    # and, with it, this table)
    assert len(kh.WRITERS) >= 17 and HEAVY


@pytest.mark.slow
def test_random_sigkills_of_a_streaming_writer_never_leave_a_cut_file(tmp_path):
    """``spectrum dataset --out`` (a streamed write of thousands of rows) killed from outside at random
    moments: the file is always the previous complete one or the new complete one."""
    out = tmp_path / "rows.jsonl"
    out.write_text('{"old": true}\n')
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    rng = random.Random(7)
    outcomes = {"old": 0, "new": 0}
    for _ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-m", "rftlab.cli", "spectrum", "dataset", "--n", "1500", "--out", str(out)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.5, 6.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        data = out.read_bytes()
        assert kh.complete(out, data), "a kill left a cut file"
        outcomes["old" if data == b'{"old": true}\n' else "new"] += 1
    from rftlab.runs import find_temporaries

    # the killed writers' temporaries stay behind, recognised as stale (``rftlab runs clean`` removes them)
    assert all(t.stale for t in find_temporaries(tmp_path))
    assert outcomes["old"] + outcomes["new"] == 12
