"""Schedules, pre-generated deals, permuted run orders and stage notices (docs/poker.md §A.3, A.4)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from rftlab.envs.poker.engine import RngState, hand_states
from rftlab.envs.poker.opponents import OPPONENT_NAMES

TASK_SEED = 42


@dataclass(frozen=True)
class Stage:
    variant: str  # opponent policy id
    hands: int
    seed: int
    notify_change: bool = True

    @property
    def opponent_name(self) -> str:
        return OPPONENT_NAMES[self.variant]


SCHEDULES: dict[str, tuple[Stage, ...]] = {
    "default": (
        Stage("calling_station", 20, 42),
        Stage("loose_aggressive", 30, 43),
        Stage("calling_station", 10, 44),
        Stage("fit_or_fold", 35, 45),
        Stage("loose_aggressive", 25, 46),
    ),
    "quick_test": (Stage("calling_station", 5, 42, notify_change=False),),
    "calling_station_then_fit_or_fold": (Stage("calling_station", 20, 42), Stage("fit_or_fold", 20, 43)),
}


@dataclass(frozen=True)
class Deal:
    """One pre-generated hand: its id and the generator state its deal starts from."""

    hand_id: str
    state: RngState


@lru_cache(maxsize=32)
def schedule_deals(stages: tuple[Stage, ...]) -> tuple[Deal, ...]:
    """Canonical order: per stage ``k``, ``Random(stage.seed)`` states before each of its hands,
    ids ``stage{k}_seed{seed}_hand{i+1}``. Cached (pure; deals are immutable)."""
    deals: list[Deal] = []
    for k, stage in enumerate(stages):
        for i, state in enumerate(hand_states(stage.seed, stage.hands)):
            deals.append(Deal(f"stage{k}_seed{stage.seed}_hand{i + 1}", state))
    return tuple(deals)


@lru_cache(maxsize=256)
def single_opponent_deals(seed: int, count: int) -> tuple[Deal, ...]:
    """Non-schedule mode: one ``Random(seed)``, ids ``seed{seed}_hand{i+1}``. Cached (pure)."""
    return tuple(Deal(f"seed{seed}_hand{i + 1}", s) for i, s in enumerate(hand_states(seed, count)))


def stage_ranges(stages: tuple[Stage, ...]) -> list[range]:
    """0-based position range of each stage."""
    out, start = [], 0
    for stage in stages:
        out.append(range(start, start + stage.hands))
        start += stage.hands
    return out


def stage_at(stages: tuple[Stage, ...], position: int) -> int:
    """Index of the stage containing 0-based ``position``."""
    for k, r in enumerate(stage_ranges(stages)):
        if position in r:
            return k
    raise IndexError(f"position {position} is outside the schedule ({sum(s.hands for s in stages)} hands)")


def run_order(stages: tuple[Stage, ...], run_index: int, seed: int = TASK_SEED) -> list[int]:
    """Canonical indices in play order for run ``run_index``: run 0 canonical; run r ≥ 1 shuffles each
    stage's positions with one ``Random(seed + r)``, stage by stage (hands never leave their stage)."""
    order = list(range(sum(s.hands for s in stages)))
    if run_index == 0:
        return order
    rng = random.Random(seed + run_index)
    for r in stage_ranges(stages):
        block = order[r.start : r.stop]
        rng.shuffle(block)
        order[r.start : r.stop] = block
    return order
