"""What a piece of code depends on, by content: the import closure of ``rftlab`` modules and its digest.

``import_closure`` reads Python source and follows every ``import`` of an ``rftlab`` module, anywhere in a
file (module level or inside a function), then the imports of those modules, and so on, with each module's
parent packages (their ``__init__`` runs on import); a string constant naming an ``rftlab`` module
(``importlib.import_module("rftlab.x")``) counts too. The closure is a superset of what one call executes,
which is the safe side for a cache key: a change in it invalidates entries that may still have been right,
never the other way round. ``closure_digest`` is one SHA-256 over the closure's files (path and bytes), the
code part of a cache key (``rftlab.runs.cache``, the report builder's inputs).
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

PACKAGE = "rftlab"
SRC = Path(__file__).resolve().parents[2]  # the folder that holds the rftlab package


def _module_file(module: str, src: Path) -> Path | None:
    """The source file of ``module`` under ``src`` (``a.b`` → ``a/b.py`` or ``a/b/__init__.py``)."""
    base = src.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_of(path: Path, src: Path) -> tuple[str, bool]:
    """``(dotted name, is a package)`` of a module file under ``src``."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def named_modules(source: str, module: str | None = None, is_package: bool = False) -> set[str]:
    """Every dotted module name an import in ``source`` can load (relative imports resolved against
    ``module``), plus each ``from m import n`` as ``m.n`` (``n`` may be a submodule) and every string
    constant that looks like an ``rftlab`` module name."""
    tree = ast.parse(source)
    package = (module or "") if is_package else (module or "").rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if (
                node.value.startswith(PACKAGE + ".")
                and node.value.replace(".", "").replace("_", "").isalnum()
            ):
                names.add(node.value)
    return names


def import_closure(source: str, src: Path) -> list[Path]:
    """The files of every ``rftlab`` module that ``source`` (a notebook's Python text) can import,
    transitively, with their parent packages; sorted."""
    seen: set[Path] = set()
    pending = list(named_modules(source))
    while pending:
        name = pending.pop()
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            continue
        parts = name.split(".")
        for end in range(1, len(parts) + 1):  # the module and every package above it
            path = _module_file(".".join(parts[:end]), src)
            if path is None or path in seen:
                continue
            seen.add(path)
            module, is_package = _module_of(path, src)
            pending.extend(named_modules(path.read_text(encoding="utf-8"), module, is_package))
    return sorted(seen)


@cache
def closure_digest(module: str, src: Path = SRC) -> str:
    """SHA-256 over the path and bytes of every file in ``module``'s import closure (once per process)."""
    digest = hashlib.sha256()
    for path in import_closure(f"import {module}\n", src):
        digest.update(path.relative_to(src).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
