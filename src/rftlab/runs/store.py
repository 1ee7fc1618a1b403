"""The run store: one folder per run, atomic writes, immutable once finished.

Layout::

    runs/<experiment>/<arm>/<run_id>/
        run.json                  RunRecord: ids, backend, spec + SHA-256, git state, inputs, provider ids, status
        metrics.jsonl             one row per step/epoch, {"step", "epoch", <metric>: value, ...}
        rollouts/epoch-<k>.jsonl  per-rollout records
        eval.jsonl                per-item evaluation outcomes
        provider/                 raw provider snapshots (job JSON, downloaded datasets)

Every file is written through :mod:`rftlab.runs.atomic` (a unique temporary in the same folder, renamed
into place; new files get ``0o666 & ~umask``), so a reader sees either the old or the new content, never
half of it, and through :mod:`rftlab.runs.secrets` (no credential from the environment reaches the disk). A finished (or failed) run refuses further writes; running a spec
whose hash matches a finished run reuses that run unless ``force=True``.

Readers are strict and total: any bytes in a run file give rows or a :class:`CorruptRunError` naming the
file and line (never a ``UnicodeDecodeError``, ``RecursionError`` or NaN). ``metrics.jsonl`` rows need an
integer ``step``, unique within the run (a duplicate is refused: a resumed run continues *after* its last
step); values must be finite (a NaN is refused naming the row and field). Appending to a metrics file
whose last line lacks its newline adds the newline first; appending to a damaged file is refused until
:meth:`Run.repair_metrics` moves the damaged lines aside (into ``metrics.damaged``, losing nothing).
Rows, once written, also go to the experiment trackers ``$RFTLAB_TRACKING`` selects
(:mod:`rftlab.runs.tracking`, from a background thread; a tracker never writes into the store).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import numbers
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from rftlab.runs import locks, tracking
from rftlab.runs.atomic import atomic_write_bytes, atomic_write_text
from rftlab.runs.errors import CorruptRunError, FinishedRunError, RunStoreError, SecretLeakError
from rftlab.runs.gitinfo import git_state
from rftlab.runs.hashing import file_sha256, spec_sha256, to_jsonable
from rftlab.runs.locks import RunBusyError
from rftlab.runs.paths import PROJECT_ROOT
from rftlab.runs.secrets import assert_no_secrets
from rftlab.runs.strictjson import refuse_constant

__all__ = [
    "CorruptRunError",
    "FinishedRunError",
    "Run",
    "NAME_PATTERN",
    "RunBusyError",
    "RunRecord",
    "RunStore",
    "RunStoreError",
    "SecretLeakError",
    "atomic_write_text",
    "collect_metrics",
    "load_metrics",
    "load_run",
    "read_jsonl",
]

RunStatus = Literal["running", "finished", "failed"]
RunOrigin = Literal["new", "reused", "resumed"]
# Experiment, arm, backend and run-id names: one path component, never hidden, never a flag.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
_NAME_RE = re.compile(NAME_PATTERN)
DAMAGED_METRICS = "metrics.damaged"
IDENTITY_COLUMNS = ("experiment", "arm", "run_id", "backend", "status")


class InputFile(BaseModel):
    path: str
    sha256: str


class RunRecord(BaseModel):
    """The content of ``run.json``."""

    run_id: str
    experiment: str
    arm: str
    backend: str
    spec: dict[str, Any]
    spec_sha256: str
    git: dict[str, Any] = Field(default_factory=dict)
    inputs: list[InputFile] = Field(default_factory=list)
    provider: dict[str, Any] = Field(default_factory=dict)
    # SHA-256 of the bytes of the analysis plan that governs the run (rftlab.runs.registration), when a
    # study launched it under one; not part of the spec or its hash. Runs made before runs recorded it
    # read as None, and the pre-registration audit treats them as not governed (docs/statistics.md §8).
    plan_sha256: str | None = None
    status: RunStatus = "running"
    created_at: str
    finished_at: str | None = None
    error: str | None = None


def _record_data(record: RunRecord) -> dict[str, Any]:
    """``run.json``'s content: ``plan_sha256`` only when a plan governs the run, so a run without one
    reads exactly as before the field existed."""
    return record.model_dump(mode="python", exclude={"plan_sha256"} if record.plan_sha256 is None else None)


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- serialising -------------------------------------------------------------------------------------
def _json_default(value: object) -> object:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _find_bad_value(value: object, path: str = "") -> tuple[str, str] | None:
    """``(field path, what is wrong)`` of the first value JSON cannot hold exactly, or ``None``."""
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return (path or "<value>", "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if value is None or isinstance(value, (str, int, bool)):
        return None
    if isinstance(value, Mapping):
        for key, inner in value.items():
            found = _find_bad_value(inner, f"{path}.{key}" if path else str(key))
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, inner in enumerate(value):
            found = _find_bad_value(inner, f"{path}[{i}]")
            if found:
                return found
        return None
    try:
        return _find_bad_value(_json_default(value), path)
    except TypeError:
        return (path or "<value>", f"a {type(value).__name__}, not JSON data")


def _dumps(value: object, where: str, indent: int | None = None) -> str:
    """Strict JSON text of ``value``; a NaN, infinity or non-JSON object raises ``ValueError`` naming
    ``where`` and the field."""
    value = to_jsonable(value)
    try:
        return json.dumps(value, allow_nan=False, default=_json_default, indent=indent)
    except (ValueError, TypeError, RecursionError) as exc:
        try:
            found = _find_bad_value(value)
        except RecursionError:  # a circular or absurdly deep structure
            found = None
        if found:
            field, what = found
            raise ValueError(
                f"{where}: field {field!r} is {what}; values must be finite JSON numbers, strings, lists "
                "or objects (use null for a missing value)"
            ) from None
        raise ValueError(f"{where}: cannot be written as JSON ({exc})") from None


def _jsonl(rows: Iterable[Mapping[str, Any]], where: str) -> str:
    return "".join(_dumps(row, f"{where} row {i}") + "\n" for i, row in enumerate(rows))


# -- reading -----------------------------------------------------------------------------------------
def _strict_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} overflows a float")
    return value


def _loads(text: str) -> Any:
    """``json.loads`` refusing NaN/Infinity and overflowing numbers (``ValueError``, incl. RecursionError)."""
    try:
        return json.loads(text, parse_constant=refuse_constant, parse_float=_strict_float)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise CorruptRunError(
            {str(path): f"cannot be read ({exc.strerror or exc}); check its permissions"}
        ) from None


def _parse_jsonl(path: Path, data: bytes) -> tuple[list[tuple[int, dict[str, Any]]], dict[int, str]]:
    """``([(line number, row)], {line number: what is wrong})`` of JSONL bytes (blank lines skipped)."""
    rows, bad = [], {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad[number] = f"line {number} is not UTF-8 (byte {exc.start + 1})"
            continue
        try:
            row = _loads(line)
        except json.JSONDecodeError as exc:
            bad[number] = f"line {number} is not JSON ({exc.msg})"
            continue
        except ValueError as exc:
            bad[number] = f"line {number} is not valid JSON ({exc})"
            continue
        if not isinstance(row, dict):
            bad[number] = f"line {number} is not a JSON object"
            continue
        rows.append((number, row))
    return rows, bad


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; any defect raises ``CorruptRunError`` naming the file and the first bad line."""
    path = Path(path)
    rows, bad = _parse_jsonl(path, _read_bytes(path))
    if bad:
        first = min(bad)
        more = f" (and {len(bad) - 1} more bad line(s))" if len(bad) > 1 else ""
        raise CorruptRunError({str(path): bad[first] + more})
    return [row for _, row in rows]


