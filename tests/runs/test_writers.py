"""Every file the project writes goes through ``rftlab.runs.atomic`` (and so through the credential
check): an AST scan of ``src/`` and ``notebooks/`` finds every call that can create or change a file and
fails on any that is not the atomic writer's own, not inside a ``with atomic_writer(...)`` /
``with atomic_directory(...)`` block, and not listed below with its reason. A new writer cannot slip in:
it either uses the atomic writer or earns an entry here (and a row in ``kill_harness.WRITERS``).
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCANNED = [REPO / "src" / "rftlab", REPO / "notebooks"]

# (file relative to the repository, enclosing function or "<module>") -> why a direct write is right there.
ALLOWED: dict[tuple[str, str], str] = {
    (
        "src/rftlab/runs/atomic.py",
        "atomic_writer",
    ): "the atomic writer itself (unique temporary, fsync, rename)",
    ("src/rftlab/runs/atomic.py", "atomic_directory"): "the atomic folder writer itself (per-file rename)",
    ("src/rftlab/runs/atomic.py", "_check_output_path"): "an empty probe file, removed at once",
    ("src/rftlab/runs/locks.py", "open_lock_file"): "a lock file: only the holder's pid, never read as data",
    ("src/rftlab/runs/locks.py", "_note_pid"): "a lock file: only the holder's pid, never read as data",
    ("src/rftlab/launch/fireworks/evaluator.py", "stage_evaluator"): (
        "the evaluator staging folder is a fresh private temporary folder that eval-protocol tars and that "
        "is deleted afterwards (issue 23 owns this code); a cut file there is never read again"
    ),
    ("src/rftlab/reports/__init__.py", "append_build_log"): (
        "the untracked, append-only build log (durations, stderr): a kill cuts at most its last line, and no "
        "result is ever read from it"
    ),
    ("src/rftlab/cli/runs.py", "_save_figure"): (
        "savefig renders into an in-memory buffer; the file itself is written by atomic_write_bytes"
    ),
    ("src/rftlab/studies/arena_sft_data.py", "build_sft_data"): (
        "deliberately corrupts a copy of the data in the study's temporary folder to show that the audit "
        "catches it"
    ),
}

WRITE_MODES = set("wax+")
ATTRIBUTE_WRITERS = {"write_text", "write_bytes", "savefig", "save_pretrained", "to_csv", "to_parquet"}
MODULE_WRITERS = {
    ("json", "dump"),
    ("pickle", "dump"),
    ("torch", "save"),
    ("np", "save"),
    ("numpy", "save"),
    ("os", "replace"),
    ("os", "rename"),
    ("os", "write"),
    ("os", "pwrite"),
    ("os", "truncate"),
    ("os", "ftruncate"),
    ("shutil", "copy"),
    ("shutil", "copy2"),
    ("shutil", "copyfile"),
    ("shutil", "copytree"),
    ("shutil", "move"),
}
ATOMIC_CONTEXTS = {"atomic_writer", "atomic_directory"}


def _mode_of(call: ast.Call, position: int) -> str | None:
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    if len(call.args) > position and isinstance(call.args[position], ast.Constant):
        return str(call.args[position].value)
    return None


def _kind(call: ast.Call) -> str | None:
    """What kind of write ``call`` is, or ``None`` when it cannot create or change a file."""
    fn = call.func
    if isinstance(fn, ast.Name) and fn.id == "open":
        mode = _mode_of(call, 1)
        return f"open(mode={mode!r})" if mode and set(mode) & WRITE_MODES else None
    if not isinstance(fn, ast.Attribute):
        return None
    owner = fn.value.id if isinstance(fn.value, ast.Name) else None
    if (owner, fn.attr) in MODULE_WRITERS:
        return f"{owner}.{fn.attr}"
    if owner == "os" and fn.attr == "open":
        flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
        return "os.open(O_CREAT)" if "O_CREAT" in flags or "O_TRUNC" in flags else None
    if fn.attr == "open" and owner not in ("os", "tarfile", "zipfile", "gzip", "Image"):
        mode = _mode_of(call, 0)  # Path.open(mode)
        return f".open(mode={mode!r})" if mode and set(mode) & WRITE_MODES else None
    if fn.attr in ATTRIBUTE_WRITERS:
        if (
            fn.attr in ("to_csv", "to_parquet")
            and not call.args
            and not any(kw.arg in ("path_or_buf", "path") for kw in call.keywords)
        ):
            return None  # DataFrame.to_csv(index=False) returns text
        return f".{fn.attr}"
    return None


def writer_sites(root: Path, files: list[Path]) -> list[tuple[str, int, str, str]]:
    """``(file, line, kind, enclosing function)`` of every write that is not inside an atomic block."""
    sites = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        sites += _sites_in(tree, path.relative_to(root).as_posix())
    return sites


def _sites_in(tree: ast.AST, rel: str) -> list[tuple[str, int, str, str]]:
    sites: list[tuple[str, int, str, str]] = []

    def visit(node: ast.AST, function: str, atomic: bool) -> None:
        for child in ast.iter_child_nodes(node):
            fn, inside = function, atomic
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                fn = child.name
            if isinstance(child, ast.With | ast.AsyncWith):
                for item in child.items:
                    expr = item.context_expr
                    name = getattr(getattr(expr, "func", None), "id", None) or getattr(
                        getattr(expr, "func", None), "attr", None
                    )
                    inside = inside or name in ATOMIC_CONTEXTS
            if isinstance(child, ast.Call) and not atomic:
                kind = _kind(child)
                if kind:
                    sites.append((rel, child.lineno, kind, function))
            visit(child, fn, inside)

    visit(tree, "<module>", False)
    return sites


def project_files() -> list[Path]:
    files = []
    for folder in SCANNED:
        files += sorted(folder.rglob("*.py"))
    return files


def test_every_write_goes_through_the_atomic_writer():
    sites = writer_sites(REPO, project_files())
    bad = [f"{rel}:{line} {kind} in {fn}()" for rel, line, kind, fn in sites if (rel, fn) not in ALLOWED]
    assert not bad, (
        "these calls write files without rftlab.runs.atomic (use atomic_write_bytes/atomic_write_text, "
        "atomic_writer or atomic_directory, or add an ALLOWED entry with the reason):\n" + "\n".join(bad)
    )


def test_every_allowed_entry_is_still_needed():
    used = {(rel, fn) for rel, _line, _kind, fn in writer_sites(REPO, project_files())}
    stale = [key for key in ALLOWED if key not in used]
    assert not stale, f"stale ALLOWED entries (nothing writes there any more): {stale}"
    assert all(reason.strip() for reason in ALLOWED.values())


@pytest.mark.parametrize(
    "code",
    [
        "def f(p):\n    with open(p, 'w') as h:\n        h.write('x')\n",
        "def f(p):\n    open(p, mode='ab').write(b'x')\n",
        "def f(p):\n    p.write_text('x')\n",
        "def f(p):\n    p.write_bytes(b'x')\n",
        "import json\ndef f(p, h):\n    json.dump({}, h)\n",
        "import os\ndef f(a, b):\n    os.replace(a, b)\n",
        "import os\ndef f(p):\n    os.open(p, os.O_WRONLY | os.O_CREAT)\n",
        "import shutil\ndef f(a, b):\n    shutil.copy(a, b)\n",
        "def f(df, p):\n    df.to_csv(p)\n",
        "def f(p):\n    with p.open('w') as h:\n        h.write('x')\n",
        "import torch\ndef f(x, p):\n    torch.save(x, p)\n",
    ],
)
def test_a_planted_writer_is_found(tmp_path, code):
    module = tmp_path / "planted.py"
    module.write_text(code)
    assert writer_sites(tmp_path, [module]), code


@pytest.mark.parametrize(
    "code",
    [
        "def f(p):\n    return open(p).read()\n",
        "def f(p):\n    return open(p, 'rb').read()\n",
        "def f(df):\n    return df.to_csv(index=False)\n",
        "import torch\nfrom rftlab.runs.atomic import atomic_writer\ndef f(x, p):\n    with atomic_writer(p) as h:\n        torch.save(x, h)\n",
        "def f(m, out):\n    with atomic_directory(out) as tmp:\n        m.save_pretrained(tmp)\n",
        "def f(s):\n    return s.replace('a', 'b')\n",
    ],
)
def test_reads_and_atomic_blocks_are_not_writers(tmp_path, code):
    module = tmp_path / "clean.py"
    module.write_text(code)
    assert writer_sites(tmp_path, [module]) == [], code


# -- a property test over the atomic writers themselves ------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


class _Boom(Exception):
    pass


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    old=st.none() | st.binary(max_size=200),
    chunks=st.lists(st.binary(max_size=300), min_size=1, max_size=6),
    fail_at=st.none() | st.integers(0, 6),
    error=st.sampled_from([_Boom, OSError, KeyboardInterrupt]),
    folder=st.booleans(),
)
def test_any_failure_of_an_atomic_write_leaves_the_old_state(tmp_path, old, chunks, fail_at, error, folder):
    """Whatever is written, in whatever chunks, and wherever an exception (an error, a full disk, Ctrl-C)
    interrupts it: the target holds the old bytes (or stays absent) or, without a failure, all the new
    bytes; no temporary is left behind. ``folder``: the same through ``atomic_directory``."""
    from rftlab.runs.atomic import atomic_directory, atomic_writer

    work = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh folder per example
    target = (work / "out" / "data.bin") if folder else (work / "data.bin")
    if old is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(old)  # (the old state: test setup)
    failed = fail_at is not None and fail_at < len(chunks)
    try:
        if folder:
            with atomic_directory(target.parent) as staging:
                with open(staging / target.name, "wb") as handle:  # a library writing into the staging folder
                    for i, chunk in enumerate(chunks):
                        if failed and i == fail_at:
                            raise error("interrupted")
                        handle.write(chunk)
        else:
            with atomic_writer(target) as handle:
                for i, chunk in enumerate(chunks):
                    if failed and i == fail_at:
                        raise error("interrupted")
                    handle.write(chunk)
    except (_Boom, OSError, KeyboardInterrupt):
        assert failed
    if failed:
        assert (target.read_bytes() if target.exists() else None) == old
    else:
        assert target.read_bytes() == b"".join(chunks)
    assert not [p for p in work.rglob("*") if ".rftlab-tmp" in p.name]
