"""The spectrum task as a tinker-cookbook env (``rftlab.training.spectrum.cookbook_env``): checked against
the project env stepped directly, the Fireworks path's own requests (``run_turn_episode`` on the local
policy server), the simulated trainer's salts, and the cookbook's own rollout loop on the tiny model."""

from __future__ import annotations

import asyncio
import json
import pickle

import pytest
from tinker_cookbook.renderers import ToolCall as CookbookToolCall

from rftlab.envs.spectrum.rft import (
    AssistantTurn,
    SpectrumRFTConfig,
    SpectrumRFTEnv,
    ToolCall,
    band_seed,
    submit,
)
from rftlab.training.spectrum.cookbook_env import (
    SpectrumCookbookConfig,
    SpectrumCookbookEnv,
    SpectrumEnvGroupBuilder,
    SpectrumRLDataset,
    SpectrumRLDatasetBuilder,
    make_renderer,
    read_reply,
)


def _run(coro):
    return asyncio.run(coro)


def _builder(
    memory="echo", prompt="weak", epoch=0, group_size=3, num_scans=12, **kw
) -> SpectrumEnvGroupBuilder:
    cfg = SpectrumCookbookConfig(
        memory=memory, prompt=prompt, rows=2, group_size=group_size, num_scans=num_scans, **kw
    )
    return SpectrumRLDataset(cfg, [epoch]).get_batch(0)[0]


def _env(memory="echo", **kw) -> SpectrumCookbookEnv:
    return _run(_builder(memory, group_size=1, **kw).make_envs())[0]


def _direct(env: SpectrumCookbookEnv) -> SpectrumRFTEnv:
    """The project env on the same row, band and configuration, stepped directly."""
    direct = SpectrumRFTEnv(SpectrumRFTConfig.from_dict(env.config.to_dict()))
    direct.reset(env.row_id, salt=env.salt)
    return direct


def _tokens(env: SpectrumCookbookEnv, text: str) -> list[int]:
    """A reply as the sampler returns it: the text's tokens (special tokens included)."""
    return env.renderer.tokenizer.encode(text, add_special_tokens=False)


