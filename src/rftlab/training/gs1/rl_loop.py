"""The client-side RL loop of the GS1-vs-GRPO study, on the tinker API (``rftlab.types`` backends).

It follows tinker-cookbook's ``recipes/rl_loop.py`` step for step, with the advantage estimator as the
one plug-in (``rftlab.training.gs1.advantages``). Each step:

1. ``save_weights_and_get_sampling_client()`` → a sampler on the current weights;
2. the step's prompts from a fixed seed-0 shuffled order (GRPO 8 prompts × 8 samples, GS1 64 × 1),
   rendered with the cookbook's math_rl prompt (few-shot prefix + ``\\boxed{}`` suffix);
3. per prompt, ``compute_logprobs(prompt)`` (the GS1 feature φ) and ``sample(prompt, G, params)``;
4. grade each response with the cookbook's GSM8K grader (``extract_boxed`` + sympy ``grade_answer``):
   the exact-answer reward, 1.0 or 0.0;
5. advantages from the arm's estimator; a group whose advantages are all exactly 0 is skipped like the
   cookbook does (for GRPO a constant-reward group; for GS1, where every group has one rollout, only a
   rollout with ``r_i == b_i`` — constant-reward groups are *not* dropped, their advantage is ``r - b``);
6. datums in the cookbook layout (prompt + response[:-1]; ``target_tokens``, sampler ``logprobs`` and
   ``advantages`` padded with zeros over the prompt);
7. ``forward_backward(datums, loss_fn="importance_sampling")`` and
   ``optim_step(AdamParams(learning_rate, beta1=0.9, beta2=0.95, eps=1e-8))``, submitted together;
8. ``save_state`` (resume point), then the step's metrics and rollouts go to the run store.

After the last step: ``save_weights_for_sampler("final")`` and greedy evaluation (temperature 0) of the
test items into the run's ``eval.jsonl``. The loop never branches on the backend: the same code drives
``tinker.ServiceClient`` and the local tinker-compatible backend; every client is injected.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from rftlab.envs.gs1.grading import grade
from rftlab.envs.gs1.task import MathTask
from rftlab.runs.store import Run, RunStore
from rftlab.training.group_stats import pearson
from rftlab.training.gs1.advantages import (
    MIN_KERNEL_MASS,
    WINDOW,
    KernelBaselineResult,
    WindowRollouts,
    group_mean,
    kernel_baseline,
    prompt_features,
)

EXPERIMENT = "gs1_vs_grpo"
LOSS_FN = "importance_sampling"
DEFAULT_RENDERER = "qwen3_5"  # the cookbook's recommended renderer for the served Qwen3.5 models
MAX_RESPONSE_CHARS = 4000  # response text kept per rollout / eval item (the full tokens are not logged)


class ModelNotServedError(RuntimeError):
    """The backend does not offer the base model for training and sampling."""


class ResumeError(RuntimeError):
    """An unfinished run cannot be resumed (no saved state for its last logged step)."""


# ------------------------------------------------------------------------------------------ config


@dataclass(frozen=True)
class GS1ArmConfig:
    """One arm of the study as data (an ``rftlab.types.ArmSpec``): everything that changes its outcome.

    Sizes (``steps``, ``groups_per_batch``, ``max_tokens``, ``n_train``, ``n_eval``) are fields so a
    smaller backend can run the spec's recipe at its own scale; ``arms_from_spec`` fills the spec's values.
    """

    arm: str
    estimator: str  # "group_mean" | "kernel_baseline"
    group_size: int
    groups_per_batch: int
    experiment: str = EXPERIMENT
    steps: int = 40
    max_tokens: int = 512
    temperature: float = 1.0
    learning_rate: float = 4e-5
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    lora_rank: int = 32
    seed: int = 0
    base_model: str = "Qwen/Qwen3.5-2B"
    renderer_name: str = DEFAULT_RENDERER
    task: str = "gsm8k"
    n_train: int = 2560
    n_eval: int = 1319
    eval_max_tokens: int = 512
    bandwidth: float = 0.5
    window: int = WINDOW
    min_kernel_mass: float = MIN_KERNEL_MASS
    loss_fn: str = LOSS_FN
    heldout_group_size: int = 0  # pilot only: extra samples per prompt for baseline_reward_corr
    heldout_steps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.estimator not in ("group_mean", "kernel_baseline"):
            raise ValueError(f"unknown estimator {self.estimator!r}")
        for name in ("group_size", "groups_per_batch", "max_tokens", "n_eval", "eval_max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.steps < 0 or self.n_train < self.groups_per_batch:
            raise ValueError("steps must be >= 0 and n_train >= groups_per_batch")

    @property
    def rollouts_per_step(self) -> int:
        return self.group_size * self.groups_per_batch

    def adam_params(self):
        from tinker import types

        return types.AdamParams(
            learning_rate=self.learning_rate, beta1=self.beta1, beta2=self.beta2, eps=self.eps
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["heldout_steps"] = list(self.heldout_steps)
        return out


ARM_ESTIMATORS = {"group_mean": "group_mean", "kernel_cross_prompt_baseline": "kernel_baseline"}


def arms_from_spec(spec: Mapping[str, Any], **overrides: Any) -> dict[str, GS1ArmConfig]:
    """The spec's arms (``grpo_gs8``, ``gs1_kernel``) as configs, with shared overrides applied."""
    opt = spec.get("optimizer", {})
    arms = {}
    for arm in spec["arms"]:
        fields: dict[str, Any] = {
            "arm": arm["name"],
            "estimator": ARM_ESTIMATORS[arm["advantage"]],
            "group_size": int(arm["group_size"]),
            "groups_per_batch": int(arm["groups_per_batch"]),
            "learning_rate": float(arm.get("lr", opt.get("lr", 4e-5))),
            "seed": int(arm.get("seed", 0)),
            "steps": int(spec["steps"]),
            "lora_rank": int(spec["lora_rank"]),
            "base_model": spec["base_model"],
            "n_train": int(spec["dataset"]["n_examples"]),
            "n_eval": int(spec["eval"]["n_examples"]),
        }
        fields.update(overrides)
        arms[arm["name"]] = GS1ArmConfig(**fields)
    return arms


