"""Peak memory of one GRPO-sized ``sample`` call on the local tinker backend at a real Qwen3 vocabulary.

Builds a random-weight Qwen3 with the real vocabulary (151,936 tokens) and a small width (hidden 64, 2
layers) in a temporary folder, then for each configuration starts a fresh child process that loads it with
``LocalServiceClient(model_dirs=[dir])``, makes one warm-up call, and runs one ``sample`` burst: ``--requests``
requests of ``num_samples`` samples each, ``max_tokens`` tokens, temperature 1, ``stop=[]`` (every token
decodes). The child reports its peak RSS (``ru_maxrss``) minus its RSS after loading and warming up, and the
wall time of the burst. Next to it: the bytes the former up-front noise block would have needed
(rows × max_tokens × vocab × 4, float32), the baseline this replaces. Peak memory should grow with the rows,
not with max_tokens.

    .venv/bin/python benchmarks/bench_sample_memory.py                  # 8 requests x {8, 16} x {64, 128, 256}
    .venv/bin/python benchmarks/bench_sample_memory.py --max-tokens 64 --num-samples 8
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QWEN3_VOCAB = 151_936


def build_model_dir(out: Path, vocab: int, hidden: int, layers: int) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from rftlab.training.local_tinker import byte_tokenizer

    tok = byte_tokenizer()
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=3 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=1024,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        import os

        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(model_dir: str, requests: int, num_samples: int, max_tokens: int) -> dict[str, float]:
    import resource

    from tinker import types

    from rftlab.training.local_tinker import LocalServiceClient

    sc = LocalServiceClient(model_dirs=[model_dir])
    sampler = sc.create_sampling_client(base_model=model_dir).result()
    prompts = [types.ModelInput.from_ints([65 + (i + j) % 26 for j in range(24)]) for i in range(requests)]
    sampler.sample(prompts[0], 1, types.SamplingParams(max_tokens=2, stop=[], seed=0)).result()  # warm-up
    base = _rss_bytes()
    params = types.SamplingParams(max_tokens=max_tokens, temperature=1.0, stop=[], seed=1)
    t0 = time.perf_counter()
    futures = [sampler.sample(p, num_samples, params) for p in prompts]
    tokens = sum(len(s.tokens) for f in futures for s in f.result().sequences)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"rss_after_load": base, "peak": peak, "wall_s": wall, "tokens": tokens}


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n / 2**10:.0f} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8, help="sampling requests per burst (GRPO groups)")
    parser.add_argument(
        "--num-samples", type=int, nargs="+", default=[8, 16], help="samples per request (group size)"
    )
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[64, 128, 256], help="tokens per sample")
    parser.add_argument("--vocab", type=int, default=QWEN3_VOCAB, help="vocabulary size (Qwen3: 151936)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden size of the random Qwen3")
    parser.add_argument("--layers", type=int, default=2, help="layers of the random Qwen3")
    parser.add_argument("--child", nargs=4, metavar=("DIR", "REQ", "N", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        d, req, n, t = args.child
        print(json.dumps(child(d, int(req), int(n), int(t))))
        return
    with tempfile.TemporaryDirectory(prefix="bench-sample-memory-") as tmp:
        model_dir = Path(tmp) / "qwen3-random"
        build_model_dir(model_dir, args.vocab, args.hidden, args.layers)
        print(
            f"random Qwen3, vocab {args.vocab}, hidden {args.hidden}, {args.layers} layers; "
            f"{args.requests} requests per burst, temperature 1, stop=[]; one child process per row",
            file=sys.stderr,
        )
        header = "| rows (requests × samples) | max_tokens | former noise block | peak RSS − RSS after load | wall | tokens/s |"
        print(header)
        print("|---|---|---|---|---|---|")
        for n in args.num_samples:
            for t in args.max_tokens:
                cmd = [
                    sys.executable,
                    __file__,
                    "--child",
                    str(model_dir),
                    str(args.requests),
                    str(n),
                    str(t),
                ]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                rows = args.requests * n
                old = rows * t * args.vocab * 4
                print(
                    f"| {rows} ({args.requests} × {n}) | {t} | {_fmt_bytes(old)} | "
                    f"{_fmt_bytes(r['peak'] - r['rss_after_load'])} | {r['wall_s']:.1f} s | "
                    f"{r['tokens'] / r['wall_s']:.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
