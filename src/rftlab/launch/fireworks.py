"""The Fireworks RFT launcher: an arm spec → dataset + job on Fireworks → a run in the run store, and a
poller that keeps the run folder in step with the job.

    launcher = FireworksLauncher(account_id="acct")                 # key from FIREWORKS_API_KEY
    plan = launcher.plan(spec)                                      # the exact commands, nothing run
    ref = launcher.launch(spec, root="runs")                        # preflight, dataset, job, run.json
    status = launcher.poll(ref)                                     # one look: RunStatus
    launcher.watch(ref, every=60, stall_after=1800)                 # until a terminal state or a stall

What the run folder gets (the run store of ``README.md``): ``run.json`` with the job name, dataset and evaluator
ids; ``provider/job_create.json``, ``provider/job_snapshots.jsonl`` (every polled job JSON, in order),
``provider/firectl_calls.jsonl`` (redacted argv, exit code, time of every call), ``provider/epoch-<k>/``
(each downloaded per-epoch rollout file, raw); ``rollouts/epoch-<k>.jsonl`` (one record per rollout) and
one ``metrics.jsonl`` row per epoch computed from those rollouts — the same metric names a local run
writes. Every write is atomic, so an interrupted ``watch`` loses nothing and a re-run continues from the
first epoch not yet in ``metrics.jsonl``. A stall is reported with the diagnosis steps of
``docs/platforms.md`` §1.7 and never cancels the job.

Failures and bad answers (docs/platforms.md §1.8):

- a launch that fails before the job exists (no firectl, a refused dataset or job) marks its run
  ``failed`` with the reason, so nothing stays ``running`` for good; re-launching starts a new run (a job
  that did get created under the planned id is found by ``get`` and reused);
- two launches or polls of one run at once: the second gets ``RunBusyError`` naming the run
  (``rftlab.runs.locks``);
- every number read from the service is validated (``firectl.job_progress``): an epoch outside
  ``0..<spec epochs>``, a percent outside ``0..100`` or a non-finite accelerator time is ignored and named
  in the poll's message, never used;
- polls are at least ``MIN_POLL_INTERVAL_S`` apart; after the job reports COMPLETED the epoch datasets
  get ``dataset_grace`` seconds to appear, then the run finishes as completed with the missing epochs
  named in ``run.json`` (``provider.missing_epochs``).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.launch.firectl import (
    MAX_EPOCHS,
    TERMINAL_JOB_STATES,
    Firectl,
    FirectlError,
    accelerator_seconds,
    evaluator_name,
    job_create_flags,
    job_id_for,
    job_progress,
    job_state,
    output_metrics,
    rollout_dataset_id,
    status_message,
)
from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.runs import RunStore, load_run
from rftlab.runs.secrets import redact_text
from rftlab.types import RunRef, RunStatus

BACKEND = "fireworks"
MIN_POLL_INTERVAL_S = 5.0  # each poll is one or more firectl calls to the Fireworks API
DATASET_GRACE_S = 600.0  # after COMPLETED, how long the per-epoch datasets may take to appear
KEY_ENV = "FIREWORKS_API_KEY"
ACCOUNT_ENV = "FIREWORKS_ACCOUNT_ID"
# The @evaluation_test entry of each (experiment, rollout interface), relative to the staged evaluator folder.
ENTRY_POINTS = {
    ("spectrum_memory", "turn"): "rftlab/rollout/eval_entries/spectrum_turn.py::test_spectrum_turn",
    ("spectrum_memory", "mcp"): "rftlab/rollout/eval_entries/spectrum_mcp_eval.py::test_spectrum_mcp",
    ("poker", "mcp"): "rftlab/rollout/eval_entries/poker_mcp_eval.py::test_poker_mcp",
}
EVALUATOR_REQUIREMENTS = (
    "eval-protocol==0.3.33",
    "numpy>=2.4",
    "pydantic>=2.14",
    "jinja2>=3.1",
)
STALL_ADVICE = (
    "No progress (state, epoch, percent, accelerator seconds, epoch datasets) for {duration}. "
    "This is often Fireworks capacity, not this code: (1) check whether any deployment exists for the job "
    "('firectl deployment list') and whether acceleratorSeconds is non-empty; (2) launch an independent "
    "control job (known-good evaluator, tiny dataset, 1 epoch, same base model); if it stalls too, wait or "
    "change base model/region; only if it progresses debug the evaluator (local pytest against the policy "
    "server, then re-validate the dataset). The job was NOT cancelled. Escalate with the job id, base "
    "model, elapsed time, last progress key and status.message."
)


class LaunchRefused(RuntimeError):
    """The launch did not start anything that costs money (preflight failed, missing key, conflict)."""


@dataclass(frozen=True)
class LaunchPlan:
    """The commands a launch runs, in order (argv with keys redacted) and the ids it uses."""

    job_id: str
    dataset_id: str
    evaluator: str
    commands: list[list[str]]
    warnings: list[str] = field(default_factory=list)
    key_via: str = "auth-file"  # how each firectl command gets the key (rftlab.launch.firectl)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "dataset_id": self.dataset_id,
            "evaluator": self.evaluator,
            "commands": self.commands,
            "warnings": self.warnings,
            "key_via": self.key_via,
        }


@dataclass
class WatchResult:
    """How ``watch`` (or one ``step``) ended: ``status`` is the last poll; ``stalled`` when it stopped on a
    stall; ``missing_epochs`` the epochs whose datasets never appeared (the run finished without them)."""

    status: RunStatus
    epochs_recorded: list[int]
    stalled: bool = False
    polls: int = 0
    missing_epochs: list[int] = field(default_factory=list)
    done: bool = False  # the run is finished (or failed): nothing more to poll


def _default_preflight(spec: SpectrumArmSpec):
    from rftlab.launch.spectrum.preflight import spectrum_preflight

    return spectrum_preflight(spec)


@dataclass
class FireworksLauncher:
    """``rftlab.types.Launcher`` for Fireworks RFT. The key comes from ``$FIREWORKS_API_KEY`` only."""

    account_id: str | None = None
    style: str = "noun-verb"
    key_via: str = "auth-file"  # how firectl gets the key (rftlab.launch.firectl module docstring)
    firectl_factory: Callable[..., Firectl] = Firectl
    preflight: Callable[[SpectrumArmSpec], Any] | None = None  # None: rftlab.launch.spectrum.preflight
    dataset_rows: Callable[[SpectrumArmSpec], Iterable[Mapping[str, Any]]] | None = None
    backend: str = field(default=BACKEND, init=False)

    def _account(self) -> str:
        account = self.account_id or os.environ.get(ACCOUNT_ENV, "")
        if not account:
            raise LaunchRefused(f"no Fireworks account id: pass --account-id or set {ACCOUNT_ENV}")
        return account

    def _firectl(
        self, log: Callable[[dict[str, Any]], None] | None = None, *, need_key: bool = True
    ) -> Firectl:
        key = os.environ.get(KEY_ENV) or None
        if need_key and not key:
            raise LaunchRefused(f"{KEY_ENV} is not set: export it in your shell (never write it to a file)")
        return self.firectl_factory(
            account_id=self._account(), api_key=key, style=self.style, log=log, key_via=self.key_via
        )

    # ------------------------------------------------------------------------------------ plan
    def plan(self, spec: SpectrumArmSpec, dataset_path: str | Path = "<dataset.jsonl>") -> LaunchPlan:
        """The exact commands ``launch`` runs, without running anything (``--dry-run``)."""
        fw = spec.fireworks
        if fw is None:
            raise LaunchRefused(
                f"arm {spec.arm!r} has no 'fireworks' section: it runs only on the local backend"
            )
        account = self.account_id or os.environ.get(ACCOUNT_ENV) or "<account-id>"
        # with --key-via argv the key is shown as its variable (a plan is printed; a printed key would be a
        # leak); by default firectl reads it from a private auth file and the commands carry no key at all
        fc = self.firectl_factory(
            account_id=account, api_key="$FIREWORKS_API_KEY", style=self.style, key_via=self.key_via
        )
        fc.exe = fc.exe or shutil.which("firectl") or "firectl"
        job_id = job_id_for(spec)
        flags = job_create_flags(spec, account_id=account)
        commands = [fc.argv("dataset", "create", fw.dataset_id, str(dataset_path))]
        warnings = []
        missing = missing_entry(spec.experiment, fw.interface)
        if missing:
            warnings.append(missing)
        else:
            commands.append(evaluator_upload_argv(spec.experiment, fw.interface, evaluator_id(spec, account)))
        commands.append(fc.argv("rftj", "create", "--job-id", job_id, *flags))
        return LaunchPlan(
            job_id, fw.dataset_id, evaluator_name(spec, account), commands, warnings, key_via=self.key_via
        )

    # ---------------------------------------------------------------------------------- launch
    def launch(
        self, spec: SpectrumArmSpec, *, root: Path | str = "runs", resume: bool = True, force: bool = False
    ) -> RunRef:
        """Preflight, then dataset + job, recorded in a run folder. Reuses a finished run of the same spec
        on Fireworks; with ``resume`` continues an unfinished one (never creates a second job for it)."""
        if spec.fireworks is None:
            raise LaunchRefused(
                f"arm {spec.arm!r} has no 'fireworks' section: it runs only on the local backend"
            )
        missing = missing_entry(spec.experiment, spec.fireworks.interface)
        if missing:
            raise LaunchRefused(missing)
        self._firectl(need_key=True)  # fail on a missing key or account before any work
        store = RunStore(root)
        run, origin = store.start_or_reuse(
            spec.experiment, spec.arm, spec.to_dict(), backend=BACKEND, resume=resume
        )
        ref = RunRef(spec.experiment, spec.arm, run.run_id, run.path, BACKEND)
        if origin == "reused" or run.record.provider.get("job_id"):
            run.release()
            return ref
        try:
            self._create_job(spec, run)
        except BaseException as exc:
            # Nothing may stay "running" for good: the job does not exist (or was never recorded), so the
            # run is over. A re-launch starts a new run and finds a job created under the planned id.
            if not run.finished:
                run.finish("failed", error=_failure_reason(exc))
            raise
        finally:
            run.release()
        return ref

    def _create_job(self, spec: SpectrumArmSpec, run) -> None:
        """Preflight, dataset and job of a claimed run (``launch``): raises on any failure."""
        assert spec.fireworks is not None
        report = (self.preflight or _default_preflight)(spec)
        report_dict = report.to_dict() if hasattr(report, "to_dict") else dict(report)
        run.save_provider_snapshot("preflight.json", report_dict)
        if not getattr(report, "passed", report_dict.get("passed")):
            failed = [c.get("name", "?") for c in report_dict.get("checks", []) if not c.get("passed")]
            run.finish(
                "failed", error=f"preflight failed: {', '.join(failed) or 'see provider/preflight.json'}"
            )
            raise LaunchRefused(
                f"preflight failed ({', '.join(failed)}); nothing was created on Fireworks. "
                f"Details: {run.path / 'provider' / 'preflight.json'}"
            )
        fc = self._firectl(_call_logger(run))
        fw = spec.fireworks
        job_id = job_id_for(spec)

        # dataset: create it unless it already exists
        rows = list(self.dataset_rows(spec) if self.dataset_rows else default_dataset_rows(spec))
        dataset_file = run.save_provider_snapshot(
            "dataset.jsonl", "".join(json.dumps(r) + "\n" for r in rows)
        )
        try:
            existing = fc.dataset_get(fw.dataset_id)
        except FirectlError:
            existing = None
        if existing is None:
            fc.dataset_create(fw.dataset_id, dataset_file)

        # job: reuse the planned id only when its configuration matches the spec
        flags = job_create_flags(
            spec, account_id=fc.account_id, wandb_api_key=os.environ.get("WANDB_API_KEY")
        )
        try:
            job = fc.job_get(job_id)
        except FirectlError:
            job = None
        if job is not None:
            if not isinstance(job, Mapping):
                raise LaunchRefused(f"firectl get of job {job_id!r} returned JSON that is not an object")
            mismatch = _config_mismatch(job, spec, fc.account_id)
            if mismatch:
                raise LaunchRefused(
                    f"a Fireworks job {job_id!r} already exists with a different configuration ({mismatch}); "
                    "cancel or delete it, or change the spec"
                )
        else:
            job = fc.job_create(job_id, flags)
            if not isinstance(job, Mapping):
                raise LaunchRefused(
                    f"firectl create of job {job_id!r} returned JSON that is not an object; check "
                    f"'firectl rftj get {job_id}' before launching again"
                )
        run.save_provider_snapshot("job_create.json", job)
        run.set_provider(
            job_id=job_id,
            job_name=str(job.get("name") or job_id)[:512],
            dataset_id=fw.dataset_id,
            evaluator=evaluator_name(spec, fc.account_id),
            account_id=fc.account_id,
        )

    # ------------------------------------------------------------------------------------ poll
    def poll(self, run: RunRef) -> RunStatus:
        """One look at the job: snapshot it into the run folder and return its status. A firectl failure
        or malformed answer comes back as state ``"unknown"`` with the reason (never raised); numbers
        outside the spec's range are ignored and named in the message."""
        handle = load_run(run.path)
        job_id = handle.record.provider.get("job_id")
        if not job_id:
            return RunStatus("failed", message="the run has no Fireworks job id (launch did not complete)")
        fc = self._firectl(_call_logger(handle))
        try:
            job = fc.job_get(job_id)
        except FirectlError as exc:
            return RunStatus("unknown", message=str(exc))
        if not isinstance(job, Mapping):
            return RunStatus("unknown", message="firectl returned JSON that is not an object")
        _append_snapshot(handle, job)
        return _status_of(job, handle.record.spec.get("epochs"))

    # ----------------------------------------------------------------------------------- watch
    def step(
        self,
        run: RunRef,
        *,
        dataset_grace: float = DATASET_GRACE_S,
        clock: Callable[[], float] = time.time,
    ) -> WatchResult:
        """One poll and everything it allows: record every finished epoch not yet recorded; finish the run
        when the job ended (a completed job whose epoch datasets are missing after ``dataset_grace``
        seconds finishes without them, naming them). ``done`` when nothing is left to poll."""
        handle = load_run(run.path)
        if handle.finished:
            return WatchResult(_recorded_status(handle), _recorded_epochs(handle), done=True)
        status = self.poll(run)
        handle = load_run(run.path)
        if status.state == "unknown":
            return WatchResult(status, _recorded_epochs(handle), polls=1)
        if status.state == "failed" and not handle.record.provider.get("job_id"):
            handle.finish("failed", error=status.message)
            return WatchResult(status, [], polls=1, done=True)
        done_epochs = _finished_epochs(status)
        recorded = self._record_epochs(handle, done_epochs)
        missing = [k for k in done_epochs if k not in recorded]
        handle = load_run(run.path)
        if not status.terminal:
            return WatchResult(status, recorded, polls=1)
        if status.state != "completed":
            handle.finish("failed", error=f"Fireworks job {status.state}: {status.message}".strip())
            return WatchResult(status, recorded, polls=1, done=True)
        if missing:
            seen = handle.record.provider.get("completed_seen_at")
            if not isinstance(seen, int | float) or isinstance(seen, bool):
                handle.set_provider(completed_seen_at=clock())
                seen = clock()
            waited = clock() - float(seen)
            if waited < dataset_grace:
                note = (
                    f"completed; waiting for the datasets of epoch(s) {missing} "
                    f"({waited:.0f} of {dataset_grace:.0f} s grace)"
                )
                return WatchResult(_with_message(status, note), recorded, polls=1, missing_epochs=missing)
            note = (
                f"completed, but the datasets of epoch(s) {missing} did not appear within {dataset_grace:.0f} s "
                "of completion; the run is finished without them (provider.missing_epochs in run.json)"
            )
            handle.set_provider(missing_epochs=missing)
            handle.finish("finished")
            return WatchResult(
                _with_message(status, note), recorded, polls=1, missing_epochs=missing, done=True
            )
        handle.finish("finished")
        return WatchResult(status, recorded, polls=1, done=True)

    def watch(
        self,
        run: RunRef,
        *,
        every: float = 60.0,
        stall_after: float = 1800.0,
        max_errors: int = 5,
        dataset_grace: float = DATASET_GRACE_S,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] | None = None,
        on_status: Callable[[WatchResult], None] | None = None,
        max_polls: int | None = None,
    ) -> WatchResult:
        """Poll until a terminal state, recording every finished epoch's rollouts and metrics (``step``).
        Polls are ``max(every, MIN_POLL_INTERVAL_S)`` apart. Stops (without cancelling) after
        ``stall_after`` seconds with no change in the progress key, or after ``max_errors`` consecutive
        failed polls; both leave the run resumable. ``on_status`` sees every step; ``max_polls`` stops after
        that many (``poll --once`` is ``max_polls=1``). While it runs the run is claimed: a second watch of
        it refuses (``RunBusyError``)."""
        for name, value in (("every", every), ("stall_after", stall_after), ("dataset_grace", dataset_grace)):
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
        if stall_after <= 0:
            raise ValueError("stall_after must be > 0 seconds")
        interval = max(float(every), MIN_POLL_INTERVAL_S)
        sleep = sleep or time.sleep
        handle = load_run(run.path)
        if handle.finished:
            return WatchResult(_recorded_status(handle), _recorded_epochs(handle), done=True)
        handle.claim("polled")
        try:
            last_key, since, errors, polls = None, clock(), 0, 0
            while True:
                result = self.step(run, dataset_grace=dataset_grace, clock=clock)
                polls += 1
                result.polls = polls
                if on_status is not None:
                    on_status(result)
                if result.done or (max_polls is not None and polls >= max_polls):
                    return result
                status = result.status
                if status.state == "unknown":
                    errors += 1
                    if errors >= max_errors:
                        return result
                    sleep(interval)
                    continue
                errors = 0
                if (
                    status.state != "completed"
                ):  # after completion the grace period decides, not the stall rule
                    key = (status.provider.get("progress_key"), tuple(result.epochs_recorded))
                    if key != last_key:
                        last_key, since = key, clock()
                    elif clock() - since > stall_after:
                        message = STALL_ADVICE.format(duration=_duration(stall_after))
                        stalled = RunStatus(
                            "running", status.progress, status.total, message, status.provider
                        )
                        return WatchResult(stalled, result.epochs_recorded, stalled=True, polls=polls)
                sleep(interval)
        finally:
            handle.release()

    def _record_epochs(self, handle, epochs: Sequence[int]) -> list[int]:
        """Download and record every epoch in ``epochs`` not yet in ``metrics.jsonl``; returns the
        recorded epochs after the attempt (a dataset not available yet is simply tried again later)."""
        have = set(_recorded_epochs(handle))
        job_id = handle.record.provider["job_id"]
        fc = self._firectl(_call_logger(handle))
        for epoch in epochs:
            if epoch in have:
                continue
            rows = _download_epoch(fc, handle, job_id, epoch)
            if rows is None:
                break  # epochs are recorded in order
            records = [_rollout_record(row, i) for i, row in enumerate(rows)]
            if not (handle.path / "rollouts" / f"epoch-{epoch}.jsonl").exists():
                handle.write_rollouts(epoch, records)
            handle.append_metrics({"step": epoch, "epoch": epoch, **epoch_metrics(records)})
            have.add(epoch)
        return sorted(have)


