"""Where the GSM8K task comes from when the Hub cannot be reached: ``$RFTLAB_GSM8K`` (the original
release's JSONL files or the Hub copy's parquet files, generated here in GSM8K's format), and otherwise a
clear ``BackendUnavailable`` at once instead of ~25 s of retries."""

from __future__ import annotations

import json

import pytest

from rftlab.launch.gs1.backend import GSM8K_ENV, BackendUnavailable, load_gsm8k_task

ROWS = {
    "train": [
        {
            "question": "Ann has 3 apples and buys 4 more. How many apples does she have?",
            "answer": "3+4=<<3+4=7>>7\n#### 7",
        },
        {
            "question": "A box holds 12 eggs. How many eggs are in 5 boxes?",
            "answer": "12*5=<<12*5=60>>60\n#### 60",
        },
    ],
    "test": [
        {
            "question": "Tom had 1,200 dollars and spent 250. How much is left?",
            "answer": "1200-250=950\n#### 950",
        }
    ],
}


def _never_reachable():
    raise AssertionError("the Hub must not be asked when a local folder is named")


def test_jsonl_files_of_the_original_release(tmp_path, monkeypatch):
    for split, rows in ROWS.items():
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv(GSM8K_ENV, str(tmp_path))
    task = load_gsm8k_task(reachable=_never_reachable)
    assert task.name == "gsm8k"
    assert [(p.item_id, p.answer) for p in task.train] == [("train-0", "7"), ("train-1", "60")]
    assert [p.answer for p in task.test] == ["950"] and task.test[0].question == ROWS["test"][0]["question"]


def test_parquet_files_of_the_hub_copy(tmp_path, monkeypatch):
    import pandas as pd

    for split, rows in ROWS.items():
        pd.DataFrame(rows).to_parquet(tmp_path / f"{split}-00000-of-00001.parquet")
    monkeypatch.setenv(GSM8K_ENV, str(tmp_path))
    task = load_gsm8k_task(reachable=_never_reachable)
    assert [p.answer for p in task.train] == ["7", "60"] and len(task.test) == 1


@pytest.mark.parametrize("files", [[], ["train.jsonl"], ["test.parquet"]])
def test_a_folder_without_both_splits_is_refused_by_name(tmp_path, monkeypatch, files):
    for name in files:
        (tmp_path / name).write_text("")
    monkeypatch.setenv(GSM8K_ENV, str(tmp_path))
    with pytest.raises(BackendUnavailable, match=r"holds no train\*\.jsonl and test\*\.jsonl"):
        load_gsm8k_task(reachable=_never_reachable)


def test_a_missing_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(GSM8K_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(BackendUnavailable, match="is not a folder"):
        load_gsm8k_task(reachable=_never_reachable)


def test_an_unreachable_hub_with_an_empty_cache_fails_at_once_with_what_to_do(
    tmp_path, monkeypatch, no_network
):
    """The cache is read without asking the network (``no_network`` fails the test on any attempt: no
    retry loop), and the message names the dataset, the host and both ways out."""
    import datasets

    monkeypatch.delenv(GSM8K_ENV, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "empty-cache")
    before = datasets.config.HF_HUB_OFFLINE
    with pytest.raises(BackendUnavailable) as info:
        load_gsm8k_task(reachable=lambda: False)
    message = str(info.value)
    assert "huggingface.co" in message and GSM8K_ENV in message and "openai/gsm8k" in message
    assert datasets.config.HF_HUB_OFFLINE == before  # the offline switch is restored
