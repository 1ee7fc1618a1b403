"""Poker's context-length check (issue 32): the renderer of the McpGym path's model inputs
(``rftlab.launch.poker.episodes``), checked against eval-protocol's own rollout of the uploaded entry; the
preflight refusing a context that is too short before anything exists on the platform (the strict fake
firectl, the local control plane through the SDK launcher) and passing one that holds."""

from __future__ import annotations

import json
import socket
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rftlab.envs.poker.env import PokerEnv, PokerEnvConfig
from rftlab.launch import context_budget
from rftlab.launch.context_budget import TOOLS_OVERHEAD, RenderedEpisodes, context_check, episode_tokens
from rftlab.launch.fireworks import EPISODE_RENDERERS, FireworksLauncher, LaunchRefused, evaluator_id
from rftlab.launch.poker.episodes import call_inputs, hand_final_inputs, play_transcript, rendered_episodes
from rftlab.launch.poker.spec import load_poker_arm_spec
from rftlab.policies.poker.chat import PromptSeeded
from rftlab.policies.poker.reference import POKER_POLICIES
from rftlab.rollout.poker.dataset import dataset_rows
from rftlab.rollout.poker.turns import HAND_MARKER, POKER_ACT_TOOL, initial_text
from rftlab.runs.paths import SPECS_DIR

sys.path.insert(0, str(Path(__file__).parent))
from fake_firectl_env import install_fake_firectl  # noqa: E402
from fireworks_api_stub import FireworksApiStub  # noqa: E402

KEY = "fw-poker-context-key-0123456789"
ACCOUNT = "acct-poker-ctx"
BASE = "accounts/fireworks/models/qwen3-8b"


def poker_spec(context: int | None, rows: int = 3):
    s = load_poker_arm_spec(SPECS_DIR / "poker_seed.json")
    fw = s.fireworks.model_copy(update={"max_context_length": context})
    return s.model_copy(update={"rows": rows, "fireworks": fw})


def rows_of(s):
    return list(dataset_rows(s.rows, hands=s.hands, thinking=s.thinking, reward=s.reward))


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


# ------------------------------------------------------------------------------ the renderer


def test_poker_on_the_mcp_path_has_a_renderer():
    assert EPISODE_RENDERERS[("poker", "mcp")] == "rftlab.launch.poker.episodes.rendered_episodes"


def test_the_tool_overhead_bounds_qwen3_s_tool_preamble():
    # tinker-cookbook's Qwen3 renderer writes the template's tool block; without the schema JSON it is the
    # preamble TOOLS_OVERHEAD must cover (in bytes, hence in tokens of any byte-level BPE)
    from tinker_cookbook.renderers.qwen3 import Qwen3Renderer

    block = Qwen3Renderer(tokenizer=None).create_conversation_prefix_with_tools([POKER_ACT_TOOL["function"]])
    schema = json.dumps(POKER_ACT_TOOL, separators=(", ", ": "))
    text = block[0]["content"]
    assert schema in text
    assert 0 < _bytes(text) - _bytes(schema) <= TOOLS_OVERHEAD


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    row=st.integers(0, 10_000),
    hands=st.integers(1, 4),
    policy=st.sampled_from(sorted(POKER_POLICIES)),
    note=st.integers(0, 2500),
)
def test_every_call_input_is_one_hand_window(row, hands, policy, note):
    (r,) = dataset_rows(1, hands=hands, prefix=f"p{row}")
    transcript = play_transcript(
        r,
        PromptSeeded(POKER_POLICIES[policy]),
        hands=hands,
        notepad=lambda k, first: "w" * note if first else "",
    )
    tools = [m for m in transcript if m["role"] == "tool"]
    results = [json.loads(m["content"]) for m in tools]
    # the last result closes the episode with one profit per hand (B.1)
    profits = results[-1]["observation"].split("HAND_PROFITS_BB: ")[1].split("\n")[0].split(",")
    assert len(profits) == hands and results[-1]["instance_complete"]
    inputs = call_inputs(transcript)
    # one call per tool result, plus eval-protocol's last call after the env ended
    assert len(inputs) == sum(m["role"] == "assistant" for m in transcript) + 1 == len(tools) + 1
    assert inputs[-1][-1] == transcript[-1]
    first = initial_text(PokerEnv(PokerEnvConfig(mode="rft", hands=hands)).reset(f"p{row}_s1000"))
    assert transcript[1] == {"role": "user", "content": first}  # "" when every hand ended before a decision
    for window in inputs:
        assert window[0] == transcript[0] and window[0]["role"] == "system"
        markers = [m for m in window if m["role"] in ("user", "tool") and HAND_MARKER in m["content"]]
        assert len(markers) <= 1  # B.4: the current hand only
        ids = {c["id"] for m in window if m["role"] == "assistant" for c in m["tool_calls"]}
        assert all(m["tool_call_id"] in ids for m in window if m["role"] == "tool")
    finals = hand_final_inputs(transcript)
    deliveries = sum(HAND_MARKER in json.loads(m["content"])["observation"] for m in tools)
    assert HAND_MARKER in results[-1]["observation"]  # the last result reports the last hand's end
    assert len(finals) == 1 + deliveries <= hands + 1
    hands_seen = deliveries
    # each hand's last input is the longest of that hand: no input is longer than the next final
    sizes = [episode_tokens(w, _bytes) for w in inputs]
    finals_sizes = [episode_tokens(w, _bytes) for w in finals]
    assert max(sizes) == max(finals_sizes)
    if note and hands_seen > 1:  # from hand 2 on the notepad block shows the (cut) notepad
        block = "=== YOUR NOTEPAD ===\n" + "w" * min(note, 2000) + "\n"
        shown = [
            json.loads(m["content"])["observation"] for w in finals[1:] for m in w if m["role"] == "tool"
        ]
        assert any(block in text for text in shown)