# ----------------------------------------------------------------------------------- helpers


def default_dataset_rows(spec: SpectrumArmSpec) -> Iterable[Mapping[str, Any]]:
    """The arm's eval-protocol rows (one per row id; the band comes from the env's per-row seed)."""
    from rftlab.rollout.spectrum.dataset import dataset_rows

    return dataset_rows(spec.rows, prompt=spec.prompt, memory=spec.memory, prefix=spec.row_prefix)


def evaluator_id(spec: SpectrumArmSpec, account_id: str) -> str:
    """The evaluator id (last path part of the evaluator resource)."""
    return evaluator_name(spec, account_id).rsplit("/", 1)[-1]


def missing_entry(experiment: str, interface: str) -> str | None:
    """Why this experiment/interface has no evaluator to upload yet (``None`` when its entry module exists
    in this package): a job pointing at an evaluator that was never uploaded would only fail on Fireworks."""
    import rftlab

    entry = ENTRY_POINTS.get((experiment, interface))
    if entry is None:
        return f"no @evaluation_test entry for experiment {experiment!r} with interface {interface!r}"
    module_file = Path(rftlab.__file__).parent.parent / entry.split("::", 1)[0]
    if not module_file.is_file():
        return (
            f"the evaluator entry {entry} is not built yet: nothing can be uploaded or launched for "
            f"{experiment!r} on the {interface!r} interface"
        )
    return None


