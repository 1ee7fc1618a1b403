"""The servers' structured log: one JSON object per line, below-threshold records dropped except the
ones written with ``Log.always`` (the address line a supervising process reads)."""

from __future__ import annotations

import io
import json

import pytest

from rftlab.runs.serving import Log


def _records(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_threshold_drops_lower_levels_but_not_always():
    stream = io.StringIO()
    log = Log(stream, level="warning")
    log("info", "quiet", n=1)
    log("warning", "kept", n=2)
    log.always("info", "listening", url="http://127.0.0.1:1")
    records = _records(stream)
    assert [r["event"] for r in records] == ["kept", "listening"]
    assert records[1]["level"] == "info" and records[1]["url"] == "http://127.0.0.1:1"
    assert set(records[0]) == {"ts", "level", "event", "n"}


def test_a_field_named_like_a_keyword_is_a_field():
    stream = io.StringIO()
    Log(stream, level="debug")("info", "counts", always=3, jobs=2)  # a counter may be called anything
    (record,) = _records(stream)
    assert record["always"] == 3 and record["jobs"] == 2


def test_unknown_level_is_refused():
    log = Log(io.StringIO())
    with pytest.raises(KeyError):
        log("verbose", "x")
    with pytest.raises(KeyError):
        log.always("verbose", "x")
