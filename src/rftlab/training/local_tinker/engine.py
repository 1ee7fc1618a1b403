"""Batched sampling with a KV cache, and prompt logprobs, for the local backend.

Requests are queued by the sampling clients and run together at the first ``.result()``: rows of
all queued requests are left-padded into micro-batches, prefilled once and decoded token by token
with the model's KV cache. Each request draws its randomness from its own generator (seeded by
``SamplingParams.seed``, else by the sampling client's stream), as Gumbel noise fixed per
``(sample, position, token)``, so a request's tokens do not depend on what else is in the batch
(up to float rounding from the batch's padding, which could only flip a near-exact tie).

Logprobs reported for sampled tokens are those of the model's distribution (``log_softmax`` of
the logits, before temperature, top-k or top-p), the same quantity ``compute_logprobs`` and the
training client's ``forward`` return for those tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tinker import types

from .futures import LocalFuture

MAX_BATCH_ROWS = 256
"""Rows per decode micro-batch (bounds KV-cache and logits memory)."""


@dataclass
class SampleRequest:
    prompt: list[int]
    num_samples: int
    max_tokens: int
    temperature: float
    top_k: int
    top_p: float
    stop_tokens: frozenset[int]
    stop_sequences: tuple[tuple[int, ...], ...]
    generator_seed: int
    include_prompt_logprobs: bool
    future: LocalFuture[types.SampleResponse]
    id_prefix: str
    prompt_logprobs_last_n: int | None = None


@dataclass
class LogprobRequest:
    prompt: list[int]
    future: LocalFuture[list[float | None]]


@dataclass
class _Row:
    request: SampleRequest
    index: int
    noise: torch.Tensor | None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stop_reason: str | None = None


def resolve_stop(stop: Any, tokenizer: Any) -> tuple[frozenset[int], tuple[tuple[int, ...], ...]]:
    """``SamplingParams.stop`` as single stop tokens and multi-token stop sequences.

    ``None`` is the tokenizer's EOS; ``[]`` is no stop at all; strings are encoded with the
    tokenizer (a string that encodes to one token is a stop token)."""
    if stop is None:
        eos = getattr(tokenizer, "eos_token_id", None)
        return (frozenset() if eos is None else frozenset({int(eos)})), ()
    items = [stop] if isinstance(stop, str) else list(stop)
    single: set[int] = set()
    multi: list[tuple[int, ...]] = []
    for item in items:
        if isinstance(item, str):
            ids = tuple(tokenizer.encode(item, add_special_tokens=False))
            if len(ids) == 1:
                single.add(ids[0])
            elif ids:
                multi.append(ids)
        else:
            single.add(int(item))
    return frozenset(single), tuple(multi)


def _gumbel(generator_seed: int, n: int, steps: int, vocab: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(generator_seed)
    u = torch.rand((n, steps, vocab), generator=gen, dtype=torch.float32)
    return -torch.log(-torch.log(u.clamp_(min=1e-20, max=1.0 - 1e-7)))


def _filter_logits(scaled: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Mask (to -inf) tokens outside each row's top-k / top-p set."""
    vocab = scaled.shape[-1]
    sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
    ranks = torch.arange(vocab, device=scaled.device).expand_as(sorted_logits)
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, vocab)).unsqueeze(-1)
    drop = ranks >= k
    probs = torch.softmax(sorted_logits, dim=-1)
    before = probs.cumsum(-1) - probs  # mass strictly before each token
    drop |= before >= top_p.unsqueeze(-1)
    drop[:, 0] = False
    mask = torch.zeros_like(drop).scatter(-1, order, drop)
    return scaled.masked_fill(mask, float("-inf"))


