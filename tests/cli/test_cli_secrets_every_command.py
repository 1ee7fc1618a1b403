"""Every ``rftlab`` subcommand, run with a nasty sentinel key in several credential variables, writes it
nowhere: not in any file it creates, not on stdout or stderr, in no serialised form (issue 9 §5).

Subcommands are discovered from the argparse parser, so commands other branches add later are found
automatically; one without an entry in ``INVOCATIONS`` is skipped with a reason (so CI stays green) until
someone gives it a minimal valid invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from rftlab.cli import build_parser, main
from rftlab.runs import RunStore
from rftlab.runs.secrets import secret_forms

# A quote, a backslash, a slash and non-ASCII characters: each escaping path (JSON, CSV, repr, URL) differs.
SENTINEL = 'rftlab-sentinel-"q\\b/é-λ-7c1e9a'
CREDENTIAL_VARS = (
    "FIREWORKS_API_KEY",
    "TINKER_API_KEY",
    "HF_TOKEN",
    "OPENAI_API_KEY",  # eval-protocol only needs it set; the sentinel is as good as "dummy"
    "WANDB_API_KEY",
    "ANTHROPIC_API_KEY",
)


def subcommands(parser: argparse.ArgumentParser | None = None, prefix: tuple[str, ...] = ()):
    """Every leaf command path of the parser, e.g. ``("runs", "list")``."""
    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subcommands(sub, (*prefix, name))
            return
    yield prefix


# -- inputs ----------------------------------------------------------------------------------------------
def _items(work: Path, name: str, flip: int) -> Path:
    path = work / f"{name}.jsonl"
    path.write_text(
        "".join(
            json.dumps({"item_id": f"q{i}", "correct": int((i + flip) % 4 != 0)}) + "\n" for i in range(60)
        )
    )
    return path


def _store(work: Path) -> Path:
    root = work / "runs"
    run = RunStore(root).create_run("spectrum", "A", {"arm": "A"}, run_id="r1")
    run.append_metrics([{"step": s, "reward": 0.1 * s} for s in range(4)])
    run.finish()
    return root


def _metrics_file(work: Path) -> Path:
    path = work / "metrics.jsonl"
    path.write_text(
        "".join(json.dumps({"step": s, "epoch": s, "reward": 0.3 + 0.02 * s}) + "\n" for s in range(8))
    )
    return path


def _gate_files(work: Path) -> list[str]:
    spec = work / "gate.json"
    spec.write_text(json.dumps({"checks": [{"metric": "m", "min": 0.5}]}))
    metrics = work / "gate_metrics.json"
    metrics.write_text(json.dumps({"m": 0.7}))
    return [str(spec), str(metrics)]


def _rule(work: Path) -> Path:
    path = work / "rule.json"
    rule = {
        "alpha": 0.05,
        "method": "paired_hoeffding",
        "criteria": [
            {"id": "main", "metric": "accuracy", "weights": {"treatment": 1, "baseline": -1}, "margin": -0.2}
        ],
    }
    path.write_text(json.dumps({"decision_rule": rule}))
    return path


INVOCATIONS: dict[tuple[str, ...], Callable[[Path], list[str]]] = {
    ("runs", "list"): lambda w: ["--root", str(_store(w)), "--json"],
    ("runs", "metrics"): lambda w: ["--root", str(_store(w)), "--json"],
    ("runs", "clean"): lambda w: ["--root", str(_store(w))],
    ("spectrum", "corpus"): lambda w: [
        "--out",
        str(w / "out" / "corpus.jsonl"),
        "--metadata",
        str(w / "out" / "m.json"),
    ],
    ("spectrum", "baselines"): lambda w: ["--variant", "rft", "--episodes", "2", "--json"],
    ("spectrum", "dataset"): lambda w: ["--n", "3", "--out", str(w / "out" / "rows.jsonl")],
    ("spectrum", "bench90"): lambda w: ["--policy", "oracle", "--no-baseline", "--json"],
    ("stats", "noninferiority"): lambda w: [
        "--treatment",
        str(_items(w, "t", 1)),
        "--baseline",
        str(_items(w, "b", 0)),
        "--margin",
        "0.1",
        "--json",
    ],
    ("stats", "trend"): lambda w: ["--metrics", str(_metrics_file(w)), "--metric", "reward", "--json"],
    ("stats", "decision-rule"): lambda w: [
        "--spec",
        str(_rule(w)),
        "--treatment",
        str(_items(w, "t", 1)),
        "--baseline",
        str(_items(w, "b", 0)),
        "--json",
    ],
    ("gates", "check"): lambda w: [*_gate_files(w), "--json"],
    ("arena", "baselines"): lambda w: ["--json", "--policy", "wait"],
    ("arena", "solve"): lambda w: ["--seed", "2", "--json"],
    ("arena", "prompt"): lambda w: ["--seed", "2"],
}

ALL_FORMS = sorted(secret_forms(SENTINEL), key=len)


def leaks(data: bytes) -> list[bytes]:
    """The serialised forms of the sentinel found in ``data`` (raw, JSON-escaped, CSV, repr, URL...)."""
    return [form for form in ALL_FORMS if form in data]


def test_the_leak_detector_can_fail(tmp_path):
    """The grep below would catch the sentinel written raw, JSON-escaped or by pandas."""
    import pandas as pd

    assert leaks(SENTINEL.encode())
    assert leaks(json.dumps({"k": SENTINEL}).encode())
    assert leaks(json.dumps({"k": SENTINEL}, ensure_ascii=False).encode())
    assert leaks(pd.DataFrame([{"k": SENTINEL}]).to_json().encode())
    assert leaks(pd.DataFrame([{"k": SENTINEL}]).to_csv().encode())
    assert not leaks(b"rftlab-sentinel")


def test_the_table_covers_every_command_of_this_tree():
    """Every subcommand that exists now has an invocation (later additions are skipped, not failed)."""
    known = {
        ("runs", "list"), ("runs", "metrics"), ("runs", "clean"),
        ("spectrum", "corpus"), ("spectrum", "baselines"), ("spectrum", "dataset"), ("spectrum", "bench90"),
        ("stats", "noninferiority"), ("stats", "trend"), ("stats", "decision-rule"), ("gates", "check"),
        ("arena", "baselines"), ("arena", "solve"), ("arena", "prompt"),
    }  # fmt: skip
    assert known <= set(subcommands()) and known <= set(INVOCATIONS)


@pytest.mark.parametrize("command", sorted(subcommands()), ids=lambda c: "-".join(c))
def test_no_credential_reaches_any_output(command, tmp_path, monkeypatch, capsys):
    if command not in INVOCATIONS:
        pytest.skip(
            f"`rftlab {' '.join(command)}` has no entry in INVOCATIONS of {Path(__file__).name}: add one"
        )
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "tmp").mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(work / "tmp"))
    args = INVOCATIONS[command](work)  # inputs are written before the credentials appear
    for name in CREDENTIAL_VARS:
        monkeypatch.setenv(name, f"{SENTINEL}-{name}")
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}

    code = main([*command, *args])
    out, err = capsys.readouterr()
    assert code == 0, err

    written = [p for p in tmp_path.rglob("*") if p.is_file() and before.get(p) != p.stat().st_mtime_ns]
    found = {str(p): leaks(p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()}
    found["<stdout>"] = leaks(out.encode("utf-8", "surrogateescape"))
    found["<stderr>"] = leaks(err.encode("utf-8", "surrogateescape"))
    assert {where: forms for where, forms in found.items() if forms} == {}
    if command in {("spectrum", "corpus"), ("spectrum", "dataset")}:
        assert written, "the command was expected to write its --out file"
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".rftlab-tmp")]


def test_a_run_store_write_of_the_sentinel_is_refused_by_every_variable(tmp_path, monkeypatch, capsys):
    """The positive case: the same key, put in a spec, is refused naming the variable and not the value."""
    for name in CREDENTIAL_VARS:
        monkeypatch.setenv(name, f"{SENTINEL}-{name}")
    from rftlab.runs import SecretLeakError

    for name in CREDENTIAL_VARS:
        with pytest.raises(SecretLeakError) as caught:
            RunStore(tmp_path / "runs").create_run("e", "a", {"note": f"{SENTINEL}-{name}"})
        assert f"${name}" in str(caught.value) and not leaks(str(caught.value).encode())
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and leaks(p.read_bytes())]
    assert os.environ["OPENAI_API_KEY"].startswith(SENTINEL)
