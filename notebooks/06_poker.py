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
# # Exploitable poker: what the reference strategies earn, and what an RFT reward would pay for
#
# CLBench `exploitable_poker` (`docs/poker.md`): heads-up no-limit hold'em, one hand per instance, fresh
# 100-BB stacks every hand, against three deterministic opponents — Tom (calling station), Adam
# (fit-or-fold) and Alex (loose-aggressive). The official schedule plays 120 hands in five stages with
# a notice at each opponent change; the RFT port plays 16 hands against one opponent per rollout. The
# environment runs on the real `texasholdem==0.11.0` engine and replays the published CLBench trace
# exactly (tests). This notebook plays model-free strategies only: it is the preflight a researcher reads
# before paying for a run — how much there is to win against each opponent, how noisy a hand is, and
# whether the two RFT rewards separate a good strategy from a bad one.

# %% tags=["parameters"]
import os

from rftlab.runs.paths import runs_root, spec_path

QUICK = os.environ.get("RFTLAB_QUICK") == "1"
BACKEND = os.environ.get("RFTLAB_BACKEND", "local")  # model-free here; arms launch through the Fireworks launcher
RUNS = 1 if QUICK else 5  # permuted runs of the default schedule (run 0 = canonical order)
SCHEDULE = "quick_test" if QUICK else "default"
RFT_ROWS = 6 if QUICK else 96  # RFT-mode rollouts (row ids), as the seed's 96-row dataset
RFT_HANDS = 4 if QUICK else 16
EQUITY_SAMPLES = 40 if QUICK else 200  # Monte-Carlo samples of the exploit strategy's equity estimate
SEED = 0
POKER_SPEC = spec_path("poker_seed.json")  # the seed's arm spec (data/specs), from any working directory
RUNS_ROOT = runs_root()  # the project's run store ($RFTLAB_RUNS_ROOT, else runs/)

# %%
# (imports follow the parameters cell, which must come first)
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from rftlab.analysis.display import markdown_table
from rftlab.analysis.poker import bb_summary, opponent_table, rft_episode_rows, stage_gains
from rftlab.envs.poker import R_MAX, SCHEDULES, PokerTask
from rftlab.rollout.poker.play import hand_rows, play_rft, play_runs
from rftlab.studies.poker import make_strategy


def md_table(df: pd.DataFrame) -> Markdown:
    return Markdown(markdown_table(df))


def ci(pair) -> str:
    return f"[{pair[0]:+.2f}, {pair[1]:+.2f}]"


STRATEGIES = {
    "random": lambda: make_strategy("random", SEED),
    "call": lambda: make_strategy("call"),
    "exploit": lambda: make_strategy("exploit", SEED, samples=EQUITY_SAMPLES),
}
DESCRIPTION = {
    "random": "a uniformly random legal action; raises to a uniform total",
    "call": "calls when owing chips, else checks (never folds, never raises)",
    "exploit": "the counter-strategy for the opponent named in the prompt (knows the policy, not the cards)",
}

# %% [markdown]
# ## 1. The task as the model sees it
#
# The first decision of the default schedule (the system is the big blind after Tom limped). The prompt
# layout, labels and menu are CLBench's format; the brief is in the project's own wording (an
# upstream-text mode reproduces CLBench's prose for exact replays).

# %%
first = PokerTask(SCHEDULE).reset()
display(Markdown("```text\n" + first.prompt + "\n```"))
display(Markdown(f"Legal actions: `{first.legal_actions}`; instance `{first.instance_id}`."))

# %% [markdown]
# ## 2. Reference strategies over the schedule
#
# BB per hand by stage, with a 95% interval over **deals**: each deal is one hand id; with several
# permuted runs a deal recurs in another order, so its result is averaged over runs first. Upstream's
# reference maximum is r_max BB per hand.

# %%
schedule_rows = {name: hand_rows(play_runs(make(), schedule=SCHEDULE, runs=range(RUNS), policy_seed=SEED))
                 for name, make in STRATEGIES.items()}  # fmt: skip
summaries = {name: bb_summary(rows) for name, rows in schedule_rows.items()}
stage_table = []
for name, s in summaries.items():
    for st in s["stages"]:
        stage_table.append({"strategy": name, "stage": st["stage"], "opponent": st["opponent"],
                            "hands": st["hands"], "BB/hand": st["bb_per_hand"], "95% CI": ci(st["ci95"])})  # fmt: skip
    o = s["overall"]
    stage_table.append({"strategy": name, "stage": "all", "opponent": "—", "hands": o["hands"],
                        "BB/hand": o["bb_per_hand"], "95% CI": ci(o["ci95"])})  # fmt: skip
display(md_table(pd.DataFrame(stage_table)))
display(Markdown(f"Schedule `{SCHEDULE}`, {RUNS} permuted run(s); r_max = {R_MAX} BB/hand."))

# %%
fig, ax = plt.subplots(figsize=(8, 3.6))
n_stages = len(SCHEDULES[SCHEDULE])
width = 0.8 / len(summaries)
for i, (name, s) in enumerate(summaries.items()):
    xs = [st["stage"] + (i - 1) * width for st in s["stages"]]
    ys = [st["bb_per_hand"] for st in s["stages"]]
    low = [y - st["ci95"][0] for y, st in zip(ys, s["stages"], strict=True)]
    high = [st["ci95"][1] - y for y, st in zip(ys, s["stages"], strict=True)]
    err = [low, high]
    ax.bar(xs, ys, width=width, yerr=err, capsize=3, label=name)
