"""``Run.working()``: the one way a run's work ends (issue 34, item 3). The block's end finishes the run;
an error or an interruption marks it failed with the reason and re-raises; with ``resumable`` the run is
left unfinished and released for a resume. GS1's bookkeeping runs (gate, decision, preflight), the arena
stages and ``RunStore.record_rollouts`` go through it, so none stays ``running`` after a failure."""

from __future__ import annotations

import pytest

from rftlab.runs import RunStore, load_run
from rftlab.runs.locks import _CLAIMS


class Boom(RuntimeError):
    pass


def holder(run_dir):
    """This process's claim on ``run_dir`` (``None`` once released)."""
    return _CLAIMS.get(str(run_dir.resolve()))


def _run(tmp_path, arm="a"):
    return RunStore(tmp_path).create_run("x", arm, {"arm": arm})


def test_the_block_finishes_the_run(tmp_path):
    run = _run(tmp_path)
    run.claim()
    with run.working() as same:
        assert same is run
        run.append_metrics({"step": 0, "epoch": 0, "reward": 1.0})
    again = load_run(run.path)
    assert again.record.status == "finished" and again.record.error is None
    assert holder(run.path) is None


@pytest.mark.parametrize("error", [Boom("bad row"), KeyboardInterrupt()])
def test_an_error_marks_the_run_failed_with_the_reason(tmp_path, error):
    run = _run(tmp_path)
    run.claim()
    with pytest.raises(type(error)):
        with run.working():
            raise error
    record = load_run(run.path).record
    assert record.status == "failed" and record.error == f"{type(error).__name__}: {error}"
    assert holder(run.path) is None


def test_a_resumable_run_is_left_unfinished_and_released(tmp_path):
    run = _run(tmp_path)
    run.claim()
    with pytest.raises(Boom):
        with run.working(resumable=True):
            run.append_metrics({"step": 0, "epoch": 0, "reward": 1.0})
            raise Boom("interrupted")
    record = load_run(run.path).record
    assert record.status == "running" and holder(run.path) is None
    resumed, origin = RunStore(tmp_path).start_or_reuse("x", "a", {"arm": "a"}, resume=True)
    assert origin == "resumed" and resumed.path == run.path and len(resumed.metrics()) == 1


def test_a_block_that_finished_the_run_itself_is_left_as_it_said(tmp_path):
    run = _run(tmp_path)
    with run.working():
        run.finish("failed", error="refused by its own check")
    assert load_run(run.path).record.error == "refused by its own check"


def test_a_long_reason_is_cut_to_500_characters(tmp_path):
    run = _run(tmp_path)
    with pytest.raises(Boom):
        with run.working():
            raise Boom("x" * 2000)
    assert len(load_run(run.path).record.error) == 500


def test_record_rollouts_that_fail_to_build_leave_a_failed_run(tmp_path):
    def records():
        raise Boom("no episodes")

    with pytest.raises(Boom):
        RunStore(tmp_path).record_rollouts("x", "ref", {"arm": "ref"}, records)
    (run,) = RunStore(tmp_path).runs("x", "ref")
    assert run.record.status == "failed" and "no episodes" in run.record.error


def test_a_gs1_bookkeeping_run_whose_payload_fails_is_marked_failed(tmp_path):
    """GS1's gate and decision runs had no failure branch: a payload that raised left them ``running``."""
    from rftlab.studies.gs1 import EXPERIMENT, _record_run

    def payload():
        raise Boom("the decision could not be computed")

    store = RunStore(tmp_path)
    with pytest.raises(Boom):
        _record_run(store, "decision", {"kind": "decision"}, "local", "decision.json", payload)
    (run,) = store.runs(EXPERIMENT, "decision")
    assert run.record.status == "failed" and "could not be computed" in run.record.error
    again, _, origin = _record_run(
        store, "decision", {"kind": "decision"}, "local", "decision.json", lambda: {"ok": 1}
    )
    assert again == {"ok": 1} and origin == "new"
