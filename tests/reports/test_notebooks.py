"""Every notebook runs in quick mode, renders its report, and is paired with an in-sync .ipynb."""

from __future__ import annotations

import jupytext
import pytest

from rftlab.reports import build_reports, discover_notebooks, report_name
from rftlab.runs.paths import PROJECT_ROOT

NOTEBOOKS = discover_notebooks()


def test_the_methods_notebook_exists():
    assert PROJECT_ROOT / "notebooks" / "00_methods.py" in NOTEBOOKS


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_paired_and_in_sync(notebook):
    paired = notebook.with_suffix(".ipynb")
    assert paired.exists(), f"{paired.name} is missing: run `make sync`"
    source_cells = [c.source for c in jupytext.read(notebook).cells]
    paired_cells = [c.source for c in jupytext.read(paired).cells]
    assert source_cells == paired_cells, f"{paired.name} is out of sync with {notebook.name}: run `make sync`"


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_quick_mode_and_renders(notebook, tmp_path):
    (built,) = build_reports([notebook], out_dir=tmp_path, quick=True)
    text = built.report.read_text()
    assert built.report.name == f"{report_name(notebook)}.md"
    assert "Traceback" not in text, "a report never shows an error traceback"
    assert "|" in text or built.figures > 0, "a report shows at least one table or figure"
