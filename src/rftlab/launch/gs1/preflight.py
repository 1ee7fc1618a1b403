"""The GS1 study's correctness preflight (``rftlab gs1 preflight``), written to ``preflight.json``.

Checks (the spec's ``correctness_preflight``, ``restoration_preflight`` and the activation-failure
plan's offline part):

(a) ``estimators_offline`` — the GS1 estimator in float64 on seeded synthetic rewards: forced activation
    (heterogeneous φ gives a non-constant baseline) and forced non-activation (a huge bandwidth gives
    ``b_i`` = the window mean, a batch-mean REINFORCE baseline);
(b) ``treatment_disabled_datums`` — on one fixed batch sampled from the backend, the loop's group-mean
    advantages equal the cookbook's ``compute_advantages`` exactly, and its datums equal the cookbook's
    ``assemble_training_data`` ones (``mask`` removed) on every loss-bearing position; over the prompt
    the two differ only in ``target_tokens``, where both carry advantage 0;
(c) ``loss_and_gradient`` — ``forward_backward`` of the loop's datums vs the cookbook's on two fresh
    clients of the same seed: loss and LoRA gradient within the spec's baseline tolerances (atol, rtol,
    min cosine); and the loss against a reference computed in float64 from ``forward``'s per-token
    logprobs, within the reference tolerances. Needs a backend exposing ``last_gradients()``;
(d) ``one_step_<arm>`` — per arm, one ``forward_backward`` + ``optim_step`` on a sampled example carrying
    that arm's computed advantage: both succeed and the loss is finite;
(e) ``restoration`` — both arms' clients (same rank and seed) start from the same LoRA initialisation:
    identical ``forward`` logprobs on the fixed batch (and identical ``lora_state()`` when the backend
    exposes weights), and the arms' optimizer settings equal the spec's restoration group;
(f) ``independent_group_samples`` — the fixed batch's GRPO groups, sampled through the loop's own
    requests, hold no duplicate that independent sampling makes implausible
    (``rl_loop.group_sample_stats``): a service returning one sample several times (tinker-feedback
    #79) would leave GRPO fewer distinct rollouts than GS1 and tilt the comparison.

A check is ``passed``, ``failed`` or ``not_run`` (with the reason); the preflight is *resolved* only when
every check passed. No full run starts while it is unresolved.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from rftlab.launch.gs1.spec import GS1Spec
from rftlab.runs.store import atomic_write_text
from rftlab.training.backend_fields import loss_sum
from rftlab.training.gs1.advantages import group_mean, kernel_baseline
from rftlab.training.gs1.rl_loop import (
    IMPLAUSIBLE_DUPLICATE_PROB,
    GroupMeanEstimator,
    GS1ArmConfig,
    MathTask,
    SampledBatch,
    batch_datums,
    estimate,
    make_datum,
    make_estimator,
    resolve,
    sample_batch,
)

if TYPE_CHECKING:
    import torch
    from tinker.types import Datum
    from tinker_cookbook.renderers import Renderer

DEFAULT_TOLERANCES = {
    "baseline_loss": {"atol": 1e-6, "rtol": 1e-5},
    "baseline_gradient": {"atol": 1e-5, "rtol": 1e-4, "min_cosine": 0.99999},
    "reference_loss": {"atol": 1e-6, "rtol": 1e-5},
    "reference_gradient": {"atol": 1e-5, "rtol": 1e-4, "min_cosine": 0.99999},
}


@dataclass
class PreflightCheck:
    id: str
    status: str  # passed | failed | not_run
    detail: str
    values: dict[str, Any] = field(default_factory=dict)
    backend: str | None = None
    seconds: float | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class PreflightReport:
    checks: list[PreflightCheck]
    backend: str
    spec_sha256: str | None = None
    created_at: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    @property
    def status(self) -> str:
        if any(c.status == "failed" for c in self.checks):
            return "failed"
        if all(c.status == "passed" for c in self.checks):
            return "passed"
        return "unresolved"

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "passed": self.passed,
            "backend": self.backend,
            "spec_sha256": self.spec_sha256,
            "created_at": self.created_at,
            "checks": [asdict(c) for c in self.checks],
        }


def tolerances_from_spec(spec: GS1Spec | None) -> dict[str, dict[str, float]]:
    """The loss path's tolerances of the spec over ``DEFAULT_TOLERANCES`` (the defaults without a spec)."""
    return spec.tolerances(DEFAULT_TOLERANCES) if spec is not None else dict(DEFAULT_TOLERANCES)


