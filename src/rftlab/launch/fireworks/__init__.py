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

import importlib.util
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypedDict, TypeVar, cast

from rftlab.launch import evaluators
from rftlab.launch.context_budget import context_check
from rftlab.launch.firectl import (
    RESUMABLE_JOB_STATES,
    TERMINAL_JOB_STATES,
    WANDB_KEY_ENV,
    Firectl,
    FirectlClient,
    FirectlError,
    job_create_flags,
    job_id_for,
    job_state,
    learning_rate_problem,
    output_model_for,
    resolve_executable,
    wandb_problem,
)
from rftlab.launch.fireworks.common import (
    ACCOUNT_ENV,
    BACKEND,
    DATASET_GRACE_S,
    FAILED_JOB_CHOICES,
    KEY_ENV,
    MAX_ATTEMPTS,
    MIN_POLL_INTERVAL_S,
    STALL_ADVICE,
    LaunchRefused,
)
from rftlab.launch.fireworks.datasets import arm_dataset_id, dataset_text, default_dataset_rows
from rftlab.launch.fireworks.evaluator import (
    EPISODE_RENDERERS,
    _firectl_version,
    _fireworks_section,
    _package_version,
    evaluator_id,
    evaluator_resource,
    evaluator_upload_argv,
    missing_entry,
    upload_evaluator,
)
from rftlab.launch.fireworks.poll import (
    _after_resume,
    _append_snapshot,
    _attempt_record,
    _call_logger,
    _config_mismatch,
    _download_epoch,
    _duration,
    _failure_reason,
    _finished_epochs,
    _latest_attempt,
    _recorded_epochs,
    _recorded_status,
    _rollout_record,
    _status_of,
    _with_message,
    epoch_completeness,
    epoch_metrics,
)
from rftlab.launch.specs import FireworksArmSpec, resolved_job_settings
from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.runs import Run, RunStore, load_run
from rftlab.types import RunRef, RunStatus

__all__ = [
    "ACCOUNT_ENV",
    "EPISODE_RENDERERS",
    "FireworksLauncher",
    "LaunchPlan",
    "LaunchRefused",
    "MIN_POLL_INTERVAL_S",
    "PollOutcome",
    "WatchResult",
    "arm_dataset_id",
    "dataset_text",
    "default_dataset_rows",
    "epoch_metrics",
    "evaluator_id",
    "evaluator_resource",
    "evaluator_upload_argv",
    "poll_outcome",
    "upload_evaluator",
]


class LaunchPlanDict(TypedDict):
    """``LaunchPlan.to_dict``: the plan as JSON data."""

    job_id: str
    dataset_id: str
    evaluator: str
    commands: list[list[str]]
    warnings: list[str]
    key_via: str


@dataclass(frozen=True)
class LaunchPlan:
    """The commands a launch runs, in order (argv with keys redacted) and the ids it uses."""

    job_id: str
    dataset_id: str
    evaluator: str
    commands: list[list[str]]
    warnings: list[str] = field(default_factory=list)
    key_via: str = "auth-file"  # how each firectl command gets the key (rftlab.launch.firectl)

    def to_dict(self) -> LaunchPlanDict:
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


RESUME_HINT = "run the same command to resume"


@dataclass(frozen=True)
class PollOutcome:
    """What the end of a watch means for the person polling: an exit code and the words for it."""

    exit_code: int
    """0 finished (or still in progress after one poll), 1 failed or cancelled, 3 stopped, resumable"""
    words: str
    """the outcome as ``poll`` prints it: the state, and what to do when the watch stopped early"""


def poll_outcome(result: WatchResult, once: bool = False) -> PollOutcome:
    """The outcome of a watch that ended with ``result`` (``once``: it was a single poll).

    A stall or repeated poll errors stop the watch with exit code 3. The run stays resumable then. A
    failed or cancelled job gives 1. A finished run gives 0, and so does a single poll of a live job.
    """
    state = result.status.state
    if result.stalled:
        return PollOutcome(3, f"stalled (the job was not cancelled; {RESUME_HINT})")
    if state in ("failed", "cancelled"):
        return PollOutcome(1, state)
    finished = state == "completed" and result.done
    if state != "unknown" and (finished or once):
        waiting = state == "completed" and not result.done
        return PollOutcome(0, "completed, waiting for epoch datasets" if waiting else state)
    return PollOutcome(3, f"{state} (stopped after repeated poll errors; {RESUME_HINT})")


def _report_dict(report: Any) -> dict[str, Any]:
    """A preflight's report as a dict (a ``PreflightReport`` by its ``to_dict``, or a mapping already)."""
    data = report.to_dict() if hasattr(report, "to_dict") else report
    if not isinstance(data, Mapping):
        raise TypeError(f"a preflight returned {type(data).__name__}, not a report or a mapping")
    return dict(data)


ArmT = TypeVar("ArmT", bound=FireworksArmSpec)


def _default_preflight(spec: FireworksArmSpec):
    from rftlab.launch.spectrum.preflight import spectrum_preflight

    # the default preflight is the spectrum family's: another family passes its own (rftlab.studies.poker)
    return spectrum_preflight(cast(SpectrumArmSpec, spec))


@dataclass
class FireworksLauncher(Generic[ArmT]):
    """``rftlab.types.Launcher`` for Fireworks RFT. The key comes from ``$FIREWORKS_API_KEY`` only.
    ``ArmT`` is the family's arm spec; without ``preflight`` and ``dataset_rows`` it is the spectrum one."""

    account_id: str | None = None
    style: str = "noun-verb"
    key_via: str = "auth-file"  # how firectl gets the key (rftlab.launch.firectl module docstring)
    firectl_factory: Callable[..., FirectlClient] = Firectl
    preflight: Callable[[ArmT], object] | None = None  # None: rftlab.launch.spectrum.preflight
    dataset_rows: Callable[[ArmT], Iterable[Mapping[str, Any]]] | None = None
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
    ) -> FirectlClient:
        key = os.environ.get(KEY_ENV) or None
        if need_key and not key:
            raise LaunchRefused(f"{KEY_ENV} is not set: export it in your shell (never write it to a file)")
        return self.firectl_factory(
            account_id=self._account(), api_key=key, style=self.style, log=log, key_via=self.key_via
        )

    # ------------------------------------------------------------------------------------ plan
    def plan(self, spec: ArmT, dataset_path: str | Path = "<dataset.jsonl>") -> LaunchPlan:
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

    def _rows(self, spec: ArmT) -> list[Mapping[str, Any]]:
        # the defaults are the spectrum family's: another family passes its own rows and preflight
        return list(
            self.dataset_rows(spec)
            if self.dataset_rows
            else default_dataset_rows(cast(SpectrumArmSpec, spec))
        )

    def check_spec(self, spec: ArmT) -> None:
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
        spec: ArmT,
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

    def _run_preflight(self, spec: ArmT, run: Run) -> None:
        """The family's preflight plus the context-length check, saved to ``provider/preflight.json``;
        ``LaunchRefused`` (and the run failed) when any check fails."""
        report = (self.preflight or _default_preflight)(spec)
        report_dict = _report_dict(report)
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

    def _context_check(self, spec: ArmT) -> dict[str, Any] | None:
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

    def _check_evaluator(self, spec: ArmT, account_id: str, run: Run) -> str:
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

    def _create_job(self, spec: ArmT, run: Run, store: RunStore, failed_job: str) -> None:
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
        self, spec: ArmT, fc: FirectlClient, store: RunStore, failed_job: str, dataset_id: str, ev_name: str
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
