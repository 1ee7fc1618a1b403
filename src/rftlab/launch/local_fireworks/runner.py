"""The epochs of a local RFT job: the uploaded evaluator, run by pytest against a local policy, writing
``rft-evalv3-<job>-epoch-<k>`` datasets (``-chunk-<n>`` when chunked) in the platform's layout.

Each epoch (each chunk of one) is one pytest process in the evaluator's unpacked code folder, as
eval-protocol runs an ``@evaluation_test`` outside the platform: ``EP_NO_UPLOAD=1`` and

    pytest <entryPoint> --ep-jsonl-path <the job's rows> --ep-output-dir <out>
           --ep-num-runs <responseCandidatesCount> --ep-completion-params '{"model": ..., "base_url": ...}'

with no credential in its environment (``evaluators.evaluator_env``). The rows eval-protocol writes to
``<out>/experiment_results/`` (one ``EvaluationRow`` per rollout, ``input_metadata.row_id`` and
``evaluation_result``) become the epoch dataset's one file ``eval_results_dataset.jsonl``. The policy is
the project's local OpenAI-compatible policy server (``rftlab.policies.server``), or any endpoint given
to the server; nothing is trained, so every epoch samples the same policy.

Chunking: with ``chunkSize`` -1 never; with ``chunkSize`` n when the dataset has more than n rows;
without it at 200 rows a chunk when the dataset has more than 300 (the SDK docstring's numbers). A chunked
epoch writes only ``-chunk-<n>`` datasets. A job resumed after a failure re-runs the epoch it failed in
from its first chunk (the partial chunks are replaced) and keeps the epochs before it.

Two platform outcomes on request, for the clients' tests (``rftlab serve fireworks --drop-chunk K:N``,
``--archive-epoch K``): chunk ``N`` of epoch ``K`` is never written (the other chunks and the job complete as
usual, so a download of the epoch misses a chunk), and a job that reaches epoch ``K`` becomes
``JOB_STATE_ARCHIVED`` with the epochs before it written. The REST pages list ``ARCHIVED`` among the job
states without saying when the platform archives a job or whether one resumes; here it is terminal and
does not resume (only ``FAILED`` does).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.runs.atomic import atomic_write_text

from . import jobs as jobs_api
from .evaluators import evaluator_env
from .state import ApiError, ControlPlane, now_iso, write_file

EPOCH_FILE = "eval_results_dataset.jsonl"
EPOCH_TIMEOUT_S = 1800.0
EVALUATOR_WAIT_S = 900.0


class JobFailure(Exception):
    """The job fails with ``code`` (a gRPC code name) and ``message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Archived(Exception):
    """The job is archived (``JOB_STATE_ARCHIVED``) at the epoch it reached."""


class Stop(Exception):
    """The job was cancelled (``cancelled``) or the server is stopping."""

    def __init__(self, cancelled: bool) -> None:
        super().__init__("cancelled" if cancelled else "stopping")
        self.cancelled = cancelled


@dataclass(frozen=True)
class Policy:
    """Where rollouts sample: a litellm ``model`` id at an OpenAI-compatible ``base_url``."""

    model: str
    base_url: str


def epoch_dataset_id(job_id: str, epoch: int, chunk: int | None = None) -> str:
    base = f"rft-evalv3-{job_id}-epoch-{epoch}"
    return base if chunk is None else f"{base}-chunk-{chunk}"


def chunks_of(rows: list[str], chunk_size: Any) -> list[list[str]] | None:
    """The rows split into chunks (module docstring), ``None`` when the epoch is not chunked."""
    if chunk_size == -1:
        return None
    size = (
        chunk_size if isinstance(chunk_size, int) and chunk_size > 0 else jobs_api.RUN_DEFAULTS["chunkSize"]
    )
    above = (
        chunk_size if isinstance(chunk_size, int) and chunk_size > 0 else jobs_api.RUN_DEFAULTS["chunkAbove"]
    )
    if len(rows) <= above:
        return None
    return [rows[i : i + size] for i in range(0, len(rows), size)]


@dataclass
class Evaluator:
    code_root: Path
    entry_point: str
    uid: str