def _rendered_call(env: SpectrumCookbookEnv, name: str, arguments: dict) -> list[int]:
    """A well-formed reply built by the renderer: the tokens it trains on for an assistant message holding
    one tool call (the Qwen3 ``<tool_call>`` block, ``<|im_end|>``)."""
    call = CookbookToolCall(
        function=CookbookToolCall.FunctionBody(name=name, arguments=json.dumps(arguments))
    )
    msgs = [{"role": "user", "content": "scan"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    model_input, weights = env.renderer.build_supervised_example(msgs)
    tokens = model_input.to_ints()
    return [t for t, w in zip(tokens, weights.tolist(), strict=True) if w > 0]


# ------------------------------------------------------------------------------------ bands


@pytest.mark.parametrize("memory", ["echo", "scrambled"])
def test_every_candidate_of_a_row_faces_the_same_band(memory):
    builder = _builder(memory, prompt="explicit", epoch=3)
    envs = _run(builder.make_envs())
    assert len(envs) == 3 and builder.salt == SpectrumCookbookConfig().salt(3)
    seed = band_seed(builder.row_id, builder.salt)
    assert {e.spectrum.band_seed for e in envs} == {seed}
    first = envs[0].spectrum
    for e in envs[1:]:
        assert e.spectrum.layout.centers == first.layout.centers
        assert e.spectrum.scans == first.scans
    obs = [_run(e.initial_observation())[0].to_ints() for e in envs]
    assert all(o == obs[0] for o in obs)
    # the same report from every candidate: the same next scan, the same (real or scrambled) running list
    reply = _rendered_call(envs[0], "submit_report", {"center_freqs": [20.0, 100.0, 150.5]})
    steps = [_run(e.step(reply)) for e in envs]
    assert len({tuple(s.next_observation.to_ints()) for s in steps}) == 1
    echoes = [e.spectrum.records[-1]["echo"] for e in envs]
    later = [_run(e.step(reply)) for e in envs]
    assert len({tuple(s.next_observation.to_ints()) for s in later}) == 1
    shown = {tuple(e.spectrum.records[-1]["echo"]) for e in envs}
    assert echoes == [None] * 3 and len(shown) == 1
    if memory == "scrambled":
        assert shown != {(20.0, 100.0, 150.5)}  # the control shows another list of the same length
        assert len(next(iter(shown))) == 3
    else:
        assert shown == {(20.0, 100.0, 150.5)}
    # another epoch: fresh bands, still one per row
    other = _builder(memory, prompt="explicit", epoch=4)
    assert other.salt != builder.salt
    assert {e.spectrum.band_seed for e in _run(other.make_envs())} == {band_seed(other.row_id, other.salt)}


def test_salts_rows_and_batches_are_the_arms():
    from rftlab.launch.fireworks import default_dataset_rows
    from rftlab.launch.spectrum.spec import load_arm_spec
    from rftlab.runs.paths import spec_path
    from rftlab.training.spectrum.grpo import SpectrumGRPOConfig

    spec = load_arm_spec(spec_path("spectrum_C.json"))
    cfg = SpectrumCookbookConfig.from_arm_spec(spec, batch_rows=5)
    assert (cfg.group_size, cfg.rows, cfg.memory, cfg.prompt) == (12, 48, "echo", "weak")
    assert cfg.dataset_rows() == list(default_dataset_rows(spec))  # the rows the Fireworks job uploads
    assert cfg.salt(0) == "be326a4e" and cfg.salt(1) == "2ddfd1c9"  # docs/spectrum.md §B.2
    sim = SpectrumGRPOConfig(seed=7)
    assert SpectrumCookbookConfig(seed=7).salt(5) == sim.salt(5)
    assert SpectrumCookbookConfig(epoch_salt=False).salt(5) == ""
    ds = SpectrumRLDataset(cfg, range(2, 4))
    assert ds.batches_per_epoch == 10 and len(ds) == 20
    batches = [ds.get_batch(i) for i in range(len(ds))]
    assert [len(b) for b in batches[:10]] == [5] * 9 + [3]
    ids = [b.row_id for batch in batches[:10] for b in batch]
    assert ids == [f"sc2_{i}" for i in range(48)]
    assert {b.salt for batch in batches[:10] for b in batch} == {cfg.salt(2)}
    assert {b.salt for batch in batches[10:] for b in batch} == {cfg.salt(3)}
    assert ds.epoch_of(9) == 2 and ds.epoch_of(10) == 3
    with pytest.raises(IndexError):
        ds.get_batch(20)
    built, test = _run(SpectrumRLDatasetBuilder(config=cfg, epochs=4, first_epoch=2)())
    assert test is None and len(built) == 20 and built.get_batch(10)[0].salt == cfg.salt(3)
    # a builder pickles (rollouts may run in another process) and still makes its envs there
    copy = pickle.loads(pickle.dumps(batches[0][0]))
    assert copy == batches[0][0]
    envs = _run(copy.make_envs())
    assert len(envs) == 12 and envs[0].spectrum.band_seed == band_seed("sc2_0", cfg.salt(2))


# ------------------------------------------------------------------------------------ what the model sees


@pytest.fixture(scope="module")
def server():
    from rftlab.policies.server import PolicyServer
    from rftlab.policies.spectrum.reference import RFT_POLICIES

    with PolicyServer({"memoryless": RFT_POLICIES["memoryless"]}) as srv:
        yield srv


@pytest.mark.usefixtures("no_network")
@pytest.mark.parametrize("memory", ["echo", "scrambled", "notepad"])
def test_the_model_sees_what_the_fireworks_path_sends(server, memory):
    """The first two model inputs equal the Fireworks path's requests for the same row and salt, rendered
    by the cookbook renderer with the request's own tools (an independent check through
    ``run_turn_episode``)."""
    from eval_protocol.models import EvaluationRow

    from rftlab.policies.spectrum.reference import RFT_POLICIES
    from rftlab.rollout.spectrum.processors import run_turn_episode

    env = _env(memory, prompt="explicit", epoch=2)
    row = EvaluationRow(**_builder(memory, prompt="explicit", epoch=2).row)
    params = {"model": "openai/memoryless", "base_url": server.base_url, "temperature": 0.0, "max_tokens": 64}
    before = len(server.requests)
    asyncio.run(run_turn_episode(row, params, salt=env.salt))
    requests = list(server.requests)[before:]
    assert len(requests) == 12

    def rendered(request) -> list[int]:
        msgs = request["messages"]
        tools = [t["function"] for t in request["tools"]]
        prefix = env.renderer.create_conversation_prefix_with_tools(tools, msgs[0]["content"])
        return env.renderer.build_generation_prompt(prefix + msgs[1:]).to_ints()

    ob, stop = _run(env.initial_observation())
    assert stop == env.renderer.get_stop_sequences()
    assert env.messages()[1] == requests[0]["messages"][1]  # the same scan-1 text
    assert ob.to_ints() == rendered(requests[0])
    assert [t["function"]["name"] for t in requests[0]["tools"]] == (
        ["notepad_read", "notepad_write", "submit_report"] if memory == "notepad" else ["submit_report"]
    )
    # the memoryless report of scan 1, as a Qwen3 tool call: the next input is the Fireworks path's second
    report = RFT_POLICIES["memoryless"]().act(SpectrumRFTEnv(env.config).reset(env.row_id, salt=env.salt))
    step = _run(env.step(_rendered_call(env, "submit_report", {"center_freqs": report})))
    assert step.metrics["scored"] == 1.0 and not step.episode_done
    assert env.messages()[1]["content"] == requests[1]["messages"][1]["content"]
    assert step.next_observation.to_ints() == rendered(requests[1])
    if memory != "notepad":
        assert "=== YOUR RUNNING LIST" in env.messages()[1]["content"]


# ------------------------------------------------------------------------------------ replies and scores


def test_a_well_formed_tool_call_gets_the_env_reward_for_that_report():
    env = _env("echo")
    direct = _direct(env)
    truth = list(env.spectrum.layout.centers)
    reports = [[20.0, 100.0], truth, [], truth[:3] + [175.0], truth]
    total = []
    for i in range(12):
        report = reports[i % len(reports)]
        expected_occ, expected_avail = env.spectrum.score_report(report)
        step = _run(env.step(_rendered_call(env, "submit_report", {"center_freqs": report})))
        want = direct.step(submit(report))
        assert step.metrics["env_reward"] == want.reward == expected_occ
        assert step.metrics["occ"] == want.info.occ and step.metrics["avail"] == expected_avail
        assert step.metrics["valid_submit"] == 1.0 and step.metrics["parse_error"] == 0.0
        total.append(step.reward)
    assert step.episode_done and step.metrics["stop/completed"] == 1.0
    assert env.spectrum.records == direct.records
    assert sum(total) == step.reward == direct.metrics()["reward"]  # 3 x mean occ, on the last step only
    m = env.episode_metrics()
    for key in ("mean_occ", "memory_gain", "carry_rate", "early_occ", "late_occ", "report_size"):
        assert m[key] == direct.metrics()[key]
    assert m["valid_submits"] == 12 and m["model_calls"] == 12 and m["parse_errors"] == 0


_CALL = "<tool_call>\n{body}\n</tool_call><|im_end|>"


@pytest.mark.parametrize(
    ("reply", "equivalent", "flags"),
    [
        # no tool call at all: the forced empty step, unscored (B.9)
        ("I think the band is busy.<|im_end|>", AssistantTurn((), "I think the band is busy."), {}),
        # cut before <|im_end|> (max_tokens): a turn without a tool call
        (
            '<tool_call>\n{"name": "submit_report", "arguments": {"center_freqs": [20]}}',
            AssistantTurn(),
            {"parse_error": 1.0},
        ),
        # two stop tokens (the renderer refuses the reply): a turn without a tool call
        ("a<|im_end|>b<|im_end|>", AssistantTurn(), {"parse_error": 1.0}),
        # bad JSON inside the tool call: an unreadable call, answered with an error, no advance
        (
            _CALL.format(body='{"name": "submit_report", "arguments": {center_freqs: [20]}}'),
            AssistantTurn((None,)),
            {"tool_calls_unparsed": 1.0},
        ),
        # a tool the arm does not offer: an error result, no advance
        (
            _CALL.format(body='{"name": "notepad_read", "arguments": {}}'),
            AssistantTurn((ToolCall("notepad_read", {}),)),
            {"tool_errors": 1.0},
        ),
        (
            _CALL.format(body='{"name": "submit", "arguments": {"center_freqs": [20]}}'),
            AssistantTurn((ToolCall("submit", {}),)),
            {"tool_errors": 1.0},
        ),
        # no arguments: center_freqs missing, an empty report, scored 0
        (
            _CALL.format(body='{"name": "submit_report"}'),
            AssistantTurn((ToolCall("submit_report", None),)),
            {"tool_calls_recovered": 1.0},
        ),
        (
            _CALL.format(body='{"name": "submit_report", "arguments": {}}'),
            AssistantTurn((submit(None),)),
            {"tool_calls": 1.0},
        ),
        # arguments as a JSON string (OpenAI style): the env decodes it
        (
            _CALL.format(body='{"name": "submit_report", "arguments": "{\\"center_freqs\\": [20, 99.5]}"}'),
            AssistantTurn((submit([20, 99.5]),)),
            {"tool_calls_recovered": 1.0, "valid_submit": 1.0},
        ),
        # centres as strings and junk: the env's own conversions
        (
            _CALL.format(
                body='{"name": "submit_report", "arguments": {"center_freqs": ["20", true, "x", 1e999]}}'
            ),
            AssistantTurn((submit(["20", True, "x", float("inf")]),)),
            {"tool_calls": 1.0},
        ),
        (
            _CALL.format(body='{"name": "submit_report", "arguments": {"center_freqs": "not a list"}}'),
            AssistantTurn((submit("not a list"),)),
            {},
        ),
    ],
)
def test_a_malformed_reply_is_scored_as_the_spec_says(reply, equivalent, flags):
    env = _env("echo")
    direct = _direct(env)
    # scan 1 answered well, so the next scan shows a running list
    first = _rendered_call(env, "submit_report", {"center_freqs": [50.0]})
    _run(env.step(first))
    direct.step(submit([50.0]))
    step = _run(env.step(_tokens(env, reply)))
    want = direct.step(equivalent)
    assert step.metrics["env_reward"] == want.reward
    assert (step.metrics["scored"], step.metrics["forced"]) == (
        float(want.info.scored),
        float(want.info.forced),
    )
    assert step.metrics["tool_errors"] == len(want.info.tool_errors)
    assert env.spectrum.records == direct.records and env.spectrum.scan_index == direct.scan_index
    assert env.spectrum.metrics() == direct.metrics()
    for key, value in flags.items():
        assert step.metrics[key] == value, key
    if flags.get("parse_error"):
        assert step.logs["parse_error"]
    assert not step.episode_done and step.reward == 0.0


def test_a_scan_of_unreadable_calls_ends_with_the_forced_empty_step():
    env = _env("echo")
    bad = _tokens(env, _CALL.format(body="{oops"))
    steps = [_run(env.step(bad)) for _ in range(6)]
    assert [s.metrics["forced"] for s in steps] == [0.0] * 5 + [1.0]
    assert all(s.metrics["scan"] == 1.0 for s in steps)
    assert env.spectrum.records[-1]["forced"] and env.spectrum.scan_index == 1
    assert "tool_errors" in steps[0].logs and "unparsed_tool_calls" in steps[0].logs
    # the window of the next call: the failed calls of scan 1 are gone, scan 2 starts it
    assert "Scan 2/12" in env.messages()[1]["content"] and len(env.messages()) == 2


def test_a_reply_cut_at_max_tokens_plays_on_and_an_all_forced_episode_scores_the_spec_penalty():
    env = _env("notepad", num_scans=3)
    cut = _tokens(env, "<think>\nthe peaks are")
    for _ in range(3):
        step = _run(env.step(cut, extra={"stop_reason": "length"}))
        assert step.metrics["reply_cut"] == 1.0 and step.metrics["forced"] == 1.0
        assert step.logs["parse_error"] == "cut at max_tokens"
    assert step.episode_done and step.reward == -0.2  # n == 0 scored scans (B.8)
    assert env.episode_metrics()["scans_forced"] == 3 and env.record()["complete"] is True


def test_notepad_calls_and_the_write_cost():
    env = _env("notepad", num_scans=2, notepad_write_cost=0.1)
    two = (
        '<tool_call>\n{"name": "notepad_write", "arguments": {"text": "20, 99"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "submit_report", "arguments": {"center_freqs": [20, 99]}}\n</tool_call><|im_end|>'
    )
    step = _run(env.step(_tokens(env, two)))
    assert step.metrics["tool_calls"] == 2.0 and step.metrics["scored"] == 1.0
    assert env.spectrum.notepad == "20, 99"
    read = _run(env.step(_tokens(env, _CALL.format(body='{"name": "notepad_read", "arguments": {}}'))))
    assert read.metrics["scored"] == 0.0 and read.metrics["forced"] == 0.0
    assert "20, 99" in env.messages()[-1]["content"]  # the tool result, inside this scan's window
    last = _run(
        env.step(
            _tokens(env, _CALL.format(body='{"name": "submit_report", "arguments": {"center_freqs": [20]}}'))
        )
    )
    assert last.episode_done
    m = env.spectrum.metrics()
    assert m["notepad_writes"] == 1 and m["notepad_reads"] == 1
    assert last.reward == pytest.approx(m["reward"] - 0.1)
    assert env.episode_metrics()["write_cost"] == pytest.approx(0.1)
    assert env.record()["reward"] == pytest.approx(m["reward"] - 0.1)


def test_any_reply_text_is_scored_without_raising():
    """Arbitrary model text, with or without the stop token and inside or outside a tool-call block, steps
    the env; a reply without a ``<tool_call>`` block is the forced empty step; a block holding a
    ``submit_report`` object scores the report the env reads from those arguments."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    renderer = make_renderer("rftlab/tiny-qwen3")
    builder = _builder("echo", group_size=1)

    def fresh():
        return SpectrumCookbookEnv(builder.row, builder.salt, renderer)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=st.text(max_size=300), stop=st.booleans(), wrap=st.booleans())
    def check(text, stop, wrap):
        env = fresh()
        reply = (f"<tool_call>\n{text}\n</tool_call>" if wrap else text) + ("<|im_end|>" if stop else "")
        step = _run(env.step(_tokens(env, reply)))
        assert set(step.metrics) >= {"scored", "forced", "env_reward", "parse_error"}
        assert all(isinstance(v, float) for v in step.metrics.values())
        assert all(isinstance(v, str) for v in step.logs.values())
        if "<tool_call>" not in reply:
            assert step.metrics["forced"] == 1.0 and step.metrics["env_reward"] == 0.0
        if wrap and stop and "<" not in text and "<|im_end|>" not in text:
            try:
                obj = json.loads(text)
            except ValueError:
                obj = None
            if (
                isinstance(obj, dict)
                and obj.get("name") == "submit_report"
                and isinstance(obj.get("arguments"), dict)
            ):
                direct = _direct(env)
                want = direct.step(AssistantTurn((ToolCall("submit_report", json.dumps(obj["arguments"])),)))
                assert step.metrics["scored"] == 1.0 and step.metrics["env_reward"] == want.reward

    check()
    # and the same for tool-call objects that hypothesis builds (names, argument shapes)
    values = st.recursive(
        st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=12,
    )

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(name=st.sampled_from(["submit_report", "notepad_read", "x"]) | st.text(max_size=5), freqs=values)
    def check_calls(name, freqs):
        env = fresh()
        body = json.dumps({"name": name, "arguments": {"center_freqs": freqs}})
        step = _run(env.step(_tokens(env, _CALL.format(body=body))))
        direct = _direct(env)
        want = direct.step(AssistantTurn((ToolCall(name, {"center_freqs": json.loads(json.dumps(freqs))}),)))
        assert step.metrics["env_reward"] == want.reward
        assert step.metrics["scored"] == float(want.info.scored)
        assert env.spectrum.records == direct.records

    check_calls()


def test_read_reply_keeps_unparsable_blocks_in_the_conversation():
    renderer = make_renderer("rftlab/tiny-qwen3")
    tokens = renderer.tokenizer.encode(
        'ok <tool_call>\n{"name": "submit_report", "arguments": {"center_freqs": [1]}}\n</tool_call>'
        "<tool_call>{bad}</tool_call><|im_end|>",
        add_special_tokens=False,
    )
    reply = read_reply(renderer, tokens)
    assert reply.parsed_calls == 1 and len(reply.unparsed) == 1 and reply.recovered == 0
    assert [c.name if c else None for c in reply.turn.tool_calls] == ["submit_report", None]
    assert "{bad}" in reply.text and reply.structural is None


# ------------------------------------------------------------------------------------ the cookbook's rollout


@pytest.fixture(scope="module")
def long_context_tiny_model(tmp_path_factory):
    """The built-in ``rftlab/tiny-qwen3`` (its own weights and tokenizer) saved as a model directory whose
    context is 8192 positions instead of 1024: one spectrum prompt is about 2700 tokens of its tokenizer.
    Qwen3's rotary positions have no table, so only the declared limit changes."""
    from rftlab.training.local_tinker import TINY_MODEL, build_tiny_model

    model, tokenizer = build_tiny_model(TINY_MODEL)
    model.config.max_position_embeddings = 8192
    path = tmp_path_factory.mktemp("tiny-qwen3-8k")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("memory", ["scrambled", "notepad"])
def test_a_group_rolled_out_by_the_cookbook_on_the_tiny_model(long_context_tiny_model, memory):
    from tinker_cookbook.completers import TinkerTokenCompleter
    from tinker_cookbook.rl.data_processing import assemble_training_data, compute_advantages
    from tinker_cookbook.rl.rollouts import do_group_rollout

    from rftlab.training.local_tinker import LocalServiceClient

    sampler = LocalServiceClient().create_sampling_client(base_model=long_context_tiny_model).result()
    builder = _builder(memory, prompt="explicit", group_size=3, num_scans=3, epoch=1)
    policy = TinkerTokenCompleter(sampler, max_tokens=40, temperature=1.2)
    group = _run(do_group_rollout(builder, policy))
    assert len(group.trajectories_G) == 3 and not group.rollout_errors
    envs = builder.envs
    assert len({e.spectrum.band_seed for e in envs}) == 1
    for traj, env, metrics in zip(group.trajectories_G, envs, group.metrics_G, strict=True):
        assert len(traj.transitions) == env.model_calls >= 3 and traj.stop_reason == "completed"
        for t in traj.transitions:
            assert t.ac.tokens and len(t.ac.logprobs) == len(t.ac.tokens)
            assert all(lp <= 0.0 for lp in t.ac.logprobs)
            assert t.metrics["scored"] + t.metrics["forced"] <= 1.0
        assert sum(t.reward for t in traj.transitions) == env.episode_reward()
        assert metrics["reward"] == env.episode_reward() and metrics["model_calls"] == env.model_calls
        assert env.spectrum.done and metrics["scans_completed"] + metrics["scans_forced"] == 3
        record = env.record()
        assert record["band_seed"] == band_seed(builder.row_id, builder.salt) and len(record["records"]) == 3
        json.dumps(record)
    assert group.get_total_rewards() == [e.episode_reward() for e in envs]
    # the cookbook's own advantage and datum functions take the trajectories as they are
    advantages = compute_advantages([group])
    data, _meta = assemble_training_data([group], advantages)
    assert data and all(d.model_input.length > 0 for d in data)
