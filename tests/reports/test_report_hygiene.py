"""Reports hold results only: no absolute path, warning, traceback or progress bar (``report_problems``),
stderr goes to the untracked build log, and the commit stamp does not change when reports are committed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rftlab.reports import (
    ReportRejected,
    build_reports,
    check_reports,
    code_state,
    render_markdown,
    report_problems,
)
from rftlab.runs.paths import REPORTS_DIR

CLEAN_LINES = [
    "| arm | mean | 95% CI |",
    "|:----|-----:|:-------|",
    "| A   | 0.31 | [0.28, 0.34] |",
    "GS1 passes at 95% confidence (n = 1319 items, margin 3 points).",
    "See `docs/gs1.md §4` and https://example.org/a/b/tmp/x for the method.",
    "![png](RESULTS_toy_files/RESULTS_toy_3_0.png)",
    "The run store lives in `runs/<experiment>/<arm>/<run_id>/`.",
    "It warns when a gate has too few replies (no warning is shown here).",
    "Progress: 12 of 12 epochs done, 100% of the budget.",
    "Poll every 60 s; a lineage took 12 steps and 2 s of latency is allowed.",
]
DIRTY_LINES = {
    "absolute path": [
        "    /tmp/ciclone/repo/.venv/lib/python3.11/site-packages/tqdm/auto.py:21: something",
        "wrote /home/alice/rftlab/runs/x/run.json",
        "model at /root/.cache/huggingface/hub",
        "see file:///work/main/reports/x.html",
        r"saved to C:\\Users\\bob\\rftlab",
    ],
    "warning": [
        "auto.py:21: TqdmWarning: IProgress not found. Please update jupyter and ipywidgets.",
        "models.py:1156: PydanticDeprecatedSince20: ... UserWarning: x",
        "WARNING: the gate spec is missing",
        "Traceback (most recent call last):",
        "  warnings.warn(msg)",
    ],
    "run id": ["| A | explicit | echo | 20261201T004720Z-dc89cb1f |"],
    "progress bar": [
        "Loading weights: 100%|██████████| 25/25 [00:00<00:00, 8938.50it/s]",
        "Writing model shards:   0%|          | 0/1 [00:00<?, ?it/s]",
        "epochs:  40%|####      | 4/10 [00:12<00:18,  3.01s/it]",
    ],
    "duration": [
        "The exact truth took 3 s of CPU together with the rest of this section's analysis.",
        "The study took 1.5 minutes.",
        "about 41 seconds of wall time",
    ],
}


@pytest.mark.parametrize("line", CLEAN_LINES)
def test_clean_lines_pass(line):
    assert report_problems(line) == []


@pytest.mark.parametrize(
    ("kind", "line"), [(kind, line) for kind, lines in DIRTY_LINES.items() for line in lines]
)
def test_each_kind_of_problem_is_named_with_its_line(kind, line):
    problems = report_problems("# Report\n\nfine\n" + line + "\n")
    assert problems, line
    assert any(p.startswith(f"line 4: {kind}:") for p in problems), problems


COMMITTED = sorted(REPORTS_DIR.glob("RESULTS_*.md"))


def test_there_are_committed_reports():
    assert len(COMMITTED) >= 7


@pytest.mark.parametrize("report", COMMITTED, ids=lambda p: p.name)
def test_every_committed_report_is_clean(report):
    problems = report_problems(report.read_text(encoding="utf-8"))
    assert problems == [], f"{report.name} (rebuild it with `make reports`):\n" + "\n".join(problems)


NOISY_NOTEBOOK = """# %% [markdown]
# # Noisy
# The result survives; the noise does not.

# %%
import sys
import warnings

from tqdm import tqdm

warnings.warn("something deprecated", DeprecationWarning, stacklevel=1)
print("loading from /tmp/some/machine/path", file=sys.stderr)
for _ in tqdm(range(3), disable=False, file=sys.stderr):
    pass
