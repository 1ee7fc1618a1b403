"""Malformed validation rows given to `rftlab arena eval --validation-data` give one error line naming the
file and line, never a traceback (issue 24 class 4)."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.cli import main
from rftlab.rollout.arena.sft_data import SftConfig, build_rows
from rftlab.studies.arena import check_sft_rows

ROWS = build_rows(SftConfig(num_seeds=12, targeted_mechanics_per_kind=1, targeted_silence_examples=1)).rows[
    :6
]

leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6))
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2), max_leaves=4)  # fmt: skip


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(ROWS[0]) if p]


def _replace(row, path, new):
    row = copy.deepcopy(row)
    node = row
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return row


def test_the_real_rows_are_accepted():
    check_sft_rows(ROWS, "validation.jsonl")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(path=st.sampled_from(PATHS), new=values)
def test_one_field_replaced_is_accepted_and_scored_or_refused_in_one_line(path, new, tmp_path, capsys):
    rows = [ROWS[1], _replace(ROWS[0], path, new)]
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    code = main(["arena", "eval", "--provider", "oracle", "--case-stride", "60", "--validation-data", str(data),
                 "--output-dir", str(out), "--force"])  # fmt: skip
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    if code == 2:
        assert captured.err.count("\n") == 1 and "validation.jsonl:2" in captured.err
    else:
        assert code == 0 and (out / "validation.jsonl").is_file()


def test_rows_the_scorer_could_not_read_are_named():
    import pytest

    act = (
        next(r for r in ROWS if r["metadata"]["phase"] == "ACT")
        if any(r["metadata"]["phase"] == "ACT" for r in ROWS)
        else None
    )
    broadcast = next(r for r in ROWS if r["metadata"]["phase"] == "BROADCAST")
    bad_target = _replace(
        broadcast, ("messages", 2, "content"), json.dumps({"facts": 3, "intent": None, "request_resource": 0})
    )
    user = json.loads(broadcast["messages"][1]["content"])
    user["legal_actions"][0].pop("id")
    no_id = _replace(broadcast, ("messages", 1, "content"), json.dumps(user))
    for row, message in (
        (bad_target, "assistant target"),
        (no_id, "legal_actions with ids"),
        ([], "not an SFT row"),
    ):
        with pytest.raises(ValueError, match=message):
            check_sft_rows([broadcast, row], "validation.jsonl")
    assert act is None or check_sft_rows([act], "x") is None
