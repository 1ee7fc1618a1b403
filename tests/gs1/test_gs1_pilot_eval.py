"""The pilot times evaluation on train items, never on the test items the decision rests on."""

from __future__ import annotations

import pytest
from test_gs1_fakes import toy_task

from rftlab.studies.gs1 import DEFAULT_SPEC, load_spec
from rftlab.training.gs1.pilot import pilot_config
from rftlab.training.gs1.rl_loop import GS1ArmConfig, eval_items, step_prompt_indices

ARMS = load_spec(DEFAULT_SPEC).arm_configs(n_train=200, n_eval=12)


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_pilot_evaluates_train_items_it_never_trains_on(arm):
    task = toy_task(n_train=200, n_test=12)
    cfg = pilot_config(ARMS[arm], n_eval=8)  # 2 steps of up to 64 prompts of 200
    assert cfg.eval_split == "train"
    items = eval_items(cfg, task, cfg.n_eval)
    test_ids = {p.item_id for p in task.test}
    assert len(items) == 8 and not {p.item_id for p in items} & test_ids
    trained = {task.train[i].item_id for s in range(cfg.steps) for i in step_prompt_indices(cfg, s, 200)}
    assert not trained & {p.item_id for p in items}


def test_the_final_evaluation_is_on_test_items_and_the_old_hash_is_kept():
    task = toy_task(n_train=200, n_test=12)
    cfg = ARMS["grpo_gs8"]
    assert [p.item_id for p in eval_items(cfg, task, 5)] == [f"test-{i}" for i in range(5)]
    assert "eval_split" not in cfg.to_dict()  # default: the key of every run made before the field
    assert pilot_config(cfg).to_dict()["eval_split"] == "train"
    with pytest.raises(ValueError, match="eval_split"):
        GS1ArmConfig(arm="x", estimator="group_mean", group_size=1, groups_per_batch=1, eval_split="dev")
