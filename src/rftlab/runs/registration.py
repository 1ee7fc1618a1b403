"""Registered analysis plans: which exact bytes of a plan file were fixed, in which commit, and when
(docs/statistics.md §8).

A plan file (a study plan, a gate spec) is *registered* by recording the SHA-256 of its exact bytes and
the earliest commit of the repository's history whose blob of that file has those bytes, with that
commit's time. The records live in the repository, one file per plan,
``data/registrations/<plan>.json``::

    {"plan": "study_spectrum_memory", "versions": [{"version": 1, "file": "data/specs/...", "sha256": ...,
     "blob": <git blob id>, "commit": ..., "commit_time": ..., "registered_at": ..., "note": ...}, ...]}

A changed plan is never registered in place: it is an *amendment*, a new version that keeps the old one
and records the previous version's hash and a unified diff from it (:func:`amend_plan`). A study that
loads a plan whose bytes match no registered version stops (:func:`require_registered`), so an edit
(adding an arm, moving a margin) cannot silently become "the pre-registered plan".

Registration needs git and a committed file: bytes that no commit holds are refused (commit them first).
Every record is written atomically (:mod:`rftlab.runs.atomic`). What a registration can and cannot show
is the audit's business (:mod:`rftlab.runs.plan_audit`).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rftlab.runs.atomic import atomic_write_text
from rftlab.runs.paths import PROJECT_ROOT

REGISTRY_DIR = PROJECT_ROOT / "data" / "registrations"
_HEX64 = r"^[0-9a-f]{64}$"
_HEX40 = r"^[0-9a-f]{40}$"

__all__ = [
    "REGISTRY_DIR",
    "PlanVersion",
    "Registry",
    "RegistrationError",
    "UnregisteredPlanError",
    "amend_plan",
    "files_added_in",
    "find_registry",
    "find_version",
    "first_commit_holding",
    "git_blob_id",
    "git_toplevel",
    "is_ancestor",
    "load_registry",
    "register_plan",
    "registry_path",
    "require_registered",
]


class RegistrationError(ValueError):
    """A registration or amendment refused (one line saying why and what to do)."""


class UnregisteredPlanError(RegistrationError):
    """A plan file's bytes match no registered version."""


class PlanVersion(BaseModel):
    """One registered version of a plan: its exact bytes (by hash) and the commit that first held them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(ge=1)
    file: str = Field(min_length=1, description="path of the plan file, relative to the repository root")
    sha256: str = Field(pattern=_HEX64)
    blob: str = Field(pattern=_HEX40, description="git's blob id of the same bytes")
    commit: str = Field(pattern=_HEX40, description="the earliest commit whose blob of `file` is `blob`")
    commit_time: str = Field(description="that commit's committer time, UTC")
    registered_at: str = Field(description="when this record was made, UTC")
    note: str = ""
    previous_sha256: str | None = Field(default=None, pattern=_HEX64)
    diff: str | None = Field(default=None, description="unified diff from the previous version")


class Registry(BaseModel):
    """Every registered version of one plan, oldest first."""

    model_config = ConfigDict(extra="forbid")

    plan: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    versions: list[PlanVersion] = Field(default_factory=list)

    def latest(self) -> PlanVersion | None:
        return self.versions[-1] if self.versions else None

    def find(self, sha256: str) -> PlanVersion | None:
        return next((v for v in self.versions if v.sha256 == sha256), None)


# ------------------------------------------------------------------------------------------ git


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    """``git -C repo args`` (bytes out); ``None`` when git cannot be run at all."""
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def git_toplevel(path: str | Path) -> Path | None:
    """The root of the git work tree holding ``path`` (a file or folder), or ``None`` outside one."""
    here = Path(path)
    folder = here if here.is_dir() else here.parent
    done = _git(folder, "rev-parse", "--show-toplevel")
    if done is None or done.returncode != 0:
        return None
    return Path(done.stdout.decode("utf-8", "replace").strip())


def git_blob_id(data: bytes) -> str:
    """Git's id of a blob holding ``data`` (SHA-1 of ``"blob <size>\\0" + data``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _commit_time(repo: Path, commit: str) -> str | None:
    done = _git(repo, "show", "-s", "--format=%ct", commit)
    if done is None or done.returncode != 0:
        return None
    stamp = int(done.stdout.decode().strip())
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def first_commit_holding(repo: Path, relpath: str, blob: str) -> tuple[str, str] | None:
    """``(commit, committer time)`` of the earliest commit in HEAD's history whose blob at ``relpath`` is
    ``blob`` (ancestors first, every parent of a merge followed), or ``None`` when no commit holds it."""
    done = _git(repo, "rev-list", "--full-history", "--topo-order", "--reverse", "HEAD", "--", relpath)
    if done is None or done.returncode != 0:
        return None
    commits = done.stdout.decode().split()
    if not commits:
        return None
    query = "".join(f"{c}:{relpath}\n" for c in commits).encode()
    try:
        batch = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "--batch-check=%(objectname)"],
            input=query,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    answers = batch.stdout.decode().splitlines()
    for commit, answer in zip(commits, answers, strict=False):
        if answer.strip() == blob:
            time = _commit_time(repo, commit)
            return None if time is None else (commit, time)
    return None


