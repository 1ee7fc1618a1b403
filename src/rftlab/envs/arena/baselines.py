"""Compatibility shim: the arena baselines moved to ``rftlab.policies.arena``.

Kept only because ``tests/analysis/test_stats_intervals.py`` (another branch's file) still imports
``rftlab.envs.arena.baselines.evaluate_baselines``; this is the one upward import the layer test allows
(``tests/test_layers.py::ALLOWED``). Import from ``rftlab.policies.arena`` instead.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    import rftlab.policies.arena as _arena  # noqa: PLC0415 - lazy: envs must not load policies on import

    return getattr(_arena, name)
