"""Execute the notebooks and render ``reports/RESULTS_<name>.md`` (``make reports``).

Each ``notebooks/NN_name.py`` (jupytext py:percent, the source of truth) is executed top to bottom in a
fresh kernel with nbclient, in the notebook's own folder (as JupyterLab starts it: notebooks resolve the
project's files through ``rftlab.runs.paths``, never through their working directory), then exported with
nbconvert's Markdown exporter with every code cell's input hidden: the report holds the notebook's prose,
its Markdown tables and its figures (PNG files in ``reports/RESULTS_<name>_files/``). ``RFTLAB_QUICK=1``
(``--quick``) shrinks every notebook to smoke size.

A report is what a reviewer reads, so it holds results only (``report_problems`` checks each one):
no stderr stream (warnings and progress bars go to the untracked build log ``reports/build.log``
with the build's durations), no absolute path, no warning line, no progress bar, no traceback. The header
names the commit of the code the report was built from: the last commit that changed the inputs
(``src/``, ``notebooks/``, ``data/``, ``pyproject.toml``), so committing the rebuilt reports does not
change it and a rebuild of the same code leaves ``git status`` clean.

Usage::

    python -m rftlab.reports                      # every notebook, full size, into reports/
    python -m rftlab.reports notebooks/00_methods.py --quick --out /tmp/reports
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
from typing import Any

from rftlab.runs.atomic import atomic_write_bytes, atomic_write_text
from rftlab.runs.paths import NOTEBOOKS_DIR, PROJECT_ROOT, REPORTS_DIR

NOTEBOOK_RE = re.compile(r"^\d\d_(?P<name>[A-Za-z0-9_]+)\.py$")
# What a report is built from: a change anywhere else (reports, README, tests) does not change its stamp.
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
}

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


KERNEL_DISPLAY_NAME = "Python 3 (rftlab)"
"""The kernel ``make setup`` registers; the committed notebooks name it, so a save in JupyterLab changes nothing."""


def report_problems(text: str) -> list[str]:
    """Every line of a rendered report that a reader must not see: an absolute path (a machine's folder
    layout), a warning, a traceback, a progress bar, a run id (new on every rebuild, it would make a
    rebuilt report differ), or a table row cut by an unescaped ``|``; as ``"line N: <kind>: <text>"``. Empty
    when clean."""
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        for kind, pattern in (
            ("absolute path", _ABS_PATH),
            ("warning", _WARNING),
            ("progress bar", _PROGRESS),
            ("run id", _RUN_ID),
        ):
            if pattern.search(line):
                problems.append(f"line {number}: {kind}: {line.strip()[:160]}")
    return problems + _table_shape_problems(text)


def _cells(line: str) -> int:
    """Cells of a Markdown table row: ``|`` not escaped (``\\|``), less the two outer ones."""
    return len(re.findall(r"(?<!\\)\|", line.strip())) - 1


def _table_shape_problems(text: str) -> list[str]:
    """Table rows with another number of cells than their table's header (an unescaped ``|`` in a cell)."""
    problems, header = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.lstrip().startswith("|"):
            header = None
            continue
        if header is None:
            header = _cells(line)
        elif _cells(line) != header:
            problems.append(
                f"line {number}: table row of {_cells(line)} cells, header {header}: {line.strip()[:160]}"
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
        )
        client.execute()
    except CellExecutionError as exc:
        raise NotebookFailed(f"{notebook} failed:\n{exc}") from None
    finally:
        if km.has_kernel:
            asyncio.run(km.shutdown_kernel(now=False))
        sockets.cleanup()
        bar.close()
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return nb


