"""Batched sampling with a KV cache, and prompt logprobs, for the local backend.

Requests are queued by the sampling clients and run together at the first ``.result()``: rows of
all queued requests are left-padded into micro-batches, prefilled once and decoded token by token
with the model's KV cache.

**Noise.** Sampling is Gumbel-max: at each decoding step a row draws ``vocab`` uniforms ``u`` from its own
generator and takes ``argmax(filtered(logits / T) - log(-log(u)))``. A request's rows are numbered
``first_row, first_row + 1, ...`` (``SampleRequest.first_row``, default 0); row ``r`` seeds its generator with
the request's seed (``SamplingParams.seed``, else the sampling client's ``default_seed``) when ``r == 0`` and
with ``mix_seed(seed, r)`` otherwise, and draws one block of ``vocab`` uniforms per step it decodes, in order.
Hence a request's tokens do not depend on what else is in the batch (up to float rounding from the batch's
padding, which could only flip a near-exact tie); a request split by ``first_row`` into pieces gives, piece by
piece, the unsplit request's samples; and row 0 gets exactly the noise of the former scheme, which drew a
``(num_samples, max_tokens, vocab)`` block up front (row 0 at step ``t`` took draws ``t * vocab`` to
``(t + 1) * vocab - 1``), so a one-sample request with an explicit seed samples what it sampled before. Noise
is drawn step by step, so its memory grows with rows × vocab, not with rows × max_tokens × vocab. The generator
lives on the model's device: a CPU generator on the CPU, a CUDA generator on a GPU. The two streams differ,
so the same seed samples different tokens on a GPU than on the CPU (each is reproducible on its own device).

**Logprobs.** Reported for sampled tokens, by ``SampleRequest.sampled_logprobs``: ``"model"`` (the default)
gives the model's distribution (``log_softmax`` of the logits, before temperature, top-k or top-p), the same
quantity ``compute_logprobs`` and the training client's ``forward`` return for those tokens; ``"sampling"``
gives the distribution actually sampled from (tempered, top-k/top-p filtered; 0 for a greedy row, whose
choice is certain). docs/platforms.md §3.12 gives the evidence on what the hosted service returns.

**Stops.** Integer stops, the EOS (``stop=None``) and a stop string that is a single added (special) token of
the tokenizer, such as ``<|im_end|>``, end a row when that token id is generated. Any other stop string is
matched on the text: the row's generated tokens are decoded incrementally (only rows with string stops
decode) and the row ends as soon as the text contains the string; its tokens end with the token that
completed it, even when the string ends inside that token or spans tokens tokenised differently.

**Refusals.** A request whose logits are not finite at a sampling step (NaN or infinite weights or
activations) fails with ``NonFiniteError``; it never returns an arbitrary token. ``check_sampling_params``
holds the ranges the SDK documents for ``SamplingParams``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tinker import types

from .errors import NonFiniteError, ParameterError
from .futures import LocalFuture

MAX_BATCH_ROWS = 256
"""Rows per decode micro-batch (bounds KV-cache and logits memory)."""

SEED_LIMIT = 2**64
"""Seeds are unsigned 64-bit (the SDK's protobuf ``SamplingParams.seed`` is a ``uint64``)."""

SAMPLED_LOGPROBS = ("model", "sampling")
"""What sampled tokens' logprobs are computed under (see the module docstring)."""

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def mix_seed(seed: int, index: int) -> int:
    """A seed in ``[0, 2**63)`` for item ``index`` of the stream of ``seed``, in O(1): splitmix64 of the
    seed, xor the index, splitmix64 again (both taken modulo 2**64). Deterministic; distinct indices and
    distinct seeds give unrelated values. Used for a sampler's default request seeds and for the noise
    generators of rows 1, 2, ... of a request."""
    return _splitmix64(_splitmix64(int(seed) & _MASK64) ^ (int(index) & _MASK64)) >> 1


def check_sampling_params(params: types.SamplingParams) -> None:
    """Refuse (``ParameterError``, naming the field) values outside what ``tinker.types.SamplingParams``
    documents: ``temperature`` finite and >= 0 (0 is greedy); ``top_p`` in (0, 1]; ``top_k`` -1 (the SDK's
    "no limit"; 0 is read the same way) or a positive count; ``max_tokens`` >= 1 when given; ``seed`` an
    unsigned 64-bit integer when given."""
    t = params.temperature
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise ParameterError(f"SamplingParams.temperature must be a finite number >= 0, got {t!r}")
    p = params.top_p
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ParameterError(f"SamplingParams.top_p must be in (0, 1], got {p!r}")
    k = params.top_k
    if isinstance(k, bool) or not isinstance(k, int) or k < -1:
        raise ParameterError(f"SamplingParams.top_k must be -1 (no limit) or a positive integer, got {k!r}")
    m = params.max_tokens
    if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
        raise ParameterError(f"SamplingParams.max_tokens must be an integer >= 1 when given, got {m!r}")
    s = params.seed
    if s is not None and (isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < SEED_LIMIT):
        raise ParameterError(
            f"SamplingParams.seed must be an integer in [0, 2**64 - 1] when given, got {s!r}"
        )


def check_prompt_tokens(tokens: Sequence[int], vocab: int) -> None:
    """Refuse a prompt token id outside ``[0, vocab)`` (``ParameterError`` naming the first one)."""
    if tokens and 0 <= min(tokens) and max(tokens) < vocab:
        return
    for i, t in enumerate(tokens):
        if not 0 <= t < vocab:
            raise ParameterError(
                f"prompt token id {t} at position {i} is outside the vocabulary ({vocab} tokens)"
            )


@dataclass
class SampleRequest:
    prompt: list[int]
    num_samples: int
    max_tokens: int
    temperature: float
    top_k: int
    top_p: float
    stop_tokens: frozenset[int]
    stop_strings: tuple[str, ...]
    generator_seed: int
    include_prompt_logprobs: bool
    future: LocalFuture[types.SampleResponse]
    id_prefix: str
    prompt_logprobs_last_n: int | None = None
    first_row: int = 0
    """The request's rows are rows ``first_row .. first_row + num_samples - 1`` (noise seeds, sequence ids)."""
    sampled_logprobs: str = "model"
    """``"model"`` or ``"sampling"`` (see the module docstring)."""


@dataclass
class LogprobRequest:
    prompt: list[int]
    future: LocalFuture[list[float | None]]


class _StopText:
    """Incremental decode of one row's generated tokens, watched for stop strings. Each step decodes only
    a window of the last tokens (the text of ``tokens[prefix:]`` minus that of ``tokens[prefix:read]``), and
    waits while the text ends in an incomplete UTF-8 character."""

    def __init__(self, tokenizer: Any, stops: tuple[str, ...]) -> None:
        self.tokenizer = tokenizer
        self.stops = stops
        self.keep = max(len(s) for s in stops) - 1  # characters before the new text a match may start in
        self.tail = ""
        self.prefix = 0
        self.read = 0

    def _decode(self, tokens: list[int]) -> str:
        if not tokens:
            return ""
        return self.tokenizer.decode(tokens, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def push(self, tokens: list[int]) -> bool:
        """Whether the text of ``tokens`` (the row's tokens so far, one more than last call) contains a stop."""
        before = self._decode(tokens[self.prefix : self.read])
        now = self._decode(tokens[self.prefix :])
        if len(now) <= len(before) or now.endswith("\ufffd"):
            return False
        self.prefix, self.read = self.read, len(tokens)
        window = self.tail + now[len(before) :]
        self.tail = window[len(window) - self.keep :] if self.keep else ""
        return any(s in window for s in self.stops)


@dataclass
class _Row:
    request: SampleRequest
    index: int
    seed: int | None
    """The noise generator's seed (``None``: a greedy row, no noise)."""
    generator: torch.Generator | None = None
    stop_text: _StopText | None = None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stop_reason: types.StopReason | None = None

    def draw(self, vocab: int, device: Any) -> torch.Tensor:
        """The next ``vocab`` uniforms of this row's stream (its generator made on first use)."""
        if self.generator is None:
            assert self.seed is not None
            self.generator = torch.Generator(device=device).manual_seed(self.seed)
        return torch.rand(vocab, generator=self.generator, device=device, dtype=torch.float32)

    def stopped_by(self, tok: int) -> bool:
        """Whether the token just appended ends the row (a stop token, or a stop string now in the text)."""
        if tok in self.request.stop_tokens:
            return True
        return self.stop_text is not None and self.stop_text.push(self.tokens)


def row_seed(request_seed: int, row: int) -> int:
    """The noise generator seed of row ``row`` of a request: the request's seed for row 0, else
    ``mix_seed(request_seed, row)``."""
    return int(request_seed) if row == 0 else mix_seed(request_seed, row)


def resolve_stop(stop: Any, tokenizer: Any) -> tuple[frozenset[int], tuple[str, ...]]:
    """``SamplingParams.stop`` as stop token ids and stop strings matched on the decoded text.

    ``None`` is the tokenizer's EOS; ``[]`` is no stop at all; an integer is a token id; a string that
    encodes to one added (special) token of the tokenizer (``<|im_end|>``) is that token's id; any other
    non-empty string is matched on the text."""
    if stop is None:
        eos = getattr(tokenizer, "eos_token_id", None)
        return (frozenset() if eos is None else frozenset({int(eos)})), ()
    items = [stop] if isinstance(stop, str) else list(stop)
    added = set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    added |= set(getattr(tokenizer, "all_special_ids", []) or [])
    single: set[int] = set()
    strings: list[str] = []
    for item in items:
        if isinstance(item, str):
            if not item:
                continue
            ids = tokenizer.encode(item, add_special_tokens=False)
            if len(ids) == 1 and ids[0] in added:
                single.add(int(ids[0]))
            elif item not in strings:
                strings.append(item)
        else:
            single.add(int(item))
    return frozenset(single), tuple(strings)


def _gumbel(u: torch.Tensor) -> torch.Tensor:
    """Gumbel noise from uniforms (float32, in place on ``u``), exactly as the former up-front block."""
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


def _nonfinite(kind: str, row: _Row, step: int) -> NonFiniteError:
    return NonFiniteError(
        f"the model's logits are not finite (NaN or infinity) at {kind} step {step} of sample {row.index}: "
        "the weights or activations are NaN or overflowed, so nothing can be sampled"
    )


@torch.no_grad()
def run_generation(
    model: Any, requests: Sequence[SampleRequest], pad_id: int, vocab: int, tokenizer: Any = None
) -> None:
    """Generate every request's samples and resolve its future (a ``NonFiniteError`` for a request whose
    logits are not finite). ``tokenizer`` decodes the rows of requests with stop strings.

    Prompt logprobs of every request that asks for them come from one batched forward pass. A request
    of the ``compute_logprobs`` shape (prompt logprobs and ``max_tokens == 1``) needs no decoding: its one
    sampled token is drawn from the same pass's last-position logits, exactly as the decoder's first
    step would draw it (same temperature, top-k/top-p and noise)."""
    errors: dict[int, Exception] = {}
    want_prompt = [r for r in requests if r.include_prompt_logprobs]
    single = [r for r in want_prompt if r.max_tokens == 1]
    single_ids = {id(r) for r in single}
    prompt_lps: dict[int, list[float | None]] = {}
    last_logits: dict[int, torch.Tensor] = {}
    if want_prompt:
        lps, lasts = _prompt_forward(model, [r.prompt for r in want_prompt], pad_id)
        for r, lp, last in zip(want_prompt, lps, lasts, strict=True):
            prompt_lps[id(r)] = [None, *lp]
            last_logits[id(r)] = last
            if not all(math.isfinite(v) for v in lp):
                errors[id(r)] = NonFiniteError(
                    "the model's logits are not finite (NaN or infinity) on the prompt: its prompt "
                    "logprobs would be NaN, so the request is refused"
                )
    rows: list[_Row] = []
    for req in requests:
        if req.stop_strings and tokenizer is None:
            raise ValueError("stop strings need the tokenizer to decode the generated tokens")
        for i in range(req.num_samples):
            index = req.first_row + i
            seed = row_seed(req.generator_seed, index) if req.temperature > 0 and req.max_tokens > 0 else None
            stop_text = _StopText(tokenizer, req.stop_strings) if req.stop_strings else None
            rows.append(_Row(request=req, index=index, seed=seed, stop_text=stop_text))
    decode = [r for r in rows if id(r.request) not in single_ids and id(r.request) not in errors]
    first = [r for r in rows if id(r.request) in single_ids and id(r.request) not in errors]
    if first:
        _first_token(first, torch.stack([last_logits[id(r.request)] for r in first]), errors)
    order = sorted(range(len(decode)), key=lambda i: len(decode[i].request.prompt))
    for start in range(0, len(order), MAX_BATCH_ROWS):
        _decode_batch(model, [decode[i] for i in order[start : start + MAX_BATCH_ROWS]], pad_id, errors)
    by_request: dict[int, list[_Row]] = {}
    for row in rows:
        by_request.setdefault(id(row.request), []).append(row)
    for req in requests:
        if id(req) in errors:
            req.future.set_exception(errors[id(req)])
            continue
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
    tempered: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decoding step: the chosen tokens (argmax when greedy, else the Gumbel-max draw from the
    tempered, top-k/top-p filtered distribution) and their logprobs under the model's distribution, or,
    for the rows where ``tempered`` is set, under the distribution sampled from (0 when greedy)."""
    logp = torch.log_softmax(logits, dim=-1)
    scaled = logits / safe_temps
    if needs_filter:
        scaled = _filter_logits(scaled, top_k, top_p)
    choice = torch.where(greedy, logits.argmax(-1), (scaled + noise).argmax(-1))
    chosen = logp.gather(-1, choice.unsqueeze(-1)).squeeze(-1)
    if tempered is not None:
        sampled = torch.log_softmax(scaled, dim=-1).gather(-1, choice.unsqueeze(-1)).squeeze(-1)
        sampled = torch.where(greedy, torch.zeros_like(sampled), sampled)
        chosen = torch.where(tempered, sampled, chosen)
    return choice, chosen


def _sampling_tensors(rows: list[_Row], device: Any, dtype: torch.dtype):
    temps = torch.tensor([r.request.temperature for r in rows], dtype=torch.float64, device=device)
    greedy = temps <= 0
    safe_temps = torch.where(greedy, torch.ones_like(temps), temps).unsqueeze(-1).to(dtype)
    top_k = torch.tensor([r.request.top_k for r in rows], dtype=torch.long, device=device)
    top_p = torch.tensor([r.request.top_p for r in rows], dtype=torch.float32, device=device).to(dtype)
    needs_filter = bool(((top_k > 0) | (top_p < 1.0)).any())
    tempered = None
    if any(r.request.sampled_logprobs == "sampling" for r in rows):
        flags = [r.request.sampled_logprobs == "sampling" for r in rows]
        tempered = torch.tensor(flags, dtype=torch.bool, device=device)
    return greedy, safe_temps, top_k, top_p, needs_filter, tempered


def _row_noise(
    rows: list[_Row], active: list[bool], vocab: int, device: Any, dtype: torch.dtype
) -> torch.Tensor:
    """This step's Gumbel noise: the next ``vocab`` draws of each active sampling row; zeros elsewhere."""
    idx = [i for i, r in enumerate(rows) if active[i] and r.seed is not None]
    if not idx:
        return torch.zeros((len(rows), vocab), dtype=dtype, device=device)
    noise = _gumbel(torch.stack([rows[i].draw(vocab, device) for i in idx])).to(dtype)
    if len(idx) == len(rows):
        return noise
    full = torch.zeros((len(rows), vocab), dtype=dtype, device=device)
    full[torch.as_tensor(idx, device=device)] = noise
    return full


def _finite_rows(logits: torch.Tensor) -> list[bool]:
    return torch.isfinite(logits).all(dim=-1).tolist()


def _first_token(rows: list[_Row], logits: torch.Tensor, errors: dict[int, Exception]) -> None:
    """The single decoding step of one-token requests, from their prompts' last-position logits."""
    greedy, safe_temps, top_k, top_p, needs_filter, tempered = _sampling_tensors(
        rows, logits.device, logits.dtype
    )
    noise = _row_noise(rows, [True] * len(rows), logits.shape[-1], logits.device, logits.dtype)
    choice, chosen_lp = _select(logits, greedy, safe_temps, top_k, top_p, needs_filter, noise, tempered)
    finite = _finite_rows(logits)
    for r, tok, lp, ok in zip(rows, choice.tolist(), chosen_lp.tolist(), finite, strict=True):
        if not ok:
            errors.setdefault(id(r.request), _nonfinite("sampling", r, 0))
            continue
        r.tokens.append(tok)
        r.logprobs.append(lp)
        r.stop_reason = "stop" if r.stopped_by(tok) else "length"
        r.generator = None


def _decode_batch(model: Any, rows: list[_Row], pad_id: int, errors: dict[int, Exception]) -> None:
    """Decode ``rows`` together (left-padded prompts, one KV cache). A row leaves the batch, cache and
    sampling tensors included, at the step it stops, so the remaining steps compute only live rows."""
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
    for i, r in enumerate(rows):
        if limits[i] <= 0:
            r.stop_reason = "length"
    if max(limits) <= 0:
        return
    out = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True, logits_to_keep=1)
    batch = _LiveBatch(rows, limits, out.past_key_values, attn, positions[:, -1], device)
    try:
        logits = out.logits[:, -1, :]
        while True:
            choice = batch.step(logits, errors)
            if not batch.prune(choice):
                break
            out = model(
                input_ids=batch.choice.unsqueeze(-1),
                attention_mask=batch.attn,
                position_ids=batch.last_pos.unsqueeze(-1),
                past_key_values=batch.cache,
                use_cache=True,
            )
            batch.cache = out.past_key_values
            logits = out.logits[:, -1, :]
    finally:
        for r in rows:
            r.generator = None  # a finished row's stream is not needed again


class _LiveBatch:
    """The rows of one decode batch still generating, and every per-row tensor kept in their order."""

    def __init__(self, rows: list[_Row], limits: list[int], cache: Any, attn, last_pos, device: Any):
        keep = [i for i, lim in enumerate(limits) if lim > 0]
        self.rows, self.limits, self.device = [rows[i] for i in keep], [limits[i] for i in keep], device
        self.cache, self.attn, self.last_pos = cache, attn, last_pos
        self.choice = torch.empty(0, dtype=torch.long)
        self._sampling: tuple | None = None
        if len(keep) < len(rows):
            self._select_rows(torch.as_tensor(keep, device=device))

    def step(self, logits: torch.Tensor, errors: dict[int, Exception]) -> torch.Tensor:
        """Choose each live row's next token and record it (a row stops on a stop token or its limit)."""
        if self._sampling is None:
            self._sampling = _sampling_tensors(self.rows, self.device, logits.dtype)
        greedy, safe_temps, top_k, top_p, needs_filter, tempered = self._sampling
        live = [id(r.request) not in errors for r in self.rows]  # another row of the request failed
        noise = _row_noise(self.rows, live, logits.shape[-1], self.device, logits.dtype)
        choice, chosen_lp = _select(logits, greedy, safe_temps, top_k, top_p, needs_filter, noise, tempered)
        finite = _finite_rows(logits)
        self.active = live
        for j, (r, tok, lp) in enumerate(zip(self.rows, choice.tolist(), chosen_lp.tolist(), strict=True)):
            if not live[j]:
                continue
            if not finite[j]:
                errors.setdefault(id(r.request), _nonfinite("sampling", r, len(r.tokens)))
                self.active[j] = False
                continue
            r.tokens.append(tok)
            r.logprobs.append(lp)
            if r.stopped_by(tok):
                r.stop_reason = "stop"
                self.active[j] = False
            elif len(r.tokens) >= self.limits[j]:
                r.stop_reason = "length"
                self.active[j] = False
        return choice

    def prune(self, choice: torch.Tensor) -> bool:
        """Drop the rows that stopped; extend the mask and positions by one. ``False`` when none is left."""
        keep = [j for j, a in enumerate(self.active) if a]
        if not keep:
            return False
        self.choice = choice
        if len(keep) < len(self.rows):
            index = torch.as_tensor(keep, device=self.device)
            self.rows = [self.rows[j] for j in keep]
            self.limits = [self.limits[j] for j in keep]
            self.choice = choice[index]
            self._select_rows(index)
        n = len(self.rows)
        self.attn = torch.cat([self.attn, torch.ones((n, 1), dtype=torch.long, device=self.device)], dim=1)
        self.last_pos = self.last_pos + 1
        return True

    def _select_rows(self, index: torch.Tensor) -> None:
        self.attn, self.last_pos = self.attn[index], self.last_pos[index]
        self.cache.batch_select_indices(index)
        if self._sampling is not None:
            greedy, safe_temps, top_k, top_p, needs_filter, tempered = self._sampling
            tempered = None if tempered is None else tempered[index]
            self._sampling = (
                greedy[index],
                safe_temps[index],
                top_k[index],
                top_p[index],
                needs_filter,
                tempered,
            )


@torch.no_grad()
def run_logprobs(model: Any, requests: Sequence[LogprobRequest], pad_id: int) -> None:
    """Resolve each ``compute_logprobs`` request with its prompt logprobs (``NonFiniteError`` when they are
    not finite: NaN would read as "not computed" on the wire)."""
    lps = _prompt_forward(model, [r.prompt for r in requests], pad_id)[0]
    for r, lp in zip(requests, lps, strict=True):
        if all(math.isfinite(v) for v in lp):
            r.future.set_result([None, *lp])
        else:
            r.future.set_exception(
                NonFiniteError(
                    "the model's logits are not finite (NaN or infinity) on the prompt: its logprobs "
                    "would be NaN, so the request is refused"
                )
            )


@torch.no_grad()
def prompt_logprobs(model: Any, prompts: Sequence[Sequence[int]], pad_id: int) -> list[list[float | None]]:
    """``[None, logp(t1 | t0), logp(t2 | t0 t1), ...]`` for each prompt (right-padded batches)."""
    return [[None, *lp] for lp in _prompt_forward(model, prompts, pad_id)[0]]


@torch.no_grad()
def _prompt_forward(
    model: Any, prompts: Sequence[Sequence[int]], pad_id: int
) -> tuple[list[list[float]], list[torch.Tensor]]:
    """Each prompt's logprobs from its second token on (``prompt_logprobs`` without the leading ``None``)
    and its last position's next-token logits."""
    results: list[list[float]] = [[] for _ in prompts]
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
            results[i] = logp[j, : n - 1].tolist()
            lasts[i] = logits[j, n - 1]
    return results, lasts
