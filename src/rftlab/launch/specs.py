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
from typing import Annotated, Any, Literal, Protocol, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
)

from rftlab.runs.store import NAME_PATTERN

SpecT = TypeVar("SpecT", bound=BaseModel)

# Validation shared by every family's spec (the fields are validated where they are declared):
# - ``SPEC_CONFIG``: frozen, unknown fields refused, no NaN or infinity anywhere;
# - integers are strict (``true`` is not 1 row, ``48.0`` is not 48); numbers refuse booleans and strings;
# - names (experiment, arm) follow the run store's rule (``rftlab.runs.store.NAME_PATTERN``): one path
#   component that is never hidden and never read as a flag;
# - every string that reaches firectl's argv matches a pattern that cannot start with ``-`` and holds no
#   space or shell character.
SPEC_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
SpecBool = StrictBool
SpecInt = StrictInt


def _number(value: Any) -> Any:
    if isinstance(value, bool | str):
        raise ValueError(f"expected a number, got {type(value).__name__} {value!r}")
    return value


SpecFloat = Annotated[float, BeforeValidator(_number)]
NAME = NAME_PATTERN  # experiment and arm names
FIREWORKS_ID = r"^[a-z0-9][a-z0-9-]{0,62}$"  # dataset, output model (firectl resource ids)
MODEL_RESOURCE = r"^accounts/[A-Za-z0-9][A-Za-z0-9._-]{0,62}/models/[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
EVALUATOR_RESOURCE = (
    r"^accounts/(<acct>|[A-Za-z0-9][A-Za-z0-9._-]{0,62})/evaluators/[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
)
PLAIN_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"  # W&B project and entity


class FireworksJobSettings(BaseModel):
    """Settings of ``firectl create reinforcement-fine-tuning-job`` that have no local meaning. Every
    string here reaches firectl's argv, so each matches a safe pattern."""

    model_config = SPEC_CONFIG

    base_model: str = Field("accounts/fireworks/models/qwen3-1p7b", pattern=MODEL_RESOURCE)
    dataset_id: str = Field(description="Fireworks dataset id the rows are uploaded to", pattern=FIREWORKS_ID)
    evaluator: str = Field(
        description="evaluator resource, accounts/<acct>/evaluators/<id>", pattern=EVALUATOR_RESOURCE
    )
    output_model: str = Field(
        description="name of the fine-tuned model the job creates", pattern=FIREWORKS_ID
    )
    interface: Literal["turn", "mcp"] = "turn"  # custom turn processor (user messages) or McpGym
    max_output_tokens: SpecInt = Field(4096, ge=1, le=131_072)
    max_concurrent_rollouts: SpecInt = Field(96, ge=1, le=10_000)
    lora_rank: SpecInt | None = Field(None, ge=4, le=128)  # None: JOB_DEFAULTS; a power of 2 (below)
    wandb_project: str | None = Field(None, pattern=PLAIN_NAME)
    wandb_entity: str | None = Field(None, pattern=PLAIN_NAME)
    # Explicit job settings (docs/platforms.md §1.3). ``None``: the launcher sends ``JOB_DEFAULTS`` and
    # records it; a field left unset is not written by ``to_dict``, so older spec files keep their hashes.
    max_context_length: SpecInt | None = Field(None, ge=1024, le=131_072)
    top_p: SpecFloat | None = Field(None, ge=0.0, le=1.0)
    top_k: SpecInt | None = Field(None, ge=0, le=100)  # 0 turns top-k off
    loss_method: Literal["grpo", "dapo", "gspo-token"] | None = None
    kl_beta: SpecFloat | None = Field(None, ge=0.0, le=1.0)
    chunk_size: SpecInt | None = Field(None, ge=-1, le=10_000)  # -1 turns chunking off
    batch_size: SpecInt | None = Field(None, ge=1024, le=1_048_576)  # tokens per training batch

    @field_validator("lora_rank")
    @classmethod
    def _power_of_two(cls, value: int | None) -> int | None:
        if value is not None and value & (value - 1):
            raise ValueError(
                f"lora_rank must be a power of 2 from 4 to 128 (the documented range), got {value}"
            )
        return value

    @field_validator("chunk_size")
    @classmethod
    def _chunk(cls, value: int | None) -> int | None:
        if value == 0:
            raise ValueError("chunk_size must be 1..10000, or -1 to turn chunking off; 0 is neither")
        return value


# What the launcher sends for a setting the spec leaves unset (docs/platforms.md §1.3 cites the doc version
# of each value). Changing one changes what is sent for every spec that leaves it unset: the launch plan
# changes, the spec hash does not, and a job created before the change no longer matches (launch refuses).
JOB_DEFAULTS: dict[str, Any] = {
    "lora_rank": 8,
    "max_context_length": 8192,
    "top_p": 1.0,
    "top_k": 40,
    "loss_method": "grpo",
    "kl_beta": 0.001,
    "chunk_size": 200,
    "batch_size": 32_768,
}
OPTIONAL_JOB_FIELDS = tuple(k for k in JOB_DEFAULTS if k != "lora_rank")


class FireworksArmSpec(Protocol):
    """What the Fireworks launcher reads of an arm spec: every family's spec with a ``fireworks`` section
    (``SpectrumArmSpec``, ``PokerArmSpec``). Read-only, so a frozen model's narrower field types fit."""

    @property
    def experiment(self) -> str: ...
    @property
    def arm(self) -> str: ...
    @property
    def epochs(self) -> int: ...
    @property
    def learning_rate(self) -> float: ...
    @property
    def temperature(self) -> float: ...
    @property
    def response_candidates(self) -> int: ...
    @property
    def fireworks(self) -> FireworksJobSettings | None: ...
    def to_dict(self) -> dict[str, Any]: ...
    def sha256(self) -> str: ...


def resolved_job_settings(fw: FireworksJobSettings) -> dict[str, Any]:
    """Every explicit job setting of ``fw``: the spec's value, else ``JOB_DEFAULTS``."""
    return {
        name: default if getattr(fw, name) is None else getattr(fw, name)
        for name, default in JOB_DEFAULTS.items()
    }


def drop_unset_job_fields(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a spec's JSON) without the optional job settings its ``fireworks`` section leaves unset,
    so a spec file written before those fields existed keeps its SHA-256."""
    fw = data.get("fireworks")
    if isinstance(fw, dict):
        for name in OPTIONAL_JOB_FIELDS:
            if fw.get(name) is None:
                fw.pop(name, None)
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_spec_file(path: str | Path, model: type[SpecT]) -> SpecT:
    """Read and validate a spec file as ``model``; raises ``ValueError`` naming the file and the bad field."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except FileNotFoundError:
        raise ValueError(f"{p}: no such spec file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{p}: cannot read spec file ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # NaN/Infinity, a 5000-digit number, absurd nesting
        raise ValueError(f"{p}: not a valid spec file ({str(exc)[:200] or type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: a spec file holds one JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        shown = repr(first.get("input"))
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        got = f" (got {shown})" if "input" in first and not isinstance(first.get("input"), dict) else ""
        raise ValueError(f"{p}: field {where}: {first['msg']}{got}") from None
