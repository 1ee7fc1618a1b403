"""Local tinker backend benchmark: sampling throughput (KV cache, batched) against a naive baseline in the
same run (no KV cache: the whole sequence re-run for every new token, same batch), forward_backward
time per datum, one full RL step, greedy evaluation, peak memory, and one GS1 step through the HTTP
service (``rftlab serve tinker`` + the real tinker SDK) against the same step on the in-process client.

    .venv/bin/python benchmarks/bench_local_tinker.py               # pieces + HTTP vs in-process (a few min)
    .venv/bin/python benchmarks/bench_local_tinker.py --http-only   # only the HTTP vs in-process ratio
    .venv/bin/python benchmarks/bench_local_tinker.py --full        # + the whole local study
    .venv/bin/python benchmarks/bench_local_tinker.py --size-sweep  # the HTTP ratio as the model grows

``--full`` runs a stand-in of the GS1 study on the local backend: the warm-started base (cached in
``--base-dir``), then 2 arms x ``--steps`` steps x 64 rollouts (GRPO 8x8 with group-mean
advantages; GS1 64x1 with a leave-one-out batch-mean baseline standing in for the kernel estimator)
with ``importance_sampling`` + Adam, then greedy evaluation of the 1319 local test items per arm. The
loop is this script's own (the study's loop lives in ``rftlab.training.gs1.rl_loop``); it measures the
backend's share of the study's wall time.

The HTTP comparison runs the study's own step (``rl_loop.rl_step`` then ``save_state``, both arms, on the
warm-started base) alternately on an in-process ``LocalServiceClient`` and, through ``tinker.ServiceClient``,
on a ``rftlab serve tinker`` child process; both compute on one thread. It prints each mean step time and
their ratio (goal: HTTP <= 1.15x in-process) after one warm-up step per client, and checks that both
clients sampled the same rewards.

``--size-sweep`` repeats the comparison (GS1 arm, the arm with the most requests) on Qwen3 models of growing
width and depth with random weights and the warm base's tokenizer, built in a temporary folder: the SDK's
cost per request stays while the computation per request grows, and the sweep shows at which step time the
ratio falls under the goal. Random weights rarely stop early and earn no reward, so these steps are sampling,
prompt logprobs and ``save_state`` (no datum has a non-zero advantage): a measure of the transport's share,
not of training.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

import torch
from tinker import types

from rftlab.envs.gs1 import reward, test_problems, train_problems
from rftlab.envs.gs1.task import local_task
from rftlab.runs.paths import PROJECT_ROOT
from rftlab.training.gs1.warm_start import (
    WarmStartConfig,
    build_prompt,
    prepare_base_model,
    renderer_for,
    response_text,
)
from rftlab.training.local_tinker import LocalServiceClient


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@torch.no_grad()
def naive_sample(model, prompts: list[list[int]], max_tokens: int, pad_id: int) -> int:
    """Greedy decoding without a KV cache (left-padded batch, full forward per token); returns tokens made."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        attn[i, width - len(p) :] = 1
    for _ in range(max_tokens):
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=False).logits[:, -1]
        nxt = logits.argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
        attn = torch.cat([attn, torch.ones_like(nxt)], dim=1)
    return len(prompts) * max_tokens


def make_datum(prompt: types.ModelInput, toks: list[int], lps: list[float], adv: float) -> types.Datum:
    ob = prompt.length - 1
    return types.Datum(
        model_input=prompt.append(types.EncodedTextChunk(tokens=toks[:-1])),
        loss_fn_inputs={
            "target_tokens": torch.tensor([0] * ob + toks),
            "logprobs": torch.tensor([0.0] * ob + lps),
            "advantages": torch.tensor([0.0] * ob + [adv] * len(toks)),
        },
    )


def rl_step(tc, renderer, problems, group_size: int, max_tokens: int, adam, seed: int) -> dict[str, float]:
    t0 = time.perf_counter()
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompts = [build_prompt(renderer, p) for p in problems]
    params = types.SamplingParams(max_tokens=max_tokens, temperature=1.0, stop=renderer.get_stop_sequences())
    lp_futs = [sampler.compute_logprobs(pr) for pr in prompts]
    futs = [
        sampler.sample(pr, group_size, params.model_copy(update={"seed": seed + i}))
        for i, pr in enumerate(prompts)
    ]
    results = [f.result() for f in futs]
    [f.result() for f in lp_futs]
    t_sample = time.perf_counter() - t0
    rewards = [
        [reward(response_text(renderer, s.tokens), p.final) for s in r.sequences]
        for r, p in zip(results, problems, strict=True)
    ]
    flat = [x for g in rewards for x in g]
    data = []
    for pr, r, g in zip(prompts, results, rewards, strict=True):
        if group_size > 1:
            base = [sum(g) / len(g)] * len(g)
        else:  # leave-one-out batch mean (stand-in for the kernel baseline)
            base = [(sum(flat) - x) / (len(flat) - 1) for x in g]
        for s, x, b in zip(r.sequences, g, base, strict=True):
            if len(s.tokens) >= 2 and abs(x - b) > 1e-9:
                data.append(make_datum(pr, s.tokens, s.logprobs, x - b))
    t1 = time.perf_counter()
    if data:
        fb = tc.forward_backward(data, "importance_sampling")
        tc.optim_step(adam).result()
        fb.result()
    t_train = time.perf_counter() - t1
    return {"reward": sum(flat) / len(flat), "sample_s": t_sample, "train_s": t_train, "datums": len(data)}


