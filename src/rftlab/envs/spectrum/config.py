"""The BSM-RFT episode configuration (``SpectrumRFTConfig``) and its SHA-256."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from rftlab.envs.spectrum.actions import MAX_REPORT
from rftlab.envs.spectrum.generator import GeneratorParams
from rftlab.envs.spectrum.layout import NUM_SCANS, RFT_BAND, RFT_PARAMS

NOTEPAD_MAX_CHARS = 2000
MAX_CALLS_PER_SCAN = 6

IMPLEMENTATION_FIELDS: tuple[str, ...] = ("render",)
"""Config fields that change how an episode is computed, never what it is (kept out of the hash and rows)."""
LEGACY_IMPLEMENTATION_FIELDS: tuple[str, ...] = ("scorer",)

MemoryChannel = Literal["none", "echo", "scrambled", "notepad"]
MEMORY_CHANNELS: tuple[str, ...] = ("none", "echo", "scrambled", "notepad")


@dataclass(frozen=True)
class SpectrumRFTConfig:
    """Episode options of the RFT env. JSON-serialisable (``to_dict``).

    ``render`` is an implementation setting, not an experiment setting: it decides whether prompt text and
    a transcript are built, never what the episode is (same bands, scores and metrics either way). It is
    therefore left out of ``experiment_dict()``, the ``sha256()`` and dataset rows, so two configs that
    produce the same episodes hash the same. (The occupied-IoU scorer used to be a ``scorer`` option; there
    is one scorer now, and ``from_dict`` ignores a legacy ``scorer`` key.)"""

    memory: MemoryChannel = "echo"
    window: bool = True  # ICL-off: the model input is [system] + the current scan's messages
    delivery: Literal["user", "tool"] = "user"  # turn processor (user messages) or McpGym (tool results)
    show_scores: bool = (
        False  # show the previous scan's score line with the next scan (docs/spectrum.md §B.15 #2)
    )
    multi_submit: Literal["first", "upstream"] = "first"  # B.15 #4
    max_calls_per_scan: int | None = MAX_CALLS_PER_SCAN  # None = unlimited (McpGym)
    max_total_calls: int | None = None  # McpGym caps the episode at 80 steps
    num_scans: int = NUM_SCANS
    band_width: float = RFT_BAND
    max_report: int = MAX_REPORT
    notepad_max_chars: int = NOTEPAD_MAX_CHARS
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
        if self.params.band_width != self.band_width:
            raise ValueError("params.band_width must equal band_width")

    @property
    def echo(self) -> bool:
        return self.memory in ("echo", "scrambled")

    def to_dict(self) -> dict[str, Any]:
        """Every field (implementation settings included), for ``from_dict``."""
        return asdict(self)

    def experiment_dict(self) -> dict[str, Any]:
        """The fields that decide the episodes (``to_dict`` without ``IMPLEMENTATION_FIELDS``): what dataset
        rows record and what ``sha256`` hashes."""
        d = self.to_dict()
        for name in IMPLEMENTATION_FIELDS:
            d.pop(name, None)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpectrumRFTConfig:
        """Inverse of ``to_dict`` (e.g. from a dataset row's ``environment_context.config``)."""
        d = dict(data)
        if isinstance(d.get("params"), Mapping):
            d["params"] = GeneratorParams(**d["params"])
        for legacy in LEGACY_IMPLEMENTATION_FIELDS:
            d.pop(legacy, None)
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown SpectrumRFTConfig field(s): {', '.join(sorted(unknown))}")
        return cls(**d)

    def sha256(self) -> str:
        """SHA-256 of the canonical JSON of ``experiment_dict()`` (implementation settings excluded)."""
        canon = json.dumps(self.experiment_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()

    def tool_names(self) -> list[str]:
        return (
            ["notepad_read", "notepad_write", "submit_report"]
            if self.memory == "notepad"
            else ["submit_report"]
        )
