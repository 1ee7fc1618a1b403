"""The GS1 study end to end on fakes: CLI, preflight gate on full runs, pilot gate and calibration,
decision and feasibility."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from test_gs1_fakes import FakeServiceClient, TinyTorchServiceClient, fake_renderer, toy_task

from rftlab.cli import main
from rftlab.launch.gs1.backend import GS1Backend, quick_arms
from rftlab.runs.store import RunStore
from rftlab.studies.gs1 import DEFAULT_SPEC, REVISED_SPEC, decide, load_spec, run_study
from rftlab.training.gs1.advantages import advantages_for_rows
from rftlab.training.gs1.pilot import calibrate_bandwidth, feasibility, gate_metrics

SPEC = load_spec(DEFAULT_SPEC)


def test_packaged_spec_is_the_preregistered_one(shared_dir):
    assert DEFAULT_SPEC.read_bytes() == (shared_dir / "seeds" / "gs1_vs_grpo_spec.json").read_bytes()


def test_advantages_cli_json(tmp_path, capsys):
    rows = [
        {"prompt_id": "a", "reward": 1.0, "phi": [1.0, -1.0], "step": 0},
        {"prompt_id": "b", "reward": 0.0, "phi": [2.0, -0.5], "step": 0},
        {"prompt_id": "a", "reward": 0.0, "phi": [1.0, -1.0], "step": 0},
    ]
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(rows))
    assert main(["gs1", "advantages", "--input", str(path), "--estimator", "group_mean", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["advantage"] for r in out["rows"]] == [0.5, 0.0, -0.5]
    assert main(["gs1", "advantages", "--input", str(path), "--estimator", "kernel_baseline", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # a's only other-prompt neighbour is b (reward 0); b's neighbours are the two a rollouts (mean 0.5)
    assert [r["baseline"] for r in out["rows"]] == pytest.approx([0.0, 0.5, 0.0])
    assert out["rows"] == advantages_for_rows(rows, "kernel_baseline")


@pytest.mark.parametrize(
    "content, message",
    [("not json", "not valid JSON"), ("[]", "non-empty"), ('[{"prompt_id": "a"}]', "missing reward")],
)
def test_advantages_cli_bad_input_is_a_one_line_error(tmp_path, capsys, content, message):
    path = tmp_path / "b.json"
    path.write_text(content)
    assert main(["gs1", "advantages", "--input", str(path), "--estimator", "group_mean"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert (
        main(["gs1", "advantages", "--input", str(tmp_path / "missing.json"), "--estimator", "group_mean"])
        == 2
    )


def _eval_file(path, correct):
    path.write_text(
        "".join(
            json.dumps({"item_id": f"test-{i}", "correct": int(c), "response": ""}) + "\n"
            for i, c in enumerate(correct)
        )
    )
    return path


def test_decision_is_the_paired_hoeffding_rule_with_tighter_bounds_beside(tmp_path, capsys):
    rng = np.random.default_rng(0)
    base = rng.random(1319) < 0.6
    treat = np.where(rng.random(1319) < 0.9, base, ~base)
    t, b = _eval_file(tmp_path / "t.jsonl", treat), _eval_file(tmp_path / "b.jsonl", base)
    out = decide(SPEC, t, b)
    d = treat.astype(float) - base.astype(float)
    lcb = d.mean() - math.sqrt(2 * math.log(1 / 0.05) / 1319)  # docs/statistics.md §3.1 for 0/1 items
    crit = out.rule.primary
    assert crit.lower == pytest.approx(lcb, abs=1e-12) and crit.margin == -0.03
    expected = "noninferior" if lcb > -0.03 else None
    if expected:
        assert out.decision == expected
    table = out.bound_rows()
    methods = [r["method"] for r in table]
    assert methods[0] == "hoeffding" and table[0]["status"].startswith("pre-registered: gs1_vs_grpo.json")
    assert "empirical_bernstein" in methods
    for row in table[1:]:  # every bound the spec does not register: exploratory, level and seed stated
        assert row["status"] == "exploratory" and row["one-sided level"] == pytest.approx(0.95)
        order_dependent = row["method"] in ("betting", "plugin_empirical_bernstein")
        assert row["permutation seed"] == (0 if order_dependent else "none")
    assert out.n == 1319
    assert main(["gs1", "decide", "--treatment", str(t), "--baseline", str(b)]) == 0
    assert "decision:" in capsys.readouterr().out


def _backend(service, spec):
    arms = quick_arms(spec.arm_configs(max_tokens=64, eval_max_tokens=64, renderer_name="x", n_train=64))
    return GS1Backend("local", service, fake_renderer(), toy_task(64, 16), arms)


def test_study_stops_before_full_runs_when_preflight_is_unresolved(tmp_path):
    summary = run_study(_backend(FakeServiceClient(), SPEC), SPEC, tmp_path / "runs")
    assert summary.preflight.status == "unresolved" and summary.preflight.report.status == "unresolved"
    assert "no full run starts" in summary.stopped and summary.pilot is None
    arms = {r.record.arm for r in RunStore(tmp_path / "runs").runs()}
    assert arms == {"preflight"}  # no pilot, no arm


@pytest.mark.slow
def test_run_command_end_to_end_on_fakes(tmp_path, monkeypatch, capsys):
    """``rftlab gs1 run`` from the shell, its progress printer included (it used to stop with
    ``KeyError: 'arm'`` after the first full-arm step), on the fake service with a real tiny torch model."""
    import rftlab.studies.gs1 as study

    backend = _backend(TinyTorchServiceClient(), SPEC)
    monkeypatch.setattr(study, "get_backend", lambda name, spec, root, quick: backend)
    root = tmp_path / "runs"
    code = main(["gs1", "run", "--root", str(root), "--despite-failed-gate"])
    out, err = capsys.readouterr()
    assert code == 0, err
    for arm in ("grpo_gs8", "gs1_kernel"):
        assert f"  {arm} step 0: reward" in err and f"  {arm} step 1: reward" in err
    assert "decision (pre-registered, gs1_vs_grpo.json)" in out and "for these seed-0 checkpoints" in out
    assert (
        "decision (revised, gs1_vs_grpo_betting.json)" in out and "assay sensitivity: grpo_gs8 - base" in out
    )
    assert "--despite-failed-gate was given" in out

    revised = load_spec(REVISED_SPEC)
    summary = run_study(backend, SPEC, root, despite_failed_gate=True, revised=revised)  # reuses every run
    assert summary.preflight.status == "passed"
    pilot = summary.pilot
    checks = {c.metric: c for c in pilot.gate.checks}
    assert checks["executed_group_size_treatment"].observed == 1
    assert checks["executed_group_size_baseline"].observed == 8
    assert "frac_nonzero_advantage_treatment" in pilot.by_construction
    assert pilot.recompute_max_abs_diff < 1e-12
    assert pilot.chosen_bandwidth in (0.5, 1.0)
    assert set(pilot.metrics_by_bandwidth) == {"0.5", "1.0"}
    assert pilot.feasibility.wall_seconds > 0
    assert {r.origin for r in summary.runs.values()} == {"reused"}
    assert set(summary.runs) == {"grpo_gs8", "gs1_kernel", "base"}
    assert summary.runs["gs1_kernel"].curve.step == (0, 1) and summary.runs["base"].curve.step == ()
    d = summary.decision
    assert d.n == 16 and d.decision in ("noninferior", "inferior", "inconclusive")
    assert d.revised.rule.method == "betting" and d.revised.rule.permutation_seed == 20
    # the typed summary gives back the dict the study returned before it was typed: same keys, same order
    record = json.loads(
        (RunStore(root).runs("gs1_vs_grpo", "decision")[0].path / "decision.json").read_text()
    )
    assert json.dumps(summary.to_dict()["decision"], default=str) == json.dumps(
        {**record, "gate_passed": d.gate_passed}
    )
    base_eval = RunStore(root).runs("gs1_vs_grpo", "base")[0]
    assert base_eval.record.spec["steps"] == 0 and len(base_eval.eval_items()) == 16
    c = d.contrasts
    assert d.control_vs_base.baseline_accuracy == d.base_accuracy
    assert c["gs1_kernel-grpo_gs8"].mean_difference == pytest.approx(d.rule.primary.statistic_mean)
    assert set(summary.monitor) == {"grpo_gs8", "gs1_kernel"}
    assert summary.monitor["gs1_kernel"].steps == 2
    store = RunStore(root)
    assert {r.record.arm for r in store.runs("gs1_vs_grpo_pilot")} == {"grpo_gs8", "gs1_kernel"}


@pytest.mark.slow
def test_run_level_plan_adds_seeds_and_keeps_the_seed_0_runs(tmp_path):
    """With a run-level plan every arm and the base run once per seed; seed 0's runs are the study's own
    (reused, same ids), the others carry their seed, and every run-level number is the per-run accuracy
    read back from the runs' eval files. The pilot never decodes a test item."""
    from rftlab.studies.gs1 import RUN_PLAN, load_run_plan

    backend = _backend(TinyTorchServiceClient(), SPEC)
    root = tmp_path / "runs"
    plain = run_study(backend, SPEC, root, despite_failed_gate=True)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({**json.loads(RUN_PLAN.read_text()), "seeds": [0, 1, 2]}))
    plan = load_run_plan(plan_file)
    revised = load_spec(REVISED_SPEC)
    summary = run_study(backend, SPEC, root, despite_failed_gate=True, revised=revised, plan=plan)
    rl = summary.run_level
    assert [r.seed for r in rl.seeds] == [0, 1, 2]
    assert {a: rl.seeds[0].runs[a].path for a in plain.runs} == {a: r.path for a, r in plain.runs.items()}
    store = RunStore(root)
    for r in rl.seeds:
        for arm, run in r.runs.items():
            rec = [x for x in store.runs("gs1_vs_grpo", arm) if str(x.path) == run.path][0]
            assert rec.record.spec["seed"] == r.seed
            items = rec.eval_items()
            assert r.accuracy[arm] == pytest.approx(np.mean([row["correct"] for row in items]))
    diffs = [r.accuracy["gs1_kernel"] - r.accuracy["grpo_gs8"] for r in rl.seeds]
    assert rl.treatment_vs_control.differences == pytest.approx(tuple(diffs))
    assert [r.within_seed.rule.primary.statistic_mean for r in rl.seeds] == pytest.approx(diffs)
    assert rl.base_identical_across_seeds  # a zero-initialised LoRA: the base does not depend on the seed
    assert summary.placebo is not None and len(summary.placebo.seeds) == 200
    assert summary.derived_margin is not None and set(summary.gate_margins) >= {"pilot_mean_reward"}
    for pilot_run in store.runs("gs1_vs_grpo_pilot"):
        assert all(row["item_id"].startswith("train-") for row in pilot_run.eval_items())


