"""``benchmarks/bench_spectrum_tinker.py`` runs (a key rule once broke it unnoticed): at the smallest size,
in process and over HTTP, it prints its table with a ratio."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_spectrum_tinker.py"


@pytest.mark.slow
def test_the_benchmark_prints_both_paths_and_their_ratio(tmp_path):
    args = [
        "--epochs",
        "2",
        "--rows",
        "1",
        "--candidates",
        "2",
        "--scans",
        "1",
        "--max-tokens",
        "4",
        "--skip-large",
    ]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    row = next(line for line in out.stdout.splitlines() if line.startswith("| tiny agent"))
    assert re.search(r"\| [0-9.]+x \|", row), row
