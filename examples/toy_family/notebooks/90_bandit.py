# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (rftlab)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Toy bandit study (the "Adding a family" example)
#
# **Question.** On a two-armed Bernoulli bandit (arm means 0.4 and 0.6, 20 pulls per episode), does
# explore-then-commit earn more per pull than pulling at random? **Unit of analysis:** the episode key —
# every policy faces the same draws, so policies are compared by paired differences over keys.
# Not pre-registered; an example of the project's structure, not a research result.

# %% tags=["parameters"]
import os

QUICK = os.environ.get("RFTLAB_QUICK") == "1"
EPISODES = 40 if QUICK else 400
SEED = 0

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from rftlab.analysis.display import markdown_table
from rftlab.policies.bandit import BANDIT_POLICIES
from rftlab.studies.bandit import compare_policies

rows = compare_policies(BANDIT_POLICIES, control="random", episodes=EPISODES, seed=SEED)
table = pd.DataFrame(rows)
etc = table.set_index("policy").loc["explore_then_commit"]
display(
    Markdown(
        f"**Summary.** Over {EPISODES} paired episodes, explore-then-commit minus random is "
        f"{etc['difference']:+.3f} reward per pull (95% interval [{etc['difference_low']:+.3f}, "
        f"{etc['difference_high']:+.3f}]). It does not show anything beyond this toy bandit."
    )
)
display(Markdown(markdown_table(table.round(3))))

# %%
fig, ax = plt.subplots(figsize=(5, 2.5))
ax.errorbar(
    table["difference"],
    range(len(table)),
    xerr=[table["difference"] - table["difference_low"], table["difference_high"] - table["difference"]],
    fmt="o",
)
ax.set_yticks(range(len(table)), table["policy"])
ax.axvline(0, color="grey", lw=0.8)
ax.set_xlabel("reward per pull minus random (paired, 95% CI)")
plt.tight_layout()
plt.show()
