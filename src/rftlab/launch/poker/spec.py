"""Arm specs of poker RFT (seed ``poker_fireworks_rft_port.md``; docs/poker.md §B.1, B.4, B.5) and the mapping
from the Prime/verifiers TOML settings the seed started from to the Fireworks job flags.

A ``PokerArmSpec`` carries the same job fields as ``SpectrumArmSpec`` (epochs, learning rate,
temperature, response candidates, the ``fireworks`` section), so ``launch.firectl.job_create_flags``
builds its ``firectl rftj create`` argv unchanged.

The arm's reward reaches its evaluator through the uploaded code, not through the environment (the
evaluator is uploaded with an empty env file): each reward has its own ``@evaluation_test`` entry, which
fixes the reward, and its own evaluator id (``EVALUATOR_IDS``), so uploading one arm's evaluator never
replaces the other's (docs/poker.md §B.5, "How an arm's reward reaches its evaluator"). The spec refuses
what no launch path can deliver: ``assignment: per_rollout`` (upstream's independent draw per rollout,
B.1 — the group-mismatch bug, never implemented here), an evaluator id that is not its reward's, and, for a
Fireworks arm, a hand count other than the uploaded evaluator's 16.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from rftlab.envs.poker.env import RFT_HANDS
from rftlab.launch.specs import (
    NAME,
    SPEC_CONFIG,
    FireworksJobSettings,
    SpecBool,
    SpecFloat,
    SpecInt,
    drop_unset_job_fields,
    load_spec_file,
)
from rftlab.runs.hashing import spec_sha256

# One evaluator per reward: its @evaluation_test entry (relative to the staged evaluator folder) fixes the
# reward, and its id keeps the two uploads apart.
EVALUATOR_ENTRIES = {
    "mean_instance": "rftlab/rollout/eval_entries/poker_mcp_eval.py::test_poker_mcp",
    "gain": "rftlab/rollout/eval_entries/poker_mcp_gain_eval.py::test_poker_mcp_gain",
}
EVALUATOR_IDS = {"mean_instance": "rftlab-poker-mcp", "gain": "rftlab-poker-mcp-gain"}


class PokerArmSpec(BaseModel):
    """One poker RFT arm; every field validated here (``rftlab.launch.specs``)."""

    model_config = SPEC_CONFIG

    # "poker_tiny_lm": the tiny-language-model study's arms (rftlab.studies.poker), kept apart in the run store
    experiment: Literal["poker", "poker_tiny_lm"] = "poker"
    arm: str = Field(pattern=NAME)
    description: str = Field("", max_length=4000)
    rows: SpecInt = Field(64, ge=1, le=100_000)
    hands: SpecInt = Field(16, ge=1, le=200)
    assignment: Literal["row_shared", "per_rollout"] = "row_shared"  # B.1: how opponent and cards are drawn
    reward: Literal["mean_instance", "gain"] = "mean_instance"
    illegal_retry_limit: SpecInt = Field(3, ge=1, le=100)
    thinking: SpecBool = False  # False: the system prompt ends with /no_think (Prime's enable_thinking=false)
    epochs: SpecInt = Field(2, ge=1, le=1000)
    response_candidates: SpecInt = Field(8, ge=2, le=256)
    learning_rate: SpecFloat = Field(1e-6, gt=0.0, lt=1.0)
    temperature: SpecFloat = Field(1.0, gt=0.0, le=10.0)
    seed: SpecInt = Field(0, ge=0, le=2**31 - 1)
    fireworks: FireworksJobSettings | None = None
    # where the arm runs when no backend is named (None: fireworks); "tinker": rftlab.launch.poker.tinker
    backend: Literal["fireworks", "tinker"] | None = None

    @field_validator("assignment")
    @classmethod
    def _row_shared_only(cls, value: str) -> str:
        if value != "row_shared":
            raise ValueError(
                "'per_rollout' (upstream's independent opponent and cards per rollout, docs/poker.md §B.1) is "
                "not implemented by any launch path: the McpGym server deals from the row's session key, so "
                "every candidate of a row plays the same hands. Use 'row_shared'"
            )
        return value

    @field_validator("fireworks")
    @classmethod
    def _evaluator_matches_reward(cls, fw: FireworksJobSettings | None, info: ValidationInfo):
        if fw is None or "reward" not in info.data or "hands" not in info.data:
            return fw
        reward, hands = info.data["reward"], info.data["hands"]
        ev_id = fw.evaluator.rsplit("/", 1)[-1]
        if ev_id != EVALUATOR_IDS[reward]:
            raise ValueError(
                f"evaluator id {ev_id!r} does not match reward {reward!r}: a {reward} arm uploads and uses "
                f"'{EVALUATOR_IDS[reward]}' (one evaluator per reward, so the uploaded code fixes the score)"
            )
        if hands != RFT_HANDS:
            raise ValueError(
                f"hands = {hands}, but the uploaded evaluator plays {RFT_HANDS} hands per rollout (its env file "
                f"is empty, so $RFTLAB_POKER_HANDS is unset there): a Fireworks arm must use hands = {RFT_HANDS}"
            )
        return fw

    @property
    def evaluator_entry(self) -> str:
        """The ``@evaluation_test`` entry uploaded for this arm: the one that scores with its reward."""
        return EVALUATOR_ENTRIES[self.reward]

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON data; ``backend`` and the optional job settings (``rftlab.launch.specs``) only
        when set, so a spec without them keeps the hash it had before those fields existed."""
        data = drop_unset_job_fields(self.model_dump(mode="json"))
        if data.get("backend") is None:
            data.pop("backend", None)
        return data

    def sha256(self) -> str:
        return spec_sha256(self.to_dict())


def load_poker_arm_spec(path: str | Path) -> PokerArmSpec:
    """Read and validate a poker arm spec file; ``ValueError`` naming the file and the bad field."""
    return load_spec_file(path, PokerArmSpec)


def prime_mapping(spec: PokerArmSpec) -> list[dict[str, str]]:
    """How each Prime/verifiers TOML setting of the seed lands in this Fireworks job (B.4, B.5)."""
    fw = spec.fireworks
    max_tokens = str(fw.max_output_tokens) if fw else "-"
    return [
        {"prime": "rollouts_per_example", "value": str(spec.response_candidates),
         "fireworks": f"--response-candidates-count {spec.response_candidates} (the GRPO group)"},
        {"prime": "temperature", "value": repr(spec.temperature), "fireworks": f"--temperature {spec.temperature!r}"},
        {"prime": "max_tokens", "value": max_tokens, "fireworks": f"--max-output-tokens {max_tokens}"},
        {"prime": "enable_thinking", "value": str(spec.thinking).lower(),
         "fireworks": "no flag: '/no_think' ends the dataset's system prompt" if not spec.thinking else "no flag"},
        {"prime": "guided_json (PokerAction schema)", "value": "on",
         "fireworks": "no flag: the poker_act tool's parameters are the schema"},
        {"prime": "learning_rate / epochs", "value": f"{spec.learning_rate!r} / {spec.epochs}",
         "fireworks": f"--learning-rate {spec.learning_rate!r} --epochs {spec.epochs}"},
    ]  # fmt: skip