def code_state(repo: Path = PROJECT_ROOT) -> dict[str, str | bool | None]:
    """``{"commit", "dirty"}`` of the report inputs (``REPORT_INPUTS``): the last commit that changed one
    of them, and whether they hold uncommitted changes; both ``None`` outside a git checkout."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=repo, capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("log", "-1", "--format=%H", "--", *REPORT_INPUTS)
    if not commit:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no", "--", *REPORT_INPUTS)
    return {"commit": commit, "dirty": None if status is None else bool(status)}


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

    ``git`` is the code state to stamp in the header (``code_state``, taken once per build)."""
    from nbconvert import MarkdownExporter

    stderr = split_stderr(nb)
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
    git = git or code_state(PROJECT_ROOT)
    commit = (git["commit"] or "unknown")[:12] + (" (uncommitted changes)" if git["dirty"] else "")
    header = (
        f"<!-- Generated by `make reports` from {source.as_posix()} — do not edit by hand. -->\n"
        f"<!-- rftlab code at commit {commit}; quick mode: {'yes' if quick else 'no'} -->\n\n"
    )
    body = re.sub(r"^[ \t]+$", "", body, flags=re.MULTILINE)  # nbconvert pads figure blocks with spaces
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    problems = report_problems(body)
    if problems:
        raise ReportRejected(
            f"{source.as_posix()}: the report would show what a reader must not see:\n  "
            + "\n  ".join(problems[:20])
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


def build_reports(
    notebooks: list[Path] | None = None,
    out_dir: Path = REPORTS_DIR,
    quick: bool = False,
    progress: bool = False,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> list[BuiltReport]:
    """Execute each notebook (in ``cwd``, default its own folder; ``env`` added to the kernel's
    environment) and write its report, printing progress; stops at the first failure. Durations and
    stderr go to ``<out_dir>/build.log``, never into a report."""
    notebooks = notebooks or discover_notebooks()
    if not notebooks:
        raise FileNotFoundError("no notebooks/NN_name.py notebooks found")
    built = []
    git = code_state(PROJECT_ROOT)  # once, so every report of a build carries the same stamp
    for index, notebook in enumerate(notebooks, start=1):
        notebook = Path(notebook).resolve()
        name = report_name(notebook)
        print(
            f"[{index}/{len(notebooks)}] executing {notebook.name} ({'quick' if quick else 'full'}) ...",
            flush=True,
        )
        start = time.perf_counter()
        nb = execute_notebook(notebook, quick=quick, progress=progress, cwd=cwd, env=env)
        try:
            source = notebook.relative_to(PROJECT_ROOT)
        except ValueError:
            source = Path(notebook.name)
        report = render_markdown(nb, name, Path(out_dir), source, quick, git)
        seconds = time.perf_counter() - start
        built.append(BuiltReport(notebook, report.report, report.figures, seconds, report.stderr))
        log = append_build_log(
            Path(out_dir),
            {
                "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "notebook": source.as_posix(),
                "report": report.report.name,
                "commit": git["commit"],
                "dirty": git["dirty"],
                "quick": quick,
                "seconds": round(seconds, 1),
                "figures": report.figures,
                "stderr": report.stderr,
            },
        )
        note = f"; {len(report.stderr)} stderr output(s) kept in {log}" if report.stderr else ""
        print(f"      wrote {report.report} ({report.figures} figures) in {seconds:.1f} s{note}", flush=True)
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rftlab.reports", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: all)")
    parser.add_argument("--out", type=Path, default=REPORTS_DIR, help="report folder (default: reports/)")
    parser.add_argument("--quick", action="store_true", help="smoke-size run (RFTLAB_QUICK=1)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="run nothing: check every RESULTS_*.md in --out with report_problems (exit 1 on a problem)",
    )
    args = parser.parse_args(argv)
    if args.check:
        return check_reports(args.out)
    quick = args.quick or os.environ.get("RFTLAB_QUICK") == "1"
    try:
        build_reports(args.notebooks or None, args.out, quick=quick, progress=sys.stderr.isatty())
    except (NotebookFailed, ReportRejected, FileNotFoundError, ValueError) as exc:
        print(f"rftlab reports: error: {exc}", file=sys.stderr)
        return 1
    return 0


def check_reports(folder: Path = REPORTS_DIR) -> int:
    """Print every problem of every ``RESULTS_*.md`` in ``folder`` and the stamps they carry; exit code 1
    if a report has a problem or the reports were rendered from different commits."""
    reports = sorted(Path(folder).glob("RESULTS_*.md"))
    bad = 0
    stamps: dict[str, list[str]] = {}
    for report in reports:
        text = report.read_text(encoding="utf-8")
        stamp = re.search(r"at commit ([0-9a-f]+|unknown)|rftlab commit ([0-9a-f]+|unknown)", text)
        key = next((g for g in stamp.groups() if g), "?") if stamp else "?"
        stamps.setdefault(key, []).append(report.name)
        for problem in report_problems(text):
            bad += 1
            print(f"{report.name}: {problem}")
    if len(stamps) > 1:
        print(
            "reports rendered from different commits: "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in stamps.items())
        )
    print(f"{len(reports)} report(s), {bad} problem(s), {len(stamps)} commit stamp(s)")
    return 1 if bad or len(stamps) > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
