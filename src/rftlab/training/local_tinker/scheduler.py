"""The order in which ``rftlab serve tinker``'s one worker thread runs queued work: fair between sessions.

Work is queued per *lane* (a session: one SDK ``ServiceClient``). Two kinds of work wait in a lane, each in
arrival order: *jobs* (a training request, a model creation, a sampler creation...), which run one at a
time, and *sample pieces* (a sampling request, or a slice of at most ``PIECE_ROWS`` samples of a larger
one), which run together in batches. The worker asks ``take`` for its next unit of work:

* lanes take turns (round-robin over the lanes that have work); within a lane, jobs and sample batches
  alternate, so neither kind starves the other;
* a sample batch collects pieces from every lane round-robin, starting with the lane whose turn it is,
  while they fit in ``unit_rows`` samples, so one request of 20,000 samples runs as many short batches and another
  session's 30 ms ``forward`` waits for at most one of them, not for the whole request;
* every model is still touched by the one worker thread only, and a lane's jobs run in the order they
  were queued (the service queues a model's training requests in ``seq_id`` order).

A batch that is not yet full waits a few milliseconds for more pieces while they keep arriving (the SDK
sends a step's requests as a burst of one HTTP request per prompt, and one batch runs several times
faster than the burst in pieces); see ``take``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Protocol

PIECE_ROWS = 64
"""Samples per piece: a sampling request with more samples is split (docs/platforms.md §3.12)."""
UNIT_ROWS = 256
"""Samples per batch at most (the decode micro-batch of the engine)."""


class Work(Protocol):
    """What the scheduler needs of a queued item: ``rows`` is 0 for a job, its sample count for a piece."""

    @property
    def rows(self) -> int: ...


@dataclass
class _Lane:
    jobs: deque[Any] = field(default_factory=deque)
    pieces: deque[Any] = field(default_factory=deque)
    job_turn: bool = True

    def empty(self) -> bool:
        return not self.jobs and not self.pieces


class Scheduler:
    """Round-robin lanes of jobs and sample pieces (see the module docstring). Thread-safe."""

    def __init__(self, unit_rows: int = UNIT_ROWS) -> None:
        self.unit_rows = unit_rows
        self._lanes: OrderedDict[str, _Lane] = OrderedDict()  # lanes with work, in turn order
        self._cv = threading.Condition()
        self._stopping = False

    def put(self, lane: str, item: Work) -> None:
        with self._cv:
            if self._stopping:
                raise RuntimeError("the scheduler is stopped")
            entry = self._lanes.get(lane)
            if entry is None:
                entry = self._lanes[lane] = _Lane()
            (entry.pieces if item.rows else entry.jobs).append(item)
            self._cv.notify_all()

    def __len__(self) -> int:
        with self._cv:
            return sum(len(x.jobs) + len(x.pieces) for x in self._lanes.values())

    def stop(self) -> int:
        """Drop everything queued and wake the worker; returns how many items were dropped."""
        with self._cv:
            self._stopping = True
            dropped = sum(len(x.jobs) + len(x.pieces) for x in self._lanes.values())
            self._lanes.clear()
            self._cv.notify_all()
        return dropped

    def take(
        self, gap_s: float = 0.03, first_gap_s: float = 0.005, max_wait_s: float = 0.5
    ) -> list[Any] | None:
        """The next unit of work, blocking until there is one: ``[job]`` or a batch of sample pieces.
        ``None`` once stopped. A batch below ``unit_rows`` waits for more pieces while they arrive less than
        ``gap_s`` apart (``first_gap_s`` after a lone piece), ``max_wait_s`` at most."""
        with self._cv:
            while not self._lanes and not self._stopping:
                self._cv.wait()
            if self._stopping:
                return None
            name, lane = next(iter(self._lanes.items()))
            self._lanes.move_to_end(name)  # the next turn is the next lane's
            if lane.jobs and (lane.job_turn or not lane.pieces):
                lane.job_turn = False
                job = lane.jobs.popleft()
                self._drop_if_empty(name)
                return [job]
            lane.job_turn = True
            batch = self._collect(name, self.unit_rows)
        deadline = time.monotonic() + max_wait_s
        while (rows := sum(p.rows for p in batch)) < self.unit_rows and time.monotonic() < deadline:
            with self._cv:
                gap = gap_s if len(batch) > 1 else min(gap_s, first_gap_s)
                self._cv.wait_for(lambda: self._stopping or self._has_pieces(), timeout=gap)
                if self._stopping:
                    break
                more = self._collect(None, self.unit_rows - rows)
            if not more:
                break
            batch += more
        return batch

    def _has_pieces(self) -> bool:
        return any(x.pieces for x in self._lanes.values())

    def _drop_if_empty(self, name: str) -> None:
        if self._lanes[name].empty():
            del self._lanes[name]

    def _collect(self, first: str | None, budget: int) -> list[Any]:
        """Pieces round-robin over the lanes (``first``'s first) while they fit in ``budget`` samples; with
        ``first`` given (a new batch), at least one piece, whatever its size."""
        names = [n for n, x in self._lanes.items() if x.pieces]
        if first is not None and first in names:
            names.remove(first)
            names.insert(0, first)
        taken: list[Any] = []
        rows = 0
        while names:
            for n in list(names):
                lane = self._lanes[n]
                piece = lane.pieces[0]
                if rows + piece.rows > budget and (taken or first is None):
                    return taken
                lane.pieces.popleft()
                taken.append(piece)
                rows += piece.rows
                if not lane.pieces:
                    names.remove(n)
                    self._drop_if_empty(n)
        return taken
