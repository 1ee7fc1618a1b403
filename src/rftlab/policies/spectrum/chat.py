"""Chat adapter for the spectrum RFT env: rebuild a scripted policy's observation from chat messages and
turn its action back into an assistant message with a ``submit_report`` tool call.

A reference policy (``rftlab.policies.spectrum.reference``) acts on structured observations (``peaks``, ``echo``);
over an OpenAI-compatible API it only gets the rendered scan text. ``parse_scan_text`` is a strict parser
of what ``SpectrumRFTEnv`` renders (the instance block of ``rftlab.envs.spectrum.render.render_instance``,
optionally preceded by the brief/instruction and the ``[[SCAN_BOUNDARY]]`` marker, optionally followed by
the running-list echo and a score line). Values are rendered with ``str(float)`` / ``f"{x:.1f}"``, so the
parsed numbers are exactly the env's.

Where scans appear in a conversation:

- bench-shaped path: every scan is a ``user`` message;
- McpGym path: scan 1 is the first ``user`` message; later scans are ``tool`` results, which
  eval-protocol delivers as JSON text (``{"observation": "<scan>", ...}``).

``ChatSession`` keeps one episode's policy state. ``respond(messages)`` replays statelessly when the
conversation holds the episode from scan 1 (full history), and otherwise (ICL-off windowing: only the
current scan is visible) continues the session's policy, which must have answered the previous scan.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SCAN_MARKER = "[[SCAN_BOUNDARY]]"
RUNNING_LIST_HEADER = "=== YOUR RUNNING LIST (your previous report) ==="
SUBMIT_TOOL = "submit_report"


class ScanParseError(ValueError):
    """The text is not a scan as the spectrum env renders it (the message says which line and why)."""


@dataclass(frozen=True)
class ParsedScan:
    """A scan rebuilt from its rendered text."""

    scan_num: int
    num_scans: int
    scan_id: str
    peaks: tuple[dict[str, Any], ...]
    echo: tuple[float, ...] | None
    band: tuple[float, float]
    noise_floor_dbm: float


_HEADER_RE = re.compile(r"^--- Scan (\d+)/(\d+) ---$")
_PEAK_RE = re.compile(r"^  - peak_id: (\S+) \| freq: (\S+) MHz \| power: (\S+) dBm \| width: (\S+) MHz$")
_BAND_RE = re.compile(r"^Band: (\S+)-(\S+) MHz$")
_META_KEYS = (
    "scan_id",
    "timestamp_utc",
    "sensor_id",
    "detector_version",
    "integration_time_ms",
    "estimated_noise_floor_dbm",
)
_MAX_COUNT_DIGITS = 18  # a scan number or count; far beyond any episode's number of scans
_FLOAT_RE = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")


def _num(text: str, what: str, line_no: int) -> float:
    if not _FLOAT_RE.match(text):
        raise ScanParseError(f"line {line_no}: {what} {text!r} is not a number")
    x = float(text)
    if not math.isfinite(x):
        raise ScanParseError(f"line {line_no}: {what} {text!r} is not finite")
    return x


def parse_scan_text(text: str) -> ParsedScan:
    """Parse one delivered scan (the last scan block in ``text``). Raises ``ScanParseError``."""
    if not isinstance(text, str):
        raise ScanParseError(f"scan text must be a string, got {type(text).__name__}")
    lines = text.split("\n")
    starts = [i for i, ln in enumerate(lines) if _HEADER_RE.match(ln)]
    if not starts:
        raise ScanParseError("no '--- Scan k/N ---' header found")
    i = starts[-1]
    m = _HEADER_RE.match(lines[i])
    assert m is not None
    if max(len(m.group(1)), len(m.group(2))) > _MAX_COUNT_DIGITS:  # int() refuses past 4300 digits
        raise ScanParseError(f"line {i + 1}: scan number or count has more than {_MAX_COUNT_DIGITS} digits")
    scan_num, num_scans = int(m.group(1)), int(m.group(2))
    if not 1 <= scan_num <= num_scans:
        raise ScanParseError(f"line {i + 1}: scan number {scan_num} outside 1..{num_scans}")

    def expect(idx: int, want: str) -> None:
        got = lines[idx] if idx < len(lines) else "<end of text>"
        if got != want:
            raise ScanParseError(f"line {idx + 1}: expected {want!r}, got {got!r}")

    expect(i + 1, "")
    expect(i + 2, "Scan metadata:")
    meta: dict[str, str] = {}
    for k, key in enumerate(_META_KEYS):
        idx = i + 3 + k
        line = lines[idx] if idx < len(lines) else "<end of text>"
        prefix = f"  {key}: "
        if not line.startswith(prefix) or len(line) == len(prefix):
            raise ScanParseError(f"line {idx + 1}: expected '{prefix}<value>', got {line!r}")
        meta[key] = line[len(prefix) :]
    j = i + 3 + len(_META_KEYS)
    expect(j, "")
    expect(j + 1, "Detected peaks:")
    j += 2
    peaks: list[dict[str, Any]] = []
    if j < len(lines) and lines[j] == "  (no peaks detected)":
        j += 1
    else:
        while j < len(lines) and lines[j].startswith("  - "):
            pm = _PEAK_RE.match(lines[j])
            if pm is None:
                raise ScanParseError(f"line {j + 1}: malformed peak line {lines[j]!r}")
            peaks.append(
                {
                    "freq_mhz": _num(pm.group(2), "freq", j + 1),
                    "power_dbm": _num(pm.group(3), "power", j + 1),
                    "width_mhz": _num(pm.group(4), "width", j + 1),
                    "peak_id": pm.group(1),
                }
            )
            j += 1
        if not peaks:
            got = lines[j] if j < len(lines) else "<end of text>"
            raise ScanParseError(f"line {j + 1}: expected a peak line or '(no peaks detected)', got {got!r}")
    bm = _BAND_RE.match(lines[j]) if j < len(lines) else None
    if bm is None:
        got = lines[j] if j < len(lines) else "<end of text>"
        raise ScanParseError(f"line {j + 1}: expected 'Band: <start>-<end> MHz', got {got!r}")
    band = (_num(bm.group(1), "band start", j + 1), _num(bm.group(2), "band end", j + 1))
    expect(j + 1, "")
    expect(j + 2, "Submit your report.")
    j += 3
    echo: tuple[float, ...] | None = None
    rest = lines[j:]
    if RUNNING_LIST_HEADER in rest:
        h = j + rest.index(RUNNING_LIST_HEADER)
        if h + 1 >= len(lines) or not lines[h + 1].strip():
            raise ScanParseError(f"line {h + 2}: the running list under its header is missing")
        items = lines[h + 1].split(", ")
        echo = tuple(_num(x, "running-list item", h + 2) for x in items)
    return ParsedScan(
        scan_num=scan_num,
        num_scans=num_scans,
        scan_id=meta["scan_id"],
        peaks=tuple(peaks),
        echo=echo,
        band=band,
        noise_floor_dbm=_num(meta["estimated_noise_floor_dbm"], "noise floor", i + 9),
    )


class HiddenNotAvailable(AttributeError):
    pass


@dataclass
class ChatObservation:
    """The observation a scripted RFT policy reads, rebuilt from chat text (same attribute names as
    ``SpectrumObservation``; ``hidden`` ground truth is never available over chat)."""

    text: str
    scan_num: int
    num_scans: int
    peaks: list[dict[str, Any]]
    echo: list[float] | None
    done: bool = False
    tool_results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hidden(self) -> dict[str, Any]:
        raise HiddenNotAvailable(
            "this policy reads hidden ground truth (observation.hidden), which a chat request does not carry"
        )

    @classmethod
    def from_text(cls, text: str) -> ChatObservation:
        p = parse_scan_text(text)
        return cls(
            text=text,
            scan_num=p.scan_num,
            num_scans=p.num_scans,
            peaks=[dict(x) for x in p.peaks],
            echo=None if p.echo is None else list(p.echo),
        )


# ------------------------------------------------------------------------------ messages -> scans


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: string content, or the text parts of list content joined; a tool result that is
    a JSON object with a string ``observation`` (eval-protocol's McpGym delivery) yields that string."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    if not isinstance(content, str):
        return ""
    if message.get("role") == "tool" and content.lstrip().startswith("{"):
        try:
            decoded = json.loads(content)
        except ValueError:
            return content
        if isinstance(decoded, Mapping) and isinstance(decoded.get("observation"), str):
            return decoded["observation"]
    return content


@dataclass(frozen=True)
class ScanTurn:
    """A scan found in a conversation: its position, text and whether a submit followed it."""

    index: int
    text: str
    answered: bool


def find_scans(messages: Sequence[Mapping[str, Any]]) -> list[ScanTurn]:
    """Every delivered scan (a user or tool message holding the scan marker or a scan header), in order,
    with whether an assistant ``submit_report`` call follows it before the next scan."""
    found: list[tuple[int, str]] = []
    for idx, m in enumerate(messages):
        if m.get("role") not in ("user", "tool"):
            continue
        text = message_text(m)
        if "--- Scan " in text and any(_HEADER_RE.match(ln) for ln in text.split("\n")):
            found.append((idx, text))
    out = []
    for k, (idx, text) in enumerate(found):
        end = found[k + 1][0] if k + 1 < len(found) else len(messages)
        answered = any(
            m.get("role") == "assistant"
            and any(_call_name(tc) == SUBMIT_TOOL for tc in m.get("tool_calls") or [])
            for m in messages[idx + 1 : end]
        )
        out.append(ScanTurn(idx, text, answered))
    return out


def _call_name(tc: Any) -> str:
    if isinstance(tc, Mapping):
        fn = tc.get("function")
        if isinstance(fn, Mapping):
            return str(fn.get("name") or "")
        return str(tc.get("name") or "")
    return ""


# --------------------------------------------------------------------------- action -> message


def action_to_message(action: Any) -> dict[str, Any]:
    """A policy action as an OpenAI assistant message: a list of centres → one ``submit_report`` call;
    a mapping/``ToolCall``-like object with ``name``/``arguments`` → that call; a string → text only."""
    if isinstance(action, str):
        return {"role": "assistant", "content": action}
    if hasattr(action, "name") and hasattr(action, "arguments"):
        name, args = str(action.name), action.arguments
    elif isinstance(action, Mapping) and "name" in action:
        name, args = str(action["name"]), action.get("arguments") or {}
    else:
        centres = [float(x) for x in action]
        name, args = SUBMIT_TOOL, {"center_freqs": centres}
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_" + uuid.uuid4().hex[:12],
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ],
    }


def act(policy: Any, observation: Any) -> Any:
    """``policy.act(obs)`` (``rftlab.types.Policy``) or ``policy(obs)`` (the callables of
    ``rftlab.policies.spectrum.reference``)."""
    fn = getattr(policy, "act", None)
    return fn(observation) if callable(fn) else policy(observation)


def reset_policy(policy: Any, seed: int | None = None) -> None:
    fn = getattr(policy, "reset", None)
    if not callable(fn):
        return
    try:
        fn(seed)
    except TypeError:
        fn()


class ChatPolicyError(ValueError):
    """The request cannot be answered faithfully by the served policy (message says why)."""


DONE_TEXT = "All scans are reported."


class ChatSession:
    """One episode's policy state behind a chat endpoint."""

    def __init__(self, factory: Callable[[], Any]):
        self.factory = factory
        self.policy: Any = None
        self.last_scan_id: str | None = None
        self.last_scan_num = 0
        self.last_message: dict[str, Any] | None = None

    def respond(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The assistant message answering ``messages`` (raises ``ScanParseError``/``ChatPolicyError``)."""
        scans = find_scans(messages)
        if not scans:
            raise ChatPolicyError("no spectrum scan found in the messages (user or tool content)")
        latest = scans[-1]
        if latest.answered:
            return {"role": "assistant", "content": DONE_TEXT}
        parsed = [parse_scan_text(s.text) for s in scans]
        observations = [ChatObservation.from_text(s.text) for s in scans]
        nums = [p.scan_num for p in parsed]
        if nums == list(range(1, len(nums) + 1)):
            # the episode from scan 1 (full history, or scan 1 of a windowed episode): replay from scratch
            policy = self.factory()
            reset_policy(policy)
            action = None
            for obs in observations:
                action = act(policy, obs)
            return self._remember(policy, parsed[-1], action)
        if len(parsed) > 1:
            raise ChatPolicyError(f"the conversation's scans are not consecutive from scan 1: {nums}")
        scan = parsed[0]
        if self.policy is not None and scan.scan_id == self.last_scan_id and self.last_message is not None:
            return json.loads(json.dumps(self.last_message))  # the same scan asked again: the same answer
        if self.policy is None or scan.scan_num != self.last_scan_num + 1:
            raise ChatPolicyError(
                f"scan {scan.scan_num} arrived but this session last answered scan {self.last_scan_num}: send "
                "the episode's full history, or a distinct `user` field per episode"
            )
        return self._remember(self.policy, scan, act(self.policy, observations[0]))

    def _remember(self, policy: Any, scan: ParsedScan, action: Any) -> dict[str, Any]:
        self.policy = policy
        self.last_scan_num = scan.scan_num
        self.last_scan_id = scan.scan_id
        msg = action_to_message(action)
        self.last_message = msg
        return json.loads(json.dumps(msg))
