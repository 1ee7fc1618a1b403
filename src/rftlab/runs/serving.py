"""What the project's local services (``rftlab serve tinker``, ``rftlab serve fireworks``) share: a JSON-lines
log, the loopback check, and SIGINT/SIGTERM as a graceful uvicorn shutdown.

    log = Log(level="info"); log.always("info", "listening", url=url)
    is_loopback("127.0.0.1")                      # True; a service refuses any other host
    with stop_on_signals(uvicorn_server, log): ...  # the first signal stops, a second one forces
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, TextIO


class Log:
    """Structured logs: one JSON object per line (``ts``, ``level``, ``event`` and fields). Callers pass ids
    and numbers only, never request headers or bodies, so no credential can reach it."""

    LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}

    def __init__(self, stream: TextIO | None = None, level: str = "info") -> None:
        if level not in self.LEVELS:
            raise ValueError(f"log level must be one of {', '.join(self.LEVELS)}")
        self.stream = stream if stream is not None else sys.stderr
        self.threshold = self.LEVELS[level]
        self._lock = threading.Lock()

    def __call__(self, level: str, event: str, **fields: Any) -> None:
        """Write one record at ``level`` when the level reaches the threshold."""
        if self.LEVELS[level] >= self.threshold:
            self.always(level, event, **fields)

    def always(self, level: str, event: str, **fields: Any) -> None:
        """Write one record whatever the threshold: e.g. the ``listening`` line that tells a supervising
        process where the server is."""
        if level not in self.LEVELS:
            raise KeyError(level)
        record = {"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), "level": level, "event": event}
        record.update(fields)
        line = json.dumps(record, default=str, separators=(",", ":"))
        with self._lock, contextlib.suppress(ValueError):  # a closed stream (interpreter shutdown)
            self.stream.write(line + "\n")
            self.stream.flush()


LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface only."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def stop_on_signals(server: Any, log: Log) -> Iterator[None]:
    """SIGINT/SIGTERM ask a uvicorn server for a graceful shutdown (a second one forces it); outside the
    main thread (a test's server thread) signals are left alone."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: Any) -> None:
        log("info", "shutdown_requested", signal=signal.Signals(signum).name)
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
