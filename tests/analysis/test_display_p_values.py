"""p-values are never printed with a sign (issue 33, item 7): ``fixed_digits_table(df, signed=...)`` signs the
difference columns only, refuses to sign a p-value column, and leaves numeric strings as written — unlike
``to_markdown(floatfmt="+.3f")``, which printed ``+0.454`` for a sign test's p."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.analysis.display import fixed_digits_table, is_p_value_column


def _cells(markdown: str) -> list[list[str]]:
    lines = markdown.splitlines()
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[:1] + lines[2:]]


def test_the_floatfmt_route_signs_p_values_and_the_helper_does_not():
    df = pd.DataFrame(
        {"difference": ["a − b", "c − d"], "mean": [0.0875, -0.4], "sign test p": ["0.454", "1.000"]}
    )
    assert "+0.454" in df.to_markdown(index=False, floatfmt="+.3f")  # the defect, as the arena report had it
    header, *rows = _cells(fixed_digits_table(df, signed=("mean",)))
    assert header == ["difference", "mean", "sign test p"]
    assert rows == [["a − b", "+0.087", "0.454"], ["c − d", "-0.400", "1.000"]]


@pytest.mark.parametrize("name", ["p", "sign test p", "sign-flip p", "p-value", "p_value", "p value", "P"])
def test_a_p_value_column_cannot_be_signed(name):
    assert is_p_value_column(name)
    with pytest.raises(ValueError, match="no direction"):
        fixed_digits_table(pd.DataFrame({name: [0.5]}), signed=(name,))


@pytest.mark.parametrize("name", ["mean", "reward", "gap", "top_p", "policy", "slope per epoch"])
def test_other_columns_are_not_p_values(name):
    assert not is_p_value_column(name)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=5),
    st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=5),
)
def test_signed_differences_and_unsigned_p_values(diffs, ps):
    n = min(len(diffs), len(ps))
    df = pd.DataFrame({"mean": diffs[:n], "p": ps[:n]})
    _, *rows = _cells(fixed_digits_table(df, signed=("mean",)))
    for (mean, p), d, q in zip(rows, diffs, ps, strict=False):
        assert mean[0] in "+-" and float(mean) == pytest.approx(round(d, 3) + 0.0, abs=1e-12)
        assert p[0].isdigit() and float(p) == pytest.approx(round(q, 3), abs=1e-12)
