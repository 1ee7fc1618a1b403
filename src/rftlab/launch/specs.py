"""Spec files shared by every family: validated loading (``load_spec_file``) and the Fireworks job settings.

A spec holds everything that decides the experiment's outcome on every backend, plus the settings only
the Fireworks job uses (``FireworksJobSettings``). Its SHA-256 (canonical JSON) is what the run store keys
reuse on; a changed spec is a new spec. Implementation settings (which scorer, whether prompts are
rendered, progress bars) are never part of a spec. Each family's spec model lives in
``rftlab.launch.<family>.spec``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SpecT = TypeVar("SpecT", bound=BaseModel)


class FireworksJobSettings(BaseModel):
    """Settings of ``firectl create reinforcement-fine-tuning-job`` that have no local meaning."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_model: str = "accounts/fireworks/models/qwen3-1p7b"
    dataset_id: str = Field(description="Fireworks dataset id the rows are uploaded to")
    evaluator: str = Field(description="evaluator resource, accounts/<acct>/evaluators/<id>")
    output_model: str = Field(description="name of the fine-tuned model the job creates")
    interface: Literal["turn", "mcp"] = "turn"  # custom turn processor (user messages) or McpGym
    max_output_tokens: int = Field(4096, ge=1)
    max_concurrent_rollouts: int = Field(96, ge=1)
    lora_rank: int | None = Field(None, ge=1)
    wandb_project: str | None = None
    wandb_entity: str | None = None


def load_spec_file(path: str | Path, model: type[SpecT]) -> SpecT:
    """Read and validate a spec file as ``model``; raises ``ValueError`` naming the file and the bad field."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{p}: no such spec file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{p}: cannot read spec file ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: a spec file holds one JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise ValueError(f"{p}: field {where}: {first['msg']}") from None