# -------------------------------------------------------------------------------------------- task


def prompt_order(n_available: int, seed: int) -> np.ndarray:
    """The fixed shuffled order of the train split: ``numpy.random.default_rng(seed).permutation``, the
    same permutation as ``datasets.Dataset.shuffle(seed=seed)`` (the cookbook's GSM8K order)."""
    return np.random.default_rng(seed).permutation(n_available)


def step_prompt_indices(config: GS1ArmConfig, step: int, n_available: int) -> list[int]:
    """Train-problem indices of ``step``: the next ``groups_per_batch`` of the first ``n_train`` prompts
    of the seed-``seed`` order (wrapping around when those are exhausted)."""
    n = min(config.n_train, n_available)
    order = prompt_order(n_available, config.seed)[:n]
    start = step * config.groups_per_batch
    return [int(order[(start + k) % n]) for k in range(config.groups_per_batch)]


# --------------------------------------------------------------------------------------- estimators


@dataclass(frozen=True)
class AdvantageOutput:
    advantages: np.ndarray
    baselines: np.ndarray
    effective_neighbors: np.ndarray | None = None
    fallback: np.ndarray | None = None
    kernel: KernelBaselineResult | None = None


class AdvantageEstimator(Protocol):
    """The loop's plug-in: advantages of one step's rollouts; ``observe`` adds them to any state."""

    name: str

    def __call__(
        self, prompt_ids: Sequence[Any], rewards: np.ndarray, phi: np.ndarray
    ) -> AdvantageOutput: ...

    def observe(self, prompt_ids: Sequence[Any], rewards: np.ndarray, phi: np.ndarray) -> None: ...


