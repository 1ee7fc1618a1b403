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
#     display_name: Python 3 (rftlab)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exploitable poker: what the reference strategies earn, and what each RFT reward would pay for
#
# **Question.** Before paying for a reinforcement fine-tuning run on CLBench `exploitable_poker`
# (`docs/poker.md`), do its two rewards separate good play from bad, and does the play they reward need
# **memory** — noticing an opponent's leak over earlier hands — which is what the task is meant to teach?
# §1–8 are played by scripted strategies on the real `texasholdem==0.11.0` engine, with no model. §9 trains
# a **tiny language model** (0.1 M parameters, randomly initialised, warm-started on the scripted
# strategies' transcripts) through the Tinker API on this machine: a check of the training path, not a
# result about a real model.

# %% tags=["parameters"]
import os

QUICK = os.environ.get("RFTLAB_QUICK") == "1"
BACKEND = os.environ.get("RFTLAB_BACKEND", "local")  # model-free here; arms launch through the Fireworks launcher
RUNS = 1 if QUICK else 5  # permuted runs of the default schedule (run 0 = canonical order)
SCHEDULE = "quick_test" if QUICK else "default"
RFT_ROWS = 6 if QUICK else 96  # RFT-mode rollouts (row ids), as the seed's 96-row dataset
RFT_HANDS = 4 if QUICK else 16
EQUITY_SAMPLES = 40 if QUICK else 200  # Monte-Carlo samples of the exploit strategy's equity estimate
SEED = 0  # policy seed of every strategy
BOOTSTRAP_REPS = 2_000 if QUICK else 10_000  # bootstrap replications per paired interval
BOOTSTRAP_SEED = 0  # numpy.random.default_rng seed of every bootstrap

# %%
# (imports follow the parameters cell, which must come first)
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from rftlab.analysis.display import fixed_digits_markdown, interval, number
from rftlab.studies.poker import (
    BLIND_COUNTERS,
    R_MAX,
    REWARD_COLUMNS,
    SANDBAG,
    analyse_reference,
    arm_metrics,
    arm_plans,
    first_decision,
    reference_study,
    save_reference_rollouts,
    schedule_opponents,
)

study = reference_study(schedule=SCHEDULE, runs=RUNS, rows=RFT_ROWS, hands=RFT_HANDS, seed=SEED,
                        equity_samples=EQUITY_SAMPLES)  # fmt: skip
# every episode played here, kept for `rftlab view runs/poker_reference` (one run per block and strategy)
kept_runs = save_reference_rollouts(study)
ref = analyse_reference(study, reps=BOOTSTRAP_REPS, seed=BOOTSTRAP_SEED)
sched_ec = ref.schedule_pair("exploit − call")
mi_ec = ref.rft_pair("exploit − call", "reward_mean_instance")
gain_ec = ref.rft_pair("exploit − call", "reward_gain")
blind, best_blind, blind_resolved = ref.blind, ref.best_blind, ref.blind_resolved  # 95% bootstrap
sandbag_gain = ref.rft_pair(f"{SANDBAG} − exploit", "reward_gain")

# %% [markdown]
# ## Summary

# %%
# §9's study of a tiny language model trained through the Tinker API (exploratory), run here so the summary
# can quote it; its design is printed in §9. Quick mode's 4-step warm start is too short to learn the call,
# so it shows the study's stop with a diagnosis. Run store: $RFTLAB_RUNS_ROOT, else a throwaway folder in
# quick mode, else the project's runs/.
from rftlab.studies.poker import TinyLMDesign, notebook_runs_root, run_tiny_lm_study, tiny_lm_readout

TINY_LM = dict(warm_rows=2, warm_held_out=1, warm_steps=4, warm_checks=1, equity_samples=40) if QUICK else {}
tiny = run_tiny_lm_study(TinyLMDesign(**TINY_LM), notebook_runs_root(QUICK))
tiny_out = tiny_lm_readout(tiny, reps=BOOTSTRAP_REPS, seed=BOOTSTRAP_SEED)
if tiny.stopped:
    tiny_row = (f"stopped after the warm start: held-out valid-call rate {tiny.warm_start.valid_rate:.2f}, below the "
                f"design's {tiny.design.min_valid_rate:g}; no RL run (§9)")  # fmt: skip
    tiny_unit = "none (no evaluation)"
