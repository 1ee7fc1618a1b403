"""Datum validation and the two losses, with the tinker service's definitions (docs/platforms.md §3.4).

- ``cross_entropy``: ``-(logp * weights).sum()``
- ``importance_sampling``: ``-(exp(logp - sampler_logprobs) * advantages).sum()`` (token sum,
  unclipped, unnormalised)

``logp[t]`` is the log-probability of ``target_tokens[t]`` given ``model_input[: t + 1]``; every
``loss_fn_inputs`` tensor has length ``model_input.length``, and, as on the service, extra keys are
rejected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tinker import types

REQUIRED_INPUTS: dict[str, frozenset[str]] = {
    "cross_entropy": frozenset({"target_tokens", "weights"}),
    "importance_sampling": frozenset({"target_tokens", "logprobs", "advantages"}),
}


class DatumError(ValueError):
    """A datum the service would reject (missing/extra keys, wrong lengths, empty chunks)."""


@dataclass(frozen=True)
class ParsedDatum:
    tokens: list[int]
    inputs: dict[str, torch.Tensor]


def model_input_tokens(model_input: types.ModelInput, where: str = "model_input") -> list[int]:
    for i, chunk in enumerate(model_input.chunks):
        if not isinstance(chunk, types.EncodedTextChunk):
            raise DatumError(
                f"{where}: chunk {i} is {type(chunk).__name__}; the local backend takes text tokens only"
            )
        if len(chunk.tokens) == 0:
            raise DatumError(f"{where}: chunk {i} has an empty tokens list")
    return model_input.to_ints()


def parse_datum(datum: types.Datum, loss_fn: str, index: int = 0) -> ParsedDatum:
    if loss_fn not in REQUIRED_INPUTS:
        raise DatumError(
            f"loss_fn {loss_fn!r} is not supported locally; use one of {sorted(REQUIRED_INPUTS)}"
        )
    where = f"datum {index}"
    tokens = model_input_tokens(datum.model_input, where)
    if not tokens:
        raise DatumError(f"{where}: empty model_input")
    keys = set(datum.loss_fn_inputs)
    required = REQUIRED_INPUTS[loss_fn]
    if keys != required:
        missing, extra = sorted(required - keys), sorted(keys - required)
        raise DatumError(
            f"{where}: loss_fn_inputs for {loss_fn} must be exactly {sorted(required)} (missing {missing}, extra {extra})"
        )
    inputs: dict[str, torch.Tensor] = {}
    for key, value in datum.loss_fn_inputs.items():
        t = value.to_torch()
        if t.ndim != 1 or t.shape[0] != len(tokens):
            raise DatumError(
                f"{where}: loss_fn_inputs[{key!r}] has shape {list(t.shape)}, expected [{len(tokens)}]"
            )
        inputs[key] = t
    return ParsedDatum(tokens=tokens, inputs=inputs)


def target_logprobs(
    model: Any, batch: Sequence[Sequence[int]], targets: Sequence[torch.Tensor], pad_id: int
) -> list[torch.Tensor]:
    """Per-position logprobs of ``targets`` for each token sequence of ``batch`` (one forward pass,
    right-padded: with causal attention the padding never reaches a real position)."""
    width = max(len(b) for b in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    tgt = torch.zeros((len(batch), width), dtype=torch.long)
    for i, (b, t) in enumerate(zip(batch, targets, strict=True)):
        ids[i, : len(b)] = torch.as_tensor(b, dtype=torch.long)
        tgt[i, : len(b)] = t.to(torch.long)
    device = next(model.parameters()).device
    ids, tgt = ids.to(device), tgt.to(device)
    logits = model(input_ids=ids, use_cache=False).logits
    logp = torch.log_softmax(logits, dim=-1).gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
    return [logp[i, : len(b)] for i, b in enumerate(batch)]


def elementwise_loss(loss_fn: str, logp: torch.Tensor, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Per-token loss of one datum; the datum's loss is its sum."""
    if loss_fn == "cross_entropy":
        return -(logp * inputs["weights"].to(logp.device, logp.dtype))
    if loss_fn == "importance_sampling":
        ratio = torch.exp(logp - inputs["logprobs"].to(logp.device, logp.dtype))
        return -(ratio * inputs["advantages"].to(logp.device, logp.dtype))
    raise DatumError(f"loss_fn {loss_fn!r} is not supported locally")