def greedy_eval(tc, renderer, problems, max_tokens: int) -> float:
    sampler = tc.save_weights_and_get_sampling_client().result()
    params = types.SamplingParams(max_tokens=max_tokens, temperature=0.0, stop=renderer.get_stop_sequences())
    futs = [sampler.sample(build_prompt(renderer, p), 1, params) for p in problems]
    return statistics.mean(
        reward(response_text(renderer, f.result().sequences[0].tokens), p.final)
        for f, p in zip(futs, problems, strict=True)
    )


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gs1_step_http_vs_in_process(
    base: str, steps: int, only_arm: str | None = None, label: str = ""
) -> dict[str, float]:
    """The study's step through ``rftlab serve tinker`` + the tinker SDK vs the in-process client."""
    import tempfile

    import tinker

    from rftlab.launch.gs1.backend import LOCAL_RENDERER, LOCAL_SIZES
    from rftlab.studies.gs1 import DEFAULT_SPEC, load_spec
    from rftlab.training.gs1.rl_loop import make_estimator, rl_step
    from rftlab.training.local_tinker.server import ServerProcess

    spec = load_spec(DEFAULT_SPEC)
    arms = spec.arm_configs(base_model=base, renderer_name=LOCAL_RENDERER, task="local_math", **LOCAL_SIZES)
    task = local_task(max(c.n_train for c in arms.values()))
    renderer = renderer_for(base, LOCAL_RENDERER)
    local_sc = LocalServiceClient(model_dirs=[base])
    out: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory() as storage,
        ServerProcess(
            ["--storage", storage, "--model-dir", base, "--log-level", "info"], api_key="tml-benchmark"
        ) as srv,
    ):
        remote_sc = tinker.ServiceClient(base_url=srv.base_url, api_key="tml-benchmark")
        for arm, cfg in arms.items():
            if only_arm is not None and arm != only_arm:
                continue
            clients = {
                "in-process": local_sc.create_lora_training_client(
                    base, rank=cfg.lora_rank, seed=cfg.seed
                ).result(),
                "http": remote_sc.create_lora_training_client(
                    base_model=base, rank=cfg.lora_rank, seed=cfg.seed
                ).result(),
            }
            estimators = {k: make_estimator(cfg) for k in clients}
            times: dict[str, list[float]] = {k: [] for k in clients}
            cpu: dict[str, list[float]] = {k: [] for k in clients}
            server_cpus: list[float] = []
            rewards: dict[str, list[float]] = {k: [] for k in clients}
            requests_before = len(srv.events("request"))
            for step in range(steps + 1):  # step 0 warms each client up and is not timed
                order = list(clients) if step % 2 == 0 else list(reversed(clients))
                for name in order:
                    t0, c0, s0 = time.perf_counter(), time.process_time(), process_cpu_seconds(srv.proc.pid)
                    result = rl_step(cfg, step, clients[name], renderer, task, estimators[name])
                    clients[name].save_state(f"{arm}-{step}", ttl_seconds=3600).result()
                    if step > 0:
                        times[name].append(time.perf_counter() - t0)
                        server_cpu = process_cpu_seconds(srv.proc.pid) - s0 if name == "http" else 0.0
                        cpu[name].append(time.process_time() - c0 + server_cpu)
                        if name == "http":
                            server_cpus.append(server_cpu)
                    rewards[name].append(result.metrics["reward_mean"])
            http, local = statistics.mean(times["http"]), statistics.mean(times["in-process"])
            http_cpu, local_cpu = statistics.mean(cpu["http"]), statistics.mean(cpu["in-process"])
            n_requests = (len(srv.events("request")) - requests_before) / (steps + 1)
            print(
                f"{label}GS1 step ({arm}, {cfg.rollouts_per_step} rollouts, {steps} timed steps, {n_requests:.0f} HTTP "
                f"requests + as many result polls per step): wall in-process {local:.2f} s, HTTP {http:.2f} s "
                f"-> ratio {http / local:.3f}x (goal <= 1.15x); CPU (client + server) in-process "
                f"{local_cpu:.2f} s, HTTP {http_cpu:.2f} s (server {statistics.mean(server_cpus):.2f} s) -> ratio "
                f"{http_cpu / local_cpu:.3f}x; "
                f"same rewards on both: {rewards['http'] == rewards['in-process']}"
            )
            out[arm] = http / local
            out[f"{arm}_in_process_s"] = local
            out[f"{arm}_cpu"] = http_cpu / local_cpu
        remote_sc.close("success").result()
    return out


