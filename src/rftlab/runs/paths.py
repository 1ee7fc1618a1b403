"""Where the project's own folders are: the one place that knows the repository's layout.

The package is used from a source checkout (``pip install -e .``), so the project root is three folders
above this file (``src/rftlab/runs/paths.py``). Every default path (``data/specs``, ``runs/``,
``reports/``, ``notebooks/``) is built from it, so the CLI, the notebooks (whose kernels JupyterLab starts
in ``notebooks/``) and the tests resolve the same files from any working directory.

The run store defaults to ``<project>/runs``; ``$RFTLAB_RUNS_ROOT`` moves it (the test suite points it at a
temporary folder, so no test writes into the repository's ``runs/``). Notebooks ask ``runs_root()`` for it
and ``spec_path("spectrum_A.json")`` for a spec file, never a path relative to their working directory.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]
SPECS_DIR = PROJECT_ROOT / "data" / "specs"
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
REPORTS_DIR = PROJECT_ROOT / "reports"
DEFAULT_RUNS_DIR = PROJECT_ROOT / "runs"
RUNS_ROOT_ENV = "RFTLAB_RUNS_ROOT"

__all__ = [
    "DEFAULT_RUNS_DIR",
    "display_path",
    "NOTEBOOKS_DIR",
    "PROJECT_ROOT",
    "REPORTS_DIR",
    "RUNS_ROOT_ENV",
    "SPECS_DIR",
    "notebook_runs_root",
    "runs_root",
    "spec_path",
]


def runs_root() -> Path:
    """The run store's root: ``$RFTLAB_RUNS_ROOT`` (made absolute against the working directory) when it
    is set and not empty, else ``<project>/runs``. Read at every call, so a test or a shell can move it."""
    value = os.environ.get(RUNS_ROOT_ENV, "").strip()
    return Path(value).expanduser().resolve() if value else DEFAULT_RUNS_DIR


def spec_path(name: str | os.PathLike[str]) -> Path:
    """A spec file of ``data/specs`` by file name (``"spectrum_A.json"``); an absolute path, or one that
    already names ``data/specs/...``, is resolved against the project root instead of the working
    directory. Raises ``FileNotFoundError`` naming the path when there is no such file."""
    path = Path(name)
    if not path.is_absolute():
        parts = path.parts
        path = PROJECT_ROOT / path if parts[:2] == ("data", "specs") else SPECS_DIR / path
    if not path.is_file():
        raise FileNotFoundError(f"no spec file {path} (specs live in data/specs of the project)")
    return path


def _remove_quick_store(path: Path, owner: int) -> None:
    if os.getpid() == owner:  # not from a forked child that exits normally
        shutil.rmtree(path, ignore_errors=True)


def notebook_runs_root(quick: bool = False) -> Path:
    """The run store a notebook writes to: ``$RFTLAB_RUNS_ROOT`` when set; otherwise, in quick (smoke)
    mode, a fresh temporary folder, so smoke-size runs never mix with real ones, removed when the process
    (the notebook's kernel) exits; otherwise ``<project>/runs``."""
    if os.environ.get(RUNS_ROOT_ENV, "").strip() or not quick:
        return runs_root()
    path = Path(tempfile.mkdtemp(prefix="rftlab-quick-runs-"))
    atexit.register(_remove_quick_store, path, os.getpid())
    return path


def display_path(path: str | os.PathLike[str]) -> str:
    """``path`` as a reader should see it (reports, messages): relative to the project root when inside
    it (``runs/gs1_vs_grpo/...``), ``$RFTLAB_RUNS_ROOT/...`` inside a moved run store, else ``…/<name>``;
    never a machine's absolute folder layout. A relative path is returned as given."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    p = p.resolve()
    for base, label in ((PROJECT_ROOT, None), (runs_root(), f"${RUNS_ROOT_ENV}")):
        try:
            rel = p.relative_to(base)
        except ValueError:
            continue
        return rel.as_posix() if label is None else f"{label}/{rel.as_posix()}"
    return f"…/{p.name}"
