"""Training rows for the spectrum RFT arms in eval-protocol's row format (docs/spectrum.md §B.10).

One row per ``row_id``: a system prompt chosen by prompt variant (``explicit`` / ``weak``) and memory
channel (``none`` / ``echo`` / ``scrambled`` / ``notepad``); the band itself comes from the env
(``band_seed(row_id, epoch salt)``), so rows carry no scan data. Prompts are the project's own wording.

The explicit/weak difference is exactly the key-fact paragraph plus the keep/add/submit-everything
instruction; the echo block's own carry-over line is env text and appears in both.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.envs.spectrum.rft import CH_BW, MAX_REPORT, MEMORY_CHANNELS, NOTEPAD_MAX_CHARS, SpectrumRFTConfig

PROMPT_VARIANTS = ("explicit", "weak")

_INTRO = (
    "You are watching a single radio band for a spectrum-monitoring service. The band is observed in a "
    "series of scans that arrive one at a time; each scan lists the peaks a noisy detector found "
    "(frequency, power, width)."
)
_KEY_FACT = (
    "Key fact: a transmitter that is silent in a scan has not left. Only a few transmitters are active "
    "in any scan; the others are dormant but still occupy their part of the band and usually come back "
    "later. Your report is compared with the band's true occupied spectrum, dormant transmitters "
    "included, so it must contain every transmitter you have seen so far, not only the peaks of the "
    "current scan."
)
_SUBMIT = (
    f"Answer each scan by calling submit_report(center_freqs) with the centre frequencies in MHz "
    f"(every region is {CH_BW:g} MHz wide; at most {MAX_REPORT} regions count)."
)
_SCORING = "Each report is scored by how closely your regions match the band's true occupied spectrum."
_BRIEF = "Keep your reasoning short: a sentence or two, then call the tool."

_MEMORY = {
    ("none", "explicit"): (
        "Earlier scans are not shown again and you have no memory aid, so report every transmitter you "
        "can infer from what is in front of you."
    ),
    ("none", "weak"): "Earlier scans are not shown again.",
    ("echo", "explicit"): (
        "Earlier scans are not shown again. To help, every scan comes with YOUR RUNNING LIST: the report "
        "you submitted for the previous scan. Keep everything on it, add any new peaks from the current "
        "scan, and submit the complete updated list."
    ),
    ("echo", "weak"): (
        "Earlier scans are not shown again. Every scan comes with YOUR RUNNING LIST: the report you "
        "submitted for the previous scan."
    ),
    ("notepad", "explicit"): (
        "Earlier scans are not shown again; your notepad is the only thing that carries over. Tools:\n"
        "  - notepad_read(): show the notepad.\n"
        f"  - notepad_write(text): replace the notepad with text (up to {NOTEPAD_MAX_CHARS} characters).\n"
        "  - submit_report(center_freqs): send the report for the current scan and receive the next one.\n\n"
        "Follow the same routine at every scan: (1) notepad_read to get the transmitters found so far; "
        "(2) add the new peaks of this scan to that list; (3) notepad_write the whole updated list; "
        "(4) submit_report with the whole list, dormant and active transmitters alike. Keep the notepad "
        "as a plain comma-separated list of centre frequencies."
    ),
    ("notepad", "weak"): (
        "Earlier scans are not shown again; your notepad is the only thing that carries over. Tools:\n"
        "  - notepad_read(): show the notepad.\n"
        f"  - notepad_write(text): replace the notepad with text (up to {NOTEPAD_MAX_CHARS} characters).\n"
        "  - submit_report(center_freqs): send the report for the current scan and receive the next one.\n\n"
        "It is up to you what, if anything, to keep in the notepad."
    ),
}

_FEWSHOT = (
    "Illustration (an invented band; follow the method, not the numbers):\n"
    "  scan 1 shows peaks near 30, 95, 150 -> report 30, 95, 150\n"
    "  scan 2 shows peaks near 30, 120 (95 and 150 are silent) -> report 30, 95, 120, 150\n"
    "  scan 3 shows peaks near 95, 170 -> report 30, 95, 120, 150, 170\n"
    "The report only grows: a transmitter stays on it once seen."
)


def system_prompt(prompt: str, memory: str, *, think: bool = True, fewshot: bool = False) -> str:
    """The system prompt of an arm. ``think=False`` appends `` /no_think`` (Qwen3 thinking off)."""
    if prompt not in PROMPT_VARIANTS:
        raise ValueError(f"prompt must be one of {PROMPT_VARIANTS}, got {prompt!r}")
    if memory not in MEMORY_CHANNELS:
        raise ValueError(f"memory must be one of {MEMORY_CHANNELS}, got {memory!r}")
    channel = "echo" if memory == "scrambled" else memory  # the control arm sees the same instructions
    paragraphs = [_INTRO]
    if prompt == "explicit":
        paragraphs.append(_KEY_FACT)
    paragraphs.append(_SUBMIT + " " + _SCORING)
    paragraphs.append(_MEMORY[(channel, prompt)])
    if fewshot:
        paragraphs.append(_FEWSHOT)
    paragraphs.append(_BRIEF)
    text = "\n\n".join(paragraphs)
    return text if think else text + " /no_think"


def default_prefix(prompt: str, memory: str) -> str:
    """Row-id namespace per arm: ``spectrum`` (notepad), ``sc1``/``sc2`` (running list, explicit/weak;
    the scrambled control shares its prompt's rows), ``nm1``/``nm2`` (no memory). A new prefix = bands
    never used before."""
    if memory == "notepad":
        return "spectrum"
    k = "1" if prompt == "explicit" else "2"
    return ("nm" if memory == "none" else "sc") + k


def dataset_rows(
    n: int,
    *,
    prompt: str = "explicit",
    memory: str = "echo",
    prefix: str | None = None,
    think: bool = True,
    fewshot: bool = False,
    config: SpectrumRFTConfig | None = None,
    epoch_salt: bool = False,
) -> Iterator[dict[str, Any]]:
    """``n`` eval-protocol rows (``messages`` + ``input_metadata``). The env configuration of the arm is
    recorded in ``dataset_info.environment_context`` so a rollout processor can rebuild the env
    (``SpectrumRFTConfig.from_dict``); only the experiment fields are recorded (``experiment_dict``:
    implementation settings such as ``render`` are the processor's choice). ``epoch_salt=True`` (an arm
    spec's ``epoch_salt``) adds ``"epoch_salt": true``: the processor then draws fresh bands each epoch
    (docs/spectrum.md §B.2), as an uploaded evaluator receives no environment variables."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    sys_prompt = system_prompt(prompt, memory, think=think, fewshot=fewshot)
    cfg = config or SpectrumRFTConfig(memory=memory)  # type: ignore[arg-type]
    if cfg.memory != memory:
        raise ValueError(f"config.memory {cfg.memory!r} does not match memory {memory!r}")
    pre = prefix if prefix is not None else default_prefix(prompt, memory)
    env_context = {"env": "spectrum_rft", "prompt": prompt, "memory": memory, "config": cfg.experiment_dict()}
    if epoch_salt:
        env_context["epoch_salt"] = True
    for i in range(n):
        yield {
            "messages": [{"role": "system", "content": sys_prompt}],
            "input_metadata": {
                "row_id": f"{pre}_{i}",
                "dataset_info": {"user_prompt_template": "{observation}", "environment_context": env_context},
            },
        }


def dataset_jsonl(rows: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


@dataclass(frozen=True)
class DatasetEstimate:
    """The disk a dataset needs, against the free space of the folder it goes to."""

    needed_bytes: int
    """the first row's bytes times the number of rows"""
    free_bytes: int

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.free_bytes


def dataset_estimate(first_line: bytes, rows: int, folder: str | Path) -> DatasetEstimate:
    """The size of ``rows`` rows as long as ``first_line``, against the free space of ``folder``."""
    return DatasetEstimate(len(first_line) * rows, shutil.disk_usage(folder).free)
