"""The viewer's server: eval-protocol's log-viewer web app, served from this process over a lazy row index.

``rftlab view`` used to copy every row into an eval-protocol SQLite store in a temporary folder, then start
eval-protocol's ``LogsServer`` in a child process; both processes imported eval-protocol (litellm, mcp: seconds
each) before the first byte was served, and a store of 200,000 rows was converted up front. Here the page is
served first: the web app's files come straight from the wheel (``vite-app/dist``, found without importing
eval-protocol), and the rows reach the page the way ``LogsServer`` sends them, over the ``/ws`` websocket
(``{"type": "initialize_logs", "logs": [...]}`` messages, which the app upserts as they come), in batches.

The index (``RowIndex``) reads only the small record files at start (``viewer.scan_sources``); a source's
rows are converted on first use (the first page load, or the warm-up thread started once the port is
open) and kept per source, keyed by the sizes and mtimes of its files, so a reload re-reads only what
changed. Nothing is written to disk. The transcripts reach the page as JSON data, never as markup: the
app renders them as text (``tests/cli/test_view_browser.py`` checks hostile transcripts stay text).
"""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rftlab.rollout.viewer import Source, ViewerError

BATCH = 500  # rows per websocket message


def app_dir() -> Path:
    """eval-protocol's built web app (``vite-app/dist`` next to the package, in site-packages), located
    without importing eval-protocol; ``ViewerError`` when it is not installed."""
    spec = importlib.util.find_spec("eval_protocol")
    if spec is None or spec.origin is None:
        raise ViewerError("the viewer is eval-protocol's: pip install -e '.[fireworks]'")
    dist = Path(spec.origin).parent.parent / "vite-app" / "dist"
    if not (dist / "index.html").is_file():
        raise ViewerError(f"eval-protocol's viewer app is missing ({dist}); reinstall eval-protocol")
    return dist


class _Entry:
    """One source's rows as they are converted: ``texts`` grows until ``done``."""

    def __init__(self, key: tuple):
        self.key, self.texts, self.done = key, [], False


class RowIndex:
    """The rows of ``sources`` as JSON texts, converted on first use and cached per source by
    ``Source.key()``. One thread converts a source; any other reader of it receives its rows as they
    are converted. ``problems`` collects sources that could not be read (reported, never raised)."""

    def __init__(self, sources: list[Source], report: Callable[[str, str], None] | None = None):
        self.sources = list(sources)
        self.problems: dict[str, str] = {}
        self._cache: dict[Path, _Entry] = {}
        self._changed = threading.Condition()
        self._report = report
        self._closed = False
        self._threads: list[threading.Thread] = []

    def close(self) -> None:
        """Stop every reader now and every conversion at its next row (the server is shutting down)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def stop(self, timeout: float = 3.0) -> bool:
        """``close()``, then wait up to ``timeout`` s for the conversions; whether all have stopped (one
        still importing eval-protocol cannot be interrupted)."""
        self.close()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def _claim(self, source: Source) -> _Entry:
        """The source's entry; a conversion thread starts when it has none or one of its files changed."""
        key = source.key()
        with self._changed:
            entry = self._cache.get(source.path)
            if entry is not None and entry.key == key:
                return entry
            entry = self._cache[source.path] = _Entry(key)
            if self._closed:
                entry.done = True
                return entry
            thread = threading.Thread(target=self._convert, args=(source, entry), daemon=True)
            self._threads.append(thread)
        thread.start()
        return entry

    def _convert(self, source: Source, entry: _Entry, size: int = 100) -> None:
        chunk: list[str] = []
        try:
            for row in source.rows():
                if self._closed:
                    break
                chunk.append(row.model_dump_json(exclude_none=True))
                if len(chunk) == size:
                    with self._changed:
                        entry.texts.extend(chunk)
                        self._changed.notify_all()
                    chunk = []
        except OSError as exc:
            self._problem(str(source.path), f"cannot be read ({exc.strerror or exc})")
        except (ValueError, TypeError) as exc:  # a record eval-protocol's row model refuses
            first = str(exc).splitlines()[0] if str(exc) else ""
            shown = len(entry.texts) + len(chunk)
            self._problem(
                str(source.path), f"row {shown + 1} cannot be shown ({type(exc).__name__}: {first[:160]})"
            )
        finally:
            with self._changed:
                entry.texts.extend(chunk)
                entry.done = True
                self._changed.notify_all()

    def rows_of(self, source: Source, size: int = BATCH) -> Iterator[list[str]]:
        """``source``'s rows (``EvaluationRow`` JSON), at most ``size`` at a time, as soon as they exist;
        converted again only when one of its files changed."""
        entry, sent = self._claim(source), 0
        while True:
            with self._changed:
                self._changed.wait_for(
                    lambda n=sent: self._closed or entry.done or len(entry.texts) - n >= size
                )
                if self._closed:
                    return
                texts, done = entry.texts[sent : sent + size], entry.done
            if texts:
                sent += len(texts)
                yield texts
            elif done:
                return

    def rows(self, source: Source) -> list[str]:
        """All of ``source``'s rows."""
        return [text for chunk in self.rows_of(source) for text in chunk]

    def _problem(self, path: str, why: str) -> None:
        if path not in self.problems:
            self.problems[path] = why
            if self._report is not None:
                self._report(path, why)

    def batches(self, size: int = BATCH) -> Iterator[list[str]]:
        """Every row, ``size`` at a time, source after source."""
        for source in self.sources:
            if self._closed:
                return
            yield from self.rows_of(source, size)

    def warm(self) -> None:
        """Convert every source now (the warm-up thread)."""
        for _batch in self.batches():
            pass