def evaluator_upload_argv(
    experiment: str, interface: str, ev_id: str, exe: str = "eval-protocol"
) -> list[str]:
    """``eval-protocol upload`` of the interface's entry with an explicit ``--id`` (never rely on id
    normalisation, docs/platforms.md §1.9) and an explicit empty ``--env-file`` (so no ``.env`` secret is
    uploaded, G11). Never ``create rft --dry-run``: it is not dry (G8)."""
    entry = ENTRY_POINTS.get((experiment, interface))
    if entry is None:
        raise LaunchRefused(f"no evaluator entry for experiment {experiment!r} with interface {interface!r}")
    return [exe, "upload", "--entry", entry, "--id", ev_id, "--env-file", ".env.empty",
            "--force", "--yes"]  # fmt: skip


def stage_evaluator(package_dir: Path, staging: Path) -> Path:
    """Lay out a clean evaluator folder for ``eval-protocol upload`` (which tars the cwd): the ``rftlab``
    package sources, a pinned ``requirements.txt`` and an empty env file — and nothing else (no ``.env``)."""
    staging.mkdir(parents=True, exist_ok=True)
    if any(staging.iterdir()):
        raise ValueError(f"{staging} is not empty: stage the evaluator into a fresh folder")
    shutil.copytree(
        package_dir,
        staging / "rftlab",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".env*"),
    )
    (staging / "requirements.txt").write_text("\n".join(EVALUATOR_REQUIREMENTS) + "\n", encoding="utf-8")
    (staging / ".env.empty").write_text("", encoding="utf-8")
    return staging


