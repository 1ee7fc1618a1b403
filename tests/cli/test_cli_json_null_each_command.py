"""The one ``--json`` rule (``rftlab.runs.strictjson.json_output``: NaN and ±infinity print as ``null``) for
each ``--json`` command of ``arena``, ``poker``, ``fireworks`` and ``endpoint``: the command's own code path
runs, and only the function that produces its data is replaced by one whose data holds non-finite numbers
(most of these commands cannot produce one from real input), so what is tested is the printing."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from rftlab.cli import main
from rftlab.runs.paths import SPECS_DIR

NAN = {"nan": math.nan, "inf": [math.inf, -math.inf], "ok": 0.5}
NULL = {"nan": None, "inf": [None, None], "ok": 0.5}


def _strict(text: str):
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard constant {name}"))


def test_arena_build_sft(monkeypatch, tmp_path, capsys):
    import rftlab.rollout.arena.sft_data as sft_data

    monkeypatch.setattr(sft_data, "write_dataset", lambda out, config: {"num_examples": 1, **NAN})
    assert main(["arena", "build-sft", "--out", str(tmp_path / "d"), "--json"]) == 0
    assert _strict(capsys.readouterr().out) == {"num_examples": 1, **NULL}


def test_arena_audit(monkeypatch, tmp_path, capsys):
    import rftlab.analysis.arena.audit as audit

    report = SimpleNamespace(to_dict=lambda: NAN, failures=[], valid=True, num_examples=1,
                             num_unique_seeds=1, verified_solver_seeds=1, seconds=0.1)  # fmt: skip
    monkeypatch.setattr(audit, "audit_dataset", lambda directory, require: report)
    monkeypatch.setattr(audit, "write_audit", lambda report, path: None)
    assert main(["arena", "audit", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert _strict(captured.out) == NULL and "audit passed" in captured.err  # stdout: the JSON only


def test_arena_manifest(monkeypatch, capsys):
    import rftlab.envs.arena.cases as cases

    monkeypatch.setattr(cases, "frozen_cases", lambda: [SimpleNamespace(seed=1, size=4, style=math.inf)])
    monkeypatch.setattr(cases, "manifest_sha256", lambda listed: math.nan)
    assert main(["arena", "manifest", "--json"]) == 0
    assert _strict(capsys.readouterr().out) == {"manifest_sha256": None, "cases": [[1, 4, None]]}


def _two_evaluations(monkeypatch, tmp_path):
    import rftlab.analysis.arena.compare as compare

    monkeypatch.setattr(compare, "load_evaluation", lambda path: SimpleNamespace(path=path))
    monkeypatch.setattr(compare, "compare_evaluations", lambda base, candidate: dict(NAN))
    return ["--base", str(tmp_path / "base"), "--candidate", str(tmp_path / "cand")]


def test_arena_compare(monkeypatch, tmp_path, capsys):
    import rftlab.cli.arena as cli_arena

    monkeypatch.setattr(cli_arena, "_check_compare_paths", lambda args, extra=(): None)
    assert main(["arena", "compare", *_two_evaluations(monkeypatch, tmp_path), "--json"]) == 0
    assert _strict(capsys.readouterr().out) == NULL


def test_arena_gates(monkeypatch, tmp_path, capsys):
    import rftlab.analysis.arena.gates as gates
    import rftlab.cli.arena as cli_arena

    monkeypatch.setattr(cli_arena, "_check_compare_paths", lambda args, extra=(): None)
    evaluation = SimpleNamespace(to_dict=lambda: {"n_failed": 0, "n_checks": 1, "observed": math.nan},
                                 verdicts=lambda: {"promotion": True})  # fmt: skip
    monkeypatch.setattr(gates, "load_gate_spec", lambda path: None)
    monkeypatch.setattr(gates, "load_summary", lambda path: {})
    monkeypatch.setattr(gates, "evaluate_arena_gates", lambda candidate, comparison, spec: evaluation)
    monkeypatch.setattr(gates, "gate_rows", lambda ev: [{"margin": -math.inf}])
    assert main(["arena", "gates", *_two_evaluations(monkeypatch, tmp_path), "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert (out["observed"], out["rows"], out["comparison"]) == (None, [{"margin": None}], NULL)


def test_arena_sft_run(monkeypatch, tmp_path, capsys):
    import rftlab.studies.arena as studies_arena

    result = SimpleNamespace(lineage=dict(NAN), stopped_at=None, gates={"verdicts": {"promotion": True}})
    monkeypatch.setattr(studies_arena, "run_stage1", lambda spec, **kw: result)
    assert main(["arena", "sft-run", str(tmp_path / "spec.json"), "--json"]) == 0
    assert _strict(capsys.readouterr().out) == NULL


def test_poker_play(monkeypatch, capsys):
    import rftlab.studies.poker as studies_poker

    monkeypatch.setattr(studies_poker, "schedule_summary", lambda *a: {"overall": dict(NAN)})
    assert main(["poker", "play", "--policy", "call", "--json"]) == 0
    assert _strict(capsys.readouterr().out) == {"overall": NULL}


def test_poker_launch_dry_run(monkeypatch, capsys):
    import rftlab.launch.poker.spec as poker_spec

    monkeypatch.setattr(
        poker_spec, "prime_mapping", lambda spec: [{"prime": "x", "value": math.nan, "fireworks": "-"}]
    )
    assert main(["poker", "launch", str(SPECS_DIR / "poker_seed.json"), "--dry-run", "--json",
                 "--account-id", "acct"]) == 0  # fmt: skip
    out = _strict(capsys.readouterr().out)
    assert out["mapping"] == [{"prime": "x", "value": None, "fireworks": "-"}] and out["job_id"].startswith(
        "rftlab-seed-"
    )


def test_poker_launch_on_tinker(monkeypatch, tmp_path, capsys):
    import rftlab.studies.poker as studies_poker

    ref = SimpleNamespace(path=tmp_path, run_id="r1", arm="seed", backend="tinker")
    done = SimpleNamespace(ref=ref, status=SimpleNamespace(state="finished"), reused=math.nan)
    monkeypatch.setattr(studies_poker, "launch_arm", lambda spec, backend, root, **kw: done)
    spec = str(SPECS_DIR / "poker_seed.json")
    assert main(["poker", "launch", spec, "--backend", "tinker", "--root", str(tmp_path), "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert out["reused"] is None and out["run_id"] == "r1"


def test_fireworks_launch_dry_run_and_launch(monkeypatch, tmp_path, capsys):
    from rftlab.launch.fireworks import FireworksLauncher

    plan = SimpleNamespace(to_dict=lambda: {"job_id": "j", "estimate": math.nan})
    monkeypatch.setattr(FireworksLauncher, "plan", lambda self, spec: plan)
    spec = str(SPECS_DIR / "spectrum_probe.json")
    assert main(["fireworks", "launch", spec, "--dry-run", "--json", "--account-id", "acct"]) == 0
    assert _strict(capsys.readouterr().out) == {"job_id": "j", "estimate": None}
    ref = SimpleNamespace(path=tmp_path, run_id=math.inf, arm="probe", backend="fireworks")
    monkeypatch.setattr(FireworksLauncher, "launch", lambda self, spec, root, failed_job: ref)
    assert main(["fireworks", "launch", spec, "--json", "--account-id", "acct", "--root", str(tmp_path)]) == 0
    assert _strict(capsys.readouterr().out)["run_id"] is None


def test_fireworks_poll(monkeypatch, tmp_path, capsys):
    from rftlab.launch.fireworks import FireworksLauncher
    from rftlab.runs import RunStore

    run = RunStore(tmp_path).create_run("spectrum_memory", "probe", {"epochs": 2}, backend="fireworks")
    status = SimpleNamespace(state="completed", progress=math.nan, total=2, message="")
    result = SimpleNamespace(status=status, done=True, stalled=False, epochs_recorded=2, missing_epochs=[],
                             incomplete_epochs=[math.inf])  # fmt: skip
    monkeypatch.setattr(FireworksLauncher, "watch", lambda self, ref, **kw: result)
    assert main(["fireworks", "poll", str(Path(run.path)), "--json", "--account-id", "acct"]) == 0
    out = _strict(capsys.readouterr().out)
    assert (out["epochs_done"], out["incomplete_epochs"], out["state"]) == (None, [None], "completed")


def test_endpoint_check(monkeypatch, capsys):
    import rftlab.rollout.spectrum.endpoint_check as endpoint_check

    report = SimpleNamespace(to_dict=lambda: {"latency_s": math.nan, "checks": []}, passed=True)
    monkeypatch.setattr(endpoint_check, "check_endpoint", lambda *a, **kw: report)
    args = ["endpoint", "check", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--json"]
    assert main(args) == 0
    assert _strict(capsys.readouterr().out) == {"latency_s": None, "checks": []}
