"""BSM-RFT: the memory-training variant (spec Part B).

One random band per dataset row (11–14 channels of 8 MHz in a 180 MHz band), seeded from the row id and
an optional epoch salt so every GRPO candidate of a row faces the same band and no band repeats across
epochs; 12 scans with ``n_active = 3``; the CLBench detector noise; occupied-IoU on the 0.5 MHz raster
(the reward signal) and available-IoU (tracked); memory channels ``none`` / ``echo`` (running list) /
``scrambled`` (control) / ``notepad`` (tools), and ICL-off windowing.

    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="echo"))
    obs = env.reset("sc1_0", epoch=3)
    while not obs.done:
        obs, reward, done, info = env.step(policy(obs))      # a list of centres = submit_report
    env.metrics()                                            # reward, memory_gain, carry_rate, ...

``step`` takes one model call: a list of centre frequencies (shorthand for ``submit_report``), a
``ToolCall`` / tool-call mapping, an ``AssistantTurn`` (all tool calls of one assistant message), or
anything else (a turn without a usable tool call). It never raises on malformed model input; what was
done with the input is in ``info``.

Rules for ``submit_report(center_freqs)`` (the spec fixes width 8 MHz and the first-16 cap; the rest are
rftlab decisions, counted per submit in ``info["actions"]`` and in the scan record's ``action``):

- ``center_freqs`` missing / ``null`` → an empty report, scored (upstream: ``args.get(...) or []``).
- not a list: a JSON string holding a list (or number) is decoded, a bare number becomes a one-element
  list; anything else (mapping, prose) → an empty report, scored, ``malformed`` set.
- elements: numbers are kept; numeric strings (``"12.5"``) are converted (``float()``, as upstream);
  booleans and other non-numeric items are dropped; NaN/±inf are dropped.
- then the first 16 are kept (over-cap items dropped), in submission order.
- duplicates are kept (they re-paint the same bins; the echo shows them), and counted.
- out-of-band centres are kept; their regions are clipped to ``[0, 180]`` by the scorers (a region fully
  outside the band scores nothing), and counted.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import numbers
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any, Literal

from rftlab.envs.spectrum.generator import GeneratorParams, generate_scans
from rftlab.envs.spectrum.render import (
    SpectrumText,
    compose_prompt,
    render_instance,
    resolve_text,
    timestamp_utc,
)
from rftlab.rewards.spectrum import (
    AvailableScorer,
    OccupiedBitset,
    OccupiedIntervals,
    OccupiedRaster,
    episode_metrics,
    score_line,
)
from rftlab.types import StepResult

RFT_BAND = 180.0
CH_BW = 8.0
MAX_REPORT = 16
NOTEPAD_MAX_CHARS = 2000
MIN_CHANNELS, MAX_CHANNELS = 11, 14
MIN_SPACING = CH_BW + 2  # accepted centres are >= 10 MHz apart
LAYOUT_ATTEMPTS = 400
NUM_SCANS = 12
MAX_CALLS_PER_SCAN = 6
SCAN_MARKER = "[[SCAN_BOUNDARY]]"
RUNNING_LIST_HEADER = "=== YOUR RUNNING LIST (your previous report) ==="
REPORT_POWER_DBM = -30.0

MemoryChannel = Literal["none", "echo", "scrambled", "notepad"]
MEMORY_CHANNELS: tuple[str, ...] = ("none", "echo", "scrambled", "notepad")

# Generator parameters of the RFT task (B.4): CLBench constructor defaults + the RFT overrides.
RFT_PARAMS = GeneratorParams(band_width=RFT_BAND, n_active=3, p_false_alarm=0.2, p_miss=0.15)


# ----------------------------------------------------------------------------------------- seeds


def band_seed(row_id: Any, salt: str = "") -> int:
    """``int(md5(f"{salt}:{row_id}")[:12], 16)`` — the turn-processor band seed (B.2). All candidates of
    a row share it; a different ``salt`` (one per epoch) gives a different band."""
    return int(hashlib.md5(f"{salt}:{row_id}".encode()).hexdigest()[:12], 16)


def session_band_seed(session_id: Any) -> int:
    """McpGym-path band seed: ``int(md5(str(session_id))[:12], 16)``, no salt (B.2)."""
    return int(hashlib.md5(str(session_id).encode()).hexdigest()[:12], 16)


def epoch_salt(namespace: str, epoch: int) -> str:
    """A reproducible per-epoch salt (8 hex digits) replacing upstream's ``secrets.token_hex(4)``:
    ``sha256(f"{namespace}:epoch:{epoch}")[:8]``. Use the run id (or arm spec hash) as ``namespace``."""
    return hashlib.sha256(f"{namespace}:epoch:{int(epoch)}".encode()).hexdigest()[:8]


def scramble_seed(seed: int, scan_num: int, salt: str = "") -> int:
    """Seed of the scrambled echo shown with scan ``scan_num``: ``sha256(f"scramble:{seed}:{scan_num}:{salt}")``
    (first 16 hex digits), never Python's salted ``hash()`` (B.5)."""
    return int(hashlib.sha256(f"scramble:{seed}:{scan_num}:{salt}".encode()).hexdigest()[:16], 16)