def _timed(fn, *args, **kwargs) -> PreflightCheck:
    t0 = time.perf_counter()
    try:
        check = fn(*args, **kwargs)
    except Exception as exc:  # a backend error is a failed check with its message, not a crash
        name = getattr(fn, "check_id", fn.__name__)
        check = PreflightCheck(name, "failed", f"{type(exc).__name__}: {exc}")
    check.seconds = time.perf_counter() - t0
    return check


# ------------------------------------------------------------------------------------------- (a)


def check_estimators_offline(bandwidth: float = 0.5, seed: int = 0) -> PreflightCheck:
    """(a) forced activation and forced non-activation of the GS1 estimator, float64."""
    rng = np.random.default_rng(seed)
    n = 64
    x = rng.normal(size=n)
    phi = np.stack([x, 0.1 * rng.normal(size=n)], axis=1)
    rewards = (x > 0).astype(np.float64)  # reward predictable from φ
    ids = [f"p{i}" for i in range(n)]
    active = kernel_baseline(rewards, phi, ids, bandwidth=bandwidth)
    b_std = float(np.std(active.baselines))
    corr = float(np.corrcoef(active.baselines, rewards)[0, 1])
    flat = kernel_baseline(rewards, phi, ids, bandwidth=1e6)
    loo_mean = (rewards.sum() - rewards) / (n - 1)
    max_dev = float(np.max(np.abs(flat.baselines - loo_mean)))
    dtype_ok = active.baselines.dtype == np.float64 and flat.advantages.dtype == np.float64
    gm = group_mean(rewards, ids)
    passed = b_std > 0.05 and corr > 0.3 and max_dev < 1e-9 and dtype_ok and np.all(gm == 0.0)
    return PreflightCheck(
        "estimators_offline",
        "passed" if passed else "failed",
        (
            f"forced activation: std(b)={b_std:.4f}, corr(b, r)={corr:.3f}; forced non-activation "
            f"(h=1e6): max |b - window mean|={max_dev:.2e}; group_mean with G=1 is identically 0"
        ),
        {"activation_baseline_std": b_std, "activation_corr": corr, "nonactivation_max_dev": max_dev},
        backend="offline",
    )


# ------------------------------------------------------------------------------------------- (b)


