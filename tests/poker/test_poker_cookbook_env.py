"""The poker task as a tinker-cookbook env (``rftlab.training.poker.cookbook_env``): checked against the McpGym
server's own initial state and tool results (with eval-protocol's own formatting), the project env stepped
directly, the Fireworks evaluator's scoring of the same transcript, and the cookbook's own rollout loop on
the tiny model."""

from __future__ import annotations

import asyncio
import json
import pickle

import pytest
from tinker_cookbook.renderers import ToolCall as CookbookToolCall

from rftlab.envs.poker.env import PokerEnv, row_assignment
from rftlab.envs.poker.task import UnreadableAction
from rftlab.policies.poker.reference import RandomLegal
from rftlab.rewards.poker import REWARDS, mean_instance_reward
from rftlab.rollout.poker.turns import POKER_ACT_TOOL, mcp_config, step_text
from rftlab.training.poker.cookbook_env import (
    PokerCookbookConfig,
    PokerCookbookEnv,
    PokerEnvGroupBuilder,
    PokerRLDataset,
    PokerRLDatasetBuilder,
    make_renderer,
)

HANDS = 3


def _run(coro):
    return asyncio.run(coro)


def _builder(row=0, group_size=3, hands=HANDS, reward="mean_instance", **kw) -> PokerEnvGroupBuilder:
    cfg = PokerCookbookConfig(rows=row + 1, hands=hands, reward=reward, group_size=group_size, **kw)
    return PokerRLDataset(cfg).epoch_builders(0)[row]


def _env(row=0, **kw) -> PokerCookbookEnv:
    return _run(_builder(row, group_size=1, **kw).make_envs())[0]


def _direct(env: PokerCookbookEnv) -> PokerEnv:
    """The project env on the same row's deal, as the McpGym server configures it, stepped directly."""
    direct = PokerEnv(mcp_config(env.hands))
    direct.reset(env.row_id, opponent=env.opponent, card_seed=env.card_seed)
    return direct


def _tokens(env: PokerCookbookEnv, text: str) -> list[int]:
    return env.renderer.tokenizer.encode(text, add_special_tokens=False)


