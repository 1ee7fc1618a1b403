"""ICL-off windowing of OpenAI-format chat messages (docs/spectrum.md §B.5).

The policy's input is ``[system messages] + [messages from the current scan's delivery onward]``; the
full transcript is kept for scoring, only the model input is cut. A delivery is the last ``user`` or
``tool`` message whose text holds the scan marker ``[[SCAN_BOUNDARY]]`` (bench-shaped path: a user
message per scan; McpGym path: scan 1 in the first user message, later scans in tool results).

A window must not start with a ``tool`` message (an OpenAI request needs the assistant call it answers),
so a tool-delivered scan's window starts at the assistant message holding that call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SCAN_MARKER = "[[SCAN_BOUNDARY]]"


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def last_delivery(messages: Sequence[Mapping[str, Any]], marker: str = SCAN_MARKER) -> int | None:
    """Index of the last user/tool message carrying ``marker`` (default the scan marker), or ``None``."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") in ("user", "tool") and marker in _text(m):
            return i
    return None


def window_chat(
    messages: Sequence[Mapping[str, Any]], *, window: bool = True, marker: str = SCAN_MARKER
) -> list[dict[str, Any]]:
    """``[system messages] + messages[start:]`` with ``start`` the current scan's delivery (see module
    docstring); the messages unchanged (copied) when ``window`` is off or no scan was delivered yet.
    ``marker`` names another delivery marker (poker, B.4: ``FEEDBACK FROM PREVIOUS INSTANCE``, so the
    model sees the current hand only and nothing is cut during hand 1)."""
    msgs = [dict(m) for m in messages]
    if not window:
        return msgs
    start = last_delivery(msgs, marker)
    if start is None:
        return msgs
    if msgs[start].get("role") == "tool":
        call_id = msgs[start].get("tool_call_id")
        for j in range(start - 1, -1, -1):
            m = msgs[j]
            if m.get("role") == "assistant" and any(
                isinstance(tc, Mapping) and tc.get("id") == call_id for tc in m.get("tool_calls") or []
            ):
                start = j
                break
    system = [m for m in msgs[:start] if m.get("role") == "system"]
    return system + [m for m in msgs[start:] if m.get("role") != "system"]