else:
    tiny_row = (f"vs exploit {tiny_out.versus['exploit'].sentence('BB/hand', 'deals')}; vs call "
                f"{tiny_out.versus['call'].sentence('BB/hand', 'deals')}")  # fmt: skip
    tiny_unit = "evaluation deal (one training run: the run is not the unit)"

# %%
memoryless_gain = ", ".join(f"`{name}` {ref.reward(name, 'gain').mean_se()}" for name in study.rft_rows)
reads = [
    "The mean-instance reward ranks `exploit` above `call` on the same rows"
    + (" (interval above 0)." if mi_ec.excludes_zero else ", but the interval includes 0 at this size."),
    "The gain reward " + ("does not separate them (interval includes 0), as designed: every memoryless "
                          "strategy's expected gain is 0" if not gain_ec.excludes_zero else "separates them"),
    f"(observed, mean ± s.e. over {RFT_ROWS} rollouts: {memoryless_gain}).",
    f"`exploit` minus the best blind counter (`{best_blind}`, one counter played against whoever is dealt) is "
    f"{number(blind[best_blind].mean, 2, signed=True)} (95% {interval(blind[best_blind].low, blind[best_blind].high, signed=True, digits=2)}) "
    f"against {ref.reward('exploit', 'mean-instance').mean_se()} for `exploit` itself"
    + (f": not distinguishable from 0, but at {RFT_ROWS} rows this comparison cannot resolve differences smaller "
       f"than ±{blind_resolved.resolved:.1f} BB/hand (the farther end of its 95% interval; no margin was "
       "declared), so it does not show that hiding the names would cost a memoryless player little."
       if not blind[best_blind].excludes_zero else "."),
    f"The position-aware `sandbag` beats `exploit` on the gain reward by {number(sandbag_gain.mean, 2, signed=True)}"
    + (" (interval above 0)." if sandbag_gain.low > 0 else " (interval includes 0 at this size)."),
]
if sched_ec.low <= 0 < sched_ec.mean and sched_ec.sign_p < 0.05:
    reads.append(
        f"On the schedule, the bootstrap interval of exploit − call reaches {number(sched_ec.low, 2, signed=True)} "
        f"while the sign test gives p = {sched_ec.sign_p:.2g} (Wilcoxon p = {sched_ec.wilcoxon_p:.2g}): the mean "
        "rests on a few stack-sized pots against the calling station, the count and the ranks of deals won do "
        "not (§3)."
    )
display(Markdown(f"""**What the verdict is about.** The environment and its two rewards, not a trained model:
every number is played by scripted stand-in strategies on the real engine, with the deal (schedule) or the
RFT row (one rollout's 16 hands) as the unit.

**Verdict.** As configured, the port does not require memory. Under the seed's
**mean-instance** reward the best reference strategy, `exploit`, reads the opponent's name from the prompt
and plays a fixed counter: it needs no memory, and three name → counter rules could be learned into the
weights (the shortcut the spectrum seed was built to block). Under the **gain** reward every memoryless,
position-blind strategy earns 0 in expectation, and a strategy that reads the hand number, plays badly early
and well late, {"earns more than any of them" if sandbag_gain.low > 0 else "is measured against them"} —
again without memory. rftlab deals all candidates of a GRPO group the same
hands (row-shared); the upstream port dealt each rollout its own, which puts luck into every group
comparison (§7). §1–8: scripted strategies on the real engine, no model; §9: a tiny language model (0.1 M
parameters) trained through the Tinker API, exploratory. None of these comparisons was pre-registered.

| what | value (95% interval) | unit of analysis |
|---|---|---|
| exploit − call, `{SCHEDULE}` schedule | {sched_ec.sentence()} | deal ({RUNS} run(s) averaged) |
| exploit − call, mean-instance reward, RFT mode | {mi_ec.sentence("BB/hand", "rows")} | RFT row (row-shared) |
| exploit − call, gain reward, RFT mode | {gain_ec.sentence("BB/hand", "rows")} | RFT row (row-shared) |
| exploit − best blind counter (`{best_blind}`), mean-instance | {blind[best_blind].sentence("BB/hand", "rows")} | RFT row |
| sandbag − exploit, gain reward | {sandbag_gain.sentence("BB/hand", "rows")} | RFT row |
| tiny language model, exploratory: trained − reference, mean-instance reward, {tiny.design.hands}-hand deals (§9) | {tiny_row} | {tiny_unit} |

{" ".join(reads)}

**What this does not show.** Nothing about a trained model of a real size, Fireworks or eval-protocol: no
RFT run exists, §1–8's strategies are scripted, and §9's tiny language model only exercises the training
path (a model of 0.1 M parameters, one training run, a few updates). The blind counters are three hand-written counters, not the best memoryless
strategy for hidden names. Percentile bootstrap intervals over a single stage's 10–35 deals are too
narrow; read them beside the sign test and Wilcoxon's signed-rank test."""))

