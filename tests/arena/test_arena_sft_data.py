"""Stage-1 SFT data (docs/arena.md §9): test vectors, the §9.6 fidelity digest, counts, strata and byte-identical rebuilds."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest
from option_errors import refused_option

from rftlab.cli import main
from rftlab.envs.arena.cases import frozen_cases
from rftlab.rollout.arena.sft_data import (
    STAGE1_STRUCTURAL_SHA256,
    FrozenSeedError,
    SftConfig,
    action_kind,
    build_rows,
    content_sha256,
    generate_seed_examples,
    mechanics_quotas,
    mixture_schedule,
    overfit_rows,
    split_for_seed,
    structural_sha256,
    training_strata,
    write_dataset,
)

SMALL = SftConfig(num_seeds=24, targeted_mechanics_per_kind=3, targeted_silence_examples=6)


@pytest.fixture(scope="module")
def stage1():
    return build_rows()


def test_stage1_structural_digest_equals_the_spec(stage1):
    """§9.6: the prompt-wording independent digests of all rows and of each split equal the spec's values."""
    rows = stage1.rows
    assert structural_sha256(rows) == STAGE1_STRUCTURAL_SHA256["all"]
    assert STAGE1_STRUCTURAL_SHA256["all"].startswith("3bb0bf5e")
    for split in ("train", "validation", "test"):
        assert structural_sha256(stage1.split_rows(split)) == STAGE1_STRUCTURAL_SHA256[split]


def test_stage1_counts_match_the_spec(stage1):
    """§9.4 / §9.5 / §9.7 counts of the Stage-1 configuration."""
    rows = stage1.rows
    assert len(rows) == 5508
    by = Counter((r["metadata"]["split"], r["metadata"]["phase"]) for r in rows)
    assert by == {
        ("train", "BROADCAST"): 4156,
        ("train", "ACT"): 802,
        ("validation", "BROADCAST"): 223,
        ("validation", "ACT"): 52,
        ("test", "BROADCAST"): 229,
        ("test", "ACT"): 46,
    }
    assert stage1.rejections == {
        "ambiguous_optimal_action": 1102,
        "not_prompt_identifiable": 1946,
        "conflicting_declared_intent": 244,
        "targeted_transfer_rejected": 180,
    }
    assert len({r["metadata"]["seed"] for r in rows}) == 1632
    kinds = Counter(action_kind(r) for r in rows if r["metadata"]["phase"] == "ACT")
    assert kinds == {
        "PROBE": 272,
        "FORTIFY": 216,
        "RECOVER": 189,
        "CAPTURE": 125,
        "TRANSFER": 34,
        "WAIT": 32,
        "SCAN": 32,
    }
    train = stage1.split_rows("train")
    strata = training_strata(train)
    assert {k: len(v) for k, v in strata.items()} == {
        "train_broadcast": 4156,
        "train_action_common": 728,
        "train_action_rare": 74,
    }
    overfit = overfit_rows(train)
    assert len(overfit) == 256
    assert Counter(action_kind(r) for r in overfit[154:178]) == {"WAIT": 22, "TRANSFER": 2}
    assert not any(r["metadata"].get("targeted_skill") == "SILENCE" for r in overfit)
    # Upstream's published content hash needs upstream's prompt bytes; ours must differ from it.
    assert content_sha256(rows) != "edad09bb301748621a0fab73ebf3de60d60abfd9f56c9afcc6ca02ffe12f3a80"


def test_first_act_row_vector(stage1):
    """A.6: the first natural ACT row is seed 2, blue-2, train, target A2 in a rotated 5-action list."""
    first = next(r for r in stage1.rows if r["metadata"]["phase"] == "ACT")
    meta = first["metadata"]
    assert (meta["seed"], meta["agent_id"], meta["split"]) == (2, "blue-2", "train")
    user = json.loads(first["messages"][1]["content"])
    shown = [(e["id"], e["type"], e.get("target"), e.get("amount")) for e in user["legal_actions"]]
    assert shown == [
        ("A0", "WAIT", None, None),
        ("A1", "CAPTURE", "V20", None),
        ("A2", "PROBE", "V20", None),
        ("A3", "SCAN", "V17", None),
        ("A4", "TRANSFER", "blue-3", 1),
    ]
    assert first["messages"][2]["content"] == '{"action_id":"A2"}'
    assert meta["solver_reward"] == -1.0499999999999994
    assert meta["policy_reward"] == -1.6999999999999993
    assert (meta["solver_optimal_count"], meta["solver_joint_actions_explored"]) == (2, 900)
    assert [b["sender"] for b in user["inbox"]] == ["blue-0", "blue-1", "blue-3"]
    assert meta["label_source"] == "exact_joint_solver_and_prompt_policy_agree"


