"""Layers: a module imports only its own layer and the layers below it (``CONTRIBUTING.md``).

Order, lowest first: types, rewards, envs, policies, runs, rollout, training, launch, analysis, studies,
reports, cli. Every ``import`` / ``from ... import`` in every module counts — at module level, inside functions,
under ``if TYPE_CHECKING``, relative or absolute. ``rftlab/__init__.py`` runs before any submodule, so it
may import nothing from the package; a package's own ``__init__``/``__main__`` belong to its layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LAYERS: tuple[str, ...] = (
    "types",
    "rewards",
    "envs",
    "policies",
    "runs",
    "rollout",
    "training",
    "launch",
    "analysis",
    "studies",
    "reports",
    "cli",
)
RANK = {name: k for k, name in enumerate(LAYERS)}
SRC = Path(__file__).resolve().parents[1] / "src"

# (importing file relative to the source root, imported module) pairs allowed to point upward. Each entry
# needs a reason; an entry that no longer matches anything fails the test below.
ALLOWED: dict[tuple[str, str], str] = {}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str, package: str = "rftlab") -> str | None:
    """The layer of a module of ``package`` (``None`` for the package root itself)."""
    parts = module.split(".")
    if parts[0] != package or len(parts) == 1:
        return None
    return parts[1] if parts[1] in RANK else None


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in ``path``, relative imports resolved against its package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    this = module_name(path, root)
    is_package = path.name == "__init__.py"
    package = this if is_package else this.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base)
                module = f"{prefix}.{node.module}" if node.module else prefix
            else:
                module = node.module or ""
            out.append((node.lineno, module))
            # ``from rftlab import analysis`` imports the subpackage ``rftlab.analysis``
            out.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names if alias.name != "*")
    return out


def check_layers(root: Path, package: str = "rftlab", allowed=None) -> list[str]:
    """Every upward import under ``root/package`` as ``"file:line imports module (layer a -> layer b)"``."""
    allowed = ALLOWED if allowed is None else allowed
    problems: list[str] = []
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        this = module_name(path, root)
        mine = layer_of(this, package)
        for line, module in imported_modules(path, root):
            if module != package and not module.startswith(package + "."):
                continue  # outside the package
            target = layer_of(module, package)
            if mine is None:  # the package root runs before everything: it may import nothing from it
                if module != package:
                    problems.append(f"{rel}:{line} imports {module} (the package root imports nothing)")
                continue
            if (
                target is None
            ):  # the root itself or one of its attributes (``from rftlab import __version__``)
                continue
            if RANK[target] > RANK[mine] and (rel, module) not in allowed:
                problems.append(f"{rel}:{line} imports {module} (layer {mine} -> {target}, upward)")
    return problems


def test_no_module_imports_upward():
    problems = check_layers(SRC)
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_every_allowed_exception_is_still_needed():
    for (rel, module), reason in ALLOWED.items():
        assert reason
        path = SRC / rel
        assert path.exists(), f"ALLOWED entry for a missing file: {rel}"
        assert any(m == module for _, m in imported_modules(path, SRC)), (
            f"stale ALLOWED entry: {rel} -> {module}"
        )


def families(root: Path = SRC, package: str = "rftlab") -> tuple[str, ...]:
    """The families: one per study driver (``rftlab/studies/<family>.py``). A driver module named
    ``<family>_<part>.py`` (``spectrum_memory``) is a part of that family's driver, not a family."""
    stems = {p.stem for p in (root / package / "studies").glob("*.py") if p.stem != "__init__"}
    return tuple(sorted(s for s in stems if not any(s.startswith(f + "_") for f in stems - {s})))


def all_modules(root: Path = SRC, package: str = "rftlab") -> list[str]:
    return sorted(module_name(p, root) for p in (root / package).rglob("*.py"))


def family_of(module: str, names: tuple[str, ...]) -> str | None:
    """The family a module belongs to by its path: a component named after the family (``envs.spectrum``,
    ``rewards.poker``), or a last component that starts with ``<family>_`` (``eval_entries.poker_mcp_eval``)."""
    parts = module.split(".")[2:]
    for family in names:
        if family in parts or (parts and parts[-1].startswith(family + "_")):
            return family
    return None


def listed_modules(doc: str) -> set[str]:
    """The ``rftlab.*`` names a study driver's docstring lists."""
    import re

    return set(re.findall(r"``(rftlab\.[a-z0-9_.]+)``", doc))


def unlisted_family_modules(family: str, doc: str, root: Path = SRC) -> tuple[list[str], list[str]]:
    """``(listed names that do not exist, family modules the docstring does not cover)``; a listed
    package covers its submodules."""
    modules = all_modules(root)
    listed = listed_modules(doc)
    unknown = sorted(name for name in listed if name not in modules)
    mine = [m for m in modules if family_of(m, families(root)) == family]
    missing = [m for m in mine if not any(m == name or m.startswith(name + ".") for name in listed)]
    return unknown, missing


def test_the_four_families_have_drivers():
    assert {"spectrum", "gs1", "poker", "arena"} <= set(families())


