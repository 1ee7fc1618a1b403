"""Model output that used to crash the spectrum envs (issue 9 §6), and property tests for each env
``step`` and each parser: no exception except the documented one, and the documented outcome (an empty
report scored, an unscored forced advance, or an error result that does not advance)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.envs.model_json import load_model_json
from rftlab.envs.spectrum.bench import BenchStepInfo, ScanReport, SpectrumBenchEnv, coerce_scan_report
from rftlab.envs.spectrum.rft import (
    MAX_REPORT,
    AssistantTurn,
    ReportNote,
    SpectrumRFTConfig,
    SpectrumRFTEnv,
    SpectrumStepInfo,
    ToolCall,
    decode_arguments,
    interpret_turn,
    normalize_center_freqs,
    submit,
)
from rftlab.types import StepResult

HUGE = 10**309  # an integer no float can hold (>= 2**1024): float(HUGE) raises OverflowError
DEEP = "[" * 100_000 + "]" * 100_000


def _env(**kw) -> SpectrumRFTEnv:
    env = SpectrumRFTEnv(SpectrumRFTConfig(**kw))
    env.reset("bad_input")
    return env


@pytest.mark.parametrize(
    "action",
    [
        [HUGE, 50.0],  # a list
        submit([HUGE, 50.0]),  # a tool call with dict arguments
        ToolCall("submit_report", '{"center_freqs": [' + "1" + "0" * 309 + ", 50.0]}"),  # JSON arguments
        ToolCall("submit_report", {"center_freqs": str([HUGE, 50.0])}),  # a JSON string in center_freqs
    ],
)
def test_integers_beyond_the_float_range_are_dropped_as_non_finite(action):
    env = _env()
    result = env.step(action)
    info = result.info
    assert info.scored and not info.forced
    assert env.records[-1]["report"] == [50.0]
    assert info.actions[0].non_finite == 1 and info.actions[0].kept == 1
    assert result.reward == env.score_report([50.0])[0]


def test_a_scalar_huge_integer_is_an_empty_scored_report():
    env = _env()
    info = env.step(submit(HUGE)).info
    assert info.scored and env.records[-1]["report"] == [] and info.actions[0].non_finite == 1
    info = env.step(ToolCall("submit_report", '{"center_freqs": ' + "9" * 400 + "}")).info
    assert info.scored and env.records[-1]["report"] == []


def test_json_nested_100000_deep_scores_an_empty_report_with_the_reason():
    for args in ('{"center_freqs": ' + DEEP + "}", DEEP, '{"a":' * 100_000 + "1" + "}" * 100_000):
        env = _env()
        result = env.step(ToolCall("submit_report", args))
        info = result.info
        assert info.scored and result.reward == 0.0 and env.records[-1]["report"] == []
        assert info.actions[0].malformed or info.actions[0].non_numeric == 1
    env = _env()
    info = env.step(submit(DEEP)).info  # a JSON string too deep to decode in center_freqs
    assert info.scored and info.actions[0].malformed == "center_freqs is a string that is not a JSON list"


@pytest.mark.parametrize(
    "call",
    [
        ToolCall(["submit_report"], {"center_freqs": [1.0]}),
        {"function": {"name": ["submit_report"], "arguments": "{}"}},
        {"name": {"x": 1}, "arguments": {}},
        ToolCall(None, {}),
    ],
)
def test_a_tool_call_whose_name_is_not_a_string_is_an_error_result(call):
    env = _env()
    result = env.step(call)
    info = result.info
    assert not info.scored and not info.forced and result.observation.scan_num == 1
    assert (
        len(info.tool_errors) == 1
        and "not available" in info.tool_errors[0]
        or "without a name" in info.tool_errors[0]
    )


def test_duplicate_keys_in_arguments_are_refused_and_recorded():
    env = _env()
    info = env.step(ToolCall("submit_report", '{"center_freqs": [20.0], "center_freqs": [100.0]}')).info
    assert info.scored and env.records[-1]["report"] == []
    assert "duplicate key 'center_freqs'" in info.actions[0].malformed
    assert any("duplicate key" in e for e in info.tool_errors)
    with pytest.raises(ValueError, match="duplicate key 'a'"):
        load_model_json('{"a": 1, "b": {"c": 2}, "a": 3}')
    assert load_model_json('{"a": {"a": 1}}') == {"a": {"a": 1}}  # the same key at two levels is fine


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("field", ["center_freq", "bandwidth", "estimated_power"])
def test_bench_nan_or_infinite_numbers_score_as_an_empty_report(bad, field):
    tx = {"center_freq": 31.5, "bandwidth": 15.0, "currently_active": True, "estimated_power": -40.0}
    env = SpectrumBenchEnv(0)
    empty = SpectrumBenchEnv(0).step({"transmitters": []})
    result = env.step({"transmitters": [{**tx, field: bad}]})
    assert result.info.warning and field in result.info.warning
    assert result.reward == empty.reward and result.info.occupied_iou == 0.0
    report, warning = coerce_scan_report({"transmitters": [{**tx, field: bad}]})
    assert report.transmitters == [] and warning


# ---------------------------------------------------------------------------------- properties

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**1023, max_value=2**1100)
    | st.floats()
    | st.text(max_size=10)
    | st.sampled_from(["12.5", "nan", "-inf", "1e400", "", "[1, 2]", "{}"])
)
json_like = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=24,
)
tool_names = st.one_of(
    st.sampled_from(["submit_report", "notepad_read", "notepad_write"]), st.text(max_size=8), json_like
)
arguments = st.one_of(
    json_like,
    st.builds(lambda v: {"center_freqs": v}, json_like),
    st.builds(
        lambda v: json.dumps({"center_freqs": v}), st.lists(st.floats(allow_nan=False) | st.integers())
    ),
    st.builds(lambda t: {"text": t}, json_like),
    st.text(max_size=30),
)
calls = st.one_of(
    st.builds(ToolCall, tool_names, arguments),
    st.builds(lambda n, a: {"function": {"name": n, "arguments": a}}, tool_names, arguments),
    st.builds(lambda n, a: {"name": n, "arguments": a}, tool_names, arguments),
)
actions = st.one_of(
    json_like,
    st.lists(st.floats() | st.integers() | st.text(max_size=5), max_size=20),
    calls,
    st.lists(calls, max_size=3),
    st.builds(AssistantTurn, st.lists(calls | json_like, max_size=3).map(tuple), st.text(max_size=10)),
)


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    memory=st.sampled_from(["none", "echo", "scrambled", "notepad"]),
    delivery=st.sampled_from(["user", "tool"]),
    steps=st.lists(actions, min_size=1, max_size=14),
)
def test_rft_step_never_raises_and_keeps_its_bookkeeping(memory, delivery, steps):
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory=memory, delivery=delivery))
    obs = env.reset("prop")
    for action in steps:
        if obs.done:
            with pytest.raises(RuntimeError):
                env.step(action)
            break
        before = len(env.records)
        result = env.step(action)
        assert isinstance(result, StepResult) and isinstance(result.info, SpectrumStepInfo)
        info = result.info
        ended = len(env.records) - before
        assert ended == (1 if (info.scored or info.forced) else 0) or env.config.multi_submit == "upstream"
        assert 0.0 <= result.reward <= 1.0 and (result.reward == 0.0 or info.scored)
        for rec in env.records[before:]:
            report = rec["report"] or []
            assert len(report) <= MAX_REPORT and all(math.isfinite(x) for x in report)
        obs = result.observation
    m = env.metrics()
    assert m["scans_completed"] + m["scans_forced"] == len(env.records)


@settings(max_examples=300, deadline=None)
@given(value=json_like)
def test_normalize_center_freqs_of_anything(value):
    centres, note = normalize_center_freqs(value)
    assert isinstance(note, ReportNote)
    assert all(type(x) is float and math.isfinite(x) for x in centres)
    assert len(centres) == note.kept <= MAX_REPORT
    if note.malformed:
        assert centres == []
    else:
        dropped = note.non_numeric + note.non_finite + note.over_cap
        assert note.received == note.kept + dropped


@settings(max_examples=300, deadline=None)
@given(raw=st.one_of(st.text(max_size=40), json_like, st.builds(json.dumps, json_like)))
def test_decode_arguments_of_anything(raw):
    args, err = decode_arguments(raw)
    assert isinstance(args, dict) and (err is None or (isinstance(err, str) and args == {}))


@settings(max_examples=300, deadline=None)
@given(action=actions)
def test_interpret_turn_of_anything(action):
    calls, content = interpret_turn(action)
    assert isinstance(calls, tuple) and isinstance(content, str)
    assert all(c is None or (isinstance(c, ToolCall) and isinstance(c.name, str)) for c in calls)


transmitter = st.fixed_dictionaries(
    {
        "center_freq": st.floats() | st.integers() | st.text(max_size=4),
        "bandwidth": st.floats() | st.integers(),
        "currently_active": st.booleans() | st.integers(),
        "estimated_power": st.floats(),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    action=st.one_of(json_like, st.builds(lambda ts: {"transmitters": ts}, st.lists(transmitter, max_size=6)))
)
def test_bench_step_of_anything_is_a_scored_report_or_an_empty_one_with_a_warning(action):
    env = SpectrumBenchEnv(0)
    result = env.step(action)
    info = result.info
    assert isinstance(info, BenchStepInfo) and 0.0 <= result.reward <= 1.0
    assert 0.0 <= info.occupied_iou <= 1.0
    report, warning = coerce_scan_report(action)
    assert isinstance(report, ScanReport) and warning == info.warning
    if warning:
        assert report.transmitters == []
    assert all(
        math.isfinite(t.center_freq) and math.isfinite(t.bandwidth) and math.isfinite(t.estimated_power)
        for t in report.transmitters
    )