# %% [markdown]
# ## 1. The strategies
#
# | strategy | what it does | memory |
# |---|---|---|
# | `random` | a uniformly random legal action; a RAISE goes to a uniform total between the minimum raise and all-in (seeded) | none |
# | `call` (always-call) | CALL when chips are owed, else CHECK; never folds or raises (the upstream memoryless control's shape) | none |
# | `exploit` | reads the opponent's name from the prompt (`Opponent: Tom`) and plays a hard-coded counter to that opponent's published policy, with Monte-Carlo equity against one random hand (docs/poker.md §B.6): against Tom (calling station) shove all-in at equity ≥ 0.55 and fold to a bet below 0.35; against Adam (fit-or-fold) min-raise whenever allowed; against Alex (loose-aggressive) bet whenever he checks, call the flop wide, fold to later bets unless strong | none: the name replaces it |
# | `blind Tom`, `blind Adam`, `blind Alex` | `exploit`'s counter to one opponent, played against whoever is dealt (the name is ignored): what a memoryless player can do if the names were hidden and it had to commit to one counter | none |
# | `sandbag` | `random` in hands 1–8, `exploit` in hands 9–16, switching on the hand number in the prompt (`Hand #9`) | none, but position-aware |
#
# **Why the best mean-instance strategy needs no memory.** Each prompt names the opponent, and each name
# stands for one fixed policy. `exploit` is memoryless: it is three name → counter rules, which
# fine-tuning can put into the weights. A notepad is never needed. This is the shortcut the spectrum
# seed's scrambled-memory control was designed to block.
#
# **A memory-requiring variant** would hide the opponent's identity: the same display name for every
# opponent, or names re-drawn for each rollout, so the policy must be read from the opponent's actions
# over earlier hands. Hiding names may not be enough: §6 measures how close one blind counter, played
# against everyone, comes to `exploit` under the mean-instance reward, where the calling station's
# stack-sized pots dominate the mean. The variant may also need opponents whose counters conflict (each
# counter losing heavily to another opponent), or a reward that weights each opponent equally. Against the gain reward it must also hide the hand number,
# and even then a notepad could count hands and sandbag: memory used, but not to read the opponent.

# %% [markdown]
# ## 2. The task as the model sees it
#
# The first decision of the schedule (the system is the big blind after Tom limped). The prompt layout,
# labels and menu are CLBench's format; the brief is in the project's own wording (an upstream-text mode
# reproduces CLBench's prose for exact replays).

# %%
first = first_decision(SCHEDULE)
display(Markdown("```text\n" + first.prompt + "\n```"))
display(Markdown(f"Legal actions: `{first.legal_actions}`; instance `{first.instance_id}`."))

# %% [markdown]
# ## 3. Reference strategies over the schedule, and paired differences over the same deals
#
# BB per hand by stage. The unit is the **deal** (one hand id): with several permuted runs a deal recurs in
# another order, so its result is averaged over runs first. The 95% intervals here are Student-t / normal
# intervals over deals, one strategy at a time. Upstream's reference maximum is r_max BB per hand.

# %%
stage_table = []
for name, s in ref.schedule_bb.items():
    for st in (*s.stages, s.overall):
        stage_table.append({"strategy": name, "stage": st.stage, "opponent": st.opponent, "deals": st.hands,
                            "BB/hand": number(st.bb_per_hand, 2, signed=True), "95% interval": interval(st.low, st.high, signed=True, digits=2)})  # fmt: skip
display(fixed_digits_markdown(pd.DataFrame(stage_table), digits=2))
display(Markdown(f"Schedule `{SCHEDULE}`, {RUNS} permuted run(s); r_max = {R_MAX} BB/hand."))