class GroupMeanEstimator:
    """GRPO: reward minus the mean of its prompt's group (stateless)."""

    name = "group_mean"

    def __call__(self, prompt_ids, rewards, phi) -> AdvantageOutput:
        adv = group_mean(rewards, list(prompt_ids))
        return AdvantageOutput(adv, np.asarray(rewards, dtype=np.float64) - adv)

    def observe(self, prompt_ids, rewards, phi) -> None:
        return None


class KernelBaselineEstimator:
    """GS1: kernel-weighted cross-prompt baseline over a sliding window of earlier rollouts."""

    name = "kernel_baseline"

    def __init__(self, bandwidth: float = 0.5, window: int = WINDOW, min_mass: float = MIN_KERNEL_MASS):
        self.bandwidth, self.window, self.min_mass = bandwidth, window, min_mass
        self.history = WindowRollouts.empty()

    def __call__(self, prompt_ids, rewards, phi) -> AdvantageOutput:
        res = kernel_baseline(
            rewards, phi, list(prompt_ids), self.history, self.bandwidth, self.window, self.min_mass
        )
        return AdvantageOutput(res.advantages, res.baselines, res.effective_neighbors, res.fallback, res)

    def observe(self, prompt_ids, rewards, phi) -> None:
        self.history = self.history.extend(rewards, phi, list(prompt_ids), keep=self.window)


def make_estimator(config: GS1ArmConfig) -> AdvantageEstimator:
    if config.estimator == "group_mean":
        return GroupMeanEstimator()
    return KernelBaselineEstimator(config.bandwidth, config.window, config.min_kernel_mass)


# ------------------------------------------------------------------------------------------ datums


def make_datum(prompt: Any, tokens: Sequence[int], logprobs: Sequence[float], advantage: float):
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


def resolve(value: Any) -> Any:
    """A client-creation result: tinker returns futures of clients (``.result()``), a backend may
    return the client itself."""
    result = getattr(value, "result", None)
    return result() if callable(result) else value


def sampling_params(config: GS1ArmConfig, renderer: Any, seed: int | None, greedy: bool = False):
    from tinker import types

    return types.SamplingParams(
        max_tokens=config.eval_max_tokens if greedy else config.max_tokens,
        temperature=0.0 if greedy else config.temperature,
        stop=renderer.get_stop_sequences(),
        seed=seed,
    )


def response_text(renderer: Any, tokens: Sequence[int]) -> str:
    from tinker_cookbook import renderers

    message, _ = renderer.parse_response(list(tokens))
    return renderers.get_text_content(message)


@dataclass
class TrainingStep:
    """What one training step produced (its metrics row and per-rollout records)."""

    metrics: dict[str, Any]
    rollouts: list[dict[str, Any]]
    datums: list[Any] = field(default_factory=list)


def _seed(config: GS1ArmConfig, step: int, k: int, salt: int = 0) -> int:
    return (config.seed * 1_000_003 + step * 10_007 + k * 101 + salt) % (2**31 - 1)


@dataclass
class SampledBatch:
    """One step's graded rollouts: ``records`` (logged per rollout) and, aligned with them, ``seqs``
    (prompt ``ModelInput``, response tokens, sampler logprobs) for building datums."""

    records: list[dict[str, Any]]
    seqs: list[tuple[Any, list[int], list[float]]]


