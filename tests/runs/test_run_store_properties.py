"""Property tests of every run-store file reader: any bytes, any JSON -> rows or the documented error."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.runs import CorruptRunError, RunStore, collect_metrics, load_run
from rftlab.runs.store import read_jsonl

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
# Bytes that look like JSONL (often valid, often damaged) as well as arbitrary bytes.
jsonl_like = st.lists(
    st.one_of(
        json_values.map(lambda v: json.dumps(v).encode()),
        st.dictionaries(st.sampled_from(["step", "x", "epoch"]), json_values, max_size=3).map(
            lambda d: json.dumps(d).encode()
        ),
        st.binary(max_size=12),
    ),
    max_size=5,
).map(lambda parts: b"\n".join(parts)) | st.binary(max_size=80)


@pytest.fixture
def store_run(tmp_path):
    """One run folder per test; every example rewrites the files it reads (creating a run per example
    would spend the time budget on git calls)."""
    root = tmp_path / "runs"
    return root, RunStore(root).create_run("e", "a", {"k": 1}, run_id="r")


def _reset(run):
    for name in ("metrics.jsonl", "eval.jsonl", "metrics.damaged"):
        (run.path / name).unlink(missing_ok=True)


@SETTINGS
@given(data=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_load_run_gives_a_run_or_corrupt_run_error(store_run, data):
    root, run = store_run
    original = (run.path / "run.json").read_bytes()
    try:
        (run.path / "run.json").write_bytes(data)
        try:
            loaded = load_run(run.path)
        except CorruptRunError as exc:
            assert str(run.path / "run.json") in exc.problems
        else:
            assert loaded.record.run_id
        runs, problems = RunStore(root).scan()
        assert len(runs) + len(problems) == 1
    finally:
        (run.path / "run.json").write_bytes(original)


@SETTINGS
@given(data=jsonl_like)
def test_jsonl_readers_give_rows_or_corrupt_run_error(store_run, data):
    root, run = store_run
    _reset(run)
    try:
        for name in ("metrics.jsonl", "eval.jsonl"):
            (run.path / name).write_bytes(data)
        (run.path / "rollouts").mkdir(exist_ok=True)
        (run.path / "rollouts" / "epoch-0.jsonl").write_bytes(data)
        outcomes = []
        for read in (run.metrics, run.eval_items, lambda: run.rollouts(0)):
            try:
                rows = read()
            except CorruptRunError as exc:
                assert "line " in next(iter(exc.problems.values()))
                outcomes.append(None)
            else:
                assert all(isinstance(row, dict) for row in rows)
                # Whatever is accepted is strict JSON (no NaN/Infinity sneaks through).
                json.dumps(rows, allow_nan=False)
                outcomes.append(rows)
        assert outcomes[0] == outcomes[1] == outcomes[2]
        frame, problems = collect_metrics(root)
        assert (outcomes[0] is None) == bool(problems)
    finally:
        _reset(run)


@SETTINGS
@given(
    existing=jsonl_like, row=st.dictionaries(st.text(max_size=6), json_values, max_size=3), step=st.integers()
)
def test_append_metrics_never_glues_and_never_loses(store_run, existing, row, step):
    root, run = store_run
    _reset(run)
    try:
        path = run.path / "metrics.jsonl"
        path.write_bytes(existing)
        try:
            before = read_jsonl(path)
        except CorruptRunError:
            before = None
        try:
            run.append_metrics({**row, "step": step})
        except CorruptRunError:
            assert before is None  # only a damaged file is refused
            assert path.read_bytes() == existing  # and it is left exactly as it was
            return
        except ValueError as exc:
            assert "step" in str(exc) or "field" in str(exc) or "JSON" in str(exc)
            assert path.read_bytes() == existing
            return
        assert before is not None
        after = path.read_bytes()
        assert after.startswith(existing)
        rows = read_jsonl(path)
        assert rows[: len(before)] == before and len(rows) == len(before) + 1
        assert rows[-1]["step"] == step
    finally:
        _reset(run)


@SETTINGS
@given(existing=jsonl_like)
def test_repair_keeps_every_byte(store_run, existing):
    root, run = store_run
    _reset(run)
    try:
        path = run.path / "metrics.jsonl"
        path.write_bytes(existing)
        moved = run.repair_metrics()
        damaged = run.path / "metrics.damaged"
        kept_lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
        moved_lines = damaged.read_bytes().split(b"\n")[:-1] if damaged.exists() else []
        original = [line for line in existing.split(b"\n") if line.strip()]
        assert sorted(kept_lines + moved_lines) == sorted(original)
        assert len(moved_lines) == len(moved)
        read_jsonl(path)  # the kept file is clean
    finally:
        _reset(run)