# %% [markdown]
# The strategies play the **same** deals, so they are compared paired: the difference on each deal, with a
# seeded percentile bootstrap over deals (overall: resampled within stages, so every resample keeps the
# schedule's stage sizes), the exact sign test (deals won, lost, tied) and Wilcoxon's signed-rank test
# (tied deals dropped; exact up to 50 deals without tied sizes, else the tie-corrected normal
# approximation). The bootstrap makes no normality assumption; the sign test ignores the size of a pot, so
# one stack-sized pot cannot carry it; the signed-rank test uses a pot's size only through its rank, so a
# 100 BB pot counts as the largest difference, not as 100 BB. It tests symmetry about 0, which needs no
# normality either.

# %%
paired_rows = [
    {"comparison": r.comparison, "stage": r.stage, "opponent": r.opponent, "deals": r.deals,
     "mean difference (BB/hand)": number(r.mean, 2, signed=True), "95% bootstrap": interval(r.low, r.high, signed=True, digits=2), "s.e.": r.se,
     "won / lost / tied": f"{r.better} / {r.worse} / {r.ties}", "sign test p": f"{r.sign_p:.2g}",
     "Wilcoxon p": f"{r.wilcoxon_p:.2g}"}
    for r in ref.schedule_pairs
]  # fmt: skip
display(fixed_digits_markdown(pd.DataFrame(paired_rows), digits=2))
display(Markdown(f"{BOOTSTRAP_REPS:,} bootstrap replications per row, seed {BOOTSTRAP_SEED}."))

# %% [markdown]
# Top row: BB per hand of each strategy by stage, one panel per opponent (each on its own linear scale:
# against Tom a hand can swing 100 BB, against Adam and Alex about 1). Bottom row: the paired differences
# against always-call on the same deals. Error bars are 95% intervals (top: over deals; bottom: bootstrap).

# %%
opponents = schedule_opponents(SCHEDULE)
fig, axes = plt.subplots(2, len(opponents), figsize=(4.2 * len(opponents), 6.4), squeeze=False)
colours = {"random": "tab:orange", "call": "tab:grey", "exploit": "tab:blue"}
for col, opponent in enumerate(opponents):
    top, bottom = axes[0, col], axes[1, col]
    stages = opponent.stages
    for i, (name, summary) in enumerate(ref.schedule_bb.items()):
        rows = [st for st in summary.stages if st.stage in stages]
        x = np.arange(len(rows)) + (i - 1) * 0.27
        y = np.array([st.bb_per_hand for st in rows])
        err = np.array([[v - st.low for v, st in zip(y, rows, strict=True)],
                        [st.high - v for v, st in zip(y, rows, strict=True)]])  # fmt: skip
        top.bar(x, y, width=0.27, yerr=err, capsize=3, color=colours[name], label=name)
    for i, comparison in enumerate(["exploit − call", "random − call"]):
        rows = [r for r in ref.schedule_pairs if r.comparison == comparison and r.stage in stages]
        x = np.arange(len(rows)) + (i - 0.5) * 0.3
        y = np.array([r.mean for r in rows])
        err = np.array([y - [r.low for r in rows], [r.high for r in rows] - y])
        bottom.errorbar(x, y, yerr=err, fmt="o", capsize=4, color=colours[comparison.split(" ")[0]], label=comparison)
    for ax in (top, bottom):
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(stages)), [f"stage {k}" for k in stages])
        ax.set_xlim(-0.6, len(stages) - 0.4)
    top.set_title(f"{opponent.name} ({opponent.variant})")
    top.set_ylabel("BB per hand (95% CI over deals)")
    bottom.set_ylabel("paired difference, BB/hand (95% bootstrap)")
axes[0, 0].legend(fontsize=8)
axes[1, 0].legend(fontsize=8)
fig.suptitle(f"Reference strategies on the {SCHEDULE} schedule (scripted strategies, {RUNS} run(s))")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 4. Against each opponent alone (the RFT setting)
#
# In the RFT port every rollout plays 16 hands against one opponent. Here the opponent and the cards come
# from the row id (row-shared): every strategy, like every candidate of a GRPO group, meets the same hands
# on a row. One rollout is one row, an independent deal set, so intervals are over rollouts.

# %%
display(fixed_digits_markdown(pd.DataFrame(
    [{"strategy": r.strategy, "opponent": r.opponent, "rollouts": r.rollouts, "BB/hand": number(r.mean, 2, signed=True),
      "s.e.": r.se, "95% interval": interval(r.low, r.high, signed=True, digits=2)} for r in ref.bb_by_opponent]), digits=2))  # fmt: skip

