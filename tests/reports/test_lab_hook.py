"""``rftlab.reports.lab.strip_language_info``, the pre-save hook ``make setup`` registers: a paired
notebook loses ``metadata.language_info`` (and only that); unpaired notebooks and other files are kept."""

from __future__ import annotations

import copy

import nbformat
from hypothesis import given
from hypothesis import strategies as st

from rftlab.reports.lab import strip_language_info

PAIRED = {
    "jupytext": {"formats": "ipynb,py:percent"},
    "kernelspec": {"name": "python3", "display_name": "Python 3 (rftlab)"},
}
INFO = {"name": "python", "version": "3.11.7", "pygments_lexer": "ipython3"}


def _model(metadata: dict) -> dict:
    nb = nbformat.v4.new_notebook(metadata=copy.deepcopy(metadata))
    nb.cells.append(nbformat.v4.new_code_cell("x = 1"))
    return {"type": "notebook", "format": "json", "content": nb}


def test_a_paired_notebook_is_saved_without_language_info():
    model = _model({**PAIRED, "language_info": INFO})
    strip_language_info(model=model, path="notebooks/02_memory.ipynb", contents_manager=None)
    assert model["content"]["metadata"] == PAIRED
    assert model["content"]["cells"][0]["source"] == "x = 1"  # the cells are untouched


def test_an_unpaired_notebook_and_other_files_are_left_as_they_are():
    unpaired = _model(
        {"kernelspec": {"name": "python3", "display_name": "Python 3 (rftlab)"}, "language_info": INFO}
    )
    strip_language_info(model=unpaired, path="mine.ipynb")
    assert unpaired["content"]["metadata"]["language_info"] == INFO
    text = {"type": "file", "format": "text", "content": '{"metadata": {"language_info": 1}}'}
    strip_language_info(model=copy.deepcopy(text), path="notes.json")
    strip_language_info(model=None, path="")  # Jupyter may call hooks without a model: no error


@given(
    st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=4)
)
def test_any_other_metadata_survives(extra):
    metadata = {**extra, **PAIRED, "language_info": INFO}
    model = _model(metadata)
    strip_language_info(model=model, path="n.ipynb")
    expected = {k: v for k, v in metadata.items() if k != "language_info"}
    assert model["content"]["metadata"] == expected
