"""What a report is built from, by content: the notebook, every ``rftlab`` module it can import, the
project's data, ``pyproject.toml`` and the renderer (``rftlab.reports``).

``make reports`` rebuilds a report only when one of these changed since the report was written. The
record of what it was built from is ``reports/RESULTS_<name>.inputs.json`` beside the report: the SHA-256
of each input file and one digest over them all (and the quick flag). Whether a rebuild is needed, and
why, is a comparison of that record with the tree as it is now (``stale_reasons``).

The library code a notebook depends on is its *import closure* (``rftlab.runs.codehash``): every
``rftlab`` module an ``import`` anywhere in the notebook can load, transitively, with their parent packages.
It is a superset of what one run executes, which is the safe side: a change it holds triggers a rebuild
that may turn out to change nothing, never the other way round. All of ``data/`` counts for every notebook (a spec
is named at run time, not imported).

The record also names the environment it was built in (``environment``: Python, the CPU, the installed
versions of the project's declared dependencies). It is not a content input and ``--check`` does not read
it, but a build in another environment rebuilds every report: float rounding differs between CPUs and
library versions (the local GS1 study's numbers do), so a report built on another machine is not this
machine's result, and a fresh clone's ``make reports`` runs every notebook.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import subprocess
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from rftlab.runs.atomic import atomic_write_text
from rftlab.runs.codehash import import_closure
from rftlab.runs.paths import PROJECT_ROOT

DATA_FOLDER = "data"
PROJECT_FILES = ("pyproject.toml",)
# The renderer shapes every report's bytes (header, whitespace, what is refused): an input of each one.
RENDERER = "rftlab.reports"
RECORD_SUFFIX = ".inputs.json"
RECORD_VERSION = 1


@dataclass(frozen=True)
class ReportInputs:
    """The files one report is built from (project-relative POSIX path → SHA-256) and the build mode."""

    notebook: str
    files: dict[str, str]
    quick: bool

    @property
    def digest(self) -> str:
        """One SHA-256 over the quick flag and every (path, file digest) pair, in path order."""
        payload = json.dumps({"quick": self.quick, "files": self.files}, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def record(self, figures: int) -> dict:
        return {
            "version": RECORD_VERSION,
            "environment": environment(),
            "notebook": self.notebook,
            "quick": self.quick,
            "digest": self.digest,
            "figures": figures,
            "files": dict(sorted(self.files.items())),
        }


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or "unknown"
    match = re.search(r"^model name\s*:\s*(.+)$", text, flags=re.MULTILINE)
    return match.group(1).strip() if match else platform.processor() or "unknown"


def _declared_dependencies(root: Path = PROJECT_ROOT) -> list[str]:
    """Distribution names of every dependency ``pyproject.toml`` declares, extras included."""
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return []
    specs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        specs.extend(extra)
    names = {re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0].lower() for spec in specs}
    return sorted(name for name in names if name)


@cache
def environment() -> dict:
    """What the build ran on (not a content input; see the module docstring): Python, machine, CPU
    model, and the installed version of every declared dependency (``None`` when not installed)."""
    versions = {}
    for name in _declared_dependencies():
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "packages": versions,
    }


def environment_change(record: dict) -> str | None:
    """How the environment of ``record`` differs from this one, in words; ``None`` when it does not."""
    old, new = record.get("environment"), environment()
    if old == new:
        return None
    if not isinstance(old, dict):
        return "built in an unrecorded environment"
    for key in ("python", "machine", "cpu"):
        if old.get(key) != new[key]:
            return f"built with {key} {old.get(key)!r}, this is {new[key]!r}"
    recorded = old.get("packages")
    packages = recorded if isinstance(recorded, dict) else {}
    for name, version in new["packages"].items():
        if packages.get(name) != version:
            return f"built with {name} {packages.get(name)}, this has {version}"
    return "built in another environment"


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _git_files(root: Path, folder: str) -> list[str] | None:
    """Files under ``folder`` that git tracks or would track (ignored ones left out); ``None`` outside git."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", folder],
            cwd=root,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return sorted({name for name in done.stdout.decode("utf-8").split("\0") if name})


