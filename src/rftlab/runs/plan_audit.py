"""The pre-registration audit: may a contrast be called confirmatory (docs/statistics.md §8)?

A contrast the plan calls confirmatory stays **confirmatory** only when

(a) the plan file's bytes match a registered version (:mod:`rftlab.runs.registration`);
(b) the earliest commit of this repository holding those bytes is an ancestor of the commit every run
    of the contrast records (``run.json`` ``git.commit``);
(c) that commit's time is before every such run's start (``created_at``);
(d) every such run records that plan's hash (``run.json`` ``plan_sha256``; runs made before runs
    recorded it have none);
(e) the contrast is not one the plan lists as seen before registration.

Otherwise it is **exploratory**, with every reason. Without git (a source tarball) nothing can be
audited: every contrast is exploratory, "cannot be audited here".

What it cannot show, whatever it finds (:data:`AUDIT_LIMITS`): a commit's time is what its committer's
clock said, and a commit shows only that the bytes existed before the runs' code, not that nobody had
looked at data of the same design before writing them.

    audit = audit_contrasts("data/specs/study.json", {"C-B.gain": [run_c, run_b]}, seen_before=["A-B.x"])
    audit.contrasts["C-B.gain"].family      # "confirmatory" or "exploratory"
    audit.contrasts["C-B.gain"].reasons     # why not, one sentence each
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rftlab.runs.registration import (
    PlanVersion,
    RegistrationError,
    find_version,
    first_commit_holding,
    git_blob_id,
    git_toplevel,
    is_ancestor,
)

if TYPE_CHECKING:
    from rftlab.runs.store import Run

AUDIT_LIMITS = (
    "A commit's time is its committer's clock, and a commit shows only that the plan's bytes existed "
    "before the code of the runs, not that no data of the same design had been looked at before."
)
REBUILD_LIMIT = (
    "The runs of a rebuild from an empty run store always start after the plan was committed, so "
    "conditions (b) and (c) hold for them by construction; they carry weight only for runs that existed "
    "before the rebuild."
)
NOT_AUDITABLE = "cannot be audited here (no git repository holds the plan file)"

__all__ = [
    "AUDIT_LIMITS",
    "NOT_AUDITABLE",
    "ContrastAudit",
    "PlanAudit",
    "DecisionAudit",
    "RunEvidence",
    "audit_contrasts",
    "audit_decision",
]


@dataclass(frozen=True)
class RunEvidence:
    """What the audit reads from one run's ``run.json``."""

    name: str
    commit: str | None
    started_at: str | None
    plan_sha256: str | None

    @classmethod
    def of(cls, run: Run | RunEvidence) -> RunEvidence:
        """From a :class:`rftlab.runs.store.Run` (or a ``RunEvidence``, returned as is)."""
        if isinstance(run, RunEvidence):
            return run
        record = run.record
        commit = (record.git or {}).get("commit")
        return cls(f"{record.arm}/{record.run_id}", commit, record.created_at, record.plan_sha256)


@dataclass(frozen=True)
class ContrastAudit:
    """The audit's verdict on one contrast: its family and, when exploratory, every reason (``reasons``
    name the runs; ``run_problems`` counts them by kind, for a report that names no run)."""

    contrast: str
    family: Literal["confirmatory", "exploratory"]
    reasons: tuple[str, ...]
    runs: int
    general: tuple[str, ...] = ()  # the reasons that are not about one run
    run_problems: tuple[tuple[str, int], ...] = ()  # (what the runs do, how many runs)

    @property
    def confirmatory(self) -> bool:
        return self.family == "confirmatory"

    def sentence(self) -> str:
        """One sentence that names no run: the verdict and why."""
        if self.confirmatory:
            return f"confirmatory: all five conditions hold for its {self.runs} runs"
        parts = [*self.general, *(f"{n} of {self.runs} runs {kind}" for kind, n in self.run_problems)]
        return "exploratory: " + "; ".join(parts)


