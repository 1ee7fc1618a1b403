"""The poker McpGym path (issue 14 item 3): the chat adapter's prompt parser, the ``poker_act`` tool
against the env's own stepping, and the ``poker_mcp_eval.py`` entry run end to end by pytest in a
subprocess against the local policy server, scored as the env scores the same policy directly."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.envs.poker.env import PokerEnv, PokerEnvConfig, row_assignment
from rftlab.policies.poker.chat import PokerChat, PromptSeeded, parse_prompt
from rftlab.policies.poker.reference import POKER_POLICIES, RandomLegal
from rftlab.policies.server import PolicyServer
from rftlab.rollout.episode import episode
from rftlab.rollout.poker.mcp import NOTEPAD_MAX_CHARS, PokerMcpGym, initial_text, mcp_config, step_text
from rftlab.rollout.poker.scoring import METRIC_KEYS, poker_metrics
from rftlab.rollout.spectrum.eval_runner import run_entry_module

# Loopback only: the no-network guard of ``tests/conftest.py`` on every test here.
pytestmark = pytest.mark.usefixtures("no_network")

SENTINEL = "sk-rftlab-SENTINEL-77c1d2"


def _spectrum_guard() -> str:
    """The no-network ``sitecustomize`` of the spectrum entry tests (loopback only, attempts logged)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "spectrum" / "test_spectrum_eval_entries.py"
    spec = importlib.util.spec_from_file_location("_spectrum_entry_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GUARD


def _same_query(env_query, parsed) -> None:
    want = dict(env_query.metadata, instance_id="")
    assert parsed.metadata == want
    assert parsed.hole == env_query.hole and parsed.board == env_query.board


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.integers(0, 10_000), seed=st.integers(0, 2**16))
def test_parser_rebuilds_every_query_of_real_env_prompts(row, seed):
    env = PokerEnv(PokerEnvConfig(mode="rft", hands=4))
    obs = env.reset(f"poker_s{row}")
    policy = RandomLegal(seed)
    while not obs.done:
        if obs.next_query is not None:
            _same_query(obs.next_query, parse_prompt(obs.next_query.prompt))
            # as the McpGym delivers it: the feedback text around the prompt
            _same_query(obs.next_query, parse_prompt(step_text(obs, "note: Hand #9 - FLOP?")))
        obs = env.step(policy.act(obs)).observation


def _gym_session(gym: PokerMcpGym, sid: str) -> dict:
    session = gym.sessions.setdefault(sid, {"session_id": sid, "session_data": {}})
    gym._seed_session(session, sid)
    return session


def test_parser_refuses_text_that_is_not_a_prompt():
    from rftlab.policies.poker.chat import PromptParseError

    prompt = PokerEnv(PokerEnvConfig(mode="rft", hands=2)).reset("poker_s1").next_query.prompt
    for bad in ("", "hello", prompt.replace("Pot: ", "Pot = "), prompt.replace("] [", "][")):
        with pytest.raises(PromptParseError):
            parse_prompt(bad)


def test_chat_adapter_answers_with_a_poker_act_call():
    env = PokerEnv(PokerEnvConfig(mode="rft", hands=2))
    obs = env.reset("poker_s2")
    tool_result = {"observation": step_text(obs, ""), "instance_complete": False}
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "Hand #99 - RIVER (an old prompt)"},
        {"role": "tool", "tool_call_id": "c", "content": json.dumps(tool_result)},
    ]
    reply = PokerChat(POKER_POLICIES["call"]).respond(messages)
    (call,) = reply["tool_calls"]
    args = json.loads(call["function"]["arguments"])
    want = POKER_POLICIES["call"]().act(obs)
    assert call["function"]["name"] == "poker_act"
    assert args == {"action": want["action"], "thinking": "", "amount": -1, "notepad_update": ""}
    # after the episode's last result no decision is pending: a plain answer without a tool call
    done = {"observation": "FEEDBACK FROM PREVIOUS INSTANCE:\n...\n\nHAND_PROFITS_BB: 1.0000", "x": 1}
    final = PokerChat(POKER_POLICIES["call"]).respond(
        messages + [{"role": "tool", "content": json.dumps(done)}]
    )
    assert "tool_calls" not in final


