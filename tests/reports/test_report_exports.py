"""Report exports (``rftlab.reports.exports``): every table as CSV and LaTeX, every figure as SVG, read
back and checked against the table the report prints."""

from __future__ import annotations

import csv
import io

import nbformat
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.analysis.display import markdown_table
from rftlab.reports.exports import (
    latex_cell,
    markdown_tables,
    split_row,
    table_csv,
    table_latex,
    take_svg_figures,
    write_table_exports,
)

# cell text as a notebook may print it: anything on one line, pipes and LaTeX specials included
CELL = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\n\r`*"), max_size=12
).map(str.strip)


def test_a_row_splits_on_unescaped_pipes_only():
    assert split_row("| a | max \\|diff\\| 0 | c |") == ["a", "max |diff| 0", "c"]


def test_the_projects_own_markdown_table_parses_back():
    frame = pd.DataFrame([{"arm": "GS1 | kernel", "acc": 0.5}, {"arm": "GRPO", "acc": 0.25}])
    ((header, aligns, rows),) = markdown_tables(markdown_table(frame))
    assert header == ["arm", "acc"] and rows == [["GS1 | kernel", "0.500"], ["GRPO", "0.250"]]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(CELL, CELL), min_size=1, max_size=5))
def test_a_rendered_table_parses_back_to_its_cells(rows):
    # rendered as the report's tables are (pipes in text escaped), by hand: tabulate would read "INF" as a
    # number, which is its business, not the parser's
    def esc(cell):
        return cell.replace("|", "\\|")

    lines = ["| left | right |", "|:--|--:|", *[f"| {esc(a)} | {esc(b)} |" for a, b in rows]]
    text = "intro\n\n" + "\n".join(lines) + "\n\nafter | not a table\n"
    ((header, aligns, parsed),) = markdown_tables(text)
    assert header == ["left", "right"] and aligns == ["l", "r"]
    assert parsed == [[a, b] for a, b in rows]
    back = list(csv.reader(io.StringIO(table_csv(header, parsed))))
    assert back == [header, *[[a, b] for a, b in rows]]


@settings(max_examples=120, deadline=None)
@given(CELL)
def test_every_latex_special_character_is_escaped(text):
    out = latex_cell(text)
    body = out
    for command in (r"\textbackslash{}", r"\textasciitilde{}", r"\textasciicircum{}"):
        body = body.replace(command, "")
    for ch in "&%$#_{}":
        body = body.replace("\\" + ch, "")
    assert not any(ch in body for ch in "&%$#_{}~^\\"), out


def test_latex_keeps_bold_and_code_and_the_columns_alignment():
    assert latex_cell("**GS1** uses `b_i`") == r"\textbf{GS1} uses \texttt{b\_i}"
    text = "| a | n |\n|:--|--:|\n| x_1 | 5% |\n"
    ((header, aligns, rows),) = markdown_tables(text)
    assert aligns == ["l", "r"]
    tex = table_latex(header, aligns, rows)
    assert tex.splitlines() == [
        r"\begin{tabular}{lr}",
        r"\toprule",
        r"a & n \\",
        r"\midrule",
        r"x\_1 & 5\% \\",
        r"\bottomrule",
        r"\end{tabular}",
    ]


def test_exports_are_written_per_table_in_reading_order(tmp_path):
    body = "| a |\n|:--|\n| 1 |\n\ntext\n\n| b | c |\n|--:|--:|\n| 2 | 3 |\n"
    assert write_table_exports(body, "RESULTS_x", tmp_path) == 2
    assert (tmp_path / "RESULTS_x_table_1.csv").read_text() == "a\n1\n"
    assert (tmp_path / "RESULTS_x_table_2.csv").read_text() == "b,c\n2,3\n"
    assert r"\begin{tabular}{rr}" in (tmp_path / "RESULTS_x_table_2.tex").read_text()


def test_svg_renderings_leave_the_notebook_and_take_the_pngs_name():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# t"),
        nbformat.v4.new_code_cell(
            "plot",
            outputs=[
                nbformat.v4.new_output("stream", name="stdout", text="x"),
                nbformat.v4.new_output("display_data", data={"image/png": "iVBO", "image/svg+xml": "<svg/>"}),
            ],
        ),
    ]
    assert take_svg_figures(nb, "RESULTS_t") == {"RESULTS_t_1_1.svg": "<svg/>"}
    assert (
        "image/svg+xml" not in nb.cells[1].outputs[1]["data"]
        and "image/png" in nb.cells[1].outputs[1]["data"]
    )


@pytest.mark.slow
def test_a_built_report_has_its_figure_as_svg_and_its_table_as_csv(tmp_path):
    from rftlab.reports import build_reports

    notebook = tmp_path / "nb" / "01_fig.py"
    notebook.parent.mkdir()
    notebook.write_text(
        "# %%\nimport matplotlib.pyplot as plt\nimport pandas as pd\nfrom IPython.display import Markdown, display\n"
        "from rftlab.analysis.display import markdown_table\n"
        "display(Markdown(markdown_table(pd.DataFrame([{'arm': 'GS1', 'acc': 0.5}]))))\n"
        "fig, ax = plt.subplots()\nax.plot([0, 1], [1, 0])\nplt.show()\n"
    )
    (built,) = build_reports([notebook], tmp_path / "reports", quick=True)
    files = tmp_path / "reports" / "RESULTS_fig_files"
    pngs, svgs = sorted(files.glob("*.png")), sorted(files.glob("*.svg"))
    assert built.figures == 1 and [p.stem for p in pngs] == [s.stem for s in svgs]
    assert svgs[0].read_text().lstrip().startswith("<?xml") and "<svg" in svgs[0].read_text()
    assert list(csv.reader(open(files / "RESULTS_fig_table_1.csv"))) == [["arm", "acc"], ["GS1", "0.500"]]
    assert "1 figure(s) as SVG" in built.report.read_text()
