"""Fields of a Tinker-API backend's answers that rftlab reads and that not every backend returns.

The hosted Tinker service and ``rftlab serve tinker`` report a ``forward_backward``'s summed loss as
``metrics["loss:sum"]``; another Tinker-API backend may not (issue 30 reports that SkyRL's Tinker server
returns none). Reading such a field goes through ``loss_sum``, which names the gap instead of ending in a
``KeyError`` (docs/platforms.md §3.12)."""

from __future__ import annotations

from typing import Any


class BackendGap(RuntimeError):
    """The training backend's answer lacks a field this study reads (the message names it and the call)."""


def loss_sum(output: Any, call: str = "forward_backward") -> float:
    """``output.metrics["loss:sum"]`` as a float, or ``BackendGap`` naming what the backend returned."""
    metrics = getattr(output, "metrics", None)
    value = metrics.get("loss:sum") if isinstance(metrics, dict) else None
    if value is None:
        keys = ", ".join(sorted(metrics)) if isinstance(metrics, dict) and metrics else "none"
        raise BackendGap(
            f"the training backend returned no 'loss:sum' in {call}'s metrics (it returned: {keys}); "
            "rftlab reads the summed loss that the hosted Tinker service and rftlab serve tinker report, "
            "so this backend cannot run this study as it is (docs/platforms.md §3.12)"
        )
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BackendGap(f"the training backend's 'loss:sum' in {call} is not a number: {value!r}") from None