# %% [markdown]
# ## 5. What the two RFT rewards pay for
#
# - **mean-instance** (the verifiers rubric, docs/poker.md §B.5; the `poker_seed` arm): mean BB per completed
#   hand, −1 per illegal action, +0.1 once an output parses. It pays for winning chips.
# - **gain** (docs/poker.md §B.3; the `poker_gain` arm): the mean of the second half of the hands minus the
#   first half (each hand clipped to ±6 BB, the difference to ±8), −0.02 per illegal action. It pays for
#   *improving within a rollout*.
#
# **Every memoryless strategy has expected gain 0** — every strategy that keeps nothing from hand to hand
# and ignores the hand number. Its hands are exchangeable: the deals of a rollout are independent draws
# from one seeded generator, and the strategy treats every position alike, so the late and early halves
# (8 hands each) have the same distribution, late − early is symmetric about 0, and the symmetric clip
# keeps it there (tested: the gain averaged over every order of a hand set is exactly 0). `random`, `call`,
# `exploit` and the blind counters are all memoryless; their gains below are noise around 0.
#
# **The seed document and docs/poker.md §B.3 describe different rewards.** The seed document
# (`poker_fireworks_rft_port.md`, written for its run 1) says its `reward.py` is the verifiers rubric's port:
# mean instance reward plus an illegal-action penalty. The `reward.py` at the pinned commit `9851c32`
# (§B.3) computes the gain reward instead. Which one run 1 was scored with cannot be told from these
# sources. rftlab builds both as arms: `poker_seed` scores what the document says (mean-instance),
# `poker_gain` what the code at the pin does (gain). Each arm uploads its own evaluator entry with its
# reward, so the score a job reports is the arm's reward.
#
# Mean reward per rollout with its standard error over the rollouts, then paired differences on the same rows:

# %%
wide = []
for name in ref.rft_strategies:
    cells = {k: ref.reward(name, k) for k in REWARD_COLUMNS.values()}
    wide.append({"strategy": name, "rollouts": cells["mean-instance"].rollouts,
                 **{f"{k} (mean ± s.e.)": v.mean_se() for k, v in cells.items()},
                 **{f"{k} 95% interval": interval(v.low, v.high, signed=True, digits=2) for k, v in cells.items()}})  # fmt: skip
display(fixed_digits_markdown(pd.DataFrame(wide), digits=2))
rft_rows_table = [
    {"comparison": r.comparison, "reward": REWARD_COLUMNS[value], "opponent": r.opponent, "rows": r.deals,
     "mean difference": number(r.mean, 2, signed=True), "95% bootstrap": interval(r.low, r.high, signed=True, digits=2), "won / lost / tied":
     f"{r.better} / {r.worse} / {r.ties}", "sign test p": f"{r.sign_p:.2g}",
     "Wilcoxon p": f"{r.wilcoxon_p:.2g}"}
    for value, table in ref.rft_pairs.items() for r in table if r.opponent == "all"
]  # fmt: skip
display(fixed_digits_markdown(pd.DataFrame(rft_rows_table), digits=2))

# %% [markdown]
# ## 6. The shortcuts each reward leaves open
#
# **Mean-instance: the name.** `exploit` minus each blind counter, on the same rows, by opponent. A blind
# counter equals `exploit` against its own opponent (0 difference, all tied) and differs elsewhere.

# %%
blind_rows = [
    {"comparison": r.comparison, "opponent": r.opponent, "rows": r.deals,
     "mean difference": number(r.mean, 2, signed=True),
     "95% bootstrap": interval(r.low, r.high, signed=True, digits=2), "won / lost / tied": f"{r.better} / {r.worse} / {r.ties}"}
    for r in ref.rft_pairs["reward_mean_instance"] if r.comparison.removeprefix("exploit − ") in BLIND_COUNTERS.values()
]  # fmt: skip
display(fixed_digits_markdown(pd.DataFrame(blind_rows), digits=2))
display(Markdown(
    f"`exploit` minus the best blind counter, `{best_blind}`: {blind[best_blind].sentence('BB/hand', 'rows')}. "
    f"This is what reading the name is worth over committing to one counter; its 95% interval leaves "
    f"differences up to ±{blind_resolved.resolved:.2f} BB/hand unresolved at {RFT_ROWS} rows."))  # fmt: skip