def test_the_notebook_never_relaxes_a_gate_by_default():
    from rftlab.runs.paths import PROJECT_ROOT

    text = (PROJECT_ROOT / "notebooks" / "03_gs1.py").read_text()
    params = text.split('# %% tags=["parameters"]', 1)[1].split("# %%", 1)[0]
    assert "\nDESPITE_FAILED_GATE = False" in params


def test_gate_metrics_by_hand():
    t = [
        {
            "step": 0,
            "prompt_id": "a",
            "reward": 1.0,
            "advantage": 0.5,
            "baseline": 0.5,
            "effective_neighbors": 10.0,
        },
        {
            "step": 0,
            "prompt_id": "b",
            "reward": 0.0,
            "advantage": 0.0,
            "baseline": 0.0,
            "effective_neighbors": 2.0,
        },
        {
            "step": 1,
            "prompt_id": "c",
            "reward": 1.0,
            "advantage": 0.8,
            "baseline": 0.2,
            "effective_neighbors": 20.0,
            "heldout_mean_reward": 0.25,
        },
        {
            "step": 1,
            "prompt_id": "d",
            "reward": 0.0,
            "advantage": -0.6,
            "baseline": 0.6,
            "effective_neighbors": 30.0,
            "heldout_mean_reward": 0.75,
        },
    ]
    b = [{"step": 0, "prompt_id": p, "reward": 0.0} for p in "xxyy"]
    m = gate_metrics(t, b)
    assert m["executed_group_size_treatment"] == 1 and m["executed_group_size_baseline"] == 2
    assert m["pilot_mean_reward"] == 0.5
    assert m["frac_nonzero_advantage_treatment"] == 0.75
    assert m["kernel_effective_neighbors_p10"] == pytest.approx(np.percentile([10, 2, 20, 30], 10))
    assert m["baseline_reward_corr"] == pytest.approx(
        1.0
    )  # (0.2, 0.25) and (0.6, 0.75): two points on a line


