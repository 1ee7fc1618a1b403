"""Per-session seeding shared by the project's McpGym servers (spectrum, poker).

eval-protocol creates a session's env before any row seed reaches it (docs/platforms.md G3), so each server seeds
the env itself the first time a session is touched — by the initial-state request (whose
``mcp-session-id`` is the session id) or by a tool call — from ``session_seed(session_id)``. Every
candidate of a row (same row, model and config → same session id) therefore faces the same episode, and
the initial observation already belongs to it.
"""

from typing import Any

from eval_protocol.mcp import McpGym


class SessionSeededGym(McpGym):
    """An ``McpGym`` whose envs are seeded per session; subclasses define ``session_seed``."""

    def session_seed(self, session_id: str) -> Any:
        raise NotImplementedError

    def _seed_session(self, session: dict[str, Any], session_id: str) -> None:
        data = session.setdefault("session_data", {})
        if data.get("_seeded"):
            return
        env, obs, _info = self.adapter.create_environment_with_seed({}, seed=self.session_seed(session_id))
        session["env"], session["obs"] = env, obs
        data["_seeded"] = True

    def _session(self, ctx: Any) -> tuple[str, dict[str, Any]]:
        sid = self._get_session_id(ctx)
        session = self._get_or_create_session(ctx)
        with self.session_lock:
            self._seed_session(session, sid)
        return sid, session

    def get_initial_state_endpoint(self, session_data: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        with self.session_lock:
            self._seed_session(session_data, str(session_data.get("session_id")))
        return self.format_observation(session_data["obs"], session_data["env"])


# The base class registers its control-plane routes by scanning for decorated methods; the override above
# must carry the same marker so it replaces the base route rather than disappearing.
SessionSeededGym.get_initial_state_endpoint._is_control_plane_endpoint = True  # type: ignore[attr-defined]
SessionSeededGym.get_initial_state_endpoint._control_plane_path = "/control/initial_state"  # type: ignore[attr-defined]