SWEEP = (  # (hidden, layers, heads, kv heads, head dim): the warm base is 64/2/4/2/16
    (256, 4, 8, 4, 32),
    (512, 6, 8, 4, 64),
    (1024, 8, 16, 8, 64),
)


def random_model_dir(
    base: str, hidden: int, layers: int, heads: int, kv: int, head_dim: int, root: Path
) -> str:
    """A Qwen3 model directory of the given size with random weights (seed 0) and ``base``'s tokenizer."""
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    from rftlab.training.local_tinker.model import TinyModelSpec, tiny_config

    tok = AutoTokenizer.from_pretrained(base)
    spec = TinyModelSpec(
        hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(tiny_config(spec, len(tok), tok.pad_token_id, tok.eos_token_id))
    out = root / f"qwen3-h{hidden}-l{layers}"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def size_sweep(base: str, steps: int) -> None:
    """The GS1 arm's step HTTP vs in-process on the warm base and on each ``SWEEP`` size."""
    import tempfile

    rows = [("warm base h64-l2", gs1_step_http_vs_in_process(base, steps, "gs1_kernel", "[h64-l2] "))]
    with tempfile.TemporaryDirectory() as tmp:
        for hidden, layers, heads, kv, head_dim in SWEEP:
            model = random_model_dir(base, hidden, layers, heads, kv, head_dim, Path(tmp))
            label = f"random h{hidden}-l{layers}"
            rows.append(
                (label, gs1_step_http_vs_in_process(model, steps, "gs1_kernel", f"[h{hidden}-l{layers}] "))
            )
    print("\n| model | in-process step | HTTP / in-process (wall) | CPU ratio |\n|---|---|---|---|")
    for label, r in rows:
        print(
            f"| {label} | {r['gs1_kernel_in_process_s']:.2f} s | {r['gs1_kernel']:.2f}x | {r['gs1_kernel_cpu']:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base-dir",
        default=str(PROJECT_ROOT / ".runs_local_tinker" / "warm_start"),
        help="warm-started base model directory (a cache shared with the local GS1 study)",
    )
    parser.add_argument("--max-tokens", type=int, default=20)
    parser.add_argument("--full", action="store_true", help="also run the whole local study stand-in")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument(
        "--http-steps", type=int, default=4, help="timed steps per arm in the HTTP comparison"
    )
    parser.add_argument("--http-only", action="store_true", help="only the HTTP vs in-process comparison")
    parser.add_argument(
        "--size-sweep", action="store_true", help="only the HTTP ratio of the GS1 step as the model grows"
    )
    args = parser.parse_args()
    t_all = time.perf_counter()

    t0 = time.perf_counter()
    ws = prepare_base_model(args.base_dir, WarmStartConfig())
    print(
        f"warm start: {ws.steps} steps, sampled reward {ws.final_reward:.3f}, built in {ws.seconds:.1f} s "
        f"(this run: {time.perf_counter() - t0:.1f} s incl. cache check)"
    )
    base = ws.path
    if args.size_sweep:
        size_sweep(base, args.http_steps)
        print(f"total bench wall time {time.perf_counter() - t_all:.1f} s")
        return
    if args.http_steps > 0:
        gs1_step_http_vs_in_process(base, args.http_steps)
    if args.http_only:
        print(f"total bench wall time {time.perf_counter() - t_all:.1f} s")
        return
    sc = LocalServiceClient(model_dirs=[base])
    renderer = renderer_for(base, WarmStartConfig().renderer_name)
    tc = sc.create_lora_training_client(base, rank=32, seed=0).result()
    problems = train_problems(64, seed=0)
    prompts = [build_prompt(renderer, p) for p in problems]

    # sampling: KV cache + batching vs the naive baseline (same 64 prompts, greedy, no stop)
    sampler = tc.save_weights_and_get_sampling_client().result()
    params = types.SamplingParams(max_tokens=args.max_tokens, temperature=0.0, stop=[])
    t0 = time.perf_counter()
    res = [f.result() for f in [sampler.sample(pr, 1, params) for pr in prompts]]
    t_kv = time.perf_counter() - t0
    n_tok = sum(len(r.sequences[0].tokens) for r in res)
    host = tc._host
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    n_naive = naive_sample(tc.model, [pr.to_ints() for pr in prompts], args.max_tokens, host.pad_id)
    t_naive = time.perf_counter() - t0
    print(
        f"sampling 64 x {args.max_tokens} tokens: KV-cache batched {n_tok / t_kv:,.0f} tok/s ({t_kv:.2f} s); "
        f"naive no-cache {n_naive / t_naive:,.0f} tok/s ({t_naive:.2f} s); speedup x{t_naive / t_kv:.1f}"
    )

    # forward_backward per datum (64 importance-sampling datums of the task's size)
    sampler = tc.save_weights_and_get_sampling_client().result()
    p1 = types.SamplingParams(
        max_tokens=args.max_tokens, temperature=1.0, stop=renderer.get_stop_sequences(), seed=1
    )
    res = [f.result() for f in [sampler.sample(pr, 1, p1) for pr in prompts]]
    data = [
        make_datum(pr, r.sequences[0].tokens, r.sequences[0].logprobs, 0.5 - (i % 2))
        for i, (pr, r) in enumerate(zip(prompts, res, strict=True))
        if len(r.sequences[0].tokens) >= 2
    ]
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        tc.forward_backward(data, "importance_sampling").result()
        times.append(time.perf_counter() - t0)
    tokens = sum(d.model_input.length for d in data)
    print(
        f"forward_backward: {len(data)} datums ({tokens} tokens) best {min(times):.3f} s = "
        f"{1000 * min(times) / len(data):.2f} ms/datum"
    )
    for p in tc.model.parameters():
        p.grad = None

    adam = types.AdamParams(learning_rate=4e-5, beta1=0.9, beta2=0.95, eps=1e-8)
    steps = [
        rl_step(tc, renderer, train_problems(64, seed=s + 1)[: 64 // g], g, args.max_tokens, adam, s)
        for s, g in ((0, 8), (1, 1), (2, 8), (3, 1))
    ]
    step_s = statistics.mean(s["sample_s"] + s["train_s"] for s in steps)
    print(
        f"full RL step (sample 64 + prompt logprobs + forward_backward + optim_step): mean {step_s:.2f} s "
        f"(sampling {statistics.mean(s['sample_s'] for s in steps):.2f} s, training {statistics.mean(s['train_s'] for s in steps):.2f} s)"
    )
    tests = test_problems()
    t0 = time.perf_counter()
    acc = greedy_eval(tc, renderer, tests[:256], args.max_tokens)
    t_eval = (time.perf_counter() - t0) * len(tests) / 256
    print(
        f"greedy eval: 256 items in {t_eval * 256 / len(tests):.2f} s (accuracy {acc:.3f}) -> 1319 items ~{t_eval:.1f} s"
    )
    est = 2 * (args.steps * step_s + t_eval)
    print(
        f"estimated study (2 arms x {args.steps} steps + 2 evals, base cached): {est:.0f} s; peak RSS {peak_rss_mib():.0f} MiB"
    )

    if args.full:
        t_study = time.perf_counter()
        for arm, g in (("grpo_gs8", 8), ("gs1_kernel", 1)):
            t_arm = time.perf_counter()
            tc = sc.create_lora_training_client(base, rank=32, seed=0).result()
            pool = train_problems(64 * args.steps, seed=0)
            rewards = []
            for s in range(args.steps):
                batch = pool[s * 64 : s * 64 + 64 // g] if g > 1 else pool[s * 64 : (s + 1) * 64]
                rewards.append(rl_step(tc, renderer, batch, g, args.max_tokens, adam, 1000 * s)["reward"])
            t_train = time.perf_counter() - t_arm
            t0 = time.perf_counter()
            acc = greedy_eval(tc, renderer, tests, args.max_tokens)
            print(
                f"{arm}: train {t_train:.1f} s (reward first 2 steps {statistics.mean(rewards[:2]):.3f}, last 5 "
                f"{statistics.mean(rewards[-5:]):.3f}); eval 1319 greedy {time.perf_counter() - t0:.1f} s, accuracy {acc:.3f}"
            )
        print(
            f"full local study stand-in: {time.perf_counter() - t_study:.1f} s; peak RSS {peak_rss_mib():.0f} MiB"
        )
    print(f"total bench wall time {time.perf_counter() - t_all:.1f} s")


if __name__ == "__main__":
    main()