def cookbook_grpo_datums(batch: SampledBatch) -> tuple[list[Datum], np.ndarray, list[int]]:
    """The stock cookbook path on the same rollouts: ``compute_advantages`` + ``assemble_training_data``,
    with the ``rl_loop`` rule (groups whose advantages are all 0 are skipped). Returns the datums (with
    ``mask``), the per-rollout advantages in batch order and the rollout index of each datum."""
    from tinker import types
    from tinker_cookbook.completers import TokensWithLogprobs
    from tinker_cookbook.rl.data_processing import assemble_training_data, compute_advantages
    from tinker_cookbook.rl.types import Trajectory, TrajectoryGroup, Transition

    ids = [r["prompt_id"] for r in batch.records]
    order = list(dict.fromkeys(ids))
    members = {pid: [n for n, x in enumerate(ids) if x == pid] for pid in order}
    groups = []
    for pid in order:
        trajs = []
        for n in members[pid]:
            prompt, tokens, lps = batch.seqs[n]
            transition = Transition(
                ob=prompt,
                ac=TokensWithLogprobs(tokens=list(tokens), maybe_logprobs=list(lps)),
                reward=float(batch.records[n]["reward"]),
                episode_done=True,
            )
            trajs.append(Trajectory(transitions=[transition], final_ob=types.ModelInput.empty()))
        groups.append(TrajectoryGroup(trajs, [0.0] * len(trajs), [{} for _ in trajs]))
    adv_groups = compute_advantages(groups)
    advantages = np.zeros(len(ids), dtype=np.float32)
    for pid, adv in zip(order, adv_groups, strict=True):
        advantages[members[pid]] = adv.numpy()
    data, meta = assemble_training_data(groups, adv_groups)
    kept, rollout_of = [], []
    for datum, m in zip(data, meta, strict=True):
        if all(float(a) == 0.0 for a in adv_groups[m["group_idx"]]):
            continue
        kept.append(datum)
        rollout_of.append(members[order[m["group_idx"]]][m["traj_idx"]])
    return kept, advantages, rollout_of


def strip_mask(datum: Datum) -> Datum:
    from tinker import types

    return types.Datum(
        model_input=datum.model_input,
        loss_fn_inputs={k: v for k, v in datum.loss_fn_inputs.items() if k != "mask"},
    )


def check_treatment_disabled(batch: SampledBatch) -> PreflightCheck:
    """(b) the loop's GRPO advantages and datums vs the cookbook's on one fixed batch."""
    fresh = SampledBatch([dict(r) for r in batch.records], batch.seqs)
    est = estimate(fresh, GroupMeanEstimator())
    ours, _, _ = batch_datums(fresh, est.advantages)
    theirs, cook_adv, _ = cookbook_grpo_datums(batch)
    problems = []
    if not ours:
        problems.append("the fixed batch has no non-zero advantage (constant rewards in every group)")
    adv_equal = bool(np.array_equal(est.advantages.astype(np.float32), cook_adv))
    if not adv_equal:
        problems.append(f"advantages differ (max {np.max(np.abs(est.advantages - cook_adv)):.3g})")
    if len(ours) != len(theirs):
        problems.append(f"{len(ours)} datums vs the cookbook's {len(theirs)}")
    positions = 0
    for k, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a.model_input.to_ints() != b.model_input.to_ints():
            problems.append(f"datum {k}: model_input tokens differ")
            continue
        mask = b.loss_fn_inputs["mask"].to_numpy() > 0
        positions += int(mask.sum())
        for key in ("target_tokens", "logprobs", "advantages"):
            x, y = a.loss_fn_inputs[key].to_numpy(), b.loss_fn_inputs[key].to_numpy()
            if x.shape != y.shape or not np.array_equal(x[mask], y[mask]):
                problems.append(f"datum {k}: {key} differs on a loss-bearing position")
        for key in ("advantages",):
            if np.any(a.loss_fn_inputs[key].to_numpy()[~mask] != 0) or np.any(
                b.loss_fn_inputs[key].to_numpy()[~mask] != 0
            ):
                problems.append(f"datum {k}: non-zero advantage outside the response")
    detail = (
        f"{len(ours)} datums from {len(batch.records)} rollouts; advantages equal bit for bit: {adv_equal}; "
        f"{positions} loss-bearing positions compared exactly"
    )
    return PreflightCheck(
        "treatment_disabled_datums",
        "failed" if problems else "passed",
        detail + ("; " + "; ".join(problems[:5]) if problems else ""),
        {"n_datums": len(ours), "n_rollouts": len(batch.records), "positions": positions},
    )


# ------------------------------------------------------------------------------------------- (c)


def _flat_gradients(grads: Mapping[str, Any]) -> np.ndarray:
    parts = []
    for name in sorted(grads):
        g = grads[name]
        g = g.detach().cpu().double().numpy() if hasattr(g, "detach") else np.asarray(g, dtype=np.float64)
        parts.append(g.ravel())
    return np.concatenate(parts) if parts else np.zeros(0)


