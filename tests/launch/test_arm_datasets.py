"""Each arm's Fireworks dataset and evaluator behaviour follow its own spec.

- Dataset ids are named by the rows' content: probe and A (same rows) share one, B (scrambled echo) gets
  its own, the poker seed (mean-instance) and gain arms get their own; launch creates a dataset only when
  its id is new, so no arm can train on another arm's rows.
- A spectrum spec with ``epoch_salt`` writes rows that ask the uploaded evaluator for per-epoch bands, and
  the rollout processor honours it without any environment variable (an uploaded evaluator has none).
- A poker row carries its arm's reward, and the evaluator scores it with that reward.
"""

from __future__ import annotations

import re

import pytest

from rftlab.launch.fireworks import (
    FireworksLauncher,
    LaunchRefused,
    arm_dataset_id,
    dataset_text,
    default_dataset_rows,
    evaluator_id,
)
from rftlab.launch.poker.spec import load_poker_arm_spec
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.runs.paths import SPECS_DIR
from rftlab.studies.poker import fireworks_launcher


def spectrum(arm: str):
    return load_arm_spec(SPECS_DIR / f"spectrum_{arm}.json")


def plan_dataset(launcher, spec) -> str:
    return launcher.plan(spec).dataset_id


def test_arms_with_different_rows_never_share_a_dataset():
    fw = FireworksLauncher(account_id="acct")
    ids = {arm: plan_dataset(fw, spectrum(arm)) for arm in ("probe", "A", "B", "C", "C_prime")}
    assert ids["probe"] == ids["A"]  # the probe is A at a learning rate of ~0: the same rows
    assert ids["B"] != ids["A"]  # scrambled echo: other rows (they record the memory channel)
    assert ids["C"] != ids["A"]  # weak prompt
    for arm, ds in ids.items():
        base = spectrum(arm).fireworks.dataset_id
        assert re.fullmatch(re.escape(base) + r"-[0-9a-f]{8}", ds), (arm, ds)
    poker = fireworks_launcher("acct")
    seed, gain = (load_poker_arm_spec(SPECS_DIR / f"poker_{n}.json") for n in ("seed", "gain"))
    assert plan_dataset(poker, seed) != plan_dataset(poker, gain)


def test_the_dataset_id_is_the_hash_of_the_uploaded_file():
    import hashlib

    rows = list(default_dataset_rows(spectrum("B")))
    expected = hashlib.sha256(dataset_text(rows).encode()).hexdigest()[:8]
    assert arm_dataset_id("base", rows) == f"base-{expected}"
    assert arm_dataset_id("base", rows[:-1]) != arm_dataset_id("base", rows)
    with pytest.raises(LaunchRefused, match="not a valid Fireworks id"):
        arm_dataset_id("Bad_Id", rows)


def test_the_job_points_at_the_arms_dataset():
    plan = FireworksLauncher(account_id="acct").plan(spectrum("B"))
    (create,) = [c for c in plan.commands if "--job-id" in c]
    assert create[create.index("--dataset") + 1] == plan.dataset_id == plan.commands[0][3]


@pytest.mark.parametrize("bad", ["Test_Evaluator", "ev--x", "9lives", "ends-", "x" * 64])
def test_an_evaluator_id_eval_protocol_would_rename_is_refused(bad):
    spec = spectrum("A")
    fw = spec.fireworks.model_copy(update={"evaluator": f"accounts/<acct>/evaluators/{bad}"})
    with pytest.raises(LaunchRefused, match="not a normalised Fireworks id"):
        evaluator_id(spec.model_copy(update={"fireworks": fw}), "acct")


def test_our_id_rule_agrees_with_eval_protocols_normalisation():
    """An id passes ``evaluator_id`` exactly when eval-protocol's normaliser leaves it (and the id with its
    code-hash suffix) unchanged and the suffix fits."""
    hypothesis = pytest.importorskip("hypothesis")
    from eval_protocol.cli_commands.utils import _normalize_evaluator_id
    from hypothesis import strategies as st

    spec = spectrum("A")

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(st.text(alphabet="abcXYZ019-_.", min_size=1, max_size=70))
    def check(candidate):
        fw = spec.fireworks.model_copy(update={"evaluator": f"accounts/<acct>/evaluators/{candidate}"})
        try:
            ours = evaluator_id(spec.model_copy(update={"fireworks": fw}), "acct")
        except LaunchRefused:
            ours = None
        # accepted exactly when eval-protocol keeps the id and the code-hash suffix fits in 63 characters
        kept = _normalize_evaluator_id(candidate) == candidate
        assert (ours is not None) == (kept and len(candidate) <= 54), candidate
        if ours is not None:  # the id uploaded (with its suffix) is one eval-protocol keeps too
            assert ours.startswith(candidate + "-") and _normalize_evaluator_id(ours) == ours

    check()


