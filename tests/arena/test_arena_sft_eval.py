"""Frozen arena evaluation (docs/arena.md §10): the oracle validates the harness, the local scripted policy reproduces the
model-free baselines through the protocol, the endpoint provider speaks OpenAI-compatible HTTP, and the
validation scorer applies the strict type rules of §11."""

from __future__ import annotations

import json
import statistics
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.analysis.arena.evaluation import paired_effect, summarize_eval, summarize_validation
from rftlab.cli import main
from rftlab.envs.arena.cases import frozen_cases
from rftlab.envs.arena.protocol import action_prompt, broadcast_prompt, encode_broadcast, oracle_broadcast
from rftlab.envs.arena.rules import step
from rftlab.envs.arena.world import generate_state, team_agent_ids
from rftlab.policies.arena.providers import EndpointError, EndpointProvider, OracleProvider, ScriptedProvider
from rftlab.policies.arena.scripted import deterministic_policy, local_policy_action
from rftlab.rollout.arena.evaluation import (
    GENERATIONS_PER_CASE,
    evaluate_case,
    run_frozen_eval,
    score_validation_reply,
)
from rftlab.rollout.arena.sft_data import SftConfig, build_rows


@pytest.fixture(scope="module")
def oracle_summary():
    return summarize_eval(run_frozen_eval(OracleProvider()))


@pytest.fixture(scope="module")
def scripted_records():
    return run_frozen_eval(ScriptedProvider())


def test_oracle_provider_gives_zero_regret_and_strict_rate_one(oracle_summary):
    """§10.4: strict 1.0, consistency 1.0, regret exactly 0, optimal 1.0, Wilson [0.93983, 1], reward 2.645."""
    s = oracle_summary
    assert s["num_cases"] == 60 and s["complete_manifest"]
    assert s["manifest_sha256"].startswith("b53bfc52")
    assert s["message_strict_rate"] == 1.0 and s["action_order_consistency_rate"] == 1.0
    for name in ("dropped", "generated", "reference", "shuffled"):
        c = s["conditions"][name]
        assert c["strict_action_rate"] == 1.0 and c["legal_action_rate"] == 1.0
        assert c["mean_oracle_regret"] == 0.0 and c["mean_oracle_regret_95"] == [0.0, 0.0]
        assert c["optimal_outcome_rate"] == 1.0 and c["nonredundant_joint_action_rate"] == 1.0
        assert c["optimal_outcome_wilson_95"][0] == pytest.approx(0.93983, abs=5e-6)
        assert c["optimal_outcome_wilson_95"][1] == pytest.approx(1.0)
        assert c["mean_environment_reward"] == pytest.approx(2.645, abs=1e-9)
        low, high = c["mean_environment_reward_95"]
        assert (low, high) == (pytest.approx(2.02854, abs=5e-6), pytest.approx(3.26146, abs=5e-6))
    for effect in s["communication_effects"].values():
        assert effect["mean_difference"] == 0.0 and effect["zero_case_rate"] == 1.0
    assert s["perm_regret_delta"]["1"]["mean"] == 0.0


def test_scripted_local_policy_reproduces_the_model_free_baselines(scripted_records):
    """Through the protocol, the scripted policy with generated messages is the claim-avoiding team heuristic
    and with dropped messages the independent local policy; checked case by case against env steps."""
    for record, case in zip(scripted_records, frozen_cases(), strict=True):
        state = generate_state(case.seed, case.size)
        red = deterministic_policy(state, "RED", case.style)
        sequential = deterministic_policy(state, "BLUE", "balanced")
        independent = {a: local_policy_action(state, a) for a in team_agent_ids("BLUE")}
        rows = {(r["condition"], r["permutation"]): r for r in record["conditions"]}
        assert (
            rows[("generated", 0)]["environment_reward"] == step(state, {**red, **sequential}).rewards["BLUE"]
        )
        assert (
            rows[("dropped", 0)]["environment_reward"] == step(state, {**red, **independent}).rewards["BLUE"]
        )
        assert record["message_strict_rate"] == 1.0
        assert len(record["conditions"]) == 7 and all(len(r["actions"]) == 4 for r in record["conditions"])
        assert all(isinstance(a["raw_response"], str) for r in record["conditions"] for a in r["actions"])


