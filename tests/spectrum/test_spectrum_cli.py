"""``rftlab spectrum`` commands (acceptance checks use exactly these invocations)."""

from __future__ import annotations

import json

from option_errors import refused_option

from rftlab.cli import main as cli_main


def test_baselines_bench_json(capsys):
    assert cli_main(["spectrum", "baselines", "--variant", "bench", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"empty", "memoryless", "accumulate", "wideband_only", "oracle"}
    for row in out.values():
        assert 0.0 <= row["mean_available_iou"] <= 1.0
    assert out["oracle"]["mean_available_iou"] == 1.0
    assert out["empty"]["mean_available_iou"] == round(33.0 / 168.0, 4)
    assert out["empty"]["mean_occupied_iou"] == 0.0
    # the stateless baseline of a memoryless policy equals its run score
    assert out["memoryless"]["stateless_available_iou"] == out["memoryless"]["mean_available_iou"]


def test_baselines_bad_runs(capsys):
    argv = ["spectrum", "baselines", "--variant", "bench", "--runs", "9"]
    refused_option(argv, capsys, "--runs", "from 1 to 5 (the default schedule has 5 runs), got '9'")
