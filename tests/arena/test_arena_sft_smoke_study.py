"""``sft_smoke`` (``rftlab.studies.arena``), the overfit check alone that ``rftlab arena sft-smoke`` calls."""

from __future__ import annotations

import pytest

from rftlab.rollout.arena.sft_data import SftConfig, write_dataset
from rftlab.studies.arena import sft_smoke

TINY = SftConfig(num_seeds=64, targeted_mechanics_per_kind=1, targeted_silence_examples=1)


def test_sft_smoke_names_missing_and_malformed_data(tmp_path):
    with pytest.raises(ValueError, match="overfit_256.jsonl does not exist"):
        sft_smoke(tmp_path)
    (tmp_path / "overfit_256.jsonl").write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match=r"overfit_256.jsonl:1: not an SFT row"):
        sft_smoke(tmp_path)


@pytest.mark.slow
def test_sft_smoke_trains_one_step_on_one_row_locally(tmp_path, monkeypatch):
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    monkeypatch.delenv("TINKER_BASE_URL", raising=False)
    write_dataset(tmp_path / "data", TINY)
    result = sft_smoke(
        tmp_path / "data", rows=1, steps=1, batch_size=1, max_tokens=1, work_dir=tmp_path / "smoke"
    )
    assert (result.backend, result.rows, len(result.check.losses)) == ("local", 1, 1)
    out = result.to_dict()
    assert (out["rows"], out["steps"], out["passed"]) == (1, 1, result.passed)
