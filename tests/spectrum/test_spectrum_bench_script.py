"""The throughput benchmark runs (smoke size); it asserts nothing about speed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_spectrum.py"


def test_bench_spectrum_quick(capsys):
    spec = importlib.util.spec_from_file_location("bench_spectrum", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "literal B.7 reference" in out and "bitset" in out and "scan-steps" in out