def _evaluation(passes: dict[str, bool]):
    return SimpleNamespace(checks=[SimpleNamespace(metric=k, passed=v) for k, v in passes.items()])


def test_bandwidth_calibration_rule():
    metrics = {0.5: {"h": 0.5}, 1.0: {"h": 1.0}}
    ok = calibrate_bandwidth(metrics, lambda m: _evaluation({"kernel_effective_neighbors_p10": True}))
    assert ok.chosen_bandwidth == 0.5 and list(ok.evaluations) == [0.5]
    switch = calibrate_bandwidth(
        metrics, lambda m: _evaluation({"kernel_effective_neighbors_p10": m["h"] == 1.0})
    )
    assert switch.chosen_bandwidth == 1.0 and list(switch.evaluations) == [0.5, 1.0]
    neither = calibrate_bandwidth(metrics, lambda m: _evaluation({"kernel_effective_neighbors_p10": False}))
    assert neither.chosen_bandwidth == 0.5 and "gate fails" in neither.reason


def test_feasibility_estimate_by_hand():
    arms = SPEC.arm_configs()
    timings = {
        "grpo_gs8": {"setup_s": 10.0, "step_s_mean": 30.0, "eval_s_per_item": 0.5},
        "gs1_kernel": {"setup_s": 12.0, "step_s_mean": 33.0, "eval_s_per_item": 0.5},
    }
    f = feasibility(arms, timings, SPEC.budget.max_wall_minutes, "pilot")
    expected = 10 + 40 * 30 + 1319 * 0.5 + 12 + 40 * 33 + 1319 * 0.5
    assert f["wall_seconds"] == pytest.approx(expected)
    assert f["budget_wall_seconds"] == 7200 and f["recovery_reserve_seconds"] == pytest.approx(
        7200 - expected
    )
    assert f["status"] == "ok" and f["effective_config"]["batch_size"] == 64
    slow = feasibility(
        arms,
        {k: {**v, "step_s_mean": 100.0} for k, v in timings.items()},
        SPEC.budget.max_wall_minutes,
        "pilot",
    )
    assert slow["status"] != "ok" and "exceeds" in slow["problems"][0]