def test_summary_paired_effects_are_per_case_differences(scripted_records):
    s = summarize_eval(scripted_records)
    gen = [c["generated_reward"] for c in s["per_case"]]
    drop = [c["dropped_reward"] for c in s["per_case"]]
    diffs = [a - b for a, b in zip(gen, drop, strict=True)]
    effect = s["communication_effects"]["generated_minus_dropped"]
    assert effect["mean_difference"] == pytest.approx(statistics.fmean(diffs))
    half = 1.96 * statistics.stdev(diffs) / len(diffs) ** 0.5
    assert effect["mean_difference_95"] == pytest.approx(
        [statistics.fmean(diffs) - half, statistics.fmean(diffs) + half]
    )
    assert s["generated_minus_dropped_reward"] == effect["mean_difference"]
    assert sum(v["cases"] for v in s["generated_slices"]["topology_size"].values()) == 60
    assert set(s["generated_slices"]["opponent_style"]) == {"aggressive", "balanced", "defensive"}
    size12 = [c["generated_regret"] for c in s["per_case"] if c["size"] == 12]
    assert s["generated_slices"]["topology_size"]["12"]["mean_oracle_regret"] == pytest.approx(
        statistics.fmean(size12)
    )


def test_paired_effect_single_case_interval_is_degenerate():
    assert paired_effect([1.0], [0.5])["mean_difference_95"] == [0.5, 0.5]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), size=st.integers(10, 14))
def test_prompt_only_scripted_policy_matches_the_env_policy(seed, size):
    """The local provider reads only the prompt; its choices equal the env's local-priority functions."""
    state = generate_state(seed, size)
    provider = ScriptedProvider()
    for i, agent_id in enumerate(team_agent_ids("BLUE")):
        local = local_policy_action(state, agent_id)
        messages, _ = broadcast_prompt(state, agent_id, seed + i)
        assert provider.complete(messages, "") == encode_broadcast(oracle_broadcast(state, agent_id, local))
        messages, displayed = action_prompt(state, agent_id, [], seed + i)
        reply = json.loads(provider.complete(messages, ""))
        assert displayed[int(reply["action_id"][1:])] == local


# ---------------------------------------------------------------- endpoint against a local HTTP fake


class _FakeHostedModel(BaseHTTPRequestHandler):
    """A test fake of a hosted chat model: replies like the scripted policy, or with garbage / HTTP 500."""

    mode = "scripted"
    requests: list = []

    def do_POST(self):  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        if self.mode == "error":
            self.send_response(500)
            self.end_headers()
            return
        text = (
            ScriptedProvider().complete(body["messages"], "") if self.mode == "scripted" else "Sure! ```json"
        )
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_model():
    _FakeHostedModel.requests = []
    _FakeHostedModel.mode = "scripted"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHostedModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _FakeHostedModel, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_endpoint_provider_request_and_results(fake_model, monkeypatch):
    fake, url = fake_model
    monkeypatch.setenv("ARENA_TEST_KEY", "sk-test-secret")
    case = frozen_cases()[4]
    via_http = evaluate_case(EndpointProvider("fake-model", url, "ARENA_TEST_KEY"), case)
    in_process = evaluate_case(ScriptedProvider(), case)
    assert len(fake.requests) == GENERATIONS_PER_CASE == 32  # 4 broadcasts + 7 condition rows x 4 agents
    first = fake.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test-secret"
    body = first["body"]
    assert body["temperature"] == 0.0 and body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["model"] == "fake-model" and body["max_tokens"] == 192 and body["stream"] is False
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    strip = lambda rec: {k: v for k, v in rec.items() if k != "model"}  # noqa: E731
    assert strip(via_http) == strip(in_process)
    assert "sk-test-secret" not in json.dumps(via_http)


def test_endpoint_garbage_replies_are_scored_not_raised(fake_model):
    fake, url = fake_model
    fake.mode = "garbage"
    record = evaluate_case(EndpointProvider("m", url), frozen_cases()[0])
    assert record["message_strict_rate"] == 0.0
    assert {m["errors"][0] for m in record["messages"]} == {"invalid_json"}
    assert all(r["strict_action_rate"] == 0.0 for r in record["conditions"])
    assert all(a["selected_action"] == {"type": "WAIT"} for r in record["conditions"] for a in r["actions"])


def test_endpoint_http_error_is_a_clear_cli_error(fake_model, tmp_path, capsys):
    fake, url = fake_model
    fake.mode = "error"
    with pytest.raises(EndpointError, match="HTTP 500"):
        EndpointProvider("m", url).complete([{"role": "user", "content": "{}"}], "")
    code = main(["arena", "eval", "--provider", "endpoint", "--model", "m", "--base-url", url,
                 "--output-dir", str(tmp_path / "e"), "--case-stride", "30"])  # fmt: skip
    assert code == 1 and "HTTP 500" in capsys.readouterr().err
    assert not (tmp_path / "e" / "summary.json").exists()


