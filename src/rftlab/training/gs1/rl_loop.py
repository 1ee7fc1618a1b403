"""The client-side RL loop of the GS1-vs-GRPO study, on the tinker API (``rftlab.types`` backends).

It follows tinker-cookbook's ``recipes/rl_loop.py`` step for step, with the advantage estimator as the
one plug-in (``rftlab.training.gs1.advantages``). Each step:

1. ``save_weights_and_get_sampling_client()`` → a sampler on the current weights;
2. the step's prompts from a fixed seed-0 shuffled order (GRPO 8 prompts × 8 samples, GS1 64 × 1),
   rendered with the cookbook's math_rl prompt (few-shot prefix + ``\\boxed{}`` suffix);
3. per prompt, G samples, one request of ``num_samples=1`` each (``sample_requests``: independent group
   members whatever the service does with seeds), the first with ``include_prompt_logprobs``: its
   ``prompt_logprobs`` give the GS1 feature φ. The SDK's ``compute_logprobs`` is that same request (a
   sample with ``include_prompt_logprobs``, ``max_tokens=1``), so no separate request is sent; on the
   local backend both come from the same batched forward pass (a test checks them bit for bit).
   Distinct samples per group are logged (``group_sample_stats``);
4. grade each response with the cookbook's GSM8K grader (``extract_boxed`` + sympy ``grade_answer``):
   the exact-answer reward, 1.0 or 0.0;
5. advantages from the arm's estimator; a group whose advantages are all exactly 0 is skipped like the
   cookbook does (for GRPO a constant-reward group; for GS1, where every group has one rollout, only a
   rollout with ``r_i == b_i`` — constant-reward groups are *not* dropped, their advantage is ``r - b``);
6. datums in the cookbook layout (prompt + response[:-1]; ``target_tokens``, sampler ``logprobs`` and
   ``advantages`` padded with zeros over the prompt);
7. ``forward_backward(datums, loss_fn="importance_sampling")`` and
   ``optim_step(AdamParams(learning_rate, beta1=0.9, beta2=0.95, eps=1e-8))``, submitted together; the
   sampler-vs-trainer KL of the trained tokens is logged (``sample_train_kl``);
8. ``save_state`` (resume point, 7-day TTL), then the step's metrics and rollouts go to the run store
   and the previous step's state is deleted.

After the last step: ``save_weights_for_sampler("final")`` and greedy evaluation (temperature 0) of the
test items into the run's ``eval.jsonl``. The loop never branches on the backend: the same code drives
``tinker.ServiceClient`` and the local tinker-compatible backend; every client is injected.

The pieces: ``config`` (the arm as data, the prompt order), ``estimators`` (step 5's plug-ins),
``sampling`` (steps 2-4 and the greedy evaluation); here the datums, the step and the run.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rftlab.envs.gs1.task import MathTask
from rftlab.runs.store import Run, RunStore
from rftlab.training.group_stats import pearson
from rftlab.training.gs1.config import DEFAULT_RENDERER, GS1ArmConfig, prompt_order, step_prompt_indices
from rftlab.training.gs1.estimators import (
    AdvantageEstimator,
    AdvantageOutput,
    GroupMeanEstimator,
    make_estimator,
)
from rftlab.training.gs1.sampling import (
    IMPLAUSIBLE_DUPLICATE_PROB,
    SampledBatch,
    eval_items,
    evaluate,
    group_sample_stats,
    request_seed,
    sample_batch,
)
from rftlab.types import resolve

if TYPE_CHECKING:
    from tinker.types import Datum, ModelInput
    from tinker_cookbook.renderers import Renderer

# names that moved to ``config``, ``estimators`` and ``sampling``, still imported from here
__all__ = [
    "DEFAULT_RENDERER",
    "IMPLAUSIBLE_DUPLICATE_PROB",
    "GS1ArmConfig",
    "GroupMeanEstimator",
    "MathTask",
    "SampledBatch",
    "eval_items",
    "evaluate",
    "group_sample_stats",
    "make_estimator",
    "prompt_order",
    "request_seed",
    "resolve",
    "sample_batch",
    "step_prompt_indices",
]


class ModelNotServedError(RuntimeError):
    """The backend does not offer the base model for training and sampling."""


class ResumeError(RuntimeError):
    """An unfinished run cannot be resumed (no saved state for its last logged step)."""


# ------------------------------------------------------------------------------------------ datums


def make_datum(
    prompt: ModelInput, tokens: Sequence[int], logprobs: Sequence[float], advantage: float
) -> Datum:
    """The cookbook ``rl_loop`` datum: input = prompt + tokens[:-1]; targets, sampler logprobs and the
    advantage are zero over the prompt (all but its last position) and set over the response.

    A one-token response adds no chunk (tinker rejects an empty chunk); the prompt's last position still
    predicts it.
    """
    from tinker import types

    tokens = [int(t) for t in tokens]
    if not tokens:
        raise ValueError("a datum needs at least one response token")
    if len(logprobs) != len(tokens):
        raise ValueError(f"{len(logprobs)} logprobs for {len(tokens)} tokens")
    ob = prompt.length - 1
    model_input = prompt.append(types.EncodedTextChunk(tokens=tokens[:-1])) if len(tokens) > 1 else prompt
    n = model_input.length
    target = np.array([0] * ob + tokens, dtype=np.int64)
    lps = np.array([0.0] * ob + [float(x) for x in logprobs], dtype=np.float32)
    adv = np.array([0.0] * ob + [float(advantage)] * (n - ob), dtype=np.float32)
    assert target.size == lps.size == adv.size == n
    return types.Datum(
        model_input=model_input,
        loss_fn_inputs={
            "target_tokens": types.TensorData.from_numpy(target),
            "logprobs": types.TensorData.from_numpy(lps),
            "advantages": types.TensorData.from_numpy(adv),
        },
    )


# --------------------------------------------------------------------------------------- the step


@dataclass
class TrainingStep:
    """What one training step produced (its metrics row and per-rollout records)."""

    metrics: dict[str, Any]
    rollouts: list[dict[str, Any]]
    datums: list[Datum] = field(default_factory=list)


def estimate(batch: SampledBatch, estimator: AdvantageEstimator) -> AdvantageOutput:
    """Step 5: the estimator's advantages, written into the records; the estimator then observes."""
    ids = [r["prompt_id"] for r in batch.records]
    rewards = np.array([r["reward"] for r in batch.records], dtype=np.float64)
    phi = np.array([r["phi"] for r in batch.records], dtype=np.float64).reshape(-1, 2)
    est = estimator(ids, rewards, phi)
    estimator.observe(ids, rewards, phi)
    for n, rec in enumerate(batch.records):
        rec["advantage"] = float(est.advantages[n])
        rec["baseline"] = float(est.baselines[n])
        if est.effective_neighbors is not None and est.fallback is not None:  # the kernel estimator's
            rec["effective_neighbors"] = float(est.effective_neighbors[n])
            rec["kernel_fallback"] = bool(est.fallback[n])
    return est