@dataclass(frozen=True)
class PlanAudit:
    """The audit of one plan file and the contrasts it governs."""

    plan_file: str
    sha256: str
    plan: str | None  # the registered plan's name
    version: PlanVersion | None
    commit: str | None  # the earliest commit here holding the plan's bytes
    commit_time: str | None
    auditable: bool
    problems: tuple[str, ...]  # reasons that hold for every contrast
    notes: tuple[str, ...]
    contrasts: dict[str, ContrastAudit] = field(default_factory=dict)

    def family(self, contrast: str) -> str:
        return self.contrasts[contrast].family

    def registration_line(self) -> str:
        """Which registered version the plan is, and where it was first committed."""
        if self.version is None:
            return (
                f"plan {Path(self.plan_file).name} (sha256 {self.sha256[:12]}…) matches no registered version"
            )
        where = (
            f"first committed in {self.commit[:12]} at {self.commit_time}"
            if self.commit
            else "its commit cannot be checked here"
        )
        return (
            f"plan {self.plan!r} v{self.version.version} (sha256 {self.sha256[:12]}…), {where}; "
            f"registered {self.version.registered_at}"
        )


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _run_reasons(
    run: RunEvidence, sha256: str, commit: str, commit_time: datetime, repo: Path, cache: dict[str, Any]
) -> list[tuple[str, str]]:
    """``(kind, reason)`` for each of (b), (c), (d) that ``run`` breaks; empty when it breaks none."""
    reasons = []
    if run.commit is None:
        reasons.append(("record no commit", f"run {run.name} records no commit"))
    else:
        if run.commit not in cache:
            cache[run.commit] = is_ancestor(repo, commit, run.commit)
        descends = cache[run.commit]
        if descends is None:
            reasons.append(
                (
                    "record a commit this repository does not hold",
                    f"run {run.name}'s commit {run.commit[:12]} is not in this repository",
                )
            )
        elif not descends:
            reasons.append(
                (
                    "record a commit that does not descend from the plan's commit",
                    f"run {run.name}'s commit {run.commit[:12]} does not descend from the plan's commit "
                    f"{commit[:12]}",
                )
            )
    started = _time(run.started_at)
    if started is None:
        reasons.append(("record no start time", f"run {run.name} records no start time"))
    elif not commit_time < started:
        reasons.append(
            (
                "started before the plan's commit",
                f"run {run.name} started at {run.started_at}, not after the plan's commit",
            )
        )
    if run.plan_sha256 is None:
        reasons.append(("record no plan hash", f"run {run.name} records no plan hash"))
    elif run.plan_sha256 != sha256:
        reasons.append(
            (
                "record another plan's hash",
                f"run {run.name} records another plan (sha256 {run.plan_sha256[:12]}…)",
            )
        )
    return reasons


def _plan_state(
    plan_file: Path, repo: str | Path | None, registry_dir: str | Path | None
) -> tuple[PlanAudit, Path | None]:
    """Conditions (a) and the plan's commit, before any run is looked at."""
    data = plan_file.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    problems: list[str] = []
    notes: list[str] = []
    try:
        found = find_version(plan_file, registry_dir)
    except RegistrationError as exc:
        found, problems = None, [str(exc)]
    name, version = found if found is not None else (None, None)
    if found is None and not problems:
        problems.append("the plan's bytes match no registered version (edited after registration?)")
    top = Path(repo) if repo is not None else git_toplevel(plan_file)
    if top is None:
        problems.append(NOT_AUDITABLE)
        return PlanAudit(str(plan_file), digest, name, version, None, None, False, tuple(problems), ()), None
    try:
        relpath = plan_file.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        relpath = None
    held = None if relpath is None else first_commit_holding(top, relpath, git_blob_id(data))
    if held is None:
        problems.append("no commit in this repository's history holds the plan's bytes")
    elif version is not None and held[0] != version.commit:
        notes.append(
            f"registered in commit {version.commit[:12]}, but the earliest commit holding the bytes here is "
            f"{held[0][:12]} (history rewritten?); the audit uses {held[0][:12]}"
        )
    commit, when = held if held is not None else (None, None)
    audit = PlanAudit(
        str(plan_file), digest, name, version, commit, when, True, tuple(problems), tuple(notes)
    )
    return audit, top


def audit_contrasts(
    plan_file: str | Path,
    contrast_runs: Mapping[str, Sequence[Run | RunEvidence]],
    seen_before: Iterable[str] = (),
    *,
    repo: str | Path | None = None,
    registry_dir: str | Path | None = None,
) -> PlanAudit:
    """Audit every contrast in ``contrast_runs`` (contrast id → the runs it uses: ``Run`` or
    :class:`RunEvidence`) against ``plan_file``, the plan that calls them confirmatory; ``seen_before``
    lists contrasts the plan says were seen before it was written. ``repo``: the git work tree (default:
    the one holding the plan file). Pass only contrasts the plan calls confirmatory: an exploratory one
    stays exploratory whatever the audit finds."""
    plan_file = Path(plan_file)
    base, top = _plan_state(plan_file, repo, registry_dir)
    seen = set(seen_before)
    when = _time(base.commit_time)
    cache: dict[str, Any] = {}
    out: dict[str, ContrastAudit] = {}
    for cid, runs in contrast_runs.items():
        evidence = [RunEvidence.of(r) for r in runs]
        general = list(base.problems)
        if not evidence:
            general.append("no runs")
        if cid in seen:
            general.append("its result was seen before the plan was written (the plan says so)")
        per_run: list[tuple[str, str]] = []
        if top is not None and base.commit is not None and when is not None:
            for run in evidence:
                per_run.extend(_run_reasons(run, base.sha256, base.commit, when, top, cache))
        kinds: dict[str, int] = {}
        for kind, _ in per_run:
            kinds[kind] = kinds.get(kind, 0) + 1
        reasons = tuple(
            dict.fromkeys([*base.problems, *(text for _, text in per_run), *general[len(base.problems) :]])
        )
        family: Literal["confirmatory", "exploratory"] = "exploratory" if reasons else "confirmatory"
        out[cid] = ContrastAudit(cid, family, reasons, len(evidence), tuple(general), tuple(kinds.items()))
    return PlanAudit(
        base.plan_file,
        base.sha256,
        base.plan,
        base.version,
        base.commit,
        base.commit_time,
        base.auditable,
        base.problems,
        base.notes,
        out,
    )


