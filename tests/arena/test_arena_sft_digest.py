"""``stage1_digest`` and ``build_sft`` (``rftlab.studies.arena``): the §9.6 digest check behind
``rftlab arena build-sft``'s last line and exit code (docs/arena.md §9.6)."""

from __future__ import annotations

import hashlib
import json

import pytest

from rftlab.rollout.arena.sft_data import (
    STAGE1_CONFIG,
    STAGE1_STRUCTURAL_SHA256,
    SftConfig,
    structural_sha256,
)
from rftlab.studies.arena import Stage1Digest, build_sft
from rftlab.studies.arena_sft_data import stage1_digest

TINY = SftConfig(num_seeds=4, targeted_mechanics_per_kind=1, targeted_silence_examples=2)


def manifest_with(**digests: str) -> dict:
    return {"structural_sha256": {**STAGE1_STRUCTURAL_SHA256, **digests}}


def test_the_stage1_digests_match():
    got = stage1_digest(STAGE1_CONFIG, manifest_with())
    assert got == Stage1Digest(is_stage1=True, digest_match=True)
    assert (got.verdict, got.exit_code) == ("MATCH", 0)


@pytest.mark.parametrize("split", ["all", "train", "validation", "test"])
def test_one_changed_split_digest_is_a_mismatch(split):
    got = stage1_digest(STAGE1_CONFIG, manifest_with(**{split: "0" * 64}))
    assert (got.is_stage1, got.digest_match, got.verdict, got.exit_code) == (True, False, "MISMATCH", 1)


def test_a_missing_split_digest_is_a_mismatch():
    digests = {k: v for k, v in STAGE1_STRUCTURAL_SHA256.items() if k != "test"}
    assert stage1_digest(STAGE1_CONFIG, {"structural_sha256": digests}).verdict == "MISMATCH"
    assert stage1_digest(STAGE1_CONFIG, {"num_examples": 1}).verdict == "MISMATCH"  # no digests at all


def test_another_configuration_has_no_verdict_and_exits_0():
    got = stage1_digest(TINY, manifest_with(all="0" * 64))
    assert (got.is_stage1, got.digest_match, got.verdict, got.exit_code) == (False, False, None, 0)
    # a configuration equal to Stage 1's field by field is Stage 1
    assert stage1_digest(SftConfig(0, 1024, 32, 512), manifest_with()).is_stage1


def test_build_sft_writes_the_manifest_it_returns(tmp_path):
    built = build_sft(tmp_path / "data", TINY)
    on_disk = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert built.manifest == on_disk
    for name, digest in on_disk["files"].items():
        assert hashlib.sha256((tmp_path / "data" / name).read_bytes()).hexdigest() == digest
    splits = ("train", "validation", "test")
    rows = [json.loads(line) for split in splits for line in (tmp_path / "data" / f"{split}.jsonl").open()]
    assert len(rows) == on_disk["num_examples"] == 22  # what `rftlab arena build-sft` printed for TINY
    assert built.manifest["structural_sha256"]["all"] == structural_sha256(rows)
    assert built.digest == Stage1Digest(is_stage1=False, digest_match=False)
