"""Experiment tracking: the run store's metric rows, mirrored live to MLflow and/or Weights & Biases.

:meth:`rftlab.runs.store.Run.append_metrics` calls :func:`after_append` once the rows are durably in
``metrics.jsonl``; :meth:`~rftlab.runs.store.Run.finish` calls :func:`after_finish`. Both only queue the
work: one background thread per process sends it in order, so an append never waits for a tracker, and
the queue is flushed at exit (:func:`flush` waits for it at any time). The run store stays
the record: a tracker is a mirror that never writes into a run folder, a report or a spec (so it never
changes a hash), and a tracker that fails never loses or blocks a row. Its failure is printed once per
process as one ``rftlab: warning: tracking: ...`` line on stderr and that tracker is off for the rest of the
process; ``rftlab runs track`` sends what it missed later.

Which trackers (``$RFTLAB_TRACKING``, read at every append): ``mlflow``, ``wandb``, ``mlflow,wandb`` or
``off``. Unset: ``mlflow`` for runs in the project's own run store (``<project>/runs``) when MLflow is
installed (the ``track`` extra), off for every other store (the tests' and quick runs' temporary stores,
a ``$RFTLAB_RUNS_ROOT`` elsewhere), under ``RFTLAB_QUICK=1`` and in report builds (``rftlab.reports``
gives its kernels ``off`` unless the variable is set). An unknown value raises
:class:`TrackingSettingError` (one line) before a run starts.

MLflow: ``$MLFLOW_TRACKING_URI`` when set, else the embedded SQLite store
``sqlite:///<project>/mlruns/mlflow.db`` (git-ignored; ``mlflow ui --backend-store-uri`` on it shows live
curves offline). One MLflow run per rftlab run, found again by its ``rftlab.run_key`` tag
(``experiment/arm/run_id``) on resume, in any process; the MLflow experiment is the rftlab experiment;
a row's ``step`` is the MLflow step. W&B: project = experiment, name = run id, a stable run id derived
from the run key (a resumed run continues the same W&B run), offline mode unless ``WANDB_API_KEY`` is set
(``$WANDB_MODE`` wins), files under ``$WANDB_DIR`` or ``<project>/wandb``.

Tags (both trackers): run id, run key, spec hash, backend, arm, family, git commit. Params: the spec's
fields, flattened (``train.lr``); any tag or param holding a credential's value from the environment
(:func:`rftlab.runs.secrets.assert_no_secrets`) is withheld. MLflow and wandb are imported only when a
tracker is on, by the first append of a process (``import mlflow`` takes about 2 s).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib.util
import json
import logging
import math
import numbers
import os
import queue
import re
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rftlab.runs.errors import RunStoreError, SecretLeakError
from rftlab.runs.paths import DEFAULT_RUNS_DIR, PROJECT_ROOT
from rftlab.runs.secrets import assert_no_secrets, redact_text, redact_url

if TYPE_CHECKING:
    from rftlab.runs.store import Run, RunRecord

__all__ = [
    "BACKENDS",
    "TRACKING_ENV",
    "RunInfo",
    "Tracker",
    "TrackerUnavailableError",
    "TrackingSettingError",
    "after_append",
    "after_finish",
    "default_mlflow_uri",
    "flush",
    "metric_points",
    "run_info",
    "selected_trackers",
    "tracker",
]

TRACKING_ENV = "RFTLAB_TRACKING"
BACKENDS = ("mlflow", "wandb")
OFF_VALUES = ("off", "none", "0", "false", "no")
MLFLOW_DIR = PROJECT_ROOT / "mlruns"
WANDB_DEFAULT_DIR = PROJECT_ROOT
TAG_PREFIX = "rftlab."
MAX_PARAM_CHARS = 500  # longer values (a long prompt list) stay in run.json only
_METRIC_KEY_BAD = re.compile(r"[^A-Za-z0-9_\-. /]")


class TrackingSettingError(RunStoreError, ValueError):
    """``$RFTLAB_TRACKING`` names no tracker (a user mistake: one line, never a traceback)."""


class TrackerUnavailableError(RuntimeError):
    """A tracker cannot be used here (not installed, its store cannot be reached)."""


@dataclass(frozen=True)
class RunInfo:
    """What a tracker is told about an rftlab run: its identity, tags and params (credential-free)."""

    key: str  # experiment/arm/run_id: unique in a run store, the tag a resumed run is found by
    experiment: str
    arm: str
    run_id: str
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    withheld: int = 0  # tags or params left out because they held a credential's value


class Tracker(Protocol):
    """One tracking backend. Calls may raise anything: the hub reports the failure once and stops
    calling this tracker for the rest of the process."""

    name: str

    def log_rows(self, run: RunInfo, rows: Sequence[Mapping[str, Any]]) -> object:
        """Send metric rows (each has an integer ``step``) of ``run``; create or find its tracker run."""
        ...

    def finish(self, run: RunInfo, status: str) -> None:
        """Mark ``run``'s tracker run ended (``finished`` or ``failed``), if this process opened it."""
        ...