def _index_html(dist: Path, port: int) -> str:
    """The app's page with the server's address, as eval-protocol's ``ViteServer`` injects it."""
    html = (dist / "index.html").read_text(encoding="utf-8")
    config = json.dumps({"host": "127.0.0.1", "port": str(port), "protocol": "ws", "apiProtocol": "http"})
    script = f"<script>window.SERVER_CONFIG = {config};</script>"
    return html.replace("</head>", script + "</head>", 1) if "</head>" in html else script + html


def create_app(index: RowIndex, dist: Path, port: int) -> Any:
    """The Starlette app: the page (every unknown path is the page, for the app's own routing), its
    assets, ``/health``, ``/api/status``, ``/api/logs/<id>`` (no log backend: 503) and ``/ws``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import FileResponse, HTMLResponse, JSONResponse
    from starlette.routing import Mount, Route, WebSocketRoute
    from starlette.staticfiles import StaticFiles
    from starlette.websockets import WebSocketDisconnect

    page = _index_html(dist, port)
    connections: set[Any] = set()

    async def spa(request):
        path = request.path_params.get("path", "")
        target = (dist / path).resolve()
        if path and target.is_file() and target.is_relative_to(dist.resolve()):
            return FileResponse(target)
        if path.startswith(("api/", "assets/")):
            return JSONResponse({"detail": "not found"}, status_code=404)
        return HTMLResponse(page)

    async def health(request):
        return JSONResponse({"status": "ok"})

    async def status(request):
        return JSONResponse({"status": "ok", "build_dir": str(dist), "active_connections": len(connections),
                             "watch_paths": [], "elasticsearch_enabled": False})  # fmt: skip

    async def logs(request):
        return JSONResponse({"detail": "no log backend is configured for this viewer"}, status_code=503)

    async def ws(websocket):
        await websocket.accept()
        connections.add(websocket)
        try:
            batches = index.batches()
            while (batch := await run_in_threadpool(next, batches, None)) is not None:
                await websocket.send_text('{"type":"initialize_logs","logs":[' + ",".join(batch) + "]}")
            while True:
                await websocket.receive_text()
        except (WebSocketDisconnect, OSError, RuntimeError):
            pass  # the page was closed or reloaded
        finally:
            connections.discard(websocket)

    routes = [
        Route("/health", health),
        Route("/api/status", status),
        Route("/api/logs/{rollout_id:path}", logs),
        WebSocketRoute("/ws", ws),
        Mount("/assets", StaticFiles(directory=dist / "assets"), name="assets"),
        Route("/{path:path}", spa),
    ]
    return Starlette(routes=routes)


def serve(index: RowIndex, port: int, on_ready: Callable[[], None]) -> None:
    """Serve on 127.0.0.1:``port`` until SIGINT or SIGTERM; ``on_ready()`` runs once the port is open,
    then the index warms up in a daemon thread. Raises ``ViewerError`` when the port cannot be opened."""
    import uvicorn

    dist = app_dir()

    class _Server(uvicorn.Server):
        async def startup(self, sockets=None):
            await super().startup(sockets)
            if self.started:
                on_ready()
                threading.Thread(target=index.warm, name="viewer-index", daemon=True).start()

        async def shutdown(self, sockets=None):
            index.close()
            await super().shutdown(sockets)

    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise ViewerError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})") from None
    config = uvicorn.Config(create_app(index, dist, port), log_level="error", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=3)  # fmt: skip
    with sock:
        _Server(config).run(sockets=[sock])