@dataclass(frozen=True)
class DecisionAudit:
    """The audit of one registered decision, as a report states it: its family, the sentence saying why
    (naming no run), the registered version and first commit, and what the audit cannot show (the
    registration record's own note among them)."""

    family: Literal["confirmatory", "exploratory"]
    sentence: str
    registration: str
    limits: tuple[str, ...]


def audit_decision(
    plan_file: str | Path,
    runs: Sequence[Run | RunEvidence],
    *,
    repo: str | Path | None = None,
    registry_dir: str | Path | None = None,
) -> DecisionAudit:
    """Audit the one decision ``plan_file`` registers over ``runs`` (``Run`` or :class:`RunEvidence`): a
    plan that matches no registered version is exploratory, never refused."""
    audit = audit_contrasts(plan_file, {"decision": list(runs)}, repo=repo, registry_dir=registry_dir)
    verdict = audit.contrasts["decision"]
    note = (audit.version.note or "").strip() if audit.version is not None else ""
    return DecisionAudit(
        family=verdict.family,
        sentence=verdict.sentence(),
        registration=audit.registration_line(),
        limits=(*audit.notes, *([f"The record says: {note}"] if note else []), REBUILD_LIMIT, AUDIT_LIMITS),
    )


def plan_checks(
    plan_file: str | Path,
    *,
    registry_dir: str | Path | None = None,
    root: str | Path | None = None,
    experiment: str | None = None,
    repo: str | Path | None = None,
) -> list[tuple[bool, str]]:
    """``rftlab plan check``: one ``(ok, line)`` per check of ``plan_file``'s registration (its bytes
    are a registered version, the latest; git is here; every recorded version's commit holds its bytes),
    and with ``experiment`` one per run of it under ``root`` (conditions b–d of the audit)."""
    from rftlab.runs.registration import check_versions, load_registry, registry_path

    plan_file = Path(plan_file)
    audit, top = _plan_state(plan_file, repo, registry_dir)
    out: list[tuple[bool, str]] = []
    if audit.version is None:
        out.append((False, audit.problems[0] if audit.problems else "the plan is not registered"))
        return out
    registry = load_registry(registry_path(audit.plan or "", registry_dir))
    latest = registry.latest() if registry is not None else None
    out.append((True, audit.registration_line()))
    if latest is not None and latest.version != audit.version.version:
        out.append(
            (
                False,
                f"the file holds v{audit.version.version}, but the latest is v{latest.version}: "
                f"restore v{latest.version} or amend",
            )
        )
    if top is None:
        out.append((False, NOT_AUDITABLE))
        return out
    out.append((True, f"git: the plan is in the work tree {top}"))
    out.extend((False, p) for p in audit.problems)
    out.extend((True, f"note: {n}") for n in audit.notes)
    if registry is not None:
        out.extend(check_versions(registry, top))
    if experiment is not None:
        out.extend(_run_checks(plan_file, experiment, root, registry_dir, top))
    return out


def _run_checks(
    plan_file: Path, experiment: str, root: str | Path | None, registry_dir: str | Path | None, top: Path
) -> list[tuple[bool, str]]:
    from rftlab.runs.paths import runs_root
    from rftlab.runs.store import RunStore

    runs, problems = RunStore(runs_root() if root is None else root).scan(experiment)
    out: list[tuple[bool, str]] = [(False, f"{path}: {why}") for path, why in problems.items()]
    if not runs:
        out.append((False, f"no runs of experiment {experiment!r} under the run store"))
        return out
    audit = audit_contrasts(
        plan_file, {RunEvidence.of(r).name: [r] for r in runs}, repo=top, registry_dir=registry_dir
    )
    for name, verdict in audit.contrasts.items():
        if verdict.confirmatory:
            out.append(
                (True, f"run {name}: records this plan and started after its commit, which it descends from")
            )
        else:
            out.append((False, "; ".join(verdict.reasons)))
    return out
