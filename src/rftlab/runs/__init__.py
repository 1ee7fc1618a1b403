"""Run store: ``runs/<experiment>/<arm>/<run_id>/`` folders with atomic writes and spec hashing."""

from rftlab.runs.atomic import (
    atomic_directory,
    atomic_write_bytes,
    atomic_write_text,
    atomic_writer,
    check_output_path,
    clean_temporaries,
    find_temporaries,
)
from rftlab.runs.errors import (
    CorruptRunError,
    FinishedRunError,
    OutputPathError,
    RunStoreError,
    SecretLeakError,
)
from rftlab.runs.hashing import canonical_json, file_sha256, spec_sha256
from rftlab.runs.locks import RunBusyError
from rftlab.runs.secrets import assert_no_secrets, redact_text
from rftlab.runs.store import Run, RunRecord, RunStore, collect_metrics, load_metrics, load_run

__all__ = [
    "CorruptRunError",
    "FinishedRunError",
    "OutputPathError",
    "Run",
    "RunBusyError",
    "RunRecord",
    "RunStore",
    "RunStoreError",
    "SecretLeakError",
    "assert_no_secrets",
    "atomic_directory",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_writer",
    "canonical_json",
    "check_output_path",
    "clean_temporaries",
    "collect_metrics",
    "file_sha256",
    "find_temporaries",
    "load_metrics",
    "load_run",
    "redact_text",
    "spec_sha256",
]
