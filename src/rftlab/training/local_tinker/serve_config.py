"""The configuration of ``rftlab serve tinker`` (``ServeConfig``), its checks (``check_config``) and the
error that stops a server from starting as configured (``ServeError``); see ``server``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PORT = 8777


class ServeError(RuntimeError):
    """The server cannot start as configured (the message says why)."""


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    model_dirs: Sequence[str] = ()
    device: str = "cpu"
    storage: str | os.PathLike[str] | None = None
    api_key_env: str = "TINKER_API_KEY"
    api_keys: Sequence[str] = ()
    keys_file: str | os.PathLike[str] | None = None
    sampler_dtype: str | None = None
    sampled_logprobs: str = "model"
    log_level: str = "info"
    session_timeout_s: float | None = None
    long_poll_s: float | None = None
    num_threads: int | None = 1
    stop_after_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def default_storage() -> Path:
    """Where checkpoints go when ``--storage`` is not given: beside the project's run store."""
    from rftlab.runs.paths import PROJECT_ROOT

    return PROJECT_ROOT / ".runs_local_tinker" / "service"


MAX_SECONDS = 10 * 365 * 24 * 3600.0
"""The longest ``--session-timeout`` / ``--stop-after`` (ten years; a timer of ``inf`` cannot be armed)."""


def check_config(config: ServeConfig) -> None:
    """Refuse a configuration whose numbers the server cannot honour (a ``ServeError`` naming the flag)."""
    if not 0 <= config.port <= 65535:
        raise ServeError(f"--port must be between 0 and 65535, got {config.port}")
    for flag, value in (
        ("--session-timeout", config.session_timeout_s),
        ("--stop-after", config.stop_after_s),
        ("long_poll_s", config.long_poll_s),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ServeError(f"{flag} must be a finite number of seconds, got {value!r}")
        if not 0 < value <= MAX_SECONDS:
            raise ServeError(
                f"{flag} must be more than 0 and at most {MAX_SECONDS:.0f} seconds, got {value!r}"
            )


def storage_of(config: ServeConfig) -> Path:
    return Path(config.storage) if config.storage is not None else default_storage()
