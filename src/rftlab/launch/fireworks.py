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

import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.launch import evaluators
from rftlab.launch.context_budget import context_check
from rftlab.launch.firectl import (
    MAX_EPOCHS,
    RESUMABLE_JOB_STATES,
    TERMINAL_JOB_STATES,
    WANDB_KEY_ENV,
    Firectl,
    FirectlError,
    accelerator_seconds,
    job_create_flags,
    job_id_for,
    job_progress,
    job_state,
    learning_rate_problem,
    output_metrics,
    output_model_for,
    resolve_executable,
    rollout_dataset_id,
    status_message,
    wandb_problem,
)
from rftlab.launch.specs import resolved_job_settings
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


# What ``launch`` does when the planned job exists and ended without completing (``--resume`` /
# ``--new-attempt`` on the command line): refuse and say so, resume that job, or start attempt n + 1.
FAILED_JOB_CHOICES = ("refuse", "resume", "new-attempt")
RESUME_GRACE_S = 600.0  # after a resume, how long the job may still read FAILED before that counts
MAX_ATTEMPTS = 99


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
    incomplete_epochs: list[int] = field(default_factory=list)  # recorded with rollouts missing


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
    # evaluator check before anything is created (rftlab.launch.evaluators): lookup, wait bound, pauses
    evaluator_lookup: evaluators.Lookup | None = None  # None: the fireworks-ai SDK (fetch_evaluator)
    evaluator_timeout: float = evaluators.EVALUATOR_TIMEOUT_S
    evaluator_poll: float = evaluators.EVALUATOR_POLL_S
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
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
        """The exact commands ``launch`` runs, without running anything (``--dry-run``). The evaluator
        upload is shown for completeness: ``launch`` itself only checks that the evaluator is ACTIVE."""
        fw = _fireworks_section(spec)
        account = self.account_id or os.environ.get(ACCOUNT_ENV) or "<account-id>"
        # with --key-via argv the key is shown as its variable (a plan is printed; a printed key would be a
        # leak); by default firectl reads it from a private auth file and the commands carry no key at all
        fc = self.firectl_factory(
            account_id=account, api_key="$FIREWORKS_API_KEY", style=self.style, key_via=self.key_via
        )
        fc.exe = fc.exe or shutil.which("firectl") or "firectl"
        job_id = job_id_for(spec)
        dataset_id = arm_dataset_id(fw.dataset_id, self._rows(spec))
        ev_name = evaluator_resource(spec, account)
        wandb_key = "$WANDB_API_KEY" if os.environ.get(WANDB_KEY_ENV) else None
        try:
            flags = job_create_flags(
                spec, account_id=account, dataset_id=dataset_id, evaluator=ev_name, wandb_api_key=wandb_key
            )
        except ValueError as exc:
            raise LaunchRefused(str(exc)) from None
        commands = [fc.argv("dataset", "create", dataset_id, str(dataset_path))]
        warnings = []
        entry = getattr(spec, "evaluator_entry", None)  # an arm may fix its own entry (poker: one per reward)
        missing = missing_entry(spec.experiment, fw.interface, entry)
        if missing:
            warnings.append(missing)
        else:
            commands.append(
                evaluator_upload_argv(spec.experiment, fw.interface, evaluator_id(spec, account), entry=entry)
            )
        commands.append(fc.argv("rftj", "create", "--job-id", job_id, *flags))
        return LaunchPlan(job_id, dataset_id, ev_name, commands, warnings, key_via=self.key_via)

    def _rows(self, spec) -> list[Mapping[str, Any]]:
        return list(self.dataset_rows(spec) if self.dataset_rows else default_dataset_rows(spec))

    def check_spec(self, spec: SpectrumArmSpec) -> None:
        """Everything that can be refused before any platform call: a local-only arm, an evaluator entry
        that does not exist, W&B settings firectl would refuse, a learning rate of 0, an output model id
        too long, a missing key or account (``LaunchRefused``)."""
        fw = _fireworks_section(spec)
        missing = missing_entry(spec.experiment, fw.interface, getattr(spec, "evaluator_entry", None))
        problems = [
            missing,
            wandb_problem(spec, os.environ.get(WANDB_KEY_ENV)),
            learning_rate_problem(spec.learning_rate),
        ]
        for problem in problems:
            if problem:
                raise LaunchRefused(problem)
        try:
            output_model_for(spec, MAX_ATTEMPTS)
        except ValueError as exc:
            raise LaunchRefused(str(exc)) from None
        self._firectl(need_key=True)  # a missing key or account

    # ---------------------------------------------------------------------------------- launch
    def launch(
        self,
        spec: SpectrumArmSpec,
        *,
        root: Path | str = "runs",
        resume: bool = True,
        force: bool = False,
        failed_job: str = "refuse",
        plan_sha256: str | None = None,
    ) -> RunRef:
        """Preflight, evaluator check, then dataset + job, recorded in a run folder. Reuses a finished run of
        the same spec on Fireworks; with ``resume`` continues an unfinished one (never creates a second job
        for it). When the planned job exists and ended without completing, ``failed_job`` decides:
        ``"refuse"`` (say so, offering the other two), ``"resume"`` (``firectl rftj resume``; this run polls
        the resumed job, the failed attempt recorded in ``run.json``) or ``"new-attempt"`` (a job id with the
        next ``-a<n>`` suffix, this run linked to the failed one). ``plan_sha256``: the governing plan's
        hash, recorded in a new run's ``run.json``."""
        if failed_job not in FAILED_JOB_CHOICES:
            raise ValueError(f"failed_job must be one of {FAILED_JOB_CHOICES}, got {failed_job!r}")
        self.check_spec(spec)
        store = RunStore(root)
        run, origin = store.start_or_reuse(
            spec.experiment, spec.arm, spec.to_dict(), backend=BACKEND, resume=resume, plan_sha256=plan_sha256
        )
        ref = RunRef(spec.experiment, spec.arm, run.run_id, run.path, BACKEND)
        if origin == "reused" or run.record.provider.get("job_id"):
            run.release()
            return ref
        try:
            self._create_job(spec, run, store, failed_job)
        except BaseException as exc:
            # Nothing may stay "running" for good: the job does not exist (or was never recorded), so the
            # run is over. A re-launch starts a new run and finds a job created under the planned id.
            if not run.finished:
                run.finish("failed", error=_failure_reason(exc))
            raise
        finally:
            run.release()
        return ref

    def _run_preflight(self, spec: SpectrumArmSpec, run) -> None:
        """The family's preflight plus the context-length check, saved to ``provider/preflight.json``;
        ``LaunchRefused`` (and the run failed) when any check fails."""
        report = (self.preflight or _default_preflight)(spec)
        report_dict = dict(report.to_dict() if hasattr(report, "to_dict") else report)
        passed = bool(getattr(report, "passed", report_dict.get("passed")))
        context = self._context_check(spec)
        if context is not None:
            report_dict["checks"] = [*report_dict.get("checks", []), context]
            passed = passed and bool(context["passed"])
        report_dict["passed"] = passed
        run.save_provider_snapshot("preflight.json", report_dict)
        if not passed:
            failed = [c.get("name", "?") for c in report_dict.get("checks", []) if not c.get("passed")]
            details = "; ".join(c.get("detail", "") for c in report_dict["checks"] if not c.get("passed"))
            run.finish(
                "failed", error=f"preflight failed: {', '.join(failed) or 'see provider/preflight.json'}"
            )
            raise LaunchRefused(
                f"preflight failed ({', '.join(failed)}); nothing was created on Fireworks. "
                f"{details[:600]} Details: {run.path / 'provider' / 'preflight.json'}"
            )

    def _context_check(self, spec: SpectrumArmSpec) -> dict[str, Any] | None:
        """``context_budget.context_check`` on the family's rendered episodes (``None``: the family has no
        renderer yet, said in the check list instead)."""
        fw = _fireworks_section(spec)
        renderer = EPISODE_RENDERERS.get((spec.experiment, fw.interface))
        settings = resolved_job_settings(fw)
        if renderer is None:
            return {"name": "context_length_holds_episode", "passed": True, "checked": False,
                    "detail": f"not checked: no episode renderer for {spec.experiment} on the {fw.interface} "
                    f"interface; max_context_length {settings['max_context_length']} is sent as it is"}  # fmt: skip
        module, name = renderer.rsplit(".", 1)
        episodes = getattr(importlib.import_module(module), name)(self._rows(spec))
        return context_check(
            episodes,
            base_model=fw.base_model,
            max_context_length=settings["max_context_length"],
            max_output_tokens=fw.max_output_tokens,
        )

    def _check_evaluator(self, spec: SpectrumArmSpec, account_id: str, run) -> str:
        """The evaluator resource once it is ACTIVE (``evaluators.wait_until_active``), its JSON kept as
        ``provider/evaluator.json``; ``LaunchRefused`` when it is missing, failed or still building."""
        ev_id = evaluator_id(spec, account_id)
        try:
            found = evaluators.wait_until_active(
                account_id,
                ev_id,
                lookup=self.evaluator_lookup or evaluators.fetch_evaluator,
                timeout=self.evaluator_timeout,
                every=self.evaluator_poll,
                clock=self.clock,
                sleep=self.sleep,
                on_wait=lambda m: print(m, file=sys.stderr, flush=True),
            )
        except evaluators.EvaluatorRefused as exc:
            raise LaunchRefused(str(exc)) from None
        run.save_provider_snapshot("evaluator.json", dict(found))
        return f"accounts/{account_id}/evaluators/{ev_id}"

    def _create_job(self, spec: SpectrumArmSpec, run, store: RunStore, failed_job: str) -> None:
        """Preflight, evaluator, attempt, dataset and job of a claimed run (``launch``): raises on any
        failure. Nothing is created before the evaluator is known to be ACTIVE."""
        fw = _fireworks_section(spec)
        self._run_preflight(spec, run)
        fc = self._firectl(_call_logger(run))
        if fc.exe is None:
            resolve_executable()  # no firectl: say so before anything is read from the API
        run.set_provider(
            job_settings=resolved_job_settings(fw),
            firectl_version=_firectl_version(fc),
            eval_protocol_version=_package_version("eval-protocol"),
        )
        ev_name = self._check_evaluator(spec, fc.account_id, run)
        rows = self._rows(spec)
        dataset_id = arm_dataset_id(fw.dataset_id, rows)
        attempt, job, links = self._choose_attempt(spec, fc, store, failed_job, dataset_id, ev_name)
        job_id = job_id_for(spec, attempt)
        if job is None:  # a new job: its dataset first (created unless it exists: its id names its content)
            dataset_file = run.save_provider_snapshot("dataset.jsonl", dataset_text(rows))
            try:
                existing = fc.dataset_get(dataset_id)
            except FirectlError:
                existing = None
            if existing is None:
                fc.dataset_create(dataset_id, dataset_file)
            flags = job_create_flags(
                spec,
                account_id=fc.account_id,
                wandb_api_key=os.environ.get(WANDB_KEY_ENV),
                dataset_id=dataset_id,
                evaluator=ev_name,
                attempt=attempt,
            )
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
            dataset_id=dataset_id,
            evaluator=ev_name,
            account_id=fc.account_id,
            attempt=attempt,
            output_model=output_model_for(spec, attempt),
            **links,
        )
        if links.get("attempts"):
            run.save_provider_snapshot("failed_attempt.json", links["attempts"][-1]["job"])

    def _choose_attempt(
        self, spec, fc: Firectl, store: RunStore, failed_job: str, dataset_id: str, ev_name: str
    ) -> tuple[int, Mapping[str, Any] | None, dict[str, Any]]:
        """``(attempt, existing job or None, run.json links)`` for this launch: the latest attempt of the
        spec that exists on Fireworks is reused when it is alive or completed (and matches the spec); one
        that ended without completing is refused, resumed or followed by attempt n + 1 (``failed_job``)."""
        attempt, job = _latest_attempt(fc, spec)
        if job is None:
            return 1, None, {}
        job_id = job_id_for(spec, attempt)
        state = job_state(job)
        if state not in TERMINAL_JOB_STATES or state == "COMPLETED":
            mismatch = _config_mismatch(job, spec, fc.account_id, dataset_id, ev_name, attempt)
            if mismatch:
                raise LaunchRefused(
                    f"a Fireworks job {job_id!r} already exists with a different configuration ({mismatch}); "
                    "cancel or delete it, or change the spec"
                )
            return attempt, job, {}
        earlier = _attempt_record(job, job_id, store, spec)
        if failed_job == "refuse":
            resume_hint = (
                f"--resume (firectl rftj resume {job_id}; this launch then polls it), or "
                if state in RESUMABLE_JOB_STATES
                else ""
            )
            why = f" ({earlier['status']})" if earlier["status"] else ""
            raise LaunchRefused(
                f"the Fireworks job {job_id!r} of this spec ended {state}{why}; nothing was created. "
                f"Launch again with {resume_hint}--new-attempt (job "
                f"{job_id_for(spec, attempt + 1)!r}, a new run linked to this one)"
            )
        if failed_job == "resume":
            if state not in RESUMABLE_JOB_STATES:
                raise LaunchRefused(
                    f"the Fireworks job {job_id!r} ended {state}; firectl documents resume for FAILED jobs "
                    "only: launch again with --new-attempt"
                )
            fc.job_resume(job_id)
            earlier["resumed_at"] = time.time()
            return attempt, job, {"attempts": [earlier], "resumed_at": earlier["resumed_at"]}
        if attempt >= MAX_ATTEMPTS:
            raise LaunchRefused(f"{MAX_ATTEMPTS} attempts of this spec exist; change the spec instead")
        return attempt + 1, None, {"previous_attempt": {k: v for k, v in earlier.items() if k != "job"}}

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
        status = _after_resume(status, handle.record.provider, clock())
        done_epochs = _finished_epochs(status)
        recorded = self._record_epochs(handle, done_epochs)
        missing = [k for k in done_epochs if k not in recorded]
        handle = load_run(run.path)
        incomplete = sorted(int(k) for k in handle.record.provider.get("incomplete_epochs") or {})
        if incomplete:
            status = _with_message(status, f"epoch(s) {incomplete} incomplete (provider.incomplete_epochs)")
        if not status.terminal:
            return WatchResult(status, recorded, polls=1, incomplete_epochs=incomplete)
        if status.state != "completed":
            raw = str((status.provider or {}).get("state") or "")
            label = status.state if raw.lower() == status.state else f"{status.state} ({raw})"
            handle.finish("failed", error=f"Fireworks job {label}: {status.message}".strip())
            return WatchResult(status, recorded, polls=1, done=True, incomplete_epochs=incomplete)
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
                _with_message(status, note), recorded, polls=1, missing_epochs=missing, done=True,
                incomplete_epochs=incomplete,
            )  # fmt: skip
        handle.finish("finished")
        return WatchResult(status, recorded, polls=1, done=True, incomplete_epochs=incomplete)

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
            got = _download_epoch(fc, handle, job_id, epoch)
            if got is None:
                break  # epochs are recorded in order
            rows, chunks = got
            records = [_rollout_record(row, i) for i, row in enumerate(rows)]
            gaps = epoch_completeness(records, chunks, handle.record.spec)
            if gaps is not None:  # recorded as it is, and named in run.json
                known = dict(load_run(handle.path).record.provider.get("incomplete_epochs") or {})
                handle.set_provider(incomplete_epochs={**known, str(epoch): gaps})
            if not (handle.path / "rollouts" / f"epoch-{epoch}.jsonl").exists():
                handle.write_rollouts(epoch, records)
            handle.append_metrics({"step": epoch, "epoch": epoch, **epoch_metrics(records)})
            have.add(epoch)
        return sorted(have)


