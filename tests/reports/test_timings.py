"""``rftlab.reports.Timings``: step durations for a notebook's build log."""

from __future__ import annotations

import itertools

import pytest

from rftlab.reports import Timings


def test_each_step_keeps_its_duration_and_its_value():
    ticks = itertools.count(0.0, 0.5)
    timings = Timings(clock=lambda: next(ticks))
    assert timings.timed("build", lambda x, y=0: x + y, 2, y=3) == 5
    assert timings.seconds == {"build": 0.5}
    with pytest.raises(ZeroDivisionError):
        timings.timed("broken", lambda: 1 / 0)
    assert timings.line() == "seconds: build 0.5, broken 0.5"