@pytest.mark.parametrize("family", families())
def test_each_study_driver_lists_its_family(family):
    import importlib

    doc = importlib.import_module(f"rftlab.studies.{family}").__doc__ or ""
    unknown, missing = unlisted_family_modules(family, doc)
    assert not unknown, f"rftlab.studies.{family} lists modules that do not exist: {unknown}"
    assert not missing, f"rftlab.studies.{family}'s docstring does not list: {missing}"


def test_family_code_lives_in_a_family_folder():
    """In the generic layers, a family's module is ``<layer>/<family>.py`` or inside ``<layer>/<family>/``,
    never a file named ``<family>_something.py`` beside the generic modules."""
    bad = [
        m
        for m in all_modules()
        if m.count(".") >= 2
        and m.split(".")[1] in ("training", "launch", "analysis")
        and any(m.split(".")[-1].startswith(f + "_") for f in families())
    ]
    assert not bad, f"family-prefixed modules in a generic layer: {bad}"


def test_every_package_is_a_known_layer():
    tops = {p.name for p in (SRC / "rftlab").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    tops |= {p.stem for p in (SRC / "rftlab").glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert tops <= set(LAYERS), f"modules outside the layer list: {sorted(tops - set(LAYERS))}"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("rel", "code", "want"),
    [
        # absolute, at module level
        (
            "rftlab/envs/x.py",
            "import rftlab.analysis.trends\n",
            "rftlab/envs/x.py:1 imports rftlab.analysis.trends",
        ),
        # inside a function, relative (two levels up from rftlab/envs/spectrum/)
        (
            "rftlab/envs/spectrum/y.py",
            "def f():\n    from ...rollout.episode import episode\n    return episode\n",
            "rftlab/envs/spectrum/y.py:2 imports rftlab.rollout.episode (layer envs -> rollout, upward)",
        ),
        # ``from rftlab import cli``: the subpackage itself
        ("rftlab/policies/z.py", "from rftlab import cli\n", "rftlab/policies/z.py:1 imports rftlab.cli"),
        # under TYPE_CHECKING still counts
        (
            "rftlab/rewards/w.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rftlab.envs import spectrum\n",
            "rftlab/rewards/w.py:3 imports rftlab.envs",
        ),
        # the package root may not import its layers
        ("rftlab/__init__.py", "from . import envs\n", "rftlab/__init__.py:1 imports rftlab.envs"),
    ],
)
def test_a_planted_upward_import_is_named(tmp_path, rel, code, want):
    files = {f"rftlab/{layer}/__init__.py": "" for layer in LAYERS if layer != "types"}
    files.update({"rftlab/__init__.py": "", "rftlab/types.py": "", "rftlab/envs/spectrum/__init__.py": ""})
    files[rel] = code
    problems = check_layers(_tree(tmp_path, files), allowed={})
    assert any(p.startswith(want) for p in problems), problems
    # the same tree without the planted file is clean
    files[rel] = ""
    assert check_layers(_tree(tmp_path, files), allowed={}) == []


def test_downward_and_same_layer_imports_pass(tmp_path):
    files = {f"rftlab/{layer}/__init__.py": "" for layer in LAYERS if layer != "types"}
    files.update(
        {
            "rftlab/__init__.py": '__version__ = "0"\n',
            "rftlab/types.py": "import json\n",
            "rftlab/envs/a.py": "from rftlab.types import StepResult\nfrom rftlab.rewards import b\nfrom . import c\n",
            "rftlab/envs/c.py": "",
            "rftlab/cli/d.py": "def f():\n    from rftlab.analysis import summaries\n    import rftlab.envs.a\n",
            "rftlab/launch/e.py": "from rftlab.runs import hashing\n",  # launch sits above runs
        }
    )
    assert check_layers(_tree(tmp_path, files), allowed={}) == []


# Notebooks call their study driver and format its typed results: besides ``rftlab.studies.*`` they import
# only the display helpers (``rftlab.analysis.display``: numbers and tables as text). Every notebook listed
# here is held to it.
NOTEBOOK_DISPLAY_HELPERS = ("rftlab.analysis.display",)
# every notebook of the project is held to it
TYPED_NOTEBOOKS = tuple(sorted(p.name for p in (SRC.parent / "notebooks").glob("[0-9][0-9]_*.py")))


def notebook_rftlab_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every ``rftlab`` import in a jupytext notebook."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "rftlab")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rftlab":
            out.append((node.lineno, node.module))
    return out


def notebook_import_problems(path: Path) -> list[str]:
    allowed = lambda m: m.startswith("rftlab.studies.") or m in NOTEBOOK_DISPLAY_HELPERS  # noqa: E731
    return [f"{path.name}:{line} imports {m}" for line, m in notebook_rftlab_imports(path) if not allowed(m)]


@pytest.mark.parametrize("name", TYPED_NOTEBOOKS)
def test_typed_notebooks_import_only_their_study_and_display_helpers(name):
    path = SRC.parent / "notebooks" / name
    assert notebook_rftlab_imports(path), "the notebook imports its study driver"
    assert notebook_import_problems(path) == []


def test_a_notebook_importing_a_lower_layer_is_named(tmp_path):
    nb = tmp_path / "09_x.py"
    nb.write_text("from rftlab.studies.gs1 import run_study\nfrom rftlab.runs.store import load_run\n")
    assert notebook_import_problems(nb) == ["09_x.py:2 imports rftlab.runs.store"]