# %% [markdown]
# **Gain: the hand number.** `sandbag` loses chips in the first half on purpose and wins them back in the
# second. Compare its two rewards with those of the other strategies in §5.

# %%
display(Markdown(
    f"`sandbag`: gain reward {ref.reward(SANDBAG, 'gain').mean_se()}, mean-instance {ref.reward(SANDBAG, 'mean-instance').mean_se()} "
    f"(mean ± s.e. over {RFT_ROWS} rollouts). Paired against `exploit` on the gain reward: "
    f"{sandbag_gain.sentence('BB/hand', 'rows')}."
))  # fmt: skip

# %% [markdown]
# ## 7. Dealing: row-shared here, per-rollout upstream
#
# GRPO scores each candidate of a group against the group's mean, so the candidates of one row must face
# the same hands; otherwise the advantage rewards a lucky deal. rftlab's arms (`data/specs/poker_seed.json`,
# `poker_gain.json`) are **row-shared**: the McpGym server deals from the row's session key, so every
# candidate of a row meets the same opponent and the same cards (the launch preflight checks it). The
# upstream port drew the opponent and the cards **per rollout** from `os.urandom` (docs/poker.md §B.1),
# ignoring the row: the same group-mismatch bug that froze the spectrum seed's runs, where every candidate
# of a group faced a different band. The arm spec refuses `assignment: per_rollout`, because no launch path
# implements it.
#
# What per-rollout dealing costs, measured on the played rollouts: how often a group holding one `exploit`
# and one `call` candidate ranks `exploit` first, when both are dealt the same row and when each is dealt
# its own (every other row); and how far apart two candidates of the same strategy land from the deal alone.
# The row is the unit: the intervals are percentile bootstraps over rows (a drawn row's own pair for
# row-shared dealing; every pair of different drawn rows for per-rollout dealing), and the difference of
# the two shares is bootstrapped on the same draws.

# %%
order_rows = [
    {"reward": REWARD_COLUMNS[value], "dealing": v.dealing, "exploit ranked first": v.a_first,
     "call ranked first": v.b_first, "tied": v.tied, "pairs": v.pairs}
    for value, modes in ref.ordering.items() for v in modes
]  # fmt: skip
display(fixed_digits_markdown(pd.DataFrame(order_rows), digits=3))
display(Markdown(
    f"Two candidates of one strategy dealt different rows differ by a root-mean-square "
    f"{number(ref.spread['call'], 2)} (call), {number(ref.spread['exploit'], 2)} (exploit) and "
    f"{number(ref.spread['random'], 2)} (random) in mean-instance reward from the deal alone; dealt the same row, "
    f"two `call` candidates score exactly alike."))  # fmt: skip
ci_mi = ref.ordering_interval["reward_mean_instance"]
display(Markdown(
    f"Under the mean-instance reward, per-rollout dealing ranks `exploit` first in "
    f"{ci_mi.per_rollout.estimate:.1%} of exploit/call pairs (95% bootstrap over rows "
    f"{interval(100 * ci_mi.per_rollout.low, 100 * ci_mi.per_rollout.high, digits=1)}%) against "
    f"{ci_mi.row_shared.estimate:.1%} ({interval(100 * ci_mi.row_shared.low, 100 * ci_mi.row_shared.high, digits=1)}%) "
    f"row-shared: a difference of {100 * ci_mi.difference.estimate:+.1f} points, 95% "
    f"{interval(100 * ci_mi.difference.low, 100 * ci_mi.difference.high, signed=True, digits=1)}"
    + (" (interval above 0)." if ci_mi.difference.low > 0 else
       f": at {RFT_ROWS} rows the interval includes 0, so the loss of ranking from per-rollout dealing is not "
       "resolved here; what is shown is the spread each candidate draws from the deal alone (above).")
    + f" {BOOTSTRAP_REPS:,} replications, seed {BOOTSTRAP_SEED}; not pre-registered."))  # fmt: skip

# %% [markdown]
# ## 8. Launching an arm, pulling its epochs, analysing them
#
# An RFT arm is a `PokerArmSpec` (`data/specs/poker_seed.json` holds the seed's run: Qwen3-8B, 2 epochs,
# lr 1e-6, 8 candidates, 1024 tokens, thinking off). `rftlab poker launch SPEC` runs the poker preflight,
# uploads the dataset and creates the job; the evaluator it names is the arm's own (one per reward:
# `rftlab-poker-mcp` scores mean-instance, `rftlab-poker-mcp-gain` scores gain), uploaded with the
# `eval-protocol upload` command below. `rftlab fireworks poll RUN_DIR` records every finished epoch's
# rollouts and their metrics (`bb_per_hand`, `memory_gain`, `illegal_actions`) in the run store, and this
# section reads them back. The exact commands of both arms (nothing is run here):

