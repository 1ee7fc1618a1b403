"""Poker arm specs: the Prime->Fireworks mapping, the dry-run commands, the preflight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rftlab.cli import main as cli_main
from rftlab.launch.poker.preflight import poker_preflight
from rftlab.launch.poker.spec import load_poker_arm_spec, prime_mapping

SPECS = Path(__file__).resolve().parents[2] / "data" / "specs"


def test_seed_arm_carries_the_seed_flags():
    spec = load_poker_arm_spec(SPECS / "poker_seed.json")
    assert (spec.epochs, spec.learning_rate, spec.temperature, spec.response_candidates) == (2, 1e-6, 1.0, 8)
    assert spec.fireworks.base_model.endswith("qwen3-8b") and spec.fireworks.max_output_tokens == 1024
    assert not spec.thinking and spec.hands == 16 and spec.fireworks.interface == "mcp"
    prime = {m["prime"]: m for m in prime_mapping(spec)}
    assert prime["rollouts_per_example"]["fireworks"].startswith("--response-candidates-count 8")
    assert "/no_think" in prime["enable_thinking"]["fireworks"]


def test_dry_run_prints_the_exact_job_argv(capsys, monkeypatch):
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-secret-0123456789")
    assert cli_main(["poker", "launch", str(SPECS / "poker_seed.json"), "--dry-run", "--json",
                     "--account-id", "acct"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    plan = json.loads(out)
    create = plan["commands"][-1]
    assert create[-4:] == ["-a", "acct", "-o", "json"]  # the key is never on firectl's argv (issue 24)
    body = create[3:-4]  # between "<noun> create" and "-a acct -o json"
    flags = dict(zip(body[::2], body[1::2], strict=True))
    assert flags["--job-id"].startswith("rftlab-seed-")
    assert flags["--learning-rate"] == "1e-06" and flags["--temperature"] == "1.0"
    assert flags["--response-candidates-count"] == "8" and flags["--max-output-tokens"] == "1024"
    # the poker McpGym evaluator exists (issue 14 item 3): the plan uploads it, with no warning
    assert len(plan["commands"]) == 3 and not plan["warnings"]
    upload = plan["commands"][1]
    assert upload[:6] == [
        "python",
        "-m",
        "rftlab.launch.ep_upload",  # eval-protocol's upload with --id applied (docs/platforms.md §1.9)
        "upload",
        "--entry",
        "rftlab/rollout/eval_entries/poker_mcp_eval.py::test_poker_mcp",
    ]
    assert "fw-secret-0123456789" not in out


def test_launch_without_firectl_is_refused_and_leaves_no_key(tmp_path, capsys, monkeypatch):
    # the evaluator is built, so the launch (preflight, dataset, run record) gets as far as the Fireworks
    # CLI, which is not installed here
    monkeypatch.setenv("FIREWORKS_API_KEY", "fw-secret-0123456789")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv("RFTLAB_FIRECTL", raising=False)
    code = cli_main(["poker", "launch", str(SPECS / "poker_seed.json"), "--account-id", "acct",
                     "--root", str(tmp_path / "runs")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "firectl not found" in err and "fw-secret-0123456789" not in err
    recorded = [p.read_text(errors="replace") for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert not any("fw-secret-0123456789" in t for t in recorded)


def test_preflight_passes_and_records_its_evidence():
    spec = load_poker_arm_spec(SPECS / "poker_seed.json").model_copy(update={"hands": 6})
    report = poker_preflight(spec, rows=4)
    assert report.passed, report.to_dict()
    names = [c["name"] for c in report.checks]
    assert names == ["group_shares_hands", "reward_separates_skill", "garbage_is_counted"]
    gain = poker_preflight(spec.model_copy(update={"reward": "gain"}), rows=2)
    assert "informational" in gain.checks[1]["detail"]


def test_bad_spec_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"arm": "x", "epochs": 0}))
    assert cli_main(["poker", "launch", str(bad), "--dry-run"]) == 2
    assert "field epochs" in capsys.readouterr().err


def _plan(spec_name: str) -> dict:
    from rftlab.studies.poker import fireworks_launcher

    spec = load_poker_arm_spec(SPECS / spec_name)
    return spec, fireworks_launcher(account_id="acct").plan(spec).to_dict()


def test_each_arm_uploads_the_evaluator_of_its_own_reward():
    seen = {}
    for name in ("poker_seed.json", "poker_gain.json"):
        spec, plan = _plan(name)
        upload = plan["commands"][1]
        entry, ev_id = upload[upload.index("--entry") + 1], upload[upload.index("--id") + 1]
        create = plan["commands"][-1]
        # the job is pointed at the evaluator this arm uploads, and the upload is the reward's entry
        assert create[create.index("--evaluator") + 1] == f"accounts/acct/evaluators/{ev_id}"
        assert plan["evaluator"].endswith("/" + ev_id)
        seen[spec.reward] = (entry, ev_id)
    # each reward's evaluator id, with the evaluator code's hash (one evaluator per code, docs/platforms.md §1.9)
    assert seen["mean_instance"][0] == "rftlab/rollout/eval_entries/poker_mcp_eval.py::test_poker_mcp"
    assert seen["gain"][0] == "rftlab/rollout/eval_entries/poker_mcp_gain_eval.py::test_poker_mcp_gain"
    code = seen["gain"][1].rsplit("-", 1)[-1]
    assert (
        seen["mean_instance"][1] == f"rftlab-poker-mcp-{code}"
        and seen["gain"][1] == f"rftlab-poker-mcp-gain-{code}"
    )


@pytest.mark.parametrize("reward", ["mean_instance", "gain"])
def test_the_uploaded_entry_scores_with_the_arm_reward(reward, monkeypatch):
    """Import each entry module as eval-protocol would (in a clean module namespace) and score a recorded
    transcript with it: the score is the arm's reward of that transcript, not the other one's."""
    import asyncio
    import importlib
    import sys

    from eval_protocol.models import EvaluationRow

    from rftlab.rewards.poker import REWARDS
    from rftlab.rollout.poker.dataset import dataset_rows

    monkeypatch.delenv("RFTLAB_POKER_REWARD", raising=False)
    monkeypatch.setenv("RFTLAB_POKER_ROWS", "1")
    spec = load_poker_arm_spec(
        SPECS / ("poker_seed.json" if reward == "mean_instance" else "poker_gain.json")
    )
    assert spec.reward == reward
    module_name = spec.evaluator_entry.split("::")[0].removesuffix(".py").replace("/", ".")
    function = spec.evaluator_entry.split("::")[1]
    sys.modules.pop(module_name, None)
    module = importlib.import_module(module_name)
    assert module.REWARD == reward
    hands = [3.0, -1.0, 0.5, 4.0]  # early mean 1.0, late 2.25: gain +1.25, mean-instance 1.625 + 0.1
    row = EvaluationRow(**next(dataset_rows(1)))
    row.messages = [
        *row.messages,
        {"role": "tool", "content": "done\n\nHAND_PROFITS_BB: " + ",".join(f"{v:.4f}" for v in hands)},
        {"role": "assistant", "content": "HAND_PROFITS_BB: 99,99"},  # a marker the model typed is ignored
    ]
    # eval-protocol's direct-call mode of a pointwise test: one EvaluationRow in, the scored row out
    scored = asyncio.run(getattr(module, function)(row))
    assert scored.evaluation_result.score == pytest.approx(REWARDS[reward](hands, 0)["score"])
    other = "gain" if reward == "mean_instance" else "mean_instance"
    assert scored.evaluation_result.score != pytest.approx(REWARDS[other](hands, 0)["score"])


def test_the_retired_reward_variable_is_refused(monkeypatch):
    from rftlab.rollout.poker.entry import refuse_reward_variable

    monkeypatch.setenv("RFTLAB_POKER_REWARD", "gain")
    with pytest.raises(ValueError, match="no longer read"):
        refuse_reward_variable()
    monkeypatch.delenv("RFTLAB_POKER_REWARD")
    refuse_reward_variable()


def _spec_dict(**changes) -> dict:
    data = json.loads((SPECS / "poker_seed.json").read_text())
    for key, value in changes.items():
        if key == "evaluator":
            data["fireworks"]["evaluator"] = value
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"assignment": "per_rollout"}, "field assignment: .*'per_rollout'.* not implemented"),
        ({"reward": "gain"}, "field fireworks: .*does not match reward 'gain'"),
        (
            {"evaluator": "accounts/<acct>/evaluators/rftlab-poker-mcp-gain"},
            "does not match reward 'mean_instance'",
        ),
        ({"hands": 20}, "field fireworks: .*hands = 20.*must use hands = 16"),
    ],
)
def test_specs_no_launch_path_can_deliver_are_refused(tmp_path, capsys, changes, message):
    import re

    path = tmp_path / "arm.json"
    path.write_text(json.dumps(_spec_dict(**changes)))
    with pytest.raises(ValueError, match=message):
        load_poker_arm_spec(path)
    assert cli_main(["poker", "launch", str(path), "--dry-run"]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_a_local_only_spec_may_use_other_hand_counts():
    data = _spec_dict(hands=6)
    data.pop("fireworks")
    from rftlab.launch.poker.spec import PokerArmSpec

    assert PokerArmSpec.model_validate(data).hands == 6
