"""Execute the notebooks and render ``reports/RESULTS_<name>.md`` (``make reports``).

Each ``notebooks/NN_name.py`` (jupytext py:percent, the source of truth) is executed top to bottom in a
fresh kernel with nbclient, in the notebook's own folder (as JupyterLab starts it: notebooks resolve the
project's files through ``rftlab.runs.paths``, never through their working directory), then exported with
nbconvert's Markdown exporter with every code cell's input hidden: the report holds the notebook's prose,
its Markdown tables and its figures (PNG files in ``reports/RESULTS_<name>_files/``). ``RFTLAB_QUICK=1``
(``--quick``) shrinks every notebook to smoke size.

A report is what a reviewer reads, so it holds results only (``report_problems`` checks each one):
no stderr stream (warnings and progress bars go to the untracked build log ``reports/build.log``
with the build's durations), no absolute path, no warning line, no progress bar, no traceback.

Builds are incremental and parallel. Beside each report, ``RESULTS_<name>.inputs.json`` records what it was
built from by content (``rftlab.reports.inputs``: the notebook, every ``rftlab`` module it can import, the
project's data and ``pyproject.toml``); a report whose inputs did not change since it was built in this
environment (CPU, Python, package versions) is skipped, and the console and the build log say which reports
were skipped and why the others were rebuilt (``--force`` rebuilds all).
Notebooks that need a rebuild run ``--jobs`` at a time (default: one per CPU core), each kernel with one
BLAS/OpenMP thread, so a report's bytes do not depend on the number of workers or their order. The header
names the commit of the code the report was built from: the last commit that changed one of *its* inputs,
so committing the rebuilt reports does not change it and a rebuild of the same code leaves ``git status``
clean.

Usage::

    python -m rftlab.reports                      # every notebook, full size, into reports/
    python -m rftlab.reports notebooks/00_methods.py --quick --out /tmp/reports
    python -m rftlab.reports --jobs 1 --force     # one at a time, every report rebuilt
    python -m rftlab.reports --check              # run nothing: hygiene and staleness of reports/
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rftlab.reports.exports import split_row, take_svg_figures, write_table_exports
from rftlab.reports.inputs import (
    RECORD_SUFFIX,
    ReportInputs,
    environment_change,
    read_record,
    report_inputs,
    stale_reasons,
    write_record,
)
from rftlab.runs.atomic import atomic_write_bytes, atomic_write_text
from rftlab.runs.paths import NOTEBOOKS_DIR, PROJECT_ROOT, REPORTS_DIR

if TYPE_CHECKING:
    from jupyter_client.manager import AsyncKernelManager

NOTEBOOK_RE = re.compile(r"^\d\d_(?P<name>[A-Za-z0-9_]+)\.py$")
# The folders a report can be built from (its own inputs, ``rftlab.reports.inputs``, are files in these).
REPORT_INPUTS = ("src", "notebooks", "data", "pyproject.toml")
BUILD_LOG = "build.log"
HEARTBEAT_SECONDS = 20.0  # without a progress bar, a console line at most this often during a notebook
# The kernel's environment: results only on stdout (no progress bars, no library chatter) and no network
# lookups for litellm's cost map.
KERNEL_ENV = {
    "TQDM_DISABLE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    # one BLAS/OpenMP thread per kernel: parallel builds do not oversubscribe the cores, and no result
    # depends on how many threads a reduction was split over (the number of workers never changes a byte)
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    # vector figures (rftlab.reports.exports) carry no build date, so their bytes repeat
    "SOURCE_DATE_EPOCH": "0",
}
# Every figure is rendered as PNG (the report shows it) and SVG (the vector export); a fixed salt makes the
# SVG's element ids the same on every rebuild.
KERNEL_ARGUMENTS = (
    "--InlineBackend.figure_formats={'png', 'svg'}",
    "--InlineBackend.rc={'svg.hashsalt': 'rftlab'}",
)

# ------------------------------------------------------------------------------ report hygiene
_ABS_PATH = re.compile(
    r"(?<![\w.~/:-])(?:/(?:home|root|tmp|work|usr|var|opt|Users|private|mnt|srv|etc|proc|run|nix)/"
    r"|[A-Za-z]:\\\\|file://)"
)
_WARNING = re.compile(
    r"\b[A-Z][A-Za-z]*Warning: |^\s*warnings\.warn\(|^\s*(?:WARNING|Warning|WARN)\b[:\]]"
    r"|^\[W [0-9 :.-]+|Traceback \(most recent call last\)"
)
_RUN_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{8}\b")  # rftlab.runs run ids: they change on every rebuild
_PROGRESS = re.compile(r"\d+%\|[^|\n]{0,60}\||\[\d\d:\d\d<|\d\s*(?:it/s|s/it)\]")
# a measured duration ("took 3 s", "2 s of CPU"): it changes with the machine, so a rebuild would differ
_DURATION = re.compile(
    r"\btook \d+(?:\.\d+)?\s*(?:ms|s|seconds?|min|minutes?)\b|\b\d+(?:\.\d+)?\s*(?:s|seconds?) of (?:CPU|wall)\b"
)


GLOSSARY_LINK = "../docs/glossary.md"  # from reports/, where every report lives
KERNEL_DISPLAY_NAME = "Python 3 (rftlab)"
"""The kernel ``make setup`` registers; the committed notebooks name it, so a save in JupyterLab changes nothing."""


def report_problems(text: str) -> list[str]:
    """Every line of a rendered report that a reader must not see: an absolute path (a machine's folder
    layout), a warning, a traceback, a progress bar, a run id or a measured duration (new on every rebuild,
    either would make a rebuilt report differ), or a table row cut by an unescaped ``|``; as ``"line N: <kind>: <text>"``. Empty
    when clean."""
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        for kind, pattern in (
            ("absolute path", _ABS_PATH),
            ("warning", _WARNING),
            ("progress bar", _PROGRESS),
            ("run id", _RUN_ID),
            ("duration", _DURATION),
        ):
            if pattern.search(line):
                problems.append(f"line {number}: {kind}: {line.strip()[:160]}")
    return problems + _table_shape_problems(text)


def _table_shape_problems(text: str) -> list[str]:
    """Table rows with another number of cells than their table's header (an unescaped ``|`` in a cell)."""
    problems, header = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.lstrip().startswith("|"):
            header = None
            continue
        cells = len(split_row(line))  # the exports' own parser: one reading of a table row
        if header is None:
            header = cells
        elif cells != header:
            problems.append(
                f"line {number}: table row of {cells} cells, header {header}: {line.strip()[:160]}"
            )
    return problems