ax.axhline(0, color="black", lw=0.8)
ax.set_xticks(range(1, n_stages + 1), [f"{k + 1}: {st.opponent_name}" for k, st in enumerate(SCHEDULES[SCHEDULE])])
ax.set_ylabel("BB per hand")
ax.set_title("Reference strategies by stage (95% CI over deals)")
ax.legend()
ax.set_yscale("symlog", linthresh=1.0)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Against each opponent alone (the RFT setting)
#
# In the RFT port every rollout plays 16 hands against one opponent; here the opponent and the cards
# come from the row id, so every candidate of a GRPO group would face the same hands. Each rollout is
# an independent deal set, so intervals are over rollouts.

# %%
row_ids = [f"poker_s{1000 + i}" for i in range(RFT_ROWS)]
rft_rows = {name: rft_episode_rows(play_rft(make(), row_ids, hands=RFT_HANDS, policy_seed=SEED))
            for name, make in STRATEGIES.items()}  # fmt: skip
opp_rows = []
for name, rows in rft_rows.items():
    for value in ("bb_per_hand", "reward_gain", "reward_mean_instance"):
        for t in opponent_table(rows, value):
            opp_rows.append({"strategy": name, "measure": value, "opponent": t["opponent"], "rollouts": t["episodes"],
                             "mean": t[value], "95% CI": ci(t["ci95"])})  # fmt: skip
opp_df = pd.DataFrame(opp_rows)
display(md_table(opp_df[opp_df.measure == "bb_per_hand"].drop(columns="measure")))

# %% [markdown]
# ## 4. What the two RFT rewards pay for
#
# - **mean-instance** (the verifiers rubric, B.5): mean BB per completed hand, −1 per illegal action,
#   +0.1 once an output parses — it pays for winning chips.
# - **gain** (the seed repo's later variant, B.3): late-half minus early-half BB (hands clipped to ±6,
#   the gain to ±8), −0.02 per illegal action — it pays for *improving within a rollout*, which only
#   memory can produce; a memoryless strategy's expected gain is zero whatever its skill.

# %%
display(md_table(opp_df[opp_df.measure != "bb_per_hand"].pivot_table(
    index=["strategy", "opponent"], columns="measure", values="mean").reset_index()))  # fmt: skip

# %%
gains = pd.DataFrame([g for rows in schedule_rows.values() for g in stage_gains(rows)])
gains["strategy"] = [name for name, rows in schedule_rows.items() for _ in stage_gains(rows)]
gain_table = gains.groupby(["strategy", "stage", "opponent"], as_index=False)["gain"].mean()
display(Markdown("**Late-half minus early-half BB/hand within each stage (mean over runs).** "
                 "A memoryless strategy's gain is noise around zero."))  # fmt: skip
display(md_table(gain_table))

# %% [markdown]
# ## 5. Launching an arm, pulling its epochs, analysing them
#
# An RFT arm is a `PokerArmSpec` (`data/specs/poker_seed.json` holds the seed's run: Qwen3-8B, 2 epochs,
# lr 1e-6, 8 candidates, 1024 tokens, thinking off). `rftlab poker launch SPEC` runs the poker preflight,
# uploads the dataset and creates the job; `rftlab fireworks poll RUN_DIR` records every finished epoch's
# rollouts and their metrics (`bb_per_hand`, `memory_gain`, `illegal_actions` from the `poker_act`
# evaluator) in the run store, and this section reads them back — the same tidy table as every other
# backend. The exact commands (nothing is run here):

# %%
from rftlab.launch.poker.spec import load_poker_arm_spec, prime_mapping
from rftlab.runs import load_metrics
from rftlab.studies.poker import fireworks_launcher

arm_spec = load_poker_arm_spec(POKER_SPEC)
plan = fireworks_launcher(account_id="<account-id>").plan(arm_spec)
display(md_table(pd.DataFrame(prime_mapping(arm_spec))))
display(Markdown("```bash\n" + "\n".join(" ".join(argv) for argv in plan.commands) + "\n```"))
poker_runs = load_metrics(RUNS_ROOT, experiment=arm_spec.experiment)
if poker_runs.empty:
    display(Markdown("No poker RFT run in the local run store yet: the per-epoch curves appear here once a "
                     "launched job has been polled."))  # fmt: skip
else:
    display(md_table(poker_runs.groupby(["arm", "epoch"], as_index=False)[["reward", "bb_per_hand"]].mean()))

# %% [markdown]
# ## 6. Findings (computed)

# %%
best = max(summaries, key=lambda n: summaries[n]["overall"]["bb_per_hand"])
o = summaries[best]["overall"]
exp_rows = pd.DataFrame(rft_rows["exploit"])
call_rows = pd.DataFrame(rft_rows["call"])
lines = [
    f"- Over the `{SCHEDULE}` schedule the best reference strategy is **{best}** at "
    f"{o['bb_per_hand']:+.2f} BB/hand (95% CI {ci(o['ci95'])}), against r_max = {R_MAX}.",
    f"- Always-call earns {summaries['call']['overall']['bb_per_hand']:+.2f} BB/hand and random "
    f"{summaries['random']['overall']['bb_per_hand']:+.2f}: skill, not luck, separates the strategies.",
    f"- In RFT mode the mean-instance reward ranks exploit above always-call by "
    f"{exp_rows.reward_mean_instance.mean() - call_rows.reward_mean_instance.mean():+.2f} on average, while the gain "
    f"reward differs by only {exp_rows.reward_gain.mean() - call_rows.reward_gain.mean():+.2f}: the gain reward "
    "does not pay for a fixed good strategy, only for change within a rollout.",
    f"- Hand results are heavy-tailed (stack-sized pots): the widest stage interval above spans "
    f"{max(st['ci95'][1] - st['ci95'][0] for s in summaries.values() for st in s['stages']):.1f} BB/hand, "
    "so per-epoch curves of an RFT run need many hands per point.",
]
display(Markdown("\n".join(lines)))