def data_files(root: Path = PROJECT_ROOT) -> list[str]:
    """The project's data files (project-relative): git's view where there is one (generated, ignored
    folders such as the rebuilt SFT dataset are not inputs), otherwise every file under ``data/``."""
    listed = _git_files(root, DATA_FOLDER)
    if listed is None:
        folder = root / DATA_FOLDER
        listed = sorted(p.relative_to(root).as_posix() for p in folder.rglob("*") if p.is_file())
    return [name for name in listed if (root / name).is_file()]


def notebook_key(notebook: Path, root: Path = PROJECT_ROOT) -> str:
    """The notebook as a record names it: project-relative, or its file name when outside the project."""
    try:
        return Path(notebook).resolve().relative_to(root).as_posix()
    except ValueError:
        return Path(notebook).name


def report_inputs(notebook: Path, quick: bool, root: Path = PROJECT_ROOT) -> ReportInputs:
    """Every input of ``notebook``'s report, hashed now."""
    notebook = Path(notebook).resolve()
    files = {notebook_key(notebook, root): file_digest(notebook)}
    source = notebook.read_text(encoding="utf-8") + f"\nimport {RENDERER}\n"
    for path in import_closure(source, root / "src"):
        files[path.relative_to(root).as_posix()] = file_digest(path)
    for name in [*data_files(root), *PROJECT_FILES]:
        if (root / name).is_file():
            files[name] = file_digest(root / name)
    return ReportInputs(notebook=notebook_key(notebook, root), files=files, quick=quick)


def record_path(out_dir: Path, name: str) -> Path:
    return Path(out_dir) / f"{name}{RECORD_SUFFIX}"


def write_record(out_dir: Path, name: str, inputs: ReportInputs, figures: int) -> Path:
    path = record_path(out_dir, name)
    atomic_write_text(path, json.dumps(inputs.record(figures), indent=1, sort_keys=True) + "\n")
    return path


def read_record(out_dir: Path, name: str) -> dict | None:
    """The inputs record of report ``name`` in ``out_dir``; ``None`` when absent or unreadable (a
    damaged record only means the report is rebuilt)."""
    try:
        record = json.loads(record_path(out_dir, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
        return None
    if not isinstance(record.get("files"), dict):
        return None
    return record


def changed_inputs(record: dict, inputs: ReportInputs) -> list[str]:
    """The input paths whose content differs between ``record`` and ``inputs`` (added and removed ones
    included), sorted."""
    old, new = record.get("files", {}), inputs.files
    return sorted(path for path in set(old) | set(new) if old.get(path) != new.get(path))


_UNREAD: Any = object()


def stale_reasons(out_dir: Path, name: str, inputs: ReportInputs, record: dict | None = _UNREAD) -> list[str]:
    """Why report ``name`` in ``out_dir`` must be rebuilt from ``inputs``; empty when it is current.
    ``record`` is its inputs record when the caller has read it already (``read_record``)."""
    report = Path(out_dir) / f"{name}.md"
    if not report.is_file():
        return ["no report yet"]
    if record is _UNREAD:
        record = read_record(out_dir, name)
    if record is None:
        return [f"no readable inputs record ({record_path(out_dir, name).name})"]
    reasons = []
    if record.get("quick") != inputs.quick:
        reasons.append(f"built {'quick' if record.get('quick') else 'full'}-size")
    changed = changed_inputs(record, inputs)
    if changed:
        shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        reasons.append(f"changed: {shown}")
    figures = int(record.get("figures") or 0)
    if figures and not (Path(out_dir) / f"{name}_files").is_dir():
        reasons.append(f"its figure folder {name}_files/ is missing")
    return reasons