def _rendered_call(env: PokerCookbookEnv, arguments: dict, name: str = "poker_act") -> list[int]:
    """A well-formed reply built by the renderer: the tokens it trains on for an assistant message holding
    one tool call (the Qwen3 ``<tool_call>`` block, ``<|im_end|>``)."""
    call = CookbookToolCall(
        function=CookbookToolCall.FunctionBody(name=name, arguments=json.dumps(arguments))
    )
    msgs = [{"role": "user", "content": "hand"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    model_input, weights = env.renderer.build_supervised_example(msgs)
    tokens = model_input.to_ints()
    return [t for t, w in zip(tokens, weights.tolist(), strict=True) if w > 0]


def _tool_args(action: dict) -> dict:
    amount = action.get("amount")
    return {"action": action["action"], "thinking": "", "amount": -1 if amount is None else amount}


# ------------------------------------------------------------------------------------ the arm and deals


def test_config_rows_and_batches_are_the_arms():
    from rftlab.launch.poker.spec import load_poker_arm_spec
    from rftlab.runs.paths import spec_path
    from rftlab.studies.poker import fireworks_launcher

    for name, reward in (("poker_seed.json", "mean_instance"), ("poker_gain.json", "gain")):
        spec = load_poker_arm_spec(spec_path(name))
        cfg = PokerCookbookConfig.from_arm_spec(spec, batch_rows=5)
        assert (cfg.group_size, cfg.rows, cfg.hands, cfg.reward) == (8, 64, 16, reward)
        assert (cfg.temperature, cfg.max_tokens, cfg.thinking, cfg.illegal_retry_limit) == (
            1.0,
            1024,
            False,
            3,
        )
        # the rows the Fireworks job uploads
        assert cfg.dataset_rows() == list(fireworks_launcher().dataset_rows(spec))
    ds = PokerRLDataset(cfg, range(1, 3))
    assert ds.batches_per_epoch == 13 and len(ds) == 26
    batches = [ds.get_batch(i) for i in range(len(ds))]
    assert [len(b) for b in batches[:13]] == [5] * 12 + [4]
    assert [b.row_id for batch in batches[:13] for b in batch] == [f"poker_s{1000 + i}" for i in range(64)]
    assert ds.epoch_of(12) == 1 and ds.epoch_of(13) == 2 and batches[13][0].epoch == 2
    assert {b.reward for batch in batches for b in batch} == {"gain"}
    with pytest.raises(IndexError):
        ds.get_batch(26)
    built, test = _run(PokerRLDatasetBuilder(config=cfg, epochs=3, first_epoch=1)())
    assert test is None and len(built) == 26
    with pytest.raises(ValueError, match="reward"):
        PokerCookbookConfig(reward="final_instance")


def test_every_candidate_of_a_row_faces_the_same_deal():
    builder = _builder(row=3, group_size=4)
    envs = _run(builder.make_envs())
    ctx = builder.row["input_metadata"]["dataset_info"]["environment_context"]
    assert (
        (ctx["opponent"], ctx["card_seed"]) == row_assignment(builder.row_id) == ("fit_or_fold", 1835058401)
    )
    assert {(e.opponent, e.card_seed) for e in envs} == {(ctx["opponent"], ctx["card_seed"])}
    obs = [_run(e.initial_observation())[0].to_ints() for e in envs]
    assert all(o == obs[0] for o in obs)
    # the same replies: the same cards, results and next inputs for every candidate
    policy = RandomLegal(5)
    direct = _direct(envs[0])
    d_obs = direct.reset(builder.row_id, opponent=envs[0].opponent, card_seed=envs[0].card_seed)
    while not d_obs.done:
        action = policy.act(d_obs)
        reply = _rendered_call(envs[0], _tool_args(action))
        steps = [_run(e.step(reply)) for e in envs]
        d_obs = direct.step(action).observation
        assert len({tuple(s.next_observation.to_ints()) for s in steps}) == 1
    assert all(e.done for e in envs)
    assert len({json.dumps(e.env.metrics()["hand_id"]) for e in envs}) == 1
    assert {e.episode_reward() for e in envs} == {envs[0].episode_reward()}
    assert builder.logging_tags() == ["poker", "poker_fit_or_fold"]
    # a builder pickles (rollouts may run in another process) and makes the same envs there
    copy = pickle.loads(pickle.dumps(builder))
    assert copy == builder
    again = _run(copy.make_envs())
    assert _run(again[0].initial_observation())[0].to_ints() == obs[0]


def test_an_episode_whose_hands_all_end_before_a_decision_ends_on_the_first_reply():
    """Row poker_s1002 over 3 hands: Adam folds his button every time, so the system never decides; the
    first user message is empty (as on the McpGym path) and any first reply ends the episode unpenalised."""
    for reply in ("no call<|im_end|>", None):
        env = _env(row=2)
        assert env.session.first.done and env.chat == [{"role": "user", "content": ""}]
        tokens = _tokens(env, reply) if reply else _rendered_call(env, {"action": "CALL"})
        step = _run(env.step(tokens))
        assert step.episode_done and step.metrics["illegal"] == 0.0
        assert env.hand_bb() == [0.5, 0.5, 0.5] and step.reward == pytest.approx(0.5 + 0.1 * (reply is None))
        assert "HAND_PROFITS_BB: 0.5000,0.5000,0.5000" in env.chat[-1]["content"]


# ------------------------------------------------------------------------------------ what the model sees


def _mcp_tools(gym) -> list[dict]:
    """The tools as eval-protocol offers them: the server's ``list_tools``, converted by its LiteLLM policy."""
    from eval_protocol.mcp.execution.policy import LiteLLMPolicy

    listed = _run(gym.mcp.list_tools())
    mcp_tools = [
        {"name": t.name, "description": t.description, "input_schema": t.inputSchema} for t in listed
    ]
    return LiteLLMPolicy._convert_mcp_tools_to_llm_format(None, mcp_tools)


@pytest.mark.parametrize("reward", ["mean_instance", "gain"])
def test_the_model_sees_what_the_mcpgym_path_sends(reward):
    """The first two model inputs equal the McpGym path's for the same row: the server's initial state and
    tool result for the row's key, formatted by eval-protocol's own session manager, the row's system
    prompt, rendered by the cookbook renderer with the tools the server lists."""
    from eval_protocol.mcp.session.manager import GeneralMCPVectorEnv

    from rftlab.rollout.poker.mcp import PokerMcpGym

    builder = _builder(row=1, reward=reward)
    env = _run(builder.make_envs())[0]
    gym = PokerMcpGym(mcp_config(HANDS))
    sid = builder.row_id  # the server's key rule applied to the row id: row_assignment(row_id)
    session = gym.sessions.setdefault(sid, {"session_id": sid, "session_data": {}})
    initial = gym.get_initial_state_endpoint(session)
    assert session["env"].env.opponent == env.opponent
    user = GeneralMCPVectorEnv._default_formatter(None, "{observation}", initial, {})
    tools = _mcp_tools(gym)
    assert tools == [POKER_ACT_TOOL]
    system = builder.row["messages"][0]["content"]
    assert system.endswith(" /no_think")

    def rendered(messages) -> list[int]:
        prefix = env.renderer.create_conversation_prefix_with_tools([t["function"] for t in tools], system)
        return env.renderer.build_generation_prompt(prefix + messages).to_ints()

    ob, stop = _run(env.initial_observation())
    assert stop == env.renderer.get_stop_sequences()
    assert env.messages()[1] == {"role": "user", "content": user}
    assert ob.to_ints() == rendered([{"role": "user", "content": user}])
    # one poker_act call: the next input holds the server's tool result as eval-protocol formats it
    args = {"action": "fold", "thinking": "weak", "amount": -1, "notepad_update": "Adam folds a lot"}
    step = _run(env.step(_rendered_call(env, args)))
    result = GeneralMCPVectorEnv.format_tool_response(None, gym._execute_session_environment_step(sid, args))
    call = CookbookToolCall(
        id=env.chat[1]["tool_calls"][0]["id"],
        function=CookbookToolCall.FunctionBody(name="poker_act", arguments=json.dumps(args)),
    )
    want = [
        {"role": "user", "content": user},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": result, "tool_call_id": call.id},
    ]
    assert env.chat[-1]["content"] == result
    assert "FEEDBACK FROM PREVIOUS INSTANCE" in json.loads(result)["observation"]  # the fold ended hand 1
    # B.4 windowing: hand 2's window starts at the call whose result delivered it
    assert step.next_observation.to_ints() == rendered(want[1:])
    assert env.session.notepad == "Adam folds a lot" == session["env"].notepad


# ------------------------------------------------------------------------------------ replies and scores


@pytest.mark.parametrize(("reward", "seed"), [("mean_instance", 0), ("gain", 1), ("mean_instance", 4)])
def test_well_formed_calls_get_the_envs_reward_for_those_actions(reward, seed):
    """An episode of renderer-built ``poker_act`` calls equals the env stepped directly with the same actions
    (every observation, hand and reward), and its reward is the Fireworks evaluator's for the transcript."""
    from eval_protocol.models import EvaluationRow

    from rftlab.rollout.poker.scoring import score_poker_row

    env = _env(row=seed, hands=4, reward=reward)
    direct = _direct(env)
    d_obs = direct.reset(env.row_id, opponent=env.opponent, card_seed=env.card_seed)
    assert not d_obs.done
    policy = RandomLegal(seed)
    total, step_rewards, notepad = [], [], ""
    k = 0
    while not d_obs.done:
        action = policy.act(d_obs)
        k += 1
        args = _tool_args(action)
        if k % 4 == 0:  # now and then an illegal action: the env's own refusal
            args = {"action": "RAISE", "amount": 999_999}
        if k % 3 == 0:
            args["notepad_update"] = notepad = f"note {k}"
        step = _run(env.step(_rendered_call(env, args)))
        want = direct.step({"action": args["action"], "amount": args["amount"]})
        d_obs = want.observation
        result = json.loads(env.chat[-1]["content"])
        assert result == {
            "observation": step_text(d_obs, notepad),
            "instance_complete": d_obs.instance_complete,
        }
        assert step.metrics["env_reward"] == want.reward and step.metrics["valid_call"] == 1.0
        assert step.metrics["illegal"] == float(want.info.illegal and not want.info.forced)
        step_rewards.append(want.reward)
        total.append(step.reward)
    assert step.episode_done and step.metrics["stop/completed"] == 1.0
    assert env.env.metrics() == direct.metrics()
    hand_bb = direct.metrics()["hand_bb"]
    illegal = direct.illegal - direct.forced
    want_score = REWARDS[reward](hand_bb, illegal)["score"]
    assert sum(total) == step.reward == env.episode_reward() == pytest.approx(want_score, abs=1e-12)
    # the step rewards: every hand but an opening one that ended before the system's first decision (A.7)
    assert sum(step_rewards) == pytest.approx(sum(r.reward for r in direct.task.records if r.shown))
    m = env.episode_metrics()
    assert (m["hands_completed"], m["illegal_actions"], m["valid_calls"]) == (4, illegal, k)
    # the Fireworks evaluator, scoring the same transcript
    record = env.record()
    row = EvaluationRow(**{**env_row(env), "messages": record["messages"]})
    scored = score_poker_row(row, reward).evaluation_result
    assert scored.is_score_valid and scored.score == pytest.approx(env.episode_reward(), abs=1e-9)
    for key in ("bb_per_hand", "memory_gain", "illegal_actions", "hands_completed"):
        assert scored.metrics[key].score == pytest.approx(m[key], abs=1e-9), key
    json.dumps(record)


def env_row(env: PokerCookbookEnv) -> dict:
    return _builder(row=int(env.row_id.removeprefix("poker_s")) - 1000, reward=env.reward_name).row


_CALL = "<tool_call>\n{body}\n</tool_call><|im_end|>"
UNREADABLE = "Invalid poker action: Could not read the action ("


@pytest.mark.parametrize(
    ("reply", "why", "delivered_as", "flags"),
    [
        ("I call.<|im_end|>", "no poker_act tool call in the reply", "user", {}),
        (
            '<tool_call>\n{"name": "poker_act", "arguments": {"action": "CALL"}}',
            "the reply did not end cleanly: cut at max_tokens",
            "user",
            {"parse_error": 1.0, "reply_cut": 1.0},
        ),
        ("a<|im_end|>b<|im_end|>", "the reply did not end cleanly: ", "user", {"parse_error": 1.0}),
        (
            _CALL.format(body='{"name": "poker_act", "arguments": {action: CALL}}'),
            "the tool call is not valid JSON (",
            "user",
            {"tool_calls_unparsed": 1.0},
        ),
        (
            _CALL.format(body='{"name": "submit_report", "arguments": {"action": "CALL"}}'),
            "unknown tool 'submit_report'; the only tool is poker_act",
            "tool",
            {"wrong_tool": 1.0, "tool_calls": 1.0},
        ),
        (
            _CALL.format(body='{"name": "poker_act"}'),
            "the poker_act arguments are not an object (NoneType)",
            "tool",
            {"tool_calls_recovered": 1.0, "bad_arguments": 1.0},
        ),
        (
            _CALL.format(body='{"name": "poker_act", "arguments": {"thinking": "hmm"}}'),
            "'action' must be a string",
            "tool",
            {"bad_arguments": 1.0},
        ),
        (
            _CALL.format(body='{"name": "poker_act", "arguments": {"action": "RAISE", "amount": "lots"}}'),
            "'amount' 'lots' is not an integer",
            "tool",
            {"bad_arguments": 1.0},
        ),
    ],
)
def test_a_malformed_reply_is_refused_as_the_spec_says(reply, why, delivered_as, flags):
    env = _env(row=3)
    direct = _direct(env)
    before = direct.task.current_query.metadata
    stop_reason = "length" if flags.get("reply_cut") else "stop"
    step = _run(env.step(_tokens(env, reply), extra={"stop_reason": stop_reason}))
    last = env.chat[-1]
    assert last["role"] == delivered_as
    text = json.loads(last["content"])["observation"] if delivered_as == "tool" else last["content"]
    assert text.startswith("FEEDBACK: " + UNREADABLE + why)
    # the same as the env refusing an unreadable action: state unchanged, the same decision asked again
    reason = text.removeprefix("FEEDBACK: Invalid poker action: Could not read the action (").split(").\n")[0]
    want = direct.step(UnreadableAction(reason))
    assert text == step_text(want.observation, "")
    assert direct.task.current_query.metadata == before == env.env.task.current_query.metadata
    assert direct.task.current_query.prompt == env.env.task.current_query.prompt
    assert (step.metrics["illegal"], step.metrics["forced"], step.metrics["valid_call"]) == (1.0, 0.0, 0.0)
    assert step.reward == 0.0 and not step.episode_done and step.metrics["env_reward"] == 0.0
    assert env.env.illegal == 1 and env.session.refusals_shown == 1
    for key, value in flags.items():
        assert step.metrics[key] == value, key
    assert step.logs["refusal"].startswith("Could not read the action (")


def test_readable_variants_and_illegal_actions_follow_the_env():
    env = _env(row=0)  # calling_station; the system's first decision
    direct = _direct(env)
    owed = direct.task.current_query.metadata["chips_to_call"]
    legal, illegal = ("call", "CHECK") if owed else ("check", "CALL")
    # a readable but illegal action: the env's own refusal (A.6), not an unreadable one
    step = _run(env.step(_rendered_call(env, {"action": illegal})))
    want = direct.step({"action": illegal})
    assert step.metrics["illegal"] == 1.0 and step.metrics["valid_call"] == 1.0
    assert "Could not read" not in env.chat[-1]["content"] and want.info.reason in env.chat[-1]["content"]
    # arguments as a JSON string (OpenAI style) and a padded lower-case action: read as the McpGym tool reads it
    body = json.dumps({"name": "poker_act", "arguments": json.dumps({"action": f" {legal} "})})
    step = _run(env.step(_tokens(env, _CALL.format(body=body))))
    want = direct.step({"action": legal.upper()})
    assert step.metrics["tool_calls_recovered"] == 1.0 and step.metrics["valid_call"] == 1.0
    assert env.env.metrics() == direct.metrics() and env.valid_calls == 2
    assert json.loads(env.chat[-1]["content"])["observation"] == step_text(want.observation, "")
    # RAISE without an amount: the env's reason (A.6)
    if not env.done:
        _run(env.step(_rendered_call(env, {"action": "RAISE"})))
        assert "RAISE requires an amount." in env.chat[-1]["content"] and env.env.illegal == 2


def test_three_unreadable_replies_force_an_action_and_cost_what_the_evaluator_counts():
    env = _env(row=0, hands=1)
    direct = _direct(env)
    garbage = _tokens(env, "no idea<|im_end|>")
    steps = [_run(env.step(garbage)) for _ in range(3)]
    assert [s.metrics["forced"] for s in steps] == [0.0, 0.0, 1.0]
    assert [s.metrics["illegal"] for s in steps] == [1.0, 1.0, 0.0]
    for _ in range(3):
        want = direct.step(UnreadableAction("no poker_act tool call in the reply"))
    assert want.info.forced and env.env.metrics() == direct.metrics()
    assert env.session.refusals_shown == 2 and env.env.illegal == 3  # B.3's note: the transcript shows two
    step = steps[-1]
    while not env.done:
        step = _run(env.step(garbage))
    assert step.episode_done
    hand_bb, shown = env.hand_bb(), env.session.refusals_shown
    assert len(hand_bb) == 1
    # nothing parsed: the rubric's format term is 0 (B.5)
    assert step.reward == mean_instance_reward(hand_bb, shown, parsed_any=False)["score"]
    assert env.episode_metrics()["illegal_actions"] == shown and env.episode_metrics()["valid_calls"] == 0


def test_the_step_budget_ends_an_episode():
    env = _env(row=0, hands=16, max_env_steps=5)
    for _ in range(4):
        assert not _run(env.step(_rendered_call(env, {"action": "FOLD"}))).episode_done
    last = _run(env.step(_rendered_call(env, {"action": "FOLD"})))
    assert last.episode_done and last.metrics["stop/max_turns"] == 1.0 and not env.session.done
    assert last.reward == env.episode_reward() and env.episode_metrics()["complete"] == 0.0


def test_any_reply_text_is_scored_without_raising():
    """Arbitrary model text, with or without the stop token and inside or outside a tool-call block, steps
    the env once per usable or unusable call; a reply without a ``<tool_call>`` block is one refusal."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    renderer = make_renderer("rftlab/tiny-qwen3")
    row = _builder(row=1).row

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=st.text(max_size=300), stop=st.booleans(), wrap=st.booleans())
    def check(text, stop, wrap):
        env = PokerCookbookEnv(row, renderer)
        reply = (f"<tool_call>\n{text}\n</tool_call>" if wrap else text) + ("<|im_end|>" if stop else "")
        step = _run(env.step(_tokens(env, reply)))
        assert all(isinstance(v, float) for v in step.metrics.values())
        assert all(isinstance(v, str) for v in step.logs.values())
        assert env.env_steps >= 1 and step.metrics["illegal"] + step.metrics["forced"] <= env.env_steps
        if "<tool_call>" not in reply:
            assert env.env_steps == 1 and step.metrics["illegal"] == 1.0
            assert env.chat[-1]["role"] == "user" and UNREADABLE in env.chat[-1]["content"]

    check()
    values = st.recursive(
        st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=10,
    )

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        name=st.sampled_from(["poker_act", "x"]) | st.text(max_size=5),
        action=st.sampled_from(["FOLD", "call", "CHECK", "RAISE", "BET"]) | values,
        amount=values,
    )
    def check_calls(name, action, amount):
        env = PokerCookbookEnv(row, renderer)
        direct = _direct(env)
        body = json.dumps({"name": name, "arguments": {"action": action, "amount": amount}})
        step = _run(env.step(_tokens(env, _CALL.format(body=body))))
        if name == "poker_act" and isinstance(action, str):
            from rftlab.envs.poker.task import PokerAction

            parsed, _why = PokerAction.coerce({"action": action, "amount": json.loads(json.dumps(amount))})
            if parsed is not None:
                want = direct.step({"action": action.strip().upper(), "amount": parsed.amount})
                assert step.metrics["env_reward"] == want.reward
                assert env.env.metrics() == direct.metrics()
                return
        assert step.metrics["illegal"] == 1.0 and env.env.illegal == 1
        assert UNREADABLE in env.chat[-1]["content"]

    check_calls()


# ------------------------------------------------------------------------------------ the cookbook's rollout


@pytest.fixture(scope="module")
def long_context_tiny_model(tmp_path_factory):
    """The built-in ``rftlab/tiny-qwen3`` (its own weights and tokenizer) saved as a model directory whose
    context is 16384 positions instead of 1024: the first poker prompt is 2073 tokens of its tokenizer, and
    a hand's window grows with every refused reply. Qwen3's rotary positions have no table, so only the
    declared limit changes."""
    from rftlab.training.local_tinker import TINY_MODEL, build_tiny_model

    model, tokenizer = build_tiny_model(TINY_MODEL)
    model.config.max_position_embeddings = 16384
    path = tmp_path_factory.mktemp("tiny-qwen3-16k")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def test_a_group_rolled_out_by_the_cookbook_on_the_tiny_model(long_context_tiny_model):
    from tinker_cookbook.completers import TinkerTokenCompleter
    from tinker_cookbook.rl.data_processing import assemble_training_data, compute_advantages
    from tinker_cookbook.rl.rollouts import do_group_rollout

    from rftlab.training.local_tinker import LocalServiceClient

    sampler = LocalServiceClient().create_sampling_client(base_model=long_context_tiny_model).result()
    builder = _builder(row=0, group_size=2, hands=1, reward="gain")
    first = _run(_run(builder.make_envs())[0].initial_observation())[0]
    assert first.length == 2073  # the tiny tokenizer's length of the first prompt (docs/poker.md)
    policy = TinkerTokenCompleter(sampler, max_tokens=24, temperature=1.0)
    group = _run(do_group_rollout(builder, policy))
    assert len(group.trajectories_G) == 2 and not group.rollout_errors
    envs = builder.envs
    assert len({(e.opponent, e.card_seed) for e in envs}) == 1
    for traj, env, metrics in zip(group.trajectories_G, envs, group.metrics_G, strict=True):
        assert len(traj.transitions) == env.model_calls >= 1 and traj.stop_reason == "completed"
        for t in traj.transitions:
            assert t.ac.tokens and len(t.ac.logprobs) == len(t.ac.tokens)
            assert all(lp <= 0.0 for lp in t.ac.logprobs)
        assert sum(t.reward for t in traj.transitions) == env.episode_reward()
        assert metrics["reward"] == env.episode_reward() and metrics["model_calls"] == env.model_calls
        assert env.session.done and metrics["hands_completed"] == 1
        assert metrics["reward"] == REWARDS["gain"](env.hand_bb(), env.session.refusals_shown)["score"]
        json.dumps(env.record())
    assert group.get_total_rewards() == [e.episode_reward() for e in envs]
    advantages = compute_advantages([group])
    data, _meta = assemble_training_data([group], advantages)
    assert data and all(d.model_input.length > 0 for d in data)
