"""BSM-RFT actions (what a model call may be) and how they are read (docs/spectrum.md §B.6, B.15 and rftlab rules).

``interpret_turn`` turns one model call into tool calls; ``decode_arguments`` reads a call's arguments;
``normalize_center_freqs`` turns ``submit_report``'s ``center_freqs`` into the report's centres with a
``ReportNote`` of what was converted or dropped. Nothing here raises on model output. The rules:

- ``center_freqs`` missing / ``null`` → an empty report, scored (upstream: ``args.get(...) or []``).
- not a list: a JSON string holding a list (or number) is decoded, a bare number becomes a one-element
  list; anything else (mapping, prose) → an empty report, scored, ``malformed`` set.
- elements: numbers are kept; numeric strings (``"12.5"``) are converted (``float()``, as upstream);
  booleans and other non-numeric items are dropped; NaN/±inf — and integers beyond the float range
  (≥ 2**1024) — are dropped as non-finite.
- then the first 16 are kept (over-cap items dropped), in submission order.
- duplicates are kept (they re-paint the same bins; the echo shows them), and counted.
- out-of-band centres are kept; their regions are clipped to ``[0, 180]`` by the scorers (a region fully
  outside the band scores nothing), and counted.
- JSON (arguments, or a ``center_freqs`` string) with a repeated key, or nested too deeply to decode, is
  unusable: the arguments count as missing (an empty report, scored) and the reason is recorded.
- a tool name that is not a string matches no tool (an error result, no advance).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rftlab.envs.model_json import load_model_json
from rftlab.envs.spectrum.layout import RFT_BAND

MAX_REPORT = 16


@dataclass(slots=True)
class ToolCall:
    name: str
    arguments: Any = None  # a mapping, or a JSON string as sent by an OpenAI-style API
    id: str | None = None


@dataclass(slots=True)
class AssistantTurn:
    """One assistant message: its text and its tool calls (possibly none)."""

    tool_calls: tuple[ToolCall | Mapping[str, Any], ...] = ()
    content: str = ""


def submit(center_freqs: Any) -> ToolCall:
    return ToolCall("submit_report", {"center_freqs": center_freqs})


def _as_tool_call(raw: Any) -> ToolCall | None:
    """A ``ToolCall`` from a ``ToolCall`` or an OpenAI-style mapping (``{"function": {...}}`` or
    ``{"name": ...}``); ``None`` for anything else. A name that is not a string is kept as its ``str``
    (it then matches no tool and is answered with an error)."""
    if isinstance(raw, ToolCall):
        if not isinstance(raw.name, str):
            return ToolCall(_text(raw.name), raw.arguments, raw.id)
        return raw
    if isinstance(raw, Mapping):
        fn = raw.get("function")
        if isinstance(fn, Mapping):
            return ToolCall(_text(fn.get("name") or ""), fn.get("arguments"), _call_id(raw.get("id")))
        if "name" in raw:
            return ToolCall(_text(raw.get("name") or ""), raw.get("arguments"), _call_id(raw.get("id")))
    return None


def _text(x: Any) -> str:
    """``str(x)``, bounded: a pathological object (a 100,000-deep list) must not crash or flood."""
    if isinstance(x, str):
        return x
    try:
        return str(x)[:200]
    except (RecursionError, ValueError):
        return f"<{type(x).__name__}>"


def _call_id(x: Any) -> str | None:
    return x if isinstance(x, str) or x is None else _text(x)


def interpret_turn(action: Any) -> tuple[tuple[ToolCall | None, ...], str]:
    """One model call as ``(tool calls, message text)``: a list of centres is ``submit_report`` of it;
    a ``ToolCall`` / tool-call mapping is one call; an ``AssistantTurn`` or a list of tool calls gives
    all of them (``None`` for an entry that is not a tool call); anything else is a turn without a
    usable tool call (its text kept when it is a string). Never raises."""
    if type(action) is list and (not action or type(action[0]) in _NUMBER_TYPES):
        return (ToolCall("submit_report", {"center_freqs": action}),), ""  # the common shape
    if isinstance(action, AssistantTurn):
        try:
            calls = tuple(_as_tool_call(tc) for tc in action.tool_calls)
        except TypeError:  # tool_calls not iterable
            calls = (None,)
        return calls, action.content if isinstance(action.content, str) else ""
    if isinstance(action, list | tuple):
        calls = tuple(_as_tool_call(a) for a in action)
        if calls and all(calls):
            return calls, ""
        return (ToolCall("submit_report", {"center_freqs": list(action)}),), ""
    call = _as_tool_call(action)
    if call is not None:
        return (call,), ""
    return (), action if isinstance(action, str) else ""


_NUMBER_TYPES = (float, int, str)


def decode_arguments(arguments: Any) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as a dict, plus an error text when they were unusable (then ``{}``)."""
    if type(arguments) is dict:
        return arguments, None
    if arguments is None:
        return {}, None
    if isinstance(arguments, Mapping):
        return dict(arguments), None
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}, None
        try:
            decoded = load_model_json(arguments)
        except ValueError as exc:
            reason = str(exc)
            return {}, "arguments are not valid JSON" + (f" ({reason})" if reason.startswith("JSON") else "")
        if isinstance(decoded, Mapping):
            return dict(decoded), None
        return {}, "arguments JSON is not an object"
    return {}, f"arguments of type {type(arguments).__name__}"