def test_first_targeted_seeds(stage1):
    """A.6: first accepted mechanics seeds per skill and the first silence seed."""
    mech = [r for r in stage1.rows if r["metadata"].get("generator_mode") == "targeted_mechanics"]
    first = {}
    for r in mech:
        first.setdefault(r["metadata"]["targeted_skill"], r)
    assert first["WAIT"]["metadata"]["seed"] == 5_000_000
    assert first["WAIT"]["metadata"]["solver_reward"] == 1.7500000000000004
    assert first["SCAN"]["metadata"]["seed"] == 5_002_000
    assert first["SCAN"]["metadata"]["solver_reward"] == 3.8500000000000005
    assert first["TRANSFER"]["metadata"]["seed"] == 5_004_006
    assert first["TRANSFER"]["metadata"]["solver_reward"] == 0.24999999999999992
    assert first["TRANSFER"]["messages"][2]["content"] == '{"action_id":"A2"}'
    transfers = [r for r in mech if r["metadata"]["targeted_skill"] == "TRANSFER"]
    assert (transfers[1]["metadata"]["seed"], transfers[1]["metadata"]["split"]) == (5_004_010, "test")
    assert first["SILENCE"]["metadata"]["seed"] == 6_000_000
    assert first["SILENCE"]["messages"][2]["content"] == '{"facts":[],"intent":null,"request_resource":0}'
    assert all(r["metadata"]["split"] == "train" for r in (first["WAIT"], first["SCAN"], first["SILENCE"]))


def test_seed0_broadcast_targets_and_no_act_rows():
    """A.1: the reference broadcasts of seed 0 and no surviving ACT row."""
    rows = generate_seed_examples(0)
    assert [r["metadata"]["phase"] for r in rows] == ["BROADCAST"] * 4
    targets = {r["metadata"]["agent_id"]: r["messages"][2]["content"] for r in rows}
    assert targets["blue-0"] == (
        '{"facts":[{"critical":false,"node":"V48","observed_turn":0,"owner":"NEUTRAL","status":"SECURE",'
        '"value":2}],"intent":{"target":"V48","type":"PROBE"},"request_resource":0}'
    )
    assert targets["blue-3"].startswith('{"facts":[{"critical":true,"node":"V59"')


def test_split_by_seed_hash_is_independent_and_refuses_frozen_seeds():
    for seed in (0, 1, 2, 5_000_000, 123_456):
        bucket = int(hashlib.sha256(f"arena-gen-v1:{seed}".encode()).hexdigest()[:8], 16) % 100
        expected = "train" if bucket < 90 else "validation" if bucket < 95 else "test"
        assert split_for_seed(seed) == expected
    for case in frozen_cases()[:3]:
        with pytest.raises(FrozenSeedError):
            split_for_seed(case.seed)


def test_mechanics_quotas():
    assert mechanics_quotas(32) == {"train": 24, "validation": 4, "test": 4}
    assert mechanics_quotas(2) == {"train": 2, "validation": 0, "test": 0}
    assert mechanics_quotas(16) == {"train": 12, "validation": 2, "test": 2}


def test_mixture_schedule_hits_the_stratum_probabilities(stage1):
    strata = training_strata(stage1.split_rows("train"))
    schedule = mixture_schedule(strata, 9916)
    counts = Counter(name for name, _ in schedule)
    assert sum(counts.values()) == 9916
    for name, p in (("train_broadcast", 0.60), ("train_action_common", 0.31), ("train_action_rare", 0.09)):
        assert abs(counts[name] / 9916 - p) < 0.015
    # Every rare row is seen about 12 times (stream reshuffles, no row starves).
    rare = Counter(row_id for name, row_id in schedule if name == "train_action_rare")
    assert len(rare) == 74 and max(rare.values()) - min(rare.values()) <= 1
    assert mixture_schedule(strata, 50) == schedule[:50]  # seeded and prefix-stable


def test_small_rebuild_is_byte_identical(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    manifest_a = write_dataset(a, SMALL)
    manifest_b = write_dataset(b, SMALL)
    assert manifest_a == manifest_b
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    for name, digest in manifest_a["files"].items():
        assert hashlib.sha256((a / name).read_bytes()).hexdigest() == digest
    rows = [json.loads(line) for line in (a / "train.jsonl").read_text().splitlines()]
    assert all(r["metadata"]["split"] == "train" for r in rows)


@pytest.mark.slow
def test_stage1_build_cli_rebuilds_byte_identically(tmp_path, capsys):
    first, second = tmp_path / "one", tmp_path / "two"
    assert main(["arena", "build-sft", "--out", str(first)]) == 0
    assert "fidelity digest (docs/arena.md §9.6): MATCH" in capsys.readouterr().out
    assert main(["arena", "build-sft", "--out", str(second)]) == 0
    for path in sorted(first.iterdir()):
        assert path.read_bytes() == (second / path.name).read_bytes(), path.name
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["structural_sha256"] == STAGE1_STRUCTURAL_SHA256
    assert manifest["training_mixture"]["optimizer_steps"] == 310


def test_build_cli_rejects_bad_arguments(tmp_path, capsys):
    argv = ["arena", "build-sft", "--out", str(tmp_path / "x"), "--num-seeds", "-1"]
    refused_option(argv, capsys, "--num-seeds", "from 0 to 100000", "got '-1'")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    argv = ["arena", "build-sft", "--out", str(blocker), "--num-seeds", "1"]
    refused_option(argv, capsys, "--out", "a folder or a new path", "(exists and is not a folder)")
