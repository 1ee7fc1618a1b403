"""Helpers shared by the local tinker backend's tests: an SFT datum, the cross_entropy twin of
importance-sampling datums, and a quiet ``rftlab serve tinker`` in a thread."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from tinker import types

from rftlab.training.local_tinker.server import ServeConfig, ServerThread

KEY = "tml-local-tests"
"""The key of the test servers (``ServeConfig(api_keys=[KEY])``)."""
SFT_TEXT = "Sam has 3 pens. \\boxed{3}"


def sft_datum(tok: Any, text: str = SFT_TEXT, weights: Sequence[float] | None = None) -> types.Datum:
    """A ``cross_entropy`` datum of ``text``: every next token a target, weighted 1 unless ``weights``."""
    ids = tok.encode(text)
    w = list(weights) if weights is not None else [1.0] * (len(ids) - 1)
    return types.Datum(
        model_input=types.ModelInput.from_ints(ids[:-1]),
        loss_fn_inputs={"target_tokens": ids[1:], "weights": w},
    )


def advantage_weighted(data: Sequence[types.Datum]) -> list[types.Datum]:
    """``cross_entropy`` datums with the targets of ``data`` and its advantages as weights."""
    return [
        types.Datum(
            model_input=d.model_input,
            loss_fn_inputs={
                "target_tokens": d.loss_fn_inputs["target_tokens"],
                "weights": d.loss_fn_inputs["advantages"],
            },
        )
        for d in data
    ]


@contextlib.contextmanager
def quiet_server(storage: Any, **config: Any) -> Iterator[ServerThread]:
    """``rftlab serve tinker`` on a free loopback port, logging warnings and worse only."""
    config.setdefault("api_keys", [KEY])
    with ServerThread(ServeConfig(port=0, storage=storage, log_level="warning", **config)) as srv:
        yield srv
