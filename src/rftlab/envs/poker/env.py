"""``PokerEnv``: the poker task in the project's ``Env`` contract (``rftlab.types``).

Two modes (docs/poker.md Part A and §B.1):

- ``official``: a CLBench schedule; ``reset(run_index)`` plays that permuted run (0 = canonical).
- ``rft``: one opponent, ``hands`` hands (16 upstream), illegal-action retry limit 3 then a forced
  CHECK/FOLD/CALL; ``reset(row_id)`` derives the opponent and card seed from the row id (row-shared: every
  GRPO candidate of a row faces the same opponent and cards), or ``reset(opponent=..., card_seed=...)``
  takes them explicitly. When the episode ends the final observation ends with
  ``HAND_PROFITS_BB: v1,v2,...`` (BB per hand, ``.4f``, every hand incl. auto-resolved ones) and
  ``OPPONENT_POLICY: <id>``, the lines the RFT evaluator reads.

``step`` takes a ``PokerAction``, a mapping with its fields (a model's tool arguments), or anything else
(counted as an illegal action, never raised). The step reward is the BB result of the hands this step
completed (0.0 mid-hand); ``metrics()`` gives the task metrics of the episode.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from rftlab.envs.poker.opponents import OPPONENTS
from rftlab.envs.poker.render import PokerText
from rftlab.envs.poker.task import PokerObservation, PokerTask
from rftlab.rewards.poker import task_metrics
from rftlab.types import StepResult

RFT_HANDS = 16
ILLEGAL_RETRY_LIMIT = 3
OPPONENT_ORDER = ("calling_station", "fit_or_fold", "loose_aggressive")


def row_assignment(row_id: Any) -> tuple[str, int]:
    """``(opponent, card_seed)`` of a dataset row in row-shared mode: from ``md5(str(row_id))`` — the first
    12 hex digits pick the opponent (mod 3), the next 8 the card seed in [1, 2**31)."""
    digest = hashlib.md5(str(row_id).encode()).hexdigest()
    opponent = OPPONENT_ORDER[int(digest[:12], 16) % 3]
    seed = int(digest[12:20], 16) % (2**31 - 1) + 1
    return opponent, seed


@dataclass(frozen=True)
class PokerStepInfo:
    """What one step did: ``illegal`` (the action was refused, or forced after the retry limit),
    ``forced`` (the forced action's name), ``reason`` (why it was refused), ``hands_completed`` (hands
    finished by this step, auto-resolved ones included) and their BB results."""

    illegal: bool
    forced: str | None
    reason: str | None
    hands_completed: int
    hand_rewards: tuple[float, ...] = field(default_factory=tuple)
    hand_index: int = 0


@dataclass(frozen=True)
class PokerEnvConfig:
    mode: str = "official"  # "official" (a schedule) or "rft" (one opponent)
    schedule: str = "default"
    hands: int = RFT_HANDS
    illegal_retry_limit: int | None = None  # None: official; rft mode defaults to 3

    def __post_init__(self) -> None:
        if self.mode not in ("official", "rft"):
            raise ValueError(f"mode must be 'official' or 'rft', got {self.mode!r}")


class PokerEnv:
    """The poker task as an ``Env``. Observations are ``PokerObservation``: ``content`` is the feedback
    text of the last step (empty after ``reset``), ``next_query`` the decision to answer (``None`` when done)."""

    def __init__(self, config: PokerEnvConfig | None = None, *, text: PokerText | str | None = None):
        self.config = config or PokerEnvConfig()
        self.text = text
        self.task: PokerTask | None = None
        self.opponent: str | None = None
        self.illegal = 0
        self.forced = 0

    def reset(
        self,
        key: Any = None,
        /,
        *,
        opponent: str | None = None,
        card_seed: int | None = None,
        baseline_index: int | None = None,
    ):
        cfg = self.config
        if cfg.mode == "official":
            run_index = 0 if key is None else int(key)
            self.task = PokerTask(
                cfg.schedule,
                run_index=run_index,
                baseline_index=baseline_index,
                illegal_retry_limit=cfg.illegal_retry_limit,
                text=self.text,
            )
            self.opponent = None
        else:
            if opponent is None or card_seed is None:
                if key is None:
                    raise ValueError("rft mode needs a row id, or opponent= and card_seed=")
                opponent, card_seed = row_assignment(key)
            if opponent not in OPPONENTS:
                raise ValueError(f"unknown opponent {opponent!r}")
            limit = cfg.illegal_retry_limit if cfg.illegal_retry_limit is not None else ILLEGAL_RETRY_LIMIT
            self.task = PokerTask(
                None, opponent=opponent, num_instances=cfg.hands, seed=int(card_seed),
                illegal_retry_limit=limit, text=self.text,
            )  # fmt: skip
            self.opponent = opponent
        self.illegal = self.forced = 0
        self._stepped = False
        query = self.task.reset()
        return PokerObservation("", False, query, done=query is None)

    def step(self, action: Any) -> StepResult[PokerObservation, PokerStepInfo]:
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self.task.done and not self._stepped:
            # every hand ended before the system's first decision: the episode ends on this step
            self._stepped = True
            obs = PokerObservation("", True, None, done=True)
            self._append_profits(obs, self.task)
            return StepResult(obs, 0.0, True, PokerStepInfo(False, None, None, 0, (), self.task.position))
        self._stepped = True
        before = len(self.task.records)
        obs = self.task.step(action)
        new = self.task.records[before:]
        if obs.illegal:
            self.illegal += 1
        if obs.forced:
            self.forced += 1
        if obs.done:
            self._append_profits(obs, self.task)
        reason = None
        if obs.illegal and obs.content.startswith("Invalid poker action: "):
            reason = obs.content.split("\n", 1)[0].removeprefix("Invalid poker action: ")
        info = PokerStepInfo(
            illegal=obs.illegal,
            forced=obs.forced,
            reason=reason,
            hands_completed=len(new),
            hand_rewards=tuple(r.reward for r in new),
            hand_index=self.task.position,
        )
        reward = round(sum(r.profit for r in new) / 10, 6)
        return StepResult(obs, reward, obs.done, info)

    def _append_profits(self, obs: PokerObservation, task: PokerTask) -> None:
        if self.config.mode == "rft":
            profits = ",".join(f"{r.profit / 10:.4f}" for r in task.records)
            obs.content = f"{obs.content}\n\nHAND_PROFITS_BB: {profits}\nOPPONENT_POLICY: {self.opponent}"

    def metrics(self) -> dict[str, Any]:
        if self.task is None:
            return {}
        m = task_metrics([r.profit for r in self.task.records])
        m["illegal_actions"] = self.illegal
        m["forced_actions"] = self.forced
        m["opponent"] = self.opponent
        m["hand_bb"] = [r.reward for r in self.task.records]
        m["hand_opponent"] = [r.opponent for r in self.task.records]
        m["hand_stage"] = [r.stage_index for r in self.task.records]
        m["hand_id"] = [r.instance_id for r in self.task.records]
        return m
