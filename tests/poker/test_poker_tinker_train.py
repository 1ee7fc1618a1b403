"""GRPO of a language model on a poker arm through the Tinker API (``rftlab.training.poker.tinker_rl`` over
the generic ``rftlab.training.tinker_rl``, ``rftlab.launch.poker.tinker``): in process on the built-in
``rftlab/tiny-qwen3-agent`` with a scripted sampler, and through the unmodified ``tinker`` SDK against
``rftlab serve tinker``. The metrics rows are recomputed from the records; the records' rewards from their
per-hand results with the evaluator's own reward functions."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rftlab.launch.poker.spec import PokerArmSpec
from rftlab.launch.poker.tinker import PokerTinkerLauncher, trainer_config
from rftlab.rewards.poker import hand_profits_from_messages, illegal_count
from rftlab.rollout.poker.scoring import METRIC_KEYS, env_messages, poker_metrics
from rftlab.runs.store import RunStore, load_run
from rftlab.training.local_tinker import LocalServiceClient
from rftlab.training.local_tinker.model import AGENT_MODEL

TINY = {"rows": 2, "hands": 1, "response_candidates": 2, "epochs": 2, "learning_rate": 0.01}


def _spec(arm="tiny", **kw) -> PokerArmSpec:
    return PokerArmSpec(arm=arm, **{**TINY, **kw})


def _config(spec, **kw):
    return trainer_config(spec, AGENT_MODEL, max_tokens=kw.pop("max_tokens", 8), lora_rank=4, **kw)


# ------------------------------------------------------------------ a service that answers some calls itself

CALL = '<tool_call>\n{{"name": "poker_act", "arguments": {args}}}\n</tool_call><|im_end|>'


def scripted(service_class, inner, mode="mixed"):
    """A service answering requests by seed with a valid ``poker_act`` CALL, a malformed one (the arguments a
    string) or the model; ``mode="valid"`` answers every request with the valid call (so a row's candidates
    play alike and their rewards are equal)."""
    valid, bad = CALL.format(args='{"action": "CALL", "amount": -1}'), CALL.format(args='"call please"')
    pick = (lambda seed: 0) if mode == "valid" else (lambda seed: seed % 3)
    return service_class(inner, valid, bad, pick)


# ------------------------------------------------------------------ in process


@pytest.fixture(scope="module")
def two_epochs(tmp_path_factory, scripted_tinker_service):
    from rftlab.training.poker.tinker_rl import train_poker_tinker

    root = tmp_path_factory.mktemp("runs")
    spec = _spec()
    run = RunStore(root).create_run(spec.experiment, spec.arm, spec.to_dict(), backend="tinker")
    service = scripted(scripted_tinker_service, LocalServiceClient(storage_dir=root / "ckpt"))
    result = train_poker_tinker(_config(spec), run, service)
    return spec, load_run(run.path), result


@pytest.mark.slow
def test_a_poker_run_has_the_fireworks_metrics_and_the_transcripts(two_epochs):
    spec, run, _ = two_epochs
    assert run.finished and [r["epoch"] for r in run.metrics()] == [0, 1]
    for epoch, row in enumerate(run.metrics()):
        records = run.rollouts(epoch)
        assert len(records) == row["n_rollouts"] == spec.rows * spec.response_candidates
        for key in ("reward", *METRIC_KEYS):  # the Fireworks evaluator's names, means over the rollouts
            assert math.isclose(row[key], np.mean([r[key] for r in records]))
        by_row: dict[str, list[dict]] = {}
        for r in records:
            by_row.setdefault(r["row_id"], []).append(r)
        equal = sum(max(m["reward"] for m in v) - min(m["reward"] for m in v) < 1e-9 for v in by_row.values())
        assert row["zero_advantage_groups"] == equal and row["n_groups"] == spec.rows
        for rec in records:
            # the Fireworks evaluator's reading of the transcript: per-hand BB and the refusals shown, from
            # the env-authored messages; the format term is 0 when no poker_act call was read (B.5). The
            # evaluator's illegal_count reads tool messages only: a reply with no call (refused here, as a
            # user message) never reaches it on the McpGym path, which ends the rollout there instead
            msgs = env_messages(rec["messages"])
            as_tool = [{**m, "role": "tool"} for m in msgs]
            hand_bb, illegal = hand_profits_from_messages(msgs), illegal_count(as_tool)
            assert illegal_count(msgs) <= illegal
            expected = poker_metrics(hand_bb, illegal, spec.reward)
            expected["reward"] = expected.pop("score") - (0.1 if rec["valid_calls"] == 0 else 0.0)
            for key in ("reward", *METRIC_KEYS):
                assert math.isclose(rec[key], expected[key], abs_tol=1e-9), key
            assert rec["hands_completed"] == len(rec["hand_bb"]) == spec.hands
            group = by_row[rec["row_id"]]
            assert {(m["opponent"], m["card_seed"]) for m in group} == {(rec["opponent"], rec["card_seed"])}
            roles = [m["role"] for m in rec["messages"]]
            assert roles[:2] == ["system", "user"] and "assistant" in roles
            assert rec["sampled_tokens"] > 0 and math.isfinite(rec["logp"])
        ckpt = json.loads((run.path / "checkpoints" / f"epoch-{epoch}.json").read_text())
        assert ckpt["state_path"].startswith("tinker://")
        assert row["valid_call_rate"] == sum(r["valid_calls"] for r in records) / sum(
            r["model_calls"] for r in records
        )
    assert any(row["zero_advantage_groups"] < spec.rows for row in run.metrics())  # some groups learn


def test_a_malformed_call_is_scored_not_raised(two_epochs):
    _, run, _ = two_epochs
    records = [r for e in (0, 1) for r in run.rollouts(e)]
    assert sum(r["refusals_unreadable"] for r in records) > 0  # unreadable arguments and garbage refused
    texts = [m["content"] for r in records for m in r["messages"] if m["role"] in ("tool", "user")]
    assert any("Invalid poker action" in t for t in texts)
    assert any(r["valid_calls"] > 0 for r in records)
    assert len({r["reward"] for r in records}) > 1


@pytest.mark.slow
def test_equal_rewards_give_zero_advantage_groups_counted(tmp_path, scripted_tinker_service):
    from rftlab.training.poker.tinker_rl import train_poker_tinker

    spec = _spec(epochs=1)
    run = RunStore(tmp_path).create_run(spec.experiment, spec.arm, spec.to_dict(), backend="tinker")
    service = scripted(
        scripted_tinker_service, LocalServiceClient(storage_dir=tmp_path / "ckpt"), mode="valid"
    )
    train_poker_tinker(_config(spec), run, service)
    row, records = load_run(run.path).metrics()[0], load_run(run.path).rollouts(0)
    assert row["zero_advantage_groups"] == spec.rows and row["frac_zero_variance_groups"] == 1.0
    assert all(r["advantage"] == 0.0 for r in records) and row["datums"] > 0  # kept, as the cookbook does
    assert row["valid_call_rate"] == 1.0


def test_the_poker_arm_spec_fields_become_the_trainer_settings():
    from rftlab.launch.poker.spec import load_poker_arm_spec
    from rftlab.launch.poker.tinker import default_base_model
    from rftlab.runs.paths import spec_path

    for name, reward in (("poker_seed.json", "mean_instance"), ("poker_gain.json", "gain")):
        spec = load_poker_arm_spec(spec_path(name))
        assert "backend" not in spec.to_dict()  # an unset backend leaves the spec's hash as it was
        cfg = trainer_config(spec, AGENT_MODEL)
        assert (cfg.task.group_size, cfg.epochs, cfg.learning_rate, cfg.task.temperature) == (8, 2, 1e-6, 1.0)
        assert (cfg.max_tokens, cfg.task.max_tokens, cfg.lora_rank, cfg.context_window) == (
            1024,
            1024,
            32,
            8192,
        )
        assert (cfg.task.reward, cfg.task.hands, cfg.task.rows, cfg.task.batch_rows) == (reward, 16, 64, 8)
        assert default_base_model(spec, "hosted") == "Qwen/Qwen3-8B"
        assert default_base_model(spec, "local") == AGENT_MODEL
    assert _spec(backend="tinker").to_dict()["backend"] == "tinker"


def test_the_first_poker_prompt_fits_the_agent_model():
    from rftlab.training.poker.tinker_rl import POKER_TASK
    from rftlab.training.tinker_rl import check_context

    cfg = _config(_spec(rows=4, hands=16), max_tokens=1024)
    longest = check_context(cfg, POKER_TASK.dataset(cfg, [0]), "poker")
    assert 900 < longest < 1100 and longest + 1024 < cfg.context_window


# ------------------------------------------------------------------ the unmodified SDK over HTTP


def test_a_poker_arm_through_the_tinker_sdk(tmp_path, monkeypatch):
    import tinker

    from rftlab.studies.poker import launch_arm
    from rftlab.training.local_tinker.server import ServeConfig, ServerThread

    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    config = ServeConfig(port=0, storage=tmp_path / "srv", log_level="warning", api_keys=["tml-rftlab-tests"])
    with ServerThread(config) as srv:
        sc = tinker.ServiceClient(base_url=srv.base_url, api_key="tml-rftlab-tests")
        try:
            spec = _spec(arm="http", rows=1, epochs=1, backend="tinker")
            done = launch_arm(
                spec, None, tmp_path / "runs", service=sc, close_session=False, max_tokens=8, lora_rank=4
            )
            assert done.ref.backend == "tinker" and done.status.state == "completed"
            run = load_run(done.ref.path)
            assert run.record.provider["target"] == "given"
            row = run.metrics()[0]
            assert {"reward", *METRIC_KEYS, "zero_advantage_groups"} <= set(row)
            records = run.rollouts(0)
            assert len(records) == 2 and all(r["messages"] and r["hands_completed"] == 1 for r in records)
            again = launch_arm(
                spec, None, tmp_path / "runs", service=sc, close_session=False, max_tokens=8, lora_rank=4
            )
            assert again.reused and again.ref.path == done.ref.path
        finally:
            sc.close("success").result()


def test_the_poker_launcher_takes_overrides():
    assert PokerTinkerLauncher(lora_rank=4).overrides == {"lora_rank": 4}
