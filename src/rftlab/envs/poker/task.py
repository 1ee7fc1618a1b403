"""CLBench ``exploitable_poker`` on ``texasholdem==0.11.0`` (docs/poker.md Part A) and its RFT adaptations (B.1).

One hand per instance, fresh 1000-chip stacks every hand, the system is player 0 and the opponent
("bot") player 1. ``PokerTask`` is the official task: ``reset()`` returns the first query, ``step(action)``
resolves one decision and returns ``(observation, done)``; outcomes accumulate in ``outcomes`` (including
auto-resolved hands, which a step only mentions in its text). ``PokerEnv`` wraps it in the project's
``Env`` contract (``StepResult``).

    task = PokerTask(schedule="default", run_index=0)
    query = task.reset()
    while query is not None:
        obs = task.step(PokerAction(action="CALL"))
        query = obs.next_query

Bad actions never raise: an unknown word, RAISE without an amount, or a move the engine refuses leaves
the hand unchanged and re-queries the same decision (official: no penalty, no cap). With
``illegal_retry_limit`` (the RFT adaptation, B.1) the third consecutive rejection of one decision applies
a forced CHECK (else FOLD, else CALL) instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from texasholdem import ActionType, TexasHoldEm
from texasholdem.game.player_state import PlayerState

from rftlab.envs.poker.engine import (
    BOT,
    BUYIN,
    SYSTEM,
    cards_text,
    deal_from_state,
    is_legal_move,
    min_raise_total,
)
from rftlab.envs.poker.opponents import OPPONENTS
from rftlab.envs.poker.render import (
    ACTION_TAKEN,
    AUTO_RESOLVED,
    PokerText,
    hand_end_text,
    invalid_text,
    prompt_text,
    resolve_text,
)
from rftlab.envs.poker.schedule import (
    SCHEDULES,
    TASK_SEED,
    Deal,
    Stage,
    run_order,
    schedule_deals,
    single_opponent_deals,
    stage_at,
)

ACTION_NAMES = ("FOLD", "CALL", "CHECK", "RAISE")
ACTION_TYPES = {
    "FOLD": ActionType.FOLD,
    "CALL": ActionType.CALL,
    "CHECK": ActionType.CHECK,
    "RAISE": ActionType.RAISE,
}
FORCED_ORDER = ("CHECK", "FOLD", "CALL")
BASELINE_BB_PER_HAND = 1.5
R_MAX = 9.4875  # BB/hand, upstream's reference maximum for the default schedule (A.9)


@dataclass(frozen=True)
class UnreadableAction:
    """A reply that holds no readable action, with the caller's reason (a client that parses the model's
    text, e.g. "no poker_act tool call in the reply"): the env refuses it like any unreadable action,
    ``Could not read the action ({why}).`` (A.6), and counts it toward the retry limit."""

    why: str


@dataclass(frozen=True)
class PokerAction:
    """The ``PokerAction`` schema: ``action`` in FOLD/CALL/CHECK/RAISE, ``amount`` the raise-TO total
    (RAISE only; ignored otherwise), ``thinking`` free text."""

    action: str
    amount: int | None = None
    thinking: str = ""

    @classmethod
    def coerce(cls, raw: Any) -> tuple[PokerAction | None, str | None]:
        """A ``PokerAction`` from a model's structured output or tool arguments, or ``(None, reason)``.
        Accepts a mapping (``amount`` may be an int, an integral float, a numeric string, ``None`` or a
        negative "none" sentinel) or a ``PokerAction``; an ``UnreadableAction`` is ``(None, its reason)``."""
        if isinstance(raw, PokerAction):
            return raw, None
        if isinstance(raw, UnreadableAction):
            return None, str(raw.why)
        if not isinstance(raw, Mapping):
            return None, f"expected an object with 'action', got {type(raw).__name__}"
        action = raw.get("action")
        if not isinstance(action, str):
            return None, "'action' must be a string"
        amount = raw.get("amount")
        if isinstance(amount, bool):
            return None, "'amount' must be an integer"
        if isinstance(amount, str):
            try:
                amount = int(amount.strip())
            except ValueError:
                return None, f"'amount' {amount[:20]!r} is not an integer"
        if isinstance(amount, float):
            if amount != amount or amount in (float("inf"), float("-inf")) or not amount.is_integer():
                return None, "'amount' must be a whole number of chips"
            amount = int(amount)
        if amount is not None and not isinstance(amount, int):
            return None, "'amount' must be an integer"
        if isinstance(amount, int) and amount < 0:
            amount = None  # the McpGym tool's "none" sentinel (-1)
        thinking = raw.get("thinking")
        return cls(action, amount, thinking if isinstance(thinking, str) else ""), None


@dataclass
class PokerQuery:
    """One decision shown to the system: the prompt, its metadata (as upstream records it), and the same
    visible facts as data for scripted policies (``hole``/``board`` as engine strings such as ``"Jc"``)."""

    prompt: str
    instance_id: str
    instance_index: int
    metadata: dict[str, Any]
    hole: tuple[str, ...] = ()
    board: tuple[str, ...] = ()

    @property
    def legal_actions(self) -> list[str]:
        return list(self.metadata["legal_actions"])


@dataclass
class PokerObservation:
    """What a step returned: the feedback text, whether a hand (instance) completed, the next query."""

    content: str
    instance_complete: bool
    next_query: PokerQuery | None
    done: bool = False
    illegal: bool = False
    forced: str | None = None


@dataclass
class HandRecord:
    """One finished hand: the outcome (reward in BB) and its action history."""

    position: int
    instance_id: str
    instance_index: int
    variant_id: str
    profit: int
    total_profit: int
    actions: list[dict[str, Any]] = field(default_factory=list)
    stage_index: int = 0
    opponent: str = ""
    shown: bool = True  # False: auto-resolved first hand whose text the system never saw

    @property
    def reward(self) -> float:
        return round(self.profit / 10, 6)

    def outcome(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "instance_index": self.instance_index,
            "reward": self.reward,
            "success": self.profit > 0,
            "metadata": {"variant_id": self.variant_id, "total_profit": self.total_profit},
        }


class PokerTask:
    """The official task (schedule mode) or the single-opponent mode of the RFT port.

    - ``schedule``: a schedule id (``default``, ``quick_test``, ...), or ``None`` for single-opponent mode
      with ``opponent`` and ``num_instances`` hands dealt from ``seed``.
    - ``run_index``: permuted run (0 = canonical order); ``baseline_index``: play only that canonical hand
      as ``Hand #1`` (the stateless baseline).
    - ``illegal_retry_limit``: ``None`` (official re-query forever) or the RFT limit (3).
    """

    def __init__(
        self,
        schedule: str | None = "default",
        *,
        opponent: str | None = None,
        num_instances: int = 16,
        seed: int = TASK_SEED,
        run_index: int = 0,
        baseline_index: int | None = None,
        illegal_retry_limit: int | None = None,
        text: PokerText | str | None = None,
    ):
        self.text = resolve_text(text)
        self.illegal_retry_limit = illegal_retry_limit
        if schedule is not None:
            if schedule not in SCHEDULES:
                raise ValueError(f"unknown schedule {schedule!r} (known: {', '.join(SCHEDULES)})")
            self.stages: tuple[Stage, ...] = SCHEDULES[schedule]
            self.deals: tuple[Deal, ...] = schedule_deals(self.stages)
            self.schedule_id: str | None = schedule
        else:
            if opponent not in OPPONENTS:
                raise ValueError(f"unknown opponent {opponent!r} (known: {', '.join(OPPONENTS)})")
            if num_instances < 1:
                raise ValueError("num_instances must be >= 1")
            self.stages = (Stage(opponent, num_instances, seed, notify_change=False),)
            self.deals = single_opponent_deals(seed, num_instances)
            self.schedule_id = None
        self.seed = seed
        if baseline_index is not None:
            if not 0 <= baseline_index < len(self.deals):
                raise ValueError(f"baseline_index must be in [0, {len(self.deals) - 1}]")
            self.order = [baseline_index]
        else:
            self.order = (
                run_order(self.stages, run_index, seed)
                if schedule is not None
                else self._single_order(run_index)
            )
        self.run_index = run_index
        self.baseline_index = baseline_index
        self.position = 0
        self.game: TexasHoldEm | None = None
        self.records: list[HandRecord] = []

    def _single_order(self, run_index: int) -> list[int]:
        order = list(range(len(self.deals)))
        if run_index:
            import random

            random.Random(self.seed + run_index).shuffle(order)
        return order

    # ------------------------------------------------------------------------------------ lookup
    def _canonical(self, position: int) -> int:
        return self.order[position]

    def _stage_index(self, position: int) -> int:
        """Index of the stage whose opponent plays at ``position`` (by canonical index in a baseline)."""
        index = self._canonical(position) if self.baseline_index is not None else position
        return stage_at(self.stages, index)

    def _stage(self, position: int) -> Stage:
        return self.stages[self._stage_index(position)]

    def _variant_label(self, position: int) -> str:
        return self._stage(position).variant if self.schedule_id is not None else "default"

    def _instance_id(self, position: int) -> str:
        return f"poker:{self._variant_label(position)}:hand:{self.deals[self._canonical(position)].hand_id}"

    def _instance_index(self, position: int) -> int:
        return self.baseline_index if self.baseline_index is not None else position

    @property
    def num_hands(self) -> int:
        return len(self.order)

    @property
    def done(self) -> bool:
        return self.position >= self.num_hands

    @property
    def total_profit(self) -> int:
        return sum(r.profit for r in self.records)

    @property
    def outcomes(self) -> list[dict[str, Any]]:
        return [r.outcome() for r in self.records]

    # ---------------------------------------------------------------------------------- episode
    def reset(self) -> PokerQuery | None:
        self.position = 0
        self.records = []
        self._notice: str | None = None
        self._illegal_streak = 0
        self._start_hand()
        self._advance(shown=False)
        return self.current_query

    def _start_hand(self) -> None:
        deal = self.deals[self._canonical(self.position)]
        self.game = deal_from_state(deal.state)
        self._show_brief = True
        self._query: PokerQuery | None = None
        self._opp_actions: list[str] = []
        self._hand_actions: list[dict[str, Any]] = []
        self._opponent = OPPONENTS[self._stage(self.position).variant]
        self._run_bot()

    def _run_bot(self) -> None:
        game = self.game
        assert game is not None
        while game.is_hand_running() and game.current_player == BOT:
            action_type, total = self._opponent(game)
            self._opp_actions.append(action_type.name)
            self._hand_actions.append({"player": "opponent", "action": action_type.name, "amount": total})
            game.take_action(action_type, total=total)

    def _hand_over(self) -> bool:
        return self.game is not None and not self.game.is_hand_running()

    def _finish_hand(self, shown: bool) -> str:
        """Record the finished hand at ``position``; returns its end-of-hand text."""
        game = self.game
        assert game is not None
        chips = game.players[SYSTEM].chips
        delta = chips - BUYIN
        pot = sum(p.get_total_amount() for p in game.pots)
        record = HandRecord(
            position=self.position,
            instance_id=self._instance_id(self.position),
            instance_index=self._instance_index(self.position),
            variant_id=self._variant_label(self.position),
            profit=delta,
            total_profit=self.total_profit + delta,
            actions=list(self._hand_actions),
            stage_index=self._stage_index(self.position),
            opponent=self._stage(self.position).variant,
            shown=shown,
        )
        self.records.append(record)
        folded = any(game.players[p].state == PlayerState.OUT for p in (SYSTEM, BOT))
        showdown = None
        if not folded:
            showdown = (cards_text(game.board), cards_text(game.hands[SYSTEM]), cards_text(game.hands[BOT]))
        text = hand_end_text(self._hand_num(), delta, pot, chips, record.total_profit, showdown)
        # a stage change is announced before the next rendered prompt
        nxt = self.position + 1
        if self.schedule_id is not None and self.baseline_index is None and nxt < self.num_hands:
            here, there = self._stage(self.position), self._stage(nxt)
            if there.variant != here.variant and there.notify_change:
                self._notice = there.opponent_name
        return text

    def _advance(self, shown: bool) -> str | None:
        """While the current hand is over: record it, deal the next one. Returns the end-of-hand texts
        (the first, then each auto-resolved one appended) when ``shown``, else ``None`` (hands that end
        before the system's first decision of a run are recorded but never shown, A.7)."""
        text = None
        while self._hand_over():
            hand_text = self._finish_hand(shown)
            if shown:
                text = hand_text if text is None else f"{text}\n\n{AUTO_RESOLVED}\n{hand_text}"
            self.position += 1
            if self.done:
                break
            self._start_hand()
        return text

    def _hand_num(self) -> int:
        return 1 if self.baseline_index is not None else self.position + 1

    # --------------------------------------------------------------------------------- queries
    def _legal(self) -> list[str]:
        game = self.game
        assert game is not None
        own, stack = game.player_bet_amount(SYSTEM), game.players[SYSTEM].chips
        min_total = min_raise_total(game, SYSTEM)
        out = []
        for name in ACTION_NAMES:
            total = min(min_total, own + stack) if name == "RAISE" else None
            if is_legal_move(game, SYSTEM, ACTION_TYPES[name], total):
                out.append(name)
        return out

    def _render(self, *, fresh: bool) -> PokerQuery:
        """The query for the current decision; ``fresh`` = may carry the notice and the brief."""
        game = self.game
        assert game is not None
        stage = self._stage(self.position)
        own, stack = game.player_bet_amount(SYSTEM), game.players[SYSTEM].chips
        to_call = game.chips_to_call(SYSTEM)
        min_total = min_raise_total(game, SYSTEM)
        position_text = "Button / small blind" if game.btn_loc == SYSTEM else "Big blind"
        notice = self._notice if fresh else None
        brief = self.text.brief if (fresh and self._show_brief) else None
        prompt = prompt_text(
            notice=notice,
            brief=brief,
            hand_num=self._hand_num(),
            phase=game.hand_phase.name,
            opponent=stage.opponent_name,
            position=position_text,
            hand=cards_text(game.hands[SYSTEM]),
            board=cards_text(game.board),
            pot=sum(p.get_total_amount() for p in game.pots),
            chips=stack,
            opp_actions=self._opp_actions,
            to_call=to_call,
            own=own,
            bot_bet=game.player_bet_amount(BOT),
            min_total=min_total,
            text=self.text,
        )
        if fresh:
            self._notice = None
            self._show_brief = False
        instance_id = self._instance_id(self.position)
        metadata = {
            "hand_num": self._hand_num(),
            "phase": game.hand_phase.name,
            "pot": sum(p.get_total_amount() for p in game.pots),
            "chips_to_call": to_call,
            "player_chips": stack,
            "min_raise": min_total,
            "max_raise": own + stack,
            "legal_actions": self._legal(),
            "num_players": 2,
            "position": position_text,
            "opponent_name": stage.opponent_name,
            "instance_id": instance_id,
        }
        return PokerQuery(
            prompt,
            instance_id,
            self._instance_index(self.position),
            metadata,
            hole=tuple(str(c) for c in game.hands[SYSTEM]),
            board=tuple(str(c) for c in game.board),
        )

    @property
    def current_query(self) -> PokerQuery | None:
        if self.done:
            return None
        if self._query is None:
            self._query = self._render(fresh=True)
        return self._query

    # ------------------------------------------------------------------------------------ step
    def resolve(self, action: PokerAction) -> tuple[ActionType | None, int | None, str | None]:
        """``(type, total, None)`` for a legal action, else ``(None, None, reason)`` (A.6)."""
        name = action.action.upper()
        if name == "RAISE" and action.amount is None:
            return None, None, "RAISE requires an amount."
        if name not in ACTION_TYPES:
            return None, None, f"Unknown action '{name}'. Expected FOLD, CALL, CHECK, or RAISE."
        total = action.amount if name == "RAISE" else None
        try:
            self.game.validate_move(SYSTEM, ACTION_TYPES[name], total=total, throws=True)  # type: ignore[union-attr]
        except ValueError as exc:
            return None, None, str(exc)
        return ACTION_TYPES[name], total, None

    def step(self, action: PokerAction | Mapping[str, Any] | Any) -> PokerObservation:
        if self.done:
            raise RuntimeError("the run is finished: call reset()")
        self.current_query  # noqa: B018 - make sure the current decision has been rendered
        parsed, parse_error = PokerAction.coerce(action)
        if parsed is None:
            atype, total, reason = None, None, f"Could not read the action ({parse_error})."
        else:
            atype, total, reason = self.resolve(parsed)
        forced = None
        if atype is None:
            self._illegal_streak += 1
            limit = self.illegal_retry_limit
            if limit is None or self._illegal_streak < limit:
                self._query = self._render(fresh=False)
                return PokerObservation(invalid_text(reason), False, self._query, illegal=True)
            legal = self._legal()
            forced = next((n for n in FORCED_ORDER if n in legal), "CALL")
            atype, total = ACTION_TYPES[forced], None
        self._illegal_streak = 0
        game = self.game
        assert game is not None
        self._hand_actions.append({"player": "system", "action": atype.name, "amount": total})
        game.take_action(atype, total=total)
        self._opp_actions = []
        self._run_bot()
        if not self._hand_over():
            self._query = self._render(fresh=False)
            return PokerObservation(
                ACTION_TAKEN, False, self._query, forced=forced, illegal=forced is not None
            )
        text = self._advance(shown=True) or ""
        return PokerObservation(
            text, True, self.current_query, done=self.done, illegal=forced is not None, forced=forced
        )