# -- which trackers -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _is_project_store(root: str) -> bool:
    try:
        return Path(root).resolve() == DEFAULT_RUNS_DIR.resolve()
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def _mlflow_installed() -> bool:
    return importlib.util.find_spec("mlflow") is not None


def selected_trackers(
    store_root: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The trackers ``$RFTLAB_TRACKING`` selects for runs of the store at ``store_root`` (module docstring
    for the default). Raises :class:`TrackingSettingError` for a value that names no tracker."""
    env = os.environ if environ is None else environ
    value = env.get(TRACKING_ENV, "").strip().lower()
    if not value:
        if env.get("RFTLAB_QUICK") == "1" or store_root is None:
            return ()
        return ("mlflow",) if _is_project_store(str(store_root)) and _mlflow_installed() else ()
    if value in OFF_VALUES:
        return ()
    names = tuple(dict.fromkeys(part.strip() for part in value.split(",")))
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise TrackingSettingError(
            f"{TRACKING_ENV}={env.get(TRACKING_ENV)!r}: unknown tracker {unknown[0] if unknown else ''!r}; "
            "use mlflow, wandb, mlflow,wandb or off"
        )
    return names


# -- what a tracker is told ---------------------------------------------------------------------------
def _flatten(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            _flatten(inner, f"{prefix}.{key}" if prefix else str(key), out)
        return
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if len(text) <= MAX_PARAM_CHARS and prefix:
        out[prefix] = text


def _credential_free(items: Mapping[str, str]) -> tuple[dict[str, str], int]:
    kept, withheld = {}, 0
    for key, value in items.items():
        try:
            assert_no_secrets(f"{key}\n{value}", "a tracker tag or param")
        except SecretLeakError:
            withheld += 1
            continue
        kept[key] = value
    return kept, withheld


def family_of(experiment: str, spec: Mapping[str, Any]) -> str:
    """The run's family: the spec's ``family`` field when it has one, else the experiment name's first
    ``_``-separated word (``spectrum_memory`` → ``spectrum``, ``gs1_vs_grpo`` → ``gs1``)."""
    named = spec.get("family")
    return named if isinstance(named, str) and named else experiment.split("_", 1)[0]


def run_info(record: RunRecord) -> RunInfo:
    """The :class:`RunInfo` of a :class:`rftlab.runs.store.RunRecord`."""
    key = f"{record.experiment}/{record.arm}/{record.run_id}"
    tags = {
        "run_id": record.run_id,
        "run_key": key,
        "experiment": record.experiment,
        "arm": record.arm,
        "backend": record.backend,
        "family": family_of(record.experiment, record.spec),
        "spec_sha256": record.spec_sha256,
        "git_commit": str((record.git or {}).get("commit") or "unknown"),
    }
    if record.plan_sha256:
        tags["plan_sha256"] = record.plan_sha256
    params: dict[str, str] = {}
    _flatten(record.spec, "", params)
    tags, withheld_tags = _credential_free(tags)
    params, withheld_params = _credential_free(params)
    return RunInfo(
        key, record.experiment, record.arm, record.run_id, tags, params, withheld_tags + withheld_params
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real) and math.isfinite(float(value)):
        return float(value)
    return None


def metric_points(row: Mapping[str, Any]) -> tuple[int, dict[str, float]]:
    """``(step, {metric: value})`` of a metric row: its finite numbers (nested objects flattened with
    ``/``, names outside MLflow's alphabet get ``_``); ``epoch`` only where it differs from ``step``."""
    step = int(row["step"])
    values: dict[str, float] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(f"{prefix}/{key}", inner)
        elif (number := _number(value)) is not None:
            values[_METRIC_KEY_BAD.sub("_", prefix)[:250]] = number

    for key, value in row.items():
        if key == "step" or (key == "epoch" and value == step):
            continue
        walk(str(key), value)
    return step, values


# -- the hub: one tracker object per backend and store, fed by one background sender per process --------
_LOCK = threading.RLock()
# (backend, its store) -> this process's tracker; None once it failed here (reported once)
_TRACKERS: dict[tuple[str, str], Tracker | None] = {}
FLUSH_AT_EXIT_SECONDS = 60.0


def _store_of(name: str) -> str:
    """Where backend ``name`` writes, read from the environment when a row is appended (a later change
    of ``$MLFLOW_TRACKING_URI``, ``$WANDB_DIR`` or ``$WANDB_MODE`` gets a tracker of its own)."""
    if name == "mlflow":
        return default_mlflow_uri()
    mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
    return f"{mode}|{os.environ.get('WANDB_DIR') or WANDB_DEFAULT_DIR}"


def _make(name: str, store: str) -> Tracker:
    if name == "mlflow":
        return MlflowTracker(store)
    mode, _, folder = store.partition("|")
    return WandbTracker(mode, Path(folder))


def tracker(name: str, store: str | None = None) -> Tracker | None:
    """This process's tracker for backend ``name`` and ``store`` (default: the environment's), made on
    first use, or ``None`` once it failed."""
    key = (name, store or _store_of(name))
    if key in _TRACKERS:  # made already: no lock (the sender may hold it for a while)
        return _TRACKERS[key]
    with _LOCK:
        if key not in _TRACKERS:
            try:
                with _quiet():
                    _TRACKERS[key] = _make(*key)
            except Exception as exc:
                _fail(key, exc)
        return _TRACKERS.get(key)


def _fail(key: tuple[str, str], exc: BaseException) -> None:
    _TRACKERS[key] = None
    name = key[0]
    text = " ".join(redact_text(f"{type(exc).__name__}: {exc}").split())
    if len(text) > 300:
        text = text[:297] + "..."
    print(
        f"rftlab: warning: tracking: {name} failed ({text}); metric rows stay in the run store only and "
        f"{name} is off for this process (send them later with `rftlab runs track`)",
        file=sys.stderr,
        flush=True,
    )


def _each(stores: Mapping[str, str], call) -> None:
    for name, store in stores.items():
        with _LOCK:
            target = tracker(name, store)
            if target is None:
                continue
            try:
                with _quiet():
                    call(target)
            except Exception as exc:  # a tracker never blocks the run (module docstring)
                _fail((name, store), exc)


class _Sender:
    """One daemon thread per process sends the queued rows in order, so an append never waits for a
    tracker (MLflow's SQLite commit takes tens of milliseconds). At exit the queue is flushed (at most
    :data:`FLUSH_AT_EXIT_SECONDS`); a forked child starts its own thread and queue."""

    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()
        self.pid: int | None = None
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def put(self, job) -> None:
        with self.lock:  # not _LOCK, which the sender holds while it sends
            if self.pid != os.getpid() or self.thread is None or not self.thread.is_alive():
                if self.pid != os.getpid():
                    self.queue = queue.Queue()
                    atexit.register(self.flush_at_exit)
                self.pid = os.getpid()
                self.thread = threading.Thread(target=self._work, name="rftlab-tracking", daemon=True)
                self.thread.start()
        self.queue.put(job)

    def _work(self) -> None:
        while True:
            job = self.queue.get()
            try:
                job()
            except Exception as exc:  # never lose the sender
                print(
                    f"rftlab: warning: tracking: {redact_text(f'{type(exc).__name__}: {exc}')}",
                    file=sys.stderr,
                )
            finally:
                self.queue.task_done()

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until every queued row was sent (or failed); ``False`` if ``timeout`` ran out first."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks:
            if time.monotonic() > deadline or self.pid != os.getpid():
                return False
            time.sleep(0.005)
        return True

    def flush_at_exit(self) -> None:
        if self.pid != os.getpid():
            return
        flushed = self.flush(FLUSH_AT_EXIT_SECONDS)
        for target in list(_TRACKERS.values()):
            if isinstance(target, WandbTracker):  # W&B writes an open run's file only when it ends
                with _quiet(), contextlib.suppress(Exception):
                    target.close()
        if not flushed:
            print(
                f"rftlab: warning: tracking: {self.queue.unfinished_tasks} batch(es) of rows not sent after "
                f"{FLUSH_AT_EXIT_SECONDS:.0f} s at exit; send them with `rftlab runs track`",
                file=sys.stderr,
            )


_SENDER = _Sender()


def flush(timeout: float = 60.0) -> bool:
    """Wait until every row appended so far in this process reached its trackers (or they failed)."""
    return _SENDER.flush(timeout)


def after_append(run_path: Path, record: RunRecord, rows: Sequence[Mapping[str, Any]]) -> None:
    """The run store's hook: ``rows`` were just appended to the run at ``run_path``; they are queued for
    the sender (the setting is checked here, so a bad one fails at once)."""
    names = selected_trackers(run_path.parent.parent.parent)
    if names and rows:
        stores, batch = {name: _store_of(name) for name in names}, list(rows)
        for name, store in stores.items():
            tracker(name, store)  # imported and opened here, once: never by the sender at exit
        _SENDER.put(lambda: _each(stores, lambda t: t.log_rows(run_info(record), batch)))


def after_finish(run_path: Path, record: RunRecord) -> None:
    """The run store's hook: the run at ``run_path`` just finished (or failed)."""
    try:
        names = selected_trackers(run_path.parent.parent.parent)
    except TrackingSettingError:
        return  # reported by the appends; finishing a run never fails over a setting
    # only trackers this process opened can hold the run (a run that logged no row starts none)
    stores = {name: store for name in names if _TRACKERS.get((name, store := _store_of(name)))}
    if stores:
        _SENDER.put(lambda: _each(stores, lambda t: t.finish(run_info(record), record.status)))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No library chatter (MLflow's and alembic's INFO lines, their Python warnings) while a tracker
    works: a notebook or a report build prints only its results."""
    loggers = [logging.getLogger(name) for name in ("mlflow", "alembic", "wandb")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:  # a failure is reported once, by the hub, in one line
        lg.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


# -- MLflow -------------------------------------------------------------------------------------------
def default_mlflow_uri(environ: Mapping[str, str] | None = None) -> str:
    """``$MLFLOW_TRACKING_URI`` when set, else the embedded ``sqlite:///<project>/mlruns/mlflow.db``."""
    env = os.environ if environ is None else environ
    return env.get("MLFLOW_TRACKING_URI", "").strip() or f"sqlite:///{MLFLOW_DIR / 'mlflow.db'}"


def _check_reachable(uri: str) -> None:
    """An ``http(s)`` tracking server answers its ``/health`` within 3 s (MLflow's own client would
    retry for minutes, blocking the training loop)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=3):
            return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackerUnavailableError(
            f"tracking URI {redact_url(uri)} cannot be reached ({reason})"
        ) from None


class MlflowTracker:
    """Metric rows to MLflow through ``MlflowClient`` (no global active run, nothing printed)."""

    name = "mlflow"

    def __init__(self, uri: str | None = None):
        self.uri = uri or default_mlflow_uri()
        self.artifacts: str | None = None
        if self.uri.startswith("sqlite:///"):
            db = Path(self.uri.removeprefix("sqlite:///"))
            db.parent.mkdir(parents=True, exist_ok=True)
            self.artifacts = (db.parent / "artifacts").as_uri()
        elif self.uri.startswith(("http://", "https://")):
            _check_reachable(self.uri)
        with warnings.catch_warnings():  # mlflow sets up its loggers on import: quiet them after it
            warnings.simplefilter("ignore")
            try:
                from mlflow.tracking import MlflowClient  # pyright: ignore[reportMissingImports] (the track extra)
            except ImportError:
                raise TrackerUnavailableError(
                    "mlflow is not installed; install the track extra (pip install -e '.[track]')"
                ) from None
        with _quiet():
            self.client = MlflowClient(tracking_uri=self.uri)
            self.client.search_experiments(max_results=1)  # opens (and on first use creates) the store
        self._runs: dict[str, str] = {}  # run key -> MLflow run id, for runs this process opened

    def experiment_id(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name, artifact_location=self.artifacts)
        except Exception:  # another process created it first
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def find_run(self, run: RunInfo) -> str | None:
        """The MLflow run id tagged with ``run``'s key, if one exists (any process made it)."""
        if run.key in self._runs:
            return self._runs[run.key]
        key = run.key.replace("'", "\\'")
        found = self.client.search_runs(
            [self.experiment_id(run.experiment)],
            filter_string=f"tags.`{TAG_PREFIX}run_key` = '{key}'",
            max_results=1,
            order_by=["attributes.start_time ASC"],
        )
        if found:
            self._runs[run.key] = found[0].info.run_id
            return found[0].info.run_id
        return None

    def open_run(self, run: RunInfo) -> str:
        """``run``'s MLflow run: the one tagged with its key, else a new one with its tags and params."""
        from mlflow.entities import Param  # pyright: ignore[reportMissingImports] (the track extra)

        found = self.find_run(run)
        if found is not None:
            return found
        tags = {f"{TAG_PREFIX}{k}": v for k, v in run.tags.items()}
        if run.withheld:
            tags[f"{TAG_PREFIX}withheld"] = str(run.withheld)
        created = self.client.create_run(self.experiment_id(run.experiment), tags=tags, run_name=run.run_id)
        run_id = created.info.run_id
        params = [Param(k[:250], v) for k, v in sorted(run.params.items())]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(run_id, params=params[start : start + 100])
        self._runs[run.key] = run_id
        return run_id

    def log_rows(
        self, run: RunInfo, rows: Sequence[Mapping[str, Any]], skip: set[tuple[str, int]] | None = None
    ) -> int:
        """Send ``rows`` (``skip``: ``(metric, step)`` pairs already there); returns the points sent."""
        from mlflow.entities import Metric  # pyright: ignore[reportMissingImports] (the track extra)

        run_id = self.open_run(run)
        now = int(time.time() * 1000)
        points = []
        for row in rows:
            step, values = metric_points(row)
            points += [
                Metric(k, v, now, step) for k, v in values.items() if not skip or (k, step) not in skip
            ]
        for start in range(0, len(points), 1000):  # MLflow takes at most 1000 metrics per batch
            self.client.log_batch(run_id, metrics=points[start : start + 1000])
        return len(points)

    def logged_points(self, run_id: str) -> set[tuple[str, int]]:
        """Every ``(metric, step)`` the MLflow run already holds."""
        keys = self.client.get_run(run_id).data.metrics
        return {(k, m.step) for k in keys for m in self.client.get_metric_history(run_id, k)}

    def finish(self, run: RunInfo, status: str) -> None:
        if run.key in self._runs:
            self.client.set_terminated(self._runs[run.key], "FINISHED" if status == "finished" else "FAILED")


# -- Weights & Biases ---------------------------------------------------------------------------------
def wandb_run_id(run: RunInfo) -> str:
    """A stable W&B run id for an rftlab run (the same after a resume, in any process)."""
    return "rftlab-" + hashlib.sha256(run.key.encode("utf-8")).hexdigest()[:24]


class WandbTracker:
    """Metric rows to W&B: offline files unless a key is set; one W&B run per rftlab run, kept open."""

    name = "wandb"

    def __init__(self, mode: str, folder: Path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                import wandb  # pyright: ignore[reportMissingImports] (the track extra)
            except ImportError:
                raise TrackerUnavailableError(
                    "wandb is not installed; install the track extra (pip install -e '.[track]')"
                ) from None
        self.wandb = wandb
        # wandb's Weave hint ("Use W&B Weave for improved LLM call tracing") ignores silent=True; it
        # would print once litellm or openai is imported (eval-protocol imports both)
        os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
        self.mode, self.dir = mode, folder
        self._runs: dict[str, Any] = {}

    def _open(self, run: RunInfo) -> Any:
        if run.key in self._runs:
            return self._runs[run.key]
        settings = self.wandb.Settings(
            mode=self.mode,  # pyright: ignore[reportArgumentType]
            console="off",
            save_code=False,
            silent=True,
            disable_git=True,
            x_disable_stats=True,
            x_disable_meta=True,
        )
        (self.dir / "wandb").mkdir(parents=True, exist_ok=True)
        tags = [f"{k}:{v}"[:64] for k, v in run.tags.items() if k != "run_key"]
        opened = self.wandb.init(
            project=run.experiment,
            name=run.run_id,
            id=wandb_run_id(run),
            dir=str(self.dir),
            tags=tags,
            config={**run.params, "rftlab": dict(run.tags)},
            settings=settings,
            reinit="create_new",
            resume="allow",
        )
        self._runs[run.key] = opened
        return opened

    def log_rows(self, run: RunInfo, rows: Sequence[Mapping[str, Any]]) -> None:
        opened = self._open(run)
        for row in rows:
            step, values = metric_points(row)
            opened.log(values, step=step)

    def finish(self, run: RunInfo, status: str) -> None:
        opened = self._runs.pop(run.key, None)
        if opened is not None:
            opened.finish(exit_code=0 if status == "finished" else 1)

    def close(self) -> None:
        """End every W&B run still open (the process exits; a resumed rftlab run reopens its W&B run)."""
        while self._runs:
            self._runs.popitem()[1].finish()


# -- sending a store's runs afterwards ------------------------------------------------------------------
@dataclass(frozen=True)
class Sent:
    """What :func:`backfill` did for one run and tracker."""

    tracker: str
    key: str
    rows: int
    points: int  # metric values sent (MLflow: only those it did not hold yet)


def backfill(runs: Sequence[Run], names: Sequence[str]) -> list[Sent]:
    """Send every row of ``runs`` (:class:`rftlab.runs.store.Run`) to the trackers ``names``, then mark each
    tracker run with the rftlab run's status when it has ended. MLflow receives only the ``(metric,
    step)`` points its run lacks, so a repeated backfill (or one after live tracking) sends nothing twice.
    A tracker that cannot be used raises :class:`TrackerUnavailableError`; nothing is swallowed here."""
    sent: list[Sent] = []
    for name in names:
        try:
            with _quiet():
                target = _make(name, _store_of(name))
        except TrackerUnavailableError:
            raise
        except Exception as exc:
            raise TrackerUnavailableError(f"{name}: {' '.join(redact_text(str(exc)).split())}") from None
        for run in runs:
            rows, info = run.metrics(), run_info(run.record)
            with _quiet():
                sent.append(Sent(name, info.key, len(rows), _send_all(target, info, rows)))
                if run.record.status != "running":
                    target.finish(info, run.record.status)
        if isinstance(target, WandbTracker):
            with _quiet():
                target.close()  # W&B completes a run's offline file only when the run ends
    return sent


def _send_all(target: Tracker, info: RunInfo, rows: Sequence[Mapping[str, Any]]) -> int:
    if isinstance(target, MlflowTracker):
        existing = target.find_run(info)
        skip = target.logged_points(existing) if existing is not None else set()
        return target.log_rows(info, rows, skip=skip)  # opens the run (tags, params) even without rows
    target.log_rows(info, rows)
    return sum(len(metric_points(row)[1]) for row in rows)
