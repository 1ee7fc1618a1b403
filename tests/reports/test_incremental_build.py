"""Incremental, parallel report builds: a report is rebuilt only when one of its inputs changed (the
notebook, the ``rftlab`` modules it can import, data, ``pyproject.toml``, the renderer), the build says
why, and the bytes of a report do not depend on how many workers built it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rftlab.reports import build_reports, check_reports, main, report_staleness
from rftlab.reports.inputs import (
    ReportInputs,
    changed_inputs,
    read_record,
    report_inputs,
    stale_reasons,
    write_record,
)
from rftlab.runs.codehash import closure_digest, import_closure, named_modules
from rftlab.runs.paths import NOTEBOOKS_DIR, PROJECT_ROOT


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_named_modules_reads_every_import_form():
    source = (
        "import os, rftlab.a\n"
        "from rftlab.b import c as d\n"
        "def f():\n    from rftlab import e\n"
        "x = importlib.import_module('rftlab.g.h')\n"
        "y = 'rftlab is a word, not a module'\n"
    )
    assert named_modules(source) == {
        "os",
        "rftlab.a",
        "rftlab.b",
        "rftlab.b.c",
        "rftlab",
        "rftlab.e",
        "rftlab.g.h",
    }


def test_relative_imports_resolve_against_the_importing_package():
    assert named_modules("from . import x\nfrom ..y import z\n", "rftlab.p.q", is_package=False) == {
        "rftlab.p",
        "rftlab.p.x",
        "rftlab.y",
        "rftlab.y.z",
    }
    assert named_modules("from .m import n\n", "rftlab.p", is_package=True) == {"rftlab.p.m", "rftlab.p.m.n"}


def test_the_closure_follows_imports_transitively_with_parent_packages(tmp_path):
    src = _tree(
        tmp_path / "src",
        {
            "rftlab/__init__.py": "",
            "rftlab/a/__init__.py": "",
            "rftlab/a/one.py": "from .two import thing\n",
            "rftlab/a/two.py": "def thing():\n    import rftlab.b.deep\n",
            "rftlab/b/__init__.py": "",
            "rftlab/b/deep.py": "import json\n",
            "rftlab/unused.py": "",
        },
    )
    closure = {p.relative_to(src).as_posix() for p in import_closure("from rftlab.a.one import thing\n", src)}
    assert closure == {
        "rftlab/__init__.py",
        "rftlab/a/__init__.py",
        "rftlab/a/one.py",
        "rftlab/a/two.py",
        "rftlab/b/__init__.py",
        "rftlab/b/deep.py",
    }


def test_the_closure_digest_changes_with_a_file_of_the_closure_only(tmp_path):
    src = _tree(
        tmp_path / "src",
        {"rftlab/__init__.py": "", "rftlab/a.py": "import rftlab.b\n", "rftlab/b.py": "x = 1\n"},
    )
    _tree(src, {"rftlab/c.py": "y = 1\n"})
    before = closure_digest("rftlab.a", src)
    closure_digest.cache_clear()
    (src / "rftlab" / "c.py").write_text("y = 2\n")  # not imported by rftlab.a
    assert closure_digest("rftlab.a", src) == before
    closure_digest.cache_clear()
    (src / "rftlab" / "b.py").write_text("x = 2\n")
    assert closure_digest("rftlab.a", src) != before
    closure_digest.cache_clear()


def test_a_notebooks_inputs_hold_its_modules_data_and_the_renderer_but_not_unrelated_code():
    inputs = report_inputs(NOTEBOOKS_DIR / "00_methods.py", quick=False)
    assert "notebooks/00_methods.py" in inputs.files
    assert "src/rftlab/analysis/noninferiority.py" in inputs.files  # imported by the notebook
    assert "src/rftlab/reports/__init__.py" in inputs.files  # the renderer
    assert "pyproject.toml" in inputs.files and "data/specs/gs1_vs_grpo.json" in inputs.files
    assert "src/rftlab/training/local_tinker/service.py" not in inputs.files  # never imported by it
    assert not any(name.startswith("data/arena_sft_stage1/") for name in inputs.files)  # generated, ignored


def test_the_digest_changes_with_any_file_and_with_the_size_flag():
    base = ReportInputs("n.py", {"n.py": "1", "src/a.py": "2"}, quick=False)
    assert base.digest == ReportInputs("n.py", {"src/a.py": "2", "n.py": "1"}, quick=False).digest
    assert base.digest != ReportInputs("n.py", {"n.py": "1", "src/a.py": "3"}, quick=False).digest
    assert base.digest != ReportInputs("n.py", dict(base.files), quick=True).digest
    assert changed_inputs(base.record(0), ReportInputs("n.py", {"n.py": "1", "src/b.py": "2"}, False)) == [
        "src/a.py",
        "src/b.py",
    ]


def test_stale_reasons_name_what_changed(tmp_path):
    inputs = ReportInputs("n.py", {"n.py": "1", "src/a.py": "2"}, quick=False)
    assert stale_reasons(tmp_path, "RESULTS_n", inputs) == ["no report yet"]
    (tmp_path / "RESULTS_n.md").write_text("report\n")
    assert stale_reasons(tmp_path, "RESULTS_n", inputs) == [
        "no readable inputs record (RESULTS_n.inputs.json)"
    ]
    write_record(tmp_path, "RESULTS_n", inputs, figures=0)
    assert stale_reasons(tmp_path, "RESULTS_n", inputs) == []
    edited = ReportInputs("n.py", {"n.py": "1", "src/a.py": "9"}, quick=True)
    assert stale_reasons(tmp_path, "RESULTS_n", edited) == ["built full-size", "changed: src/a.py"]
    write_record(tmp_path, "RESULTS_n", inputs, figures=2)
    assert stale_reasons(tmp_path, "RESULTS_n", inputs) == ["its figure folder RESULTS_n_files/ is missing"]
    (tmp_path / "RESULTS_n.inputs.json").write_text("{cut")
    assert read_record(tmp_path, "RESULTS_n") is None  # a damaged record only means a rebuild


NOTEBOOK = """# %% [markdown]
# # A {title}

