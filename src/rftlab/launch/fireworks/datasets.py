"""The Fireworks dataset of an arm: its rows (the arm spec's, or a family's), their JSONL text, and the
dataset id that names their content."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from rftlab.launch.fireworks.common import (
    LaunchRefused,
)
from rftlab.launch.spectrum.spec import SpectrumArmSpec

# ----------------------------------------------------------------------------------- helpers


def default_dataset_rows(spec: SpectrumArmSpec) -> Iterable[Mapping[str, Any]]:
    """The arm's eval-protocol rows (one per row id; the band comes from the env's per-row seed). With the
    spec's ``epoch_salt`` the rows ask the uploaded evaluator for fresh bands every epoch
    (``environment_context.epoch_salt``, read by ``rftlab.rollout.spectrum.processors``)."""
    from rftlab.rollout.spectrum.dataset import dataset_rows

    return dataset_rows(
        spec.rows,
        prompt=spec.prompt,
        memory=spec.memory,
        prefix=spec.row_prefix,
        epoch_salt=spec.epoch_salt,
    )


def dataset_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """The dataset file uploaded to Fireworks: one JSON row per line."""
    return "".join(json.dumps(r) + "\n" for r in rows)


_RESOURCE_ID = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


def arm_dataset_id(base: str, rows: Iterable[Mapping[str, Any]]) -> str:
    """``<base>-<first 8 hex of the SHA-256 of the dataset file>``. ``launch`` creates a dataset only when
    its id does not exist yet, so a fixed id shared by arms whose rows differ (probe/A echo vs B scrambled
    used to share ``rftlab-spectrum-scaf48``) let the first arm launched decide the others' rows; a
    content-named id makes every arm train on its own spec's rows, and arms with identical rows share one."""
    digest = hashlib.sha256(dataset_text(rows).encode("utf-8")).hexdigest()[:8]
    dataset_id = f"{base}-{digest}"
    if not _RESOURCE_ID.match(dataset_id) or dataset_id.endswith("-"):
        raise LaunchRefused(
            f"dataset id {dataset_id!r} (from the spec's {base!r}) is not a valid Fireworks id: lower-case "
            "letters, digits and '-', starting with a letter, at most 63 characters"
        )
    return dataset_id