# %%
plans = arm_plans(account_id="<account-id>")
for plan in plans:
    display(Markdown(f"**Arm `{plan.spec.arm}`** (reward `{plan.spec.reward}`, job `{plan.job_id}`):"))
    display(Markdown("```bash\n" + "\n".join(plan.commands) + "\n```"))
display(fixed_digits_markdown(pd.DataFrame(list(plans[-1].prime_mapping))))
poker_runs = arm_metrics(plans[-1].spec.experiment)
if poker_runs.empty:
    display(Markdown("No poker RFT run in the local run store yet: the per-epoch curves appear here once a "
                     "launched job has been polled."))  # fmt: skip
else:
    display(fixed_digits_markdown(poker_runs.groupby(["arm", "epoch"], as_index=False)[["reward", "bb_per_hand"]].mean()))

# %% [markdown]
# ## 9. A tiny language model trained through the Tinker API
#
# Everything above is played by scripted strategies. This section trains a **language model** on the poker
# arm through the Tinker-API path that a GPU server, hosted Tinker or another Tinker-API backend would
# serve (GRPO over the tinker-cookbook env `rftlab.training.poker.cookbook_env`, launched as an arm spec on
# backend `tinker`), here the in-process local service. The model is `rftlab/tiny-qwen3-agent`: a Qwen3
# with 2 layers and hidden size 64 (about 0.1 M parameters), randomly initialised, with a BPE trained on the
# agent tasks' chat. It reads the arm's own chat (system prompt, the `poker_act` tool block, the hand's
# prompt and tool results), writes `poker_act` tool calls in Qwen3's format, and is scored by the env's
# rules: an unreadable reply is refused and counts toward the retry limit (docs/poker.md §A.6), as for any
# model.
#
# **The warm start.** A random model writes no tool calls, so it is first trained (all weights,
# cross-entropy on the replies) on transcripts of `exploit` and `call` played in the same env, on rows of
# their own (`warm_…`, held out `held_…`), each reply the strategy's action as one `poker_act` call. At a
# few checkpoints one reply per held-out prompt is sampled at the RL temperature and read by the env; if the
# last check's valid-call rate is below the design's threshold, the study stops there and shows what the
# model wrote.
#
# **GRPO and the evaluation.** One GRPO run (seed 0, experiment `poker_tiny_lm` in the run store) on the
# mean-instance reward, every candidate of a row on the row's deal. Then the trained policy (after its last
# epoch), the warm-started base and the reference strategies `exploit` and `call` each play the same
# evaluation deals (`eval_…` rows, seen by neither the warm start nor GRPO; the same opponent and cards for
# every policy), and the trained policy is compared with each, **paired by deal** (percentile bootstrap
# and sign test, as in §4–5). The deal is the unit; with one training run the interval covers the deals and
# the model's sampling, not how another training run would come out. The design (sizes, temperature, warm
# start) was chosen on 2026-12-02 to fit about two minutes of CPU; nothing here was pre-registered: it is
# **exploratory**, and every number in this section is a tiny language model's.

# %%
import dataclasses

design_rows = [{"setting": k, "value": str(v)} for k, v in dataclasses.asdict(tiny.design).items()]
display(Markdown("**Design** (`TinyLMDesign`, a tiny language model):"))
display(fixed_digits_markdown(pd.DataFrame(design_rows)))
ws = tiny.warm_start
display(Markdown(
    f"**Warm start** (a tiny language model): {ws.train_turns} reference replies (model calls) from "
    f"{tiny.design.warm_rows} rows, {ws.steps} steps of {tiny.design.warm_batch}; each check samples one reply "
    "per held-out prompt and lets the env judge it:"))  # fmt: skip
display(fixed_digits_markdown(pd.DataFrame(tiny.warm_rows()), digits=3))
if tiny.stopped:
    display(Markdown(
        f"**Stopped**: the last held-out valid-call rate, {ws.valid_rate:.2f}, is below the design's "
        f"{tiny.design.min_valid_rate:g}, so no RL run started. What the model wrote instead (the first refused "
        "replies, as text):\n\n" + "\n".join(f"- `{e[:300].replace('`', chr(39))!r}`" for e in ws.refused_examples)))  # fmt: skip