class JobRunner:
    """Runs every job the plane starts or resumes, ``max_running`` at a time, each in its own thread.
    ``fail_epoch``: the first attempt of every job fails with ``RESOURCE_EXHAUSTED`` when it reaches that
    epoch (a stand-in for the platform-side, retryable failures of the field notes; resume continues).
    ``drop_chunk`` ``(K, N)``: chunk N of epoch K is never written; ``archive_epoch`` K: a job that reaches
    epoch K is archived (module docstring)."""

    def __init__(
        self,
        plane: ControlPlane,
        policy: Callable[[], Policy],
        *,
        max_running: int = 1,
        fail_epoch: int | None = None,
        drop_chunk: tuple[int, int] | None = None,
        archive_epoch: int | None = None,
        epoch_timeout_s: float = EPOCH_TIMEOUT_S,
        evaluator_wait_s: float = EVALUATOR_WAIT_S,
        log: Callable[..., None] = lambda *a, **k: None,
    ) -> None:
        self.plane, self.policy, self.log = plane, policy, log
        self.fail_epoch, self.epoch_timeout_s, self.evaluator_wait_s = (
            fail_epoch,
            epoch_timeout_s,
            evaluator_wait_s,
        )
        self.drop_chunk, self.archive_epoch = drop_chunk, archive_epoch
        self.slots = threading.Semaphore(max_running)
        self.stopping = threading.Event()
        self.threads: dict[tuple[str, str], threading.Thread] = {}
        self.procs: dict[tuple[str, str], subprocess.Popen] = {}
        self._lock = threading.Lock()

    # ---------------------------------------------------------------------------- control
    def changed(self, account: str, job_id: str) -> None:
        """The plane's hook: start a created or resumed job; stop the process of a cancelled one."""
        with self.plane.lock:
            record = self.plane.records.get(("jobs", account, job_id))
            state = record.get("state") if record else None
            cancel = bool(record and record.get("_cancel"))
        key = (account, job_id)
        with self._lock:
            if cancel or record is None:
                proc = self.procs.get(key)
                if proc is not None and proc.poll() is None:
                    _kill(proc)
                return
            alive = key in self.threads and self.threads[key].is_alive()
            if (
                state in ("JOB_STATE_CREATING", "JOB_STATE_PENDING")
                and not alive
                and not self.stopping.is_set()
            ):
                thread = threading.Thread(target=self._run, args=key, name=f"rftj-{job_id}", daemon=True)
                self.threads[key] = thread
                thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every job (each becomes FAILED/ABORTED, resumable) and wait for the threads."""
        self.stopping.set()
        with self._lock:
            for proc in self.procs.values():
                if proc.poll() is None:
                    _kill(proc)
            threads = list(self.threads.values())
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _check(self, account: str, job_id: str) -> dict[str, Any]:
        """The job's record, or ``Stop`` when it was cancelled or deleted or the server stops."""
        with self.plane.lock:
            record = self.plane.records.get(("jobs", account, job_id))
            if record is None or record.get("_cancel"):
                raise Stop(cancelled=True)
            if self.stopping.is_set():
                raise Stop(cancelled=False)
            return record

    def _wait(self, account: str, job_id: str, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._check(account, job_id)
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))

    # -------------------------------------------------------------------------------- a job
    def _run(self, account: str, job_id: str) -> None:
        try:
            jobs_api.set_state(self.plane, account, job_id, "JOB_STATE_PENDING")
            while not self.slots.acquire(timeout=0.05):
                self._check(account, job_id)
            try:
                self._attempt(account, job_id)
            finally:
                self.slots.release()
            jobs_api.set_state(self.plane, account, job_id, "JOB_STATE_COMPLETED")
            self.log("info", "job_completed", account=account, job=job_id)
        except JobFailure as exc:
            self._end(account, job_id, "JOB_STATE_FAILED", exc.code, exc.message)
        except Archived as exc:
            self._end(account, job_id, "JOB_STATE_ARCHIVED", "OK", str(exc))
        except Stop as exc:
            if exc.cancelled:
                self._end(account, job_id, "JOB_STATE_CANCELLED", "CANCELLED", "cancelled")
            else:
                self._end(
                    account,
                    job_id,
                    "JOB_STATE_FAILED",
                    "ABORTED",
                    "the local control plane stopped; resume the job",
                )
        except Exception as exc:  # a defect: the job fails with the reason, the log gets the traceback
            import traceback

            self.log("error", "job_crashed", account=account, job=job_id, traceback=traceback.format_exc())
            self._end(account, job_id, "JOB_STATE_FAILED", "INTERNAL", f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self.procs.pop((account, job_id), None)

    def _end(self, account: str, job_id: str, state: str, code: str, message: str) -> None:
        try:
            jobs_api.set_state(self.plane, account, job_id, state, code, message)
        except ApiError:  # deleted meanwhile
            return
        self.log("info", "job_ended", account=account, job=job_id, state=state, code=code)

    def _attempt(self, account: str, job_id: str) -> None:
        record = self._check(account, job_id)
        evaluator = self._evaluator(account, job_id, str(record.get("evaluator", "")))
        jobs_api.set_state(self.plane, account, job_id, "JOB_STATE_VALIDATING")
        rows = self._rows(account, str(record.get("dataset", "")))
        record = self._check(account, job_id)
        epochs = int((record.get("trainingConfig") or {}).get("epochs", jobs_api.RUN_DEFAULTS["epochs"]))
        jobs_api.set_state(self.plane, account, job_id, "JOB_STATE_RUNNING")
        for k in range(len(record.get("_epochs_done", [])), epochs):
            record = self._check(account, job_id)
            self._progress(account, job_id, k, epochs, 0.0, 0)  # jobProgress.epoch: the epoch now running
            if self.fail_epoch == k and int(record.get("_attempt", 1)) == 1:
                raise JobFailure(
                    "RESOURCE_EXHAUSTED",
                    f"no capacity to run epoch {k} (simulated by the local control plane's fail_epoch); "
                    "resume the job",
                )
            if self.archive_epoch == k:
                raise Archived(
                    f"archived at epoch {k} (simulated by the local control plane's archive_epoch)"
                )
            self._same_evaluator(account, evaluator)
            self._epoch(account, job_id, record, k, epochs, rows, evaluator)
        jobs_api.set_state(self.plane, account, job_id, "JOB_STATE_WRITING_RESULTS")
        with self.plane.lock:
            record = self.plane.get("jobs", account, job_id)
            record["jobProgress"] = {
                **record.get("jobProgress", {}),
                "epoch": max(epochs - 1, 0),
                "percent": 100,
            }
            self.plane.save("jobs", account, job_id)

    def _evaluator(self, account: str, job_id: str, name: str) -> Evaluator:
        """The job's evaluator once it is ACTIVE (waiting while it builds); a ``JobFailure`` otherwise."""
        ev_id = name.rsplit("/", 1)[-1]
        deadline = time.monotonic() + self.evaluator_wait_s
        while True:
            with self.plane.lock:
                record = dict(self.plane.records.get(("evaluators", account, ev_id)) or {})
            state = record.get("state")
            if not record:
                raise JobFailure("NOT_FOUND", f"evaluator {name} not found")
            if state == "ACTIVE":
                folder = self.plane.folder("evaluators", account, ev_id)
                return Evaluator(
                    folder / str(record["_code"]), str(record["entryPoint"]), str(record["_uid"])
                )
            if state == "BUILD_FAILED":
                why = (record.get("status") or {}).get("message", "")
                raise JobFailure("FAILED_PRECONDITION", f"evaluator {name} failed to build: {why}")
            if state != "BUILDING":
                raise JobFailure("FAILED_PRECONDITION", f"evaluator {name} has no code (state {state})")
            if time.monotonic() > deadline:
                raise JobFailure(
                    "DEADLINE_EXCEEDED", f"evaluator {name} still BUILDING after {self.evaluator_wait_s:g} s"
                )
            self._wait(account, job_id, 0.1)

    def _same_evaluator(self, account: str, evaluator: Evaluator) -> None:
        with self.plane.lock:
            now = [
                r
                for (k, a, _), r in self.plane.records.items()
                if k == "evaluators" and a == account and r.get("_uid") == evaluator.uid
            ]
        if not now or now[0].get("state") != "ACTIVE":
            raise JobFailure(
                "FAILED_PRECONDITION", "the job's evaluator was deleted or re-created while the job ran"
            )

    def _rows(self, account: str, name: str) -> list[str]:
        ds_id = name.rsplit("/", 1)[-1]
        with self.plane.lock:
            record = dict(self.plane.records.get(("datasets", account, ds_id)) or {})
        if not record:
            raise JobFailure("NOT_FOUND", f"dataset {name} not found")
        if record.get("state") != "READY":
            raise JobFailure(
                "FAILED_PRECONDITION", f"dataset {name} is {record.get('state')}: no file was uploaded"
            )
        folder = self.plane.folder("datasets", account, ds_id) / "files"
        lines = []
        for f in record.get("_files", []):
            lines += [ln for ln in (folder / f).read_text(encoding="utf-8").splitlines() if ln.strip()]
        if not lines:
            raise JobFailure("FAILED_PRECONDITION", f"dataset {name} has no rows")
        return lines

    # ------------------------------------------------------------------------------- epochs
    def _epoch(self, account, job_id, record, k, epochs, rows, evaluator) -> None:
        chunked = chunks_of(rows, record.get("chunkSize"))
        parts = chunked if chunked is not None else [rows]
        self._drop_epoch_datasets(account, job_id, k)
        for n, part in enumerate(parts):
            self._check(account, job_id)
            if chunked is not None and self.drop_chunk == (k, n):
                self.log("info", "chunk_dropped", account=account, job=job_id, epoch=k, chunk=n)
                self._progress(account, job_id, k, epochs, (n + 1) / len(parts), 0)
                continue
            results = self._pytest(account, job_id, record, part, evaluator, f"epoch-{k}-part-{n}")
            ds_id = epoch_dataset_id(job_id, k, n if chunked is not None else None)
            self._write_dataset(account, ds_id, str(record["name"]), results)
            self._progress(account, job_id, k, epochs, (n + 1) / len(parts), len(results))
        with self.plane.lock:
            current = self.plane.get("jobs", account, job_id)
            current["_epochs_done"] = sorted({*current.get("_epochs_done", []), k})
            self.plane.save("jobs", account, job_id)
        self.log("info", "epoch_done", account=account, job=job_id, epoch=k, chunks=len(parts))

    def _drop_epoch_datasets(self, account: str, job_id: str, k: int) -> None:
        prefix = epoch_dataset_id(job_id, k)
        with self.plane.lock:
            ids = [
                i
                for (kind, a, i) in self.plane.records
                if kind == "datasets" and a == account and (i == prefix or i.startswith(prefix + "-chunk-"))
            ]
        for ds_id in ids:
            self.plane.delete("datasets", account, ds_id)

    def _progress(self, account, job_id, k, epochs, fraction, outputs) -> None:
        with self.plane.lock:
            record = self.plane.get("jobs", account, job_id)
            progress = dict(record.get("jobProgress") or {})
            progress.update(epoch=k, percent=min(99, int(100 * (k + fraction) / epochs)))
            progress["outputRows"] = int(progress.get("outputRows", 0)) + outputs
            record["jobProgress"] = progress
            self.plane.save("jobs", account, job_id)

    def _write_dataset(self, account: str, ds_id: str, job_name: str, rows: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        write_file(self.plane.folder("datasets", account, ds_id) / "files" / EPOCH_FILE, text.encode("utf-8"))
        record = {
            "displayName": ds_id,
            "format": "FORMAT_UNSPECIFIED",
            "state": "READY",
            "status": {"code": "OK", "message": ""},
            "exampleCount": str(len(rows)),
            "sourceJobName": job_name,
            "_files": [EPOCH_FILE],
            "_rows": {EPOCH_FILE: len(rows)},
            "createTime": now_iso(),
        }
        self.plane.add("datasets", account, ds_id, record)

    def completion_params(self, record: dict[str, Any]) -> dict[str, Any]:
        """What the platform would inject into ``completion_params``: the model (here the local policy),
        and the job's sampling settings."""
        policy = self.policy()
        ip = record.get("inferenceParameters") or {}
        params: dict[str, Any] = {"model": policy.model, "base_url": policy.base_url}
        for ours, theirs in (
            ("temperature", "temperature"),
            ("maxOutputTokens", "max_tokens"),
            ("topP", "top_p"),
        ):
            if ours in ip:
                params[theirs] = ip[ours]
        return params

    def _pytest(self, account, job_id, record, rows, evaluator, label) -> list[dict[str, Any]]:
        """One pytest run of the evaluator on ``rows``: the rows eval-protocol wrote."""
        candidates = int((record.get("inferenceParameters") or {}).get("responseCandidatesCount", 1))
        work = Path(tempfile.mkdtemp(prefix=f"rftlab-fw-{label}-"))
        try:
            atomic_write_text(work / "rows.jsonl", "\n".join(rows) + "\n")
            (work / "home").mkdir()
            argv = [
                sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", evaluator.entry_point,
                "--ep-jsonl-path", str(work / "rows.jsonl"), "--ep-output-dir", str(work / "out"),
                "--ep-num-runs", str(candidates), "--ep-completion-params", json.dumps(self.completion_params(record)),
            ]  # fmt: skip
            if isinstance(record.get("maxConcurrentRollouts"), int):
                argv += ["--ep-max-concurrent-rollouts", str(record["maxConcurrentRollouts"])]
            stdout = self._spawn(
                account, job_id, argv, evaluator.code_root, evaluator_env(evaluator.code_root, work / "home")
            )
            results = [
                json.loads(line)
                for f in sorted((work / "out" / "experiment_results").glob("*.jsonl"))
                for line in f.read_text(encoding="utf-8").splitlines()
                if line.strip()
            ]
        finally:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
        if not results:
            tail = " | ".join(stdout.strip().splitlines()[-8:])[-1500:]
            raise JobFailure("INTERNAL", f"the evaluator wrote no rollouts for {label}: {tail}")
        return results

    def _spawn(self, account: str, job_id: str, argv: list[str], cwd: Path, env: dict[str, str]) -> str:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        with self._lock:
            self.procs[(account, job_id)] = proc
        try:
            out, _ = proc.communicate(timeout=self.epoch_timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.communicate()
            raise JobFailure(
                "DEADLINE_EXCEEDED", f"the evaluator ran over {self.epoch_timeout_s:g} s"
            ) from None
        finally:
            with self._lock:
                self.procs.pop((account, job_id), None)
        self._check(account, job_id)  # a cancel or a stop killed it: say so, not "no rollouts"
        return out


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