# ----------------------------------------------------------------------------------- helpers


def default_dataset_rows(spec: SpectrumArmSpec) -> Iterable[Mapping[str, Any]]:
    """The arm's eval-protocol rows (one per row id; the band comes from the env's per-row seed). With the
    spec's ``epoch_salt`` the rows ask the uploaded evaluator for fresh bands every epoch
    (``environment_context.epoch_salt``, read by ``rftlab.rollout.spectrum.processors``)."""
    from rftlab.rollout.spectrum.dataset import dataset_rows

    return dataset_rows(
        spec.rows,
        prompt=spec.prompt,
        memory=spec.memory,
        prefix=spec.row_prefix,
        epoch_salt=spec.epoch_salt,
    )


def dataset_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """The dataset file uploaded to Fireworks: one JSON row per line."""
    return "".join(json.dumps(r) + "\n" for r in rows)


_RESOURCE_ID = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


def arm_dataset_id(base: str, rows: Iterable[Mapping[str, Any]]) -> str:
    """``<base>-<first 8 hex of the SHA-256 of the dataset file>``. ``launch`` creates a dataset only when
    its id does not exist yet, so a fixed id shared by arms whose rows differ (probe/A echo vs B scrambled
    used to share ``rftlab-spectrum-scaf48``) let the first arm launched decide the others' rows; a
    content-named id makes every arm train on its own spec's rows, and arms with identical rows share one."""
    digest = hashlib.sha256(dataset_text(rows).encode("utf-8")).hexdigest()[:8]
    dataset_id = f"{base}-{digest}"
    if not _RESOURCE_ID.match(dataset_id) or dataset_id.endswith("-"):
        raise LaunchRefused(
            f"dataset id {dataset_id!r} (from the spec's {base!r}) is not a valid Fireworks id: lower-case "
            "letters, digits and '-', starting with a letter, at most 63 characters"
        )
    return dataset_id


