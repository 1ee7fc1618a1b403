"""The worker's scheduler (``local_tinker.scheduler``): lanes take turns, a lane's work keeps its order, a
long sampling request is cut into batches that other sessions' work runs between."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from rftlab.training.local_tinker.scheduler import PIECE_ROWS, UNIT_ROWS, Scheduler


@dataclass
class Item:
    name: str
    rows: int = 0


def _names(unit):
    return [x.name for x in unit]


def _take(s: Scheduler):
    return s.take(gap_s=0.0, first_gap_s=0.0, max_wait_s=0.0)


def test_lanes_take_turns_and_keep_their_order():
    s = Scheduler()
    for i in range(5):
        s.put("A", Item(f"a{i}"))
    s.put("B", Item("b0"))
    s.put("B", Item("b1"))
    order = [_names(_take(s))[0] for _ in range(7)]
    assert order == ["a0", "b0", "a1", "b1", "a2", "a3", "a4"]
    assert len(s) == 0


def test_a_huge_sampling_request_lets_another_sessions_job_through_after_one_batch():
    s = Scheduler()
    pieces = 20_000 // PIECE_ROWS + 1
    for i in range(pieces):
        s.put("long", Item(f"p{i}", rows=PIECE_ROWS))
    s.put("short", Item("forward"))
    first = _take(s)
    assert sum(x.rows for x in first) <= UNIT_ROWS and all(x.rows for x in first)
    assert _names(_take(s)) == ["forward"]
    taken = [x for unit in iter(lambda: _take(s) if len(s) else None, None) for x in unit]
    assert _names(first) + _names(taken) == [f"p{i}" for i in range(pieces)]  # order kept


def test_a_batch_takes_pieces_of_every_lane_round_robin():
    s = Scheduler(unit_rows=4 * PIECE_ROWS)
    for i in range(4):
        s.put("A", Item(f"a{i}", rows=PIECE_ROWS))
    s.put("B", Item("b0", rows=PIECE_ROWS))
    s.put("C", Item("c0", rows=1))
    assert _names(_take(s)) == ["a0", "b0", "c0", "a1"]
    assert _names(_take(s)) == ["a2", "a3"]


def test_jobs_and_batches_of_one_lane_alternate():
    s = Scheduler()
    for i in range(3):
        s.put("A", Item(f"job{i}"))
        s.put("A", Item(f"piece{i}", rows=1))
    kinds = ["piece" if unit[0].rows else "job" for unit in (_take(s) for _ in range(4))]
    assert kinds == ["job", "piece", "job", "job"]  # the one batch took all three pieces


def test_a_batch_waits_for_a_burst_then_stops_waiting():
    s = Scheduler()
    s.put("A", Item("p0", rows=1))

    def burst():
        for i in range(1, 6):
            time.sleep(0.01)
            s.put("A", Item(f"p{i}", rows=1))

    t = threading.Thread(target=burst)
    t.start()
    unit = s.take(gap_s=0.2, first_gap_s=0.2, max_wait_s=2.0)
    t.join()
    assert _names(unit) == [f"p{i}" for i in range(6)]


def test_stop_wakes_the_worker_and_drops_the_queue():
    s = Scheduler()
    got = []
    t = threading.Thread(target=lambda: got.append(s.take()))
    t.start()
    time.sleep(0.05)
    assert s.stop() == 0
    t.join(5)
    assert got == [None]
    with pytest.raises(RuntimeError):
        s.put("A", Item("late"))