def is_ancestor(repo: Path, ancestor: str, commit: str) -> bool | None:
    """Whether ``ancestor`` is ``commit`` or one of its ancestors; ``None`` when ``commit`` (or git) is
    unknown here."""
    known = _git(repo, "cat-file", "-e", f"{commit}^{{commit}}")
    if known is None or known.returncode != 0:
        return None
    done = _git(repo, "merge-base", "--is-ancestor", ancestor, commit)
    if done is None or done.returncode not in (0, 1):
        return None
    return done.returncode == 0


def _blob_bytes(repo: Path, blob: str) -> bytes | None:
    done = _git(repo, "cat-file", "blob", blob)
    return None if done is None or done.returncode != 0 else done.stdout


# ------------------------------------------------------------------------------------------ records


def registry_path(name: str, registry_dir: str | Path | None = None) -> Path:
    """Where the registrations of plan ``name`` are kept."""
    return Path(REGISTRY_DIR if registry_dir is None else registry_dir) / f"{name}.json"


def load_registry(path: str | Path) -> Registry | None:
    """The registry at ``path`` (``None`` when the file does not exist); a damaged one is a
    :class:`RegistrationError` naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistrationError(f"{path}: cannot be read ({exc.__class__.__name__})") from None
    try:
        return Registry.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise RegistrationError(f"{path}: not a valid plan registry ({first})") from None


def _registries(registry_dir: str | Path | None) -> list[tuple[Path, Registry]]:
    folder = Path(REGISTRY_DIR if registry_dir is None else registry_dir)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        registry = load_registry(path)
        if registry is not None:
            out.append((path, registry))
    return out


def _sha256(path: Path) -> tuple[bytes, str]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RegistrationError(
            f"{path}: cannot be read ({exc.strerror or exc.__class__.__name__})"
        ) from None
    return data, hashlib.sha256(data).hexdigest()


def find_version(
    plan_file: str | Path, registry_dir: str | Path | None = None
) -> tuple[str, PlanVersion] | None:
    """``(plan name, version)`` of the registered version whose bytes are ``plan_file``'s, else ``None``.
    Needs no git: the bytes' hash is looked up in the records."""
    _, digest = _sha256(Path(plan_file))
    for _, registry in _registries(registry_dir):
        found = registry.find(digest)
        if found is not None:
            return registry.plan, found
    return None


