"""Adding a family touches no generic module: the toy bandit family of ``examples/toy_family/`` is laid
over a copy of the project, and the copy's layer rules, the family's own tests and its notebook report
all work with nothing but the new files (``CONTRIBUTING.md``, "Adding a family")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_layers import check_layers, unlisted_family_modules

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "examples" / "toy_family"


@pytest.fixture(scope="module")
def overlay(tmp_path_factory) -> Path:
    """A copy of ``src/`` with the toy family's files added (none may replace an existing file)."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(ROOT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for rel in toy_files():
        target = root / rel
        assert not target.exists(), f"the toy family would replace {rel}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(TOY / rel, target)
    return root


def toy_files() -> list[Path]:
    """The family's files (the example's own README explains the example and is not one of them)."""
    return [
        p.relative_to(TOY)
        for p in TOY.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p != TOY / "README.md"
    ]


def run(overlay: Path, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(overlay / "src"), RFTLAB_QUICK="1", MPLBACKEND="Agg")
    return subprocess.run(
        argv, cwd=overlay, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_the_toy_family_is_only_new_files_in_family_places():
    files = toy_files()
    assert files, "examples/toy_family is empty"
    for rel in files:
        assert not (ROOT / rel).exists(), f"{rel} exists in the project: the toy family must only add files"
        parts = rel.with_suffix("").parts
        assert "bandit" in parts or parts[-1].endswith("_bandit"), f"{rel} is not in a family place"


def test_the_overlay_keeps_the_layer_rules(overlay):
    assert check_layers(overlay / "src", allowed={}) == []
    doc = (overlay / "src/rftlab/studies/bandit.py").read_text(encoding="utf-8")
    assert unlisted_family_modules("bandit", doc, root=overlay / "src") == ([], [])


@pytest.mark.slow
def test_the_toy_family_tests_pass(overlay):
    done = run(overlay, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/bandit")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


@pytest.mark.slow
def test_the_toy_notebook_renders_its_report(overlay):
    done = run(overlay, sys.executable, "-m", "rftlab.reports", "notebooks/90_bandit.py", "--out", "reports")
    assert done.returncode == 0, done.stdout + done.stderr
    report = (overlay / "reports" / "RESULTS_bandit.md").read_text(encoding="utf-8")
    assert "**Summary.**" in report and "explore-then-commit minus random" in report
