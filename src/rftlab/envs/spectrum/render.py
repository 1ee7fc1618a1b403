"""Rendering of spectrum prompts: brief, instructions, the instance block and feedback (docs/spectrum.md §A.6, B.5).

Formats (labels, layout, number formatting, ids) are reproduced exactly. Prose (brief sentences,
instructions) is the project's own wording by default (``PROJECT_TEXT``); ``load_upstream_text(folder)``
is the explicit upstream-text mode that reads CLBench's prose from a folder laid out like
``data/clbench/`` (``upstream_text.json`` + ``templates/``), used for exact replay and prompt-hash tests.

Cached: ``timestamp_utc`` (``functools.lru_cache``, 1024 entries): a scan index's timestamp string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

BRIEF_RULE = "=" * 23
TIMESTAMP_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
SCAN_INTERVAL = timedelta(minutes=5)

# The structured-output schema example that ends the instructions (a format, identical in both modes).
SCHEMA_EXAMPLE = (
    "```json\n"
    "{\n"
    '  "transmitters": [\n'
    '    {"center_freq": "<float>", "bandwidth": "<float>", "currently_active": "<boolean>", '
    '"estimated_power": "<float>"}\n'
    "  ]\n"
    "}\n"
    "```"
)


@dataclass(frozen=True)
class Brief:
    objective: str
    instance_unit: str
    reward_definition: str
    completion_definition: str
    constraints: tuple[str, ...]

    def render(self) -> str:
        lines = [
            "=== Brief ===",
            f"Objective: {self.objective}",
            f"Task Unit: {self.instance_unit}",
            f"Reward: {self.reward_definition}",
            f"Completion: {self.completion_definition}",
            "Constraints:",
            *(f"- {c}" for c in self.constraints),
            BRIEF_RULE,
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class SpectrumText:
    """All prose the spectrum envs show. ``source`` says where it came from (``"project"`` or a folder)."""

    brief: Brief
    instructions: str  # BSM-official instructions (the task template's rendered text)
    rft_instruction: str  # BSM-RFT one-sentence neutral instruction (replaces the instructions)
    # BSM-RFT env-authored sentences: the note after the ``[[SCAN_BOUNDARY]]`` token, per memory channel;
    # the instruction line closing the running-list echo; the notepad_read result for an empty notepad.
    rft_marker_notes: Mapping[str, str] = field(default_factory=dict)
    rft_echo_instruction: str = ""
    rft_notepad_empty: str = ""
    source: str = "project"
    rft_instruction_source: str = "project"

    def with_instructions(self, instructions: str) -> SpectrumText:
        """A copy with other instruction text (e.g. the trace-era revision extracted from a trace)."""
        return replace(self, instructions=instructions)


PROJECT_TEXT = SpectrumText(
    brief=Brief(
        objective=(
            "Keep an accurate picture, scan after scan, of which parts of the band are free over the long "
            "run by reporting the transmitters that persistently occupy it."
        ),
        instance_unit="A single report of occupying transmitters.",
        reward_definition=(
            "Each scan is scored by the IoU between the band's true long-run free spectrum and the free "
            "spectrum left over once your reported transmitters are removed."
        ),
        completion_definition="The instance ends when you have submitted one report for the current scan.",
        constraints=(
            "Answer in the structured transmitter report format.",
            "Carry what you learn about persistent transmitters and free gaps from scan to scan.",
        ),
    ),
    instructions=(
        "You analyse a radio band for a spectrum-monitoring service. Several transmitter channels share\n"
        "the band. Every scan, an automatic detector gives you the peaks it found, each with:\n"
        "- freq_mhz: estimated centre frequency\n"
        "- power_dbm: estimated power\n"
        "- width_mhz: estimated width\n"
        "\n"
        "You are not told how many transmitters there are. A transmitter can be silent in one scan and\n"
        "come back in a later one. What matters is the persistent set: build and keep a long-run map of\n"
        "the regions transmitters occupy, i.e. the spectrum a downstream user must avoid. A channel that\n"
        "is quiet right now is not free if earlier scans showed it in use.\n"
        "\n"
        "List every transmitter you believe is in the band, including silent ones supported by what you\n"
        "saw before; treat the current peaks as evidence, not as the whole answer. Calling a region free\n"
        "when it is occupied costs as much as calling it occupied when it is free.\n"
        "\n"
        "Always include the transmitters field. Report each believable transmitter peak of the current\n"
        "scan unless you have a concrete reason to think it is interference or noise. Send an empty list\n"
        "only if nothing credible points to a transmitter.\n"
        "\n"
        "Your report must be a JSON object of exactly this shape:\n" + SCHEMA_EXAMPLE
    ),
    rft_instruction=(
        "A new monitoring session starts now: the set of transmitters in this band stays the same for the "
        "whole session but is not given to you; work it out from the scans below."
    ),
    rft_marker_notes={
        "echo": "New scan. Earlier scans are no longer shown; the RUNNING LIST below this scan is all that "
        "remains of them.",
        "scrambled": "New scan. Earlier scans are no longer shown; the RUNNING LIST below this scan is all "
        "that remains of them.",
        "notepad": "New scan. Earlier scans are no longer shown; all that remains of them is what you saved "
        "in your notepad (use notepad_read).",
        "none": "New scan. Earlier scans are no longer shown.",
    },
    rft_echo_instruction=(
        "Carry all of these over, add any new peaks from this scan, and submit the complete updated list."
    ),
    rft_notepad_empty="(the notepad is empty: nothing has been written to it yet)",
)


def _jinja_env(folder: Path):
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    return Environment(
        loader=FileSystemLoader(str(folder)),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=False,
        keep_trailing_newline=False,
    )


def load_upstream_text(folder: str | Path) -> SpectrumText:
    """Upstream-text mode: read CLBench's BSM prose from a folder laid out like ``data/clbench/``.

    ``upstream_text.json`` supplies the brief and ``templates_dir``; ``task.j2`` there is rendered as the
    instructions. The RFT texts come from an optional ``blind_spectrum_monitoring.rft`` object
    (``instruction``, ``marker_notes`` {channel: sentence}, ``echo_instruction``, ``notepad_empty``) or, for
    the instruction, ``<templates_dir>_rft/task.j2``; whatever the folder lacks keeps the project wording
    (``rft_instruction_source == "project"``)."""
    folder = Path(folder)
    meta_path = folder / "upstream_text.json"
    if not meta_path.is_file():
        raise FileNotFoundError(
            f"upstream-text mode needs {meta_path} (a folder laid out like ../shared/data/clbench)"
        )
    meta = json.loads(meta_path.read_text())
    bsm = meta["blind_spectrum_monitoring"]
    b = bsm["brief"]
    brief = Brief(
        objective=b["objective"],
        instance_unit=b["instance_unit"],
        reward_definition=b["reward_definition"],
        completion_definition=b["completion_definition"],
        constraints=tuple(b["constraints"]),
    )
    tdir = folder / bsm.get("templates_dir", "templates/blind_spectrum_monitoring")
    instructions = _jinja_env(tdir).get_template("task.j2").render()
    rft_extra = bsm.get("rft") or {}
    rft = rft_extra.get("instruction")
    rft_source = str(meta_path) if rft else "project"
    rft_tdir = tdir.with_name(tdir.name + "_rft")
    if rft is None and (rft_tdir / "task.j2").is_file():
        rft = _jinja_env(rft_tdir).get_template("task.j2").render()
        rft_source = str(rft_tdir / "task.j2")
    return SpectrumText(
        brief=brief,
        instructions=instructions,
        rft_instruction=rft if rft is not None else PROJECT_TEXT.rft_instruction,
        rft_marker_notes={**PROJECT_TEXT.rft_marker_notes, **rft_extra.get("marker_notes", {})},
        rft_echo_instruction=rft_extra.get("echo_instruction", PROJECT_TEXT.rft_echo_instruction),
        rft_notepad_empty=rft_extra.get("notepad_empty", PROJECT_TEXT.rft_notepad_empty),
        source=str(folder),
        rft_instruction_source=rft_source,
    )


def resolve_text(text: SpectrumText | str | Path | None) -> SpectrumText:
    """``None``/``"project"`` → project wording; a path → upstream-text mode from that folder."""
    if text is None or (isinstance(text, str) and text == "project"):
        return PROJECT_TEXT
    if isinstance(text, SpectrumText):
        return text
    return load_upstream_text(text)


# ------------------------------------------------------------------------------------ formats


@lru_cache(maxsize=1024)
def timestamp_utc(scan_idx: int) -> str:
    """``2026-01-01T00:00:00Z`` + 5 min × ``scan_idx``."""
    return (TIMESTAMP_EPOCH + SCAN_INTERVAL * scan_idx).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fmt_band(x: float) -> str:
    return str(float(x))


def render_instance(
    scan: Mapping[str, Any],
    *,
    scan_num: int,
    stated_horizon: int,
    timestamp: str,
    band_start: float = 0.0,
    band_end: float = 168.0,
) -> str:
    """The instance block of one scan (A.6), exact: values via ``str()``; no trailing newline."""
    lines = [
        f"--- Scan {scan_num}/{stated_horizon} ---",
        "",
        "Scan metadata:",
        f"  scan_id: {scan['scan_id']}",
        f"  timestamp_utc: {timestamp}",
        f"  sensor_id: {scan['sensor_id']}",
        f"  detector_version: {scan['detector_version']}",
        f"  integration_time_ms: {scan['integration_time_ms']}",
        f"  estimated_noise_floor_dbm: {scan['estimated_noise_floor_dbm']}",
        "",
        "Detected peaks:",
    ]
    peaks: Sequence[Mapping[str, Any]] = scan["detected_peaks"]
    for p in peaks:
        lines.append(
            f"  - peak_id: {p['peak_id']} | freq: {p['freq_mhz']} MHz | power: {p['power_dbm']} dBm"
            f" | width: {p['width_mhz']} MHz"
        )
    if not peaks:
        lines.append("  (no peaks detected)")
    lines += [f"Band: {_fmt_band(band_start)}-{_fmt_band(band_end)} MHz", "", "Submit your report."]
    return "\n".join(lines)


def compose_prompt(brief: str | None, instructions: str | None, instance: str) -> str:
    """``brief + "\\n\\n" + instructions + "\\n\\n" + instance`` when instructions are shown, else the
    instance alone."""
    if instructions is None:
        return instance
    return f"{brief}\n\n{instructions}\n\n{instance}"


def render_feedback(scan_num: int, *, last: bool, probe_mode: bool = False) -> str:
    """Feedback after a report (A.6)."""
    if probe_mode:
        return f"Scan {scan_num}: report recorded."
    text = f"Scan {scan_num} recorded."
    return text + "\n\nAll scans completed!" if last else text


TIMEOUT_FEEDBACK = "Response timed out. Scored 0 for this scan. Moving on."
