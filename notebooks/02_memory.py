# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Spectrum memory study: the seed's controlled RFT experiment, end to end on the local backend
#
# The seed trained Qwen3-1.7B with GRPO on the spectrum-memory task (`docs/spectrum.md`, Part B) in
# six arms: a learning-rate-zero **probe** (the band-noise floor), **A** (explicit prompt, real
# running-list echo), **B** (explicit prompt, scrambled echo: the skill-drift control), **C** and **C′**
# (weak prompt, real echo, two seeds) and **D** (agent-managed notepad). This notebook runs the same
# arms from the same spec files (`data/specs/spectrum_*.json`), through the same environment, reward,
# run store and analysis a Fireworks job would use.
#
# **On the local backend the model is a simulation.** `rftlab.policies.spectrum.simulated` is a stochastic,
# differentiable stand-in for the LLM: per scan it keeps or drops each remembered item, reports or
# skips each current peak, and (arm D) reads and writes the notepad, each choice a log-linear Bernoulli
# draw over a few interpretable features, trained by exact score-function GRPO gradients. Its two
# prompt variants are starting parameters calibrated to the seed's base-model carry-rates. Nothing
# below is a statement about an LLM; it shows what the experimental design can and cannot detect, with
# a learner whose truth we know. With `BACKEND = "fireworks"` the same cells read Fireworks runs.

# %% tags=["parameters"]
import os

import numpy as np

from rftlab.runs.paths import SPECS_DIR, notebook_runs_root

BACKEND = os.environ.get("RFTLAB_BACKEND", "local")  # "local" (simulated policy) or "fireworks"
QUICK = os.environ.get("RFTLAB_QUICK") == "1"
SPEC_DIR = SPECS_DIR  # the project's data/specs, whatever the working directory
ARMS = ["probe", "A", "B", "C", "C_prime", "D"]
# Arm D once more with a reward cost per notepad write (the seed's "channel cost"), named D_cost.
D_WRITE_COST = 0.1
# Run-store root: $RFTLAB_RUNS_ROOT, else a throwaway folder in quick mode, else the project's runs/.
ROOT = notebook_runs_root(QUICK)
# Size overrides for quick mode (full mode uses the spec files as they are: 48 × 12 × 12 scans × 12 epochs).
SIZE_OVERRIDES = {"rows": 4, "response_candidates": 4, "epochs": 4} if QUICK else {}
# Declared before looking at results: a control arm is "flat" if the 95% CI of its per-epoch slope lies
# within ± these bands (over 12 epochs: ±0.024 occ, ±0.024 carry).
EPSILON = {"mean_occ": 0.002, "carry": 0.002}
CEILING_BANDS = 12 if QUICK else 200  # bands for the ceiling table (rows ceil_<i>, unsalted)
CALIBRATION_ROWS = 4 if QUICK else 48
POWER_NSIM = 300 if QUICK else 4000
# The seed's probe floor, "±0.02" of mean occ, has two readings; each gives a noise scenario (the epoch sd
# of mean occ at the seed's sizes): a 95% band of one epoch's mean, or one s.d. of the probe's late − early
# halves difference (which has sd = σ_e·sqrt(1/6 + 1/6)).
SEED_FLOORS = {"floor: 95% band": 0.02 / 1.96, "floor: halves s.d.": 0.02 / np.sqrt(1 / 6 + 1 / 6)}

# %%
# (imports follow the parameters cell, which must come first)
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from rftlab.analysis.display import fixed_digits_markdown, interval
from rftlab.analysis.spectrum.power import (
    SEED_SIZES,
    inflate,
    inflation_to_floor,
    power_slope,
    seed_slopes,
    size_for_power,
    slope_power_by_size,
    variance_components,
)
from rftlab.analysis.spectrum.study import carry_of, compare_epochs, epoch_series, residual_sd
from rftlab.analysis.trends import fit_trend, pooled_slope, slope_flatness
from rftlab.launch.spectrum.preflight import spectrum_preflight
from rftlab.launch.spectrum.spec import load_arm_spec
from rftlab.policies.spectrum.simulated import PARAM_NAMES
from rftlab.rollout.spectrum.ceilings import SEED_CEILINGS, ceiling_table
from rftlab.studies.spectrum import launch_arms
from rftlab.training.spectrum.calibration import calibration_table
from rftlab.training.spectrum.grpo import final_theta

