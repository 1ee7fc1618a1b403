"""A GS1 preflight made on a dirty tree (or at another commit) is never reused: ``make reports`` used to
record the local preflight with ``git.dirty: true``, ``gs1 preflight --backend local`` then reused it, and
the Tinker handoff refused it for good. It is made again instead; a clean one of this commit is reused."""

from __future__ import annotations

import pytest

import rftlab.runs.gitinfo as gitinfo
import rftlab.runs.store as store_module
from rftlab.runs import RunStore
from rftlab.studies import gs1


@pytest.fixture
def git(monkeypatch):
    state = {"commit": "c" * 40, "dirty": True}
    fake = lambda repo=".": dict(state)  # noqa: E731  (the code state the store and the reuse rule see)
    monkeypatch.setattr(gitinfo, "git_state", fake)
    monkeypatch.setattr(store_module, "git_state", fake)
    return state


def test_a_dirty_or_foreign_preflight_is_made_again_and_a_clean_one_reused(tmp_path, git):
    store = RunStore(tmp_path / "runs")
    made = []

    def payload():
        made.append(1)
        return {"status": "passed", "n": len(made)}

    def record():
        return gs1._record_run(store, "preflight", {"kind": "k"}, "local", "preflight.json", payload,
                               reusable=gs1._same_clean_code)  # fmt: skip

    _, first, origin = record()
    assert origin == "new" and first.record.git["dirty"] is True
    _, again, origin = record()  # dirty: never a reference, so not reused
    assert origin == "new" and again.path != first.path and len(made) == 2
    git["dirty"] = False
    _, clean, origin = record()  # the dirty ones are passed over: a clean one is made
    assert origin == "new" and clean.record.git == {"commit": "c" * 40, "dirty": False}
    out, reused, origin = record()
    assert origin == "reused" and reused.path == clean.path and out["n"] == 3 and len(made) == 3
    git["commit"] = "d" * 40  # new code: the old clean preflight is not this code's
    _, newer, origin = record()
    assert origin == "new" and len(made) == 4


def test_bookkeeping_runs_without_the_rule_are_still_reused(tmp_path, git):
    store = RunStore(tmp_path / "runs")
    calls = []
    for _ in range(2):
        gs1._record_run(store, "gate", {"kind": "g"}, "local", "gate.json", lambda: calls.append(1) or {})
    assert len(calls) == 1