def check_no_secrets(obj: object, where: str) -> None:
    """Refuse to persist ``obj`` if its JSON holds a credential from the environment (any form)."""
    assert_no_secrets(json.dumps(to_jsonable(obj), default=str).encode("utf-8"), where)


def _metric_step(row: Mapping[str, Any], where: str) -> int:
    if "step" not in row:
        raise ValueError(f"{where}: metric row {dict(row)!r} has no 'step'")
    step = row["step"]
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise ValueError(f"{where}: 'step' must be an integer, got {step!r}")
    return int(step)


class Run:
    """A handle on one run folder."""

    def __init__(self, path: Path, record: RunRecord):
        self.path = Path(path)
        self.record = record

    def __repr__(self) -> str:
        return f"Run({self.path}, status={self.record.status})"

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def finished(self) -> bool:
        return self.record.status != "running"

    # -- writing ---------------------------------------------------------------------------------
    def _check_writable(self) -> None:
        if self.finished:
            raise FinishedRunError(f"run {self.path} is {self.record.status}; finished runs are immutable")

    def _write(self, path: Path, data: bytes) -> None:
        """Every byte of the run goes through here: credential check, then an atomic write. A symlink
        at the file's name (planted in a shared store) is replaced, never written through."""
        atomic_write_bytes(path, data, where=str(path), follow_symlinks=False)

    def _save_record(self, record: RunRecord | None = None) -> None:
        """Write ``record`` (default: the current one) and adopt it only once it is on disk, so a refused
        write (a credential, a NaN) leaves the handle as it was."""
        record = self.record if record is None else record
        where = str(self.path / "run.json")
        text = _dumps(_record_data(record), where, indent=2) + "\n"
        self._write(self.path / "run.json", text.encode("utf-8"))
        self.record = record

    def _read_metrics_for_append(self) -> tuple[bytes, dict[int, int]]:
        """The current bytes of ``metrics.jsonl`` (newline-terminated) and ``{step: line}``; a damaged file
        raises ``CorruptRunError`` (nothing is written)."""
        path = self.path / "metrics.jsonl"
        if path.is_symlink():  # its target's bytes would be copied into the run
            raise CorruptRunError(
                {str(path): "is a symlink; the run store never appends through one (remove it)"}
            )
        try:
            data = _read_bytes(path)
        except FileNotFoundError:
            return b"", {}
        rows, bad = _parse_jsonl(path, data)
        if bad:
            first = min(bad)
            raise CorruptRunError(
                {
                    str(path): f"{bad[first]}; append refused, nothing was written. Move the damaged "
                    f"line(s) aside with Run.repair_metrics() (kept in {DAMAGED_METRICS}) and retry"
                }
            )
        steps: dict[int, int] = {}
        for number, row in rows:
            step = row.get("step")
            if isinstance(step, int) and not isinstance(step, bool):
                steps.setdefault(step, number)
        if data and not data.endswith(b"\n"):
            data += b"\n"  # the last row lacks its newline: never glue the next row onto it
        return data, steps

    def append_metrics(self, rows: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Append metric rows (each needs an integer ``step``, new to this run; ``epoch`` defaults to
        ``step``). Values must be finite. All rows are checked before anything is written. Once they are
        on disk they also go to the trackers ``$RFTLAB_TRACKING`` selects (:mod:`rftlab.runs.tracking`:
        a tracker's failure is one warning, never a lost row)."""
        self._check_writable()
        with self._lock():
            written = self._append_metrics(rows)
        tracking.after_append(self.path, self.record, written)

    @contextlib.contextmanager
    def _lock(self):
        """An exclusive ``flock`` on the run folder around read-modify-write (two processes appending to
        one run would otherwise lose rows)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise RunStoreError(f"run folder {self.path} no longer exists") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _append_metrics(self, rows: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        path = self.path / "metrics.jsonl"
        new = [rows] if isinstance(rows, Mapping) else list(rows)
        existing, steps = self._read_metrics_for_append()
        seen: dict[int, str] = {s: f"line {n} of {path.name}" for s, n in steps.items()}
        prepared = []
        for i, row in enumerate(new):
            if not isinstance(row, Mapping):
                raise ValueError(f"{path}: metric row {i} is a {type(row).__name__}, not a mapping")
            step = _metric_step(row, f"{path}: row {i}")
            reserved = sorted(set(row) & set(IDENTITY_COLUMNS))
            if reserved:
                raise ValueError(
                    f"{path}: row {i} (step {step}) uses the reserved name(s) {reserved}; the tidy metrics "
                    "table adds these columns itself, rename the metric"
                )
            if step in seen:
                raise ValueError(
                    f"{path}: step {step} (row {i}) is already recorded ({seen[step]}); steps are unique "
                    "within a run (a resumed run continues after its last step)"
                )
            seen[step] = f"row {int(i)} of this call"
            prepared.append({"epoch": step, **row})
        text = "".join(
            _dumps(row, f"{path}: row {i} (step {row['step']})") + "\n" for i, row in enumerate(prepared)
        )
        self._write(path, existing + text.encode("utf-8"))
        return prepared

    def repair_metrics(self) -> list[int]:
        """Move every unreadable line of ``metrics.jsonl`` (cut, not UTF-8, not JSON) to the end of
        ``metrics.damaged`` verbatim and keep the good lines; returns the moved line numbers. Nothing is
        lost: the damaged bytes are written (and flushed) before ``metrics.jsonl`` is rewritten."""
        self._check_writable()
        with self._lock():
            return self._repair_metrics()

    def _repair_metrics(self) -> list[int]:
        path = self.path / "metrics.jsonl"
        try:
            data = _read_bytes(path)
        except FileNotFoundError:
            return []
        lines = data.split(b"\n")
        _rows, bad = _parse_jsonl(path, data)
        if not bad:
            return []
        damaged_path = self.path / DAMAGED_METRICS
        try:
            damaged = _read_bytes(damaged_path)
        except FileNotFoundError:
            damaged = b""
        moved = b"".join(lines[n - 1] + b"\n" for n in sorted(bad))
        kept = b"".join(
            line + b"\n" for n, line in enumerate(lines, start=1) if n not in bad and line.strip()
        )
        self._write(damaged_path, damaged + moved)
        self._write(path, kept)
        return sorted(bad)

    def write_rollouts(self, epoch: int, records: Iterable[Mapping[str, Any]]) -> Path:
        """Write ``rollouts/epoch-<epoch>.jsonl`` (once per epoch)."""
        self._check_writable()
        path = self.path / "rollouts" / f"epoch-{int(epoch)}.jsonl"
        if path.exists():
            raise FinishedRunError(f"{path} already exists; rollouts of an epoch are written once")
        self._write(path, _jsonl(list(records), str(path)).encode("utf-8"))
        return path

    def write_eval(self, items: Iterable[Mapping[str, Any]]) -> Path:
        """Write ``eval.jsonl``: one object per evaluated item (``item_id`` plus ``correct`` or ``score``)."""
        self._check_writable()
        items = list(items)
        for item in items:
            if not isinstance(item, Mapping) or "item_id" not in item:
                raise ValueError(f"eval item {item!r} has no 'item_id'")
        path = self.path / "eval.jsonl"
        self._write(path, _jsonl(items, str(path)).encode("utf-8"))
        return path

    def save_provider_snapshot(self, name: str, payload: object) -> Path:
        """Keep a raw provider payload (a polled job JSON, a downloaded dataset: JSON data, text or bytes)
        under ``provider/``."""
        self._check_writable()
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ValueError(f"provider snapshot name {name!r} must be a plain file name")
        assert_no_secrets(name, "a provider snapshot (its name)")
        path = self.path / "provider" / name
        if isinstance(payload, bytes):
            data = payload
        elif isinstance(payload, str):
            data = payload.encode("utf-8", "surrogateescape")
        else:
            data = (_dumps(payload, str(path), indent=2) + "\n").encode("utf-8")
        self._write(path, data)
        return path

    def set_provider(self, **ids: object) -> None:
        """Record provider ids (for example the Fireworks job name) in ``run.json``."""
        self._check_writable()
        record = self.record.model_copy(deep=True)
        record.provider.update(ids)
        self._save_record(record)

    def finish(self, status: RunStatus = "finished", error: str | None = None) -> None:
        """Mark the run finished (or failed); afterwards it is read-only (and no longer claimed)."""
        self._check_writable()
        if status not in ("finished", "failed"):
            raise ValueError(f"finish() needs status 'finished' or 'failed', got {status!r}")
        record = self.record.model_copy(deep=True)
        record.status = status
        record.error = error
        record.finished_at = _utc_now()
        self._save_record(record)
        self.release()
        tracking.after_finish(self.path, self.record)

    @contextlib.contextmanager
    def working(self, resumable: bool = False) -> Iterator[Run]:
        """Do the run's work in the ``with`` block: the run is finished when the block ends (unless the
        block finished it), and on an error or an interruption it is marked failed with the reason (at most
        500 characters) and the exception goes on. ``resumable``: an error leaves the run unfinished and
        released instead, for the next call to resume it from its last checkpoint.

            with run.working():
                run.write_eval(rows)
        """
        try:
            yield self
        except BaseException as exc:
            if resumable:
                self.release()
            elif not self.finished:
                self.finish("failed", error=f"{type(exc).__name__}: {exc}"[:500])
            raise
        if not self.finished:
            self.finish()

    # -- who works on it ---------------------------------------------------------------------------
    def claim(self, activity: str = "trained") -> None:
        """Claim the run for this process (``rftlab.runs.locks``): ``RunBusyError`` naming the run and the
        holder's pid when another process has it."""
        root = self.path.parent.parent.parent
        locks.claim(root, self.record.experiment, self.record.arm, self.path, activity)

    def release(self) -> None:
        """Release this process's claim on the run (a no-op without one)."""
        locks.release(self.path)

    # -- reading ---------------------------------------------------------------------------------
    def metrics(self) -> list[dict[str, Any]]:
        path = self.path / "metrics.jsonl"
        try:
            return read_jsonl(path)
        except FileNotFoundError:
            return []

    def eval_items(self) -> list[dict[str, Any]]:
        path = self.path / "eval.jsonl"
        try:
            return read_jsonl(path)
        except FileNotFoundError:
            return []

    def rollouts(self, epoch: int) -> list[dict[str, Any]]:
        """Rows of ``rollouts/epoch-<epoch>.jsonl`` (``FileNotFoundError`` if that epoch was never written;
        ``CorruptRunError`` if it is damaged)."""
        return read_jsonl(self.path / "rollouts" / f"epoch-{int(epoch)}.jsonl")


def load_run(path: str | Path) -> Run:
    """Open a run folder; an unreadable ``run.json`` raises ``CorruptRunError`` naming the path."""
    path = Path(path)
    record_path = path / "run.json"
    try:
        data = _read_bytes(record_path)
    except (FileNotFoundError, NotADirectoryError):
        raise CorruptRunError({str(record_path): "missing (half-created run folder?)"}) from None
    try:
        record = RunRecord.model_validate(_loads(data.decode("utf-8")))
    except UnicodeDecodeError as exc:
        raise CorruptRunError({str(record_path): f"not UTF-8 (byte {exc.start + 1})"}) from None
    except ValidationError as exc:
        errors = exc.errors()
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else "?"
        what = errors[0]["msg"] if errors else str(exc)
        raise CorruptRunError(
            {str(record_path): f"not a valid run record (field {where!r}: {what})"}
        ) from None
    except ValueError as exc:  # JSON errors
        first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise CorruptRunError({str(record_path): f"not a valid run record ({first})"}) from None
    try:
        digest = spec_sha256(record.spec)
    except ValueError:
        digest = None
    if digest != record.spec_sha256:
        # A hand-edited spec would otherwise be reused (or resumed) under a hash it no longer has.
        raise CorruptRunError(
            {
                str(
                    record_path
                ): "its spec does not match its spec_sha256 (edited by hand?); restore it or remove the run"
            }
        )
    return Run(path, record)


def _input_sha256(path: str | Path) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise ValueError(f"input file {path}: cannot be read ({exc.strerror or exc})") from None


FRESH_RUN_ADVICE = (
    "start a fresh run instead (`rftlab arm launch SPEC --no-resume`, or move the run folder aside)"
)


def _repeated_step(path: Path) -> str | None:
    """Where ``metrics.jsonl`` first records a step twice (``"line 4 repeats step 1 of line 2"``), if it
    does (a run's steps are unique: a resumed run would go on from a history it never had)."""
    try:
        rows, _ = _parse_jsonl(path, _read_bytes(path))
    except FileNotFoundError:
        return None
    first: dict[int, int] = {}
    for number, row in rows:
        step = row.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            if step in first:
                return f"line {number} repeats step {step} of line {first[step]}"
            first[step] = number
    return None


def _check_metrics_readable(run: Run, action: str) -> None:
    try:
        run.metrics()
    except CorruptRunError as exc:
        ((path, why),) = list(exc.problems.items())[:1]
        hint = (
            "repair it with Run.repair_metrics(), which moves the damaged lines aside"
            if action == "resume"
            else "inspect it"
        )
        raise CorruptRunError(
            {
                path: f"{why}; refusing to {action} run {run.path} with a damaged metrics file ({hint}), or {FRESH_RUN_ADVICE}"
            }
        ) from None
    repeated = _repeated_step(run.path / "metrics.jsonl") if action == "resume" else None
    if repeated is not None:
        raise CorruptRunError(
            {
                str(run.path / "metrics.jsonl"): f"{repeated} (steps are unique within a run); refusing to "
                f"resume run {run.path}: {FRESH_RUN_ADVICE}"
            }
        )


class RunStore:
    """All runs under one root folder (``runs/`` by default)."""

    def __init__(self, root: str | Path = "runs", repo: str | Path | None = None):
        self.root = Path(root)
        # the code that writes the runs is this project's (not whatever folder the process started in)
        self.repo = Path(repo) if repo is not None else PROJECT_ROOT

    def create_run(
        self,
        experiment: str,
        arm: str,
        spec: object,
        backend: str = "local",
        inputs: Sequence[str | Path] = (),
        run_id: str | None = None,
        plan_sha256: str | None = None,
    ) -> Run:
        """Create a new run folder with its ``run.json`` (status ``running``); ``plan_sha256``: the hash
        of the analysis plan that governs it (recorded, never part of the spec hash)."""
        for label, value in (("experiment", experiment), ("arm", arm), ("backend", backend)):
            if not _NAME_RE.match(value):
                raise ValueError(f"{label} {value!r} must be letters, digits, '.', '_' or '-'")
        spec_json = to_jsonable(spec)
        if not isinstance(spec_json, dict):
            raise ValueError("a run spec must serialise to a JSON object")
        _dumps(spec_json, "run spec")  # names a NaN or non-JSON field
        digest = spec_sha256(spec_json)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        run_id = run_id or f"{stamp}-{digest[:8]}"
        if not _NAME_RE.match(run_id):
            raise ValueError(f"run id {run_id!r} must be letters, digits, '.', '_' or '-'")
        arm_dir = self.root / experiment / arm
        path, suffix = arm_dir / run_id, 1
        while path.exists():
            suffix += 1
            path = arm_dir / f"{run_id}-{suffix}"
        record = RunRecord(
            run_id=path.name,
            experiment=experiment,
            arm=arm,
            backend=backend,
            spec=spec_json,
            spec_sha256=digest,
            git=git_state(self.repo),
            inputs=[InputFile(path=str(p), sha256=_input_sha256(p)) for p in inputs],
            plan_sha256=plan_sha256,
            created_at=_utc_now(),
        )
        where = str(path / "run.json")
        assert_no_secrets(os.fsencode(path), "a run folder (its name)")
        assert_no_secrets(_dumps(_record_data(record), where, indent=2), where)  # before any mkdir
        path.mkdir(parents=True)
        run = Run(path, record)
        try:
            run._save_record()
        except BaseException:
            # Never leave a half-created run folder behind.
            for leftover in path.iterdir():
                leftover.unlink(missing_ok=True)
            path.rmdir()
            raise
        return run

    def _walk(self) -> tuple[list[Path], dict[str, str]]:
        """``(run folders, {folder: problem})`` of ``<experiment>/<arm>/<run_id>``; hidden names skipped."""
        found: list[Path] = []
        problems: dict[str, str] = {}
        if not self.root.is_dir():
            return found, problems

        def children(folder: Path) -> list[Path]:
            try:
                return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.is_dir())
            except OSError as exc:
                problems[str(folder)] = (
                    f"folder cannot be listed ({exc.strerror or exc}); check its permissions"
                )
                return []

        for experiment in children(self.root):
            for arm in children(experiment):
                found.extend(children(arm))
        return sorted(found), problems

    def run_dirs(self) -> list[Path]:
        """Every ``<experiment>/<arm>/<run_id>`` folder under the root, sorted."""
        return self._walk()[0]

    def scan(self, experiment: str | None = None, arm: str | None = None) -> tuple[list[Run], dict[str, str]]:
        """``(readable runs, {path: problem})``: one bad folder never hides the others."""
        runs = []
        dirs, problems = self._walk()
        for path in dirs:
            exp_name, arm_name = path.parent.parent.name, path.parent.name
            if (experiment and exp_name != experiment) or (arm and arm_name != arm):
                continue
            try:
                runs.append(load_run(path))
            except CorruptRunError as exc:
                problems.update(exc.problems)
        return runs, problems

    def runs(self, experiment: str | None = None, arm: str | None = None) -> list[Run]:
        """Open every run (filtered); all unreadable folders are reported together (``CorruptRunError``)."""
        runs, problems = self.scan(experiment, arm)
        if problems:
            raise CorruptRunError(problems)
        return runs

    def find_run(
        self,
        experiment: str,
        arm: str,
        spec: object,
        status: RunStatus = "finished",
        backend: str | None = None,
    ) -> Run | None:
        """The newest run of this experiment/arm with ``status`` (and ``backend``, if given) whose spec hash
        equals ``spec``'s."""
        digest = spec_sha256(spec)
        matches = [
            run
            for run in self.runs(experiment, arm)
            if run.record.status == status
            and run.record.spec_sha256 == digest
            and (backend is None or run.record.backend == backend)
        ]
        return max(matches, key=lambda run: (run.record.created_at, run.path.name), default=None)

    def find_finished(self, experiment: str, arm: str, spec: object) -> Run | None:
        """The newest finished run of this experiment/arm whose spec hash equals ``spec``'s."""
        return self.find_run(experiment, arm, spec, "finished")

    def start_or_reuse(
        self,
        experiment: str,
        arm: str,
        spec: object,
        backend: str = "local",
        force: bool = False,
        resume: bool = False,
        **kwargs: Any,
    ) -> tuple[Run, RunOrigin]:
        """``(run, origin)`` for this spec on this backend:

        - ``"reused"``: a finished run with the same spec hash exists; nothing needs to run;
        - ``"resumed"``: with ``resume=True``, the newest unfinished run with the same hash, to continue
          after its last metrics step (``run.metrics()``);
        - ``"new"``: a fresh run (nothing matched, or ``force=True``).

        A resumed or new run is claimed by this process until it finishes (``Run.claim``); when another
        process holds it, ``RunBusyError`` names the run folder and that process.
        """
        for label, value in (("experiment", experiment), ("arm", arm)):
            if not isinstance(value, str) or not _NAME_RE.match(value):
                raise ValueError(f"{label} {value!r} must be letters, digits, '.', '_' or '-'")
        tracking.selected_trackers(self.root)  # a bad $RFTLAB_TRACKING fails before anything runs
        # One process at a time decides (finds or creates) for an arm, and the run it returns to be
        # trained is claimed: a second launch of the same arm refuses with the run's path.
        with locks.arm_lock(self.root, experiment, arm):
            if not force:
                finished = self.find_run(experiment, arm, spec, "finished", backend)
                if finished is not None:
                    _check_metrics_readable(finished, "reuse")
                    return finished, "reused"
                if resume:
                    running = self.find_run(experiment, arm, spec, "running", backend)
                    if running is not None:
                        _check_metrics_readable(running, "resume")
                        running.claim()
                        return running, "resumed"
            run = self.create_run(experiment, arm, spec, backend=backend, **kwargs)
            run.claim()
            return run, "new"

    def record_rollouts(
        self,
        experiment: str,
        arm: str,
        spec: object,
        records: Iterable[Mapping[str, Any]] | Callable[[], Iterable[Mapping[str, Any]]],
        backend: str = "local",
    ) -> tuple[Run, RunOrigin]:
        """Keep the rollouts of an evaluation that trains nothing (a scripted strategy's episodes, a bench
        policy's scans) as a finished run whose ``rollouts/epoch-0.jsonl`` holds ``records``, so ``rftlab
        view`` can show them. A finished run of the same spec is reused and nothing is written;
        ``records`` may be a callable, then called only when the run is new. Returns ``(run, origin)``."""
        run, origin = self.start_or_reuse(experiment, arm, spec, backend=backend)
        if origin == "reused":
            return run, origin
        with run.working():
            run.write_rollouts(0, list(records() if callable(records) else records))
        return run, origin


