"""Futures with the SDK's interface (``tinker.APIFuture``): ``.result(timeout)``, ``await``,
``.result_async()`` and ``.future()``.

A ``LocalFuture`` is either already resolved (training calls run eagerly, in submission order) or
lazy: sampling requests are queued and the first ``.result()`` on any of them runs every queued
request in one batched generation, which is what makes per-prompt ``sample`` calls cheap on CPU.
A ``_ClientFuture`` is the future of a client that the SDK also lets callers use as the client.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from concurrent.futures import Future as ConcurrentFuture
from typing import Any, Generic, TypeVar

from tinker import APIFuture

T = TypeVar("T")


class LocalFuture(APIFuture[T], Generic[T]):
    """A future resolved locally. ``flush`` (if given) is called before reading a pending value."""

    def __init__(self, flush: Callable[[], None] | None = None) -> None:
        self._future: ConcurrentFuture[T] = ConcurrentFuture()
        self._flush = flush

    @classmethod
    def done(cls, value: T) -> LocalFuture[T]:
        fut: LocalFuture[T] = cls()
        fut.set_result(value)
        return fut

    @classmethod
    def failed(cls, exc: BaseException) -> LocalFuture[Any]:
        fut: LocalFuture[Any] = cls()
        fut.set_exception(exc)
        return fut

    @classmethod
    def run(cls, fn: Callable[[], T]) -> LocalFuture[T]:
        """Run ``fn`` now; its value or its exception is delivered by ``.result()`` (as the SDK does)."""
        try:
            return cls.done(fn())
        except Exception as exc:  # delivered to the caller at .result(), like a server error
            return cls.failed(exc)

    def set_result(self, value: T) -> None:
        self._future.set_result(value)

    def set_exception(self, exc: BaseException) -> None:
        self._future.set_exception(exc)

    def _ensure(self) -> None:
        if not self._future.done() and self._flush is not None:
            self._flush()
        if not self._future.done():
            raise RuntimeError("local future was never resolved (its request was lost)")

    def result(self, timeout: float | None = None) -> T:
        self._ensure()
        return self._future.result(timeout)

    async def result_async(self, timeout: float | None = None) -> T:
        return self.result(timeout)

    def future(self) -> ConcurrentFuture[T]:
        self._ensure()
        return self._future

    def done_now(self) -> bool:
        """Whether the value is already available without running queued work."""
        return self._future.done()


class _ClientFuture(LocalFuture[Any]):
    """A future of a client that may also be used, deprecated, as the client (SDK back-compat)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        warnings.warn(
            "Using the future as the client is deprecated; call .result() on it first",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(self.result(), name)


def _client_future(fn: Any) -> _ClientFuture:
    fut = _ClientFuture()
    try:
        fut.set_result(fn())
    except Exception as exc:
        fut.set_exception(exc)
    return fut