class ArrayComparison(TypedDict):
    """How two arrays compare (``compare_arrays``): within tolerance, largest gap, cosine, first norm."""

    allclose: bool
    max_abs_diff: float | None
    cosine: float
    norm: float


def compare_arrays(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> ArrayComparison:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    cosine = float(np.dot(a, b) / (na * nb)) if na > 0 and nb > 0 else (1.0 if na == nb == 0 else 0.0)
    return {
        "allclose": bool(a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=rtol)),
        "max_abs_diff": float(np.max(np.abs(a - b))) if a.size and a.shape == b.shape else None,
        "cosine": cosine,
        "norm": na,
    }


def reference_is_loss(data: Sequence[Datum], trainer_logprobs: Sequence[np.ndarray]) -> float:
    """``-Σ exp(logp - sampler_logp)·A`` in float64 from per-token trainer logprobs (the SDK's
    ``importance_sampling`` definition: a token sum, unclipped)."""
    total = 0.0
    for datum, lp in zip(data, trainer_logprobs, strict=True):
        lp = np.asarray(lp, dtype=np.float64)
        slp = datum.loss_fn_inputs["logprobs"].to_numpy().astype(np.float64)
        adv = datum.loss_fn_inputs["advantages"].to_numpy().astype(np.float64)
        total -= float(np.sum(np.exp(lp - slp) * adv))
    return total


def reference_loss_and_gradients(
    model: torch.nn.Module, data: Sequence[Datum]
) -> tuple[float, dict[str, torch.Tensor]]:
    """An independent reference for a backend exposing its torch model: our own forward pass
    (``model(input_ids).logits``, ``log_softmax`` in float64), the ``importance_sampling`` loss written
    out, and autograd; gradients of the trainable parameters by name (peft's prefix removed)."""
    import torch

    params = {
        (n[len("base_model.model.") :] if n.startswith("base_model.model.") else n): p
        for n, p in model.named_parameters()
        if p.requires_grad
    }
    for p in params.values():
        p.grad = None
    total = torch.zeros((), dtype=torch.float64)
    for d in data:
        ids = torch.tensor([d.model_input.to_ints()])
        logits = model(input_ids=ids).logits[0].double()
        target = torch.as_tensor(d.loss_fn_inputs["target_tokens"].to_numpy()).long()
        lp = torch.log_softmax(logits, dim=-1).gather(1, target[:, None]).squeeze(1)
        slp = torch.as_tensor(d.loss_fn_inputs["logprobs"].to_numpy(), dtype=torch.float64)
        adv = torch.as_tensor(d.loss_fn_inputs["advantages"].to_numpy(), dtype=torch.float64)
        total = total - (torch.exp(lp - slp) * adv).sum()
    total.backward()
    grads = {
        n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)) for n, p in params.items()
    }
    for p in params.values():
        p.grad = None
    return float(total.detach()), grads


