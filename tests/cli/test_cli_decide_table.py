"""``rftlab gs1 decide`` prints a table like ``rftlab stats noninferiority``: one aligned row per bound with
its lower and upper bound, then the pre-registered decision; the numbers are the JSON output's."""

from __future__ import annotations

import json

import numpy as np

from rftlab.cli import main


def _items(path, correct):
    path.write_text(
        "".join(json.dumps({"item_id": f"i{k}", "correct": int(c)}) + "\n" for k, c in enumerate(correct))
    )
    return path


def test_decide_prints_a_table_with_the_json_numbers(tmp_path, capsys):
    rng = np.random.default_rng(3)
    t = _items(tmp_path / "t.jsonl", rng.random(300) < 0.72)
    b = _items(tmp_path / "b.jsonl", rng.random(300) < 0.70)
    assert main(["gs1", "decide", "--treatment", str(t), "--baseline", str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert main(["gs1", "decide", "--treatment", str(t), "--baseline", str(b)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("method"))
    assert lines[header].split() == [
        "method",
        "status",
        "level",
        "seed",
        "lower",
        "upper",
        "decision",
        "validity",
    ]
    crit = out["rule"]["criteria"][0]
    first = lines[header + 1]
    assert first.startswith("hoeffding") and first.split()[1] == "pre-registered"
    assert all(
        line.split()[1] == "exploratory"
        for line in lines[header + 2 : header + 1 + len(out["all_bounds"]["bounds"])]
    )
    assert f"{crit['lower']:+.4f}" in first and f"{crit['upper']:+.4f}" in first
    for name, bound in out["all_bounds"]["bounds"].items():
        if name == crit["method"]:
            continue
        (row,) = [line for line in lines if line.startswith(name + " ")]
        assert f"{bound['lower']:+.4f}" in row and bound["decision"] in row
    assert lines[-1] == f"decision (pre-registered, {crit['method']}): {out['decision']}"
    assert f"n = {out['n']} paired items" in text
    assert "=" not in first  # not the old key=value dump