@torch.no_grad()
def run_generation(model: Any, requests: Sequence[SampleRequest], pad_id: int, vocab: int) -> None:
    """Generate every request's samples and resolve its future.

    Prompt logprobs of every request that asks for them come from one batched forward pass. A request
    of the ``compute_logprobs`` shape (prompt logprobs and ``max_tokens == 1``) needs no decoding: its one
    sampled token is drawn from the same pass's last-position logits, exactly as the decoder's first
    step would draw it (same temperature, top-k/top-p and noise)."""
    want_prompt = [r for r in requests if r.include_prompt_logprobs]
    single = [r for r in want_prompt if r.max_tokens == 1]
    single_ids = {id(r) for r in single}
    prompt_lps: dict[int, list[float | None]] = {}
    last_logits: dict[int, torch.Tensor] = {}
    if want_prompt:
        lps, lasts = _prompt_forward(model, [r.prompt for r in want_prompt], pad_id)
        for r, lp, last in zip(want_prompt, lps, lasts, strict=True):
            prompt_lps[id(r)] = lp
            last_logits[id(r)] = last
    rows: list[_Row] = []
    for req in requests:
        noise = None
        if req.temperature > 0 and req.max_tokens > 0:
            noise_all = _gumbel(req.generator_seed, req.num_samples, req.max_tokens, vocab)
        for i in range(req.num_samples):
            if req.temperature > 0 and req.max_tokens > 0:
                noise = noise_all[i]
            rows.append(_Row(request=req, index=i, noise=noise))
    decode = [r for r in rows if id(r.request) not in single_ids]
    first = [r for r in rows if id(r.request) in single_ids]
    if first:
        _first_token(first, torch.stack([last_logits[id(r.request)] for r in first]))
    order = sorted(range(len(decode)), key=lambda i: len(decode[i].request.prompt))
    for start in range(0, len(order), MAX_BATCH_ROWS):
        _decode_batch(model, [decode[i] for i in order[start : start + MAX_BATCH_ROWS]], pad_id)
    by_request: dict[int, list[_Row]] = {}
    for row in rows:
        by_request.setdefault(id(row.request), []).append(row)
    for req in requests:
        seqs = [
            types.SampledSequence(
                stop_reason=row.stop_reason or "length",
                sequence_id=f"{req.id_prefix}-{row.index}",
                tokens_np=np.asarray(row.tokens, dtype=np.int32),
                logprobs_np=np.asarray(row.logprobs, dtype=np.float32),
            )
            for row in by_request[id(req)]
        ]
        prompt_lp = None
        if req.include_prompt_logprobs:
            lps = list(prompt_lps[id(req)])
            if req.prompt_logprobs_last_n is not None:
                cut = len(lps) - int(req.prompt_logprobs_last_n)
                lps = [None] * cut + lps[cut:]
            prompt_lp = np.asarray([math.nan if v is None else v for v in lps], dtype=np.float32)
        req.future.set_result(types.SampleResponse(sequences=seqs, prompt_logprobs_np=prompt_lp))


