"""Scoring of spectrum rollouts for eval-protocol: the env's own scoring of the transcript's actions.

A rollout's transcript is replayed through a fresh ``SpectrumRFTEnv`` with the same band: bench-shaped
path, one ``env.step`` per assistant message (what the turn processor did); McpGym path, one step per
executed tool call (what the MCP server did). The replayed env's per-scan records give the reward
(``3 × mean occ``, B.8) and the behaviour metrics (B.11) through ``rftlab.rewards.spectrum``; agent text can
never inject a score (B.15 #1). The replay is checked against what the rollout saw: every tool result in
the transcript must equal the replayed env's result (and, on the turn path, the processor's recorded
metrics must equal the replay's). A mismatch or a failed rollout gives score 0 with
``is_score_valid=False`` and the reason (docs/platforms.md G6: the row still reaches the evaluator).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rftlab.envs.spectrum.rft import SpectrumRFTConfig, SpectrumRFTEnv, ToolCall, session_band_seed
from rftlab.rollout.spectrum.processors import _as_turn, env_step, row_config

METRIC_KEYS: tuple[str, ...] = (
    "mean_occ",
    "early_occ",
    "late_occ",
    "memory_gain",
    "mean_avail",
    "avail_gain",
    "carry_rate",
    "carry_rate_tau1",
    "carry_rate_tau4",
    "report_size",
    "scans_completed",
    "scans_forced",
)


def _plain(message: Any) -> dict[str, Any]:
    if hasattr(message, "model_dump"):
        return message.model_dump(exclude_none=True)
    return dict(message)


def _calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for tc in message.get("tool_calls") or []:
        tc = _plain(tc)
        fn = tc.get("function") or {}
        out.append(
            {"id": tc.get("id"), "function": {"name": fn.get("name") or "", "arguments": fn.get("arguments")}}
        )
    return out


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


class ReplayMismatch(ValueError):
    pass


def replay_turn(messages: Sequence[Any], config: SpectrumRFTConfig, row_id: Any, salt: str) -> SpectrumRFTEnv:
    """Replay a bench-shaped transcript: one step per assistant message; checks every tool result."""
    env = SpectrumRFTEnv(replace(config, render=True))
    env.reset(row_id, salt=salt)
    msgs = [_plain(m) for m in messages]
    expected = [(m.get("tool_call_id"), _text(m.get("content"))) for m in msgs if m.get("role") == "tool"]
    produced: list[tuple[Any, str]] = []
    for m in msgs:
        if m.get("role") != "assistant":
            continue
        if env.done:
            raise ReplayMismatch("the transcript has assistant turns after the episode ended")
        turn = {"content": m.get("content") or "", "tool_calls": _calls(m)}
        obs, *_ = env_step(env, _as_turn(turn))
        produced += [(tr["tool_call_id"], tr["content"]) for tr in obs.tool_results]
    if produced != expected:
        raise ReplayMismatch("the transcript's tool results differ from the env's replay")
    return env


def replay_mcp(messages: Sequence[Any], config: SpectrumRFTConfig, seed: int) -> SpectrumRFTEnv:
    """Replay a McpGym transcript: one step per tool call that has a tool result, in result order; checks
    every result's observation text against the replay."""
    env = SpectrumRFTEnv(replace(config, render=True))
    first = env.reset(seed=seed)
    msgs = [_plain(m) for m in messages]
    users = [m for m in msgs if m.get("role") == "user"]
    if not users or _text(users[0].get("content")) != first.text:
        raise ReplayMismatch("the first user message is not scan 1 of the band the env derives for this row")
    calls: dict[Any, dict[str, Any]] = {}
    for m in msgs:
        if m.get("role") == "assistant":
            for c in _calls(m):
                calls[c["id"]] = c
        elif m.get("role") == "tool":
            call = calls.get(m.get("tool_call_id"))
            if call is None:
                raise ReplayMismatch(f"tool result {m.get('tool_call_id')!r} answers no assistant call")
            if env.done:
                raise ReplayMismatch("the transcript has tool calls after the episode ended")
            fn = call["function"]
            args = fn["arguments"]
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError:
                    pass
            obs, *_ = env_step(env, ToolCall(fn["name"], args, call["id"]))
            want = _text(m.get("content"))
            try:
                decoded = json.loads(want)
                want = decoded.get("observation", want) if isinstance(decoded, Mapping) else want
            except ValueError:
                pass
            got = mcp_observation_text(obs)
            if got != want:
                raise ReplayMismatch(f"tool result {m.get('tool_call_id')!r} differs from the env's replay")
    return env