def scrambled_list(
    seed: int, scan_num: int, count: int, salt: str = "", band: float = RFT_BAND
) -> list[float]:
    """``sorted(round(U(8, B − 8), 1))`` × ``count`` (the control arm's echo content, B.5)."""
    rng = random.Random(scramble_seed(seed, scan_num, salt))
    return sorted(round(rng.uniform(CH_BW, band - CH_BW), 1) for _ in range(count))


# ---------------------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class BandLayout:
    """A random band (B.3). ``drawn`` may exceed ``len(centers)`` when 400 attempts run out."""

    seed: int
    drawn: int
    attempts: int
    centers: tuple[float, ...]
    band_width: float = RFT_BAND
    channel_bw: float = CH_BW

    @property
    def placed(self) -> int:
        return len(self.centers)

    def channels(self) -> list[dict[str, Any]]:
        return [
            {"id": i, "slot": i, "center_freq": c, "bandwidth": self.channel_bw}
            for i, c in enumerate(self.centers)
        ]

    def regions(self) -> list[tuple[float, float]]:
        return [(c, self.channel_bw) for c in self.centers]


def random_layout(seed: int, band_width: float = RFT_BAND) -> BandLayout:
    """B.3 with ``ent = random.Random(seed)``: ``n = randint(11, 14)``; up to 400 draws of
    ``round(uniform(8, B − 8), 1)``, accepted when ≥ 10 MHz from every accepted centre; sorted."""
    ent = random.Random(seed)
    rand = ent.random
    n = ent.randint(MIN_CHANNELS, MAX_CHANNELS)
    span = (band_width - CH_BW) - CH_BW
    centers: list[float] = []  # kept sorted: only the two neighbours of a candidate can be too close
    attempts = 0
    while len(centers) < n and attempts < LAYOUT_ATTEMPTS:
        attempts += 1
        cf = round(CH_BW + span * rand(), 1)  # == round(ent.uniform(8, B - 8), 1), same single draw
        k = bisect.bisect_left(centers, cf)
        if (k == 0 or cf - centers[k - 1] >= MIN_SPACING) and (
            k == len(centers) or centers[k] - cf >= MIN_SPACING
        ):
            centers.insert(k, cf)
    return BandLayout(seed, n, attempts, tuple(centers), band_width)


@lru_cache(maxsize=256)
def episode_band(seed: int, band_width: float, num_scans: int, params: GeneratorParams):
    """``(layout, scans, blocks)`` of a band seed, cached: the candidates of a GRPO group share one band,
    so only the first of them pays for generation and rendering. ``blocks`` holds each scan's instance
    block, rendered on first use. Callers must treat everything as read-only."""
    layout = random_layout(seed, band_width)
    blocks: list[str | None] = [None] * num_scans
    return layout, generate_episode_scans(seed, layout, num_scans, params), blocks


def generate_episode_scans(seed: int, layout: BandLayout, num_scans: int = NUM_SCANS, params=RFT_PARAMS):
    """The episode's scans: the CLBench generator with the layout as channel overrides and the same seed
    (an independent ``random.Random``, B.2/B.4). Peaks carry ``channel_id`` annotations."""
    return generate_scans(layout.channels(), num_scans, seed, params, annotate=True, with_ground_truth=False)