def require_registered(
    plan_file: str | Path, registry_dir: str | Path | None = None
) -> tuple[str, PlanVersion]:
    """:func:`find_version`, or an :class:`UnregisteredPlanError` in one line saying what to do."""
    found = find_version(plan_file, registry_dir)
    if found is not None:
        return found
    path = Path(plan_file)
    known = [
        (p, r) for p, r in _registries(registry_dir) if any(v.file.endswith(path.name) for v in r.versions)
    ]
    if known:
        _, registry = known[0]
        latest = registry.latest()
        raise UnregisteredPlanError(
            f"{path.name} was edited after registration: its bytes match no registered version of plan "
            f"{registry.plan!r} (latest v{latest.version if latest else '?'}); commit it and register an "
            f"amendment: rftlab plan amend {path} --from {latest.version if latest else 1}"
        )
    raise UnregisteredPlanError(
        f"{path.name} is not a registered plan; commit it and run: rftlab plan register {path}"
    )


def find_registry(plan_file: str | Path, registry_dir: str | Path | None = None) -> Registry | None:
    """The registry holding the version whose bytes are ``plan_file``'s (every version of that plan)."""
    _, digest = _sha256(Path(plan_file))
    return next((r for _, r in _registries(registry_dir) if r.find(digest) is not None), None)


def files_added_in(repo: str | Path, commit: str) -> list[str] | None:
    """The paths ``commit`` added (against its first parent), or ``None`` when git or the commit is
    not here."""
    done = _git(Path(repo), "show", "--diff-filter=A", "--name-only", "--format=", commit)
    if done is None or done.returncode != 0:
        return None
    return [line for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]


@dataclass(frozen=True)
class _Located:
    repo: Path
    relpath: str
    data: bytes
    sha256: str
    blob: str
    commit: str
    commit_time: str


def _locate(plan_file: Path, repo: str | Path | None) -> _Located:
    """The plan's bytes and the earliest commit holding them; refusals name what to do."""
    data, digest = _sha256(plan_file)
    top = Path(repo) if repo is not None else git_toplevel(plan_file)
    if top is None:
        raise RegistrationError(f"{plan_file}: not in a git repository; a plan is registered by its commit")
    try:
        relpath = plan_file.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        raise RegistrationError(f"{plan_file}: not inside the repository {top}") from None
    blob = git_blob_id(data)
    held = first_commit_holding(top, relpath, blob)
    if held is None:
        raise RegistrationError(
            f"{relpath}: these bytes are not committed yet; commit the plan first, then register it"
        )
    return _Located(top, relpath, data, digest, blob, held[0], held[1])