# %%
from IPython.display import Markdown, display

from rftlab.analysis.display import markdown_table
import pandas as pd

display(Markdown(markdown_table(pd.DataFrame([{{"n": {n}, "x": 0.5}}]))))
"""


def _notebooks(folder: Path) -> list[Path]:
    folder.mkdir()
    return [
        _tree(folder, {f"0{k}_tiny{k}.py": NOTEBOOK.format(title=f"tiny {k}", n=k)}) / f"0{k}_tiny{k}.py"
        for k in (1, 2)
    ]


def _read(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.slow
def test_a_second_build_skips_what_did_not_change_and_rebuilds_what_did(tmp_path, capsys):
    first, second = _notebooks(tmp_path / "nb")
    out = tmp_path / "reports"
    built = build_reports([first, second], out, quick=True, jobs=2)
    assert [b.rebuilt for b in built] == [True, True]
    assert all(b.reason == "no report yet" for b in built)
    before = _read(out)
    again = build_reports([first, second], out, quick=True, jobs=2)
    assert [b.rebuilt for b in again] == [False, False]
    assert all(b.reason.startswith("inputs unchanged") for b in again)
    assert {k: v for k, v in _read(out).items() if k != "build.log"} == {
        k: v for k, v in before.items() if k != "build.log"
    }
    second.write_text(NOTEBOOK.format(title="tiny 2, edited", n=7))
    third = build_reports([first, second], out, quick=True, jobs=1)
    assert [b.rebuilt for b in third] == [False, True]
    assert third[1].reason == "changed: 02_tiny2.py"
    assert "| 7.000 |" in (out / "RESULTS_tiny2.md").read_text()
    log = [json.loads(line) for line in (out / "build.log").read_text().splitlines()]
    assert [(e["report"], bool(e.get("skipped"))) for e in log[-2:]] == [
        ("RESULTS_tiny1.md", True),
        ("RESULTS_tiny2.md", False),
    ]
    assert "02_tiny2.py: rebuilding (changed: 02_tiny2.py)" in capsys.readouterr().out
    forced = build_reports([first, second], out, quick=True, force=True)
    assert [b.reason for b in forced] == ["--force", "--force"]


@pytest.mark.slow
def test_parallel_and_serial_builds_of_the_quick_notebooks_are_byte_identical(tmp_path):
    """Two real notebooks, quick size: one worker and two workers write the same bytes."""
    notebooks = [NOTEBOOKS_DIR / "00_methods.py", NOTEBOOKS_DIR / "04_arena_env.py"]
    env = {"RFTLAB_RUNS_ROOT": str(tmp_path / "store")}
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    build_reports(notebooks, serial, quick=True, jobs=1, env=env, cwd=NOTEBOOKS_DIR)
    build_reports(list(reversed(notebooks)), parallel, quick=True, jobs=2, env=env, cwd=NOTEBOOKS_DIR)
    a, b = _read(serial), _read(parallel)
    a.pop("build.log"), b.pop("build.log")
    assert a == b and any(name.endswith(".png") for name in a)


def test_check_names_a_report_that_is_stale_or_has_no_record(tmp_path, capsys):
    inputs = report_inputs(NOTEBOOKS_DIR / "00_methods.py", quick=False)
    (tmp_path / "RESULTS_methods.md").write_text("<!-- a -->\n<!-- b -->\n\nfine\n")
    assert check_reports(tmp_path) == 1
    assert "no readable inputs record" in capsys.readouterr().out
    write_record(tmp_path, "RESULTS_methods", inputs, figures=0)
    assert check_reports(tmp_path) == 0
    assert report_staleness(tmp_path, tmp_path / "RESULTS_methods.md") == []
    altered = ReportInputs(inputs.notebook, {**inputs.files, "notebooks/00_methods.py": "0" * 64}, False)
    write_record(tmp_path, "RESULTS_methods", altered, figures=0)
    assert check_reports(tmp_path) == 1
    assert "stale, rebuild it with make reports: changed: notebooks/00_methods.py" in capsys.readouterr().out


def test_the_committed_reports_each_have_an_inputs_record():
    reports = sorted((PROJECT_ROOT / "reports").glob("RESULTS_*.md"))
    assert reports
    for report in reports:
        assert read_record(report.parent, report.stem) is not None, f"{report.name} has no inputs record"


@pytest.mark.parametrize("bad", ["0", "-1", "x", "1000"])
def test_jobs_must_be_a_sensible_whole_number(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--jobs", bad])
    assert exc.value.code == 2
    assert "--jobs" in capsys.readouterr().err


def test_a_reports_stamp_is_the_last_commit_of_its_own_inputs(tmp_path):
    import subprocess

    from rftlab.reports import code_state

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    _tree(tmp_path, {"src/mine.py": "x = 1\n", "src/other.py": "y = 1\n"})
    git("add", ".")
    git("commit", "-qm", "both")
    mine = git("rev-parse", "HEAD").strip()
    (tmp_path / "src" / "other.py").write_text("y = 2\n")
    git("commit", "-qam", "other only")
    assert code_state(tmp_path, ("src/mine.py",)) == {"commit": mine, "dirty": False}
    _tree(tmp_path, {"src/new.py": "z = 1\n"})  # untracked, but one of this report's inputs
    assert code_state(tmp_path, ("src/mine.py", "src/new.py")) == {"commit": mine, "dirty": True}


def test_a_report_built_in_another_environment_is_rebuilt_but_not_called_stale(tmp_path):
    """Float rounding differs between CPUs and library versions: a report from another machine is not this
    machine's result (a fresh clone's build runs every notebook), though its inputs are current."""
    from rftlab.reports import _plan
    from rftlab.reports.inputs import environment, environment_change

    notebook = NOTEBOOKS_DIR / "00_methods.py"
    inputs = report_inputs(notebook, quick=False)
    (tmp_path / "RESULTS_methods.md").write_text("<!-- a -->\n<!-- b -->\n\nfine\n")
    write_record(tmp_path, "RESULTS_methods", inputs, figures=0)
    assert environment_change(read_record(tmp_path, "RESULTS_methods")) is None
    assert _plan(notebook, tmp_path, quick=False, force=False).reasons == ()
    record = read_record(tmp_path, "RESULTS_methods")
    record["environment"] = {**environment(), "cpu": "Another CPU"}
    (tmp_path / "RESULTS_methods.inputs.json").write_text(json.dumps(record))
    assert _plan(notebook, tmp_path, quick=False, force=False).reasons == (
        f"built with cpu 'Another CPU', this is {environment()['cpu']!r}",
    )
    packages = dict(environment()["packages"], numpy="0.0")
    record["environment"] = {**environment(), "packages": packages}
    (tmp_path / "RESULTS_methods.inputs.json").write_text(json.dumps(record))
    assert (
        environment_change(record) == f"built with numpy 0.0, this has {environment()['packages']['numpy']}"
    )
    assert report_staleness(tmp_path, tmp_path / "RESULTS_methods.md") == []  # --check: inputs are current


def test_the_schedule_starts_the_notebook_costliest_when_cold_even_after_a_cached_rebuild(tmp_path):
    """A cached rebuild logs the memory notebook at 22 s after an empty-store build of 534 s; the schedule
    reads the longest build, so memory still starts first (scheduling by the last one started it third)."""
    from types import SimpleNamespace

    from rftlab.reports import BUILD_LOG, build_costs, schedule

    entries = [
        {"notebook": "notebooks/02_memory.py", "seconds": 534.0},
        {"notebook": "notebooks/03_gs1.py", "seconds": 243.0},
        {"notebook": "notebooks/00_methods.py", "seconds": 67.0},
        {"notebook": "notebooks/02_memory.py", "seconds": 22.5},
        {"notebook": "notebooks/03_gs1.py", "seconds": 183.8},
        {"notebook": "notebooks/03_gs1.py", "skipped": True},
        {"notebook": "notebooks/00_methods.py", "seconds": "not a number"},
    ]
    lines = [json.dumps(e) for e in entries] + ["{not json", "[1, 2]"]
    (tmp_path / BUILD_LOG).write_text("\n".join(lines) + "\n")
    costs = build_costs(tmp_path)
    assert costs == {
        "notebooks/02_memory.py": 534.0,
        "notebooks/03_gs1.py": 243.0,
        "notebooks/00_methods.py": 67.0,
    }
    jobs = [
        SimpleNamespace(source=Path(f"notebooks/{n}.py"))
        for n in ("00_methods", "01_new", "03_gs1", "02_memory", "04_new")
    ]
    order = [j.source.stem for j in schedule(jobs, costs)]
    assert order == ["02_memory", "03_gs1", "00_methods", "01_new", "04_new"]
    assert build_costs(tmp_path / "no such folder") == {}
    # an old slow build ages out after five newer ones
    later = [
        {"notebook": "notebooks/06_poker.py", "seconds": x} for x in (411.8, 184.0, 90.0, 88.0, 85.0, 91.0)
    ]
    (tmp_path / BUILD_LOG).write_text("\n".join(json.dumps(e) for e in later) + "\n")
    assert build_costs(tmp_path) == {"notebooks/06_poker.py": 184.0}
    assert build_costs(tmp_path, window=6) == {"notebooks/06_poker.py": 411.8}
