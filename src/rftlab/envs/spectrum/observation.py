"""What the BSM-RFT model and scripted policies see: the tool schemas, the observation of a step, the
running list (echo) as displayed, and ICL-off windowing of a transcript (docs/spectrum.md §B.5, B.6).

Cached: ``_echo_text`` / ``_echo_value`` (``functools.lru_cache``, 8192 entries each) map a reported centre
to its displayed text and value (``f"{x:.1f}"`` and its ``float``), which recur scan after scan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from rftlab.envs.spectrum.config import SpectrumRFTConfig
from rftlab.envs.spectrum.layout import CH_BW

SCAN_MARKER = "[[SCAN_BOUNDARY]]"
RUNNING_LIST_HEADER = "=== YOUR RUNNING LIST (your previous report) ==="


def tool_schemas(config: SpectrumRFTConfig) -> list[dict[str, Any]]:
    """OpenAI-style function schemas of the tools offered under ``config`` (own wording)."""
    memory_hint = {
        "notepad": "Earlier scans are not shown again; only your notepad carries over.",
        "echo": "Earlier scans are not shown again; only the running list carries over.",
        "scrambled": "Earlier scans are not shown again; only the running list carries over.",
        "none": "Earlier scans are not shown again.",
    }[config.memory]
    tools = {
        "notepad_read": {
            "name": "notepad_read",
            "description": "Return the contents of your private notepad, the one memory kept between scans.",
            "parameters": {"type": "object", "properties": {}},
        },
        "notepad_write": {
            "name": "notepad_write",
            "description": (
                f"Replace the whole notepad with `text` (at most {config.notepad_max_chars} characters are "
                "kept). The notepad is what carries over to later scans."
            ),
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
        "submit_report": {
            "name": "submit_report",
            "description": (
                "Submit the report for the current scan: center_freqs lists the centre frequencies (MHz) of "
                f"the occupied regions; every region is {CH_BW:g} MHz wide, at most {config.max_report} "
                f"regions count. This ends your turn for the scan. {memory_hint}"
            ),
            "parameters": {
                "type": "object",
                "properties": {"center_freqs": {"type": "array", "items": {"type": "number"}}},
                "required": ["center_freqs"],
            },
        },
    }
    return [{"type": "function", "function": tools[n]} for n in config.tool_names()]


# ----------------------------------------------------------------------------------- observation


class SpectrumObservation:
    """What a step produced.

    - ``text``: the next scan as delivered to the model (marker + scan [+ running list]); ``None`` when this
      call delivered no new scan (a notepad call, or the episode ended).
    - ``tool_results``: this call's tool-result messages.
    - ``scan_num`` / ``peaks`` / ``echo``: the scan the agent must answer now, as structured data for
      scripted policies (``peaks`` without the hidden ``source``; ``echo`` = the displayed running list).
    - ``hidden``: true channel centres, peak sources and each peak's true channel centre — for oracle and
      ceiling policies only, never shown to a model.
    """

    __slots__ = ("text", "scan_num", "num_scans", "tool_results", "done", "echo", "_scan", "_centres")

    def __init__(self, text, scan_num, num_scans, tool_results, done, echo, scan, centres):
        self.text = text
        self.scan_num = scan_num
        self.num_scans = num_scans
        self.tool_results = tool_results
        self.done = done
        self.echo = echo
        self._scan = scan
        self._centres = centres

    @property
    def peaks(self) -> list[dict[str, Any]]:
        return [
            {
                "freq_mhz": p["freq_mhz"],
                "power_dbm": p["power_dbm"],
                "width_mhz": p["width_mhz"],
                "peak_id": p["peak_id"],
            }
            for p in self._scan["detected_peaks"]
        ]

    @property
    def hidden(self) -> dict[str, Any]:
        peaks = self._scan["detected_peaks"]
        centres = self._centres
        return {
            "channel_centers": list(centres),
            "peak_sources": [p["source"] for p in peaks],
            "peak_true_centers": [
                centres[p["channel_id"]] if p["channel_id"] is not None else None for p in peaks
            ],
        }

    def __repr__(self) -> str:
        return (
            f"SpectrumObservation(scan_num={self.scan_num}, done={self.done}, "
            f"text={None if self.text is None else len(self.text)} chars, tool_results={len(self.tool_results)})"
        )


def window_messages(messages: Sequence[Mapping[str, Any]], *, window: bool = True) -> list[dict[str, Any]]:
    """ICL-off windowing (B.5): everything from the last scan delivery (a message flagged
    ``scan_boundary`` or containing ``[[SCAN_BOUNDARY]]``) onward; the whole list when ``window`` is off."""
    msgs = [dict(m) for m in messages if m.get("role") != "system"]
    if not window:
        return msgs
    start = 0
    for i, m in enumerate(msgs):
        content = m.get("content")
        if m.get("scan_boundary") or (
            isinstance(content, str) and SCAN_MARKER in content and m.get("role") != "assistant"
        ):
            start = i
    return msgs[start:]


@lru_cache(maxsize=8192)
def _echo_text(x: float) -> str:
    return f"{x:.1f}"


@lru_cache(maxsize=8192)
def _echo_value(x: float) -> float:
    return float(f"{x:.1f}")


def echo_items(shown: Sequence[float]) -> tuple[list[str], list[float]]:
    """``([f"{x:.1f}"], [float(f"{x:.1f}")])`` for the displayed list ``shown``; the displayed value
    equals ``round(x, 1)``. A list holding a zero bypasses the caches: ``0.0`` and ``-0.0`` are equal keys
    but display as ``"0.0"`` and ``"-0.0"``."""
    if 0.0 in shown:
        items = [f"{x:.1f}" for x in shown]
        return items, [float(t) for t in items]
    return list(map(_echo_text, shown)), list(map(_echo_value, shown))