def check_loss_and_gradient(
    make_client,
    ours: Sequence[Datum],
    cookbook: Sequence[Datum],
    tolerances: Mapping[str, Mapping[str, float]],
) -> PreflightCheck:
    """(c) on two fresh clients from ``make_client()`` (same base, rank and seed)."""
    if not ours:
        return PreflightCheck(
            "loss_and_gradient",
            "failed",
            "the fixed batch has no non-zero advantage (constant rewards in every group): nothing to compare",
        )
    c1, c2 = make_client(), make_client()
    if not (callable(getattr(c1, "last_gradients", None))):
        return PreflightCheck(
            "loss_and_gradient",
            "not_run",
            "not run: the backend does not expose gradients (last_gradients)",
        )
    out1 = c1.forward_backward(list(ours), loss_fn="importance_sampling").result()
    g1 = _flat_gradients(c1.last_gradients())
    out2 = c2.forward_backward([strip_mask(d) for d in cookbook], loss_fn="importance_sampling").result()
    g2 = _flat_gradients(c2.last_gradients())
    l1, l2 = loss_sum(out1), loss_sum(out2)
    tl, tg = tolerances["baseline_loss"], tolerances["baseline_gradient"]
    loss_ok = math.isfinite(l1) and math.isclose(l1, l2, rel_tol=tl["rtol"], abs_tol=tl["atol"])
    grad = compare_arrays(g1, g2, tg["atol"], tg["rtol"])
    grad_ok = grad["allclose"] and grad["cosine"] >= tg["min_cosine"] and grad["norm"] > 0

    fwd = c1.forward(list(ours), loss_fn="importance_sampling").result()
    trainer_lps = [o["logprobs"].to_numpy() for o in fwd.loss_fn_outputs]
    ref = reference_is_loss(ours, trainer_lps)
    tr = tolerances["reference_loss"]
    ref_ok = math.isclose(l1, ref, rel_tol=tr["rtol"], abs_tol=tr["atol"])
    values = {
        "loss_loop": l1,
        "loss_cookbook": l2,
        "loss_reference_float64": ref,
        "gradient": grad,
        "gradient_size": int(g1.size),
    }
    passed = loss_ok and grad_ok and ref_ok
    ref_detail = "reference gradient not run: the backend does not expose its model"
    c3 = make_client()
    if getattr(c3, "model", None) is not None and hasattr(c3.model, "named_parameters"):
        rg = tolerances["reference_gradient"]
        ref_loss2, ref_grads = reference_loss_and_gradients(c3.model, list(ours))
        names = sorted(c1.last_gradients())
        if sorted(ref_grads) != names:
            passed = False
            ref_detail = "reference gradient: parameter names differ from the backend's"
        else:
            rgrad = compare_arrays(g1, _flat_gradients(ref_grads), rg["atol"], rg["rtol"])
            rloss_ok = math.isclose(l1, ref_loss2, rel_tol=tr["rtol"], abs_tol=tr["atol"])
            rgrad_ok = rgrad["allclose"] and rgrad["cosine"] >= rg["min_cosine"]
            values["reference_autograd_loss"] = ref_loss2
            values["reference_gradient"] = rgrad
            passed = passed and rloss_ok and rgrad_ok
            ref_detail = (
                f"independent forward+autograd: loss {ref_loss2:.9g} ({'ok' if rloss_ok else 'OUT of tolerance'}), "
                f"gradient cosine {rgrad['cosine']:.8f}, max |diff| {rgrad['max_abs_diff']:.3g} "
                f"({'within' if rgrad_ok else 'OUTSIDE'} the reference tolerances)"
            )
    else:
        values["reference_gradient"] = ref_detail
    detail = (
        f"loss loop {l1:.9g} vs cookbook {l2:.9g} ({'ok' if loss_ok else 'OUT of tolerance'}); gradient "
        f"({g1.size} values) cosine {grad['cosine']:.8f}, max |diff| {grad['max_abs_diff']}, "
        f"{'within' if grad_ok else 'OUTSIDE'} atol/rtol/min_cosine; loss vs float64 reference from forward "
        f"logprobs {ref:.9g} ({'ok' if ref_ok else 'OUT of tolerance'}); {ref_detail}"
    )
    return PreflightCheck("loss_and_gradient", "passed" if passed else "failed", detail, values)


# ------------------------------------------------------------------------------------------- (d)


