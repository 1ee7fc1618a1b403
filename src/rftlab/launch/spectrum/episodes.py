"""Rendered spectrum episodes for the Fireworks context-length check (``rftlab.launch.context_budget``).

Each dataset row is played on the bench-shaped turn path's env (``rftlab.rollout.spectrum.turns``: the
row's own configuration, scans delivered as user messages) by the deterministic ``accumulate`` reference
policy, and the episode is the transcript the evaluator returns: the row's system messages, then every
scan, reply and tool result. The band salt is a fixed 8-hex string, as the cloud's per-epoch salt is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

RENDER_SALT = "0f0f0f0f"


def rendered_episodes(rows: Iterable[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """One full transcript per row (see the module docstring)."""
    from rftlab.envs.spectrum.rft import SpectrumRFTEnv
    from rftlab.policies.spectrum.reference import RFT_POLICIES
    from rftlab.rollout.spectrum.turns import system_messages, turn_config

    episodes = []
    for row in rows:
        found = row.get("input_metadata")
        meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        env = SpectrumRFTEnv(turn_config(meta.get("dataset_info")))
        observation = env.reset(str(meta.get("row_id") or "row"), salt=RENDER_SALT)
        policy = RFT_POLICIES["accumulate"]()
        for _ in range(10 * env.config.num_scans + 10):
            if env.done:
                break
            act = getattr(policy, "act", None)
            observation = env.step(act(observation) if callable(act) else policy(observation)).observation
        episodes.append(system_messages(row.get("messages") or []) + [dict(m) for m in env.transcript])
    return episodes
