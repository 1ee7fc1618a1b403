"""The poker RFT env as an eval-protocol ``McpGym`` server (docs/poker.md §B.1, B.2; issue 14 item 3).

One tool, ``poker_act(action, thinking="", amount=-1, notepad_update="")`` (B.2's parameters and
sentinels: ``amount < 0`` → no amount; a blank ``notepad_update`` keeps the notepad). The notepad
(≤ ``NOTEPAD_MAX_CHARS``, longer updates are cut) is applied before the action is stepped, also when the
action turns out illegal. The first hand's prompt is the initial observation (the row's first user
message through the template ``{observation}``); every tool result is ``{"observation": <text>,
"instance_complete": bool}`` with the text formatted as B.1: mid-hand ``FEEDBACK: {obs}\\n\\n{prompt}``;
after a hand ends ``FEEDBACK FROM PREVIOUS INSTANCE:\\n{obs}``, the notepad block (if non-empty) and the
next hand's prompt joined by blank lines. The last result carries the env's ``HAND_PROFITS_BB:`` /
``OPPONENT_POLICY:`` lines. The per-step control-plane reward is the BB result of the hands the step
completed (the env's step reward); termination goes to the control plane too.

Env per session, RFT mode (``$RFTLAB_POKER_HANDS`` hands, default 16; illegal-action retry limit 3).
Row-shared seeding (B.1): the server only sees eval-protocol's session id, which is a deterministic hash
of the dataset row (row id, environment context) and the model (``mcp_env.gen_session_id``), so the env is
reset with the **session id as the row key**: ``(opponent, card_seed) = row_assignment(session_id)``.
Every candidate of a row (same row, model and config → same session id) faces the same opponent and
cards; ``rftlab.rollout.poker.scoring.row_key`` recomputes the key from a result row. The
env is seeded the first time the session is touched (initial-state request or tool call), as in
``rftlab.rollout.spectrum.mcp``.

The tool's text, the session (env + notepad) and the observation texts live in
``rftlab.rollout.poker.turns`` (no eval-protocol there), shared with the tinker-cookbook env; their names are
re-exported here.

Launch: ``python -m rftlab.rollout.poker.mcp --port 9701`` or the launcher script
``rftlab/rollout/eval_entries/poker_mcp_server.py --port N`` (what ``MCPGymRolloutProcessor`` runs).

No ``from __future__ import annotations`` in this module: FastMCP reads the tool function's annotations
at registration time (docs/platforms.md G1).
"""

import argparse
import os
from typing import Any

from eval_protocol.mcp.adapter import EnvironmentAdapter
from mcp.server.fastmcp import Context

from rftlab.envs.poker.env import PokerEnvConfig
from rftlab.rollout.mcp_sessions import SessionSeededGym
from rftlab.rollout.poker.turns import (
    NOTEPAD_MAX_CHARS,
    PLACEHOLDER_KEY,
    POKER_TOOL,
    TOOL_DESCRIPTION,
    PokerSession,
    initial_text,
    mcp_config,
    poker_hands,
    step_text,
)

__all__ = [
    "NOTEPAD_MAX_CHARS",
    "PLACEHOLDER_KEY",
    "TOOL_DESCRIPTION",
    "PokerAdapter",
    "PokerMcpGym",
    "PokerSession",
    "initial_text",
    "main",
    "mcp_config",
    "poker_hands",
    "step_text",
]


class PokerAdapter(EnvironmentAdapter):
    """``EnvironmentAdapter`` over ``PokerSession``; actions are ``poker_act`` argument dicts."""

    def __init__(self, config: PokerEnvConfig):
        self.config = config

    def get_default_config(self) -> dict[str, Any]:
        return {}

    def create_environment(self, config: dict[str, Any] | None = None, key: Any = PLACEHOLDER_KEY):
        return PokerSession(self.config, key)

    def create_environment_with_seed(self, config: dict[str, Any] | None = None, seed: int | None = None):
        env = self.create_environment(config, seed if seed else PLACEHOLDER_KEY)
        return env, env, {"opponent": env.env.opponent}

    def reset_environment(self, env: PokerSession, seed: Any = None):
        env.reset(seed if seed else PLACEHOLDER_KEY)
        return env, {}

    def step_environment(self, env: PokerSession, action: dict[str, Any]):
        _text, _complete, reward, done = env.act(**action)
        return env, reward, done, False, {}

    def close_environment(self, env: PokerSession) -> None:
        pass

    def parse_action(self, action_str: str) -> Any:
        return action_str

    def format_observation(self, observation: Any) -> Any:
        return observation.last_text


class PokerMcpGym(SessionSeededGym):
    """The McpGym server (module docstring)."""

    def __init__(self, config: "PokerEnvConfig | None" = None, **kwargs: Any):
        self.config = config or mcp_config()
        super().__init__("Poker-RFT-v1", PokerAdapter(self.config), None, **kwargs)

    def session_seed(self, session_id: str) -> Any:
        return session_id

    def format_observation(self, obs: Any, env: Any) -> dict[str, Any]:
        return {"observation": obs.last_text, "instance_complete": bool(obs.instance_complete)}

    def _register_tools(self) -> None:
        @self.mcp.tool(name=POKER_TOOL, description=TOOL_DESCRIPTION)
        def poker_act(
            ctx: Context, action: str, thinking: str = "", amount: int = -1, notepad_update: str = ""
        ) -> dict[str, Any]:
            sid, _session = self._session(ctx)
            args = {
                "action": action,
                "thinking": thinking,
                "amount": amount,
                "notepad_update": notepad_update,
            }
            return self._execute_session_environment_step(sid, args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Poker RFT McpGym server (streamable HTTP at /mcp/).")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
    parser.add_argument("--hands", type=int, default=None, help="hands per episode ($RFTLAB_POKER_HANDS, 16)")
    args = parser.parse_args(argv)
    os.environ["PORT"] = str(args.port)  # FastMCP reads the port from $PORT
    server = PokerMcpGym(mcp_config(args.hands))
    server.mcp.settings.host = "127.0.0.1"
    server.run(transport="streamable-http")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