def _fireworks_section(spec: SpectrumArmSpec):
    if spec.fireworks is None:
        raise LaunchRefused(f"arm {spec.arm!r} has no 'fireworks' section: it runs only on the local backend")
    return spec.fireworks


def _spec_evaluator_id(spec: SpectrumArmSpec) -> str:
    """The evaluator id the spec names (last part of its evaluator resource), checked: it must already be
    in the form eval-protocol normalises ids to (lower-case letters, digits and single '-', starting with
    a letter, at most 54 characters with room for the code hash), else the upload would create an
    evaluator under another id than the one the job names."""
    ev_id = _fireworks_section(spec).evaluator.rsplit("/", 1)[-1]
    if not _RESOURCE_ID.match(ev_id) or "--" in ev_id or ev_id.endswith("-") or len(ev_id) > 54:
        raise LaunchRefused(
            f"evaluator id {ev_id!r} in the spec is not a normalised Fireworks id (lower-case letters, "
            "digits and single '-', starting with a letter, at most 54 characters: the code hash is added)"
        )
    return ev_id


def evaluator_id(spec: SpectrumArmSpec, account_id: str = "") -> str:
    """The evaluator id a job of this spec uses: the spec's id plus the first 8 hex digits of the evaluator
    code's SHA-256 (``rftlab.launch.evaluators``), so arms share an evaluator only when its code is the
    same, and an upload never replaces an evaluator another arm's job runs on."""
    try:
        return evaluators.coded_evaluator_id(_spec_evaluator_id(spec), EVALUATOR_REQUIREMENTS)
    except evaluators.EvaluatorRefused as exc:
        raise LaunchRefused(str(exc)) from None


