"""``rftlab gs1 run --run-plan``: the CLI runs the study with the run-level plan as the notebook does
(bare flag: ``data/specs/gs1_runlevel.json``), prints the run-level decision, and refuses a bad plan file
in one line before any backend is built."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import rftlab.studies.gs1 as study
from rftlab.analysis.gs1.seeds import run_level_verdict
from rftlab.cli import main
from rftlab.launch.gs1 import RUN_PLAN
from rftlab.studies.gs1 import load_run_plan


class _Backend:
    name = "local"
    service_client = None


@pytest.fixture
def calls(monkeypatch):
    seen: list[dict] = []

    def fake_run_study(backend, spec, root, arms, despite, progress=None, revised=None, plan=None):
        seen.append({"plan": plan})
        run_level = None
        if plan is not None:
            scores = {s: 0.5 + 0.001 * s for s in plan.seeds}
            run_level = SimpleNamespace(treatment_vs_control=run_level_verdict(scores, scores, plan))
        summary = SimpleNamespace(  # what print_summary reads of a GS1Summary
            preflight=SimpleNamespace(status="passed", path="preflight.json"),
            gate=None,
            runs={},
            despite_failed_gate=despite,
            decision=None,
            run_level=run_level,
            stopped="stopped here by the test (only the CLI's wiring is under test)",
        )
        return summary

    monkeypatch.setattr(study, "run_study", fake_run_study)
    monkeypatch.setattr(study, "get_backend", lambda name, spec, root, quick: _Backend())
    return seen


def test_the_bare_flag_runs_the_default_plan_and_prints_the_run_level_decision(calls, tmp_path, capsys):
    assert main(["gs1", "run", "--root", str(tmp_path), "--run-plan"]) == 1
    out = capsys.readouterr().out
    plan = calls[-1]["plan"]
    assert plan == load_run_plan(RUN_PLAN) and len(plan.seeds) >= 5
    assert f"over {len(plan.seeds)} seed-matched pairs of runs" in out
    assert "noninferiority at margin" in out and "**" not in out
    assert main(["gs1", "run", "--root", str(tmp_path)]) == 1
    assert calls[-1]["plan"] is None and "run level" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("write", "message"),
    [(None, "file not found"), ("not json", "not valid JSON"), ('{"seeds": "x"}', "Field required")],
)
def test_a_bad_plan_is_one_line_before_any_backend(calls, tmp_path, capsys, write, message):
    path = tmp_path / "plan.json"
    if write is not None:
        path.write_text(write)
    assert main(["gs1", "run", "--root", str(tmp_path), "--run-plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rftlab: error: ") and message in err and len(err.strip().splitlines()) == 1
    assert calls == []
