"""What the Stage-1 tests share: small spec variants written to a test folder, and the small sizes."""

from __future__ import annotations

import json
from pathlib import Path

from rftlab.runs.paths import SPECS_DIR

SMALL = {
    "overfit__rows": 16,
    "overfit__steps": 60,
    "overfit__batch_size": 4,
    "train__max_steps": 80,
    "train__batch_size": 4,
    "train__validation_every_steps": 40,
    "train__min_validation_measurements": 3,
    "evaluation__frozen_case_stride": 6,
    "evaluation__test_rows": 30,
}


def write_spec(
    tmp_path: Path, base: str = "arena_sft_simulated.json", name: str = "small", **changes
) -> Path:
    """``data/specs/<base>`` with ``changes`` (``"train__max_steps": 6`` sets ``train.max_steps``) and
    ``-<name>`` appended to its name, written to ``tmp_path/<name>.json``."""
    spec = json.loads((SPECS_DIR / base).read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = spec
        for part in parents:
            node = node[part]
        node[leaf] = value
    spec["name"] = spec["name"] + "-" + name
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(spec))
    return path
