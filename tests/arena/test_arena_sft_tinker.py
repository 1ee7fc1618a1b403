"""The tinker SFT path: assistant-only loss mask, schedule, overfit verdict, and a real local training run."""

from __future__ import annotations

import math

import pytest
from option_errors import refused_option

from rftlab.rollout.arena.sft_data import SftConfig, build_rows, overfit_rows
from rftlab.training.arena.recipe import STAGE1_RECIPE
from rftlab.training.arena.sft import (
    END_OF_TURN,
    LOCAL_CONTEXT,
    OptimizerSettings,
    arena_bpe_tokenizer,
    get_arena_renderer,
    learning_rate_at,
    local_arena_model,
    overfit_check,
    overfit_verdict,
    row_datum,
    service_client,
    template_and_mask_problems,
)
from rftlab.training.local_tinker import byte_tokenizer


@pytest.fixture(scope="module")
def rows():
    built = build_rows(SftConfig(num_seeds=40, targeted_mechanics_per_kind=3, targeted_silence_examples=4))
    return overfit_rows(built.split_rows("train"))


@pytest.fixture(scope="module")
def renderer():
    return get_arena_renderer(byte_tokenizer())


def test_loss_mask_is_the_reply_and_end_of_turn_only(rows, renderer):
    tokenizer = byte_tokenizer()
    assert template_and_mask_problems(rows, renderer, tokenizer, 4096) == []
    row = rows[0]
    datum = row_datum(row, renderer, 4096)
    weights = datum.loss_fn_inputs["weights"].to_torch().tolist()
    targets = datum.loss_fn_inputs["target_tokens"].to_torch().tolist()
    weighted = [t for t, w in zip(targets, weights, strict=True) if w > 0]
    assert tokenizer.decode(weighted) == row["messages"][2]["content"] + END_OF_TURN
    assert sum(weights) == len(weighted) and set(weights) <= {0.0, 1.0}
    # Byte tokens: the prompt part of the sequence is far longer than the weighted part.
    assert len(weights) > 10 * len(weighted)


class _LeakyMask:
    """A renderer whose loss mask also covers the prompt (the bug the smoke test exists to catch)."""

    def __init__(self, inner):
        self.inner = inner

    def build_supervised_example(self, messages, train_on_what=None):
        model_input, weights = self.inner.build_supervised_example(messages, train_on_what=train_on_what)
        return model_input, weights * 0 + 1

    def build_generation_prompt(self, messages):
        return self.inner.build_generation_prompt(messages)


class _OtherServingTemplate(_LeakyMask):
    """A renderer whose serving prompt differs from its training prefix."""

    def build_supervised_example(self, messages, train_on_what=None):
        return self.inner.build_supervised_example(messages, train_on_what=train_on_what)

    def build_generation_prompt(self, messages):
        from tinker import types

        tokens = self.inner.build_generation_prompt(messages).to_ints()
        return types.ModelInput.from_ints(tokens[:-1] + [tokens[-1] + 1])


def test_template_and_mask_defects_are_reported(rows, renderer):
    tokenizer = byte_tokenizer()
    leaky = template_and_mask_problems(rows[:2], _LeakyMask(renderer), tokenizer, 4096)
    assert any("loss mask covers" in p for p in leaky) and any(
        "prompt or assistant-header" in p for p in leaky
    )
    other = template_and_mask_problems(rows[:1], _OtherServingTemplate(renderer), tokenizer, 4096)
    assert other == [f"row {rows[0]['id']}: the generation prompt is not a prefix of the training sequence"]
    short = template_and_mask_problems(rows[:1], renderer, tokenizer, 2048)
    assert short and "exceed the sequence length 2048" in short[0]


def test_cosine_schedule_with_warmup():
    total = 310
    lrs = [learning_rate_at(s, total, 1e-4, STAGE1_RECIPE.min_learning_rate, 10) for s in range(total)]
    assert lrs[0] == pytest.approx(1e-4 / 10) and lrs[9] == pytest.approx(
        1e-4
    )  # 3% of 310 -> 10 warm-up steps
    assert lrs[10] == pytest.approx(1e-4) and lrs[-1] == pytest.approx(STAGE1_RECIPE.min_learning_rate)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))
    middle = 10 + (total - 11) // 2
    expected = 5e-6 + 0.5 * (1e-4 - 5e-6) * (1 + math.cos(math.pi * (middle - 10) / (total - 11)))
    assert lrs[middle] == pytest.approx(expected)


def test_overfit_verdict_threshold(rows):
    targets = [r["messages"][2]["content"] for r in rows]
    assert overfit_verdict(rows, targets, 0.99).passed
    acts = [i for i, r in enumerate(rows) if r["metadata"]["phase"] == "ACT"]
    broken = list(targets)
    broken[acts[0]] = "The action is A1."
    result = overfit_verdict(rows, broken, 0.99)
    assert result.schema_valid["ACT"] == pytest.approx(1 - 1 / len(acts))
    assert not result.passed and result.diagnosis.startswith("STOP")
    with_defect = overfit_verdict(rows, broken, 0.99, problems=["row x: loss mask covers 'system'"])
    assert "template/loss-mask defects" in with_defect.diagnosis


@pytest.mark.slow
def test_local_tinker_sft_run_trains_and_gives_a_verdict(rows, tmp_path, monkeypatch):
    """A real (tiny) run on the local tinker-compatible backend: cross_entropy lowers the loss on the rows,
    then the overfit check scores greedy replies and returns a verdict with a diagnosis."""
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    model = local_arena_model(tmp_path / "tiny")
    client = service_client(storage_dir=tmp_path / "store", model_dirs=[model])
    pick = [next(r for r in rows if r["metadata"]["phase"] == p) for p in ("ACT", "BROADCAST")]
    result = overfit_check(
        client,
        pick,
        model,
        rank=8,
        steps=4,
        batch_size=2,
        optimizer=OptimizerSettings(learning_rate=1e-2),
        threshold=0.99,
        max_tokens=8,
        max_length=LOCAL_CONTEXT,
    )
    assert result.losses[-1] < result.losses[0]
    assert result.problems == ()
    assert set(result.schema_valid) == {"ACT", "BROADCAST"}
    assert result.passed == all(v >= 0.99 for v in result.schema_valid.values())


def test_arena_tokenizer_round_trips_and_shortens_prompts(rows):
    tok = arena_bpe_tokenizer()
    text = rows[0]["messages"][1]["content"]
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert len(tok.encode(text, add_special_tokens=False)) < len(text.encode()) / 2.5
    assert template_and_mask_problems(rows[:8], get_arena_renderer(tok), tok, LOCAL_CONTEXT) == []


def test_sft_smoke_cli_rejects_bad_input(tmp_path, capsys):
    from rftlab.cli import main

    assert main(["arena", "sft-smoke", "--data", str(tmp_path)]) == 2
    assert "overfit_256.jsonl does not exist" in capsys.readouterr().err
    (tmp_path / "overfit_256.jsonl").write_text("")
    base = ["arena", "sft-smoke", "--data", str(tmp_path)]
    refused_option([*base, "--steps", "0"], capsys, "--steps", "'0'")
    for flag, value, limit in (("--steps", 10**9, 100000), ("--batch-size", 10**9, 4096)):
        refused_option([*base, flag, str(value)], capsys, flag, str(limit), f"'{value}'")
    refused_option([*base, "--lr", "inf"], capsys, "--lr", "'inf'")
