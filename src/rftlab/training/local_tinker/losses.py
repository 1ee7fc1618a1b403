"""Datum validation and the losses, with the tinker service's definitions (docs/platforms.md §3.4).

Every loss is a token sum, unnormalised, like the service's: a datum's loss is ``elementwise_loss.sum()``
and ``loss:sum`` adds the datums. With ``r = exp(logp - sampler_logprobs)`` and ``A`` the advantages:

- ``cross_entropy``: ``-(logp * weights)``
- ``importance_sampling``: ``-(r * A)`` (unclipped)
- ``ppo``: ``-min(r * A, clip(r, low, high) * A)``; ``loss_fn_config`` keys ``clip_low_threshold``
  (default 0.8) and ``clip_high_threshold`` (default 1.2)
- ``cispo``: ``-(sg(clip(r, low, high)) * logp * A)`` (``sg``: the clipped ratio is a constant for the
  gradient); the same keys, defaults 0.0 and 4.0
- ``dro``: ``-(logp * A - beta / 2 * (logp - sampler_logprobs) ** 2)``; ``loss_fn_config`` key ``beta``,
  which must be given (the service's documentation shows no default)

``logp[t]`` is the log-probability of ``target_tokens[t]`` given ``model_input[: t + 1]``; every
``loss_fn_inputs`` tensor has length ``model_input.length``, and, as on the service, extra keys are
rejected (``DatumError``), as are sequences longer than the model's context and token ids outside its
vocabulary (named by datum, field and position). ``loss_fn_config`` (``check_loss_config``): a loss without
options refuses any config; a loss with options refuses unknown keys and out-of-range values
(``ParameterError``: clip thresholds finite with ``0 <= low <= 1 <= high``, ``beta`` finite and ``>= 0``).
Non-finite inputs (a NaN advantage) are not refused here: the loss is reported as computed, and
``optim_step`` refuses a non-finite gradient (see ``LocalTrainingClient.optim_step``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tinker import types

from .errors import ParameterError

RL_INPUTS = frozenset({"target_tokens", "logprobs", "advantages"})
REQUIRED_INPUTS: dict[str, frozenset[str]] = {
    "cross_entropy": frozenset({"target_tokens", "weights"}),
    "importance_sampling": RL_INPUTS,
    "ppo": RL_INPUTS,
    "cispo": RL_INPUTS,
    "dro": RL_INPUTS,
}

LOSS_CONFIG_DEFAULTS: dict[str, dict[str, float | None]] = {
    "cross_entropy": {},
    "importance_sampling": {},
    "ppo": {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2},
    "cispo": {"clip_low_threshold": 0.0, "clip_high_threshold": 4.0},
    "dro": {"beta": None},  # None: required
}
"""Each loss's ``loss_fn_config`` keys and their defaults (docs/platforms.md §3.4)."""


class DatumError(ValueError):
    """A datum the service would reject (missing/extra keys, wrong lengths, empty chunks, too long for the
    model's context, token ids outside the vocabulary)."""


@dataclass(frozen=True)
class ParsedDatum:
    tokens: list[int]
    inputs: dict[str, torch.Tensor]