# %% [markdown]
# Left: the warm start's held-out valid-call rate at each check. Right (once GRPO ran): per epoch of the GRPO
# run, the mean reward over its rows × candidates episodes and the valid-call rate (valid `poker_act` calls
# per model call).

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
warm_df = pd.DataFrame(tiny.warm_rows())
axes[0].plot(warm_df["step"], warm_df["held-out valid-call rate"], marker="o", color="tab:blue")
axes[0].axhline(tiny.design.min_valid_rate, color="grey", ls="--", lw=0.8, label="threshold")
axes[0].set(xlabel="warm-start step", ylabel="held-out valid-call rate", ylim=(-0.05, 1.05), title="warm start")
axes[0].legend(fontsize=8)
if not tiny.stopped:
    epochs = pd.DataFrame(tiny.epoch_rows())
    right = axes[1].twinx()
    for run_name, grp in epochs.groupby("run", sort=False):
        axes[1].plot(grp["epoch"], grp["reward"], marker="o", color="tab:orange", label=f"{run_name}: reward")
        right.plot(grp["epoch"], grp["valid-call rate"], marker="s", ls="--", color="tab:green", label=f"{run_name}: valid-call rate")
    axes[1].set(xlabel="GRPO epoch", ylabel="mean reward (mean-instance)", xticks=range(tiny.design.epochs), title="GRPO")
    right.set(ylabel="valid-call rate", ylim=(-0.05, 1.05))
    axes[1].legend(handles=axes[1].lines + right.lines, fontsize=7)
else:
    axes[1].text(0.5, 0.5, "no GRPO run: the study stopped after the warm start", ha="center", va="center", fontsize=9)
    axes[1].set_axis_off()
fig.suptitle("Tiny language model (0.1 M parameters) on poker through the Tinker API (exploratory)")
fig.tight_layout()
plt.show()  # fmt: skip

# %%
if not tiny.stopped:
    display(Markdown("**Per GRPO epoch** (a tiny language model; each epoch's rows × candidates episodes):"))
    display(fixed_digits_markdown(pd.DataFrame(tiny.epoch_rows()), digits=3))
    display(Markdown(f"**On the {tiny.design.eval_rows} evaluation deals** (means over deals; the tiny language "
                     "model's policies sampled at the design's temperature, the references scripted):"))  # fmt: skip
    display(fixed_digits_markdown(pd.DataFrame(tiny.policy_rows()), digits=3))
    tiny_table = [
        {"comparison": r.comparison, "measure": REWARD_COLUMNS.get(value, "BB/hand"), "opponent": r.opponent,
         "deals": r.deals, "mean difference": number(r.mean, 2, signed=True),
         "95% bootstrap": interval(r.low, r.high, signed=True, digits=2),
         "won / lost / tied": f"{r.better} / {r.worse} / {r.ties}", "sign test p": f"{r.sign_p:.2g}"}
        for value, table in tiny_out.paired.items() for r in table
    ]  # fmt: skip
    display(Markdown("**Paired by deal** (a tiny language model, exploratory; the deal is the unit, one training "
                     f"run; {BOOTSTRAP_REPS:,} bootstrap replications, seed {BOOTSTRAP_SEED}):"))  # fmt: skip
    display(fixed_digits_markdown(pd.DataFrame(tiny_table), digits=2))

# %% [markdown]
# **How to read it.** The mean-instance reward charges 1 per refused action (docs/poker.md §B.5), so the
# tiny model's refused calls weigh on its reward far more than its play does; the BB/hand rows show the
# play alone. A deal here is one hand: against the calling station one hand can swing by a whole stack, so
# the overall `exploit` rows rest on a few deals (read the sign test beside them). The per-opponent rows
# hold 5 to 12 deals, where a percentile bootstrap is too narrow. Trained − warm start compares the same
# model before and after a few GRPO updates on the same deals, sampled with the same seeds; a second seed,
# run once for docs/poker.md ("A tiny language model"), moved the valid-call rate the other way, so one
# run's difference says nothing about GRPO in general. None of this
# says how a model of a real size would learn the task: the study shows that the Tinker-API path trains and
# evaluates a language model on poker end to end, and what that model does at this size.
