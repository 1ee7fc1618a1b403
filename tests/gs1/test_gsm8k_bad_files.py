"""``$RFTLAB_GSM8K`` files that are not GSM8K: every bad file, row or split is a ``BackendUnavailable``
naming the file and the row (never a third-party exception), and the row parser accepts exactly the rows
with a string question and a string answer holding a ``#### N`` line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.envs.gs1.task import GSM8KRowError, gsm8k_final_answer, gsm8k_problems
from rftlab.launch.gs1.backend import GSM8K_ENV, BackendUnavailable, load_gsm8k_task

GOOD = {"question": "Two and two?", "answer": "2+2=4\n#### 4"}


def _never_reachable():
    raise AssertionError("the Hub must not be asked when a local folder is named")


def _load(tmp_path, monkeypatch, train_bytes, test_bytes=None, suffix=".jsonl"):
    (tmp_path / f"train{suffix}").write_bytes(train_bytes)
    (tmp_path / f"test{suffix}").write_bytes(
        json.dumps(GOOD).encode() + b"\n" if test_bytes is None else test_bytes
    )
    monkeypatch.setenv(GSM8K_ENV, str(tmp_path))
    with pytest.raises(BackendUnavailable) as caught:
        load_gsm8k_task(reachable=_never_reachable)
    message = str(caught.value)
    assert "\n" not in message and GSM8K_ENV in message
    return message


def _lines(*rows):
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


@pytest.mark.parametrize(
    ("train", "message"),
    [
        (_lines(GOOD, {"question": "q"}), "train.jsonl line 2: no 'answer' field"),
        (_lines({"question": "q", "answer": 4}), "train.jsonl line 1: 'answer' must be a string, got int"),
        (_lines(GOOD, {"question": "q", "answer": None}), "line 2: 'answer' must be a string, got null"),
        (_lines({"question": "q", "answer": "four"}), "line 1: 'answer' has no '#### <final answer>' line"),
        (_lines(GOOD) + b"{not json\n", "train.jsonl line 2: not a JSON object"),
        (_lines(GOOD) + b'{"question": "\xff"}\n', "train.jsonl line 2: byte 0xff is not UTF-8"),
        (_lines(GOOD) + b"[1, 2]\n", "train.jsonl line 2: not an object (got list)"),
    ],
)
def test_bad_jsonl_rows_name_the_file_and_the_line(tmp_path, monkeypatch, train, message):
    assert message in _load(tmp_path, monkeypatch, train)


def test_an_empty_split_is_named(tmp_path, monkeypatch):
    message = _load(tmp_path, monkeypatch, _lines(GOOD), test_bytes=b"\n")
    assert "the test split is empty" in message and "test.jsonl" in message


def test_a_parquet_of_random_bytes_and_a_bad_parquet_row_are_named(tmp_path, monkeypatch):
    import random

    import pandas as pd

    noise = random.Random(0).randbytes(512)
    message = _load(tmp_path, monkeypatch, noise, test_bytes=noise, suffix=".parquet")
    assert "train.parquet: not a readable parquet file" in message
    pd.DataFrame([GOOD, {"question": "q", "answer": None}]).to_parquet(tmp_path / "train.parquet")
    pd.DataFrame([GOOD]).to_parquet(tmp_path / "test.parquet")
    with pytest.raises(
        BackendUnavailable, match=r"train\.parquet row 2: 'answer' must be a string, got null"
    ):
        load_gsm8k_task(reachable=_never_reachable)


def test_a_file_instead_of_a_folder_is_refused(tmp_path, monkeypatch):
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv(GSM8K_ENV, str(tmp_path / "f"))
    with pytest.raises(BackendUnavailable, match=r"is not a folder \(it is a file\)"):
        load_gsm8k_task(reachable=_never_reachable)


json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
answers = st.text(max_size=30) | st.builds(
    lambda a, b: f"{a}\n#### {b}", st.text(max_size=10), st.text(max_size=8)
)
rows = st.dictionaries(st.sampled_from(["question", "answer", "other"]), json_scalars | answers, max_size=3)


@settings(max_examples=300, deadline=None)
@given(st.one_of(rows, json_scalars, st.lists(json_scalars, max_size=2)))
def test_the_row_parser_returns_a_final_answer_or_says_why(row):
    try:
        final = gsm8k_final_answer(row)
    except GSM8KRowError as exc:
        assert str(exc) and "\n" not in str(exc)
        assert not (
            isinstance(row, dict)
            and isinstance(row.get("question"), str)
            and isinstance(row.get("answer"), str)
            and "####" in row["answer"]
            and row["answer"].rsplit("####", 1)[1].strip(" :,\n")
        ) or "nothing after" in str(exc)
    else:
        assert isinstance(final, str) and final
        assert isinstance(row["question"], str) and "####" in row["answer"]


@settings(max_examples=100, deadline=None)
@given(st.lists(rows, min_size=1, max_size=5))
def test_gsm8k_problems_names_the_split_and_the_row_counted_from_one(batch):
    try:
        problems = gsm8k_problems(batch, "test")
    except GSM8KRowError as exc:
        bad = next(i for i, r in enumerate(batch) if _raises(r))
        assert str(exc).startswith(f"test row {bad + 1}: ")
    else:
        assert [p.item_id for p in problems] == [f"test-{i}" for i in range(len(batch))]


def _raises(row):
    try:
        gsm8k_final_answer(row)
    except GSM8KRowError:
        return True
    return False


@pytest.mark.parametrize("layout", ["missing", "empty"])
def test_the_cli_says_it_in_one_line_without_a_traceback(tmp_path, monkeypatch, capsys, no_network, layout):
    """`gs1 preflight --backend tinker` on a locally served model reaches the GSM8K loader first."""
    from rftlab.cli import main
    from rftlab.studies.gs1 import DEFAULT_SPEC

    spec = json.loads(DEFAULT_SPEC.read_text(encoding="utf-8"))
    spec["base_model"] = "rftlab/tiny-qwen3"  # a built-in model: its tokenizer is on this machine
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    folder = tmp_path / "gsm8k"
    if layout == "empty":
        folder.mkdir()
        (folder / "train.jsonl").write_text("")
        (folder / "test.jsonl").write_text(json.dumps(GOOD) + "\n")
    monkeypatch.setenv(GSM8K_ENV, str(folder))
    monkeypatch.setenv("TINKER_API_KEY", "not-a-real-key")
    monkeypatch.setenv("TINKER_BASE_URL", "http://127.0.0.1:9")
    argv = [
        "gs1",
        "preflight",
        "--backend",
        "tinker",
        "--spec",
        str(spec_path),
        "--root",
        str(tmp_path / "runs"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (
        "is not a folder (nothing is there)" if layout == "missing" else "the train split is empty"
    ) in err
