"""``rftlab view [PATH]``: the rollouts of a run (or of the whole run store) in eval-protocol's log viewer.

    rftlab view                                           # every run in the project's run store
    rftlab view runs/spectrum_memory/A/<run_id>           # one run: its epochs' rollouts and eval items
    rftlab view runs/arena/oracle                         # an `rftlab arena eval` folder

It reads the runs' records (not their rollouts), starts serving the viewer on http://127.0.0.1:PORT at
once (offline: the web app ships inside the eval-protocol wheel) and converts the rollouts as the page
asks for them; it serves until Ctrl-C or SIGTERM and leaves nothing behind (no temporary files, no
process). A damaged run record is named on stderr (``rftlab: error: <path>: <problem>``, as
``rftlab runs list`` does), the other runs are shown, and the exit status is then 2. See
``rftlab.rollout.viewer`` and ``rftlab.rollout.viewer_server``.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys

from rftlab.cli import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "view", help="open a run's rollouts in eval-protocol's local log viewer (127.0.0.1, offline)"
    )
    p.add_argument(
        "path",
        nargs="?",
        default=None,
        help="a run folder, a part of the run store, an arena eval folder or a JSONL file "
        "(default: the whole run store)",
    )
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default 8765, or a free one)")
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="kept for compatibility: the viewer now starts in this process, without waiting",
    )
    p.set_defaults(func=_view)


def _problem(path: str, why: str) -> None:
    print(f"rftlab: error: {path}: {' '.join(why.split())}", file=sys.stderr, flush=True)


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the viewer exactly as Ctrl-C does


def _view(args: argparse.Namespace) -> int:
    from rftlab.rollout.viewer import DEFAULT_PORT, ViewerError, free_port, no_rollouts, scan_sources
    from rftlab.rollout.viewer_server import RowIndex, app_dir, serve
    from rftlab.runs.paths import display_path, runs_root

    path = args.path or str(runs_root())
    problems: dict[str, str] = {}
    index = None
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        app_dir()
        sources, problems = scan_sources(path)
        for where, why in problems.items():
            _problem(where, why)
        if problems:
            print(
                f"rftlab: error: {len(problems)} run file(s) could not be read; the other runs are shown",
                file=sys.stderr,
            )
        if not sources:
            raise no_rollouts(path)
        index = RowIndex(sources, report=_problem)
        port = args.port or _port_or_free(DEFAULT_PORT, free_port)
        print(f"{len(sources)} source(s) from {display_path(path)}; starting the viewer ...", file=sys.stderr)

        def ready() -> None:
            print(f"viewer: http://127.0.0.1:{port}  (Ctrl-C to stop)", flush=True)

        serve(index, port, ready)
    except ViewerError as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    code = 2 if problems or (index is not None and index.problems) else 0
    return _ending(code, index)


def _ending(code: int, index) -> int:
    """The process is ending: stop the conversion threads (a thread still running while the interpreter
    finalises can abort it, so then exit at once: nothing is left to write), and skip the final garbage
    collection of eval-protocol's module graph (seconds, and no file depends on it)."""
    if index is not None and not index.stop(timeout=1.0):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    gc.freeze()
    return code


def _port_or_free(port: int, free_port) -> int:
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds it
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return free_port()
    return port