def _now(now: datetime | None) -> str:
    return (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write(path: Path, registry: Registry) -> None:
    text = json.dumps(registry.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    atomic_write_text(path, text)


def _refuse_registered(plan_file: Path, registry_dir: str | Path | None, outcome: str) -> None:
    """``RegistrationError`` when the plan file's bytes are a registered version already."""
    found = find_version(plan_file, registry_dir)
    if found is not None:
        raise RegistrationError(
            f"{plan_file.name}: these bytes are registered already (plan {found[0]!r}, "
            f"v{found[1].version}); {outcome}"
        )


def register_plan(
    plan_file: str | Path,
    *,
    name: str | None = None,
    note: str = "",
    repo: str | Path | None = None,
    registry_dir: str | Path | None = None,
    now: datetime | None = None,
) -> PlanVersion:
    """Register the first version of a plan (``name``: default the file's stem). Refused when the bytes
    are not committed, when they are registered already, and when the plan has versions (a changed plan
    is an amendment: :func:`amend_plan`)."""
    plan_file = Path(plan_file)
    name = name or plan_file.stem
    _refuse_registered(plan_file, registry_dir, "nothing recorded")
    where = registry_path(name, registry_dir)
    registry = load_registry(where) or Registry(plan=name)
    latest = registry.latest()
    if latest is not None:
        raise RegistrationError(
            f"plan {name!r} is registered (v{latest.version}) and these bytes differ; a changed plan is an "
            f"amendment: rftlab plan amend {plan_file} --from {latest.version}"
        )
    located = _locate(plan_file, repo)
    version = PlanVersion(
        version=1,
        file=located.relpath,
        sha256=located.sha256,
        blob=located.blob,
        commit=located.commit,
        commit_time=located.commit_time,
        registered_at=_now(now),
        note=note,
    )
    _write(where, Registry(plan=name, versions=[version]))
    return version


def _unified_diff(old: bytes, new: bytes, old_name: str, new_name: str) -> str:
    lines = difflib.unified_diff(
        old.decode("utf-8", "replace").splitlines(keepends=True),
        new.decode("utf-8", "replace").splitlines(keepends=True),
        fromfile=old_name,
        tofile=new_name,
    )
    return "".join(lines)


def amend_plan(
    plan_file: str | Path,
    from_version: int,
    *,
    name: str | None = None,
    note: str = "",
    repo: str | Path | None = None,
    registry_dir: str | Path | None = None,
    now: datetime | None = None,
) -> PlanVersion:
    """Register ``plan_file``'s committed bytes as the next version of plan ``name`` (default: the
    file's stem), amending version ``from_version``, which must be the latest; the old versions are kept
    and the new one records the previous hash and the unified diff from it."""
    plan_file = Path(plan_file)
    name = name or plan_file.stem
    where = registry_path(name, registry_dir)
    registry = load_registry(where)
    latest = None if registry is None else registry.latest()
    if registry is None or latest is None:
        raise RegistrationError(
            f"plan {name!r} has no registered version; register it first: rftlab plan register {plan_file}"
        )
    if from_version != latest.version:
        raise RegistrationError(
            f"plan {name!r}: an amendment continues the latest version (v{latest.version}), not v{from_version}"
        )
    _refuse_registered(plan_file, registry_dir, "nothing to amend")
    located = _locate(plan_file, repo)
    old = _blob_bytes(located.repo, latest.blob)
    if old is None:
        raise RegistrationError(
            f"plan {name!r}: v{latest.version}'s bytes (blob {latest.blob[:12]}) are "
            "not in this repository, so the diff cannot be made"
        )
    version = PlanVersion(
        version=latest.version + 1,
        file=located.relpath,
        sha256=located.sha256,
        blob=located.blob,
        commit=located.commit,
        commit_time=located.commit_time,
        registered_at=_now(now),
        note=note,
        previous_sha256=latest.sha256,
        diff=_unified_diff(
            old, located.data, f"v{latest.version}/{latest.file}", f"v{latest.version + 1}/{located.relpath}"
        ),
    )
    _write(where, Registry(plan=name, versions=[*registry.versions, version]))
    return version


def check_versions(registry: Registry, repo: Path) -> list[tuple[bool, str]]:
    """One ``(ok, line)`` per recorded version: its commit exists here and holds exactly its bytes, and is
    the earliest commit that does; an amendment's previous hash is the version before it."""
    out: list[tuple[bool, str]] = []
    previous: PlanVersion | None = None
    for v in registry.versions:
        label = f"v{v.version} ({v.file}, sha256 {v.sha256[:12]})"
        data = _blob_bytes(repo, v.blob)
        held = first_commit_holding(repo, v.file, v.blob)
        if data is None or hashlib.sha256(data).hexdigest() != v.sha256:
            out.append((False, f"{label}: its bytes are not in this repository"))
        elif held is None:
            out.append((False, f"{label}: no commit in HEAD's history holds these bytes at {v.file}"))
        elif held[0] != v.commit:
            out.append(
                (
                    False,
                    f"{label}: recorded commit {v.commit[:12]}, but the earliest commit holding "
                    f"the bytes here is {held[0][:12]} (history rewritten?)",
                )
            )
        else:
            out.append((True, f"{label}: first committed in {v.commit[:12]} at {v.commit_time}"))
        if previous is not None and v.previous_sha256 != previous.sha256:
            out.append((False, f"v{v.version}: its previous hash is not v{previous.version}'s"))
        previous = v
    return out


def version_lines(versions: Sequence[PlanVersion]) -> list[str]:
    """A short line per version, for a report or the CLI."""
    return [
        f"v{v.version}: sha256 {v.sha256[:12]}…, commit {v.commit[:12]} ({v.commit_time}), "
        f"registered {v.registered_at}" + (f"; {v.note}" if v.note else "")
        for v in versions
    ]
