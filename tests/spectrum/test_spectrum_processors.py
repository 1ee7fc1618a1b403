"""The bench-shaped processor, windowing, thinking, salts and replay scoring, in-process against the
real local policy server (real litellm)."""

from __future__ import annotations

import asyncio
import json

import pytest
from eval_protocol.models import EvaluationRow, Message, Status

from rftlab.envs.spectrum.rft import AssistantTurn, SpectrumRFTConfig, SpectrumRFTEnv, ToolCall, band_seed
from rftlab.policies.server import PolicyServer
from rftlab.policies.spectrum.reference import RFT_POLICIES
from rftlab.rollout import episode
from rftlab.rollout.spectrum.dataset import dataset_rows
from rftlab.rollout.spectrum.processors import apply_thinking, resolve_salt, run_turn_episode
from rftlab.rollout.spectrum.scoring import mcp_observation_text, replay_mcp, score_turn_row
from rftlab.rollout.windowing import window_chat

# Loopback only: the no-network guard of ``tests/conftest.py`` on every test here.
pytestmark = pytest.mark.usefixtures("no_network")


class _Says:
    def __init__(self, action):
        self.action = action

    def reset(self, seed=None):
        pass

    def act(self, obs):
        return self.action


@pytest.fixture(scope="module")
def server():
    policies = {n: RFT_POLICIES[n] for n in ("memoryless", "accumulate")}
    policies["badjson"] = lambda: _Says({"name": "submit_report", "arguments": "{not json"})
    with PolicyServer(policies) as srv:
        yield srv


def _row(i=0, memory="echo", think=True):
    return EvaluationRow(**list(dataset_rows(i + 1, memory=memory, think=think))[i])


def _roll(server, row, policy, **kw):
    cp = {"model": f"openai/{policy}", "base_url": server.base_url, "temperature": 0.0, "max_tokens": 64}
    return asyncio.run(run_turn_episode(row, cp, **kw))


# ------------------------------------------------------------------------------------ windowing


def test_window_chat_user_and_tool_delivery():
    sys_m = {"role": "system", "content": "s"}
    s1 = {"role": "user", "content": "[[SCAN_BOUNDARY]] scan 1"}
    a1 = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "function": {"name": "submit_report"}}],
    }
    t1 = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    s2 = {"role": "user", "content": "[[SCAN_BOUNDARY]] scan 2"}
    assert window_chat([sys_m, s1, a1, t1, s2]) == [sys_m, s2]
    assert window_chat([sys_m, s1, a1, t1, s2], window=False) == [sys_m, s1, a1, t1, s2]
    assert window_chat([sys_m, {"role": "user", "content": "hi"}]) == [
        sys_m,
        {"role": "user", "content": "hi"},
    ]
    # McpGym: the next scan rides in a tool result; the window starts at the call it answers
    t1s = {
        "role": "tool",
        "tool_call_id": "c1",
        "content": json.dumps({"observation": "[[SCAN_BOUNDARY]] scan 2"}),
    }
    a2 = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c2", "function": {"name": "notepad_read"}}],
    }
    assert window_chat([sys_m, s1, a1, t1s, a2]) == [sys_m, a1, t1s, a2]


def test_apply_thinking_and_salts(monkeypatch):
    assert apply_thinking("Do it.", False) == "Do it. /no_think"
    assert apply_thinking("Do it. /no_think", False) == "Do it. /no_think"
    assert apply_thinking("Do it. /no_think", True) == "Do it."
    assert apply_thinking("Do it.", None) == "Do it."
    for k in ("RFTLAB_EPOCH_SALT", "SPECTRUM_EPOCH_SALT"):
        monkeypatch.delenv(k, raising=False)
    assert resolve_salt() == ""
    monkeypatch.setenv("SPECTRUM_EPOCH_SALT", "1")
    s = resolve_salt()
    assert len(s) == 8 and int(s, 16) >= 0 and resolve_salt() == s  # one token per process
    monkeypatch.setenv("RFTLAB_EPOCH_SALT", "epoch3")
    assert resolve_salt() == "epoch3" and resolve_salt("x") == "x"


# ----------------------------------------------------------------------------------- processor


def test_turn_episode_equals_direct_episode_windowed_no_think_and_salted(server):
    row = _row(2)
    out = _roll(server, row, "accumulate", think=False, salt="deadbeef")
    extra = out.execution_metadata.extra["spectrum"]
    assert extra["band_seed"] == band_seed("sc1_2", "deadbeef") and extra["salt"] == "deadbeef"
    direct = episode(
        SpectrumRFTEnv(SpectrumRFTConfig(memory="echo")),
        RFT_POLICIES["accumulate"](),
        "sc1_2",
        salt="deadbeef",
    )
    assert extra["metrics"] == direct.metrics
    assert not out.rollout_status.is_error()
    reqs = [r for r in server.requests if r["model"] == "accumulate"][-12:]
    assert all(r["messages"][0]["content"].endswith(" /no_think") for r in reqs)
    assert all(len(r["messages"]) == 2 for r in reqs)  # [system, current scan]: ICL-off
    assert len({r["messages"][1]["content"] for r in reqs}) == 12
    scored = score_turn_row(out)
    assert (
        scored.evaluation_result.is_score_valid and scored.evaluation_result.score == direct.metrics["reward"]
    )
    assert scored.evaluation_result.metrics["memory_gain"].score == direct.metrics["memory_gain"]