def batch_datums(
    batch: SampledBatch, advantages: Sequence[float] | np.ndarray
) -> tuple[list[Datum], int, int]:
    """Step 6: ``(datums, n skipped as an all-zero-advantage group, n skipped as empty responses)``.
    Marks ``in_batch`` on the records that became datums."""
    ids = [r["prompt_id"] for r in batch.records]
    datums, skipped_zero, skipped_empty = [], 0, 0
    for pid in dict.fromkeys(ids):  # groups in prompt order, like the cookbook
        members = [n for n, x in enumerate(ids) if x == pid]
        if all(float(advantages[n]) == 0.0 for n in members):
            skipped_zero += len(members)
            continue
        for n in members:
            prompt, tokens, lps = batch.seqs[n]
            if not tokens:
                skipped_empty += 1
                continue
            datums.append(make_datum(prompt, tokens, lps, float(advantages[n])))
            batch.records[n]["in_batch"] = True
    return datums, skipped_zero, skipped_empty


def sample_train_kl(
    datums: Sequence[Datum], response_tokens: Sequence[int], trainer_outputs: Sequence[Any]
) -> dict[str, Any]:
    """The sampler-vs-trainer KL of one step (docs/platforms.md §3.11), over the response tokens of the
    trained datums: ``kl_sample_train_v1`` = mean(sampler logprob − trainer logprob) and
    ``kl_sample_train_v2`` = ½·mean of its square (the cookbook's two estimates), with
    ``n_kl_tokens``. The trainer logprobs are ``forward_backward``'s ``loss_fn_outputs[i]["logprobs"]``
    on the weights the sampler used (one optimizer step per sampler), so on a faithful service both
    are 0; ``None`` when the backend returned none."""
    empty = {"kl_sample_train_v1": None, "kl_sample_train_v2": None, "n_kl_tokens": 0}
    if not datums or len(trainer_outputs) != len(datums):
        return empty
    diffs = []
    for datum, n_resp, out in zip(datums, response_tokens, trainer_outputs, strict=True):
        trainer = out.get("logprobs") if isinstance(out, Mapping) else None
        if trainer is None:
            return empty
        trainer_lp = np.asarray(trainer.to_numpy(), dtype=np.float64).ravel()
        sampler_lp = np.asarray(datum.loss_fn_inputs["logprobs"].to_numpy(), dtype=np.float64).ravel()
        if trainer_lp.shape != sampler_lp.shape:
            raise RuntimeError(
                f"trainer returned {trainer_lp.size} logprobs for a datum of {sampler_lp.size} positions"
            )
        diffs.append(sampler_lp[-int(n_resp) :] - trainer_lp[-int(n_resp) :])
    d = np.concatenate(diffs)
    return {
        "kl_sample_train_v1": float(d.mean()),
        "kl_sample_train_v2": float(0.5 * np.mean(d**2)),
        "n_kl_tokens": int(d.size),
    }


