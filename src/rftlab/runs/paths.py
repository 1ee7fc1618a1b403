"""Where the project's own folders are: the one place that knows the repository's layout.

The package is used from a source checkout (``pip install -e .``), so the project root is three folders
above this file (``src/rftlab/runs/paths.py``). Every default path (``data/specs``, ``runs/``,
``reports/``, ``notebooks/``) is built from it, so the CLI, the notebooks (whose kernels JupyterLab starts
in ``notebooks/``) and the tests resolve the same files from any working directory.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]
SPECS_DIR = PROJECT_ROOT / "data" / "specs"

__all__ = ["PROJECT_ROOT", "SPECS_DIR"]
