"""The strict scan-text parser and the chat adapter, checked against the env's own rendering."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.envs.spectrum.render import render_instance, timestamp_utc
from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv
from rftlab.policies.spectrum.chat import (
    DONE_TEXT,
    ChatObservation,
    ChatPolicyError,
    ChatSession,
    ScanParseError,
    action_to_message,
    find_scans,
    message_text,
    parse_scan_text,
)
from rftlab.policies.spectrum.reference import RFTAccumulate, RFTEchoFollower, RFTMemoryless

# Loopback only: the no-network guard of ``tests/conftest.py`` on every test here.
pytestmark = pytest.mark.usefixtures("no_network")

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@pytest.mark.parametrize("memory", ["echo", "scrambled", "none", "notepad"])
@pytest.mark.parametrize("row", ["spectrum_0", "sc1_0", "sc2_0", "nm1_7"])
def test_parser_rebuilds_every_env_observation_exactly(memory, row):
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory=memory))
    obs = env.reset(row, epoch=1)
    policy = RFTAccumulate()
    while not obs.done:
        rebuilt = ChatObservation.from_text(obs.text)
        assert rebuilt.peaks == obs.peaks
        assert rebuilt.echo == obs.echo
        assert (rebuilt.scan_num, rebuilt.num_scans) == (obs.scan_num, obs.num_scans)
        obs = env.step(policy.act(obs)).observation


peak = st.fixed_dictionaries(
    {
        "peak_id": st.from_regex(r"pk-[0-9a-f]{4,8}", fullmatch=True),
        "freq_mhz": finite,
        "power_dbm": finite,
        "width_mhz": finite,
    }
)


@settings(max_examples=150, deadline=None)
@given(
    peaks=st.lists(peak, max_size=8),
    scan_num=st.integers(1, 30),
    extra=st.integers(0, 30),
    echo=st.none() | st.lists(finite, min_size=1, max_size=16),
    head=st.sampled_from(["", "[[SCAN_BOUNDARY]] New scan.\n", "brief\n\ninstruction\n\n"]),
)
def test_parser_roundtrips_rendered_instance_blocks(peaks, scan_num, extra, echo, head):
    scan = {
        "scan_id": "scan-abc",
        "sensor_id": "sensor-1",
        "detector_version": "v2",
        "integration_time_ms": 50,
        "estimated_noise_floor_dbm": -50.0,
        "detected_peaks": peaks,
    }
    block = render_instance(
        scan,
        scan_num=scan_num,
        stated_horizon=scan_num + extra,
        timestamp=timestamp_utc(scan_num - 1),
        band_start=0.0,
        band_end=180.0,
    )
    text = head + block
    if echo is not None:
        text += "\n=== YOUR RUNNING LIST (your previous report) ===\n" + ", ".join(f"{x:.1f}" for x in echo)
        text += "\nCarry all of these over.\n"
    parsed = parse_scan_text(text)
    assert parsed.scan_num == scan_num and parsed.num_scans == scan_num + extra
    assert [dict(p) for p in parsed.peaks] == [
        {
            "freq_mhz": p["freq_mhz"],
            "power_dbm": p["power_dbm"],
            "width_mhz": p["width_mhz"],
            "peak_id": p["peak_id"],
        }
        for p in peaks
    ]
    assert parsed.echo == (None if echo is None else tuple(float(f"{x:.1f}") for x in echo))
    assert parsed.band == (0.0, 180.0)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_parser_raises_only_scan_parse_error_on_arbitrary_text(text):
    try:
        parse_scan_text(text)
    except ScanParseError:
        pass


def _scan1_text():
    return SpectrumRFTEnv(SpectrumRFTConfig(memory="echo")).reset("spectrum_0").text


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_parser_rejects_or_parses_mutated_scans_never_crashes(data):
    lines = _scan1_text().split("\n")
    i = data.draw(st.integers(0, len(lines) - 1))
    op = data.draw(st.sampled_from(["drop", "garble", "dup"]))
    if op == "drop":
        del lines[i]
    elif op == "garble":
        lines[i] = data.draw(st.text(max_size=40))
    else:
        lines.insert(i, lines[i])
    try:
        parsed = parse_scan_text("\n".join(lines))
    except ScanParseError as exc:
        assert "\n" not in str(exc)  # a one-line message
    else:
        assert all(isinstance(p["freq_mhz"], float) for p in parsed.peaks)


@pytest.mark.parametrize(
    "bad, why",
    [
        ("hello", "no '--- Scan k/N ---' header"),
        ("--- Scan 3/2 ---", "outside 1..2"),
        ("--- Scan 1/12 ---\n\nScan metadata:\n  scan_id: x\n", "timestamp_utc"),
    ],
)
def test_parser_messages_name_the_problem(bad, why):
    with pytest.raises(ScanParseError, match=why.replace(".", r"\.").replace("(", r"\(").replace("'", "'")):
        parse_scan_text(bad)


def test_parser_rejects_a_malformed_peak_and_a_non_numeric_frequency():
    text = _scan1_text()
    line = next(ln for ln in text.split("\n") if ln.startswith("  - peak_id"))
    with pytest.raises(ScanParseError, match="malformed peak line"):
        parse_scan_text(text.replace(line, line.replace(" | power", " power")))
    freq = line.split("freq: ")[1].split(" MHz")[0]
    with pytest.raises(ScanParseError, match="freq 'abc' is not a number"):
        parse_scan_text(text.replace(f"freq: {freq} MHz", "freq: abc MHz", 1))


def test_mcp_tool_results_are_json_with_the_observation():
    scan = _scan1_text()
    msg = {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"observation": scan, "x": 1})}
    assert message_text(msg) == scan
    assert message_text({"role": "user", "content": [{"type": "text", "text": scan}]}) == scan
    assert message_text({"role": "tool", "content": "{not json"}) == "{not json"


def _play(memory, row, factory, *, window):
    """Play an episode through ChatSession (as a chat server would) and through the env directly."""
    cfg = SpectrumRFTConfig(memory=memory)
    env = SpectrumRFTEnv(cfg)
    obs = env.reset(row)
    session = ChatSession(factory)
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": obs.text}]
    while not obs.done:
        request = [history[0], history[-1]] if window else history
        reply = session.respond(request)
        call = reply["tool_calls"][0]
        obs = env.step(call).observation
        history.append(reply)
        if obs.text is not None:
            history.append({"role": "user", "content": obs.text})
    chat_metrics = env.metrics()
    direct = SpectrumRFTEnv(cfg)
    o = direct.reset(row)
    p = factory()
    while not o.done:
        o = direct.step(p.act(o)).observation
    return chat_metrics, direct.metrics(), session, history


@pytest.mark.parametrize("window", [True, False])
@pytest.mark.parametrize(
    "name,factory", [("accumulate", RFTAccumulate), ("memoryless", RFTMemoryless), ("echo", RFTEchoFollower)]
)
def test_session_reproduces_the_direct_episode(name, factory, window):
    chat, direct, session, history = _play("echo", "sc1_0", factory, window=window)
    assert chat == direct
    # after the last scan a further request is answered with text, no tool call
    assert session.respond(history) == {"role": "assistant", "content": DONE_TEXT}


def test_windowed_session_refuses_a_skipped_scan_and_repeats_an_asked_scan():
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="none"))
    o1 = env.reset("sc1_0")
    o2 = env.step([]).observation
    o3 = env.step([]).observation
    s = ChatSession(RFTAccumulate)
    s.respond([{"role": "user", "content": o1.text}])
    with pytest.raises(ChatPolicyError, match="scan 3 arrived but this session last answered scan 1"):
        s.respond([{"role": "user", "content": o3.text}])
    a = s.respond([{"role": "user", "content": o2.text}])
    b = s.respond([{"role": "user", "content": o2.text}])
    assert a == b
    with pytest.raises(ChatPolicyError, match="no spectrum scan"):
        s.respond([{"role": "user", "content": "hi"}])


def test_action_to_message_shapes():
    m = action_to_message([1, 2.5])
    assert m["tool_calls"][0]["function"] == {
        "name": "submit_report",
        "arguments": '{"center_freqs": [1.0, 2.5]}',
    }
    assert action_to_message("text") == {"role": "assistant", "content": "text"}
    m = action_to_message({"name": "notepad_write", "arguments": {"text": "a"}})
    assert json.loads(m["tool_calls"][0]["function"]["arguments"]) == {"text": "a"}
    assert find_scans([{"role": "assistant", "content": _scan1_text()}]) == []


@settings(max_examples=30, deadline=None)
@given(digits=st.integers(19, 6000), which=st.sampled_from(["number", "count"]))
def test_a_scan_header_with_a_huge_count_is_a_scan_parse_error(digits, which):
    """``int()`` refuses more than 4300 digits with a bare ``ValueError``: the parser says why first."""
    text = _scan1_text().split("\n")
    header = next(i for i, ln in enumerate(text) if ln.startswith("--- Scan "))
    big = "1" * digits
    text[header] = f"--- Scan {big}/12 ---" if which == "number" else f"--- Scan 1/{big} ---"
    with pytest.raises(
        ScanParseError, match=f"line {header + 1}: scan number or count has more than 18 digits"
    ):
        parse_scan_text("\n".join(text))