def sample_batch(
    config: GS1ArmConfig, step: int, sampler: Any, renderer: Any, task: MathTask
) -> SampledBatch:
    """Steps 2-4: the step's prompts, their logprobs (φ), ``group_size`` samples each, graded."""
    problems = [task.train[i] for i in step_prompt_indices(config, step, len(task.train))]
    prompts = [task.prompt(renderer, p) for p in problems]
    lp_futures = [sampler.compute_logprobs(p) for p in prompts]
    sample_futures = [
        sampler.sample(
            prompt=p,
            num_samples=config.group_size,
            sampling_params=sampling_params(config, renderer, _seed(config, step, k)),
        )
        for k, p in enumerate(prompts)
    ]
    heldout = config.heldout_group_size > 0 and step in config.heldout_steps
    heldout_futures = [
        sampler.sample(
            prompt=p,
            num_samples=config.heldout_group_size,
            sampling_params=sampling_params(config, renderer, _seed(config, step, k, salt=7)),
        )
        for k, p in enumerate(prompts)
        if heldout
    ]
    records: list[dict[str, Any]] = []
    seqs: list[tuple[Any, list[int], list[float]]] = []
    for k, (problem, prompt) in enumerate(zip(problems, prompts, strict=True)):
        phi = prompt_features(prompt.length, lp_futures[k].result())
        response = sample_futures[k].result()
        if len(response.sequences) != config.group_size:
            raise RuntimeError(
                f"backend returned {len(response.sequences)} samples for num_samples={config.group_size}"
            )
        held_mean = None
        if heldout:
            held = heldout_futures[k].result().sequences
            held_mean = float(
                np.mean([grade(response_text(renderer, s.tokens), problem.answer) for s in held])
            )
        for g, seq in enumerate(response.sequences):
            tokens = [int(t) for t in seq.tokens]
            if seq.logprobs is None:
                raise RuntimeError(
                    "the sampler returned no logprobs; the importance_sampling loss needs them"
                )
            text = response_text(renderer, tokens)
            records.append(
                {
                    "step": step,
                    "prompt_id": problem.item_id,
                    "sample": g,
                    "reward": grade(text, problem.answer),
                    "phi": [phi[0], phi[1]],
                    "prompt_tokens": prompt.length,
                    "response_tokens": len(tokens),
                    "stop_reason": str(seq.stop_reason),
                    "response": text[:MAX_RESPONSE_CHARS],
                    "heldout_mean_reward": held_mean,
                }
            )
            seqs.append((prompt, tokens, [float(x) for x in seq.logprobs]))
    return SampledBatch(records, seqs)


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
        if est.effective_neighbors is not None:
            rec["effective_neighbors"] = float(est.effective_neighbors[n])
            rec["kernel_fallback"] = bool(est.fallback[n])
    return est


def batch_datums(batch: SampledBatch, advantages: Sequence[float]) -> tuple[list[Any], int, int]:
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