def _number(loss_fn: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParameterError(f"loss_fn_config[{key!r}] for {loss_fn!r} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ParameterError(f"loss_fn_config[{key!r}] for {loss_fn!r} must be finite, got {value!r}")
    return x


def check_loss_config(loss_fn: str, config: Mapping[str, Any] | None) -> dict[str, float]:
    """The loss's options: ``config`` over its defaults, checked (``ParameterError`` naming the key)."""
    if loss_fn not in LOSS_CONFIG_DEFAULTS:
        raise DatumError(
            f"loss_fn {loss_fn!r} is not supported locally; use one of {sorted(REQUIRED_INPUTS)}"
        )
    defaults = LOSS_CONFIG_DEFAULTS[loss_fn]
    given = dict(config or {})
    if given and not defaults:
        raise ParameterError(
            f"loss_fn {loss_fn!r} takes no loss_fn_config, got keys {sorted(map(str, given))}"
        )
    unknown = sorted(str(k) for k in given if k not in defaults)
    if unknown:
        raise ParameterError(
            f"loss_fn_config for {loss_fn!r}: unknown keys {unknown} (it takes {sorted(defaults)})"
        )
    out: dict[str, float] = {}
    for key, default in defaults.items():
        if key in given:
            out[key] = _number(loss_fn, key, given[key])
        elif default is None:
            raise ParameterError(f"loss_fn {loss_fn!r} needs loss_fn_config[{key!r}] (no default)")
        else:
            out[key] = default
    if "clip_low_threshold" in out:
        low, high = out["clip_low_threshold"], out["clip_high_threshold"]
        if not 0.0 <= low <= 1.0:
            raise ParameterError(
                f"loss_fn_config['clip_low_threshold'] for {loss_fn!r} must be in [0, 1], got {low!r}"
            )
        if high < 1.0:
            raise ParameterError(
                f"loss_fn_config['clip_high_threshold'] for {loss_fn!r} must be at least 1, got {high!r}"
            )
    if "beta" in out and out["beta"] < 0:
        raise ParameterError(f"loss_fn_config['beta'] for {loss_fn!r} must be >= 0, got {out['beta']!r}")
    return out


def model_input_tokens(model_input: types.ModelInput, where: str = "model_input") -> list[int]:
    for i, chunk in enumerate(model_input.chunks):
        if not isinstance(chunk, types.EncodedTextChunk):
            raise DatumError(
                f"{where}: chunk {i} is {type(chunk).__name__}; the local backend takes text tokens only"
            )
        if len(chunk.tokens) == 0:
            raise DatumError(f"{where}: chunk {i} has an empty tokens list")
    return model_input.to_ints()


def _check_ids(ids: torch.Tensor, vocab: int, where: str, field: str) -> None:
    """``DatumError`` naming the first position whose token id is outside ``[0, vocab)``."""
    bad = ((ids < 0) | (ids >= vocab)).nonzero()
    if len(bad):
        pos = int(bad[0])
        raise DatumError(
            f"{where}: {field} has token id {int(ids[pos])} at position {pos}, outside the model's "
            f"vocabulary [0, {vocab})"
        )


def _target_ids(t: torch.Tensor, where: str) -> torch.Tensor:
    if t.is_floating_point() or t.is_complex():
        bad = (~torch.isfinite(t) | (t != torch.round(t))).nonzero()
        if len(bad):
            pos = int(bad[0])
            raise DatumError(
                f"{where}: loss_fn_inputs['target_tokens'] has {float(t[pos])!r} at position {pos}, "
                "not a token id"
            )
    return t.to(torch.long)


def parse_datum(
    datum: types.Datum,
    loss_fn: str,
    index: int = 0,
    *,
    vocab: int | None = None,
    max_positions: int | None = None,
) -> ParsedDatum:
    """The datum's tokens and ``loss_fn_inputs`` tensors, checked as the service checks them; with
    ``vocab`` token ids must lie in ``[0, vocab)``, with ``max_positions`` the sequence must fit the
    model's context (``DatumError`` naming the datum, the field and the position)."""
    if loss_fn not in REQUIRED_INPUTS:
        raise DatumError(
            f"loss_fn {loss_fn!r} is not supported locally; use one of {sorted(REQUIRED_INPUTS)}"
        )
    where = f"datum {index}"
    tokens = model_input_tokens(datum.model_input, where)
    if not tokens:
        raise DatumError(f"{where}: empty model_input")
    if max_positions is not None and len(tokens) > max_positions:
        raise DatumError(
            f"{where}: model_input has {len(tokens)} tokens, more than the model's context of "
            f"{max_positions} positions"
        )
    if vocab is not None:
        _check_ids(torch.as_tensor(tokens, dtype=torch.long), vocab, where, "model_input")
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
        if key == "target_tokens":
            t = _target_ids(t, where)
            if vocab is not None:
                _check_ids(t, vocab, where, "loss_fn_inputs['target_tokens']")
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


def elementwise_loss(
    loss_fn: str,
    logp: torch.Tensor,
    inputs: Mapping[str, torch.Tensor],
    config: Mapping[str, float] | None = None,
) -> torch.Tensor:
    """Per-token loss of one datum (its loss is the sum); ``config`` is ``check_loss_config``'s result
    (``None``: the loss's defaults)."""
    if config is None:
        config = check_loss_config(loss_fn, None)

    def given(key: str) -> torch.Tensor:
        return inputs[key].to(logp.device, logp.dtype)

    if loss_fn == "cross_entropy":
        return -(logp * given("weights"))
    if loss_fn not in REQUIRED_INPUTS:
        raise DatumError(f"loss_fn {loss_fn!r} is not supported locally")
    adv, sampler_logp = given("advantages"), given("logprobs")
    if loss_fn == "dro":
        return -(logp * adv - 0.5 * config["beta"] * (logp - sampler_logp) ** 2)
    ratio = torch.exp(logp - sampler_logp)
    if loss_fn == "importance_sampling":
        return -(ratio * adv)
    clipped = torch.clamp(ratio, config["clip_low_threshold"], config["clip_high_threshold"])
    if loss_fn == "ppo":
        return -torch.minimum(ratio * adv, clipped * adv)
    return -(clipped.detach() * logp * adv)  # cispo