def evaluator_resource(spec: SpectrumArmSpec, account_id: str) -> str:
    """``accounts/<acct>/evaluators/<evaluator_id>`` (the spec's ``<acct>`` placeholder filled)."""
    account = _fireworks_section(spec).evaluator.split("/")[1].replace("<acct>", account_id)
    return f"accounts/{account}/evaluators/{evaluator_id(spec, account_id)}"


# The episode renderer of each (experiment, interface) for the context-length check, as "module.function".
EPISODE_RENDERERS = {
    ("spectrum_memory", "turn"): "rftlab.launch.spectrum.episodes.rendered_episodes",
    ("poker", "mcp"): "rftlab.launch.poker.episodes.rendered_episodes",
}


def _firectl_version(fc: Firectl) -> str:
    """``firectl version`` for ``run.json`` (the failure's text when it cannot be read)."""
    try:
        return fc.version() or "unknown (firectl version printed nothing)"
    except FirectlError as exc:
        return f"unknown ({str(exc)[:200]})"


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _job_or_none(fc: Firectl, job_id: str) -> Mapping[str, Any] | None:
    try:
        job = fc.job_get(job_id)
    except FirectlError:
        return None
    if not isinstance(job, Mapping):
        raise LaunchRefused(f"firectl get of job {job_id!r} returned JSON that is not an object")
    return job