def rl_step(
    config: GS1ArmConfig,
    step: int,
    training_client: Any,
    renderer: Renderer,
    task: MathTask,
    estimator: AdvantageEstimator,
    clock: Callable[[], float] = time.perf_counter,
    send_seeds: bool = True,
) -> TrainingStep:
    """One step of the loop (the module docstring's 1-7); the caller logs and checkpoints."""
    t0 = clock()
    sampler = resolve(training_client.save_weights_and_get_sampling_client())
    batch = sample_batch(config, step, sampler, renderer, task, send_seeds)
    t_sampled = clock()
    est = estimate(batch, estimator)
    datums, skipped_zero, skipped_empty = batch_datums(batch, est.advantages)
    loss_sum, optim_metrics, kl = None, {}, sample_train_kl([], [], [])
    if datums:
        fb = training_client.forward_backward(datums, loss_fn=config.loss_fn)
        op = training_client.optim_step(config.adam_params())
        fb_out = fb.result()
        op_out = op.result()
        loss_sum = float(fb_out.metrics.get("loss:sum", float("nan")))
        optim_metrics = dict(getattr(op_out, "metrics", None) or {})
        kept = [r["response_tokens"] for r in batch.records if r.get("in_batch")]
        kl = sample_train_kl(datums, kept, list(fb_out.loss_fn_outputs or []))
    t_trained = clock()
    metrics = step_metrics(config, step, batch.records, len(datums), skipped_zero, skipped_empty)
    metrics.update(batch.group_stats)
    if batch.heldout_group_stats.get("distinct_samples_per_group_mean") is not None:
        metrics.update({f"heldout_{k}": v for k, v in batch.heldout_group_stats.items()})
    metrics.update(
        {
            "loss_sum": loss_sum,
            **kl,
            "time_sample_s": t_sampled - t0,
            "time_train_s": t_trained - t_sampled,
            **{
                f"optim_{k.replace(':', '_')}": v
                for k, v in optim_metrics.items()
                if isinstance(v, int | float)
            },
        }
    )
    return TrainingStep(metrics, batch.records, datums)


def step_metrics(
    config: GS1ArmConfig,
    step: int,
    records: Sequence[Mapping[str, Any]],
    n_datums: int,
    skipped_zero: int = 0,
    skipped_empty: int = 0,
) -> dict[str, Any]:
    """The per-step metrics the spec's gates and curves read."""
    rewards = np.array([r["reward"] for r in records], dtype=np.float64)
    adv = np.array([r["advantage"] for r in records], dtype=np.float64)
    base = np.array([r["baseline"] for r in records], dtype=np.float64)
    n_prompts = len({r["prompt_id"] for r in records})
    ess = [r["effective_neighbors"] for r in records if r.get("effective_neighbors") is not None]
    held = [
        (r["baseline"], r["heldout_mean_reward"]) for r in records if r.get("heldout_mean_reward") is not None
    ]
    by_prompt: dict[Any, list[float]] = {}
    for r in records:
        by_prompt.setdefault(r["prompt_id"], []).append(float(r["reward"]))
    prompt_means = np.array([np.mean(v) for v in by_prompt.values()])
    out: dict[str, Any] = {
        "step": step,  # (the arm is the run's own: run.json and the tidy table's `arm` column)
        "estimator": config.estimator,
        "reward_mean": float(rewards.mean()),
        "reward_std": float(rewards.std()),
        # standard error of the mean reward with the prompt as the unit (a group's samples share a prompt)
        "reward_mean_se": (
            float(prompt_means.std(ddof=1) / math.sqrt(prompt_means.size)) if prompt_means.size > 1 else None
        ),
        "n_prompts": n_prompts,
        "n_rollouts": len(records),
        "executed_group_size": len(records) / n_prompts,
        "n_datums": n_datums,
        "n_skipped_zero_advantage": skipped_zero,
        "n_skipped_empty_response": skipped_empty,
        "frac_nonzero_advantage": float(np.mean(np.abs(adv) > 1e-6)),
        "advantage_abs_mean": float(np.mean(np.abs(adv))),
        "baseline_mean": float(base.mean()),
        "baseline_std": float(base.std()),
        "response_tokens_mean": float(np.mean([r["response_tokens"] for r in records])),
        "frac_truncated": float(np.mean([r["stop_reason"] == "length" for r in records])),
        "learning_rate": config.learning_rate,
        "bandwidth": config.bandwidth if config.estimator == "kernel_baseline" else None,
        "kernel_effective_neighbors_p10": float(np.percentile(ess, 10)) if ess else None,
        "kernel_effective_neighbors_median": float(np.median(ess)) if ess else None,
        "kernel_fallback_frac": (
            float(np.mean([bool(r.get("kernel_fallback")) for r in records])) if ess else None
        ),
        "baseline_reward_corr": pearson([b for b, _ in held], [h for _, h in held]) if held else None,
    }
    return out


