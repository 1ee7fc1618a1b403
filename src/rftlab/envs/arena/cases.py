"""The frozen 60-case evaluation manifest (docs/arena.md §10.1), shipped as a constant and checked on load."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

STYLES: tuple[str, ...] = ("balanced", "aggressive", "defensive")
"""RED's scripted styles (§6); the local-priority table of each is in ``rftlab.policies.arena.scripted``."""

FROZEN_MANIFEST_SHA256 = "b53bfc523043ec71cc69f851d0819511c5a9f0b4f09520898f30954bbe874b29"
FROZEN_CASE_COUNT = 60
_FIRST_SEED, _SEED_STRIDE, _CASES_PER_SIZE = 1_000_003, 137, 20


@dataclass(frozen=True)
class FrozenCase:
    """One frozen evaluation case: generator seed, graph size and RED's scripted style."""

    index: int
    seed: int
    size: int
    style: str


def _build_cases() -> tuple[FrozenCase, ...]:
    return tuple(
        FrozenCase(i, _FIRST_SEED + _SEED_STRIDE * i, 12 + i // _CASES_PER_SIZE, STYLES[i % len(STYLES)])
        for i in range(FROZEN_CASE_COUNT)
    )


def manifest_sha256(cases: tuple[FrozenCase, ...]) -> str:
    """``sha256`` of the compact JSON list of ``[seed, size, style]`` in case order."""
    payload = json.dumps([[c.seed, c.size, c.style] for c in cases], separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def frozen_cases() -> tuple[FrozenCase, ...]:
    """The 60 frozen cases; raises if they no longer hash to the published manifest SHA-256."""
    cases = _build_cases()
    digest = manifest_sha256(cases)
    if digest != FROZEN_MANIFEST_SHA256:
        raise RuntimeError(
            f"frozen arena manifest hash {digest} != {FROZEN_MANIFEST_SHA256}; never edit the cases"
        )
    return cases


FROZEN_SEEDS = frozenset(case.seed for case in _build_cases())