def _latest_attempt(fc: Firectl, spec: SpectrumArmSpec) -> tuple[int, Mapping[str, Any] | None]:
    """``(n, job)`` of the highest attempt of the spec that exists on Fireworks (``(1, None)``: none)."""
    latest: tuple[int, Mapping[str, Any] | None] = (1, None)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        job = _job_or_none(fc, job_id_for(spec, attempt))
        if job is None:
            break
        latest = (attempt, job)
    return latest


def _attempt_record(job: Mapping[str, Any], job_id: str, store: RunStore, spec) -> dict[str, Any]:
    """What ``run.json`` keeps of an attempt that ended without completing: its job id, state, status
    message, the run that recorded it (when this run store has one) and the job JSON."""
    runs, _problems = store.scan(spec.experiment, spec.arm)
    mine = [r for r in runs if r.record.provider.get("job_id") == job_id]
    newest = max(mine, key=lambda r: (r.record.created_at, r.path.name), default=None)
    return {
        "job_id": job_id,
        "state": job_state(job),
        "status": status_message(job)[:500],
        "run_dir": str(newest.path) if newest is not None else None,
        "job": dict(job),
    }


def missing_entry(experiment: str, interface: str, entry: str | None = None) -> str | None:
    """Why this experiment/interface has no evaluator to upload yet (``None`` when its entry module exists
    in this package): a job pointing at an evaluator that was never uploaded would only fail on Fireworks.
    ``entry`` overrides the ``ENTRY_POINTS`` lookup (an arm spec's own ``evaluator_entry``)."""
    import rftlab

    entry = entry or ENTRY_POINTS.get((experiment, interface))
    if entry is None:
        return f"no @evaluation_test entry for experiment {experiment!r} with interface {interface!r}"
    module_file = Path(rftlab.__file__).parent.parent / entry.split("::", 1)[0]
    if not module_file.is_file():
        return (
            f"the evaluator entry {entry} is not built yet: nothing can be uploaded or launched for "
            f"{experiment!r} on the {interface!r} interface"
        )
    return None


UPLOAD_MODULE = "rftlab.launch.ep_upload"


def evaluator_upload_argv(
    experiment: str,
    interface: str,
    ev_id: str,
    python: str = "python",
    entry: str | None = None,
    force: bool = False,
) -> list[str]:
    """eval-protocol's ``upload`` of the interface's entry (or ``entry``, an arm's own), run through
    ``rftlab.launch.ep_upload`` so the explicit ``--id`` is really applied (eval-protocol 0.3.33's own CLI
    ignores it, docs/platforms.md §1.9), with an explicit empty ``--env-file`` (so no ``.env`` secret is
    uploaded, G11). ``python`` is the interpreter (``upload_evaluator`` uses the running one). ``force``
    (delete and recreate) only replaces a failed build (``upload_evaluator``). Never ``create rft
    --dry-run``: it is not dry (G8)."""
    entry = entry or ENTRY_POINTS.get((experiment, interface))
    if entry is None:
        raise LaunchRefused(f"no evaluator entry for experiment {experiment!r} with interface {interface!r}")
    return [python, "-m", UPLOAD_MODULE, "upload", "--entry", entry, "--id", ev_id,
            "--env-file", ".env.empty", *(["--force"] if force else []), "--yes"]  # fmt: skip


