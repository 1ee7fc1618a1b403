"""The notebook → report pipeline: execution, hidden code, Markdown tables, PNG figures, failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from rftlab.reports import NotebookFailed, build_reports, discover_notebooks, report_name

TOY_NOTEBOOK = """# %% [markdown]
# # Toy report
# Prose survives into the report.

# %% tags=["parameters"]
import os
QUICK = os.environ.get("RFTLAB_QUICK") == "1"
N = 5 if QUICK else 500

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

SECRET_CODE_MARKER = "code cells are hidden"
display(Markdown(pd.DataFrame({"n": [N], "quick": [QUICK]}).to_markdown(index=False)))

# %%
fig, ax = plt.subplots()
ax.plot(range(N))
plt.show()
"""


def test_report_name_and_discovery(tmp_path):
    assert report_name(Path("notebooks/00_methods.py")) == "RESULTS_methods"
    with pytest.raises(ValueError):
        report_name(Path("notebooks/methods.py"))
    for name in ("10_b.py", "02_a.py", "helper.py"):
        (tmp_path / name).write_text("")
    assert [p.name for p in discover_notebooks(tmp_path)] == ["02_a.py", "10_b.py"]


def test_build_report_hides_code_and_keeps_tables_and_figures(tmp_path):
    notebook = tmp_path / "07_toy.py"
    notebook.write_text(TOY_NOTEBOOK)
    (built,) = build_reports([notebook], out_dir=tmp_path / "reports", quick=True)
    text = built.report.read_text()
    assert built.report.name == "RESULTS_toy.md"
    assert "# Toy report" in text and "Prose survives" in text
    assert "SECRET_CODE_MARKER" not in text and "import pandas" not in text
    assert "|   n | quick   |" in text and "|   5 | True    |" in text
    assert built.figures == 1
    (png,) = (tmp_path / "reports" / "RESULTS_toy_files").glob("*.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"RESULTS_toy_files/{png.name}" in text


def test_a_failing_notebook_names_itself(tmp_path):
    notebook = tmp_path / "01_broken.py"
    notebook.write_text("# %%\nraise RuntimeError('boom in cell')\n")
    with pytest.raises(NotebookFailed, match="01_broken.py"):
        build_reports([notebook], out_dir=tmp_path / "out", quick=True)
    assert not (tmp_path / "out" / "RESULTS_broken.md").exists()
