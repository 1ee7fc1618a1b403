"""One rule for non-finite numbers in ``--json`` output (``rftlab.runs.strictjson``): ``null``."""

from __future__ import annotations

import importlib
import json
import math

import pytest

import rftlab.cli
from rftlab.cli import main


def _strict(text: str):
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard constant {name}"))


@pytest.mark.parametrize(
    "family", ["stats", "gates", "arena", "runs", "spectrum", "gs1", "poker", "fireworks", "endpoint"]
)
def test_every_json_command_family_prints_through_the_one_helper(family, capsys):
    module = importlib.import_module(f"rftlab.cli.{family}")
    printer = getattr(module, "print_json", None)
    if printer is None:  # imported inside its commands
        source = importlib.util.find_spec(f"rftlab.cli.{family}").origin
        text = open(source, encoding="utf-8").read()
        assert "from rftlab.cli import print_json" in text
        printer = rftlab.cli.print_json
    assert printer is rftlab.cli.print_json
    printer({"nan": math.nan, "inf": [math.inf, -math.inf], "ok": 0.5})
    assert _strict(capsys.readouterr().out) == {"nan": None, "inf": [None, None], "ok": 0.5}


def test_gates_json_prints_null_for_a_nan_observed_value(tmp_path, capsys):
    spec, metrics = tmp_path / "gate.json", tmp_path / "m.json"
    spec.write_text(json.dumps({"checks": [{"metric": "x", "min": 1}]}))
    metrics.write_text('{"x": NaN, "evidence": {"loss": Infinity}}')
    assert main(["gates", "check", str(spec), str(metrics), "--json"]) == 1
    (check,) = _strict(capsys.readouterr().out)["checks"]
    assert check["observed"] is None and check["evidence"]["loss"] is None
    assert main(["gates", "check", str(spec), str(metrics)]) == 1
    assert "'NaN'" in capsys.readouterr().out  # the table shows the value as it always has


def test_runs_json_prints_null_for_a_nan(tmp_path, capsys, monkeypatch):
    from rftlab.runs import RunStore

    store = RunStore(tmp_path)
    store.create_run("exp", "arm", {"a": 1})
    original = RunStore.scan

    def scan(self, experiment=None, arm=None):
        runs, problems = original(self, experiment, arm)
        for run in runs:
            object.__setattr__(run.record, "backend", math.nan)  # a value the listing cannot print as JSON
        return runs, problems

    monkeypatch.setattr(RunStore, "scan", scan)
    assert main(["runs", "list", "--root", str(tmp_path), "--json"]) == 0
    (row,) = _strict(capsys.readouterr().out)
    assert row["backend"] is None and row["arm"] == "arm"
