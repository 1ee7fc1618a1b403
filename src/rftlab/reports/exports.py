"""Every report's tables and figures in the formats a paper needs, beside the report.

For ``RESULTS_<name>.md`` the build writes into ``RESULTS_<name>_files/``:

- ``<name>_table_<k>.csv`` and ``<name>_table_<k>.tex`` for the k-th Markdown table of the report (k from 1,
  in reading order): the CSV holds the cells as the report prints them (escaped ``\\|`` unescaped); the
  LaTeX file is a ``booktabs`` ``tabular`` with the report's column alignment, LaTeX's special characters
  escaped, ``**bold**`` as ``\\textbf`` and ``code`` as ``\\texttt`` (Unicode kept: compile with XeLaTeX or
  LuaLaTeX, or ``\\usepackage[utf8]{inputenc}``);
- ``<name>_<cell>_<output>.svg`` beside each figure's PNG of the same name: the kernel renders every
  figure as PNG (shown in the report) and SVG (vector, for print), with a fixed ``svg.hashsalt`` and
  ``SOURCE_DATE_EPOCH``, so the bytes are the same on every rebuild.

Both are derived from what the report shows, so they are results of the same build and never differ from it.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from rftlab.runs.atomic import atomic_write_text

SVG = "image/svg+xml"
_SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def split_row(line: str) -> list[str]:
    """The cells of one Markdown table row (``| a | b \\| c |`` → ``["a", "b | c"]``)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    cells = re.split(r"(?<!\\)\|", body)
    return [cell.strip().replace("\\|", "|") for cell in cells]


def markdown_tables(text: str) -> list[tuple[list[str], list[str], list[list[str]]]]:
    """Every pipe table in ``text``, in order: (header, alignments ``l``/``r``/``c``, rows)."""
    lines = text.splitlines()
    tables = []
    i = 0
    while i < len(lines) - 1:
        if lines[i].lstrip().startswith("|") and _SEPARATOR.match(lines[i + 1].strip()):
            header = split_row(lines[i])
            aligns = []
            for spec in split_row(lines[i + 1]):
                right, left = spec.endswith(":"), spec.startswith(":")
                aligns.append("c" if left and right else "r" if right else "l")
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(split_row(lines[i]))
                i += 1
            tables.append((header, aligns, rows))
        else:
            i += 1
    return tables


def latex_cell(text: str) -> str:
    """One cell in LaTeX: special characters escaped, Markdown bold and code spans converted."""
    pieces = re.split(r"(`[^`]*`|\*\*[^*]+\*\*)", text)
    out = []
    for piece in pieces:
        if piece.startswith("`") and piece.endswith("`") and len(piece) >= 2:
            out.append(r"\texttt{" + _escape(piece[1:-1]) + "}")
        elif piece.startswith("**") and piece.endswith("**") and len(piece) >= 4:
            out.append(r"\textbf{" + _escape(piece[2:-2]) + "}")
        else:
            out.append(_escape(piece))
    return "".join(out)


def _escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def table_csv(header: list[str], rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def table_latex(header: list[str], aligns: list[str], rows: list[list[str]]) -> str:
    width = len(header)
    lines = [
        r"\begin{tabular}{" + "".join(aligns[:width]).ljust(width, "l") + "}",
        r"\toprule",
        " & ".join(latex_cell(c) for c in header) + r" \\",
        r"\midrule",
    ]
    for row in rows:
        cells = (row + [""] * width)[:width]
        lines.append(" & ".join(latex_cell(c) for c in cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def write_table_exports(body: str, name: str, files_dir: Path) -> int:
    """Write every table of the report ``body`` as CSV and LaTeX into ``files_dir``; how many."""
    tables = markdown_tables(body)
    for k, (header, aligns, rows) in enumerate(tables, start=1):
        atomic_write_text(files_dir / f"{name}_table_{k}.csv", table_csv(header, rows))
        atomic_write_text(files_dir / f"{name}_table_{k}.tex", table_latex(header, aligns, rows))
    return len(tables)


def take_svg_figures(nb, name: str) -> dict[str, str]:
    """Remove every SVG rendering from the executed notebook's outputs (the report shows the PNG) and
    return them by file name, ``<name>_<cell index>_<output index>.svg`` (the PNG's name, as nbconvert
    numbers it, with another extension)."""
    figures: dict[str, str] = {}
    for cell_index, cell in enumerate(nb.cells):
        for output_index, output in enumerate(cell.get("outputs", [])):
            data = output.get("data")
            if isinstance(data, dict) and SVG in data:
                svg = data.pop(SVG)
                figures[f"{name}_{cell_index}_{output_index}.svg"] = (
                    "".join(svg) if isinstance(svg, list) else svg
                )
    return figures