# ----------------------------------------------------------------------------------------- capabilities


def check_model_served(capabilities: Any, base_model: str) -> None:
    """Raise ``ModelNotServedError`` unless ``base_model`` is listed as trainable and sampleable."""
    models = list(getattr(capabilities, "supported_models", None) or [])
    names = [m.model_name for m in models if m.model_name]
    match = [m for m in models if m.model_name == base_model]
    if not match:
        trainable = sorted(m.model_name for m in models if m.model_name and m.trainable)
        raise ModelNotServedError(
            f"{base_model} is not served by this backend; trainable models: {', '.join(trainable) or 'none'}. "
            "Record a fallback model in a revised spec rather than swapping silently."
        )
    model = match[0]
    missing = [what for what in ("trainable", "sampleable") if getattr(model, what) is False]
    if missing:
        raise ModelNotServedError(
            f"{base_model} is served but not {' or '.join(missing)} ({len(names)} models listed)"
        )


def service_capabilities(service_client: Any) -> Any:
    """The backend's ``GetServerCapabilitiesResponse`` (tinker's ServiceClient method is deprecated in
    favour of RestClient but answers the same; the local backend implements the same method)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return resolve(service_client.get_server_capabilities())


# ----------------------------------------------------------------------------------------- the run


@dataclass
class ArmRunResult:
    run: Run
    origin: str
    steps_run: int
    timings: dict[str, float]
    final_path: str | None = None


def _rebuild_estimator(config: GS1ArmConfig, run: Run, start: int) -> AdvantageEstimator:
    estimator = make_estimator(config)
    for step in range(start):
        rows = run.rollouts(step)
        estimator.observe(
            [r["prompt_id"] for r in rows],
            np.array([r["reward"] for r in rows], dtype=np.float64),
            np.array([r["phi"] for r in rows], dtype=np.float64).reshape(-1, 2),
        )
    return estimator


CHECKPOINT_TTL_SECONDS = 7 * 24 * 3600
"""``ttl_seconds`` of every resume state (``save_state``): 7 days, as tinker-cookbook's checkpoints. The
service then expires a state the loop could not delete; the loop itself keeps only the newest one."""


def start_client(config: GS1ArmConfig, service_client: Any, run: Run) -> tuple[Any, int]:
    """``(training client, first step to run)`` for a new or an unfinished run.

    A run with logged steps continues from the state saved with its last logged step (weights and Adam
    moments), never from a fresh LoRA; a run without one starts a fresh seed-``seed`` LoRA. Rollouts of
    the step to run that an interrupted process wrote without its metrics are moved aside to
    ``rollouts/interrupted/`` (kept, not read) and the step is redone."""
    logged = run.metrics()
    if logged:
        last = logged[-1]
        if not last.get("state_path"):
            raise ResumeError(
                f"{run.path}: step {last['step']} has no saved state; start a new run (--force)"
            )
        client = resolve(service_client.create_training_client_from_state_with_optimizer(last["state_path"]))
        start = int(last["step"]) + 1
    else:
        client = resolve(
            service_client.create_lora_training_client(
                base_model=config.base_model, rank=config.lora_rank, seed=config.seed
            )
        )
        start = 0
    leftover = run.path / "rollouts" / f"epoch-{start}.jsonl"
    if leftover.exists():
        aside = run.path / "rollouts" / "interrupted"
        aside.mkdir(exist_ok=True)
        n = len(list(aside.glob(f"epoch-{start}-*.jsonl")))
        leftover.rename(aside / f"epoch-{start}-{n}.jsonl")
    return client, start


def forget_state(service_client: Any, path: str | None) -> str | None:
    """Delete a resume state the run no longer needs; ``None`` when deleted, else why it was kept (the
    backend cannot delete checkpoints, or the call failed: its TTL then expires it)."""
    if not path:
        return None
    make_rest = getattr(service_client, "create_rest_client", None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # deprecated in favour of tinker.RestClient()
            rest = make_rest() if callable(make_rest) else None
        delete = getattr(rest, "delete_checkpoint_from_tinker_path", None)
        if not callable(delete):
            return "the backend cannot delete checkpoints"
        resolve(delete(path))
    except Exception as exc:  # never lose a run over housekeeping; the TTL is the backstop
        return f"{type(exc).__name__}: {exc}"
    return None


def run_arm(
    config: GS1ArmConfig,
    service_client: Any,
    renderer: Renderer,
    task: MathTask,
    store: RunStore,
    backend: str,
    *,
    resume: bool = True,
    evaluate_after: bool = True,
    stop_after: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[dict[str, Any]], None] | None = None,
    send_seeds: bool = True,
    plan_sha256: str | None = None,
) -> ArmRunResult:
    """Train one arm (resuming an unfinished run of the same config on the same backend), evaluate it
    greedily and finish the run. ``stop_after`` stops after that many new steps without finishing (to
    test resumption). ``send_seeds`` puts a seed on every sampling request (``sample_requests``).
    ``plan_sha256``: the SHA-256 of the spec file that governs the arm, recorded in a new run's
    ``run.json`` for the pre-registration audit (outside the run's spec hash).

    Each step saves a resume state (``save_state`` with ``CHECKPOINT_TTL_SECONDS``) before its rollouts
    and metrics are logged, then deletes the previous step's state; the last one is deleted once the run
    is finished (a finished run is reused, never resumed). The final sampler weights are kept."""
    t_start = clock()
    run, origin = store.start_or_reuse(
        config.experiment,
        config.arm,
        config.to_dict(),
        backend=backend,
        resume=resume,
        plan_sha256=plan_sha256,
    )
    if origin == "reused":
        return ArmRunResult(run, origin, 0, {})
    check_model_served(service_capabilities(service_client), config.base_model)
    training_client, start = start_client(config, service_client, run)
    if start == 0:
        run.set_provider(
            adam_params=config.adam_params().model_dump(),
            loss_fn=config.loss_fn,
            sampling={"requests": "one per sample (num_samples=1)", "seeds_sent": send_seeds},
            checkpoint_ttl_seconds=CHECKPOINT_TTL_SECONDS,
        )
    estimator = _rebuild_estimator(config, run, start)
    logged = run.metrics()
    previous_state = logged[-1].get("state_path") if logged else None
    kept: list[str] = []
    timings = {"setup_s": clock() - t_start}
    steps_run = 0
    t_train = clock()
    for step in range(start, config.steps):
        if stop_after is not None and steps_run >= stop_after:
            return ArmRunResult(run, origin, steps_run, timings)
        t_step = clock()
        result = rl_step(config, step, training_client, renderer, task, estimator, clock, send_seeds)
        state = training_client.save_state(
            f"{config.arm}-step-{step:04d}", ttl_seconds=CHECKPOINT_TTL_SECONDS
        ).result()
        result.metrics["state_path"] = state.path
        result.metrics["time_step_s"] = clock() - t_step
        run.write_rollouts(step, result.rollouts)
        run.append_metrics(result.metrics)
        why = forget_state(service_client, previous_state)  # resume now starts from the new state
        if why:
            kept.append(f"{previous_state} ({why})")
        previous_state = state.path
        steps_run += 1
        if progress is not None:
            progress(result.metrics)
    timings["train_s"] = clock() - t_train
    final_path = None
    if evaluate_after:
        t_eval = clock()
        final_path = training_client.save_weights_for_sampler(name=f"{config.arm}-final").result().path
        sampler = resolve(training_client.save_weights_and_get_sampling_client())
        rows = evaluate(config, sampler, renderer, task, send_seeds=send_seeds)
        run.write_eval(rows)
        timings["eval_s"] = clock() - t_eval
        run.set_provider(
            final_sampler_path=final_path,
            timings=timings,
            states_not_deleted={"count": len(kept), "last": kept[-1] if kept else None},
        )
        run.finish()
        forget_state(service_client, previous_state)  # after finish: a crash before it can still resume
    return ArmRunResult(run, origin, steps_run, timings, final_path)