@dataclass(frozen=True, slots=True)
class ReportNote:
    """What ``normalize_center_freqs`` did with one submitted ``center_freqs`` (rules in the module
    docstring): how many items were received and kept, and how many were converted or dropped per rule.
    ``malformed`` names why the whole value was unusable (then nothing is kept), else ``None``."""

    received: int = 0
    kept: int = 0
    converted_strings: int = 0
    non_numeric: int = 0
    non_finite: int = 0
    over_cap: int = 0
    duplicates: int = 0
    out_of_band: int = 0
    malformed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def _note(malformed: str | None = None, received: int = 0) -> ReportNote:
    return ReportNote(received=received, malformed=malformed)


def normalize_center_freqs(
    value: Any, *, max_report: int = MAX_REPORT, band: float = RFT_BAND
) -> tuple[list[float], ReportNote]:
    """Turn a model's ``center_freqs`` into the report's centres (rules in the module docstring).
    Returns ``(centres, note)``; ``note`` counts what was converted, dropped or flagged."""
    if value is None:
        return [], _note("center_freqs missing")
    if isinstance(value, str):
        try:
            value = load_model_json(value)
        except ValueError:
            return [], _note("center_freqs is a string that is not a JSON list")
    if type(value) is not list:
        if isinstance(value, bool) or isinstance(value, Mapping) or value is None:
            return [], _note(f"center_freqs of type {type(value).__name__} is not a list of numbers")
        if isinstance(value, int | float):
            value = [value]
        elif isinstance(value, tuple) or (hasattr(value, "__iter__") and not isinstance(value, str | bytes)):
            try:
                value = list(value)
            except Exception:  # noqa: BLE001 - an iterable that fails to iterate is simply not a list
                return [], _note(f"center_freqs of type {type(value).__name__} could not be read as a list")
        else:
            return [], _note(f"center_freqs of type {type(value).__name__} is not a list of numbers")
    converted = non_numeric = non_finite = 0
    out: list[float] = []
    append = out.append
    for item in value:
        t = type(item)
        if t is float:
            x = item
        elif t is int:
            try:
                x = float(item)
            except OverflowError:  # an integer beyond the float range (>= 2**1024): not finite
                non_finite += 1
                continue
        elif t is bool:
            non_numeric += 1
            continue
        elif isinstance(item, str):
            try:
                x = float(item)
            except ValueError:
                non_numeric += 1
                continue
            converted += 1
        elif isinstance(item, numbers.Real):  # numpy scalars and other real-number types
            try:
                x = float(item)
            except (OverflowError, ValueError, TypeError):
                non_finite += 1
                continue
        else:
            non_numeric += 1
            continue
        if x - x == 0.0:  # finite (NaN and ±inf give NaN)
            append(x)
        else:
            non_finite += 1
    n_finite = len(out)
    over_cap = n_finite - max_report if n_finite > max_report else 0
    if over_cap:
        del out[max_report:]
    out_of_band = 0
    if out and (min(out) < 0.0 or max(out) > band):
        out_of_band = sum(1 for x in out if x < 0.0 or x > band)
    kept = len(out)
    note = ReportNote(
        len(value), kept, converted, non_numeric, non_finite, over_cap, kept - len(set(out)), out_of_band
    )
    return out, note
