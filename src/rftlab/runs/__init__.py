"""Run store: ``runs/<experiment>/<arm>/<run_id>/`` folders with atomic writes and spec hashing."""

from rftlab.runs.hashing import canonical_json, file_sha256, spec_sha256
from rftlab.runs.store import (
    CorruptRunError,
    FinishedRunError,
    Run,
    RunRecord,
    RunStore,
    RunStoreError,
    load_metrics,
    load_run,
)

__all__ = [
    "CorruptRunError",
    "FinishedRunError",
    "Run",
    "RunRecord",
    "RunStore",
    "RunStoreError",
    "canonical_json",
    "file_sha256",
    "load_metrics",
    "load_run",
    "spec_sha256",
]
