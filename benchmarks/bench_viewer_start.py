"""Time from ``rftlab view`` to its address line, and to the first rows on the websocket.

Writes two temporary run stores (a small one, 3 runs x 20 rows; a large one, ``--runs`` x ``--rows`` rows
of ``--chars``-character transcripts: 100 x 2,000 x 2,000 is 200,000 rows, 400 MB), then starts
``rftlab view`` on each and prints the seconds until it prints ``viewer: http://...`` as a ratio to
``rftlab --help`` measured in the same run (the baseline: the interpreter and the CLI's own imports), and
the seconds until the first batch of rows reaches a websocket client. Each viewer is stopped with
SIGTERM; its exit time is printed too. Run:
``.venv/bin/python benchmarks/bench_viewer_start.py [--runs 100] [--rows 2000] [--chars 2000] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rftlab.runs import RunStore

CLI = [sys.executable, "-m", "rftlab.cli"]


def _store(root: Path, runs: int, rows: int, chars: int) -> Path:
    store = RunStore(root)
    for k in range(runs):
        run = store.create_run("bench_view", f"arm{k % 4}", {"k": k}, backend="local")
        text = "x" * chars
        run.write_rollouts(
            0, [{"prompt_id": f"p{i}", "reward": float(i % 2), "response": text} for i in range(rows)]
        )
        run.finish()
    return root


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _baseline() -> float:
    start = time.perf_counter()
    subprocess.run([*CLI, "--help"], capture_output=True, check=True)
    return time.perf_counter() - start


def _first_rows(port: int, timeout: float) -> float | None:
    try:
        from websockets.sync.client import connect
    except ImportError:
        return None
    start = time.perf_counter()
    with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30, max_size=None) as ws:
        message = json.loads(ws.recv(timeout=timeout))
    return time.perf_counter() - start if message.get("logs") else None


def _view(path: Path, timeout: float) -> tuple[float, float | None, float]:
    """``(seconds to the address line, seconds from it to the first rows, seconds to exit on SIGTERM)``."""
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen([*CLI, "view", str(path), "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
    try:
        line = proc.stdout.readline()
        address = time.perf_counter() - start
        if not line.startswith("viewer: "):
            raise SystemExit(f"rftlab view printed no address line ({line!r})")
        rows = _first_rows(port, timeout)
        stop = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        return address, rows, time.perf_counter() - stop
    finally:
        if proc.poll() is None:
            proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs in the large store (default 100)")
    parser.add_argument(
        "--rows", type=int, default=2000, help="rows per run in the large store (default 2000)"
    )
    parser.add_argument("--chars", type=int, default=2000, help="characters per transcript (default 2000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the first rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-view-") as tmp:
        small = _store(Path(tmp) / "small", 3, 20, 200)
        large = _store(Path(tmp) / "large", args.runs, args.rows, args.chars)
        base = min(_baseline() for _ in range(args.repeats))
        print(f"baseline `rftlab --help`: {base:.2f} s (ratio 1.00)")
        for label, path in ((f"{3 * 20} rows", small), (f"{args.runs * args.rows} rows", large)):
            runs = [_view(path, args.timeout) for _ in range(args.repeats)]
            address = min(r[0] for r in runs)
            firsts = [r[1] for r in runs if r[1] is not None]
            first = f"{min(firsts):6.2f} s" if firsts else "   n/a"
            print(f"  {label:<14} address line {address:6.2f} s  ratio {address / base:6.2f}   "
                  f"first rows after it {first}   exit on SIGTERM {max(r[2] for r in runs):5.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
