"""Cost of the credential check on writes and of terminal redaction (issue 24, class 2).

Writes the same JSONL payload with ``rftlab.runs.atomic_write_bytes`` under four environments and prints
each time as a ratio to the unchecked write measured in the same run: no check (``check_secrets=False``,
the baseline), no credential variables, six realistic keys (letters, digits, ``-_``: their encoded forms
mostly coincide), and six nasty keys (quotes, backslash, slash, non-ASCII: every form differs, about 200 per
key). Also times ``redact_text`` on a 2 KB error message. Run:
``.venv/bin/python benchmarks/bench_secrets.py [--mb 20] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from rftlab.runs.atomic import atomic_write_bytes
from rftlab.runs.secrets import redact_text, secret_forms

NAMES = ("FIREWORKS_API_KEY", "TINKER_API_KEY", "HF_TOKEN", "OPENAI_API_KEY", "WANDB_API_KEY", "DB_PASSWORD")


def _payload(megabytes: float) -> bytes:
    row = json.dumps({"row_id": "sc1_0", "messages": [{"role": "user", "content": "peak 12.5 MHz " * 20}]})
    line = (row + "\n").encode()
    return line * max(1, int(megabytes * 1e6 / len(line)))


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0, help="payload size in MB (default 20)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = _payload(args.mb)
    envs = {
        "no credential variables": {},
        "6 realistic keys": {n: f"fw_{i}aB3dE5gH7jK9mN1pQ3sT5vX7z" for i, n in enumerate(NAMES)},
        "6 nasty keys": {n: f'k"{i}\\sl/ash-ключ-λ-0123456789' for i, n in enumerate(NAMES)},
    }
    saved = {n: os.environ.pop(n, None) for n in NAMES}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.jsonl"
            atomic_write_bytes(out, data, check_secrets=False)  # warm the page cache first
            base = _best(lambda: atomic_write_bytes(out, data, check_secrets=False), args.repeats)
            print(
                f"payload {len(data) / 1e6:.1f} MB; unchecked atomic write {base * 1000:.0f} ms (baseline 1.00)"
            )
            for label, env in envs.items():
                for n in NAMES:
                    os.environ.pop(n, None)
                os.environ.update(env)
                forms = sum(len(secret_forms(v)) for v in env.values())
                t = _best(lambda: atomic_write_bytes(out, data), args.repeats)
                print(f"  {label:<24} {forms:>5} forms  {t * 1000:8.0f} ms  ratio {t / base:6.2f}")
                message = ("error body: " + "x" * 2000 + " " + json.dumps(env))[:2100]
                r = _best(lambda m=message: redact_text(m), max(args.repeats, 20))
                print(f"  {'':<24} redact_text of a 2 KB message: {r * 1e6:.0f} µs")
    finally:
        for n, v in saved.items():
            if v is not None:
                os.environ[n] = v


if __name__ == "__main__":
    main()