METRIC_LABEL = {"mean_occ": "occ", "carry": "carry"}


# %% [markdown]
# ## 1. Calibration of the simulated policy's prompt variants
#
# The `explicit` and `weak` variants differ only in the carry bias; each was set by bisection on the
# carry-rate measured through the environment. Re-measured here on other bands (rows `calib_<i>`,
# unsalted, 12 candidates, temperature 1.2), untrained:

# %%
calib = pd.DataFrame(calibration_table(rows=CALIBRATION_ROWS))
display(fixed_digits_markdown(calib))
calib_text = "; ".join(
    f"{r.variant}: measured carry-rate {r.measured_carry:.3f} vs the seed's {r.target_carry:.2f} "
    f"(mean occ {r.mean_occ:.3f}, {int(r.rollouts)} rollouts)"
    for r in calib.itertuples()
)
display(Markdown(f"Untrained simulated policy — {calib_text}."))

# %% [markdown]
# ## 2. Preflight of every arm
#
# The checks `rftlab spectrum preflight SPEC.json` runs before a paid launch: a row's candidates share a
# band; a deterministic policy has no within-group spread (any spread would be band luck — the seed's
# historical per-rollout-band bug); the reward separates memory use from memoryless play; the stochastic
# policy's groups have reward variance; the epoch salt gives fresh bands.

# %%
specs = {arm: load_arm_spec(f"{SPEC_DIR}/spectrum_{arm}.json") for arm in ARMS}
specs["D_cost"] = specs["D"].model_copy(
    update={"arm": "D_cost", "notepad_write_cost": D_WRITE_COST, "description": "D with a cost per notepad write"}
)
if SIZE_OVERRIDES:
    specs = {arm: s.model_copy(update=SIZE_OVERRIDES) for arm, s in specs.items()}
ARM_ORDER = list(specs)
preflight_rows = []
for arm, spec in specs.items():
    rep = spectrum_preflight(spec, rows=2, bands=8 if QUICK else 24)
    preflight_rows.append(
        {"arm": arm, "passed": "yes" if rep.passed else "NO"}
        | {c["name"]: "ok" if c["passed"] else "FAIL" for c in rep.checks}
    )
display(fixed_digits_markdown(pd.DataFrame(preflight_rows)))

# %% [markdown]
# ## 3. Launch (or load) the arms
#
# `launch_arms` (one `launch_arm(spec)` per arm) reuses a finished run of the same spec, resumes an unfinished one, or trains a
# new one (`rftlab arm launch SPEC.json --backend local` does the same from the shell). The local
# backend maps the spec's LoRA learning rate onto the simulated policy's parameters with a fixed factor
# (`rftlab.launch.spectrum.local.SIMULATED_LR_SCALE`, ×100), so the probe's 1e-9 stays effectively zero; one Adam
# step per 8 rows (6 steps per epoch at 48 rows), group-normalised advantages (`advantage: grpo`).

# %%
runs = launch_arms(specs, BACKEND, ROOT)
rollouts = {arm: [run.rollouts(e) for e in range(len(run.metrics()))] for arm, run in runs.items()}
series = {arm: epoch_series(rolls, ["mean_occ", "carry", "memory_gain", "reward"]) for arm, rolls in rollouts.items()}
n_epochs = {arm: len(r) for arm, r in rollouts.items()}
sizes = {arm: (s.rows, s.response_candidates, s.num_scans, s.epochs) for arm, s in specs.items()}
display(
    fixed_digits_markdown(
        pd.DataFrame(
            [
                {
                    "arm": arm,
                    "prompt": specs[arm].prompt,
                    "memory": specs[arm].memory,
                    "write cost": specs[arm].notepad_write_cost,
                    "rows × cand. × scans × epochs": " × ".join(map(str, sizes[arm])),
                    "lr (spec)": f"{specs[arm].learning_rate:g}",
                    "lr (simulated)": f"{run.record.provider.get('trainer', {}).get('learning_rate', float('nan')):g}",
                    "seed": specs[arm].seed,
                }
                for arm, run in runs.items()
            ]
        )
    )
)