def test_epoch_salt_reaches_the_uploaded_evaluator_through_the_rows(monkeypatch):
    from eval_protocol.models import EvaluationRow

    from rftlab.rollout.spectrum import processors

    salted = [EvaluationRow(**r) for r in default_dataset_rows(spectrum("A"))]
    assert spectrum("A").epoch_salt
    assert all(processors.row_wants_epoch_salt(r) for r in salted)
    unsalted_spec = spectrum("A").model_copy(update={"epoch_salt": False})
    plain = [EvaluationRow(**r) for r in default_dataset_rows(unsalted_spec)]
    assert not any(processors.row_wants_epoch_salt(r) for r in plain)
    for name in ("RFTLAB_EPOCH_SALT", "SPECTRUM_EPOCH_SALT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(processors, "_PROCESS_SALT", None)
    first = processors.resolve_salt(None, processors.row_wants_epoch_salt(salted[0]))
    assert re.fullmatch(r"[0-9a-f]{8}", first)
    # one salt per process (= per cloud epoch): every candidate of a row shares the band
    assert processors.resolve_salt(None, True) == first
    assert processors.resolve_salt(None, processors.row_wants_epoch_salt(plain[0])) == ""


def test_a_salted_row_gets_another_band_than_an_unsalted_one(monkeypatch):
    """End to end through the turn processor: the recorded band seed changes with the row's flag."""
    import asyncio

    from eval_protocol.models import EvaluationRow

    from rftlab.rollout.spectrum import processors

    monkeypatch.delenv("RFTLAB_EPOCH_SALT", raising=False)
    monkeypatch.delenv("SPECTRUM_EPOCH_SALT", raising=False)
    monkeypatch.setattr(processors, "_PROCESS_SALT", "deadbeef")

    async def fake_completion(**kwargs):  # stands in for litellm: the episode ends on the call budget
        raise AssertionError("not called with max_model_calls=0")

    seeds = {}
    for flag in (True, False):
        spec = spectrum("A").model_copy(update={"epoch_salt": flag})
        row = EvaluationRow(**next(iter(default_dataset_rows(spec))))
        done = asyncio.run(processors.run_turn_episode(row, {"model": "x"}, max_model_calls=0))
        info = done.execution_metadata.extra["spectrum"]
        seeds[flag] = (info["salt"], info["band_seed"])
    assert seeds[True][0] == "deadbeef" and seeds[False][0] == ""
    assert seeds[True][1] != seeds[False][1]


def test_a_poker_row_is_scored_with_its_arms_reward_and_refused_by_the_other_evaluator(monkeypatch):
    from eval_protocol.models import EvaluationRow

    from rftlab.rewards.poker import REWARDS
    from rftlab.rollout.poker.dataset import dataset_rows
    from rftlab.rollout.poker.scoring import row_reward, score_poker_row

    monkeypatch.delenv("RFTLAB_POKER_REWARD", raising=False)
    hands = [-2.0, -1.0, 0.0, 3.0, 4.0, 6.0]
    transcript = [{"role": "user", "content": "HAND_PROFITS_BB: " + ",".join(str(h) for h in hands)}]
    scores = {}
    for reward in ("mean_instance", "gain"):
        (raw,) = dataset_rows(1, reward=reward)
        row = EvaluationRow(**raw)
        assert row_reward(row) == reward
        row.messages = [*row.messages, *[EvaluationRow(messages=transcript).messages[0]]]
        scores[reward] = score_poker_row(row, reward).evaluation_result.score
        assert scores[reward] == pytest.approx(REWARDS[reward](hands, 0)["score"])
        other = "gain" if reward == "mean_instance" else "mean_instance"
        wrong = score_poker_row(row, other).evaluation_result  # the other arm's evaluator refuses the row
        assert wrong.score == 0 and not wrong.is_score_valid and f"belongs to a {reward} arm" in wrong.reason
    assert scores["gain"] != scores["mean_instance"]
