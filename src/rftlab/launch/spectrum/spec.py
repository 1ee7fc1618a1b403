"""Arm specs of the spectrum-memory study: one JSON file per arm under ``data/specs/``.

A spec holds everything that decides the experiment's outcome on every backend (prompt variant, memory
channel, sizes, optimiser settings, seed) plus the settings only the Fireworks job uses (``fireworks``).
Its SHA-256 (``sha256()``, canonical JSON of ``to_dict()``) is what the run store keys reuse on; a
changed spec is a new spec. Implementation settings (which occupied-IoU scorer, whether prompts are
rendered, progress bars) are not part of a spec.

    spec = load_arm_spec("data/specs/spectrum_C.json")
    spec.arm, spec.prompt, spec.memory, spec.learning_rate
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rftlab.launch.specs import (
    NAME,
    SPEC_CONFIG,
    FireworksJobSettings,
    SpecBool,
    SpecFloat,
    SpecInt,
    drop_unset_job_fields,
    load_spec_file,
)
from rftlab.runs.hashing import spec_sha256


class SpectrumArmSpec(BaseModel):
    """One arm of the spectrum-memory study (docs/spectrum.md §B.10 arms, plus D: agent-managed notepad).
    Every field is validated here (``rftlab.launch.specs``: strict integers, finite numbers, names by the
    run store's rule, argv-safe strings)."""

    model_config = SPEC_CONFIG

    experiment: Literal["spectrum_memory"] = "spectrum_memory"
    arm: str = Field(pattern=NAME)
    description: str = Field("", max_length=4000)
    # --- the task
    prompt: Literal["explicit", "weak"]
    memory: Literal["none", "echo", "scrambled", "notepad"]
    rows: SpecInt = Field(48, ge=1, le=100_000)
    row_prefix: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")  # None: the default
    num_scans: SpecInt = Field(12, ge=2, le=200)
    epoch_salt: SpecBool = True  # fresh bands every epoch
    notepad_write_cost: SpecFloat = Field(0.0, ge=0.0, le=10.0)  # arm D: reward cost per notepad write
    # --- GRPO
    epochs: SpecInt = Field(12, ge=1, le=1000)
    response_candidates: SpecInt = Field(12, ge=2, le=256)
    learning_rate: SpecFloat = Field(1e-4, ge=0.0, lt=1.0)
    temperature: SpecFloat = Field(1.2, gt=0.0, le=10.0)
    advantage: Literal["grpo", "mean_only"] = "grpo"  # group-normalised, or cookbook-style r - mean
    seed: SpecInt = Field(0, ge=0, le=2**31 - 1)
    # --- Fireworks-only settings (None: the arm is local-only)
    fireworks: FireworksJobSettings | None = None
    # --- where the arm runs when no backend is named (None: "local", the simulated policy)
    backend: Literal["local", "fireworks", "tinker"] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON data; ``backend`` and the optional job settings (``rftlab.launch.specs``) only
        when set, so a spec without them keeps the hash it had before those fields existed."""
        data = drop_unset_job_fields(self.model_dump(mode="json"))
        if data.get("backend") is None:
            data.pop("backend", None)
        return data

    def sha256(self) -> str:
        return spec_sha256(self.to_dict())


def load_arm_spec(path: str | Path) -> SpectrumArmSpec:
    """Read and validate a spectrum arm spec file (``data/specs/spectrum_*.json``)."""
    return load_spec_file(path, SpectrumArmSpec)