def check_one_step(
    config: GS1ArmConfig, service_client: Any, renderer: Renderer, task: MathTask, send_seeds: bool = True
) -> PreflightCheck:
    """(d) one forward_backward + optim_step on one sampled example with the arm's advantage."""
    client = resolve(
        service_client.create_lora_training_client(
            base_model=config.base_model, rank=config.lora_rank, seed=config.seed
        )
    )
    sampler = resolve(client.save_weights_and_get_sampling_client())
    batch = sample_batch(config, 0, sampler, renderer, task, send_seeds)
    est = estimate(batch, make_estimator(config))
    datums, _, _ = batch_datums(batch, est.advantages)
    cid = f"one_step_{config.arm}"
    if not datums:
        return PreflightCheck(
            cid, "failed", "the arm's first batch has no non-zero advantage: nothing to train on"
        )
    fb = client.forward_backward(datums[:1], loss_fn=config.loss_fn)
    op = client.optim_step(config.adam_params())
    loss = loss_sum(fb.result())
    op.result()
    first = next(r for r in batch.records if r.get("in_batch"))
    ok = math.isfinite(loss)
    return PreflightCheck(
        cid,
        "passed" if ok else "failed",
        f"forward_backward loss:sum={loss:.6g} on one example with advantage {first['advantage']:+.4f}; optim_step ok",
        {"loss_sum": loss, "advantage": first["advantage"], "adam": config.adam_params().model_dump()},
    )


# ------------------------------------------------------------------------------------------- (e)


def check_restoration(
    configs: Sequence[GS1ArmConfig],
    service_client: Any,
    datums: Sequence[Datum],
    spec: GS1Spec | None,
) -> PreflightCheck:
    """(e) both arms start from the same seed-0 LoRA initialisation on a fixed batch."""
    problems = []
    if spec is not None and spec.restoration_preflight is not None:
        for group in spec.restoration_preflight.groups:
            for arm in group.arms:
                cfg = next((c for c in configs if c.arm == arm.name), None)
                if cfg is None:
                    continue
                oc = arm.optimizer_config
                ours = {
                    "lr": cfg.learning_rate,
                    "beta1": cfg.beta1,
                    "beta2": cfg.beta2,
                    "eps": cfg.eps,
                    "lora_rank": cfg.lora_rank,
                    "seed": cfg.seed,
                }
                diff = {k: (ours[k], v) for k, v in oc.items() if k in ours and ours[k] != v}
                if diff:
                    problems.append(f"{cfg.arm}: optimizer settings differ from the spec: {diff}")
    clients = [
        resolve(
            service_client.create_lora_training_client(base_model=c.base_model, rank=c.lora_rank, seed=c.seed)
        )
        for c in configs
    ]
    outs = [c.forward(list(datums), loss_fn="importance_sampling").result() for c in clients]
    lps = [np.concatenate([o["logprobs"].to_numpy().ravel() for o in out.loss_fn_outputs]) for out in outs]
    max_lp = max(float(np.max(np.abs(lps[0] - x))) for x in lps[1:]) if len(lps) > 1 else 0.0
    if max_lp != 0.0:
        problems.append(f"forward logprobs differ between the arms' initial clients (max {max_lp:.3g})")
    values: dict[str, Any] = {"forward_logprob_max_abs_diff": max_lp, "n_datums": len(datums)}
    weights = "weights not exposed by the backend"
    if all(callable(getattr(c, "lora_state", None)) for c in clients):
        states = [c.lora_state() for c in clients]
        flat = [_flat_gradients(s) for s in states]
        max_w = max(float(np.max(np.abs(flat[0] - f))) for f in flat[1:]) if len(flat) > 1 else 0.0
        values["lora_state_max_abs_diff"] = max_w
        values["lora_state_size"] = int(flat[0].size)
        weights = f"LoRA states ({flat[0].size} values) max |diff| {max_w:.3g}"
        if max_w != 0.0:
            problems.append("initial LoRA states differ")
    detail = f"{len(configs)} arms, forward logprobs on {len(datums)} fixed datums max |diff| {max_lp:.3g}; {weights}"
    return PreflightCheck(
        "restoration",
        "failed" if problems else "passed",
        detail + ("; " + "; ".join(problems) if problems else ""),
        values,
    )


