"""Poker arm specs: the Prime->Fireworks mapping, the dry-run commands, the preflight."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert upload[:4] == [
        "eval-protocol",
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