def test_a_row_without_a_template_gets_an_empty_first_message_as_eval_protocol_sends_it():
    (r,) = dataset_rows(1)
    del r["input_metadata"]["dataset_info"]["user_prompt_template"]
    transcript = play_transcript(r, PromptSeeded(POKER_POLICIES["call"]), hands=1)
    assert transcript[1] == {"role": "user", "content": ""}


def test_the_rendered_bound_counts_the_tools_and_the_longest_hand():
    rows = rows_of(poker_spec(None, rows=1))
    rendered = rendered_episodes(rows)
    assert isinstance(rendered, RenderedEpisodes) and rendered.tools == (POKER_ACT_TOOL,)
    longest = max(episode_tokens(e, _bytes) for e in rendered.episodes)
    tools = TOOLS_OVERHEAD + _bytes(json.dumps(POKER_ACT_TOOL))
    check = context_check(rendered, base_model=BASE, max_context_length=131_072, max_output_tokens=1024)
    assert check["passed"] and check["longest_episode_tokens"] == longest + tools + 1024
    # 1 row x 3 strategies x (16 hands + the call after the end) at most
    assert 0 < len(rendered.episodes) <= 3 * 17
    assert "model inputs" in check["detail"] and "one token per UTF-8 byte" in check["detail"]


def test_the_base_model_s_tokenizer_is_used_when_one_is_local(monkeypatch):
    rendered = rendered_episodes(rows_of(poker_spec(None, rows=1)))
    assert context_budget.local_tokenizer(BASE) is None  # no copy of Qwen3-8B's tokenizer on this machine
    monkeypatch.setattr(context_budget, "local_tokenizer", lambda name: lambda text: len(text.split()))
    check = context_check(rendered, base_model=BASE, max_context_length=8192, max_output_tokens=1024)
    words = max(sum(len(context_budget.message_text(m).split()) + 8 for m in e) for e in rendered.episodes)
    tools = TOOLS_OVERHEAD + len(json.dumps(POKER_ACT_TOOL).split())
    assert check["counting"] == "the base model's tokenizer"
    assert check["longest_episode_tokens"] == words + tools + 1024 and check["passed"]