def upload_evaluator(
    spec: SpectrumArmSpec,
    account_id: str,
    *,
    runner: Callable[..., Any] | None = None,
    exe: str | None = None,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """Stage the evaluator and run ``eval-protocol upload`` in the staging folder, with an environment
    holding only PATH, HOME and the Fireworks key. Returns the redacted call record."""
    import subprocess

    import rftlab

    fw = spec.fireworks
    if fw is None:
        raise LaunchRefused(f"arm {spec.arm!r} has no 'fireworks' section")
    key = os.environ.get(KEY_ENV)
    if not key:
        raise LaunchRefused(f"{KEY_ENV} is not set: export it in your shell (never write it to a file)")
    exe = exe or shutil.which("eval-protocol") or "eval-protocol"
    argv = evaluator_upload_argv(spec.experiment, fw.interface, evaluator_id(spec, account_id), exe)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), KEY_ENV: key,
           ACCOUNT_ENV: account_id, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rftlab-evaluator-") as tmp:
        staging = stage_evaluator(Path(rftlab.__file__).parent, Path(tmp) / "evaluator")
        run = runner or subprocess.run
        try:
            proc = run(
                argv, cwd=staging, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError:
            raise LaunchRefused(
                f"cannot run {exe!r}: install the fireworks extra (pip install -e '.[fireworks]')"
            ) from None
        except subprocess.TimeoutExpired:
            raise LaunchRefused(f"eval-protocol upload timed out after {timeout:g} s") from None
    record = {
        "argv": argv,
        "returncode": proc.returncode,
        "stdout": proc.stdout.replace(key, "***")[-2000:],
        "stderr": proc.stderr.replace(key, "***")[-2000:],
    }
    if proc.returncode != 0:
        raise LaunchRefused(
            f"eval-protocol upload failed (exit {proc.returncode}): {record['stderr'][-500:]}"
        )
    return record


def _call_logger(handle) -> Callable[[dict[str, Any]], None]:
    path = handle.path / "provider" / "firectl_calls.jsonl"

    def log(record: dict[str, Any]) -> None:
        existing = path.read_text(encoding="utf-8") if path.exists() else ""
        handle.save_provider_snapshot("firectl_calls.jsonl", existing + json.dumps(record) + "\n")

    return log


def _append_snapshot(handle, job: Mapping[str, Any]) -> None:
    path = handle.path / "provider" / "job_snapshots.jsonl"
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    handle.save_provider_snapshot("job_snapshots.jsonl", existing + json.dumps(job, sort_keys=True) + "\n")
    handle.save_provider_snapshot("fireworks_job.json", job)


_STATE_MAP = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "EXPIRED": "failed",
    "EARLY_STOPPED": "failed",
    "CANCELLED": "cancelled",
    "DELETED": "cancelled",
    "RUNNING": "running",
    "WRITING_RESULTS": "running",
}