def child_env(extra: Mapping[str, str] | None = None, *, inherit: bool = True) -> dict[str, str]:
    """The environment of a child process the project starts: the running interpreter's folder first on
    ``PATH`` (eval-protocol starts bare ``python``/``pytest``; without an activated venv they would be the
    system's), ``LITELLM_LOCAL_MODEL_COST_MAP=True`` and ``extra``. ``inherit=False`` starts from ``PATH``
    and ``HOME`` only."""
    base = dict(os.environ) if inherit else {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    bin_dir = str(Path(sys.executable).parent)
    path = base.get("PATH", "")
    if path.split(os.pathsep)[0] != bin_dir:
        base["PATH"] = bin_dir + (os.pathsep + path if path else "")
    base.setdefault("HOME", tempfile.gettempdir())
    base["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    base.update(extra or {})
    return base


def _tail_lines(text: str, lines: int = 25, chars: int = 4000) -> str:
    """The last ``lines`` whole lines of ``text`` (at most about ``chars``): never cut inside a line."""
    kept: list[str] = []
    size = 0
    for line in reversed(text.rstrip().splitlines()):
        if len(kept) >= lines or (kept and size + len(line) > chars):
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(reversed(kept))


def upload_failure_message(returncode: int, stdout: str, stderr: str, ev_id: str, account_id: str) -> str:
    """What went wrong in a failed upload, from eval-protocol's own output: its stdout (where it prints
    "Failed to upload ...") and stderr, whole lines, plus the likely fix for a credentials error."""
    parts = [f"eval-protocol upload of evaluator {ev_id!r} failed (exit {returncode})"]
    for name, text in (("stdout", stdout), ("stderr", stderr)):
        tail = _tail_lines(text)
        if tail:
            parts.append(f"--- eval-protocol {name} (last lines) ---\n{tail}")
    both = f"{stdout}\n{stderr}"
    if re.search(r"credentials|401|403|Unauthori[sz]ed|Forbidden|PermissionDenied|api.key", both, re.I):
        parts.append(
            f"Hint: check FIREWORKS_API_KEY; the evaluator is created in the account the key belongs to "
            f"(the job expects {account_id!r}). docs/platforms.md §1.9 notes that non-admin keys may be refused."
        )
    return "\n".join(parts)


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


# passed on to the upload when set: another Fireworks API server (eval-protocol's ``--server``)
PASSTHROUGH_ENV = ("FIREWORKS_API_BASE",)


def upload_evaluator(
    spec: SpectrumArmSpec,
    account_id: str,
    *,
    runner: Callable[..., Any] | None = None,
    python: str | None = None,
    timeout: float = 900.0,
    lookup: evaluators.Lookup | None = None,
) -> dict[str, Any]:
    """Stage the evaluator and run eval-protocol's upload (``evaluator_upload_argv``) in the staging
    folder with ``python`` (default: the running interpreter, so no activated venv is needed), in an
    environment holding only PATH (the interpreter's folder first), HOME, the Fireworks key and account,
    ``LITELLM_LOCAL_MODEL_COST_MAP`` and ``$FIREWORKS_API_BASE`` when set. Returns the redacted call
    record (argv, exit code, stdout and stderr); a failure raises ``LaunchRefused`` with eval-protocol's
    own output (whole lines), and so does an upload whose code never arrived (eval-protocol exits 0 after
    logging ``evaluators.CODE_UPLOAD_FAILED``).

    The evaluator is looked up first (``lookup``, default ``evaluators.fetch_evaluator``): one that is
    ACTIVE or BUILDING holds this very code (its id carries the code hash) and is not uploaded again
    (``record["skipped"]`` says why); one in any other state (a failed build, no code) is replaced with
    ``--force``; when the lookup itself fails the upload runs without ``--force``."""
    import subprocess

    import rftlab

    fw = spec.fireworks
    if fw is None:
        raise LaunchRefused(f"arm {spec.arm!r} has no 'fireworks' section")
    key = os.environ.get(KEY_ENV)
    if not key:
        raise LaunchRefused(f"{KEY_ENV} is not set: export it in your shell (never write it to a file)")
    python = python or sys.executable
    if python == sys.executable and runner is None and importlib.util.find_spec("eval_protocol") is None:
        raise LaunchRefused(
            f"eval-protocol is not installed for this interpreter ({sys.executable}): "
            "pip install -e '.[fireworks]'"
        )
    ev_id = evaluator_id(spec, account_id)
    entry = getattr(spec, "evaluator_entry", None)
    try:
        existing = (lookup or evaluators.fetch_evaluator)(account_id, ev_id)
    except evaluators.EvaluatorRefused:
        existing = None  # cannot tell: upload without --force (eval-protocol reports a conflict)
    state = evaluators.evaluator_state(existing) if existing is not None else None
    if state in ("ACTIVE", "BUILDING"):
        skipped = f"evaluator {ev_id} already exists ({state}) with this code; not uploaded again"
        return {"argv": [], "evaluator_id": ev_id, "returncode": 0, "stdout": "", "stderr": "",
                "skipped": skipped}  # fmt: skip
    force = existing is not None
    argv = evaluator_upload_argv(spec.experiment, fw.interface, ev_id, python, entry=entry, force=force)
    extra = {KEY_ENV: key, ACCOUNT_ENV: account_id}
    extra.update({k: os.environ[k] for k in PASSTHROUGH_ENV if os.environ.get(k)})
    env = child_env(extra, inherit=False)
    with tempfile.TemporaryDirectory(prefix="rftlab-evaluator-") as tmp:
        staging = stage_evaluator(Path(rftlab.__file__).parent, Path(tmp) / "evaluator")
        run = runner or subprocess.run
        try:
            proc = run(
                argv, cwd=staging, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
        except FileNotFoundError:
            raise LaunchRefused(f"cannot run {python!r}: no such interpreter") from None
        except subprocess.TimeoutExpired:
            raise LaunchRefused(f"eval-protocol upload timed out after {timeout:g} s") from None
    return _upload_record(proc, key, argv, ev_id, account_id)


def _upload_record(proc: Any, key: str, argv: list[str], ev_id: str, account_id: str) -> dict[str, Any]:
    """The redacted record of a finished upload; ``LaunchRefused`` with eval-protocol's own words when it
    failed or when its output says the code never arrived (``evaluators.CODE_UPLOAD_FAILED``)."""
    stdout, stderr = proc.stdout.replace(key, "***"), proc.stderr.replace(key, "***")
    record = {
        "argv": argv,
        "evaluator_id": ev_id,
        "returncode": proc.returncode,
        "stdout": _tail_lines(stdout, lines=200, chars=20000),
        "stderr": _tail_lines(stderr, lines=200, chars=20000),
    }
    no_code = evaluators.code_upload_failed(stdout, stderr)
    if proc.returncode != 0 or no_code:
        message = upload_failure_message(proc.returncode, stdout, stderr, ev_id, account_id)
        if no_code:
            message = (
                f"the evaluator {ev_id!r} was created on Fireworks but its code was not uploaded "
                f"(eval-protocol: '{evaluators.CODE_UPLOAD_FAILED}'); a job on it would fail. Fix the cause "
                f"below and run upload-evaluator again (it replaces the evaluator without code).\n{message}"
            )
        raise LaunchRefused(message)
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


def _download_epoch(
    fc: Firectl, handle, job_id: str, epoch: int
) -> tuple[list[dict[str, Any]], list[int] | None] | None:
    """``(rows, chunk numbers)`` of epoch ``epoch``'s rollout dataset (plain id, ``None`` chunks; else
    every ``-chunk-<n>`` dataset found in the whole ``dataset list``), kept raw under ``provider/``;
    ``None`` when it is not available yet."""
    ds_id = rollout_dataset_id(job_id, epoch)
    with tempfile.TemporaryDirectory(prefix="rftlab-dl-") as tmp:
        files: list[Path] = []
        chunks: list[int] | None = None
        try:
            files = fc.dataset_download(ds_id, Path(tmp) / ds_id)
        except FirectlError:
            files = []
        if not files:  # chunked datasets: rft-evalv3-<job>-epoch-<k>-chunk-<n>
            try:
                listing = fc.dataset_list()
            except FirectlError:
                return None
            found = {}
            for name in _dataset_ids(listing):
                m = re.fullmatch(re.escape(ds_id) + r"-chunk-([0-9]{1,6})", name)
                if m:
                    found[int(m.group(1))] = name
            chunks = sorted(found)
            for n in chunks:
                try:
                    files += fc.dataset_download(found[n], Path(tmp) / found[n])
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
        return rows, chunks


def epoch_completeness(
    records: Sequence[Mapping[str, Any]], chunks: Sequence[int] | None, spec: Mapping[str, Any]
) -> dict[str, Any] | None:
    """What an epoch's rollouts lack (``None`` when complete): the spec's ``rows`` × ``response_candidates``
    rollouts, every row id with ``response_candidates`` of them, and, for a chunked dataset, the chunks
    ``0..n`` without a gap."""
    rows, k = spec.get("rows"), spec.get("response_candidates")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (rows, k)):
        return None  # nothing to compare with
    per_row: dict[Any, int] = {}
    for r in records:
        per_row[r.get("row_id")] = per_row.get(r.get("row_id"), 0) + 1
    short = sorted(str(rid) for rid, n in per_row.items() if n < k)
    missing_chunks = sorted(set(range(max(chunks) + 1)) - set(chunks)) if chunks else []
    expected = rows * k
    if len(records) >= expected and len(per_row) >= rows and not short and not missing_chunks:
        return None
    return {
        "rollouts": len(records),
        "expected_rollouts": expected,
        "rows_seen": len(per_row),
        "rows_expected": rows,
        "rows_short_of_candidates": short[:50],
        "chunks": list(chunks or []),
        "missing_chunks": missing_chunks,
    }


def _after_resume(status: RunStatus, provider: Mapping[str, Any], now: float) -> RunStatus:
    """A resumed job may read FAILED for a while after ``rftj resume``: within ``RESUME_GRACE_S`` of the
    resume that state counts as pending, not as the end of the run."""
    resumed = provider.get("resumed_at")
    state = str((status.provider or {}).get("state") or "")
    if (
        isinstance(resumed, int | float)
        and not isinstance(resumed, bool)
        and state in RESUMABLE_JOB_STATES
        and now - float(resumed) < RESUME_GRACE_S
    ):
        note = f"resume requested {now - float(resumed):.0f} s ago; the job still reads {state}"
        return RunStatus("pending", status.progress, status.total, note, status.provider)
    return status


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


def _config_mismatch(
    job: Mapping[str, Any],
    spec: SpectrumArmSpec,
    account_id: str,
    dataset_id: str | None = None,
    evaluator: str | None = None,
    attempt: int = 1,
) -> str:
    """Which recorded settings of an existing job differ from what this launch would send (empty when they
    match; a setting the job JSON does not show is not compared)."""
    fw = _fireworks_section(spec)
    tc = _section(job, "trainingConfig")
    ip = _section(job, "inferenceParameters")
    lc = _section(job, "lossConfig")
    settings = resolved_job_settings(fw)
    numbers = {
        "epochs": (_field(tc, "epochs"), spec.epochs),
        "learningRate": (_field(tc, "learningRate"), spec.learning_rate),
        "loraRank": (_field(tc, "loraRank"), settings["lora_rank"]),
        "maxContextLength": (_field(tc, "maxContextLength"), settings["max_context_length"]),
        "batchSize": (_field(tc, "batchSize"), settings["batch_size"]),
        "responseCandidatesCount": (_field(ip, "responseCandidatesCount"), spec.response_candidates),
        "temperature": (_field(ip, "temperature"), spec.temperature),
        "topP": (_field(ip, "topP"), settings["top_p"]),
        "topK": (_field(ip, "topK"), settings["top_k"]),
        "maxOutputTokens": (_field(ip, "maxOutputTokens"), fw.max_output_tokens),
        "klBeta": (_field(lc, "klBeta"), settings["kl_beta"]),
        "chunkSize": (_field(job, "chunkSize"), settings["chunk_size"]),
    }
    diffs = []
    for name, (have, want) in numbers.items():
        if have is None:
            continue
        try:
            same = math.isclose(float(have), float(want), rel_tol=1e-6, abs_tol=0.0)
        except (TypeError, ValueError):
            same = False
        if not same:
            diffs.append(f"{name} {have!r} != {want!r}")
    method = _field(lc, "method")
    if method is not None and str(method).upper().replace("-", "_") != settings[
        "loss_method"
    ].upper().replace("-", "_"):
        diffs.append(f"lossConfig.method {method!r} != {settings['loss_method']!r}")
    texts = {
        "dataset": (str(job.get("dataset") or ""), dataset_id or fw.dataset_id),
        "evaluator": (str(job.get("evaluator") or ""), evaluator or evaluator_resource(spec, account_id)),
        "outputModel": (str(_field(tc, "outputModel") or ""), output_model_for(spec, attempt)),
    }
    for name, (have, want) in texts.items():
        if have and have != want and not have.endswith("/" + want):
            diffs.append(f"{name} {have!r} != {want!r}")
    return "; ".join(diffs)


def _section(job: Mapping[str, Any], camel: str) -> Mapping[str, Any]:
    value = _field(job, camel)
    return value if isinstance(value, Mapping) else {}


def _field(obj: Mapping[str, Any], camel: str) -> Any:
    """``obj[camel]`` or its snake_case spelling."""
    if camel in obj:
        return obj[camel]
    return obj.get(re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower())