print("RESULT 42")
"""


def test_stderr_goes_to_the_build_log_not_the_report(tmp_path):
    notebook = tmp_path / "07_noisy.py"
    notebook.write_text(NOISY_NOTEBOOK)
    (built,) = build_reports([notebook], out_dir=tmp_path / "out", quick=True, env={"TQDM_DISABLE": "0"})
    text = built.report.read_text()
    assert "RESULT 42" in text and "The result survives" in text
    assert report_problems(text) == []
    assert "/tmp/some" not in text and "it/s" not in text
    log = [json.loads(line) for line in (tmp_path / "out" / "build.log").read_text().splitlines()]
    assert len(log) == 1 and log[0]["report"] == "RESULTS_noisy.md"
    assert any("/tmp/some/machine/path" in chunk for chunk in log[0]["stderr"])
    assert log[0]["seconds"] > 0 and "seconds" not in text


def test_a_report_printing_a_machine_path_on_stdout_is_refused(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('x')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="saved to /home/me/x.json\n")]
    nb.cells = [cell]
    with pytest.raises(ReportRejected, match="absolute path"):
        render_markdown(
            nb, "RESULTS_x", tmp_path, Path("notebooks/09_x.py"), True, {"commit": "a" * 40, "dirty": False}
        )
    assert not (tmp_path / "RESULTS_x.md").exists()


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(repo), "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout


def test_the_stamp_names_the_last_input_change_so_committing_reports_keeps_it(tmp_path):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "reports").mkdir()
    _git(repo, "init", "-q")
    (repo / "src" / "a.py").write_text("x = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "code")
    code_commit = _git(repo, "rev-parse", "HEAD").strip()
    assert code_state(repo) == {"commit": code_commit, "dirty": False}
    (repo / "reports" / "RESULTS_a.md").write_text("report\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "reports")
    assert code_state(repo) == {"commit": code_commit, "dirty": False}  # reports are not inputs
    (repo / "src" / "a.py").write_text("x = 2\n")
    assert code_state(repo) == {"commit": code_commit, "dirty": True}
    (repo / "reports" / "RESULTS_a.md").write_text("changed\n")
    (repo / "src" / "a.py").write_text("x = 1\n")
    assert code_state(repo)["dirty"] is False  # a changed report does not make the inputs dirty


def test_check_reports_counts_problems(tmp_path, capsys):
    from rftlab.reports.inputs import report_inputs, write_record
    from rftlab.runs.paths import NOTEBOOKS_DIR

    head = "<!-- Generated -->\n<!-- rftlab code at commit aaaa; quick mode: no -->\n\n"
    write_record(tmp_path, "RESULTS_methods", report_inputs(NOTEBOOKS_DIR / "00_methods.py", False), 0)
    (tmp_path / "RESULTS_methods.md").write_text(head + "fine\n")
    assert check_reports(tmp_path) == 0
    (tmp_path / "RESULTS_methods.md").write_text(head + "0%|   | 0/1 [00:00<?, ?it/s]\n")
    assert check_reports(tmp_path) == 1
    assert "1 report(s), 1 problem(s), 0 stale" in capsys.readouterr().out


def test_a_table_row_cut_by_an_unescaped_pipe_is_named():
    table = "| check | detail |\n|:--|:--|\n| a | max |diff| 0 |\n| b | max \\|diff\\| 0 |\n\nprose | with a bar\n"
    problems = report_problems(table)
    assert problems == ["line 3: table row of 4 cells, header 2: | a | max |diff| 0 |"]


def test_markdown_tables_escape_pipes_in_text_so_the_row_keeps_its_cells():
    import pandas as pd

    from rftlab.analysis.display import fixed_digits_table, markdown_table

    df = pd.DataFrame([{"check": "loss", "detail": "max |diff| 0.0", "value": 0.5}])
    for rendered in (markdown_table(df), fixed_digits_table(df)):
        assert "max \\|diff\\| 0.0" in rendered
        assert report_problems(rendered) == []


def test_every_notebook_names_the_kernel_make_setup_registers():
    """A notebook naming another kernel is rewritten by JupyterLab on its first save (a dirty tree)."""
    from rftlab.reports import KERNEL_DISPLAY_NAME
    from rftlab.runs.paths import PROJECT_ROOT

    notebooks = sorted((PROJECT_ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for nb in notebooks:
        assert json.loads(nb.read_text())["metadata"]["kernelspec"]["display_name"] == KERNEL_DISPLAY_NAME, nb
        assert f"display_name: {KERNEL_DISPLAY_NAME}" in nb.with_suffix(".py").read_text(), nb
    assert f'--display-name "{KERNEL_DISPLAY_NAME}"' in (PROJECT_ROOT / "Makefile").read_text()
