"""The run store: one folder per run, atomic writes, immutable once finished.

Layout (``DESIGN.md``)::

    runs/<experiment>/<arm>/<run_id>/
        run.json                  RunRecord: ids, backend, spec + SHA-256, git state, inputs, provider ids, status
        metrics.jsonl             one row per step/epoch, {"step", "epoch", <metric>: value, ...}
        rollouts/epoch-<k>.jsonl  per-rollout records
        eval.jsonl                per-item evaluation outcomes
        provider/                 raw provider snapshots (job JSON, downloaded datasets)

Every file is written to a temporary sibling and renamed into place, so a reader sees either the old or
the new content, never half of it. A finished (or failed) run refuses further writes; running a spec
whose hash matches a finished run reuses that run unless ``force=True``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rftlab.runs.gitinfo import git_state
from rftlab.runs.hashing import file_sha256, spec_sha256, to_jsonable

RunStatus = Literal["running", "finished", "failed"]
RunOrigin = Literal["new", "reused", "resumed"]
SECRET_ENV_VARS = ("FIREWORKS_API_KEY", "TINKER_API_KEY", "WANDB_API_KEY", "OPENAI_API_KEY")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class RunStoreError(Exception):
    """Base class of run-store errors."""


class FinishedRunError(RunStoreError):
    """A write was attempted on a finished or failed run."""


class CorruptRunError(RunStoreError):
    """One or more run folders could not be read; ``problems`` maps each path to what is wrong."""

    def __init__(self, problems: Mapping[str, str]):
        self.problems = dict(problems)
        lines = "\n".join(f"  {path}: {why}" for path, why in self.problems.items())
        super().__init__(f"{len(self.problems)} unreadable run file(s):\n{lines}")


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
    status: RunStatus = "running"
    created_at: str
    finished_at: str | None = None
    error: str | None = None


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(to_jsonable(row), allow_nan=False) + "\n" for row in rows)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a malformed line raises ``CorruptRunError`` naming the file and line."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorruptRunError({str(path): f"line {number} is not JSON ({exc.msg})"}) from None
            if not isinstance(row, dict):
                raise CorruptRunError({str(path): f"line {number} is not a JSON object"})
            rows.append(row)
    return rows


def check_no_secrets(obj: Any, where: str) -> None:
    """Refuse to persist any value equal to a credential found in the environment."""
    secrets = {os.environ[k] for k in SECRET_ENV_VARS if len(os.environ.get(k, "")) >= 8}
    if not secrets:
        return
    text = json.dumps(to_jsonable(obj), default=str)
    for secret in secrets:
        if secret in text:
            raise RunStoreError(f"refusing to write a credential from the environment into {where}")


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

    def _save_record(self) -> None:
        check_no_secrets(self.record, str(self.path / "run.json"))
        atomic_write_text(self.path / "run.json", self.record.model_dump_json(indent=2) + "\n")

    def append_metrics(self, rows: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Append metric rows (each needs ``step``; ``epoch`` defaults to ``step``)."""
        self._check_writable()
        new = [rows] if isinstance(rows, Mapping) else list(rows)
        for row in new:
            if "step" not in row:
                raise ValueError(f"metric row {dict(row)!r} has no 'step'")
        new = [{"epoch": row["step"], **row} for row in new]
        check_no_secrets(new, str(self.path / "metrics.jsonl"))
        path = self.path / "metrics.jsonl"
        existing = path.read_text(encoding="utf-8") if path.exists() else ""
        atomic_write_text(path, existing + _jsonl(new))

    def write_rollouts(self, epoch: int, records: Iterable[Mapping[str, Any]]) -> Path:
        """Write ``rollouts/epoch-<epoch>.jsonl`` (once per epoch)."""
        self._check_writable()
        path = self.path / "rollouts" / f"epoch-{int(epoch)}.jsonl"
        if path.exists():
            raise FinishedRunError(f"{path} already exists; rollouts of an epoch are written once")
        records = list(records)
        check_no_secrets(records, str(path))
        atomic_write_text(path, _jsonl(records))
        return path

    def write_eval(self, items: Iterable[Mapping[str, Any]]) -> Path:
        """Write ``eval.jsonl``: one object per evaluated item (``item_id`` plus ``correct`` or ``score``)."""
        self._check_writable()
        items = list(items)
        for item in items:
            if "item_id" not in item:
                raise ValueError(f"eval item {dict(item)!r} has no 'item_id'")
        check_no_secrets(items, str(self.path / "eval.jsonl"))
        path = self.path / "eval.jsonl"
        atomic_write_text(path, _jsonl(items))
        return path

    def save_provider_snapshot(self, name: str, payload: Any) -> Path:
        """Keep a raw provider payload (a polled job JSON, a downloaded dataset) under ``provider/``."""
        self._check_writable()
        if not _NAME_RE.match(name):
            raise ValueError(f"provider snapshot name {name!r} must be a plain file name")
        check_no_secrets(payload, f"provider/{name}")
        path = self.path / "provider" / name
        text = payload if isinstance(payload, str) else json.dumps(to_jsonable(payload), indent=2) + "\n"
        atomic_write_text(path, text)
        return path

    def set_provider(self, **ids: Any) -> None:
        """Record provider ids (for example the Fireworks job name) in ``run.json``."""
        self._check_writable()
        self.record.provider.update(ids)
        self._save_record()

    def finish(self, status: RunStatus = "finished", error: str | None = None) -> None:
        """Mark the run finished (or failed); afterwards it is read-only."""
        self._check_writable()
        if status == "running":
            raise ValueError("finish() needs status 'finished' or 'failed'")
        self.record.status = status
        self.record.error = error
        self.record.finished_at = _utc_now()
        self._save_record()

    # -- reading ---------------------------------------------------------------------------------
    def metrics(self) -> list[dict[str, Any]]:
        path = self.path / "metrics.jsonl"
        return read_jsonl(path) if path.exists() else []

    def eval_items(self) -> list[dict[str, Any]]:
        path = self.path / "eval.jsonl"
        return read_jsonl(path) if path.exists() else []

    def rollouts(self, epoch: int) -> list[dict[str, Any]]:
        return read_jsonl(self.path / "rollouts" / f"epoch-{int(epoch)}.jsonl")