# %% [markdown]
# ## 4. Per-arm trends: early/late halves, slope per epoch, 95% CI, R²
#
# One point per epoch (the replication unit for a training curve). `carry` is the env's carry-rate
# (τ = 0.05 MHz, share of the displayed running list found again in the next report); in the notepad
# arms, where nothing is displayed, it is the share of the notepad list the policy read and kept.

# %%
trend_rows = []
fits = {}
for arm in ARM_ORDER:
    for metric in ("mean_occ", "carry"):
        y = np.asarray(series[arm][metric]["mean"])
        fit = fit_trend(np.arange(y.size), y)
        fits[arm, metric] = fit
        trend_rows.append(
            {
                "arm": arm,
                "metric": METRIC_LABEL[metric],
                "early": fit.early,
                "late": fit.late,
                "late − early": fit.delta,
                "slope / epoch": fit.slope,
                "95% CI": interval(*fit.slope_ci, signed=True, digits=4),
                "p": fit.p_value,
                "R²": fit.r2,
            }
        )
trends = pd.DataFrame(trend_rows)
display(fixed_digits_markdown(trends, digits=4))

# %% [markdown]
# Beside the seed's published arm results (Qwen3-1.7B on Fireworks, from the seed document; early → late
# where the seed gives a change):

# %%
SEED_ARMS = {
    "A": "occ 0.472 flat, carry 0.967",
    "B": "occ 0.356 flat",
    "C": "occ 0.403 → 0.439 (R² 0.65), carry 0.888 → 0.938",
    "C_prime": "occ slope same sign as C, carry 0.900 → 0.935",
    "D": "notepad memory erodes under prolonged RL (no numbers published)",
}
display(
    fixed_digits_markdown(
        pd.DataFrame(
            [
                {
                    "arm": arm,
                    "seed (LLM)": SEED_ARMS.get(arm, "–"),
                    "simulation occ": f"{fits[arm, 'mean_occ'].early:.3f} → {fits[arm, 'mean_occ'].late:.3f}",
                    "simulation carry": f"{fits[arm, 'carry'].early:.3f} → {fits[arm, 'carry'].late:.3f}",
                }
                for arm in ARM_ORDER
            ]
        )
    )
)

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
for ax, metric in zip(axes, ("mean_occ", "carry"), strict=True):
    for arm in ARM_ORDER:
        m = np.asarray(series[arm][metric]["mean"])
        se = np.asarray(series[arm][metric]["se"])
        x = np.arange(m.size)
        (line,) = ax.plot(x, m, marker="o", ms=3, label=arm)
        ax.fill_between(x, m - 1.96 * se, m + 1.96 * se, color=line.get_color(), alpha=0.15)
    ax.set_xlabel("epoch")
    ax.set_ylabel(METRIC_LABEL[metric])
    ax.set_title(f"per-epoch {METRIC_LABEL[metric]} (band: ±1.96 s.e. over rows)")
