"""Opponent rules on hand-built states, legality edge cases and malformed actions (docs/poker.md §A.6, A.8)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from texasholdem import ActionType
from texasholdem.card.card import Card

from rftlab.envs.poker.engine import deal_from_state, hand_states
from rftlab.envs.poker.env import PokerEnv, PokerEnvConfig, row_assignment
from rftlab.envs.poker.opponents import (
    fit_or_fold,
    has_draw,
    is_connector,
    loose_aggressive,
    pair_or_better,
)
from rftlab.envs.poker.task import PokerAction, PokerTask


def cards(text: str) -> list[Card]:
    return [Card(c) for c in text.split()]


@pytest.mark.parametrize(
    "hole, board, draw",
    [
        ("Ah Kh", "2h 7h 9c", True),  # four to a flush
        ("Ah Kd", "2h 7h 9h", True),  # Ah + three hearts on the board = four to a flush
        ("Ac Kd", "2h 7h 9h Th", True),  # four-flush board alone counts
        ("Ac 2d", "3h 4s 9c", True),  # wheel draw A-2-3-4 (ace low)
        ("Qc Jd", "Th 9s 2c", True),  # open-ended QJT9
        ("Qc Jd", "Th 8s 2c", False),  # gutshot is not 4 consecutive
        ("Kc Qd", "Ah Js Tc", True),  # made straight counts
        ("2c 7d", "9h 9s Kc", False),
        ("2c 3d", "4h 5s Kc 8d 9h", True),  # still evaluated on the river
    ],
)
def test_has_draw(hole, board, draw):
    assert has_draw(cards(hole), cards(board)) is draw


@pytest.mark.parametrize(
    "hole, board, expected",
    [
        ("7c 7d", "2h 9s Kc", True),  # pocket pair
        ("Kd 3c", "2h 9s Kc", True),  # pairs the board
        ("Ad 3c", "2h 2s Kc", False),  # board-only pair does not count
        ("9d Tc", "Jh Qs Kc", False),  # a straight does not count (strength < 0.8)
        ("Ah 3h", "5h 9h Kh", True),  # a high flush: strength >= 0.8
        ("2c 3c", "Kc Kd Kh", False),  # board-only trips: no hole value repeats, strength < 0.8
    ],
)
def test_pair_or_better(hole, board, expected):
    assert pair_or_better(cards(hole), cards(board)) is expected


def test_connectors():
    assert is_connector(cards("9c 8d"), 8) and not is_connector(cards("8c 7d"), 8)
    assert not is_connector(cards("Ac 2d"), 2)  # A-2 is not a connector
    assert is_connector(cards("7h 6h"), 6, suited=True) and not is_connector(cards("7h 6d"), 6, suited=True)


def _game_where(predicate, tries=300):
    """A real dealt hand satisfying ``predicate(game)`` (states from the task's own seeds)."""
    for state in hand_states(7, tries):
        game = deal_from_state(state)
        if predicate(game):
            return game
    raise AssertionError("no such deal in the sample")


def test_fit_or_fold_preflop_keeps_only_its_range():
    for state in hand_states(11, 150):
        game = deal_from_state(state)
        if game.current_player != 1:
            continue
        hole = game.hands[1]
        values = sorted(("23456789TJQKA".index(str(c)[0]) + 2 for c in hole), reverse=True)
        suited = str(hole[0])[1] == str(hole[1])[1]
        keep = (
            values[0] == values[1]
            or (suited and values[0] == 14)
            or values[1] >= 10
            or (values[0] - values[1] == 1 and values[1] >= 8)
        )
        action, _ = fit_or_fold(game)
        assert action == (ActionType.CALL if keep else ActionType.FOLD)  # SB owes 5 preflop


def test_lag_opens_with_min_raise_and_falls_back_when_raise_impossible():
    game = _game_where(lambda g: g.current_player == 1 and "A" in str(g.hands[1][0]) + str(g.hands[1][1]))
    action, total = loose_aggressive(game)
    assert (action, total) == (ActionType.RAISE, 20)  # SB's first min raise is to 20


def test_engine_legality_edges():
    task = PokerTask("default")
    task.reset()  # hand 1: system is BB after an SB limp: CHECK/RAISE/FOLD legal, CALL not
    assert task.resolve(PokerAction("CALL"))[2] == "Player 0 has state IN cannot CALL"
    assert task.resolve(PokerAction("RAISE"))[2] == "RAISE requires an amount."
    assert task.resolve(PokerAction("RAISE", 15))[2].startswith("Cannot raise 5, less than the min raise 10")
    assert task.resolve(PokerAction("RAISE", 1000))[0] == ActionType.RAISE  # all-in is always allowed
    assert task.resolve(PokerAction("RAISE", 1001))[2].startswith("Cannot raise 1001, more than")
    assert (
        task.resolve(PokerAction("FOLD"))[0] == ActionType.FOLD
    )  # folding is legal even when checking is free
    assert (
        task.resolve(PokerAction("bet"))[2] == "Unknown action 'BET'. Expected FOLD, CALL, CHECK, or RAISE."
    )


def test_rft_mode_forces_an_action_after_three_rejections_and_reports_profits():
    env = PokerEnv(PokerEnvConfig(mode="rft", hands=3))
    env.reset("poker_row_7")
    assert env.opponent == row_assignment("poker_row_7")[0]
    for expected_illegal in (True, True):
        r = env.step({"action": "RAISE"})  # no amount: refused, re-queried
        assert (
            r.info.illegal is expected_illegal and r.info.forced is None and "RAISE requires" in r.info.reason
        )
    r = env.step({"action": "RAISE"})  # third rejection: forced CHECK/FOLD/CALL
    assert r.info.forced in ("CHECK", "FOLD", "CALL")
    while not r.done:
        r = env.step(
            {"action": "CALL"} if "CALL" in r.observation.next_query.legal_actions else {"action": "CHECK"}
        )
    tail = r.observation.content.splitlines()
    assert tail[-1] == f"OPPONENT_POLICY: {env.opponent}"
    values = [float(v) for v in tail[-2].removeprefix("HAND_PROFITS_BB: ").split(",")]
    assert values == [rec.profit / 10 for rec in env.task.records] and len(values) == 3
    assert env.metrics()["forced_actions"] == 1 and env.metrics()["illegal_actions"] == 3


def test_row_shared_mode_gives_every_candidate_the_same_hands():
    a, b = PokerEnv(PokerEnvConfig(mode="rft")), PokerEnv(PokerEnvConfig(mode="rft"))
    assert a.reset("row-1").next_query.prompt == b.reset("row-1").next_query.prompt
    seen = {row_assignment(f"r{i}")[0] for i in range(60)}
    assert seen == {"calling_station", "fit_or_fold", "loose_aggressive"}


ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)
ACTION_ARGS = st.fixed_dictionaries(
    {
        "action": st.sampled_from(["FOLD", "call", "Check", "RAISE", "raise", "bet", "", "ALL_IN"])
        | st.text(max_size=6)
    },
    optional={
        "amount": st.none() | st.integers(-5, 3000) | st.floats() | st.text(max_size=6) | st.booleans(),
        "thinking": ANY_JSON,
    },
)


