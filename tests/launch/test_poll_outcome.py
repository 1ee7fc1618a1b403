"""``poll_outcome`` (``rftlab.launch.fireworks``): the exit code and words of every way a watch can end,
against the table of ``rftlab fireworks poll``'s docstring."""

from __future__ import annotations

import pytest

from rftlab.launch.fireworks import PollOutcome, WatchResult, poll_outcome
from rftlab.types import RunStatus

RESUME = "run the same command to resume"
ERRORS = f"(stopped after repeated poll errors; {RESUME})"


def result(state: str, done: bool = False, stalled: bool = False) -> WatchResult:
    return WatchResult(RunStatus(state), [], stalled=stalled, done=done)


@pytest.mark.parametrize(
    "watch, once, code, words",
    [
        (result("completed", done=True), False, 0, "completed"),
        (result("completed", done=True), True, 0, "completed"),
        (result("completed"), True, 0, "completed, waiting for epoch datasets"),
        (result("completed"), False, 3, f"completed {ERRORS}"),
        (result("running"), True, 0, "running"),
        (result("pending"), True, 0, "pending"),
        (result("running"), False, 3, f"running {ERRORS}"),
        (result("failed", done=True), False, 1, "failed"),
        (result("failed", done=True), True, 1, "failed"),
        (result("cancelled", done=True), True, 1, "cancelled"),
        (result("unknown"), True, 3, f"unknown {ERRORS}"),
        (result("unknown"), False, 3, f"unknown {ERRORS}"),
        (result("running", stalled=True), False, 3, f"stalled (the job was not cancelled; {RESUME})"),
        (result("unknown", stalled=True), False, 3, f"stalled (the job was not cancelled; {RESUME})"),
    ],
)
def test_each_way_a_watch_ends(watch, once, code, words):
    assert poll_outcome(watch, once=once) == PollOutcome(code, words)