def _spec_epochs(epochs: Any) -> int | None:
    """The spec's epoch count when it is a plausible one (1..MAX_EPOCHS), else ``None``."""
    if isinstance(epochs, int) and not isinstance(epochs, bool) and 1 <= epochs <= MAX_EPOCHS:
        return epochs
    return None


def _status_of(job: Mapping[str, Any], epochs: Any) -> RunStatus:
    """The job's status; every number is validated against the spec (``firectl.job_progress``)."""
    state = job_state(job)
    total = _spec_epochs(epochs)
    progress = job_progress(job, total)
    problems = list(progress["problems"])
    accel = accelerator_seconds(job, problems)
    mapped = _STATE_MAP.get(state, "pending" if state not in TERMINAL_JOB_STATES else "failed")
    finished = total if state == "COMPLETED" else progress["epoch"]
    provider = {
        "state": state,
        "epoch": progress["epoch"],
        "percent": progress["percent"],
        "accelerator_seconds": accel,
        "output_metrics": output_metrics(job),
        "progress_key": [state, progress["epoch"], progress["percent"], sorted(accel.items())],
        "problems": problems,
    }
    message = status_message(job)
    if problems:
        message = "; ".join([message, *problems]) if message else "; ".join(problems)
    return RunStatus(mapped, finished, total, message, provider)