@settings(max_examples=150, deadline=None)
@given(st.lists(ACTION_ARGS | ANY_JSON, min_size=1, max_size=25), st.integers(0, 4))
def test_garbage_actions_never_crash_and_are_counted_as_illegal(actions, run_index):
    env = PokerEnv(PokerEnvConfig(mode="rft", hands=2))
    obs = env.reset(f"fuzz{run_index}")
    illegal = 0
    for a in actions:
        if obs.done:
            break
        r = env.step(a)
        illegal += r.info.illegal
        obs = r.observation
        assert (r.info.illegal and r.info.forced is None) == (
            r.observation.content.startswith("Invalid poker action:")
        )
    assert env.metrics()["illegal_actions"] == illegal


def test_an_episode_without_any_decision_ends_on_its_first_step():
    from rftlab.policies.poker.reference import Exploit
    from rftlab.rollout.episode import episode

    env = PokerEnv(PokerEnvConfig(mode="rft", hands=1))
    row = next(f"r{i}" for i in range(500) if env.reset(f"r{i}").done)  # the opponent folded preflop
    traj = episode(env, Exploit(samples=10), row)
    assert len(traj) == 1 and traj.final_observation.done and traj.metrics["hands_played"] == 1
    assert traj.final_observation.content.startswith("\n\nHAND_PROFITS_BB: ")
    with pytest.raises(RuntimeError):
        env.step({"action": "CHECK"})