def test_eval_cli_writes_rows_and_summary_and_refuses_overwrite(tmp_path, capsys):
    out = tmp_path / "oracle"
    assert (
        main(["arena", "eval", "--provider", "oracle", "--output-dir", str(out), "--case-stride", "20"]) == 0
    )
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in rows] == [c.seed for c in frozen_cases()[::20]]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_cases"] == 3 and summary["complete_manifest"] is False
    assert main(["arena", "eval", "--provider", "oracle", "--output-dir", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["arena", "eval", "--provider", "endpoint", "--output-dir", str(tmp_path / "x")]) == 2
    assert main(["arena", "manifest"]) == 0
    assert (
        capsys.readouterr().out.strip() == "b53bfc523043ec71cc69f851d0819511c5a9f0b4f09520898f30954bbe874b29"
    )


def test_manifest_check_refuses_a_changed_manifest(tmp_path, capsys):
    cases = [[c.seed, c.size, c.style] for c in frozen_cases()]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(cases))
    assert main(["arena", "manifest", "--check", str(good)]) == 0
    cases[7][2] = "balanced" if cases[7][2] != "balanced" else "defensive"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(cases))
    assert main(["arena", "manifest", "--check", str(bad)]) == 1
    assert "refused" in capsys.readouterr().err


# ---------------------------------------------------------------- validation scorer (§11)


@pytest.fixture(scope="module")
def validation_rows():
    built = build_rows(SftConfig(num_seeds=120, targeted_mechanics_per_kind=3, targeted_silence_examples=4))
    return built.split_rows("validation") + built.split_rows("test")


def test_validation_scorer_on_targets_and_type_tricks(validation_rows):
    act = next(r for r in validation_rows if r["metadata"]["phase"] == "ACT")
    bc = next(r for r in validation_rows if r["messages"][2]["content"].startswith('{"facts":[{'))
    for row in (act, bc):
        scored = score_validation_reply(row, "  " + row["messages"][2]["content"] + "\n")
        assert scored["schema_valid"] and scored["legal"] and scored["exact"] and scored["ordered_exact"]
    target = json.loads(bc["messages"][2]["content"])
    float_value = json.loads(json.dumps(target))
    float_value["facts"][0]["value"] = float(float_value["facts"][0]["value"])  # 2.0 is not 2
    scored = score_validation_reply(bc, json.dumps(float_value))
    assert scored["schema_valid"] and not scored["supported"] and scored["unsupported_fact_response"]
    reordered = dict(target, facts=list(reversed(target["facts"])))
    scored = score_validation_reply(bc, json.dumps(reordered))
    assert scored["exact"] and (scored["ordered_exact"] == (len(target["facts"]) < 2))
    scored = score_validation_reply(act, '{"action_id":"A01"}')
    assert scored["schema_valid"] and not scored["legal"]
    scored = score_validation_reply(act, '```json\n{"action_id":"A0"}\n```')
    assert not scored["schema_valid"]
    summary = summarize_validation(
        [score_validation_reply(r, r["messages"][2]["content"]) for r in validation_rows]
    )
    assert summary["broadcast"]["schema_valid"] == 1.0 and summary["act"]["exact"] == 1.0
    assert summary["unsupported_fact_responses"] == 0 and summary["selection_score"] == 1.0


@settings(max_examples=60, deadline=None)
@given(text=st.one_of(st.text(max_size=60), st.builds(json.dumps, st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["facts", "intent", "request_resource", "action_id", "node", "x"]), children, max_size=4),
    max_leaves=8))))  # fmt: skip
def test_validation_scorer_never_raises_on_model_output(validation_rows, text):
    for row in validation_rows[:2] + [r for r in validation_rows if r["metadata"]["phase"] == "ACT"][:1]:
        scored = score_validation_reply(row, text)
        assert set(scored) >= {"schema_valid", "legal", "supported", "exact", "ordered_exact"}
        assert not scored["legal"] or scored["schema_valid"]


def test_eval_cli_refuses_a_changed_manifest(tmp_path, monkeypatch, capsys):
    import rftlab.envs.arena.cases as cases

    monkeypatch.setattr(cases, "FROZEN_MANIFEST_SHA256", "0" * 64)
    assert main(["arena", "eval", "--provider", "oracle", "--output-dir", str(tmp_path / "o")]) == 1
    assert main(["arena", "manifest"]) == 1
    err = capsys.readouterr().err
    assert err.count("refused") == 2 and not (tmp_path / "o").exists()
