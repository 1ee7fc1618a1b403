"""``PokerSession.act`` with any float amount (docs/poker.md §A.6): a non-finite amount is refused like any
unreadable action (counted, state unchanged), never an ``OverflowError``."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rftlab.rollout.poker.turns import PokerSession, mcp_config


@pytest.mark.parametrize("amount", [math.inf, -math.inf, math.nan])
def test_a_non_finite_amount_is_a_counted_refusal(amount):
    session = PokerSession(mcp_config(hands=2))
    before = session.last_text
    text, complete, reward, done = session.act("RAISE", amount=amount)
    assert f"Could not read the action ('amount' {amount!r} is not a finite number of chips)." in text
    assert session.refusals_shown == 1 and reward == 0.0 and not done and not complete
    assert before.split("Hand #1", 1)[1] == text.split("Hand #1", 1)[1]  # the hand state is unchanged


@settings(max_examples=60, deadline=None)
@given(action=st.sampled_from(["RAISE", "CALL", "CHECK", "FOLD", "raise"]), amount=st.floats())
def test_act_never_raises_on_a_float_amount(action, amount):
    session = PokerSession(mcp_config(hands=2))
    text, _, reward, _ = session.act(action, amount=amount)
    assert isinstance(text, str) and math.isfinite(reward)
