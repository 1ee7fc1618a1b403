"""Fixtures of the arena tests."""

from __future__ import annotations

import pytest

from rftlab.rollout.arena.sft_data import STAGE1_CONFIG, write_dataset


@pytest.fixture(scope="session")
def stage1_data(tmp_path_factory):
    """The Stage-1 data, built once per test process (the selection gates need the full 52 ACT + 223
    BROADCAST validation rows)."""
    root = tmp_path_factory.mktemp("stage1") / "data"
    write_dataset(root, STAGE1_CONFIG)
    return root