def mcp_observation_text(obs: Any) -> str:
    """What the McpGym server returns as ``observation`` for a step (the tool results' text) or a reset
    (the delivered scan)."""
    if obs.tool_results:
        return "\n".join(str(tr["content"]) for tr in obs.tool_results)
    return obs.text or ""


def mcp_session_id(row: Any) -> str:
    """The session id eval-protocol's McpGym client derives for a row (``mcp_env.gen_session_id``)."""
    from eval_protocol.mcp_env import gen_session_id
    from eval_protocol.types import DatasetRow

    info = row.input_metadata.dataset_info or {}
    ctx = info.get("environment_context") or {}
    model = (row.input_metadata.completion_params or {}).get("model")
    # eval-protocol types DatasetRow.seed as int, yet its own client passes environment_context.get("seed"),
    # None included (mcp_env.make); the session id must be derived the same way
    dataset_row = DatasetRow(
        id=row.input_metadata.row_id,
        seed=ctx.get("seed"),  # pyright: ignore[reportArgumentType]
        system_prompt="",
        user_prompt_template=info.get("user_prompt_template", ""),
        environment_context=ctx,
    )
    return gen_session_id(dataset_row, str(model))


def _metric_results(metrics: Mapping[str, Any]):
    from eval_protocol.models import MetricResult

    out = {}
    for k in METRIC_KEYS:
        v = metrics.get(k)
        score = float(v) if isinstance(v, int | float) and math.isfinite(float(v)) else None
        out[k] = MetricResult(
            score=0.0 if score is None else score,
            is_score_valid=score is not None,
            reason=f"{k} = {v}" if score is not None else f"{k} is undefined for this episode",
            data={"value": v},
        )
    return out


def invalid_result(reason: str):
    from eval_protocol.models import EvaluateResult

    return EvaluateResult(score=0.0, is_score_valid=False, reason=reason)


def evaluate_metrics(metrics: Mapping[str, Any], path: str):
    from eval_protocol.models import EvaluateResult

    n = metrics.get("scans_completed", 0)
    return EvaluateResult(
        score=float(metrics["reward"]),
        reason=f"spectrum {path}: 3 x mean occupied-IoU over {n} scored scans (env replay)",
        metrics=_metric_results(metrics),
    )


def score_turn_row(row: Any) -> Any:
    """Set ``row.evaluation_result`` for a bench-shaped rollout (module docstring)."""
    if row.rollout_status is not None and row.rollout_status.is_error():
        row.evaluation_result = invalid_result(f"rollout failed: {row.rollout_status.message}")
        return row
    extra = (row.execution_metadata.extra or {}).get("spectrum") or {}
    try:
        cfg = SpectrumRFTConfig.from_dict(extra["config"]) if "config" in extra else row_config(row)
        env = replay_turn(row.messages, cfg, row.input_metadata.row_id, extra.get("salt", ""))
    except (ReplayMismatch, ValueError, KeyError, TypeError) as exc:
        row.evaluation_result = invalid_result(f"cannot score the transcript: {exc}")
        return row
    metrics = env.metrics()
    recorded = extra.get("metrics")
    if recorded is not None and json.dumps(recorded, sort_keys=True) != json.dumps(metrics, sort_keys=True):
        row.evaluation_result = invalid_result("the replayed metrics differ from the processor's env metrics")
        return row
    row.evaluation_result = evaluate_metrics(metrics, "turn")
    return row


def score_mcp_row(row: Any, config: SpectrumRFTConfig) -> Any:
    """Set ``row.evaluation_result`` for a McpGym rollout (band from the row's session id)."""
    if row.rollout_status is not None and row.rollout_status.is_error():
        row.evaluation_result = invalid_result(f"rollout failed: {row.rollout_status.message}")
        return row
    try:
        seed = session_band_seed(mcp_session_id(row))
        env = replay_mcp(row.messages, config, seed)
    except (ReplayMismatch, ValueError, KeyError, TypeError) as exc:
        row.evaluation_result = invalid_result(f"cannot score the transcript: {exc}")
        return row
    row.evaluation_result = evaluate_metrics(env.metrics(), "mcp")
    return row
