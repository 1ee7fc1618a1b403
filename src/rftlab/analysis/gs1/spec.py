"""The GS1 study spec with its statistics typed: the decision rule and the activation gate.

``GS1StudySpec`` is ``rftlab.launch.gs1.spec.GS1Spec`` with ``decision_rule`` parsed as a
``DecisionRule`` and ``activation_gate`` as an ``ActivationGate`` of ``GateCheck`` s. It is what
``parse_study_spec`` returns: one validation of the whole file, one line naming the first bad field.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rftlab.analysis.decision_rules import DecisionRule
from rftlab.analysis.gates import GateCheck
from rftlab.analysis.io import AnalysisInputError, parse_json_bytes, validation_message
from rftlab.launch.gs1.spec import GS1Spec


class ActivationGate(BaseModel):
    """The spec's ``activation_gate``: the checks the 2-step pilot must pass before the full runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    applicable: bool = True
    reason: str = ""
    checks: tuple[GateCheck, ...] = Field(min_length=1)

    def minimum(self, metric: str) -> float | None:
        """The ``min`` of the check on ``metric`` (``None`` when it has none)."""
        for check in self.checks:
            if check.metric == metric and check.min is not None:
                return float(check.min)
        return None


class GS1StudySpec(GS1Spec):
    """A GS1 spec whose decision rule and activation gate are validated too."""

    activation_gate: ActivationGate
    decision_rule: DecisionRule


def parse_study_spec(raw: bytes, path: str | Path) -> GS1StudySpec:
    """The spec in ``raw`` (the bytes of the file at ``path``), stamped with their SHA-256.

    Every refusal is an ``AnalysisInputError`` of one line: ``<path>: <field>: <message>``."""
    data = parse_json_bytes(raw, Path(path), "spec")
    if not isinstance(data, dict):
        raise AnalysisInputError(f"spec {path}: expected a JSON object, got {type(data).__name__}")
    try:
        spec = GS1StudySpec.model_validate(data)
    except ValidationError as exc:
        raise AnalysisInputError(f"{path}: {validation_message(exc, limit=1)}") from None
    return spec.with_file(hashlib.sha256(raw).hexdigest(), str(path))