# ------------------------------------------------------------------------------------------- (f)


def check_independent_samples(batch: SampledBatch, group_size: int) -> PreflightCheck:
    """(f) no GRPO group of the fixed batch holds an implausible duplicate (``group_sample_stats``)."""
    stats = dict(batch.group_stats)
    n_groups = len({r["prompt_id"] for r in batch.records})
    if group_size < 2 or stats.get("groups_implausible_duplicates") is None:
        return PreflightCheck(
            "independent_group_samples",
            "failed",
            f"no group of two or more samples to check ({n_groups} groups)",
        )
    bad = int(stats["groups_implausible_duplicates"])
    detail = (
        f"{n_groups} groups of {group_size}: distinct samples per group mean "
        f"{stats['distinct_samples_per_group_mean']:.2f}, min {stats['distinct_samples_per_group_min']}; "
        f"{stats['groups_with_duplicates']} group(s) with a repeated sample, {bad} with one that independent "
        f"sampling makes implausible (sequence probability < {IMPLAUSIBLE_DUPLICATE_PROB:g})"
    )
    if bad:
        detail += ": the service returns duplicated samples; GRPO's groups would collapse"
    return PreflightCheck(
        "independent_group_samples", "failed" if bad else "passed", detail, {**stats, "n_groups": n_groups}
    )


# ------------------------------------------------------------------------------------------ driver


def fixed_batch(
    config: GS1ArmConfig, service_client: Any, renderer: Renderer, task: MathTask, send_seeds: bool = True
) -> SampledBatch:
    """The fixed batch of (b), (c), (e) and (f): the GRPO arm's step-0 rollouts from the initial weights."""
    client = resolve(
        service_client.create_lora_training_client(
            base_model=config.base_model, rank=config.lora_rank, seed=config.seed
        )
    )
    sampler = resolve(client.save_weights_and_get_sampling_client())
    return sample_batch(config, 0, sampler, renderer, task, send_seeds)


def run_preflight(
    arms: Mapping[str, GS1ArmConfig],
    service_client: Any,
    renderer: Renderer,
    task: MathTask,
    backend: str,
    spec: GS1Spec | None = None,
    spec_sha256: str | None = None,
    baseline_arm: str = "grpo_gs8",
    send_seeds: bool = True,
    reference_client: Any = None,
) -> PreflightReport:
    """Every check, in order; a backend exception fails its check without stopping the others. Check (c)
    runs on ``reference_client`` when given (the local backend's float64 twin), else on
    ``service_client``."""
    tolerances = tolerances_from_spec(spec)
    grpo = arms[baseline_arm]
    checks = [_timed(check_estimators_offline, bandwidth=arms.get("gs1_kernel", grpo).bandwidth)]
    try:
        batch = fixed_batch(grpo, service_client, renderer, task, send_seeds)
    except Exception as exc:
        batch = None
        checks.append(PreflightCheck("fixed_batch", "failed", f"{type(exc).__name__}: {exc}"))
    if batch is not None:
        checks.append(_timed(check_treatment_disabled, batch))
        tmp = SampledBatch([dict(r) for r in batch.records], batch.seqs)
        ours, _, _ = batch_datums(tmp, estimate(tmp, GroupMeanEstimator()).advantages)
        cook, _, _ = cookbook_grpo_datums(batch)

        def make_client():
            return resolve(
                (reference_client or service_client).create_lora_training_client(
                    base_model=grpo.base_model, rank=grpo.lora_rank, seed=grpo.seed
                )
            )

        checks.append(_timed(check_loss_and_gradient, make_client, ours, cook, tolerances))
    for cfg in arms.values():
        check = _timed(check_one_step, cfg, service_client, renderer, task, send_seeds)
        check.id = f"one_step_{cfg.arm}"
        checks.append(check)
    if batch is not None:  # every rollout (advantage 1): the forward logprobs do not depend on it
        fixed = [make_datum(p, t, lp, 1.0) for p, t, lp in batch.seqs if t]
        checks.append(_timed(check_restoration, list(arms.values()), service_client, fixed, spec))
        checks.append(_timed(check_independent_samples, batch, grpo.group_size))
    for c in checks:
        c.backend = c.backend or backend
    return PreflightReport(checks, backend, spec_sha256)