class NotebookFailed(RuntimeError):
    """A notebook raised while executing; the message names the notebook and the failing cell."""


class ReportRejected(RuntimeError):
    """A rendered report holds something a reader must not see (``report_problems``)."""


@dataclass(frozen=True)
class BuiltReport:
    notebook: Path
    report: Path
    figures: int
    seconds: float
    stderr: list[str] = field(default_factory=list)  # stderr the notebook printed (build log, not report)
    rebuilt: bool = True  # False: its inputs had not changed, the report on disk was kept
    reason: str = ""  # why it was rebuilt or skipped (also in the build log)


def report_name(notebook: Path) -> str:
    """``notebooks/00_methods.py`` → ``RESULTS_methods``."""
    match = NOTEBOOK_RE.match(notebook.name)
    if not match:
        raise ValueError(f"{notebook} is not named NN_name.py")
    return f"RESULTS_{match['name']}"


def discover_notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """Every ``NN_name.py`` notebook in ``folder``, in numeric order."""
    return sorted(p for p in folder.glob("*.py") if NOTEBOOK_RE.match(p.name))


class Timings:
    """Wall time of a notebook's steps, for the build log (durations are not results):

    timings = Timings()
    manifest = timings.timed("build", write_dataset, folder, config)
    print(timings.line(), file=sys.stderr)       # "seconds: build 1.2"
    """

    def __init__(self, clock: Any = time.perf_counter) -> None:
        self.clock = clock
        self.seconds: dict[str, float] = {}

    def timed(self, label: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, its wall time kept under ``label``."""
        started = self.clock()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds[label] = self.clock() - started

    def line(self) -> str:
        return "seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items())


async def _shutdown_kernel(km: AsyncKernelManager) -> None:
    """Stop the notebook's kernel (jupyter_client types the coroutine as a bare ``Awaitable``)."""
    await km.shutdown_kernel(now=False)


def execute_notebook(
    notebook: Path,
    quick: bool,
    timeout: int = 1800,
    progress: bool = False,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
):
    """Run ``notebook`` in a fresh kernel and return the executed nbformat node. The kernel starts in
    ``cwd`` (default: the notebook's own folder, as JupyterLab starts it) with this process's environment
    plus ``KERNEL_ENV`` and ``env``.

    ``progress`` shows a cell-by-cell progress bar on stderr."""
    import asyncio
    import tempfile

    import jupytext
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from tqdm.auto import tqdm

    nb = jupytext.read(notebook)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": KERNEL_DISPLAY_NAME, "language": "python"}
    # The kernel inherits this process's environment: set the size and the inline figure backend for it.
    kernel_env = {**KERNEL_ENV, "RFTLAB_QUICK": "1" if quick else "0", **(env or {})}
    # a build is a batch job: no experiment tracking unless RFTLAB_TRACKING asks (rftlab.runs.tracking)
    kernel_env.setdefault("RFTLAB_TRACKING", os.environ.get("RFTLAB_TRACKING") or "off")
    workdir = Path(cwd) if cwd is not None else Path(notebook).resolve().parent
    previous = {key: os.environ.get(key) for key in kernel_env}
    os.environ.update(kernel_env)
    code_cells = sum(cell.cell_type == "code" for cell in nb.cells)
    bar = tqdm(
        total=code_cells, desc=f"      {notebook.name}", unit="cell", disable=not progress, leave=False
    )
    started = last_line = time.perf_counter()
    done = 0

    def cell_done(**_: object) -> None:
        nonlocal last_line, done
        done += 1
        bar.update(1)
        now = time.perf_counter()
        if not progress and now - last_line >= HEARTBEAT_SECONDS:  # no bar (not a terminal): a line
            print(f"      {notebook.name}: {done}/{code_cells} cells, {now - started:.0f} s", flush=True)
            last_line = now

    # The kernel talks to this process over Unix sockets in a private folder (IPC), not TCP: nothing
    # listens on a port, and the kernel's warning about unencrypted TCP never reaches the build output.
    sockets = tempfile.TemporaryDirectory(prefix="rftlab-kernel-")
    km = AsyncKernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets.name) / "kernel"))
    try:
        client = NotebookClient(
            nb,
            km=km,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(workdir)}},
            on_cell_executed=cell_done,
            extra_arguments=list(KERNEL_ARGUMENTS),
        )
        client.execute()
    except CellExecutionError as exc:
        raise NotebookFailed(f"{notebook} failed:\n{exc}") from None
    finally:
        if km.has_kernel:
            asyncio.run(_shutdown_kernel(km))
        sockets.cleanup()
        bar.close()
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return nb