@pytest.mark.slow  # 64 rows, twice: 5-7 s each
@pytest.mark.parametrize("name", ["poker_seed.json", "poker_gain.json"])
def test_the_shipped_poker_arms_hold_their_longest_rendered_hand(name):
    s = load_poker_arm_spec(SPECS_DIR / name)
    launcher = FireworksLauncher(dataset_rows=rows_of)
    check = launcher._context_check(s)
    assert check["passed"], check["detail"]
    assert check["max_context_length"] == s.fireworks.max_context_length
    refused = launcher._context_check(s.model_copy(update={"fireworks": s.fireworks.model_copy(
        update={"max_context_length": 8192})}))  # fmt: skip
    assert not refused["passed"] and "> max_context_length 8192" in refused["detail"]


# ----------------------------------------------------------- against eval-protocol's own rollout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _plain(messages) -> list:
    """Messages without tool-call ids (the policy server's are random): role, text, call name and arguments."""
    out = []
    for m in messages:
        calls = [
            (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in m.get("tool_calls") or []
        ]
        out.append((m["role"], m.get("content") or "", json.dumps(calls, sort_keys=True)))
    return out


@pytest.mark.slow
@pytest.mark.usefixtures("no_network")
def test_rendered_inputs_equal_what_eval_protocol_sends_the_model(tmp_path):
    """The uploaded entry run by pytest on the launcher's own dataset rows (``EP_JSONL_PATH``, as the
    platform and the local control plane feed them), the model served locally: every request the model got
    is a rendered call input, and every rendered transcript is the rollout's row, message for message."""
    from eval_protocol.models import EvaluationRow

    from rftlab.policies.poker.chat import PokerChat
    from rftlab.policies.server import PolicyServer
    from rftlab.rollout.spectrum.eval_runner import run_entry_module
    from rftlab.rollout.spectrum.scoring import mcp_session_id

    hands, policies = 3, ("call", "exploit")
    rows = rows_of(poker_spec(None, rows=2))
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with PolicyServer({p: POKER_POLICIES[p] for p in policies}, chat=PokerChat) as srv:
        params = [{"model": f"openai/{p}", "base_url": srv.base_url, "temperature": 0.0, "max_tokens": 256}
                  for p in policies]  # fmt: skip
        env = {"RFTLAB_MCP_PORT": str(_free_port()), "RFTLAB_POKER_HANDS": str(hands),
               "RFTLAB_POKER_ROWS": "2", "EP_JSONL_PATH": str(data), "RFTLAB_EP_CONCURRENCY": "2"}  # fmt: skip
        results, _out, _err = run_entry_module(
            "poker_mcp_eval.py", params, rows=2, workdir=tmp_path / "work", env=env, timeout=300
        )
        requests = list(srv.requests)
    by_id = {r["input_metadata"]["row_id"]: r for r in rows}
    rendered, seen = Counter(), set()
    for raw in results:
        row = EvaluationRow(**raw)
        policy = row.input_metadata.completion_params["model"].split("/")[-1]
        if (row.input_metadata.row_id, policy) in seen:
            continue
        seen.add((row.input_metadata.row_id, policy))
        transcript = play_transcript(
            by_id[row.input_metadata.row_id], PromptSeeded(POKER_POLICIES[policy]),
            key=mcp_session_id(row), hands=hands,
        )  # fmt: skip
        got = [m for m in raw["messages"] if m["role"] in ("system", "user", "assistant", "tool")]
        assert got[-1]["role"] == "assistant" and not got[-1].get("tool_calls")  # the reply after the end
        assert _plain(got[:-1]) == _plain(transcript)
        rendered.update(json.dumps(_plain(w)) for w in call_inputs(transcript))
    assert seen == {(r, p) for r in by_id for p in policies}
    sent = Counter(json.dumps(_plain(r["messages"])) for r in requests)
    assert sent == rendered
    assert all(r["tools"] == [POKER_ACT_TOOL] for r in requests)
    # the first hand's prompt reaches the model (the rows name the template eval-protocol formats)
    assert all(
        r["messages"][1]["content"].startswith("=== Brief ===") for r in requests if len(r["messages"]) == 2
    )


# ------------------------------------------------------------- refused before the platform


class Passed:
    passed = True

    def to_dict(self):
        return {"passed": True, "checks": []}


@pytest.fixture
def fake(tmp_path, monkeypatch, request):
    """The strict fake firectl (tests/launch/fake_firectl.py) and the evaluator API stub."""
    installed = install_fake_firectl(tmp_path, monkeypatch)
    monkeypatch.setenv("FIREWORKS_API_KEY", KEY)
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", ACCOUNT)
    api = FireworksApiStub(account=ACCOUNT).__enter__()
    request.addfinalizer(lambda: api.__exit__(None, None, None))
    monkeypatch.setenv("FIREWORKS_BASE_URL", api.base_url)
    api.states[evaluator_id(poker_spec(None), ACCOUNT)] = "ACTIVE"
    return installed.calls


def _launcher(**kw):
    return FireworksLauncher(preflight=lambda s: Passed(), dataset_rows=rows_of, sleep=lambda s: None, **kw)


def test_a_context_too_short_is_refused_before_any_firectl_call(fake, tmp_path):
    with pytest.raises(LaunchRefused, match="context_length_holds_episode") as refused:
        _launcher().launch(poker_spec(8192), root=tmp_path / "runs")
    message = str(refused.value)
    assert "nothing was created on Fireworks" in message and "> max_context_length 8192" in message
    assert "raise fireworks.max_context_length" in message and "\n" not in message
    assert fake() == []  # not even a dataset lookup
    (pre,) = (tmp_path / "runs").rglob("preflight.json")
    (check,) = [
        c for c in json.loads(pre.read_text())["checks"] if c["name"] == "context_length_holds_episode"
    ]
    assert not check["passed"] and check.get("checked", True)


def test_a_context_that_holds_passes_and_the_job_is_created(fake, tmp_path):
    ref = _launcher().launch(poker_spec(16384), root=tmp_path / "runs")
    pre = json.loads((ref.path / "provider" / "preflight.json").read_text())
    (check,) = [c for c in pre["checks"] if c["name"] == "context_length_holds_episode"]
    assert check["passed"] and check.get("checked", True) and check["max_context_length"] == 16384
    assert "not checked" not in check["detail"]
    assert ["reinforcement-fine-tuning-job", "create"] in fake()
    assert ["dataset", "create"] in fake()


def test_the_local_control_plane_sees_no_request_from_a_refused_launch(tmp_path, monkeypatch, no_network):
    from local_fireworks_helpers import ACCOUNT as PLANE_ACCOUNT
    from local_fireworks_helpers import KEY as PLANE_KEY
    from local_fireworks_helpers import client, log_events, server

    from rftlab.launch.fireworks_sdk import sdk_launcher

    srv, log = server(tmp_path)
    try:
        monkeypatch.setenv("FIREWORKS_API_KEY", PLANE_KEY)
        launcher = sdk_launcher(account_id=PLANE_ACCOUNT, base_url=srv.base_url, preflight=lambda s: Passed(),
                                dataset_rows=rows_of)  # fmt: skip
        before = len(log_events(log))
        with pytest.raises(LaunchRefused, match="context_length_holds_episode"):
            launcher.launch(poker_spec(8192), root=tmp_path / "runs")
        assert len(log_events(log)) == before  # refused before the first request
        # a context that holds passes the check and goes on to the evaluator, which is missing here:
        # refused there, and still nothing is created
        with pytest.raises(LaunchRefused, match="evaluator"):
            launcher.launch(poker_spec(16384), root=tmp_path / "runs")
        reports = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("preflight.json")]
        assert sorted(r["passed"] for r in reports) == [False, True]
        fw = client(srv)
        assert list(fw.datasets.list()) == [] and list(fw.reinforcement_fine_tuning_jobs.list()) == []
        assert not [e for e in log_events(log) if e.get("method") == "POST"]
    finally:
        srv.stop()


def test_a_template_that_cannot_be_formatted_is_one_line():
    (r,) = dataset_rows(1)
    r["input_metadata"]["dataset_info"]["user_prompt_template"] = "{nope} {observation}"
    with pytest.raises(ValueError, match="user_prompt_template cannot be formatted") as refused:
        play_transcript(r, PromptSeeded(POKER_POLICIES["call"]), hands=1)
    assert "\n" not in str(refused.value) and "poker_s1000" in str(refused.value)
