"""The argument types of ``rftlab.cli.argtypes``: what each accepts and refuses, and the refusal end to end.

Each property states the constraint independently (plain comparisons) and checks the type against it."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from option_errors import refused_option

from rftlab.cli import argtypes

BOUND = st.integers(-(10**6), 10**6)
TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=30)


def refusal(kind, text: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        kind(text)
    return str(refused.value)


# -- integers ------------------------------------------------------------------------------------------
@given(lo=BOUND, span=st.integers(0, 10**6), n=st.integers(-(10**7), 10**7))
def test_an_integer_range_accepts_exactly_its_members(lo, span, n):
    hi = lo + span
    kind = argtypes.integer(lo, hi)
    if lo <= n <= hi:
        assert kind(str(n)) == n
    else:
        assert refusal(kind, str(n)) == f"must be an integer from {lo} to {hi}, got '{n}'"


@given(n=st.integers(-(10**30), 10**30))
def test_non_negative_and_positive_integers(n):
    for kind, low, words in (
        (argtypes.NON_NEGATIVE_INT, 0, "non-negative"),
        (argtypes.POSITIVE_INT, 1, "positive"),
    ):
        if n >= low:
            assert kind(str(n)) == n
        else:
            assert refusal(kind, str(n)) == f"must be a {words} integer, got '{n}'"


@given(text=TEXT | st.from_regex(r"\A[ +-]?[0-9_]{1,6}(\.0*)?\s?\Z"))
def test_any_text_is_an_accepted_integer_or_a_refusal_naming_the_constraint(text):
    kind = argtypes.integer(-50, 50)
    try:
        value = kind(text)
    except argparse.ArgumentTypeError as exc:
        assert str(exc) == f"must be an integer from -50 to 50, got {text!r}"
        return
    assert isinstance(value, int) and -50 <= value <= 50
    assert float(text.replace("_", "")) == value  # the text names that integer


def test_integer_texts_pydantic_accepts():
    kind = argtypes.NON_NEGATIVE_INT
    assert [kind(t) for t in (" 7 ", "+7", "1_000", "7.0", "007")] == [7, 7, 1000, 7, 7]
    for text in ("7.5", "1e3", "0x10", "", "seven", "١٢"):
        assert "non-negative integer" in refusal(kind, text)


# -- numbers ---------------------------------------------------------------------------------------------
FLOAT = st.floats(allow_nan=True, allow_infinity=True)


@given(x=FLOAT, lo=st.floats(-10, 10), width=st.floats(0.001, 10))
def test_a_number_interval_accepts_finite_members_only(x, lo, width):
    hi = lo + width
    for kind, inside, text in (
        (argtypes.number(gt=lo, lt=hi), lo < x < hi, f"in ({lo:g}, {hi:g})"),
        (argtypes.number(ge=lo, le=hi), lo <= x <= hi, f"in [{lo:g}, {hi:g}]"),
        (argtypes.number(gt=lo), lo < x, f"> {lo:g}"),
        (argtypes.number(ge=lo, unit="seconds"), lo <= x, f"of seconds >= {lo:g}"),
    ):
        if math.isfinite(x) and inside:
            assert kind(repr(x)) == x
        else:
            assert refusal(kind, repr(x)) == f"must be a finite number {text}, got '{x!r}'"


def test_number_messages_and_notes():
    assert refusal(argtypes.number(gt=0, le=1e6), "nan") == "must be a finite number in (0, 1e+06], got 'nan'"
    margin = argtypes.number(gt=0, lt=1, note="differences lie in [-1, 1]")
    assert refusal(margin, "1") == "must be a finite number in (0, 1) (differences lie in [-1, 1]), got '1'"
    assert argtypes.number()("-1e300") == -1e300
    assert "finite number, got 'inf'" in refusal(argtypes.number(), "inf")


# -- choices, names, paths, URLs, JSON, EPOCH:CHUNK -----------------------------------------------------
@given(options=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5, unique=True), text=TEXT)
def test_one_of_accepts_exactly_its_options(options, text):
    kind = argtypes.one_of(options)
    for option in options:
        assert kind(option) == option
    if text in options:
        assert kind(text) == text
    else:
        assert refusal(kind, text) == f"must be one of {', '.join(map(repr, options))}, got {text!r}"


@given(text=TEXT)
def test_a_name_is_non_blank_and_bounded(text):
    kind = argtypes.nonblank(10)
    if text.strip() and len(text) <= 10:
        assert kind(text) == text
    else:
        assert refusal(kind, text) == f"must be a non-empty name of at most 10 characters, got {text!r}"


@given(epoch=st.integers(0, 10**9 - 1), chunk=st.integers(0, 10**9 - 1))  # 19 characters at most
def test_epoch_chunk_parses_two_non_negative_integers(epoch, chunk):
    assert argtypes.epoch_chunk()(f"{epoch}:{chunk}") == (epoch, chunk)


@given(text=TEXT)
def test_epoch_chunk_refuses_every_other_shape(text):
    kind = argtypes.epoch_chunk()
    epoch, sep, chunk = text.partition(":")
    well_formed = sep and len(text) <= 20 and all(p and p.isascii() and p.isdigit() for p in (epoch, chunk))
    if well_formed:
        assert kind(text) == (int(epoch), int(chunk))
    else:
        assert refusal(kind, text) == f"must be EPOCH:CHUNK, two non-negative integers, got {text!r}"


def test_paths(tmp_path):
    afile, missing = tmp_path / "a.json", tmp_path / "missing"
    afile.write_text('{"k": [1, 2.5, null]}')
    assert argtypes.existing_file("plan file")(str(afile)) == afile
    assert (
        refusal(argtypes.existing_file("plan file"), str(tmp_path))
        == f"must be an existing plan file, got '{tmp_path}'"
    )
    assert argtypes.existing_dir()(str(tmp_path)) == tmp_path
    assert refusal(argtypes.existing_dir("build one"), str(missing)) == (
        f"must be an existing folder (build one), got '{missing}'"
    )
    assert argtypes.folder()(str(tmp_path)) == tmp_path and argtypes.folder()(str(missing)) == missing
    assert refusal(argtypes.folder(), str(afile)) == (
        f"must be a folder or a new path, got '{afile}' (exists and is not a folder)"
    )
    figure = argtypes.file_suffix([".png", ".svg", ".pdf"])
    assert figure("out.PDF") == "out.PDF"
    assert refusal(figure, "out.txt") == "must be a .png, .svg or .pdf file, got 'out.txt'"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_a_json_file_holds_what_was_written(tmp_path, value):
    path = tmp_path / "v.json"
    path.write_text(json.dumps(value), encoding="utf-8")
    read = argtypes.json_file()(str(path))
    assert read.path == path and read.value == value


def test_a_json_file_that_is_not_json_names_the_parse_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bad.json").write_bytes(b"[1,")
    message = refusal(argtypes.json_file(), "bad.json")
    assert (
        message == "must be a readable JSON file, got 'bad.json' (Expecting value: line 1 column 4 (char 3))"
    )
    Path("bad.json").write_bytes(b"\xff")
    assert "can't decode byte 0xff" in refusal(argtypes.json_file(), "bad.json")


def test_http_urls():
    kind = argtypes.http_url("http://127.0.0.1:8011/v1")
    assert kind("https://example.org/v1") == "https://example.org/v1"
    for text in ("localhost:8000", "ftp://host/x", "http://", "/v1"):
        assert refusal(kind, text) == f"must be an http(s) URL such as http://127.0.0.1:8011/v1, got {text!r}"


def test_a_shown_value_is_cut_and_never_holds_a_credential(monkeypatch):
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-secret-value-123")
    message = refusal(argtypes.NON_NEGATIVE_INT, "fw-secret-value-123")
    assert "fw-secret-value-123" not in message and "***" in message
    assert refusal(argtypes.POSITIVE_INT, "9" * 300 + "x").endswith(f"got '{'9' * 197}...'")


def test_a_deferred_type_is_built_once_when_first_used():
    built = []

    def build():
        built.append(1)
        return argtypes.integer(1, 3)

    kind = argtypes.deferred(build)
    assert built == []
    assert kind("2") == 2 and kind("3") == 3 and built == [1]
    assert refusal(kind, "4") == "must be an integer from 1 to 3, got '4'"


def test_building_the_parser_imports_no_deferred_module():
    code = (
        "import sys; from rftlab.cli import build_parser; build_parser(); "
        "print([m for m in ('rftlab.analysis.gs1', 'rftlab.envs.poker', 'rftlab.envs.arena.cases', "
        "'rftlab.policies.spectrum.reference') if m in sys.modules])"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(src)}, check=True
    )
    assert proc.stdout.strip() == "[]"


# -- end to end: exit 2, the option named on stderr, nothing run --------------------------------------------
@pytest.mark.parametrize(
    ("argv", "flag", "message"),
    [
        (["arena", "solve", "--seed", "-1"], "--seed", "must be a non-negative integer, got '-1'"),
        (["arena", "eval", "--provider", "oracle", "--output-dir", "o", "--case-stride", "0"], "--case-stride", "got '0'"),
        (["stats", "noninferiority", "--treatment", "t", "--baseline", "b", "--margin", "0.03", "--alpha", "0.7"],
         "--alpha", "must be a finite number in (0, 0.5), got '0.7'"),
        (["endpoint", "check", "--base-url", "http://h/v1", "--model", "m", "--timeout", "0"], "--timeout",
         "must be a finite number of seconds in (0, 3600], got '0'"),
        (["endpoint", "check", "--base-url", "http://h/v1", "--model", " "], "--model", "non-empty name"),
        (["serve", "fireworks", "--drop-chunk", "x"], "--drop-chunk", "EPOCH:CHUNK"),
        (["poker", "play", "--policy", "call", "--seed", "-3"], "--seed", "got '-3'"),
        (["spectrum", "dataset", "--n", "0", "--out", "x.jsonl"], "--n", "from 1 to 1000000 (about 2 KB a row)"),
        (["gs1", "advantages", "--input", "b.json", "--estimator", "group_mean", "--window", "0"], "--window", "got '0'"),
        (["gs1", "design", "--reps", "99"], "--reps", "from 100 to 1000000, got '99'"),
        (["plan", "check", "missing.md"], "plan_file", "must be an existing plan file, got 'missing.md'"),
        (["arena", "manifest", "--check", "missing.json"], "--check", "a readable JSON file"),
    ],
)  # fmt: skip
def test_a_bad_value_exits_2_naming_the_option(tmp_path, monkeypatch, capsys, argv, flag, message):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    refused_option(argv, capsys, flag, message)
    assert list(work.iterdir()) == []