def _duration(seconds: float) -> str:
    """``45 s``, ``30 min`` or ``2.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _with_message(status: RunStatus, note: str) -> RunStatus:
    message = f"{note}; {status.message}" if status.message else note
    return RunStatus(status.state, status.progress, status.total, message, status.provider)


def _finished_epochs(status: RunStatus) -> list[int]:
    """Epochs whose rollout datasets should exist: all of them once completed, else those before the
    current ``jobProgress.epoch`` (validated: never more than the spec's epochs)."""
    if status.progress is None:
        return []
    return list(range(min(int(status.progress), status.total or MAX_EPOCHS)))


def _failure_reason(exc: BaseException) -> str:
    """One line for ``run.json``'s ``error`` (keys scrubbed)."""
    if isinstance(exc, KeyboardInterrupt):
        return "launch interrupted before the Fireworks job was recorded"
    text = " ".join(redact_text(str(exc)).split()) or type(exc).__name__  # redact, then fold, then cut
    return f"launch failed before the job existed: {text}"[:2000]


def _download_epoch(fc: Firectl, handle, job_id: str, epoch: int) -> list[dict[str, Any]] | None:
    """Rows of epoch ``epoch``'s rollout dataset (plain id, else every chunk listed with its prefix), kept
    raw under ``provider/epoch-<k>/``; ``None`` when it is not available yet."""
    ds_id = rollout_dataset_id(job_id, epoch)
    with tempfile.TemporaryDirectory(prefix="rftlab-dl-") as tmp:
        files: list[Path] = []
        try:
            files = fc.dataset_download(ds_id, Path(tmp) / ds_id)
        except FirectlError:
            files = []
        if not files:  # chunked datasets: rft-evalv3-<job>-epoch-<k>-chunk-<n>
            try:
                listing = fc.dataset_list()
            except FirectlError:
                return None
            for chunk in sorted(_dataset_ids(listing)):
                if chunk.startswith(ds_id + "-chunk-"):
                    try:
                        files += fc.dataset_download(chunk, Path(tmp) / chunk)
                    except FirectlError:
                        return None
        if not files:
            return None
        rows: list[dict[str, Any]] = []
        for i, f in enumerate(files):
            text = f.read_text(encoding="utf-8", errors="replace")
            safe = re.sub(r"[^A-Za-z0-9._-]", "_", f.name)[:100]
            handle.save_provider_snapshot(f"epoch-{epoch}-{i}-{safe}", text)
            rows += _parse_rows(text)
        return rows


def _dataset_ids(listing: Any) -> list[str]:
    items = listing.get("datasets", []) if isinstance(listing, Mapping) else listing
    out = []
    for item in items if isinstance(items, list) else []:
        name = item.get("name") if isinstance(item, Mapping) else item
        if isinstance(name, str):
            out.append(name.rsplit("/", 1)[-1])
    return out


def _parse_rows(text: str) -> list[dict[str, Any]]:
    """JSON objects of a JSONL text; a malformed line becomes ``{"_unparseable": <line number>}`` so it
    is counted (as a rollout without a score), never silently dropped."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        rows.append(row if isinstance(row, dict) else {"_unparseable": number})
    return rows


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _rollout_record(row: Mapping[str, Any], index: int) -> dict[str, Any]:
    """One rollout of a downloaded ``EvaluationRow``: row id, score and per-metric values (tolerant of
    missing keys and of metrics given as ``{"score": x}`` or bare numbers)."""
    meta = row.get("input_metadata") if isinstance(row.get("input_metadata"), Mapping) else {}
    result = row.get("evaluation_result") if isinstance(row.get("evaluation_result"), Mapping) else {}
    metrics: dict[str, float] = {}
    raw_metrics = result.get("metrics") if isinstance(result.get("metrics"), Mapping) else {}
    for name, value in raw_metrics.items():
        v = _finite(value.get("score", value.get("value"))) if isinstance(value, Mapping) else _finite(value)
        if v is not None:
            metrics[str(name)] = v
    return {
        "index": index,
        "row_id": meta.get("row_id"),
        "reward": _finite(result.get("score")),
        "metrics": metrics,
        "unparseable": row.get("_unparseable"),
    }


def epoch_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-epoch metrics from rollout records: mean reward, the mean of every evaluator metric, group
    (row id) statistics of the reward — the unit is the epoch, rollouts are inputs to its means."""
    scored = [r for r in records if r.get("reward") is not None]
    out: dict[str, Any] = {
        "rollouts": len(records),
        "rollouts_without_score": len(records) - len(scored),
        "reward": _mean([r["reward"] for r in scored]),
    }
    names: dict[str, None] = {}
    for r in records:
        names.update(dict.fromkeys(r.get("metrics", {})))
    for name in names:
        if name in out:
            continue
        out[name] = _mean([r["metrics"][name] for r in records if name in r.get("metrics", {})])
    groups: dict[Any, list[float]] = {}
    for r in scored:
        groups.setdefault(r.get("row_id"), []).append(r["reward"])
    sds = [_sd(v) for v in groups.values() if len(v) > 1]
    out["groups"] = len(groups)
    out["group_reward_sd"] = _mean(sds)
    out["frac_zero_var_groups"] = _mean([1.0 if sd == 0.0 else 0.0 for sd in sds])
    return out


def _mean(xs: Sequence[float]) -> float | None:
    """The mean, or ``None`` (JSON null) for an epoch with no values: a missing metric is not a zero."""
    return sum(xs) / len(xs) if xs else None


def _sd(xs: Sequence[float]) -> float:
    mu = sum(xs) / len(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1))


