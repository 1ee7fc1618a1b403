"""Seconds per GRPO epoch and sampled tokens per second of the spectrum Tinker path, in process vs over HTTP.

    .venv/bin/python benchmarks/bench_spectrum_tinker.py                  # tiny agent model and a random h256-l4
    .venv/bin/python benchmarks/bench_spectrum_tinker.py --epochs 3 --rows 2 --candidates 4

For each model, the same small arm (spectrum C: weak prompt, echo) is trained for ``--epochs`` epochs twice
in one run of this script: on the in-process ``LocalServiceClient`` and through the unmodified ``tinker`` SDK
against ``rftlab serve tinker`` (a thread of this process on loopback). Both runs are seeded identically, so
they do the same work; the table gives each one's mean seconds per epoch after the first (warm-up), its
sampled tokens per second, and HTTP / in-process. The larger model is a Qwen3 of width 256 and 4 layers with
random weights and the agent tokenizer (random weights earn no reward: its epochs are sampling, the loss
and the saved state, like the tiny model's).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def random_agent_model(root: Path, hidden: int, layers: int) -> str:
    """A Qwen3 folder of the given size (random weights, seed 0) with the agent tokenizer, 8192 positions."""
    from transformers import Qwen3ForCausalLM

    from rftlab.training.local_tinker.model import TinyModelSpec, agent_bpe_tokenizer, tiny_config

    tok = agent_bpe_tokenizer()
    spec = TinyModelSpec(
        hidden_size=hidden,
        intermediate_size=3 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=8192,
        tokenizer="agent",
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(tiny_config(spec, len(tok), tok.pad_token_id, tok.eos_token_id))
    out = root / f"qwen3-agent-h{hidden}-l{layers}"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out.resolve())


def one_run(base_model: str, args: argparse.Namespace, storage: Path, http: bool) -> dict[str, Any]:
    """Train the arm for ``args.epochs`` epochs on one transport; per-epoch seconds and sampled tokens."""
    import tinker

    from rftlab.launch.spectrum.spec import load_arm_spec
    from rftlab.launch.spectrum.tinker import trainer_config
    from rftlab.runs.paths import spec_path
    from rftlab.runs.store import RunStore
    from rftlab.training.local_tinker import LocalServiceClient
    from rftlab.training.local_tinker.server import ServeConfig, ServerThread
    from rftlab.training.spectrum.tinker_rl import train_spectrum_tinker

    spec = load_arm_spec(spec_path("spectrum_C.json"))
    spec = spec.model_copy(
        update={"rows": args.rows, "num_scans": args.scans, "epochs": args.epochs,
                "response_candidates": args.candidates}
    )  # fmt: skip
    config = trainer_config(spec, base_model, max_tokens=args.max_tokens, batch_rows=args.rows)
    run = RunStore(storage / "runs").create_run(spec.experiment, spec.arm, spec.to_dict(), backend="tinker")
    model_dirs = [base_model] if Path(base_model).is_dir() else []
    server = None
    if http:
        server = ServerThread(
            ServeConfig(
                port=0,
                storage=storage / "srv",
                model_dirs=model_dirs,
                log_level="warning",
                api_keys=["tml-bench-spectrum"],
            )
        ).start()
        service: Any = tinker.ServiceClient(base_url=server.base_url, api_key="tml-bench-spectrum")
    else:
        service = LocalServiceClient(storage_dir=storage / "local", model_dirs=model_dirs)
    try:
        t0 = time.perf_counter()
        result = train_spectrum_tinker(config, run, service)
        wall = time.perf_counter() - t0
    finally:
        if http:
            service.close("success").result()
            assert server is not None
            server.stop()
    rows = result.metrics
    return {
        "seconds": [float(r["seconds"]) for r in rows],
        "tokens": [int(r["sampled_tokens"]) for r in rows],
        "wall": wall,
    }


def summary(r: dict[str, Any]) -> tuple[float, float]:
    """Mean seconds per epoch after the first, and sampled tokens per second over those epochs."""
    secs, toks = r["seconds"][1:] or r["seconds"], r["tokens"][1:] or r["tokens"]
    return statistics.fmean(secs), sum(toks) / sum(secs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run (the first is a warm-up)")
    parser.add_argument("--rows", type=int, default=2, help="dataset rows (one optimiser step per epoch)")
    parser.add_argument("--candidates", type=int, default=3, help="candidates per row (the group size)")
    parser.add_argument("--scans", type=int, default=2, help="scans per episode")
    parser.add_argument("--max-tokens", type=int, default=16, help="tokens per reply")
    parser.add_argument("--skip-large", action="store_true", help="only the built-in tiny agent model")
    args = parser.parse_args()

    from rftlab.training.local_tinker.model import AGENT_MODEL

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        models = [("tiny agent h64-l2", AGENT_MODEL)]
        if not args.skip_large:
            models.append(("random h256-l4", random_agent_model(root, 256, 4)))
        for label, model in models:
            local = one_run(model, args, root / f"{len(results)}-local", http=False)
            http = one_run(model, args, root / f"{len(results)}-http", http=True)
            assert local["tokens"] == http["tokens"], "the two runs did different work"
            results.append((label, local, http))
            print(f"[{label}] in process {local['seconds']} s, HTTP {http['seconds']} s", flush=True)
    print(
        f"\n{args.rows} rows x {args.candidates} candidates, {args.scans} scans, {args.max_tokens} tokens per "
        f"reply; mean of epochs 2..{args.epochs}\n"
    )
    print(
        "| model | in process s/epoch | HTTP s/epoch | HTTP / in process | tokens/s in process | tokens/s HTTP |"
    )
    print("|---|---|---|---|---|---|")
    for label, local, http in results:
        (ls, lt), (hs, ht) = summary(local), summary(http)
        print(f"| {label} | {ls:.2f} | {hs:.2f} | {hs / ls:.2f}x | {lt:.1f} | {ht:.1f} |")


if __name__ == "__main__":
    main()