def load_run(path: str | Path) -> Run:
    """Open a run folder; an unreadable ``run.json`` raises ``CorruptRunError`` naming the path."""
    path = Path(path)
    record_path = path / "run.json"
    try:
        record = RunRecord.model_validate_json(record_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorruptRunError({str(record_path): "missing (half-created run folder?)"}) from None
    except ValueError as exc:  # pydantic ValidationError and JSON errors
        first = str(exc).splitlines()[0]
        raise CorruptRunError({str(record_path): f"not a valid run record ({first})"}) from None
    return Run(path, record)


class RunStore:
    """All runs under one root folder (``runs/`` by default)."""

    def __init__(self, root: str | Path = "runs", repo: str | Path | None = None):
        self.root = Path(root)
        self.repo = Path(repo) if repo is not None else Path.cwd()

    def create_run(
        self,
        experiment: str,
        arm: str,
        spec: Any,
        backend: str = "local",
        inputs: Sequence[str | Path] = (),
        run_id: str | None = None,
    ) -> Run:
        """Create a new run folder with its ``run.json`` (status ``running``)."""
        for label, value in (("experiment", experiment), ("arm", arm), ("backend", backend)):
            if not _NAME_RE.match(value):
                raise ValueError(f"{label} {value!r} must be letters, digits, '.', '_' or '-'")
        spec_json = to_jsonable(spec)
        if not isinstance(spec_json, dict):
            raise ValueError("a run spec must serialise to a JSON object")
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
            inputs=[InputFile(path=str(p), sha256=file_sha256(p)) for p in inputs],
            created_at=_utc_now(),
        )
        check_no_secrets(record, str(path / "run.json"))  # before anything touches the disk
        path.mkdir(parents=True)
        run = Run(path, record)
        run._save_record()
        return run

    def run_dirs(self) -> list[Path]:
        """Every ``<experiment>/<arm>/<run_id>`` folder under the root, sorted."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.glob("*/*/*") if p.is_dir() and not p.name.startswith("."))

    def runs(self, experiment: str | None = None, arm: str | None = None) -> list[Run]:
        """Open every run (filtered); all unreadable folders are reported together."""
        runs, problems = [], {}
        for path in self.run_dirs():
            exp_name, arm_name = path.parent.parent.name, path.parent.name
            if (experiment and exp_name != experiment) or (arm and arm_name != arm):
                continue
            try:
                runs.append(load_run(path))
            except CorruptRunError as exc:
                problems.update(exc.problems)
        if problems:
            raise CorruptRunError(problems)
        return runs

    def find_run(
        self, experiment: str, arm: str, spec: Any, status: RunStatus = "finished", backend: str | None = None
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

    def find_finished(self, experiment: str, arm: str, spec: Any) -> Run | None:
        """The newest finished run of this experiment/arm whose spec hash equals ``spec``'s."""
        return self.find_run(experiment, arm, spec, "finished")

    def start_or_reuse(
        self,
        experiment: str,
        arm: str,
        spec: Any,
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
        """
        if not force:
            finished = self.find_run(experiment, arm, spec, "finished", backend)
            if finished is not None:
                return finished, "reused"
            if resume:
                running = self.find_run(experiment, arm, spec, "running", backend)
                if running is not None:
                    return running, "resumed"
        return self.create_run(experiment, arm, spec, backend=backend, **kwargs), "new"


def load_metrics(root: str | Path = "runs", experiment: str | None = None, arm: str | None = None):
    """One tidy DataFrame of metrics across runs.

    Columns: ``experiment, arm, run_id, backend, status, step, epoch`` then the metric columns in first-seen
    order. A corrupt run folder or metrics line raises ``CorruptRunError`` naming every bad path.
    """
    import pandas as pd

    rows, problems, metric_names = [], {}, {}
    for run in RunStore(root).runs(experiment, arm):
        try:
            metric_rows = run.metrics()
        except CorruptRunError as exc:
            problems.update(exc.problems)
            continue
        for row in metric_rows:
            metric_names.update(dict.fromkeys(k for k in row if k not in ("step", "epoch")))
            rows.append(
                {
                    "experiment": run.record.experiment,
                    "arm": run.record.arm,
                    "run_id": run.record.run_id,
                    "backend": run.record.backend,
                    "status": run.record.status,
                    **row,
                }
            )
    if problems:
        raise CorruptRunError(problems)
    columns = ["experiment", "arm", "run_id", "backend", "status", "step", "epoch", *metric_names]
    return pd.DataFrame(rows, columns=columns)