axes[0].legend(ncol=2, fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# What the simulated policy learned: its parameters before the first and after the last epoch (logit
# weights; every logit is divided by the temperature). `carry.*` governs keeping remembered items,
# `report.*` adding current peaks (`snr` = power above the noise floor, `width` = departure from 8 MHz),
# `read`/`write` the notepad (arm D only).

# %%
param_rows = []
for arm in ARM_ORDER:
    first = runs[arm].metrics()[0]
    last_theta = final_theta(runs[arm])
    row = {"arm": arm}
    for i, name in enumerate(PARAM_NAMES):
        row[name] = f"{first[f'theta.{name}']:+.2f} → {last_theta[i]:+.2f}"
    param_rows.append(row)
display(fixed_digits_markdown(pd.DataFrame(param_rows)))

# %% [markdown]
# ## 5. The control arms: flat or not?
#
# "Flat" means the slope's 95% CI lies inside the declared band ±ε (TOST on the slope); a CI that
# merely includes 0 is absence of evidence and is labelled so. The probe (learning rate ≈ 0) is the
# band-noise floor; B (scrambled echo) is the control for non-memory skill drift.

# %%
flat_rows = []
flat = {}
for arm in ("probe", "B"):
    for metric in ("mean_occ", "carry"):
        verdict = slope_flatness(fits[arm, metric], EPSILON[metric])
        flat[arm, metric] = verdict
        flat_rows.append(
            {
                "arm": arm,
                "metric": METRIC_LABEL[metric],
                "ε": EPSILON[metric],
                "slope": verdict.slope,
                "95% CI": interval(*verdict.slope_ci, signed=True, digits=4),
                "TOST p": verdict.tost_p_value,
                "verdict": verdict.label,
            }
        )
display(fixed_digits_markdown(pd.DataFrame(flat_rows), digits=4))

# %% [markdown]
# ## 6. Reproducibility: C vs C′
#
# Two runs of the same arm with different seeds (and so different bands every epoch). The run is the
# replication unit: sign agreement of the slopes and the fixed-effect pooled slope.

# %%
repro_rows = []
pooled = {}
for metric in ("mean_occ", "carry"):
    pair = [fits["C", metric], fits["C_prime", metric]]
    p = pooled_slope(pair)
    pooled[metric] = p
    repro_rows.append(
        {
            "metric": METRIC_LABEL[metric],
            "slope C": pair[0].slope,
            "slope C′": pair[1].slope,
            "same sign": "yes" if np.sign(pair[0].slope) == np.sign(pair[1].slope) else "no",
            "pooled slope": p.slope,
            "pooled 95% CI": interval(*p.ci, signed=True, digits=4),
            "C early→late": f"{pair[0].early:.3f} → {pair[0].late:.3f}",
            "C′ early→late": f"{pair[1].early:.3f} → {pair[1].late:.3f}",
        }
    )
display(fixed_digits_markdown(pd.DataFrame(repro_rows), digits=4))

# %% [markdown]
# ## 7. Does the reward rank memory use within a group?
#
# Per group (the candidates of one row in one epoch, one band), the Pearson correlation of carry with
# reward, averaged over groups (groups with no variance skipped), with the within-group reward spread
# and the share of zero-variance groups (which give no gradient).

# %%
group_rows = []
for arm in ARM_ORDER:
    mets = runs[arm].metrics()
    corr = [m["within_group_corr_carry_reward"] for m in mets if m["within_group_corr_carry_reward"] is not None]
    group_rows.append(
        {
            "arm": arm,
            "corr(carry, reward), epoch 0": mets[0]["within_group_corr_carry_reward"],
            "corr, mean over epochs": float(np.mean(corr)) if corr else None,
            "within-group reward sd": float(np.mean([m["within_group_reward_sd"] for m in mets])),
            "zero-variance groups": float(np.mean([m["frac_zero_variance_groups"] for m in mets])),
        }
    )
group_table = pd.DataFrame(group_rows)
display(fixed_digits_markdown(group_table))

# %% [markdown]
# ## 8. Epoch 0 vs the final epoch: per-rollout memory_gain and carry
#
# As the seed compared epochs: Welch's t and the Mann–Whitney U test (two-sided) on per-rollout values.
# Rollouts of one row share a band, so they are not independent; the same tests on per-row means (the
# independent unit) follow beside them.

# %%
cmp_rows = []
comparisons = {}
for arm in ARM_ORDER:
    first, last = rollouts[arm][0], rollouts[arm][-1]
    for metric in ("memory_gain", "carry"):
        c = compare_epochs(first, last, metric)
        comparisons[arm, metric] = c
        for unit in ("rollout", "row"):
            if unit not in c:
                continue
            u = c[unit]
            cmp_rows.append(
                {
                    "arm": arm,
                    "metric": metric,
                    "unit": f"{unit} (n={u['n_first']}/{u['n_last']})",
                    "epoch 0": u["mean_first"],
                    "final": u["mean_last"],
                    "diff": u["diff"],
                    "Welch t": u["welch_t"],
                    "Welch p": u["welch_p"],
                    "Mann–Whitney p": u["mannwhitney_p"],
                }
            )
display(fixed_digits_markdown(pd.DataFrame(cmp_rows)))

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for ax, metric in zip(axes, ("memory_gain", "carry"), strict=True):
    data, labels = [], []
    for arm in ARM_ORDER:
        for tag, recs in (("0", rollouts[arm][0]), ("last", rollouts[arm][-1])):
            vals = [carry_of(r) if metric == "carry" else r.get(metric) for r in recs]
            data.append([v for v in vals if v is not None])
            labels.append(f"{arm}\n{tag}")
    ax.boxplot(data, showfliers=False)
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
    ax.set_title(f"per-rollout {metric}: epoch 0 vs final epoch")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 9. Ceilings: what the published numbers are
#
# The seed publishes occupied-IoU ceilings of 0.447 (naive accumulate-all), 0.513 (+ perfect
# false-alarm filtering) and 0.549 (+ centre denoising, described upstream as averaging away each
# channel's frequency jitter; docs/spectrum.md §B.12 defines it as reporting the true centres of the
# detected channels). Both readings of the last one are computed here on the same bands, beside
# variants of the first two.

# %%
ceil = pd.DataFrame(ceiling_table([f"ceil_{i}" for i in range(CEILING_BANDS)]))
display(fixed_digits_markdown(ceil[["policy", "description", "mean_occ", "mean_occ_se", "early_occ", "late_occ", "memory_gain", "report_size"]]))
occ_of = dict(zip(ceil["policy"], ceil["mean_occ"], strict=True))
se_of = dict(zip(ceil["policy"], ceil["mean_occ_se"], strict=True))
matches = {
    "naive accumulate-all": ["accumulate_nodedupe", "accumulate", "memory_all"],
    "+ perfect false-alarm filtering": ["accumulate_nodedupe_filtered", "accumulate_filtered"],
    "+ centre denoising": ["averaging", "true_centre"],
}
seed_rows = []
for label, value in SEED_CEILINGS.items():
    for name in matches[label]:
        seed_rows.append(
            {
                "seed ceiling": label,
                "seed value": value,
                "our policy": name,
                "our mean occ": occ_of[name],
                "difference": occ_of[name] - value,
                "in s.e. units": (occ_of[name] - value) / se_of[name],
            }
        )
display(fixed_digits_markdown(pd.DataFrame(seed_rows)))

# %%
avg_gap = (occ_of["averaging"] - SEED_CEILINGS["+ centre denoising"]) / se_of["averaging"]
true_gap = occ_of["true_centre"] - SEED_CEILINGS["+ centre denoising"]
filt_best = min(matches["+ perfect false-alarm filtering"], key=lambda n: abs(occ_of[n] - 0.513))
naive_best = min(matches["naive accumulate-all"], key=lambda n: abs(occ_of[n] - 0.447))
display(
    Markdown(
        f"**The 0.549 ceiling does not follow from its stated definition.** Reporting the true centres of the "
        f"detected channels (false alarms dropped) scores {occ_of['true_centre']:.3f} on {CEILING_BANDS} bands, "
        f"{true_gap:+.3f} above 0.549. Averaging each detected channel's detections so far (false alarms dropped, "
        f"centres still noisy) scores {occ_of['averaging']:.3f} ± {se_of['averaging']:.3f}, "
        f"{avg_gap:+.1f} s.e. from 0.549: the published number is what the averaging policy produces. "
        f"The filtering ceiling 0.513 is near our {filt_best} ({occ_of[filt_best]:.3f}); the naive 0.447 is not "
        f"reproduced by any literal accumulate-all on these bands (closest: {naive_best}, {occ_of[naive_best]:.3f}), "
        "so it depends on details the seed does not publish (merging tolerance, band set)."
    )
)

# %% [markdown]
# ## 10. Design power: could the seed's sizes detect the seed's effects?
#
# By simulation (method in `rftlab.analysis.spectrum.power`): variance components of carry and occ are
# estimated from the simulated policy's untrained rollouts (arm C's epoch 0: band-to-band `σ²_b` and
# candidate-to-candidate `σ²_w`); a run's per-epoch series is then drawn as a linear trend plus noise
# of variance `σ²_b/R + σ²_w/(R·K)`; a slope counts as detected when its 95% CI lies above zero (pooled
# over replicate runs by inverse variance). This surrogate replaces thousands of full training runs;
# it is checked against the probe arm, whose per-epoch series is pure noise around a flat policy.

# %%
comps = {m: variance_components(rollouts["C"][0], "mean_occ" if m == "mean_occ" else "carry_rate") for m in ("mean_occ", "carry")}
probe_comps = {m: variance_components(rollouts["probe"][0], "mean_occ" if m == "mean_occ" else "carry_rate") for m in ("mean_occ", "carry")}
R, K = specs["probe"].rows, specs["probe"].response_candidates
check_rows = []
for m in ("mean_occ", "carry"):
    predicted = probe_comps[m].epoch_sd(R, K)
    observed = residual_sd(series["probe"][m]["mean"])
    check_rows.append(
        {
            "metric": METRIC_LABEL[m],
            "σ²_b (probe, epoch 0)": probe_comps[m].sigma2_between,
            "σ²_w (probe, epoch 0)": probe_comps[m].sigma2_within,
            "predicted epoch sd (probe sizes)": predicted,
            "observed probe residual sd": observed,
            "ratio": observed / predicted,
        }
    )
surrogate_check = pd.DataFrame(check_rows)
display(fixed_digits_markdown(surrogate_check, digits=5))

# %% [markdown]
# The simulated policy's noise is binomial choice noise on one band plus band-to-band spread; an LLM's
# rollouts vary more (whole lists dropped, formatting slips). So the tables use two noise scenarios:
# **simulation** (components from arm C's untrained epoch 0) and two **seed floors** (both components
# scaled up by the one factor that makes the epoch sd of occ at the seed's sizes equal the seed's probe
# floor of ±0.02, read either as a 95% band of an epoch mean or as one s.d. of the probe's late − early
# difference). No seed number anchors an LLM's carry noise: it is scaled by the same factor. Slopes are
# the seed's C-arm changes read two ways: first→last epoch (change / 11) and early→late half means
# (change / 6).

# %%
slopes = seed_slopes(SEED_SIZES["epochs"])
scenarios = {"simulation": comps}
factors = {}
for name, floor_sd in SEED_FLOORS.items():
    factors[name] = inflation_to_floor(comps["mean_occ"], floor_sd, SEED_SIZES["rows"], SEED_SIZES["candidates"])
    scenarios[name] = {m: inflate(c, factors[name]) for m, c in comps.items()}
metric_key = {"mean_occ": "mean_occ", "carry": "carry_rate"}
power_rows = []
for scen, cc in scenarios.items():
    for m in ("carry", "mean_occ"):
        for reading, slope in slopes[metric_key[m]].items():
            power_rows.append(
                {
                    "noise": scen,
                    "metric": METRIC_LABEL[m],
                    "slope reading": reading,
                    "slope / epoch": slope,
                    "epoch sd at seed sizes": cc[m].epoch_sd(SEED_SIZES["rows"], SEED_SIZES["candidates"]),
                    "power (48×12×12, 1 run)": power_slope(slope, cc[m], nsim=POWER_NSIM, **SEED_SIZES),
                }
            )
power_table = pd.DataFrame(power_rows)
display(
    Markdown(
        "Variance factors over the simulation: "
        + "; ".join(f"{name} ×{f:.1f} (epoch sd of occ {SEED_FLOORS[name]:.4f})" for name, f in factors.items())
        + "."
    )
)
display(fixed_digits_markdown(power_table, digits=4))

# %%
GRIDS = {
    "rows": [4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384],
    "candidates": [2, 4, 6, 8, 12, 16, 24, 32, 48, 64],
    "epochs": [4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48],
    "runs": [1, 2, 3, 4, 5, 6, 8, 10],
}
curve_rows = []
need_rows = []
for scen, cc in scenarios.items():
    for m in ("carry", "mean_occ"):
        slope = slopes[metric_key[m]]["first_to_last"]
        row = {"noise": scen, "metric": METRIC_LABEL[m], "slope / epoch": slope}
        for factor_name, grid in GRIDS.items():
            n = size_for_power(slope, cc[m], factor_name, grid, nsim=POWER_NSIM)
            row[f"{factor_name} for 80%"] = n if n is not None else f">{grid[-1]}"
        need_rows.append(row)
        for factor_name in ("rows", "candidates", "epochs", "runs"):
            for r in slope_power_by_size(slope, cc[m], factor_name, GRIDS[factor_name][::2], nsim=POWER_NSIM):
                curve_rows.append({"noise": scen, "metric": METRIC_LABEL[m], "factor": factor_name, "value": r[factor_name], "power": r["power"]})
need = pd.DataFrame(need_rows)
display(Markdown("**Sizes for 80% power** at the seed's C-arm slopes (first→last reading), one factor varied, the others at 48 rows × 12 candidates × 12 epochs × 1 run:"))
display(fixed_digits_markdown(need, digits=4))

# %%
curves = pd.DataFrame(curve_rows)
fig, axes = plt.subplots(1, 4, figsize=(15, 3.6), sharey=True)
for ax, factor_name in zip(axes, ("rows", "candidates", "epochs", "runs"), strict=True):
    for (scen, m), grp in curves[curves["factor"] == factor_name].groupby(["noise", "metric"]):
        ax.plot(grp["value"], grp["power"], marker="o", ms=3, ls={"simulation": "-", "floor: 95% band": "--"}.get(scen, ":"), label=f"{m}, {scen}")
    ax.axhline(0.8, color="grey", lw=0.8)
    ax.axvline(SEED_SIZES[factor_name], color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel(factor_name)
axes[0].set_ylabel("power")
axes[0].legend(fontsize=7)
fig.suptitle("power to detect the seed's C-arm slope (first→last reading) vs one size factor")
fig.tight_layout()
plt.show()

# %% [markdown]
# The same curves as numbers, for the noisier reading of the seed floor (power to detect the seed's
# C-arm slope, first→last reading, one factor varied):

# %%
noisy = curves[curves["noise"] == "floor: halves s.d."]
for factor_name in ("rows", "candidates", "epochs", "runs"):
    sub = noisy[noisy["factor"] == factor_name].pivot(index="metric", columns="value", values="power")
    sub.columns = [f"{factor_name}={c}" for c in sub.columns]
    display(fixed_digits_markdown(sub.reset_index(), digits=2))

# %% [markdown]
# ## 11. Findings (computed from the numbers above)

# %%
def slope_text(arm, metric):
    f = fits[arm, metric]
    return f"{f.early:.3f}→{f.late:.3f} (slope {f.slope:+.4f}/epoch, 95% CI {interval(*f.slope_ci, signed=True, digits=4)}, R² {f.r2:.2f})"


def ci_note(arm, metric):
    lo, hi = fits[arm, metric].slope_ci
    return ", CI excludes 0 but lies within ±ε" if (lo > 0 or hi < 0) and flat[arm, metric].flat else ""


def writes_fit(arm):
    return fit_trend(np.arange(n_epochs[arm]), [m["notepad_writes"] for m in runs[arm].metrics()])


def final_params(arm):
    mets = runs[arm].metrics()
    return {n: mets[-1][f"theta.{n}"] for n in PARAM_NAMES}


c_up = fits["C", "carry"].slope_ci[0] > 0
cp_up = fits["C_prime", "carry"].slope_ci[0] > 0
a_gap = fits["A", "mean_occ"].late - max(fits["C", "mean_occ"].late, fits["C_prime", "mean_occ"].late)
seed_power = power_table[(power_table["slope reading"] == "first_to_last")].set_index(["noise", "metric"])["power (48×12×12, 1 run)"]
lines = [
    f"- **All of this is a simulation** (backend `{BACKEND}`): a log-linear Bernoulli policy calibrated to the seed's "
    f"base-model carry-rates ({calib_text}).",
    f"- **C (weak prompt, real echo)**: carry {slope_text('C', 'carry')}; occ {slope_text('C', 'mean_occ')}. "
    f"**C′**: carry {slope_text('C_prime', 'carry')}. Carry rises with a CI above zero in "
    f"{'both runs' if c_up and cp_up else ('one run' if c_up or cp_up else 'neither run')}; pooled carry slope "
    f"{pooled['carry'].slope:+.4f}/epoch, 95% CI {interval(*pooled['carry'].ci, signed=True, digits=4)}, signs agree in "
    f"{pooled['carry'].sign_agreement:.0%} of runs.",
    f"- **A (explicit prompt)** ends at occ {fits['A', 'mean_occ'].late:.3f} in its late half, "
    f"{a_gap:+.3f} {'above' if a_gap > 0 else 'below'} the better weak-prompt run: "
    + ("the instruction-calibrated start is still ahead of what 12 epochs of RL reach from the weak start." if a_gap > 0 else "RL from the weak start catches up with the instruction-calibrated start."),
    f"- **Probe** (lr ≈ 0): occ {flat['probe', 'mean_occ'].label}; carry {flat['probe', 'carry'].label}. "
    f"**B** (scrambled echo): occ {flat['B', 'mean_occ'].label} (slope {flat['B', 'mean_occ'].slope:+.4f}{ci_note('B', 'mean_occ')}); "
    f"carry {flat['B', 'carry'].label} (slope {flat['B', 'carry'].slope:+.4f}{ci_note('B', 'carry')}, "
    f"carry {fits['B', 'carry'].early:.3f}→{fits['B', 'carry'].late:.3f}).",
    "- **Within-group ranking**: mean corr(carry, reward) over epochs is "
    + ", ".join(f"{r['arm']} {r['corr, mean over epochs']:+.2f}" for r in group_rows if r["corr, mean over epochs"] is not None)
    + "; zero-variance groups: "
    + f"{max(r['zero-variance groups'] for r in group_rows):.1%} at most.",
    f"- **Notepad**: D (no write cost) carry {slope_text('D', 'carry')}, notepad writes/episode "
    f"{writes_fit('D').early:.2f}→{writes_fit('D').late:.2f} (slope {writes_fit('D').slope:+.3f}/epoch); "
    f"D_cost ({D_WRITE_COST:g} reward per write) writes/episode {writes_fit('D_cost').early:.2f}→"
    f"{writes_fit('D_cost').late:.2f} (slope {writes_fit('D_cost').slope:+.3f}/epoch, 95% CI "
    f"{interval(*writes_fit('D_cost').slope_ci, signed=True, digits=3)}), occ {slope_text('D_cost', 'mean_occ')}.",
    "- **Surrogate check**: the probe's observed epoch-to-epoch residual sd is "
    + " and ".join(f"{r['ratio']:.2f}× ({r['metric']})" for r in check_rows)
    + " the surrogate's prediction from its own epoch-0 rollouts.",
    f"- **Ceilings**: averaging {occ_of['averaging']:.3f} vs true centres {occ_of['true_centre']:.3f}: the seed's 0.549 "
    "is the averaging ceiling, not the true-centre one its definition names.",
    "- **Design power** at the seed's sizes and the seed's C slope (first→last reading), carry / occ: "
    + "; ".join(f"{scen} {seed_power[(scen, 'carry')]:.2f} / {seed_power[(scen, 'occ')]:.2f}" for scen in scenarios)
    + ". Needed for 80% (one factor at a time) under the noisier floor: "
    + "; ".join(
        f"{r['metric']}: " + ", ".join(f"{k.split(' ')[0]} {r[k]}" for k in r if k.endswith("for 80%"))
        for r in need_rows
        if r["noise"] == "floor: halves s.d."
    )
    + ".",
]
display(Markdown("\n".join(lines)))
