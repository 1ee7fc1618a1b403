"""Evaluations that train nothing keep their episodes for the viewer: the poker reference study (every
block and strategy) and bench90 (every policy and permuted run) become finished runs of the run store whose
rollouts ``rftlab view`` shows as transcripts with their rewards (``RunStore.record_rollouts``)."""

from __future__ import annotations

import json

import pytest

from rftlab.policies.poker.reference import AlwaysCall
from rftlab.policies.spectrum.reference import BENCH_POLICIES
from rftlab.rollout.episode import transcript
from rftlab.rollout.poker.play import play_rft
from rftlab.rollout.spectrum.evaluation import evaluate_bench90
from rftlab.rollout.viewer import rows_from_path
from rftlab.runs import RunStore
from rftlab.studies.poker import REFERENCE_EXPERIMENT, reference_study, save_reference_rollouts
from rftlab.studies.spectrum import BENCH90_EXPERIMENT, save_bench90_rollouts


def test_a_transcript_alternates_prompts_and_the_actions_taken():
    (traj,) = play_rft(AlwaysCall(), ["poker_s1000"], hands=3)
    messages = transcript(traj)
    steps = len(traj.transitions)
    assert [m["role"] for m in messages[: 2 * steps]] == ["user", "assistant"] * steps
    assert [json.loads(m["content"]) for m in messages[1 : 2 * steps : 2]] == [
        t.action for t in traj.transitions
    ]
    assert messages[0]["content"].endswith(traj.transitions[0].observation.next_query.prompt)
    assert "Hand #1" in messages[0]["content"] and "Hand #3" in "".join(m["content"] for m in messages)


@pytest.fixture(scope="module")
def poker_study():
    return reference_study(runs=1, rows=3, hands=2, equity_samples=10)


def test_every_poker_episode_is_kept_with_its_reward_and_transcript(poker_study, tmp_path):
    runs = save_reference_rollouts(poker_study, tmp_path / "runs")
    assert len(runs) == len(poker_study.transcripts) == 3 * 2 + 4  # 3 strategies x 2 blocks + 4 shortcuts
    assert all(r.finished and r.record.experiment == REFERENCE_EXPERIMENT for r in runs)
    arms = {r.record.arm for r in runs}
    assert {"rft-exploit", "schedule-call", "rft-blind-Tom", "rft-sandbag"} <= arms
    rows = rows_from_path(tmp_path / "runs")
    assert len(rows) == 7 * 3 + 3 * 1  # 7 RFT blocks (3 strategies, 4 shortcuts) x 3 rows + 3 schedule runs
    by_name = {}
    for row in rows:
        by_name.setdefault(row.eval_metadata.name, []).append(row)
    exploit = sorted(by_name[f"{REFERENCE_EXPERIMENT}/rft-exploit"], key=lambda r: r.input_metadata.row_id)
    expected = sorted(poker_study.rft_rows["exploit"], key=lambda r: r["row_id"])
    assert [r.evaluation_result.score for r in exploit] == pytest.approx(
        [e["reward_mean_instance"] for e in expected]
    )
    assert all(r.messages[0].role == "user" and r.messages[1].role == "assistant" for r in exploit)


def test_kept_poker_runs_are_reused_not_written_twice(poker_study, tmp_path):
    first = save_reference_rollouts(poker_study, tmp_path / "runs")
    stamps = [(r.path / "rollouts" / "epoch-0.jsonl").stat().st_mtime_ns for r in first]
    again = save_reference_rollouts(poker_study, tmp_path / "runs")
    assert [r.path for r in again] == [r.path for r in first]
    assert [(r.path / "rollouts" / "epoch-0.jsonl").stat().st_mtime_ns for r in again] == stamps
    assert len(RunStore(tmp_path / "runs").runs(REFERENCE_EXPERIMENT)) == len(first)


def test_bench90_episodes_are_kept_per_policy_and_permuted_run(tmp_path):
    results = {
        name: evaluate_bench90(BENCH_POLICIES[name], runs=range(2), baseline=False, transcripts=True)
        for name in ("memoryless", "accumulate")
    }
    runs = save_bench90_rollouts(results, tmp_path / "runs")
    assert sorted(r.record.arm for r in runs) == ["accumulate", "memoryless"]
    rows = rows_from_path(tmp_path / "runs")
    assert len(rows) == 4
    for row in rows:
        name = row.eval_metadata.name.split("/")[1]
        index = int(row.input_metadata.row_id.removeprefix("bench90-run"))
        assert row.eval_metadata.name.startswith(BENCH90_EXPERIMENT + "/")
        assert row.evaluation_result.score == pytest.approx(
            results[name]["runs"][index]["mean_available_iou"]
        )
        assert sum(m.role == "assistant" for m in row.messages) == 90  # one report per scan


def test_bench90_results_without_transcripts_are_refused_and_nothing_is_written(tmp_path):
    result = evaluate_bench90(BENCH_POLICIES["empty"], runs=range(1), baseline=False)
    assert "messages" not in result["runs"][0]
    with pytest.raises(ValueError, match="transcripts=True"):
        save_bench90_rollouts({"empty": result}, tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not RunStore(tmp_path / "runs").runs()


def test_records_that_fail_to_build_leave_a_failed_run_not_a_running_one(tmp_path):
    store = RunStore(tmp_path / "runs")

    def broken():
        raise RuntimeError("the evaluation broke")

    with pytest.raises(RuntimeError, match="evaluation broke"):
        store.record_rollouts("viewer_test", "arm", {"k": 1}, broken)
    (run,) = store.runs("viewer_test")
    assert run.record.status == "failed" and "evaluation broke" in run.record.error
    run, origin = store.record_rollouts("viewer_test", "arm", {"k": 1}, [{"row_id": "a", "reward": 1.0}])
    assert origin == "new" and run.rollouts(0) == [{"row_id": "a", "reward": 1.0}]