def test_tinker_backend_without_a_key_is_a_one_line_error(tmp_path, capsys):
    assert main(["gs1", "run", "--backend", "tinker", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "TINKER_API_KEY" in err and len(err.strip().splitlines()) == 1


def test_quick_arms_keep_equal_rollout_budgets_and_group_sizes():
    arms = quick_arms(SPEC.arm_configs())
    g, k = arms["grpo_gs8"], arms["gs1_kernel"]
    assert g.group_size == 8 and k.group_size == 1
    assert g.rollouts_per_step == k.rollouts_per_step == 64  # the spec's: the activation gate needs them
    assert g.steps == k.steps == 2


def test_model_not_served_stops_the_study_before_anything_runs(tmp_path):
    from rftlab.training.gs1.rl_loop import ModelNotServedError

    service = FakeServiceClient(models=(("Qwen/Qwen3.5-4B", True, True),))
    with pytest.raises(ModelNotServedError, match="not served"):
        run_study(_backend(service, SPEC), SPEC, tmp_path / "runs")
    assert service.calls == []
    assert not (tmp_path / "runs").exists()


def test_decide_cli_bad_input_is_a_one_line_error(tmp_path, capsys):
    t = _eval_file(tmp_path / "t.jsonl", [1, 0, 1])
    b = _eval_file(tmp_path / "b.jsonl", [1, 0])  # item test-2 missing
    assert main(["gs1", "decide", "--treatment", str(t), "--baseline", str(b)]) == 2
    err = capsys.readouterr().err
    assert "not paired" in err and len(err.strip().splitlines()) == 1
    assert main(["gs1", "decide", "--treatment", str(tmp_path / "nope.jsonl"), "--baseline", str(b)]) == 2


def test_run_timings_leave_out_the_held_out_step(tmp_path):
    from rftlab.training.gs1.pilot import run_timings

    run = RunStore(tmp_path).create_run("x", "gs1_kernel", {"a": 1})
    run.append_metrics(
        [
            {"step": 0, "time_step_s": 2.0, "baseline_reward_corr": None},
            {"step": 1, "time_step_s": 10.0, "baseline_reward_corr": 0.3},
        ]
    )
    run.write_eval([{"item_id": f"t{i}", "correct": 1} for i in range(4)])
    run.set_provider(timings={"setup_s": 1.5, "train_s": 12.0, "eval_s": 2.0})
    t = run_timings(run)
    assert t["step_s_mean"] == 2.0 and t["n_steps"] == 1
    assert t["eval_s_per_item"] == 0.5 and t["setup_s"] == 1.5