check_loss_and_gradient.check_id = "loss_and_gradient"  # type: ignore[attr-defined]
check_restoration.check_id = "restoration"  # type: ignore[attr-defined]
check_treatment_disabled.check_id = "treatment_disabled_datums"  # type: ignore[attr-defined]
check_estimators_offline.check_id = "estimators_offline"  # type: ignore[attr-defined]
check_independent_samples.check_id = "independent_group_samples"  # type: ignore[attr-defined]


def write_preflight(report: PreflightReport, path: str | Path) -> Path:
    path = Path(path)
    atomic_write_text(path, json.dumps(report.to_dict(), indent=2) + "\n")
    return path


def load_preflight(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def preflight_resolved(preflight: Mapping[str, Any] | None) -> bool:
    """True iff a preflight record exists and every one of its checks passed."""
    return (
        bool(preflight)
        and preflight.get("status") == "passed"
        and all(c.get("status") == "passed" for c in preflight.get("checks", []))
    )


# Checks of *our* datum construction and estimator wiring that need a backend exposing gradients or
# weights. The hosted Tinker service exposes neither, so on it they are ``not_run``; the same loop code
# passing them on the local backend is what the spec's preflight asks for (docs/platforms.md §4.4).
GRADIENT_CHECKS = ("loss_and_gradient", "restoration")


def complete_with_reference(
    preflight: Mapping[str, Any],
    reference: Mapping[str, Any] | None,
    *,
    preflight_git: Mapping[str, Any] | None,
    reference_git: Mapping[str, Any] | None,
    reference_path: str = "",
) -> tuple[dict[str, Any] | None, str]:
    """A preflight whose only open checks are the gradient/weight checks this backend cannot run
    (``not_run``), completed by a *passed* preflight of the same spec on a backend that ran them, produced
    by the same code: the same git commit, neither tree dirty. Returns ``(completed, "")`` or
    ``(None, reason)``; a failed check is never completed, and nothing is relaxed."""
    pending = [c for c in preflight.get("checks", []) if c.get("status") != "passed"]
    if not pending:
        return dict(preflight), ""
    if any(c.get("status") == "failed" for c in pending):
        return None, "a check failed"
    other = [c.get("id") for c in pending if c.get("id") not in GRADIENT_CHECKS]
    if other:
        return None, f"checks {other} are open and only a backend-side run can close them"
    if reference is None or not preflight_resolved(reference):
        return (
            None,
            "no passed preflight of this spec on a backend that exposes gradients (run `rftlab gs1 preflight --backend local`)",
        )
    if reference.get("spec_sha256") != preflight.get("spec_sha256"):
        return None, "the reference preflight is for another spec"
    commit, ref_commit = (preflight_git or {}).get("commit"), (reference_git or {}).get("commit")
    if not commit or commit != ref_commit:
        return None, f"the reference preflight ran on other code (commit {ref_commit!r}, this run {commit!r})"
    if (preflight_git or {}).get("dirty") is not False or (reference_git or {}).get("dirty") is not False:
        return None, "a preflight ran on an uncommitted tree: commit, then re-run both preflights"
    completed = json.loads(json.dumps(preflight))
    for check in completed["checks"]:
        if check.get("status") != "passed":
            check["status"] = "passed"
            check["detail"] = (
                f"passed on the {reference.get('backend')} backend at commit {commit[:12]} "
                f"({reference_path}); this backend: {check.get('detail')}"
            )
    completed.update(status="passed", passed=True, completed_by=reference_path, commit=commit)
    return completed, ""