def collect_metrics(root: str | Path = "runs", experiment: str | None = None, arm: str | None = None):
    """``(frame, problems)``: the tidy metrics of every readable run, and ``{path: problem}`` for the rest."""
    import pandas as pd

    rows, metric_names = [], {}
    runs, problems = RunStore(root).scan(experiment, arm)
    for run in runs:
        try:
            metric_rows = run.metrics()
        except CorruptRunError as exc:
            problems.update(exc.problems)
            continue
        identity = {
            "experiment": run.record.experiment,
            "arm": run.record.arm,
            "run_id": run.record.run_id,
            "backend": run.record.backend,
            "status": run.record.status,
        }
        for row in metric_rows:
            # A hand-written row can never overwrite the identity of its run.
            metric_names.update(
                dict.fromkeys(k for k in row if k not in ("step", "epoch", *IDENTITY_COLUMNS))
            )
            rows.append({**row, **identity})
    columns = ["experiment", "arm", "run_id", "backend", "status", "step", "epoch", *metric_names]
    return pd.DataFrame(rows, columns=columns), problems


def load_metrics(root: str | Path = "runs", experiment: str | None = None, arm: str | None = None):
    """One tidy DataFrame of metrics across runs.

    Columns: ``experiment, arm, run_id, backend, status, step, epoch`` then the metric columns in first-seen
    order. A corrupt run folder or metrics line raises ``CorruptRunError`` naming every bad path.
    """
    frame, problems = collect_metrics(root, experiment, arm)
    if problems:
        raise CorruptRunError(problems)
    return frame