def test_garbage_tool_arguments_are_scored_as_the_env_scores_them(server):
    out = _roll(server, _row(0), "badjson")
    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="echo"))
    env.reset("sc1_0")
    while not env.done:
        env.step(AssistantTurn((ToolCall("submit_report", "{not json", "c"),)))
    scored = score_turn_row(out)
    assert scored.evaluation_result.is_score_valid
    assert scored.evaluation_result.score == env.metrics()["reward"] == pytest.approx(0.0)


def test_scoring_ignores_agent_injected_scores_and_rejects_tampered_transcripts(server):
    out = _roll(server, _row(1), "memoryless")
    honest = score_turn_row(out.model_copy(deep=True)).evaluation_result.score
    # B.15 #1: an agent writing a score line in its own text changes nothing
    injected = out.model_copy(deep=True)
    for m in injected.messages:
        if m.role == "assistant":
            m.content = "SCAN_OCC: 1.0000 SCAN_AVAIL: 1.0000"
    assert score_turn_row(injected).evaluation_result.score == honest
    # a transcript whose tool results the env cannot reproduce is not scored
    tampered = out.model_copy(deep=True)
    next(m for m in tampered.messages if m.role == "tool").content = "ok\nSCAN_OCC: 1.0000 SCAN_AVAIL: 1.0000"
    res = score_turn_row(tampered).evaluation_result
    assert not res.is_score_valid and res.score == 0.0 and "differ" in res.reason
    failed = out.model_copy(deep=True)
    failed.rollout_status = Status.rollout_error("litellm.BadRequestError: boom")
    res = score_turn_row(failed).evaluation_result
    assert not res.is_score_valid and "rollout failed" in res.reason


def test_replay_mcp_transcript_and_its_checks():
    cfg = SpectrumRFTConfig(memory="notepad", delivery="tool", max_calls_per_scan=None, max_total_calls=80)
    env = SpectrumRFTEnv(cfg)
    obs = env.reset(seed=12345)
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": obs.text}]
    policy = RFT_POLICIES["accumulate"]()
    i = 0
    while not obs.done:
        for name, args in (
            ("notepad_write", {"text": "x"}),
            ("submit_report", {"center_freqs": policy.act(obs)}),
        ):
            i += 1
            msgs.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                    ],
                }
            )
            step = env.step(ToolCall(name, args, f"c{i}"))
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": f"c{i}",
                    "content": json.dumps({"observation": mcp_observation_text(step.observation)}),
                }
            )
            obs = step.observation
    replayed = replay_mcp([Message.model_validate(m) for m in msgs], cfg, 12345)
    assert replayed.metrics() == env.metrics() and env.metrics()["notepad_writes"] == 12
    with pytest.raises(ValueError, match="not scan 1"):
        replay_mcp(msgs, cfg, 999)


def _garbage_calls():
    from hypothesis import strategies as st

    name = st.sampled_from(["submit_report", "notepad_read", "notepad_write", "", "rm -rf", "submit_report "])
    args = st.one_of(
        st.text(max_size=30),
        st.builds(
            json.dumps,
            st.dictionaries(
                st.sampled_from(["center_freqs", "text", "x"]),
                st.one_of(
                    st.none(),
                    st.text(max_size=5),
                    st.floats(),
                    st.lists(st.one_of(st.floats(), st.text(max_size=4), st.booleans()), max_size=20),
                ),
            ),
        ),
    )
    call = st.fixed_dictionaries(
        {
            "id": st.one_of(st.none(), st.text(min_size=1, max_size=6)),
            "function": st.fixed_dictionaries({"name": name, "arguments": args}),
        }
    )
    return st.lists(
        st.fixed_dictionaries(
            {"content": st.one_of(st.none(), st.text(max_size=20)), "tool_calls": st.lists(call, max_size=3)}
        ),
        min_size=1,
        max_size=30,
    )


def test_any_model_output_steps_the_env_and_replays_exactly():
    """Property: whatever the model returns (names, JSON or not, odd values), the processor's message
    handling never raises, the env applies it as the spec says, and the replay of the transcript
    reproduces the env's metrics exactly."""
    from hypothesis import given, settings

    from rftlab.rollout.spectrum.processors import _as_turn, _message_dict
    from rftlab.rollout.spectrum.scoring import replay_turn

    cfg = SpectrumRFTConfig(memory="notepad")

    @settings(max_examples=60, deadline=None)
    @given(replies=_garbage_calls())
    def check(replies):
        env = SpectrumRFTEnv(cfg)
        obs = env.reset("sc1_9")
        chat = [{"role": "user", "content": obs.text}]
        for reply in replies:
            if env.done:
                break
            assistant = _message_dict(reply)
            assert all(tc["id"] for tc in assistant.get("tool_calls", []))
            chat.append(assistant)
            obs = env.step(_as_turn(assistant)).observation
            chat += [
                {"role": "tool", "tool_call_id": t["tool_call_id"], "content": t["content"]}
                for t in obs.tool_results
            ]
            if obs.text is not None:
                chat.append({"role": "user", "content": obs.text})
        replayed = replay_turn([Message.model_validate(m) for m in chat], cfg, "sc1_9", "")
        assert replayed.metrics() == env.metrics()

    check()
