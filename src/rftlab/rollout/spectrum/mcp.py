"""The spectrum RFT env as an eval-protocol ``McpGym`` server (the McpGym path of docs/spectrum.md §B.9).

Tools ``notepad_read``, ``notepad_write(text)`` and ``submit_report(center_freqs)`` (all three always
registered; the env's memory channel decides whether the notepad tools work). Scan 1 is the initial
observation (the row's first user message through the template ``{observation}``); scans 2-12 come back
in ``submit_report`` results. Tools return the observation only; the per-step reward (the scan's exact
occupied-IoU on a submit, else 0) and termination go to eval-protocol's control plane.

Band seed (B.2, docs/platforms.md G3/G15): envs are created per session and seeded from the framework's session
id, ``session_band_seed(session_id)`` (md5 → integer ≥ 1 in practice; never the "seed 0 = no seed" trap),
the first time the session is touched — by the initial-state request (whose ``mcp-session-id`` header is
that session id) or by a tool call (``clientInfo._extra["session_id"]``). So every candidate of a row
(same row, model and config → same session id) faces the same band, and the initial observation is
already the seeded band's scan 1 (the documented G3 limitation does not apply).

The env configuration is the server's, from ``$RFTLAB_SPECTRUM_MCP_MEMORY`` (default ``notepad``): tool
delivery, no per-scan call budget, at most 80 tool calls per episode (B.9), scores hidden (B.15 #2).

Launch: ``python -m rftlab.rollout.spectrum.mcp --port 9700`` or the launcher script
``rftlab/rollout/eval_entries/spectrum_mcp_server.py`` (what ``MCPGymRolloutProcessor`` runs).

No ``from __future__ import annotations`` in this module: FastMCP reads the tool functions' annotations
(``ctx: Context``) at registration time.
"""

import argparse
import os
from typing import Any

from eval_protocol.mcp.adapter import EnvironmentAdapter
from mcp.server.fastmcp import Context

from rftlab.envs.spectrum.rft import (
    SpectrumRFTConfig,
    SpectrumRFTEnv,
    ToolCall,
    session_band_seed,
    tool_schemas,
)
from rftlab.rollout.mcp_sessions import SessionSeededGym
from rftlab.rollout.spectrum.processors import env_step

MCP_MAX_TOTAL_CALLS = 80
UNSEEDED_PLACEHOLDER = 1  # the base class builds an env before any session exists; it is never scored


def mcp_config(memory: str | None = None) -> SpectrumRFTConfig:
    """The McpGym path's env configuration (module docstring)."""
    mem = memory or os.environ.get("RFTLAB_SPECTRUM_MCP_MEMORY") or "notepad"
    return SpectrumRFTConfig(
        memory=mem,  # type: ignore[arg-type]
        delivery="tool",
        max_calls_per_scan=None,
        max_total_calls=MCP_MAX_TOTAL_CALLS,
        show_scores=False,
    )


def observation_text(obs: Any) -> str:
    """The data-plane text of an observation: this call's tool results, or the delivered scan."""
    if obs.tool_results:
        return "\n".join(str(tr["content"]) for tr in obs.tool_results)
    return obs.text or ""


class SpectrumAdapter(EnvironmentAdapter):
    """``EnvironmentAdapter`` over ``SpectrumRFTEnv``; actions are ``ToolCall``s."""

    def __init__(self, config: SpectrumRFTConfig):
        self.config = config

    def get_default_config(self) -> dict[str, Any]:
        return {}

    def create_environment(self, config: dict[str, Any] | None = None) -> SpectrumRFTEnv:
        return SpectrumRFTEnv(self.config)

    def create_environment_with_seed(self, config: dict[str, Any] | None = None, seed: int | None = None):
        env = self.create_environment(config)
        obs, info = self.reset_environment(env, seed)
        return env, obs, info

    def reset_environment(self, env: SpectrumRFTEnv, seed: int | None = None):
        obs = env.reset(seed=int(seed) if seed else UNSEEDED_PLACEHOLDER)
        return obs, {"band_seed": env.band_seed}

    def step_environment(self, env: SpectrumRFTEnv, action: ToolCall):
        obs, reward, done, info = env_step(env, action)
        truncated = (
            info.get("truncated", False) if isinstance(info, dict) else getattr(info, "truncated", False)
        )
        return obs, float(reward), bool(done), bool(truncated), {}

    def close_environment(self, env: SpectrumRFTEnv) -> None:
        pass

    def parse_action(self, action_str: str) -> Any:
        return action_str

    def format_observation(self, observation: Any) -> Any:
        return observation_text(observation)


class SpectrumMcpGym(SessionSeededGym):
    """The McpGym server (module docstring)."""

    def __init__(self, config: "SpectrumRFTConfig | None" = None, **kwargs: Any):
        self.config = config or mcp_config()
        super().__init__("Spectrum-RFT-v1", SpectrumAdapter(self.config), None, **kwargs)

    # ------------------------------------------------------------------ seeding per session

    def session_seed(self, session_id: str) -> Any:
        return session_band_seed(session_id)

    def format_observation(self, obs: Any, env: Any) -> dict[str, Any]:
        return {"observation": observation_text(obs), "instance_complete": bool(obs.done)}

    def _register_tools(self) -> None:
        described = {t["function"]["name"]: t["function"]["description"] for t in tool_schemas(_all_tools())}

        def step(ctx: Context, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            sid, _session = self._session(ctx)
            return self._execute_session_environment_step(sid, ToolCall(name, arguments))

        @self.mcp.tool(name="notepad_read", description=described["notepad_read"])
        def notepad_read(ctx: Context) -> dict[str, Any]:
            return step(ctx, "notepad_read", {})

        @self.mcp.tool(name="notepad_write", description=described["notepad_write"])
        def notepad_write(ctx: Context, text: Any = None) -> dict[str, Any]:
            return step(ctx, "notepad_write", {"text": text})

        @self.mcp.tool(
            name="submit_report",
            description=described["submit_report"] + " center_freqs: a list of numbers (MHz).",
        )
        def submit_report(ctx: Context, center_freqs: Any = None) -> dict[str, Any]:
            return step(ctx, "submit_report", {"center_freqs": center_freqs})


def _all_tools() -> SpectrumRFTConfig:
    return SpectrumRFTConfig(memory="notepad")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Spectrum RFT McpGym server (streamable HTTP at /mcp/).")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)))
    parser.add_argument(
        "--memory", default=None, help="memory channel (default $RFTLAB_SPECTRUM_MCP_MEMORY or notepad)"
    )
    args = parser.parse_args(argv)
    os.environ["PORT"] = str(args.port)  # FastMCP reads the port from $PORT
    server = SpectrumMcpGym(mcp_config(args.memory))
    server.mcp.settings.host = "127.0.0.1"
    server.run(transport="streamable-http")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
