"""Quick (smoke) notebook runs write to a temporary run store, ``rftlab-quick-runs-*`` in the system temp
folder; it is removed when the process that made it exits (issue 33, item 7), not when a forked child of
that process exits, and never when the store is ``$RFTLAB_RUNS_ROOT`` or the project's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = """
import json, os, sys
from rftlab.runs.paths import notebook_runs_root
quick = notebook_runs_root(quick=True)
(quick / "spectrum_memory" / "A").mkdir(parents=True)
(quick / "spectrum_memory" / "A" / "run.json").write_text("{}")
pid = os.fork()
if pid == 0:
    sys.exit(0)  # a forked child exiting normally runs the parent's atexit handlers
os.waitpid(pid, 0)
print(json.dumps({"quick": str(quick), "after_child": quick.is_dir(), "full": str(notebook_runs_root(False))}))
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RFTLAB_RUNS_ROOT"}
    return {**env, "PYTHONPATH": str(SRC), "TMPDIR": str(tmp_path), **extra}


def test_a_quick_store_is_removed_when_its_process_exits(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=_env(tmp_path), capture_output=True, text=True, check=True
    )
    seen = json.loads(out.stdout)
    quick = Path(seen["quick"])
    assert quick.parent == tmp_path and quick.name.startswith("rftlab-quick-runs-")
    assert seen["after_child"] is True  # the forked child's exit left it alone
    assert not quick.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("rftlab-quick-runs-")]
    assert Path(seen["full"]).name == "runs"  # not quick: the project's store, never removed


def test_a_named_store_is_never_removed(tmp_path):
    store = tmp_path / "mine"
    store.mkdir()
    code = "from rftlab.runs.paths import notebook_runs_root; print(notebook_runs_root(quick=True))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(tmp_path, RFTLAB_RUNS_ROOT=str(store)),
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(out.stdout.strip()) == store.resolve() and store.is_dir()