def _recorded_epochs(handle) -> list[int]:
    return sorted({int(row["epoch"]) for row in handle.metrics() if "epoch" in row})


def _recorded_status(handle) -> RunStatus:
    """The status a finished run was left in (a cancelled job's run is ``failed`` with that reason)."""
    error = handle.record.error or ""
    if handle.record.status == "finished":
        state = "completed"
    elif error.startswith("Fireworks job cancelled"):
        state = "cancelled"
    else:
        state = "failed"
    return RunStatus(state, message=error)


def _config_mismatch(job: Mapping[str, Any], spec: SpectrumArmSpec, account_id: str) -> str:
    """Which recorded settings of an existing job differ from the spec (empty when they match)."""
    fw = spec.fireworks
    assert fw is not None
    tc = job.get("trainingConfig") or job.get("training_config") or {}
    ip = job.get("inferenceParameters") or job.get("inference_parameters") or {}
    expected = {
        "epochs": (tc.get("epochs"), spec.epochs),
        "learningRate": (tc.get("learningRate", tc.get("learning_rate")), spec.learning_rate),
        "responseCandidatesCount": (
            ip.get("responseCandidatesCount", ip.get("response_candidates_count")),
            spec.response_candidates,
        ),
        "temperature": (ip.get("temperature"), spec.temperature),
    }
    diffs = []
    for name, (have, want) in expected.items():
        if have is None:
            continue
        try:
            same = math.isclose(float(have), float(want), rel_tol=1e-9, abs_tol=0.0)
        except (TypeError, ValueError):
            same = False
        if not same:
            diffs.append(f"{name} {have!r} != {want!r}")
    dataset = str(job.get("dataset") or "")
    if dataset and not dataset.endswith(fw.dataset_id):
        diffs.append(f"dataset {dataset!r} != {fw.dataset_id!r}")
    evaluator = str(job.get("evaluator") or "")
    if evaluator and evaluator != evaluator_name(spec, account_id):
        diffs.append(f"evaluator {evaluator!r}")
    return "; ".join(diffs)
