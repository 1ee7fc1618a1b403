"""Settings of the ``@evaluation_test`` entry modules, read from the environment at import time (the
decorator's arguments are evaluated when pytest imports the module).

| variable | default | meaning |
|---|---|---|
| ``RFTLAB_EP_MODEL`` | unset: no ``model`` (the platform injects the job's) | ``completion_params["model"]`` (litellm id; ``openai/<policy>`` for the local server) |
| ``RFTLAB_EP_BASE_URL`` | unset | ``completion_params["base_url"]`` (an OpenAI-compatible endpoint) |
| ``RFTLAB_EP_TEMPERATURE`` / ``RFTLAB_EP_MAX_TOKENS`` | 1.2 / 4096 | sampling (B.9) |
| ``RFTLAB_EP_CONCURRENCY`` | 8 | ``max_concurrent_rollouts`` |
| ``RFTLAB_SPECTRUM_ROWS`` | 48 | rows ``<prefix>_0 .. <prefix>_{n-1}`` |
| ``RFTLAB_SPECTRUM_PROMPT`` / ``RFTLAB_SPECTRUM_MEMORY`` | explicit / echo (turn), notepad (mcp) | arm (B.10) |
| ``RFTLAB_SPECTRUM_THINK`` | 1 | 0 appends ``/no_think`` to the system prompt |
| ``RFTLAB_SPECTRUM_PREFIX`` | the arm's default (``sc1`` ...) | row-id prefix |

Keys never go into completion parameters (docs/platforms.md G12): litellm reads ``OPENAI_API_KEY`` /
``FIREWORKS_API_KEY`` from the environment itself. eval-protocol's own ``--ep-completion-params`` and
``--ep-max-rows`` still override these.
"""

from __future__ import annotations

import math
import os
from typing import Any

from rftlab.envs.spectrum.rft import SpectrumRFTConfig
from rftlab.rollout.spectrum.dataset import dataset_rows

# Upper bounds of the integer settings: beyond them a value is a typo, not a plan (100,000 rows is the
# arm specs' own limit; rows are built in memory at import).
MAXIMA = {
    "RFTLAB_SPECTRUM_ROWS": 100_000,
    "RFTLAB_POKER_ROWS": 100_000,
    "RFTLAB_EP_MAX_TOKENS": 131_072,
    "RFTLAB_EP_CONCURRENCY": 1024,
}


def _int(name: str, default: int, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    top = maximum or MAXIMA.get(name, 1_000_000)
    text = raw.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 9):
        raise ValueError(f"{name} must be an integer from 1 to {top}, got {raw[:40]!r}")
    value = int(text)
    if not 1 <= value <= top:
        raise ValueError(f"{name} must be an integer from 1 to {top}, got {value}")
    return value


def _float(name: str, default: float, low: float = 0.0, high: float = 10.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw[:40]!r}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} must be a finite number from {low:g} to {high:g}, got {raw[:40]!r}")
    return value


def completion_params() -> dict[str, Any]:
    """The entries' completion parameters. ``model`` only when ``RFTLAB_EP_MODEL`` names one: an uploaded
    evaluator gets the job's model from the platform (Fireworks' own examples leave it out), and a local run
    names its model (``openai/<policy>`` for the local policy server) or passes ``--ep-completion-params``."""
    params: dict[str, Any] = {
        "temperature": _float("RFTLAB_EP_TEMPERATURE", 1.2),
        "max_tokens": _int("RFTLAB_EP_MAX_TOKENS", 4096),
    }
    model = os.environ.get("RFTLAB_EP_MODEL")
    if model:
        params["model"] = model
    base_url = os.environ.get("RFTLAB_EP_BASE_URL")
    if base_url:
        params["base_url"] = base_url
    return params


def concurrency() -> int:
    return _int("RFTLAB_EP_CONCURRENCY", 8)


def arm(default_memory: str) -> dict[str, Any]:
    return {
        "n": _int("RFTLAB_SPECTRUM_ROWS", 48),
        "prompt": os.environ.get("RFTLAB_SPECTRUM_PROMPT") or "explicit",
        "memory": os.environ.get("RFTLAB_SPECTRUM_MEMORY") or default_memory,
        "think": os.environ.get("RFTLAB_SPECTRUM_THINK", "1") != "0",
        "prefix": os.environ.get("RFTLAB_SPECTRUM_PREFIX") or None,
    }


def evaluation_rows(default_memory: str, config: SpectrumRFTConfig | None = None) -> list[Any]:
    """The arm's rows as eval-protocol ``EvaluationRow`` objects."""
    from eval_protocol.models import EvaluationRow

    a = arm(default_memory)
    rows = dataset_rows(
        a["n"], prompt=a["prompt"], memory=a["memory"], prefix=a["prefix"], think=a["think"], config=config
    )
    return [EvaluationRow(**r) for r in rows]