@pytest.mark.parametrize("policy", ["random", "exploit"])
def test_tool_results_equal_the_envs_own_stepping(policy):
    cfg = mcp_config(6)
    gym = PokerMcpGym(cfg)
    sid = f"session-{policy}"
    session = _gym_session(gym, sid)
    first = gym.get_initial_state_endpoint(session)
    env = PokerEnv(cfg)
    obs = env.reset(sid)
    assert env.opponent == session["env"].env.opponent == row_assignment(sid)[0]
    assert first == {"observation": initial_text(obs), "instance_complete": False}
    p = POKER_POLICIES[policy]()
    notepad, rewards, k = "", [], 0
    while not obs.done:
        action = p.act(obs)
        k += 1
        update = f"note {k} " + "x" * (NOTEPAD_MAX_CHARS if k == 3 else 0) if k % 2 else "   "
        if k % 2:
            notepad = update[:NOTEPAD_MAX_CHARS]
        amount = action["amount"]
        args = {
            "action": action["action"].lower() + " ",
            "thinking": action["thinking"],
            "amount": -1 if amount is None else amount,
            "notepad_update": update,
        }
        got = gym._execute_session_environment_step(sid, args)
        result = env.step(action)
        obs = result.observation
        assert got == {"observation": step_text(obs, notepad), "instance_complete": obs.instance_complete}
        rewards.append(result.reward)
        cp = gym._get_or_create_session_control_plane(sid)
        assert (cp["reward"], cp["terminated"], cp["step_count"]) == (result.reward, result.done, k)
    assert "HAND_PROFITS_BB: " in got["observation"] and "OPPONENT_POLICY: " in got["observation"]
    assert abs(sum(rewards) - sum(env.metrics()["hand_bb"])) < 1e-6
    assert session["env"].done
    # a call after the end changes nothing
    assert gym._execute_session_environment_step(sid, {"action": "CALL"}) == got


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_mcp_entry_scores_equal_the_envs_own_scoring(tmp_path):
    from rftlab.rollout.spectrum.scoring import mcp_session_id

    hands, rows_n, policies = 3, 2, ("call", "exploit")
    with PolicyServer({p: POKER_POLICIES[p] for p in policies}, chat=PokerChat) as srv:
        params = [
            {"model": f"openai/{p}", "base_url": srv.base_url, "temperature": 0.0, "max_tokens": 256}
            for p in policies
        ]
        guard_dir, guard_log = tmp_path / "guard", tmp_path / "net_guard.log"
        guard_dir.mkdir()
        (guard_dir / "sitecustomize.py").write_text(_spectrum_guard())
        env = {
            "RFTLAB_NET_GUARD_LOG": str(guard_log),
            "OPENAI_API_KEY": SENTINEL,
            "RFTLAB_MCP_PORT": str(_free_port()),
            "RFTLAB_POKER_ROWS": str(rows_n),
            "RFTLAB_POKER_HANDS": str(hands),
            "RFTLAB_EP_CONCURRENCY": "2",
        }
        work = tmp_path / "work"
        rows, stdout, stderr = run_entry_module(
            "poker_mcp_eval.py",
            params,
            rows=rows_n,
            workdir=work,
            env=env,
            python_path=[str(guard_dir)],
            timeout=300,
        )
        requests = list(srv.requests)
    assert not guard_log.exists(), guard_log.read_text()
    # B.4 windowing: from hand 2 on, the model input holds the current hand only
    marker = "FEEDBACK FROM PREVIOUS INSTANCE"
    assert all(sum(marker in str(m.get("content")) for m in r["messages"]) <= 1 for r in requests)
    assert any(marker in str(m.get("content")) for r in requests for m in r["messages"])
    # every model call offered the poker_act tool and was answered by the served policy
    assert requests and all([t["function"]["name"] for t in r["tools"]] == ["poker_act"] for r in requests)
    texts = [stdout, stderr, json.dumps(requests)]
    texts += [p.read_text(errors="replace") for p in Path(work).rglob("*") if p.is_file()]
    assert not any(SENTINEL in t for t in texts)
    assert len(rows) == rows_n * len(policies)
    from eval_protocol.models import EvaluationRow

    for raw in rows:
        row = EvaluationRow(**raw)
        policy = row.input_metadata.completion_params["model"].split("/")[-1]
        key = mcp_session_id(row)
        traj = episode(
            PokerEnv(PokerEnvConfig(mode="rft", hands=hands)), PromptSeeded(POKER_POLICIES[policy]), key
        )
        direct = poker_metrics(traj.metrics["hand_bb"], traj.metrics["illegal_actions"])
        res = raw["evaluation_result"]
        assert res["is_score_valid"], res["reason"]
        assert traj.metrics["hands_played"] == hands == res["metrics"]["hands_completed"]["score"]
        assert "OPPONENT_POLICY: " + traj.metrics["opponent"] in str(
            [m for m in raw["messages"] if m["role"] == "tool"][-1]["content"]
        )
        assert res["score"] == pytest.approx(direct["score"], abs=1e-9)
        for k in METRIC_KEYS:
            assert res["metrics"][k]["score"] == pytest.approx(direct[k], abs=1e-9), k
        assert raw["messages"][1]["content"] == initial_text(
            PokerEnv(PokerEnvConfig(mode="rft", hands=hands)).reset(key)
        )
        cp = [m["control_plane_step"]["reward"] for m in raw["messages"] if m.get("control_plane_step")]
        assert sum(cp) == pytest.approx(sum(traj.metrics["hand_bb"]), abs=1e-6)


def test_illegal_actions_retry_then_force_and_are_counted_from_the_transcript():
    from rftlab.rewards.poker import illegal_count

    gym = PokerMcpGym(mcp_config(3))
    sid = "session-illegal"
    session = _gym_session(gym, sid)
    assert session["env"].first.next_query is not None
    texts = [
        gym._execute_session_environment_step(sid, {"action": "banana"})["observation"] for _ in range(3)
    ]
    assert texts[0].startswith("FEEDBACK: Invalid poker action: ") and texts[1] == texts[0]
    assert "Invalid poker action" not in texts[2]  # the 3rd rejection is replaced by the forced step
    assert session["env"].env.forced == 1
    messages = [{"role": "tool", "content": json.dumps({"observation": t})} for t in texts]
    assert illegal_count(messages) == 2  # B.3: a streak ending in a forced action counts 2
