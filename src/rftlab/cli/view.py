"""``rftlab view [PATH]``: the rollouts of a run (or of the whole run store) in eval-protocol's log viewer.

    rftlab view                                           # every run in the project's run store
    rftlab view runs/spectrum_memory/A/<run_id>           # one run: its epochs' rollouts and eval items
    rftlab view runs/arena/oracle                         # an `rftlab arena eval` folder

It copies the rollouts into a fresh eval-protocol store (a temporary folder, removed on exit), starts the
viewer on http://127.0.0.1:PORT (offline: the web app ships inside the eval-protocol wheel) and serves
until Ctrl-C. See ``rftlab.rollout.viewer``.
"""

from __future__ import annotations

import argparse
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
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the viewer to start")
    p.set_defaults(func=_view)


def _view(args: argparse.Namespace) -> int:
    from rftlab.rollout.viewer import (
        DEFAULT_PORT,
        ViewerError,
        cleanup,
        free_port,
        prepare,
        start_viewer,
        wait_until_up,
    )
    from rftlab.runs.paths import display_path, runs_root

    path = args.path or str(runs_root())
    try:
        import eval_protocol  # noqa: F401
    except ImportError:
        raise UsageError("the viewer is eval-protocol's: pip install -e '.[fireworks]'") from None
    try:
        home, count = prepare(path)
    except ViewerError as exc:
        raise UsageError(str(exc)) from None
    port = args.port or _port_or_free(DEFAULT_PORT, free_port)
    print(f"{count} rollouts from {display_path(path)}; starting the viewer ...", file=sys.stderr, flush=True)
    proc = start_viewer(home, port)
    try:
        wait_until_up(port, proc, timeout=args.timeout)
        print(f"viewer: http://127.0.0.1:{port}  (Ctrl-C to stop)", flush=True)
        return proc.wait()
    except ViewerError as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        return 0
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except Exception:
                proc.kill()
        cleanup(home)


def _port_or_free(port: int, free_port) -> int:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return free_port()
    return port