def _select(
    logits: torch.Tensor,
    greedy: torch.Tensor,
    safe_temps: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    needs_filter: bool,
    noise: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decoding step: the chosen tokens (argmax when greedy, else the Gumbel-max draw from the
    tempered, top-k/top-p filtered distribution) and their logprobs under the model's distribution."""
    logp = torch.log_softmax(logits, dim=-1)
    scaled = logits / safe_temps
    if needs_filter:
        scaled = _filter_logits(scaled, top_k, top_p)
    choice = torch.where(greedy, logits.argmax(-1), (scaled + noise).argmax(-1))
    return choice, logp.gather(-1, choice.unsqueeze(-1)).squeeze(-1)


def _sampling_tensors(rows: list[_Row], device: Any, dtype: torch.dtype):
    temps = torch.tensor([r.request.temperature for r in rows], dtype=torch.float64, device=device)
    greedy = temps <= 0
    safe_temps = torch.where(greedy, torch.ones_like(temps), temps).unsqueeze(-1).to(dtype)
    top_k = torch.tensor([r.request.top_k for r in rows], dtype=torch.long, device=device)
    top_p = torch.tensor([r.request.top_p for r in rows], dtype=torch.float32, device=device).to(dtype)
    needs_filter = bool(((top_k > 0) | (top_p < 1.0)).any())
    return greedy, safe_temps, top_k, top_p, needs_filter


def _row_noise(rows: list[_Row], step: int, vocab: int, device: Any, dtype: torch.dtype) -> torch.Tensor:
    zero = torch.zeros(vocab)  # noise is drawn on the CPU (device-independent samples)
    noise = torch.stack(
        [r.noise[step] if (r.noise is not None and step < r.noise.shape[0]) else zero for r in rows]
    )
    return noise.to(device=device, dtype=dtype)


def _first_token(rows: list[_Row], logits: torch.Tensor) -> None:
    """The single decoding step of one-token requests, from their prompts' last-position logits."""
    greedy, safe_temps, top_k, top_p, needs_filter = _sampling_tensors(rows, logits.device, logits.dtype)
    noise = _row_noise(rows, 0, logits.shape[-1], logits.device, logits.dtype)
    choice, chosen_lp = _select(logits, greedy, safe_temps, top_k, top_p, needs_filter, noise)
    for r, tok, lp in zip(rows, choice.tolist(), chosen_lp.tolist(), strict=True):
        r.tokens.append(tok)
        r.logprobs.append(lp)
        req = r.request
        stop = tok in req.stop_tokens or any(s == (tok,) for s in req.stop_sequences)
        r.stop_reason = "stop" if stop else "length"


def _decode_batch(model: Any, rows: list[_Row], pad_id: int) -> None:
    n = len(rows)
    width = max(len(r.request.prompt) for r in rows)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    attn = torch.zeros((n, width), dtype=torch.long)
    for i, r in enumerate(rows):
        p = r.request.prompt
        ids[i, width - len(p) :] = torch.as_tensor(p, dtype=torch.long)
        attn[i, width - len(p) :] = 1
    device = next(model.parameters()).device
    ids, attn = ids.to(device), attn.to(device)
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    limits = [r.request.max_tokens for r in rows]
    steps = max(limits)
    active = [lim > 0 for lim in limits]
    for i, r in enumerate(rows):
        if limits[i] <= 0:
            r.stop_reason = "length"
    if steps <= 0:
        return
    out = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True, logits_to_keep=1)
    cache = out.past_key_values
    logits = out.logits[:, -1, :]
    last_pos = positions[:, -1]
    greedy, safe_temps, top_k, top_p, needs_filter = _sampling_tensors(rows, device, logits.dtype)
    for step in range(steps):
        noise = _row_noise(rows, step, logits.shape[-1], device, logits.dtype)
        choice, chosen_lp = _select(logits, greedy, safe_temps, top_k, top_p, needs_filter, noise)
        choice_list = choice.tolist()
        lp_list = chosen_lp.tolist()
        for i, r in enumerate(rows):
            if not active[i]:
                continue
            tok = choice_list[i]
            r.tokens.append(tok)
            r.logprobs.append(lp_list[i])
            req = r.request
            if tok in req.stop_tokens or any(
                len(r.tokens) >= len(s) and tuple(r.tokens[-len(s) :]) == s for s in req.stop_sequences
            ):
                r.stop_reason = "stop"
                active[i] = False
            elif len(r.tokens) >= limits[i]:
                r.stop_reason = "length"
                active[i] = False
        if not any(active) or step == steps - 1:
            break
        attn = torch.cat([attn, torch.ones((n, 1), dtype=torch.long, device=device)], dim=1)
        last_pos = last_pos + 1
        out = model(
            input_ids=choice.unsqueeze(-1),
            attention_mask=attn,
            position_ids=last_pos.unsqueeze(-1),
            past_key_values=cache,
            use_cache=True,
        )
        cache = out.past_key_values
        logits = out.logits[:, -1, :]


@torch.no_grad()
def prompt_logprobs(model: Any, prompts: Sequence[Sequence[int]], pad_id: int) -> list[list[float | None]]:
    """``[None, logp(t1 | t0), logp(t2 | t0 t1), ...]`` for each prompt (right-padded batches)."""
    return _prompt_forward(model, prompts, pad_id)[0]


@torch.no_grad()
def _prompt_forward(
    model: Any, prompts: Sequence[Sequence[int]], pad_id: int
) -> tuple[list[list[float | None]], list[torch.Tensor]]:
    """Each prompt's logprobs (as ``prompt_logprobs``) and its last position's next-token logits."""
    results: list[list[float | None]] = [[] for _ in prompts]
    lasts: list[torch.Tensor] = [torch.empty(0) for _ in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    for start in range(0, len(order), MAX_BATCH_ROWS):
        chunk = order[start : start + MAX_BATCH_ROWS]
        width = max(len(prompts[i]) for i in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        for j, i in enumerate(chunk):
            ids[j, : len(prompts[i])] = torch.as_tensor(prompts[i], dtype=torch.long)
        ids = ids.to(next(model.parameters()).device)
        logits = model(input_ids=ids, use_cache=False).logits
        logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        for j, i in enumerate(chunk):
            n = len(prompts[i])
            results[i] = [None] + logp[j, : n - 1].tolist()
            lasts[i] = logits[j, n - 1]
    return results, lasts
