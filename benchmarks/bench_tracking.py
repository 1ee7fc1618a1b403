"""Cost of live tracking on ``Run.append_metrics`` (issue 33): the same rows appended one call at a time (as
a training loop does) to a fresh run with tracking off (the baseline), then with MLflow (a fresh SQLite
store), then with W&B offline, each printed as a ratio to the baseline measured in the same run: the time
an append takes (the rows go to the trackers from a background thread) and the time until the tracker
holds every row. The one-time start of each tracker (import, opening or creating its store) is printed
apart. Everything is
written to a temporary folder. Run:
``.venv/bin/python benchmarks/bench_tracking.py [--rows 200] [--metrics 10] [--wandb]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from rftlab.runs import RunStore, tracking


def _rows(count: int, metrics: int) -> list[dict]:
    return [{"step": s, **{f"m{k}": (s * 7 + k) % 13 / 13 for k in range(metrics)}} for s in range(count)]


def _append_all(root: Path, arm: str, rows: list[dict]) -> tuple[float, float]:
    """``(seconds per append, seconds per row until the trackers hold every row)``."""
    run, _ = RunStore(root).start_or_reuse("bench_tracking", arm, {"arm": arm, "rows": len(rows)})
    run.append_metrics(rows[0])  # the first append starts the tracker: timed apart
    tracking.flush()
    start = time.perf_counter()
    for row in rows[1:]:
        run.append_metrics(row)
    appended = time.perf_counter() - start
    if not tracking.flush(timeout=600):
        raise SystemExit("the trackers did not take the rows within 600 s")
    sent = time.perf_counter() - start
    run.finish()
    tracking.flush()
    return appended / (len(rows) - 1), sent / (len(rows) - 1)


def _start_cost(name: str) -> float:
    start = time.perf_counter()
    if tracking.tracker(name) is None:
        raise SystemExit(f"{name} could not start (see the warning above)")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200, help="rows appended per variant (default 200)")
    parser.add_argument("--metrics", type=int, default=10, help="metrics per row (default 10)")
    parser.add_argument("--wandb", action="store_true", help="also time W&B in offline mode")
    args = parser.parse_args()
    rows = _rows(args.rows, args.metrics)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        os.environ["RFTLAB_TRACKING"] = "off"
        base, _ = _append_all(root, "off", rows)
        print(f"{args.rows} rows of {args.metrics} metrics, one append each")
        print(f"tracking off: {base * 1000:.2f} ms per append (baseline 1.00)")
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{Path(tmp) / 'mlruns' / 'mlflow.db'}"
        os.environ["WANDB_DIR"], os.environ["WANDB_MODE"] = str(Path(tmp) / "wandb"), "offline"
        for name in ("mlflow", "wandb") if args.wandb else ("mlflow",):
            os.environ["RFTLAB_TRACKING"] = name
            started = _start_cost(name)
            per_append, per_row = _append_all(root, name, rows)
            print(
                f"tracking {name}: {per_append * 1000:.2f} ms per append ({per_append / base:.2f}x); "
                f"{per_row * 1000:.2f} ms per row until {name} holds it ({per_row / base:.2f}x); "
                f"starting {name} once: {started:.2f} s"
            )


if __name__ == "__main__":
    main()
