"""Eval-protocol rows for poker RFT (docs/poker.md §B.4): one row per row id; the env derives the opponent and the
card seed from the row id (row-shared mode), so every GRPO candidate of a row plays the same hands."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rftlab.envs.poker.env import RFT_HANDS, row_assignment

# The project's own system prompt (icl_notepad-style poker play with tool calls; thinking off).
SYSTEM_PROMPT = (
    "You are playing heads-up no-limit hold'em against one opponent over a series of separate hands. "
    "Act with the poker_act tool: action is FOLD, CALL, CHECK or RAISE, amount is the total to raise to "
    "(RAISE only, -1 otherwise). The conversation is cleared between hands; notepad_update replaces your "
    "notepad, which is the only thing you keep from hand to hand, so note how the opponent plays."
)


def dataset_rows(
    n: int,
    *,
    hands: int = RFT_HANDS,
    prefix: str = "poker",
    thinking: bool = False,
    reward: str | None = None,
) -> Iterator[dict[str, Any]]:
    """``n`` rows; without ``thinking`` the system prompt ends with ``/no_think`` (B.4). ``reward`` (an
    arm spec's ``mean_instance`` or ``gain``) is recorded in ``environment_context``: the uploaded
    evaluator scores each row with the reward its arm names (``rftlab.rollout.poker.scoring``).

    ``user_prompt_template`` is ``{observation}``: eval-protocol's McpGym rollout formats the first user
    message from it and the server's initial observation (the first hand's prompt). A row without it
    gets an empty first message (eval-protocol's default template is ``""``), so the model would make its
    first decision blind: that is what the uploaded rows did before this field."""
    system = SYSTEM_PROMPT if thinking else SYSTEM_PROMPT + " /no_think"
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    for i in range(n):
        row_id = f"{prefix}_s{1000 + i}"
        opponent, card_seed = row_assignment(row_id)
        yield {
            "messages": [{"role": "system", "content": system}],
            "input_metadata": {
                "row_id": row_id,
                "dataset_info": {
                    "user_prompt_template": "{observation}",
                    "environment_context": {
                        "env": "poker_rft",
                        "mode": "row_shared",
                        "opponent": opponent,
                        "card_seed": card_seed,
                        "hands": hands,
                        **({"reward": reward} if reward is not None else {}),
                    },
                },
            },
        }
