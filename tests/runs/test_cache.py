"""The content-addressed cache (``rftlab.runs.cache``): a hit returns what the miss computed, any change of
the key is a miss, a damaged entry is recomputed, and ``RFTLAB_NO_CACHE=1`` forces a computation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.runs.cache import cache_path, cached_json


def _counter():
    calls = []

    def compute():
        calls.append(1)
        return {"table": [{"b": 2, "a": 1}], "note": "x", "tuple": (1, 2)}

    return calls, compute


def test_a_hit_returns_what_the_miss_computed_in_the_same_key_order(tmp_path):
    calls, compute = _counter()
    first, hit1 = cached_json("t", {"spec": "s", "reps": 10}, compute, root=tmp_path)
    second, hit2 = cached_json(
        "t", {"reps": 10, "spec": "s"}, compute, root=tmp_path
    )  # same key, other order
    assert (hit1, hit2, len(calls)) == (False, True, 1)
    assert first == second == {"table": [{"b": 2, "a": 1}], "note": "x", "tuple": [1, 2]}
    assert list(second["table"][0]) == ["b", "a"]  # a table's columns keep their order


def test_any_change_of_the_key_is_a_miss(tmp_path):
    calls, compute = _counter()
    cached_json("t", {"spec": "s", "code": "c1"}, compute, root=tmp_path)
    cached_json("t", {"spec": "s", "code": "c2"}, compute, root=tmp_path)
    cached_json("u", {"spec": "s", "code": "c1"}, compute, root=tmp_path)
    assert len(calls) == 3


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=200))
def test_a_damaged_entry_is_recomputed_and_replaced(tmp_path_factory, junk):
    root = tmp_path_factory.mktemp("cache")
    calls, compute = _counter()
    key = {"spec": "s"}
    cached_json("t", key, compute, root=root)
    cache_path("t", key, root).write_bytes(junk)
    value, hit = cached_json("t", key, compute, root=root)
    assert not hit and len(calls) == 2 and value["note"] == "x"
    assert cached_json("t", key, compute, root=root)[1]  # replaced by a good entry


def test_an_entry_holding_another_key_is_not_trusted(tmp_path):
    calls, compute = _counter()
    cached_json("t", {"spec": "s"}, compute, root=tmp_path)
    path = cache_path("t", {"spec": "s"}, tmp_path)
    entry = json.loads(path.read_text())
    entry["key"] = {"spec": "other"}
    entry["value"] = {"forged": True}
    path.write_text(json.dumps(entry))
    value, hit = cached_json("t", {"spec": "s"}, compute, root=tmp_path)
    assert not hit and "forged" not in value


def test_no_cache_forces_a_computation(tmp_path, monkeypatch):
    calls, compute = _counter()
    cached_json("t", {"spec": "s"}, compute, root=tmp_path)
    monkeypatch.setenv("RFTLAB_NO_CACHE", "1")
    assert cached_json("t", {"spec": "s"}, compute, root=tmp_path)[1] is False
    assert len(calls) == 2


def test_a_kind_cannot_leave_the_cache_folder(tmp_path):
    with pytest.raises(ValueError, match="letters"):
        cache_path("../x", {"a": 1}, tmp_path)


def test_gs1_design_is_cached_and_a_fresh_computation_equals_the_cached_one(monkeypatch):
    from rftlab.studies.gs1 import DEFAULT_SPEC, design, load_spec

    spec = load_spec(DEFAULT_SPEC)
    misses = []
    first = design(spec, on_miss=lambda: misses.append(1))
    second = design(spec, on_miss=lambda: misses.append(1))
    assert (first.cached, second.cached, len(misses)) == (False, True, 1)
    monkeypatch.setenv("RFTLAB_NO_CACHE", "1")
    fresh = design(spec)
    assert fresh.model_copy(update={"cached": True}) == second