def code_state(
    repo: Path = PROJECT_ROOT, paths: tuple[str, ...] = REPORT_INPUTS
) -> dict[str, str | bool | None]:
    """``{"commit", "dirty"}`` of ``paths`` (default: every report input folder): the last commit that
    changed one of them, and whether they hold uncommitted changes (an untracked file named in ``paths``
    counts); both ``None`` outside a git checkout."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=repo, capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("log", "-1", "--format=%H", "--", *paths)
    if not commit:
        return {"commit": None, "dirty": None}
    untracked = "--untracked-files=no" if paths == REPORT_INPUTS else "--untracked-files=normal"
    status = git("status", "--porcelain", untracked, "--", *paths)
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def report_header(source: Path, quick: bool, git: dict) -> str:
    """The two comment lines that open a report: where it comes from and the code state it was built at."""
    commit = (git["commit"] or "unknown")[:12] + (" (uncommitted changes)" if git["dirty"] else "")
    return (
        f"<!-- Generated by `make reports` from {source.as_posix()} — do not edit by hand. -->\n"
        f"<!-- rftlab code at commit {commit}; quick mode: {'yes' if quick else 'no'} -->\n\n"
    )


def split_stderr(nb) -> list[str]:
    """Remove every stderr stream from the executed notebook (it is not a result) and return its text,
    one entry per stream output, for the build log."""
    captured = []
    for cell in nb.cells:
        kept = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                captured.append(str(output.get("text", "")))
            else:
                kept.append(output)
        if "outputs" in cell:
            cell["outputs"] = kept
    return captured


def render_markdown(
    nb, name: str, out_dir: Path, source: Path, quick: bool, git: dict | None = None
) -> BuiltReport:
    """Write ``<out_dir>/<name>.md`` and its figures; returns what was written. Stderr streams are left
    out (``split_stderr``), and a report failing ``report_problems`` is refused (``ReportRejected``).

    ``git`` is the code state to stamp in the header (``code_state`` of the report's inputs)."""
    from nbconvert import MarkdownExporter

    stderr = split_stderr(nb)
    vectors = take_svg_figures(nb, name)
    exporter = MarkdownExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    files_dir = f"{name}_files"
    body, resources = exporter.from_notebook_node(
        nb, resources={"output_files_dir": files_dir, "unique_key": name}
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out_dir / files_dir, ignore_errors=True)
    outputs = resources.get("outputs", {})
    for rel_path, data in outputs.items():
        atomic_write_bytes(out_dir / rel_path, data)
    header = report_header(source, quick, git or code_state(PROJECT_ROOT))
    body = re.sub(r"^[ \t]+$", "", body, flags=re.MULTILINE)  # nbconvert pads figure blocks with spaces
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    problems = report_problems(body)
    if problems:
        raise ReportRejected(
            f"{source.as_posix()}: the report would show what a reader must not see:\n  "
            + "\n  ".join(problems[:20])
        )
    (out_dir / files_dir).mkdir(parents=True, exist_ok=True)
    for file_name, svg in vectors.items():
        atomic_write_text(out_dir / files_dir / file_name, svg)
    tables = write_table_exports(body, name, out_dir / files_dir)
    body += f"\n*Terms used here are defined in the [glossary]({GLOSSARY_LINK}).*\n"
    if tables or vectors:
        body += (
            f"\n*Exports: {tables} table(s) as CSV and LaTeX (booktabs) and {len(vectors)} figure(s) as SVG in "
            f"`{files_dir}/`.*\n"
        )
    report = out_dir / f"{name}.md"
    atomic_write_text(report, header + body)
    return BuiltReport(notebook=source, report=report, figures=len(outputs), seconds=0.0, stderr=stderr)


def append_build_log(out_dir: Path, entry: dict) -> Path:
    """Append one JSON line to ``<out_dir>/build.log`` (untracked: durations, stderr, run context)."""
    path = Path(out_dir) / BUILD_LOG
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")
    return path


@dataclass(frozen=True)
class _Job:
    """One notebook of a build: what it is built from and why it is (or is not) rebuilt."""

    notebook: Path
    name: str
    source: Path
    inputs: ReportInputs
    reasons: tuple[str, ...]
    git: dict
    record: dict | None = None  # the inputs record on disk when the build was planned


def _plan(notebook: Path, out_dir: Path, quick: bool, force: bool) -> _Job:
    notebook = Path(notebook).resolve()
    name = report_name(notebook)
    try:
        source = notebook.relative_to(PROJECT_ROOT)
    except ValueError:
        source = Path(notebook.name)
    inputs = report_inputs(notebook, quick)
    record = read_record(out_dir, name)
    reasons = stale_reasons(out_dir, name, inputs, record)
    moved = environment_change(record) if record is not None and not reasons else None
    if moved:
        reasons = [moved]
    if force and not reasons:
        reasons = ["--force"]
    project_paths = tuple(p for p in sorted(inputs.files) if (PROJECT_ROOT / p).is_file())
    git = code_state(PROJECT_ROOT, project_paths or REPORT_INPUTS)
    return _Job(notebook, name, source, inputs, tuple(reasons), git, record)


def _execute_and_render(
    job: _Job, out_dir: Path, quick: bool, progress: bool, cwd: Path | None, env: dict | None
) -> BuiltReport:
    """Run one notebook and write its report and inputs record (in a worker process when parallel)."""
    start = time.perf_counter()
    nb = execute_notebook(job.notebook, quick=quick, progress=progress, cwd=cwd, env=env)
    report = render_markdown(nb, job.name, Path(out_dir), job.source, quick, job.git)
    write_record(Path(out_dir), job.name, job.inputs, report.figures)
    seconds = time.perf_counter() - start
    return BuiltReport(
        job.notebook, report.report, report.figures, seconds, report.stderr, reason="; ".join(job.reasons)
    )


def _restamp(report: Path, header: str) -> bool:
    """Give an up-to-date report the current header (its inputs' last commit, now committed) without
    rebuilding it; whether anything changed."""
    text = report.read_text(encoding="utf-8")
    lines = text.split("\n", 2)
    if len(lines) < 3 or not (lines[0].startswith("<!--") and lines[1].startswith("<!--")):
        return False
    new = header + lines[2].lstrip("\n")
    if new == text:
        return False
    atomic_write_text(report, new)
    return True


BUILD_COST_WINDOW = 5  # builds per notebook that build_costs reads, newest first


def build_costs(out_dir: Path, window: int = BUILD_COST_WINDOW) -> dict[str, float]:
    """Each notebook's longest duration over its last ``window`` builds in ``build.log``, for scheduling only.

    The longest, not the last: a rebuild that reused every cached run (the memory notebook in 22 s) says
    nothing of what the same notebook costs from an empty run store (534 s), and scheduling by the last
    one started the costliest notebook third, which stretched an empty-store build from 9.4 to 13.4 min.
    Only the last few builds: a build on a loaded machine or of older code (poker once took 412 s, now 184)
    ages out. A notebook never logged counts 0 and keeps its notebook order (``sort`` is stable)."""
    history: dict[str, list[float]] = {}
    try:
        lines = (Path(out_dir) / BUILD_LOG).read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    for line in lines:
        try:
            entry = json.loads(line)
            if not entry.get("skipped"):
                history.setdefault(str(entry["notebook"]), []).append(float(entry["seconds"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return {name: max(took[-window:]) for name, took in history.items()}


def schedule(todo: list[Any], costs: dict[str, float]) -> list[Any]:
    """The jobs costliest first by ``costs`` (``build_costs``), ties and unlogged ones in their given order."""
    return sorted(todo, key=lambda job: -costs.get(job.source.as_posix(), 0.0))


def _run(todo: list[_Job], jobs: int, out_dir: Path, quick: bool, progress: bool, cwd, env):
    """Yield ``(job, BuiltReport)`` as each notebook finishes: in this process when one worker suffices,
    else in ``jobs`` spawned worker processes (each kernel gets its own process and environment). On a
    failure the notebooks not yet started are cancelled and the error is raised; an interrupt stops the
    workers at once, and a worker stops when the build's process dies (``rftlab.runs.parallel``)."""
    if jobs <= 1 or len(todo) <= 1:
        for job in todo:
            yield job, _execute_and_render(job, out_dir, quick, progress, cwd, env)
        return
    from concurrent.futures import as_completed

    from rftlab.runs.parallel import worker_pool

    with worker_pool(min(jobs, len(todo))) as pool:
        futures = {
            pool.submit(_execute_and_render, job, out_dir, quick, False, cwd, env): job for job in todo
        }
        for future in as_completed(futures):
            yield futures[future], future.result()


def _log_entry(job: _Job, quick: bool, **fields: Any) -> dict:
    return {
        "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "notebook": job.source.as_posix(),
        "report": f"{job.name}.md",
        "commit": job.git["commit"],
        "dirty": job.git["dirty"],
        "quick": quick,
        "inputs": job.inputs.digest,
        **fields,
    }


def build_reports(
    notebooks: list[Path] | None = None,
    out_dir: Path = REPORTS_DIR,
    quick: bool = False,
    progress: bool = False,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    jobs: int = 1,
    force: bool = False,
) -> list[BuiltReport]:
    """Write the report of each notebook whose inputs changed since its report was built (every one with
    ``force``), ``jobs`` notebooks at a time; the others are skipped (their header restamped if the
    commit of their inputs moved). Each runs in ``cwd`` (default its own folder) with ``env`` added to
    the kernel's environment. Stops at the first failure. Durations, stderr and the reason for each
    rebuild or skip go to ``<out_dir>/build.log``, never into a report. Returns every report, in notebook
    order (``rebuilt`` False for the skipped ones)."""
    notebooks = notebooks or discover_notebooks()
    if not notebooks:
        raise FileNotFoundError("no notebooks/NN_name.py notebooks found")
    out_dir = Path(out_dir)
    plan = [_plan(notebook, out_dir, quick, force) for notebook in notebooks]
    total, results = len(plan), {}
    for index, job in enumerate(plan, start=1):
        if job.reasons:
            print(f"[{index}/{total}] {job.notebook.name}: rebuilding ({'; '.join(job.reasons)})", flush=True)
            continue
        report = out_dir / f"{job.name}.md"
        restamped = _restamp(report, report_header(job.source, quick, job.git))
        why = f"inputs unchanged (digest {job.inputs.digest[:12]})" + (
            "; header restamped" if restamped else ""
        )
        print(f"[{index}/{total}] {job.notebook.name}: up to date, skipped — {why}", flush=True)
        figures = int((job.record or {}).get("figures") or 0)
        results[job.name] = BuiltReport(job.notebook, report, figures, 0.0, rebuilt=False, reason=why)
        append_build_log(out_dir, _log_entry(job, quick, skipped=True, reason=why))
    todo = [job for job in plan if job.reasons]
    todo = schedule(todo, build_costs(out_dir))
    for job, built in _run(todo, jobs, out_dir, quick, progress and jobs <= 1, cwd, env):
        results[job.name] = built
        log = append_build_log(
            out_dir,
            _log_entry(
                job,
                quick,
                seconds=round(built.seconds, 1),
                figures=built.figures,
                stderr=built.stderr,
                reason=built.reason,
            ),
        )
        note = f"; {len(built.stderr)} stderr output(s) kept in {log}" if built.stderr else ""
        print(
            f"      wrote {built.report} ({built.figures} figures) in {built.seconds:.1f} s{note}", flush=True
        )
    return [results[job.name] for job in plan]


def default_jobs() -> int:
    """Workers for a build: ``$RFTLAB_REPORT_JOBS`` when set, else one per CPU core this process may use."""
    configured = os.environ.get("RFTLAB_REPORT_JOBS", "").strip()
    if configured:
        return max(1, int(configured))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 256:
        raise argparse.ArgumentTypeError(f"must be between 1 and 256, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    summary = __doc__.splitlines()[0] if __doc__ else None
    parser = argparse.ArgumentParser(prog="python -m rftlab.reports", description=summary)
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: all)")
    parser.add_argument("--out", type=Path, default=REPORTS_DIR, help="report folder (default: reports/)")
    parser.add_argument("--quick", action="store_true", help="smoke-size run (RFTLAB_QUICK=1)")
    parser.add_argument(
        "--jobs", type=_positive, default=None, help="notebooks run at once (default: one per CPU core)"
    )
    parser.add_argument("--force", action="store_true", help="rebuild every report, changed inputs or not")
    parser.add_argument(
        "--check",
        action="store_true",
        help="run nothing: check every RESULTS_*.md in --out for what a reader must not see, and that each "
        "is current with its inputs (exit 1 on a problem)",
    )
    args = parser.parse_args(argv)
    if args.check:
        return check_reports(args.out)
    quick = args.quick or os.environ.get("RFTLAB_QUICK") == "1"
    try:
        jobs = args.jobs or default_jobs()
        build_reports(
            args.notebooks or None,
            args.out,
            quick=quick,
            progress=sys.stderr.isatty(),
            jobs=jobs,
            force=args.force,
        )
    except (NotebookFailed, ReportRejected, FileNotFoundError, ValueError) as exc:
        print(f"rftlab reports: error: {exc}", file=sys.stderr)
        return 1
    return 0


def report_staleness(folder: Path, report: Path) -> list[str]:
    """Why ``report`` in ``folder`` is not current with its inputs as the tree holds them now (empty
    when current): no inputs record, its notebook gone, or inputs changed since it was built."""
    name = report.stem
    record = read_record(folder, name)
    if record is None:
        return [f"no readable inputs record ({name}{RECORD_SUFFIX}): rebuild it with make reports"]
    notebook = PROJECT_ROOT / str(record.get("notebook", ""))
    if not notebook.is_file():
        return [f"its notebook {record.get('notebook')} is not in this project"]
    reasons = stale_reasons(folder, name, report_inputs(notebook, bool(record.get("quick"))), record)
    return [f"stale, rebuild it with make reports: {reason}" for reason in reasons]


def check_reports(folder: Path = REPORTS_DIR) -> int:
    """Print every problem of every ``RESULTS_*.md`` in ``folder`` (``report_problems``) and every report
    not current with its inputs (``report_staleness``); exit code 1 if there is one."""
    reports = sorted(Path(folder).glob("RESULTS_*.md"))
    bad = stale = 0
    for report in reports:
        text = report.read_text(encoding="utf-8")
        for problem in report_problems(text):
            bad += 1
            print(f"{report.name}: {problem}")
        for reason in report_staleness(Path(folder), report):
            stale += 1
            print(f"{report.name}: {reason}")
    print(f"{len(reports)} report(s), {bad} problem(s), {stale} stale")
    return 1 if bad or stale else 0