# --------------------------------------------------------------------------------------- actions


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
_FLOAT_ONLY = {float}


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _DuplicateKey(f"duplicate key {dup!r}")
    return out


def load_model_json(text: str) -> Any:
    """``json.loads`` for model output: raises ``ValueError`` (with a short reason) for invalid JSON,
    a repeated object key (ambiguous: which value did the model mean?), or nesting too deep to decode."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise ValueError(f"JSON has a {exc}") from None
    except RecursionError:
        raise ValueError("JSON is nested too deeply") from None


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


_isfinite = math.isfinite


def normalize_center_freqs(
    value: Any, *, max_report: int = MAX_REPORT, band: float = RFT_BAND
) -> tuple[list[float], dict[str, Any]]:
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
            value = list(value)
        else:
            return [], _note(f"center_freqs of type {type(value).__name__} is not a list of numbers")
    if not value or set(map(type, value)) == _FLOAT_ONLY:  # fast path: a plain list of floats
        n = len(value)
        # A float sum is finite only if every term is (inf/NaN propagate), so a finite sum means nothing
        # to drop and the C-level sum + slice replace the per-item filter; an overflowing sum of finite
        # values just takes the filter.
        total = sum(value)
        if total - total == 0.0:
            out = value.copy() if n <= max_report else value[:max_report]
            non_finite = 0
        else:
            out = [x for x in value if x - x == 0.0]  # drops NaN and ±inf
            non_finite = n - len(out)
            if len(out) > max_report:
                del out[max_report:]
        finite = n - non_finite
        kept = len(out)
        out_of_band = 0
        if out:
            ends = sorted(out)  # cheaper than min() + max() for these short lists
            if ends[0] < 0.0 or ends[-1] > band:
                out_of_band = sum(1 for x in out if x < 0.0 or x > band)
        note = ReportNote(
            n,
            kept,
            0,
            0,
            non_finite,
            finite - max_report if finite > max_report else 0,
            kept - len(set(out)),
            out_of_band,
            None,
        )
        return out, note
    converted = non_numeric = non_finite = over_cap = 0
    out = []
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
        if not _isfinite(x):
            non_finite += 1
            continue
        append(x)
    if len(out) > max_report:
        over_cap = len(out) - max_report
        del out[max_report:]
    note = ReportNote(
        received=len(value),
        kept=len(out),
        converted_strings=converted,
        non_numeric=non_numeric,
        non_finite=non_finite,
        over_cap=over_cap,
        duplicates=len(out) - len(set(out)),
        out_of_band=sum(1 for x in out if x < 0.0 or x > band),
    )
    return out, note


# --------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class SpectrumRFTConfig:
    """Episode options of the RFT env. JSON-serialisable (``to_dict``)."""

    memory: MemoryChannel = "echo"
    window: bool = True  # ICL-off: the model input is [system] + the current scan's messages
    delivery: Literal["user", "tool"] = "user"  # turn processor (user messages) or McpGym (tool results)
    show_scores: bool = False  # show the previous scan's score line with the next scan (B.15 #2)
    multi_submit: Literal["first", "upstream"] = "first"  # B.15 #4
    max_calls_per_scan: int | None = MAX_CALLS_PER_SCAN  # None = unlimited (McpGym)
    max_total_calls: int | None = None  # McpGym caps the episode at 80 steps
    num_scans: int = NUM_SCANS
    band_width: float = RFT_BAND
    max_report: int = MAX_REPORT
    notepad_max_chars: int = NOTEPAD_MAX_CHARS
    scorer: Literal["bitset", "raster", "intervals"] = "bitset"  # identical results; see rewards.spectrum
    render: bool = True  # False: no prompt text / transcript (scripted policies, baselines, benchmarks)
    salt_namespace: str = "rftlab"
    text: str = "project"  # "project" or an upstream-text folder
    params: GeneratorParams = RFT_PARAMS

    def __post_init__(self) -> None:
        if self.memory not in MEMORY_CHANNELS:
            raise ValueError(f"memory must be one of {MEMORY_CHANNELS}, got {self.memory!r}")
        if self.delivery not in ("user", "tool"):
            raise ValueError(f"delivery must be 'user' or 'tool', got {self.delivery!r}")
        if self.multi_submit not in ("first", "upstream"):
            raise ValueError(f"multi_submit must be 'first' or 'upstream', got {self.multi_submit!r}")
        if self.scorer not in ("bitset", "raster", "intervals"):
            raise ValueError(f"scorer must be 'bitset', 'raster' or 'intervals', got {self.scorer!r}")
        if self.params.band_width != self.band_width:
            raise ValueError("params.band_width must equal band_width")

    @property
    def echo(self) -> bool:
        return self.memory in ("echo", "scrambled")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpectrumRFTConfig:
        """Inverse of ``to_dict`` (e.g. from a dataset row's ``environment_context.config``)."""
        d = dict(data)
        if isinstance(d.get("params"), Mapping):
            d["params"] = GeneratorParams(**d["params"])
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown SpectrumRFTConfig field(s): {', '.join(sorted(unknown))}")
        return cls(**d)

    def sha256(self) -> str:
        """SHA-256 of the canonical JSON of the config."""
        canon = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()

    def tool_names(self) -> list[str]:
        return (
            ["notepad_read", "notepad_write", "submit_report"]
            if self.memory == "notepad"
            else ["submit_report"]
        )


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


@dataclass(frozen=True, slots=True)
class SpectrumStepInfo:
    """The typed per-step record of ``SpectrumRFTEnv.step`` (``StepResult.info``).

    - ``scan``: the scan (1-based) this call acted on.
    - ``scored``: a ``submit_report`` was scored in this call; then ``occ`` / ``avail`` are its exact
      occupied-IoU / available-IoU and ``score_line`` the line shown to the model.
    - ``forced``: the env advanced with an empty, unscored report (no submit in a call without tool
      calls, or the scan's call budget ran out; B.9); ``occ`` / ``avail`` are then the (unrewarded)
      scores of that empty report, ``score_line`` is ``None``.
    - neither: no scan ended in this call (a notepad call); ``occ`` / ``avail`` / ``score_line`` are
      ``None``.
    - ``truncated``: the episode's total call budget ran out in this call.
    - ``actions``: one ``ReportNote`` per scored submit (what was kept, converted, dropped).
    - ``tool_errors``: the error texts returned to the model in this call (unknown tool, bad arguments,
      extra submit).
    """

    scan: int
    scored: bool = False
    forced: bool = False
    truncated: bool = False
    occ: float | None = None
    avail: float | None = None
    score_line: str | None = None
    actions: tuple[ReportNote, ...] = ()
    tool_errors: tuple[str, ...] = ()


@lru_cache(maxsize=256)
def _make_scorers(regions: tuple[tuple[float, float], ...], band: float, scorer: str):
    """The band's (occupied, available) scorers, cached: the candidates of a GRPO group share them.
    Both are read-only after construction (the bitset scorer's run memo is a pure cache)."""
    if scorer == "bitset":
        occ = OccupiedBitset(regions, band)
    elif scorer == "raster":
        occ = OccupiedRaster(regions, band)
    else:
        occ = OccupiedIntervals(regions, band)
    return occ, AvailableScorer(regions, band)


# Formatting a float (f"{x:.1f}") and parsing it back cost far more than a dict lookup on this hot path, and
# report values recur scan after scan, so the running list is built from a memo of each value's display
# string and displayed value (``float`` of that string, which equals ``round(x, 1)``).
_ECHO_TEXT: dict[float, str] = {}
_ECHO_VALUE: dict[float, float] = {}
_ECHO_MEMO_MAX = 8192


def _echo_items(shown: Sequence[float]) -> tuple[list[str], list[float]]:
    """``([f"{x:.1f}"], [float(f"{x:.1f}")])`` for the displayed list ``shown``."""
    try:
        return list(map(_ECHO_TEXT.__getitem__, shown)), list(map(_ECHO_VALUE.__getitem__, shown))
    except KeyError:
        pass
    items = [f"{x:.1f}" for x in shown]
    values = [float(t) for t in items]
    if len(_ECHO_TEXT) > _ECHO_MEMO_MAX:
        _ECHO_TEXT.clear()
        _ECHO_VALUE.clear()
    for x, t, v in zip(shown, items, values, strict=True):
        if x:  # never memoise ±0.0: they are equal dict keys but display as "0.0" and "-0.0"
            _ECHO_TEXT[x] = t
            _ECHO_VALUE[x] = v
    return items, values


class SpectrumRFTEnv:
    """The BSM-RFT episode. Pure: everything follows from (config, row id, salt)."""

    def __init__(self, config: SpectrumRFTConfig | None = None, *, text: SpectrumText | None = None):
        self.config = config or SpectrumRFTConfig()
        self.text = text if text is not None else resolve_text(self.config.text)
        self._brief = self.text.brief.render()
        self._marker = f"{SCAN_MARKER} {self.text.rft_marker_notes[self.config.memory]}\n"
        self._tool_names = frozenset(self.config.tool_names())
        self._started = False
        self.done = True

    # -------------------------------------------------------------- episode setup

    def reset(
        self,
        row_id: Any = None,
        *,
        epoch: int | None = None,
        salt: str | None = None,
        seed: int | None = None,
    ) -> SpectrumObservation:
        """Start an episode. The band seed is ``seed`` when given (e.g. ``session_band_seed``), else
        ``band_seed(row_id, salt)`` where ``salt`` defaults to ``epoch_salt(namespace, epoch)`` when an
        epoch is given and to ``""`` (upstream's unsalted bands) otherwise."""
        cfg = self.config
        if seed is None:
            if row_id is None:
                raise ValueError("reset needs a row_id (or an explicit seed)")
            if salt is None:
                salt = epoch_salt(cfg.salt_namespace, epoch) if epoch is not None else ""
            seed = band_seed(row_id, salt)
        self.row_id = row_id
        self.epoch = epoch
        self.salt = salt or ""
        self.band_seed = int(seed)
        self.layout, self.scans, self._blocks = episode_band(
            self.band_seed, cfg.band_width, cfg.num_scans, cfg.params
        )
        self._gt_regions = self.layout.regions()
        self._occ, self._avail = _make_scorers(tuple(self._gt_regions), cfg.band_width, cfg.scorer)
        self.scan_index = 0
        self.notepad = ""
        self.records: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []
        self._calls_this_scan = 0
        self._total_calls = 0
        self._last_report: list[float] = []
        self._last_line: str | None = None
        self._current_echo: list[float] | None = None
        self._reads = 0
        self._writes = 0
        self._started = True
        self.done = False
        text = self._deliver()
        if cfg.render:
            self.transcript.append({"role": "user", "content": text, "scan_boundary": True})
        return self._observation(text, [])

    # -------------------------------------------------------------- rendering

    def _scan_prompt(self, k: int) -> str:
        block = self._blocks[k]
        if block is None:
            block = self._blocks[k] = render_instance(
                self.scans[k],
                scan_num=k + 1,
                stated_horizon=self.config.num_scans,
                timestamp=timestamp_utc(k),
                band_start=0.0,
                band_end=self.config.band_width,
            )
        return compose_prompt(self._brief, self.text.rft_instruction, block) if k == 0 else block

    def marker(self) -> str:
        """The line prefixed to every delivered scan: ``[[SCAN_BOUNDARY]] <note>\\n``."""
        return self._marker

    def _echo_list(self) -> list[float] | None:
        """The list displayed with the current scan (``None`` when no echo is shown)."""
        if not self.config.echo or self.scan_index == 0 or not self._last_report:
            return None
        if self.config.memory == "scrambled":
            return scrambled_list(
                self.band_seed, self.scan_index + 1, len(self._last_report), self.salt, self.config.band_width
            )
        return self._last_report

    def _deliver(self) -> str:
        """Render the current scan as delivered: marker + scan [+ running list] [+ previous score line].
        With ``render=False`` only the displayed echo is computed and ``""`` is returned."""
        cfg = self.config
        shown = self._echo_list()
        if not cfg.render:
            # the displayed value parsed back, float(f"{x:.1f}"), which is also round(x, 1)
            self._current_echo = None if shown is None else _echo_items(shown)[1]
            return ""
        k = self.scan_index
        block = self._blocks[k]
        if k == 0 or block is None:
            block = self._scan_prompt(k)
        if shown is not None:
            items, self._current_echo = _echo_items(shown)
            text = (
                f"{self._marker}{block}\n{RUNNING_LIST_HEADER}\n{', '.join(items)}\n"
                f"{self.text.rft_echo_instruction}\n"
            )
        else:
            self._current_echo = None
            text = self._marker + block
        if cfg.show_scores and self._last_line is not None:
            text += "\n" + self._last_line
        return text

    def _observation(self, text: str | None, tool_results: list[dict[str, Any]]) -> SpectrumObservation:
        k = self.scan_index if self.scan_index < self.config.num_scans else self.config.num_scans - 1
        return SpectrumObservation(
            text,
            k + 1,
            self.config.num_scans,
            tool_results,
            self.done,
            self._current_echo,
            self.scans[k],
            self.layout.centers,
        )

    # -------------------------------------------------------------- scoring

    def score_report(self, centres: Sequence[float]) -> tuple[float, float]:
        """``(occupied-IoU, available-IoU)`` of a report of 8 MHz regions against this episode's band."""
        occ = self._occ.score(centres, CH_BW) if centres else 0.0
        return occ, self._avail.score(centres, CH_BW)

    # -------------------------------------------------------------- stepping

    def tools(self) -> list[dict[str, Any]]:
        return tool_schemas(self.config)

    def step(self, action: Any) -> StepResult[SpectrumObservation, SpectrumStepInfo]:
        """One model call → ``StepResult(observation, reward, done, info: SpectrumStepInfo)``. ``reward`` is
        the scan's exact occupied-IoU when a report was scored in this call, else ``0.0``
        (``info.scored`` says which); the episode reward is ``metrics()["reward"]``."""
        if not self._started:
            raise RuntimeError("call reset(row_id) before step()")
        if self.done:
            raise RuntimeError("episode finished: call reset() to start a new one")
        cfg = self.config
        render = cfg.render
        self._calls_this_scan += 1
        self._total_calls = n_call = self._total_calls + 1
        calls, content = interpret_turn(action)
        if render:
            self.transcript.append(
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {"id": c.id, "name": c.name, "arguments": c.arguments} if c else {"invalid": True}
                        for c in calls
                    ],
                }
            )

        # ---- run the tool calls in order
        tool_errors: list[str] = []
        notes: list[ReportNote] = []
        results: list[dict[str, Any]] = []
        reward = 0.0
        occ = avail = None
        line: str | None = None
        submitted_now = 0
        next_scan: str | None = None  # the latest scan rendered for delivery during this call
        for idx, call in enumerate(calls):
            call_id = (call.id if call else None) or f"call_{n_call}_{idx}"
            if call is None:
                self._error(tool_errors, results, call_id, "error: tool call without a name")
                continue
            name = call.name
            if name not in self._tool_names:
                names = ", ".join(cfg.tool_names())
                self._error(
                    tool_errors, results, call_id, f"error: tool {name!r} is not available (tools: {names})"
                )
                continue
            args, arg_err = decode_arguments(call.arguments)
            if arg_err:
                tool_errors.append(f"{name}: {arg_err}")
            if name == "notepad_read":
                results.append(self._tool_result(call_id, self.notepad or self.text.rft_notepad_empty))
                self._reads += 1
            elif name == "notepad_write":
                raw = args.get("text")
                self.notepad = str(raw if raw is not None else "")[: cfg.notepad_max_chars]
                results.append(self._tool_result(call_id, "ok"))
                self._writes += 1
            elif submitted_now and cfg.multi_submit == "first":
                msg = "error: this scan's report was already submitted; extra submit ignored"
                self._error(tool_errors, results, call_id, msg)
            elif self.done:
                self._error(tool_errors, results, call_id, "error: all scans are completed")
            else:
                centres, note = normalize_center_freqs(
                    args.get("center_freqs"), max_report=cfg.max_report, band=cfg.band_width
                )
                if arg_err and note.malformed == "center_freqs missing":
                    note = replace(note, malformed=arg_err)
                occ, avail = self._score_and_advance(centres, note, submitted=True)
                line = self._last_line
                submitted_now += 1
                reward = occ
                notes.append(note)
                next_scan = None if self.done else self._deliver()
                results.append(self._submit_result(call_id, line, next_scan))

        # ---- no submit: force-advance with an empty, unscored report (B.9)
        forced = False
        if not submitted_now:
            out_of_calls = (
                cfg.max_calls_per_scan is not None and self._calls_this_scan >= cfg.max_calls_per_scan
            )
            if not calls or out_of_calls:
                occ, avail = self._score_and_advance([], _note("no submit"), submitted=False)
                forced = True
                next_scan = None if self.done else self._deliver()
        if submitted_now or forced:
            self._calls_this_scan = 0  # a submit (or a forced advance) ends the scan's call budget
        truncated = False
        if cfg.max_total_calls is not None and n_call >= cfg.max_total_calls and not self.done:
            self.done = truncated = True
            next_scan = None
        if render:
            self.transcript.extend(results)
            if next_scan is not None and (cfg.delivery == "user" or not submitted_now):
                # user delivery: every scan is a user message; tool delivery: scans ride in the submit
                # result, except after a forced advance (no submit result to carry it)
                self.transcript.append({"role": "user", "content": next_scan, "scan_boundary": True})
        info = SpectrumStepInfo(
            self.records[-1]["scan"] if (submitted_now or forced) else self.scan_index + 1,
            bool(submitted_now),
            forced,
            truncated,
            occ,
            avail,
            line,
            tuple(notes),
            tuple(tool_errors),
        )
        return StepResult(self._observation(next_scan, results), reward, self.done, info, truncated)

    def _submit_result(self, call_id: str, line: str | None, next_scan: str | None) -> dict[str, Any]:
        """The tool result of a scored ``submit_report``: ``ok`` + score line (user delivery), or the next
        scan [+ score line] (tool delivery)."""
        cfg = self.config
        if cfg.delivery == "tool":
            body = next_scan if next_scan is not None else ("" if cfg.show_scores else "All scans completed.")
            text = body + (f"\n{line}" if cfg.show_scores else "")
            return self._tool_result(call_id, text, score=cfg.show_scores, boundary=next_scan is not None)
        # the dict _tool_result(call_id, f"ok\n{line}", score=True) builds, same keys in the same order
        return {"role": "tool", "tool_call_id": call_id, "content": f"ok\n{line}", "score_line": True}

    def _error(self, errors: list[str], results: list[dict[str, Any]], call_id: str, msg: str) -> None:
        errors.append(msg)
        results.append(self._tool_result(call_id, msg))

    @staticmethod
    def _tool_result(
        call_id: str, content: str, *, score: bool = False, boundary: bool = False
    ) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
        if score:
            msg["score_line"] = True
        if boundary:
            msg["scan_boundary"] = True
        return msg

    def _score_and_advance(self, centres: list[float], note: dict[str, Any], *, submitted: bool):
        # = self.score_report(centres), without the extra call
        occ = self._occ.score(centres, CH_BW) if centres else 0.0
        avail = self._avail.score(centres, CH_BW)
        line = score_line(occ, avail) if submitted else None
        self.records.append(
            {
                "scan": self.scan_index + 1,
                "submitted": submitted,
                "forced": not submitted,
                "report": centres if submitted else None,
                "echo": self._current_echo,
                "occ": occ,
                "avail": avail,
                "score_line": line,
                "action": note,
                "notepad_reads": self._reads,
                "notepad_writes": self._writes,
                "notepad_chars": len(self.notepad),
            }
        )
        self._reads = self._writes = 0
        # the echo shows the previous report (after the cap); a forced empty step clears it (B.15 #6)
        self._last_report = centres
        self._last_line = line
        self.scan_index += 1
        if self.scan_index >= self.config.num_scans:
            self.done = True
        return occ, avail

    # -------------------------------------------------------------- model input and metrics

    def model_input(self, system_messages: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
        """The policy's input: system messages + (ICL-off) the messages from the current scan's delivery
        onward, or (``window=False``) the whole transcript."""
        msgs = [dict(m) for m in system_messages]
        return msgs + window_messages(self.transcript, window=self.config.window)

    def metrics(self, tau: float | None = None) -> dict[str, Any]:
        """Reward and memory metrics of the episode so far (``rftlab.rewards.spectrum.episode_metrics``)."""
        kwargs = {} if tau is None else {"tau": tau}
        m = episode_metrics(self.records, **kwargs)
        m.update(
            band_seed=self.band_seed,
            salt=self.salt,
            channels_drawn=self.layout.drawn,
            channels_placed=self.layout.placed,
            notepad_writes=sum(r["notepad_writes"] for r in self.records),
            notepad_reads=sum(r["notepad_reads"] for r in self.records),
        )
        return m


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
