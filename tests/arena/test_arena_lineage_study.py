"""Several simulated-learner lineages end to end at a small size (``simulated_lineages``,
``lineage_study``): the spec's own seed keeps its lineage, the others are new full lineages, and the study
sets every interval against the exact truth."""

from __future__ import annotations

import pytest
from stage1_specs import SMALL, write_spec

from rftlab.studies.arena import final_records, lineage_study, run_stage1, simulated_lineages


def test_three_small_lineages_with_truth_and_coverage(stage1_data, tmp_path):
    spec = write_spec(tmp_path, **SMALL)
    root = tmp_path / "runs"
    alone = run_stage1(spec, backend="simulated", store_root=root, data_dir=stage1_data)
    results = simulated_lineages(spec, [0, 1, 2], store_root=root, data_dir=stage1_data, variant_dir=tmp_path)
    # seed 0 is the spec itself: the same lineage, read back, not run again
    assert results[0].lineage["lineage"] == alone.lineage["lineage"]
    ids = {r.lineage["lineage"] for r in results.values()}
    assert len(ids) == 3
    base = {s: r.base_summary["conditions"]["generated"]["mean_oracle_regret"] for s, r in results.items()}
    assert len(set(base.values())) > 1  # independent corruption draws of the base model
    study = lineage_study(results)
    assert set(study.coverage) == {0, 1, 2} and study.method is not None
    assert study.method["lineages"] == 3 and study.method["smallest_p"] == 0.25
    for rows in study.coverage.values():
        assert {r["quantity"] for r in rows} >= {"paired: primary", "SFT: act_schema_valid"}
        for r in rows:
            assert r["covered"] == (r["95% low"] - 1e-12 <= r["truth"] <= r["95% high"] + 1e-12)
    # 10 frozen cases = 40 agent-cases: the revised G1 cannot be decided at that size
    g1 = next(r for r in study.revised_gates[0] if r["metric"] == "act_schema_valid")
    assert g1["revised verdict"] == "INSUFFICIENT N"
    assert len(final_records(results[1])) == 10


def test_bad_seeds_are_refused(tmp_path):
    spec = write_spec(tmp_path, **SMALL)
    with pytest.raises(ValueError, match="distinct"):
        simulated_lineages(spec, [1, 1], variant_dir=tmp_path)


def test_lineages_in_two_workers_equal_the_serial_ones(stage1_data, tmp_path, monkeypatch):
    """The same two lineages in two worker processes and one after the other: every stage's outputs are
    equal (the checkpoint paths, which name the training client, aside)."""

    def outputs(value):
        if isinstance(value, dict):
            return {k: outputs(v) for k, v in value.items() if not k.endswith("_path")}
        return [outputs(v) for v in value] if isinstance(value, list) else value

    spec = write_spec(tmp_path, **SMALL)
    monkeypatch.setenv("RFTLAB_WORKERS", "1")
    serial = simulated_lineages(
        spec, [1, 2], store_root=tmp_path / "serial", data_dir=stage1_data, variant_dir=tmp_path / "v1"
    )
    monkeypatch.setenv("RFTLAB_WORKERS", "2")
    parallel = simulated_lineages(
        spec, [1, 2], store_root=tmp_path / "parallel", data_dir=stage1_data, variant_dir=tmp_path / "v2"
    )
    for seed in (1, 2):
        a, b = serial[seed], parallel[seed]
        assert a.lineage["lineage"] == b.lineage["lineage"]
        for name in ("base_summary", "training_metrics", "measurements", "selection", "final_summary"):
            assert outputs(getattr(a, name)) == outputs(getattr(b, name)), (seed, name)
        assert a.final_summary is not None and a.training_metrics
