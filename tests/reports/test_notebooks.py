"""Every notebook runs in quick mode from ``notebooks/`` (where JupyterLab starts its kernels), renders a
clean report, writes only to the run store it is given, and is paired with an in-sync .ipynb."""

from __future__ import annotations

import os
from pathlib import Path

import jupytext
import pytest

from rftlab.reports import build_reports, discover_notebooks, report_name, report_problems
from rftlab.runs.paths import NOTEBOOKS_DIR, PROJECT_ROOT

NOTEBOOKS = discover_notebooks()
# caches that any Python process or a concurrently running test may write; everything else is a write
CACHE_NAMES = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}


def tree_snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """``{relative path: (size, mtime_ns)}`` of every file under ``root`` except caches."""
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in CACHE_NAMES]
        for name in files:
            path = Path(folder) / name
            try:
                st = path.stat()
            except FileNotFoundError:  # removed while walking
                continue
            out[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def test_the_methods_notebook_exists():
    assert PROJECT_ROOT / "notebooks" / "00_methods.py" in NOTEBOOKS


def test_tree_snapshot_sees_a_new_and_a_changed_file(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "__pycache__").mkdir()
    before = tree_snapshot(tmp_path)
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "a.txt").write_text("aa")
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"0")
    after = tree_snapshot(tmp_path)
    assert set(after) == {"a.txt", "b.txt"} and after["a.txt"] != before["a.txt"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_paired_and_in_sync(notebook):
    paired = notebook.with_suffix(".ipynb")
    assert paired.exists(), f"{paired.name} is missing: run `make sync`"
    source_cells = [c.source for c in jupytext.read(notebook).cells]
    paired_cells = [c.source for c in jupytext.read(paired).cells]
    assert source_cells == paired_cells, f"{paired.name} is out of sync with {notebook.name}: run `make sync`"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_reads_no_project_file_by_a_relative_path(notebook):
    """A kernel's working directory is wherever JupyterLab started it: project files come from
    ``rftlab.runs.paths`` (the quick-mode run below proves it; this names the line when it fails)."""
    text = notebook.read_text(encoding="utf-8")
    code = [c.source for c in jupytext.read(notebook).cells if c.cell_type == "code"]
    for source in code:
        for bad in ('"data/', "'data/", '"runs/', "'runs/", '"notebooks/', '"reports/'):
            assert bad not in source, f"{notebook.name}: relative project path {bad}… in a code cell"
    assert text  # the notebook was read


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_from_the_notebooks_folder_and_writes_only_to_the_run_store(notebook, tmp_path):
    store = tmp_path / "store"
    before = tree_snapshot(PROJECT_ROOT)
    (built,) = build_reports(
        [notebook],
        out_dir=tmp_path / "reports",
        quick=True,
        cwd=NOTEBOOKS_DIR,
        env={"RFTLAB_RUNS_ROOT": str(store)},
    )
    after = tree_snapshot(PROJECT_ROOT)
    text = built.report.read_text()
    assert built.report.name == f"{report_name(notebook)}.md"
    assert "Traceback" not in text, "a report never shows an error traceback"
    assert "|" in text or built.figures > 0, "a report shows at least one table or figure"
    assert report_problems(text) == []
    written = sorted(p for p in set(after) | set(before) if after.get(p) != before.get(p))
    assert written == [], f"{notebook.name} wrote outside its run store: {written[:10]}"
    if notebook.name in ("02_memory.py", "03_gs1.py"):  # the notebooks that launch runs
        assert any(store.rglob("run.json")), f"{notebook.name} wrote no run into the run store it was given"
