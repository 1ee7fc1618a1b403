"""``rftlab.runs.strictjson``: JSON without non-finite constants, and one-line errors for spec files."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rftlab.runs.strictjson import read_json_file, refuse_constant

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_every_finite_json_value_reads_back(value):
    assert json.loads(json.dumps(value), parse_constant=refuse_constant) == value


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_constants_are_refused(constant):
    with pytest.raises(ValueError, match=f"non-finite number {constant}"):
        json.loads(f'{{"x": {constant}}}', parse_constant=refuse_constant)


class SpecError(Exception):
    pass


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "spec {path} does not exist"),
        (b"\xff\xfe", "cannot read spec {path}"),
        (b'{"lr": NaN}', "spec {path} is not JSON: non-finite number NaN"),
        (b"{not json", "spec {path} is not JSON"),
        (b"[" * 100_000, "spec {path} is not JSON"),
    ],
)
def test_a_bad_file_gives_one_line_naming_it(tmp_path, content, message):
    path = tmp_path / "spec.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SpecError) as info:
        read_json_file(path, "spec", SpecError)
    text = str(info.value)
    assert text.startswith(message.format(path=path)) and "\n" not in text


def test_a_good_file_is_read(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text('{"a": [1, 2.5, "x"]}', encoding="utf-8")
    assert read_json_file(path, "spec") == {"a": [1, 2.5, "x"]}
