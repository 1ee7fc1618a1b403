"""The GPU handoff document is rendered from the real manifest, hashes and recipe, and refuses stale data."""

from __future__ import annotations

import hashlib
import json

import pytest

from rftlab.analysis.arena.gates import DEFAULT_GATE_SPEC
from rftlab.analysis.arena.handoff import HandoffError, render_handoff
from rftlab.cli import main
from rftlab.rollout.arena.sft_data import SftConfig, write_dataset
from rftlab.training.arena.recipe import STAGE1_RECIPE, SftRecipe

SMALL = SftConfig(num_seeds=100, targeted_mechanics_per_kind=1, targeted_silence_examples=2)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("handoff") / "data"
    write_dataset(root, SMALL)
    return root


def test_recipe_is_the_seed_recipe():
    r = STAGE1_RECIPE
    assert (r.lora_rank, r.lora_alpha, r.lora_dropout) == (32, 64, 0.05)
    assert set(r.lora_targets) == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    }
    assert (r.max_sequence_length, r.learning_rate, r.weight_decay, r.warmup_fraction) == (
        2048,
        1e-4,
        0.01,
        0.03,
    )
    assert (r.effective_batch_size, r.epochs, r.gradient_clip_norm, r.scheduler) == (32, 2, 1.0, "cosine")
    assert r.optimizer == "AdamW" and "assistant tokens only" in r.loss


def test_stage1_schedule():
    """§9.5: 2 x 4,958 draws = 310 steps at batch 32, 10 warm-up steps, >= 8 validation points."""
    plan = STAGE1_RECIPE.schedule(4958)
    assert plan == {
        "draws": 9916,
        "optimizer_steps": 310,
        "warmup_steps": 10,
        "validation_every_steps": 40,
        "validation_points": 9,
    }
    short = STAGE1_RECIPE.schedule(300)  # 19 steps: validating every 19 // 7 = 2 steps keeps >= 8 points
    assert short["validation_every_steps"] == 2 and short["validation_points"] >= 8


def test_handoff_quotes_the_actual_hashes(data):
    text = render_handoff(data, gate_spec=DEFAULT_GATE_SPEC)
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["content_sha256"] in text
    assert manifest["structural_sha256"]["all"] in text
    for name in manifest["files"]:
        assert hashlib.sha256((data / name).read_bytes()).hexdigest() in text
    assert "b53bfc523043ec71cc69f851d0819511c5a9f0b4f09520898f30954bbe874b29" in text
    assert hashlib.sha256(DEFAULT_GATE_SPEC.read_bytes()).hexdigest() in text
    assert "arena-core-v1" in text and "rftlab-arena-prompt-v2" in text and "rftlab-arena-sft-v2" in text
    assert "NO (not the Stage-1 configuration)" in text  # a small build is honestly not Stage-1
    assert "| LoRA rank / alpha / dropout | 32 / 64 / 0.05 |" in text
    assert render_handoff(data, gate_spec=DEFAULT_GATE_SPEC) == text  # deterministic


def test_handoff_refuses_tampered_or_missing_data(data, tmp_path):
    import shutil

    copy = tmp_path / "d"
    shutil.copytree(data, copy)
    with open(copy / "validation.jsonl", "ab") as handle:
        handle.write(b" ")
    with pytest.raises(HandoffError, match="hashes to"):
        render_handoff(copy)
    with pytest.raises(HandoffError, match="missing"):
        render_handoff(tmp_path / "nothing")
    with pytest.raises(HandoffError, match="fewer than 8"):
        render_handoff(data, recipe=SftRecipe(effective_batch_size=4096))


def test_handoff_cli(data, tmp_path, capsys):
    out = tmp_path / "HANDOFF.md"
    assert main(["arena", "handoff", "--data", str(data), "--out", str(out)]) == 0
    assert out.read_text().startswith("# Arena Stage-1 SFT: GPU handoff")
    assert main(["arena", "handoff", "--data", str(tmp_path / "none")]) == 2
    assert "build-sft" in capsys.readouterr().err


def test_handoff_states_the_seeds_immutable_inputs_and_the_stage1_commands(data, tmp_path):
    from rftlab.analysis.arena.audit import audit_dataset, write_audit
    from rftlab.analysis.arena.handoff import immutable_inputs

    manifest = json.loads((data / "manifest.json").read_text())
    rows = {r["item"]: r for r in immutable_inputs(manifest)}
    assert (
        rows["dataset content SHA-256"]["seed"].startswith("edad09bb")
        and rows["dataset content SHA-256"]["met"] == "NO"
    )
    assert (
        rows["prompt version"]["seed"] == "arena-v2-structured-priority"
        and rows["prompt version"]["met"] == "NO"
    )
    assert rows["frozen evaluation manifest SHA-256"]["met"] == "yes"
    text = render_handoff(data, gate_spec=DEFAULT_GATE_SPEC)
    assert "## The seed's immutable inputs" in text and "Not met: dataset version" in text
    assert "rftlab arena sft-run data/specs/arena_sft_stage1.json --backend tinker" in text
    assert "--backend local --device cuda" in text and "--diagnosis-eval" in text
    assert "not an argument of the tinker interface" in text  # LoRA alpha
    assert "| G1 | `act_schema_valid` | frozen | lower_bound | >= 0.995 | 1440 |" in text
    assert "| data audit | not run yet" in text
    import shutil

    audited = tmp_path / "audited"
    shutil.copytree(data, audited)
    write_audit(audit_dataset(audited), audited / "audit.json")
    assert "| data audit | passed for this data;" in render_handoff(audited, gate_spec=DEFAULT_GATE_SPEC)
