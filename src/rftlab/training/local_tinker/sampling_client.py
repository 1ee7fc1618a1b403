"""``tinker.SamplingClient`` on a weights snapshot of a local model (``LocalSamplingClient``), with the
SDK's call-time checks of its arguments.

Requests are queued on the snapshot's host and run batched at the first ``.result()`` (see ``host``
and ``futures``); ``compute_logprobs`` with ``prompt_logprobs_last_n`` trims its answer
(``_TrimmedFuture``). The semantics are the ``clients`` module docstring's.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from tinker import types

from .engine import (
    LogprobRequest,
    SampleRequest,
    check_prompt_tokens,
    check_sampling_params,
    mix_seed,
    resolve_stop,
)
from .errors import ParameterError
from .futures import LocalFuture
from .host import _Host, _Snapshot
from .losses import model_input_tokens


class LocalSamplingClient:
    """``tinker.SamplingClient`` on a weights snapshot of a local model."""

    def __init__(self, host: _Host, snapshot: _Snapshot, seed: int, base_model: str) -> None:
        self._host = host
        self._snapshot = snapshot
        self._base_model = base_model
        self._seed = int(seed)
        self._counter = itertools.count()

    @property
    def name(self) -> str:
        """The snapshot's name (a sampler's weights: ``<model_id>-s<n>``, or the checkpoint path)."""
        return self._snapshot.name

    def default_seed(self, index: int) -> int:
        """The generator seed of the ``index``-th request that gives no ``SamplingParams.seed``:
        ``mix_seed(sampler seed, index)``, O(1) for any index (the HTTP service passes the SDK's
        ``seq_id``, about 1e9 for a sampler made by ``create_sampling_client``), so results do not depend
        on arrival order."""
        return mix_seed(self._seed, index)

    def sample(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        topk_prompt_logprobs: int = 0,
        topk_sample_logprobs: int = 0,
        target_prompt_logprobs: types.TensorData | None = None,
        prompt_alt_tokens_k: int = 0,
        prompt_logprobs_last_n: int | None = None,
    ) -> LocalFuture[types.SampleResponse]:
        # the SDK's own call-time checks
        if prompt_alt_tokens_k < 0:
            raise ValueError(f"prompt_alt_tokens_k must be 0 or greater, got {prompt_alt_tokens_k}")
        check_prompt_logprobs_last_n(prompt_logprobs_last_n, include_prompt_logprobs)
        fut, _ = self.submit(
            prompt,
            num_samples,
            sampling_params,
            include_prompt_logprobs,
            prompt_logprobs_last_n=prompt_logprobs_last_n,
            topk_prompt_logprobs=topk_prompt_logprobs,
            topk_sample_logprobs=topk_sample_logprobs,
            target_prompt_logprobs=target_prompt_logprobs,
            prompt_alt_tokens_k=prompt_alt_tokens_k,
        )
        return fut

    def submit(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        sampling_params: types.SamplingParams,
        include_prompt_logprobs: bool = False,
        *,
        prompt_logprobs_last_n: int | None = None,
        index: int | None = None,
        first_row: int = 0,
        **unsupported: Any,
    ) -> tuple[LocalFuture[types.SampleResponse], list[str]]:
        """Queue one sampling request; returns its future and the ``sequence_id`` of each sample.
        ``index`` numbers the request within this sampler (default: submission order); the HTTP service
        passes the SDK's ``seq_id`` so a request's default seed does not depend on arrival order.
        ``first_row`` numbers the request's samples from ``first_row`` (their noise streams and their
        ``sequence_id``s ``<prefix>-<first_row + i>``): pieces of one request submitted with the same
        ``index`` and seed, with ``first_row`` 0, n1, n1 + n2, ..., give the unsplit request's samples."""
        n = next(self._counter) if index is None else int(index)
        fut: LocalFuture[types.SampleResponse] = LocalFuture(flush=self._host.flush)
        ids: list[str] = []
        try:
            if any(v not in (None, 0, False) for v in unsupported.values()):
                raise ValueError(
                    "top-k logprobs, target prompt logprobs and prompt alternative tokens are not "
                    "supported by the local backend"
                )
            if isinstance(first_row, bool) or not isinstance(first_row, int) or first_row < 0:
                raise ParameterError(f"first_row must be an integer >= 0, got {first_row!r}")
            req = self._make_request(
                prompt, num_samples, sampling_params, include_prompt_logprobs, fut, n, prompt_logprobs_last_n
            )
            req.first_row = first_row
            ids = [f"{req.id_prefix}-{first_row + i}" for i in range(req.num_samples)]
        except Exception as exc:
            return LocalFuture.failed(exc), ids
        with self._host.lock:
            self._host.pending.append((self._snapshot, req))
        return fut, ids

    def _make_request(
        self,
        prompt: types.ModelInput,
        num_samples: int,
        params: types.SamplingParams,
        include_prompt_logprobs: bool,
        fut: LocalFuture[types.SampleResponse],
        n: int,
        prompt_logprobs_last_n: int | None = None,
    ) -> SampleRequest:
        tokens = model_input_tokens(prompt, "prompt")
        if not tokens:
            raise ValueError("prompt is empty")
        if num_samples < 1:
            raise ParameterError(f"num_samples must be >= 1, got {num_samples}")
        check_sampling_params(params)
        check_prompt_tokens(tokens, self._host.vocab)
        if prompt_logprobs_last_n is not None and not 1 <= prompt_logprobs_last_n <= len(tokens) - 1:
            raise ValueError(f"prompt_logprobs_last_n must be in [1, {len(tokens) - 1}] for this prompt")
        room = self._host.max_positions - len(tokens)
        if room <= 0:
            raise ValueError(
                f"prompt of {len(tokens)} tokens leaves no room in the context of {self._host.max_positions}"
            )
        max_tokens = room if params.max_tokens is None else min(int(params.max_tokens), room)
        stop_tokens, stop_strings = resolve_stop(params.stop, self._host.tokenizer)
        seed = self.default_seed(n) if params.seed is None else int(params.seed)
        return SampleRequest(
            prompt=tokens,
            num_samples=int(num_samples),
            max_tokens=max_tokens,
            temperature=float(params.temperature),
            top_k=int(params.top_k),
            top_p=float(params.top_p),
            stop_tokens=stop_tokens,
            stop_strings=stop_strings,
            generator_seed=seed,
            include_prompt_logprobs=include_prompt_logprobs,
            future=fut,
            id_prefix=f"{self._snapshot.name}-{n}",
            prompt_logprobs_last_n=prompt_logprobs_last_n,
            sampled_logprobs=self._host.sampled_logprobs,
        )

    def compute_logprobs(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> LocalFuture[list[float | None]]:
        check_prompt_logprobs_last_n(prompt_logprobs_last_n, True)
        fut: LocalFuture[list[float | None]] = LocalFuture(flush=self._host.flush)
        try:
            tokens = model_input_tokens(prompt, "prompt")
            if not tokens:
                raise ValueError("prompt is empty")
            check_prompt_tokens(tokens, self._host.vocab)
        except Exception as exc:
            return LocalFuture.failed(exc)
        with self._host.lock:
            self._host.pending.append((self._snapshot, LogprobRequest(prompt=tokens, future=fut)))
        if prompt_logprobs_last_n is None:
            return fut
        n = int(prompt_logprobs_last_n)
        if not 1 <= n <= len(tokens) - 1:
            return LocalFuture.failed(ValueError(f"prompt_logprobs_last_n must be in [1, {len(tokens) - 1}]"))
        return _TrimmedFuture(fut, n)

    # the SDK's (deprecated) async variants: they return what the SDK's do
    async def sample_async(self, *args: Any, **kwargs: Any) -> types.SampleResponse:
        """Queue the request, then yield to the event loop once before running the queue: the requests
        other coroutines of the loop make meanwhile (a group's candidates, a batch's groups) join the
        same flush and are sampled as one batch, as the HTTP service batches concurrent requests."""
        future = self.sample(*args, **kwargs)
        await asyncio.sleep(0)
        return future.result()

    async def compute_logprobs_async(
        self, prompt: types.ModelInput, prompt_logprobs_last_n: int | None = None
    ) -> list[float | None]:
        return await self.compute_logprobs(prompt, prompt_logprobs_last_n)

    def get_tokenizer(self) -> Any:
        return self._host.tokenizer

    def get_base_model(self) -> str:
        return self._base_model

    async def get_base_model_async(self) -> str:
        return self._base_model


def check_prompt_logprobs_last_n(last_n: int | None, include_prompt_logprobs: bool) -> None:
    """The SDK's call-time check of ``prompt_logprobs_last_n`` (the prompt-length bound is the server's)."""
    if last_n is None:
        return
    if last_n < 1:
        raise ValueError(f"prompt_logprobs_last_n must be 1 or greater, got {last_n}")
    if not include_prompt_logprobs:
        raise ValueError("prompt_logprobs_last_n applies to prompt logprobs; set include_prompt_logprobs")


class _TrimmedFuture(LocalFuture[list[float | None]]):
    """``compute_logprobs(..., prompt_logprobs_last_n=n)``: entries before the last ``n`` are None."""

    def __init__(self, inner: LocalFuture[list[float | None]], last_n: int) -> None:
        super().__init__()
        self._inner, self._last_n = inner, last_n

    def _ensure(self) -> None:
        if not self._future.done():
            try:
                full = self._inner.result()
                self.set_result([None] * (len(full) - self._last_n) + list(full[-self._last_n :]))
            except Exception as exc:
                self.set_exception(exc)