def rl_step(
    config: GS1ArmConfig,
    step: int,
    training_client: Any,
    renderer: Any,
    task: MathTask,
    estimator: AdvantageEstimator,
    clock: Callable[[], float] = time.perf_counter,
) -> TrainingStep:
    """One step of the loop (the module docstring's 1-7); the caller logs and checkpoints."""
    t0 = clock()
    sampler = resolve(training_client.save_weights_and_get_sampling_client())
    batch = sample_batch(config, step, sampler, renderer, task)
    t_sampled = clock()
    est = estimate(batch, estimator)
    datums, skipped_zero, skipped_empty = batch_datums(batch, est.advantages)
    loss_sum, optim_metrics = None, {}
    if datums:
        fb = training_client.forward_backward(datums, loss_fn=config.loss_fn)
        op = training_client.optim_step(config.adam_params())
        fb_out = fb.result()
        op_out = op.result()
        loss_sum = float(fb_out.metrics.get("loss:sum", float("nan")))
        optim_metrics = dict(getattr(op_out, "metrics", None) or {})
    t_trained = clock()
    metrics = step_metrics(config, step, batch.records, len(datums), skipped_zero, skipped_empty)
    metrics.update(
        {
            "loss_sum": loss_sum,
            "time_sample_s": t_sampled - t0,
            "time_train_s": t_trained - t_sampled,
            **{f"optim_{k}": v for k, v in optim_metrics.items() if isinstance(v, int | float)},
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
    out: dict[str, Any] = {
        "step": step,  # (the arm is the run's own: run.json and the tidy table's `arm` column)
        "estimator": config.estimator,
        "reward_mean": float(rewards.mean()),
        "reward_std": float(rewards.std()),
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


# -------------------------------------------------------------------------------------------- eval


def evaluate(
    config: GS1ArmConfig, sampler: Any, renderer: Any, task: MathTask, n_eval: int | None = None
) -> list[dict[str, Any]]:
    """Greedy decoding of the first ``n_eval`` test items: one row per item (``item_id``, ``correct``,
    ``response``, ``answer``, ``stop_reason``, ``response_tokens``)."""
    items = task.test[: (n_eval or config.n_eval)]
    futures = [
        sampler.sample(
            prompt=task.prompt(renderer, p),
            num_samples=1,
            sampling_params=sampling_params(config, renderer, _seed(config, 0, k, salt=13), greedy=True),
        )
        for k, p in enumerate(items)
    ]
    rows = []
    for problem, fut in zip(items, futures, strict=True):
        seq = fut.result().sequences[0]
        text = response_text(renderer, seq.tokens)
        rows.append(
            {
                "item_id": problem.item_id,
                "correct": int(grade(text, problem.answer)),
                "response": text[:MAX_RESPONSE_CHARS],
                "answer": problem.answer,
                "stop_reason": str(seq.stop_reason),
                "response_tokens": len(seq.tokens),
            }
        )
    return rows


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


def run_arm(
    config: GS1ArmConfig,
    service_client: Any,
    renderer: Any,
    task: MathTask,
    store: RunStore,
    backend: str,
    *,
    resume: bool = True,
    evaluate_after: bool = True,
    save_state_every: int = 1,
    stop_after: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> ArmRunResult:
    """Train one arm (resuming an unfinished run of the same config on the same backend), evaluate it
    greedily and finish the run. ``stop_after`` stops after that many new steps without finishing (to
    test resumption)."""
    t_start = clock()
    run, origin = store.start_or_reuse(
        config.experiment, config.arm, config.to_dict(), backend=backend, resume=resume
    )
    if origin == "reused":
        return ArmRunResult(run, origin, 0, {})
    check_model_served(service_capabilities(service_client), config.base_model)
    logged = run.metrics()
    start = 0
    if logged:
        last = logged[-1]
        if not last.get("state_path"):
            raise ResumeError(
                f"{run.path}: step {last['step']} has no saved state; start a new run (--force)"
            )
        training_client = resolve(
            service_client.create_training_client_from_state_with_optimizer(last["state_path"])
        )
        start = int(last["step"]) + 1
    leftover = run.path / "rollouts" / f"epoch-{start}.jsonl"
    if leftover.exists():  # an interrupted step wrote its rollouts but not its metrics: it is redone
        leftover.unlink()
    else:
        training_client = resolve(
            service_client.create_lora_training_client(
                base_model=config.base_model, rank=config.lora_rank, seed=config.seed
            )
        )
        run.set_provider(adam_params=config.adam_params().model_dump(), loss_fn=config.loss_fn)
    estimator = _rebuild_estimator(config, run, start)
    timings = {"setup_s": clock() - t_start}
    steps_run = 0
    t_train = clock()
    for step in range(start, config.steps):
        if stop_after is not None and steps_run >= stop_after:
            return ArmRunResult(run, origin, steps_run, timings)
        t_step = clock()
        result = rl_step(config, step, training_client, renderer, task, estimator, clock=clock)
        if save_state_every and ((step + 1) % save_state_every == 0 or step + 1 == config.steps):
            result.metrics["state_path"] = (
                training_client.save_state(f"{config.arm}-step-{step:04d}").result().path
            )
        result.metrics["time_step_s"] = clock() - t_step
        run.write_rollouts(step, result.rollouts)
        run.append_metrics(result.metrics)
        steps_run += 1
        if progress is not None:
            progress(result.metrics)
    timings["train_s"] = clock() - t_train
    final_path = None
    if evaluate_after:
        t_eval = clock()
        final_path = training_client.save_weights_for_sampler(name=f"{config.arm}-final").result().path
        sampler = resolve(training_client.save_weights_and_get_sampling_client())
        rows = evaluate(config, sampler, renderer, task)
        run.write_eval(rows)
        timings["eval_s"] = clock() - t_eval
        run.set_provider(final_sampler_path=final_path, timings=timings)
        run.finish()
    return ArmRunResult(run, origin, steps_run, timings, final_path)
