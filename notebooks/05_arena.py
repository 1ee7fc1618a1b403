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
# # Arena Stage-1 SFT: the handoff's experiment order as one run, and gates that mean what they say

# %% tags=["parameters"]
import os
import tempfile

from rftlab.runs.paths import notebook_runs_root, spec_path

QUICK = os.environ.get("RFTLAB_QUICK") == "1"
# Quick mode builds a small dataset (not the Stage-1 configuration), evaluates every 5th frozen case and
# runs both lineages at smoke size in a temporary run store.
NUM_SEEDS = 96 if QUICK else 1024
MECHANICS_PER_KIND = 8 if QUICK else 32
SILENCE_EXAMPLES = 16 if QUICK else 512
CASE_STRIDE = 5 if QUICK else 1
# Scratch folder for the built data and the evaluations' files (not runs, so not in the run store); it is
# removed when the kernel exits. The two Stage-1 lineages are runs: they go to the run store.
_SCRATCH = tempfile.TemporaryDirectory(prefix="rftlab-arena-sft-")
WORK_DIR = _SCRATCH.name
STORE = notebook_runs_root(QUICK)  # $RFTLAB_RUNS_ROOT, else a throwaway folder in quick mode, else runs/
LOCAL_SPEC = spec_path("arena_sft_local.json")  # the tiny local model (CPU)
SIMULATED_SPEC = spec_path("arena_sft_simulated.json")  # the simulated learner

# %%
# (imports follow the parameters cell, which must come first)
import shutil
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", message="IProgress not found")  # no stderr in the report

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from IPython.display import Markdown, display  # noqa: E402

from rftlab.analysis.arena.audit import audit_dataset, write_audit  # noqa: E402
from rftlab.analysis.arena.compare import (  # noqa: E402
    compare_evaluations,
    compare_markdown,
    evaluation_from_records,
    named_endpoints,
)
from rftlab.analysis.arena.gates import (  # noqa: E402
    DEFAULT_GATE_SPEC,
    evaluate_arena_gates,
    gate_table,
    license_rows,
    load_gate_spec,
    rows_table,
)
from rftlab.analysis.arena.handoff import immutable_inputs, render_handoff  # noqa: E402
from rftlab.analysis.display import interval  # noqa: E402
from rftlab.analysis.paired import sign_test  # noqa: E402
from rftlab.analysis.rate_gates import pass_probability  # noqa: E402
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT, FROZEN_MANIFEST_SHA256, frozen_cases, manifest_sha256  # noqa: E402
from rftlab.policies.arena.providers import EndpointProvider, OracleProvider, ScriptedProvider  # noqa: E402
from rftlab.policies.arena.server import ArenaPolicyServer  # noqa: E402
from rftlab.reports import Timings  # noqa: E402
from rftlab.rollout.arena.evaluation import CONDITION_LABELS, CONDITIONS, run_frozen_eval  # noqa: E402
from rftlab.rollout.arena.sft_data import STAGE1_CONFIG, STAGE1_STRUCTURAL_SHA256, SftConfig, write_dataset  # noqa: E402
from rftlab.studies.arena import (  # noqa: E402
    evaluate_frozen,
    lineage_rows,
    read_rows,
    run_stage1,
    write_evaluation,
    write_spec_variant,  # noqa: E402
)
from rftlab.training.arena.stage1 import load_stage1_spec  # noqa: E402

work = Path(WORK_DIR)
for name in ("data", "data_rebuild", "data_tampered", "eval"):
    shutil.rmtree(work / name, ignore_errors=True)
work.mkdir(parents=True, exist_ok=True)
config = SftConfig(
    num_seeds=NUM_SEEDS,
    targeted_mechanics_per_kind=MECHANICS_PER_KIND,
    targeted_silence_examples=SILENCE_EXAMPLES,
)
is_stage1 = config == STAGE1_CONFIG


if QUICK:  # smoke-size copies of the two lineage specs
    LOCAL_SPEC = write_spec_variant(
        LOCAL_SPEC,
        work / "local.json",
        {"overfit": {"steps": 2}, "evaluation": {"frozen_case_stride": 30, "max_tokens": 8}},
    )
    SIMULATED_SPEC = write_spec_variant(
        SIMULATED_SPEC,
        work / "simulated.json",
        {
            "overfit": {"rows": 16, "steps": 60, "batch_size": 4},
            "train": {"max_steps": 40, "batch_size": 4, "validation_every_steps": 20, "min_validation_measurements": 3},
            "evaluation": {"frozen_case_stride": 12, "test_rows": 20},
        },
    )
timings = Timings()  # wall time per step, for the build log


# %%
# Every computation, in the order of work; the sections below only display what it produced.
manifest = timings.timed("build", write_dataset, work / "data", config)
rebuilt = write_dataset(work / "data_rebuild", config)
identical = all(
    (work / "data" / name).read_bytes() == (work / "data_rebuild" / name).read_bytes()
    for name in [*manifest["files"], "manifest.json"]
)
digest_match = manifest["structural_sha256"] == STAGE1_STRUCTURAL_SHA256
inputs = immutable_inputs(manifest)

audit = timings.timed("audit", audit_dataset, work / "data", require_split_action_coverage=is_stage1)
write_audit(audit, work / "data" / "audit.json")  # what `rftlab arena audit` writes; the handoff reads it
tampered = work / "data_tampered"
shutil.copytree(work / "data", tampered)
raw = bytearray((tampered / "validation.jsonl").read_bytes())
position = len(raw) // 2
raw[position] = ord("7") if raw[position] != ord("7") else ord("8")
(tampered / "validation.jsonl").write_bytes(bytes(raw))
tamper_audit = audit_dataset(tampered)

cases_run = list(range(0, FROZEN_CASE_COUNT, CASE_STRIDE))
validation_rows = read_rows(work / "data" / "validation.jsonl")
providers = {
    "oracle": OracleProvider(),
    "scripted": ScriptedProvider(),
    "scripted, inbox ignored": ScriptedProvider(use_inbox=False),
}
evaluations = {}
for label, provider in providers.items():
    evaluations[label] = timings.timed(f"eval {label}", evaluate_frozen, provider, cases_run, validation_rows)
    write_evaluation(work / "eval" / label.replace(",", "").replace(" ", "_"), evaluations[label])
summaries = {label: e.summary for label, e in evaluations.items()}
with ArenaPolicyServer() as server:  # bound to 127.0.0.1; no key needed locally
    served_records = timings.timed(
        "served", run_frozen_eval, EndpointProvider("scripted-balanced", server.base_url), cases_run
    )
    served_requests = len(server.requests)
served_agrees = [{k: v for k, v in r.items() if k != "model"} for r in served_records] == [
    {k: v for k, v in r.items() if k != "model"} for r in evaluations["scripted"].records
]


compared = {  # the frozen evaluations in the form `arena compare` reads
    label: evaluation_from_records(evaluations[label].records, summaries[label], label)
    for label in ("scripted, inbox ignored", "scripted", "oracle")
}
scripted_compare = timings.timed(
    "compare", compare_evaluations, compared["scripted, inbox ignored"], compared["scripted"]
)
scripted_gates = evaluate_arena_gates(summaries["scripted"], scripted_compare)
oracle_gates = evaluate_arena_gates(
    summaries["oracle"], compare_evaluations(compared["scripted, inbox ignored"], compared["oracle"])
)
gate_spec, gate_sha = load_gate_spec(DEFAULT_GATE_SPEC)

local = timings.timed("local lineage", run_stage1, LOCAL_SPEC, backend="local", store_root=STORE, data_dir=work / "data")
simulated = timings.timed(
    "simulated lineage", run_stage1, SIMULATED_SPEC, backend="simulated", store_root=STORE, data_dir=work / "data"
)
handoff = render_handoff(work / "data", gate_spec=DEFAULT_GATE_SPEC, oracle_summary=summaries["oracle"])
# durations are not results: stderr goes to the report build's log (reports/build.log), never the report
print(timings.line(), file=sys.stderr)


# %% [markdown]
# ## Summary

# %%
gd = scripted_compare["endpoints"]["generated_minus_dropped"]
within = scripted_compare["rftlab_additions"]["endpoints"]["generated_minus_shuffled_within"]
g1 = scripted_gates.check("act_schema_valid")
sim_verdicts = simulated.gates["verdicts"] if simulated.gates else None
unmet = [r["item"] for r in inputs if r["met"] != "yes"]
local_overfit = local.overfit["schema_valid"] if local.overfit else {}
lines = [
    "**Question.** Can the project carry out the seed's Stage-1 order of work (base model on the frozen cases, "
    "overfit check, LoRA SFT with validation, selection on validation, one test evaluation, base-vs-SFT "
    "comparison, gates G1–G7) as one recorded run, and do the gates decide what they claim to decide?",
    "",
    "**Verdict.** The pipeline runs end to end and refuses what it should, but no language model has been "
    "trained here. "
    + (
        f"On this machine's tiny local model (random init, a plumbing check, not a language model) the run "
        f"stops at step {local.stopped_at}, as expected: schema validity after the overfit steps "
        + ", ".join(f"{k} {v:.2f}" for k, v in local_overfit.items() if v is not None)
        + ", where both phases must reach 0.99. "
        if local.stopped_at
        else "The tiny local model did not stop early. "
    )
    + (
        f"On the simulated learner (the scripted policy with errors that fade with training; not a model) every "
        f"stage runs: step {simulated.selection['selected_step']} is selected on validation, evaluated once, "
        f"and promotion is {'PASS' if sim_verdicts['promotion'] else 'FAIL'} with the communication claim "
        f"{'supported' if sim_verdicts['communication_claim'] else 'not supported'}."
        if sim_verdicts
        else f"The simulated learner stopped at step {simulated.stopped_at}."
    ),
    "",
    "**The numbers that carry it.**",
    "",
    f"- Data: structural digest {'equals' if digest_match else 'differs from'} the seed's Stage-1 value; "
    f"the audit {'passed' if audit.valid else 'FAILED'} ({len(audit.failures)} failures) and caught a one-byte "
    f"edit; the seed's immutable inputs are **not met**: {', '.join(unmet) or 'none'} (own prompt wording).",
    f"- Scripted policy with vs without its inbox ({len(cases_run)} cases; the messages only help it avoid "
    f"duplicate targets): generated − dropped {gd['mean_difference']:+.3f} {interval(*gd['mean_difference_95'], signed=True)}, "
    f"sign-flip p = {gd['randomization_p_two_sided']:.3f}, resting on {gd['sign_test']['positive']} cases better, "
    f"{gd['sign_test']['negative']} worse and {gd['sign_test']['ties']} tied (sign test p = "
    f"{gd['sign_test']['p_value']:.2f}).",
    f"- The within-case shuffle (the case's own messages under the wrong senders, node names valid) gives "
    f"generated − shuffled {within['mean_difference']:+.3f} {interval(*within['mean_difference_95'], signed=True)}, against "
    f"{scripted_compare['endpoints']['generated_minus_shuffled']['mean_difference']:+.3f} "
    f"{interval(*scripted_compare['endpoints']['generated_minus_shuffled']['mean_difference_95'], signed=True)} for the cross-case "
    f"shuffle, which equals generated − dropped here (names of another graph are read as no messages). The "
    f"communication claim (G7, all three lower bounds > 0) is "
    f"{'supported' if scripted_gates.verdicts()['communication_claim'] else 'not supported'} for the scripted policy.",
    f"- G1 now decides on all {g1.n} ACT replies of the frozen evaluation with the Wilson lower bound "
    f"({g1.evidence.get('wilson_lower_95', float('nan')):.4f} for the scripted policy); a model exactly at "
    f"99.5% passes it {g1.evidence.get('pass_probability_at_threshold', float('nan')):.1%} of the time "
    f"(at the old n = 52 and the point rule it was {pass_probability(52, 0.995, 0.995, 'point'):.0%}).",
    "",
    "**What it does not show.** Anything about Qwen3-4B or any language model after SFT: the LoRA run belongs on "
    "a GPU or Tinker (`rftlab arena handoff` writes the commands). The scripted and simulated numbers exercise "
    "the machinery only, and the tiny local model's stop is a statement about a tiny random-init model. "
    "Nothing here was pre-registered beyond the gate spec, whose SHA-256 is quoted below.",
]
display(Markdown("\n".join(lines)))

# %% [markdown]
# ## 1. The SFT data and the seed's immutable inputs
#
# Each natural seed gives four BROADCAST rows (label: the reference broadcast of the agent's own
# local-priority action) and an ACT row for every agent whose oracle-optimal action is unique, equals what
# the agent would choose from its own prompt, and is not also chosen by a teammate. Targeted rows add
# WAIT, SCAN and TRANSFER situations and "nothing worth saying" broadcasts. Splits follow a hash of the
# seed. The build is done twice to check that it is byte-identical.

# %%
counts = pd.DataFrame(
    [
        {"split": split, "rows": n, "share": n / manifest["num_examples"]}
        for split, n in manifest["examples_by_split"].items()
    ]
)
display(Markdown(counts.to_markdown(index=False, floatfmt=".3f")))
strata = pd.DataFrame(
    [
        {
            "training stratum": name,
            "rows": s["rows"],
            "sampling probability": s["probability"],
            "expected passes": manifest["training_mixture"]["draws"] * s["probability"] / max(1, s["rows"]),
        }
        for name, s in manifest["training_mixture"]["strata"].items()
    ]
)
display(Markdown(strata.to_markdown(index=False, floatfmt=".2f")))
rejections = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in manifest["rejections"].items())
display(
    Markdown(
        f"Configuration: {config.num_seeds} natural seeds, {config.targeted_mechanics_per_kind} targeted rows per "
        f"mechanic, {config.targeted_silence_examples} silence rows ({'the Stage-1 configuration' if is_stage1 else 'a quick-mode subset, not Stage-1'}). "
        f"{manifest['num_examples']} rows ({', '.join(f'{k} {v}' for k, v in manifest['examples_by_phase'].items())}) "
        f"built. Candidate ACT rows rejected: {rejections}. Rebuilding gave "
        f"{'byte-identical' if identical else 'DIFFERENT'} files.\n\n"
        "The seed fixes its inputs as immutable. Against them:"
    )
)
display(Markdown(pd.DataFrame(inputs).to_markdown(index=False)))
display(
    Markdown(
        "The dataset version, content SHA-256 and prompt version differ because rftlab renders the prompts in its own "
        "wording (`docs/arena.md` §13 gap 1): the row ids hash the full messages. The structural digest (§9.6) leaves "
        "the wording out and "
        + ("matches the seed's Stage-1 value, for all rows and each split: the states, labels and metadata are the "
           "seed's. " if digest_match else "does not match in quick mode, which builds a subset. ")
        + "A model trained on these rows is trained on rftlab's prompt, not on the seed's exact bytes."
    )
)  # fmt: skip

# %% [markdown]
# ## 2. The data audit
#
# The audit rebuilds every state from its seed, re-solves the oracle, re-parses every label strictly,
# checks splits, leakage and intents, regenerates the whole dataset to compare prompts, labels and
# metadata row by row, and compares every file with its SHA-256 in the manifest. It then runs again on a
# copy in which a single byte of `validation.jsonl` was changed.

# %%
kinds = pd.DataFrame(audit.action_kinds_by_split).fillna(0).astype(int)
kinds["all"] = kinds.sum(axis=1)
display(Markdown(kinds.to_markdown()))
display(
    Markdown(
        f"Audit of the fresh data: **{'passed' if audit.valid else 'FAILED'}** "
        f"({audit.num_examples} rows, {audit.num_unique_seeds} seeds, {audit.verified_solver_seeds} seeds whose "
        f"ACT labels were re-verified with the exact solver, {len(audit.failures)} failures; per-split coverage of all "
        f"seven action kinds {'required' if is_stage1 else 'not required in quick mode'}). Broadcast fact counts "
        f"0/1/2/3: {', '.join(str(audit.broadcast_fact_counts.get(str(k), 0)) for k in range(4))}.\n\n"
        f"After changing byte {position} of `validation.jsonl`: **{'passed' if tamper_audit.valid else 'failed'}** with "
        f"{len(tamper_audit.failures)} failure lines, for example:"
    )
)
print("\n".join(tamper_audit.failures[:6]))

# %% [markdown]
# ## 3. Frozen evaluation under five message conditions
#
# The frozen manifest is 60 cases (20 each of sizes 12, 13 and 14; RED styles cycling balanced, aggressive,
# defensive). Each case asks four broadcasts and then 28 actions: under the agents' own ("generated")
# messages with three displayed action orders, with no messages ("dropped"), with the oracle's reference
# messages, with reference messages of another case ("shuffled (cross-case)", the seed's condition, whose
# node names do not exist in this graph), and with the case's own generated messages delivered under the
# wrong senders ("shuffled (within case)", rftlab's addition: a seeded derangement of the four agents, so
# every node name stays valid). Three providers answer:
#
# - **oracle** returns the reference reply; it must score regret 0 and strict rate 1 (a harness check);
# - **scripted** reads only its prompt: its own local-priority action, the reference-style broadcast of that
#   action, and in the ACT phase it skips a target a lower-numbered teammate declared;
# - **scripted, inbox ignored** is the same policy without reading messages, a "base" that cannot use them.
#
# The scripted policy is also evaluated through the local OpenAI-compatible policy server over HTTP
# (`endpoint` provider), exactly as a served model would be; the two runs must agree case by case.

# %%
table = []
for label, s in summaries.items():
    for condition in CONDITIONS:
        c = s["conditions"][condition]
        table.append(
            {
                "policy": label,
                "messages": CONDITION_LABELS[condition],
                "strict actions": c["strict_action_rate"],
                "mean regret": c["mean_oracle_regret"],
                "regret 95% CI": interval(*c["mean_oracle_regret_95"]),
                "optimal": c["optimal_outcome_rate"],
                "optimal Wilson 95%": interval(*c["optimal_outcome_wilson_95"]),
                "non-redundant": c["nonredundant_joint_action_rate"],
            }
        )
display(Markdown(pd.DataFrame(table).to_markdown(index=False, floatfmt=".3f")))
oracle = summaries["oracle"]
oracle_ok = all(
    c["mean_oracle_regret"] == 0 and c["strict_action_rate"] == 1 and c["optimal_outcome_rate"] == 1
    for c in oracle["conditions"].values()
)
display(
    Markdown(
        f"{len(cases_run)} of {FROZEN_CASE_COUNT} frozen cases (manifest `{manifest_sha256(frozen_cases())[:16]}…`, "
        f"{'equal to' if manifest_sha256(frozen_cases()) == FROZEN_MANIFEST_SHA256 else 'NOT equal to'} the "
        f"published hash). The oracle harness check {'passes' if oracle_ok else 'FAILS'}: regret 0, strict and "
        f"optimal rate 1 in every condition, mean reward {oracle['conditions']['generated']['mean_environment_reward']:.4f}. "
        f"Through the policy server: {served_requests} HTTP chat completions; the "
        f"records {'equal' if served_agrees else 'DIFFER from'} the in-process run in every case."
    )
)

# %% [markdown]
# ## 4. What the messages change: paired differences
#
# Per case, reward left − right (positive favours the left condition), with the 95% interval over cases, the
# signs of the case differences and their exact sign test. Most cases tie, so the sign test is the honest
# companion of the mean.

# %%
effects = []
for label, s in summaries.items():
    per_case = s["per_case"]
    for e in s["communication_effects"].values():
        left, right = e["left"], e["right"]
        signs = sign_test([c[f"{left}_reward"] - c[f"{right}_reward"] for c in per_case])
        effects.append(
            {
                "policy": label,
                "difference": f"{CONDITION_LABELS[left]} − {CONDITION_LABELS[right]}",
                "mean": e["mean_difference"],
                "95% CI": interval(*e["mean_difference_95"], signed=True),
                "better / worse / tied": f"{signs.positive} / {signs.negative} / {signs.ties}",
                "sign test p": f"{signs.p_value:.3f}",
            }
        )
display(Markdown(pd.DataFrame(effects).to_markdown(index=False, floatfmt="+.3f")))

fig, ax = plt.subplots(figsize=(8, 3.4))
rows = [e for e in effects if e["policy"] != "oracle"]
for y, e in enumerate(rows):
    s = summaries[e["policy"]]["communication_effects"]
    key = next(k for k, v in s.items() if f"{CONDITION_LABELS[v['left']]} − {CONDITION_LABELS[v['right']]}" == e["difference"])
    low, high = s[key]["mean_difference_95"]
    color = "C0" if e["policy"] == "scripted" else "C7"
    ax.errorbar(e["mean"], y, xerr=[[e["mean"] - low], [high - e["mean"]]], fmt="o", color=color, capsize=3)
ax.axvline(0, color="black", linewidth=0.8)
ax.set_yticks(range(len(rows)), [f"{e['policy']}: {e['difference']}" for e in rows], fontsize=8)
ax.set_xlabel("paired reward difference per case (95% CI)")
ax.set_title(f"Message conditions, paired by case (scripted policies, {len(cases_run)} frozen cases)")
ax.invert_yaxis()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 5. `rftlab arena compare`: base vs candidate, paired (§10.6)
#
# `frozen-paired-arena-v1` on two real evaluations: the scripted policy that ignores its inbox as the
# "base" and the one that reads it as the "SFT" candidate. Per endpoint: the mean paired difference and
# its interval, the signs, the sign-flip randomisation p-value (`random.Random(0)`, 100,000 trials) and the
# exact sign test. The test suite checks this against an independent computation from the rows files.

# %%
display(Markdown(compare_markdown(scripted_compare)))
primary = scripted_compare["endpoints"]["primary"]
display(
    Markdown(
        "Claim gates of §10.6: "
        + ", ".join(f"`{k}` {v}" for k, v in scripted_compare["claim_gates"].items())
        + ". Here the base is the candidate with its inbox ignored, which is the candidate under dropped messages: "
        f"the primary regret difference ({primary['mean_difference']:+.4f}) and the generated − dropped "
        f"difference ({gd['mean_difference']:+.4f}) are the same comparison by construction, resting on the same "
        f"{gd['sign_test']['positive']}-{gd['sign_test']['negative']} split of the non-tied cases; G5 and G7 both "
        "read this one comparison, and for a trained model against its base they become different comparisons."
    )
)

# %% [markdown]
# ## 6. Gates with their operating characteristics
#
# `data/specs/arena_gates.json` (`arena-stage1-sft-promotion-v2`, hashed) declares for every check the data it
# reads, the rule (`point` estimate or Wilson `lower_bound`) and the smallest n it accepts. G1, G2, G4 and G6
# read every reply of the frozen evaluation, G3 the validation split (the seed requires it), G5 and G7 the
# comparison above. A check with too few observations says INSUFFICIENT N. "P(pass) at threshold" is the
# probability that a model whose true rate equals the threshold passes at this n (exact binomial).

# %%
display(Markdown(f"**Candidate: scripted** (base: scripted, inbox ignored; {len(cases_run)} cases)"))
display(Markdown(gate_table(scripted_gates)))
display(Markdown(pd.DataFrame(license_rows(scripted_gates)).to_markdown(index=False)))
display(Markdown("**Candidate: oracle** (same base)"))
display(Markdown(gate_table(oracle_gates)))
v, vo = scripted_gates.verdicts(), oracle_gates.verdicts()
display(
    Markdown(
        f"Gate spec SHA-256 `{gate_sha}`. Scripted: promotion {'PASS' if v['promotion'] else 'FAIL'}, communication "
        f"claim {'supported' if v['communication_claim'] else 'not supported'}. Oracle: promotion "
        f"{'PASS' if vo['promotion'] else 'FAIL'}, communication claim {'supported' if vo['communication_claim'] else 'not supported'} "
        "(its actions ignore the messages, so no message condition can help it). Neither says anything about a language model."
    )
)

# %% [markdown]
# ## 7. The Stage-1 run on this machine: the tiny local model
#
# `rftlab arena sft-run data/specs/arena_sft_local.json --backend local` runs the seed's order of work as one
# lineage in the run store, on the in-process tinker-compatible backend with `rftlab/tiny-qwen3-arena`: a
# randomly initialised 2-layer Qwen3 (hidden size 64) with a byte-level BPE trained on arena prompts. At a
# size that fits the report budget it is a check of the plumbing, not a language model, and it is expected
# to stop.

# %%
local_spec, _ = load_stage1_spec(LOCAL_SPEC)
display(Markdown(f"Size of this run (`{local_spec.name}`): {local_spec.size_note}"))
display(Markdown(pd.DataFrame(lineage_rows(local)).to_markdown(index=False)))
display(
    Markdown(
        f"Tiny local model, lineage `{local.lineage['lineage']}`: "
        + (
            f"**stopped at step {local.stopped_at}.** Diagnosis recorded in the run store: {local.lineage['stop_reason']}"
            if local.stopped_at
            else "completed."
        )
        + " (A finished lineage is read back from the run store, not rerun.)"
    )
)

# %% [markdown]
# ## 8. The whole lineage on the simulated learner
#
# To show every stage, the same lineage runs on the simulated learner (`--backend simulated`): a stand-in for
# a model behind the tinker interface whose replies are the scripted policy's, corrupted (cut JSON, a wrong
# key, an illegal action id, an unsupported fact) with a probability that falls with its training steps.
# **Every number in this section describes that simulation, not a model.**

# %%
simulated_spec, _ = load_stage1_spec(SIMULATED_SPEC)
display(Markdown(f"Size of this run (`{simulated_spec.name}`): {simulated_spec.size_note}"))
display(Markdown(pd.DataFrame(lineage_rows(simulated)).to_markdown(index=False)))
if simulated.measurements:
    steps = [m["step"] for m in simulated.measurements]
    series = {
        "selection score": [m["validation"]["selection_score"] for m in simulated.measurements],
        "ACT schema valid (G1 ≥ 0.995)": [m["validation"]["act"]["schema_valid"] for m in simulated.measurements],
        "BROADCAST schema valid (G2 ≥ 0.99)": [m["validation"]["broadcast"]["schema_valid"] for m in simulated.measurements],
        "ACT legal (G4 ≥ 0.95)": [m["validation"]["act"]["legal"] for m in simulated.measurements],
    }  # fmt: skip
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for label, values in series.items():
        ax.plot(steps, values, marker="o", label=label)
    eligible = [r["step"] for r in simulated.selection["rows"] if r["eligible"]] if simulated.selection else []
    ax.scatter(eligible, [1.03] * len(eligible), marker="v", color="black", label="eligible (G1–G4 on validation)")
    ax.set_ylim(top=1.05)
    if simulated.selection and simulated.selection["selected_step"] is not None:
        ax.axvline(simulated.selection["selected_step"], color="black", linestyle=":", label="selected")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("rate on the validation split")
    ax.set_title("Validation measurements of the simulated learner (not a model)")
    ax.legend(frameon=False, fontsize=8, loc="lower right")
    plt.tight_layout()
    plt.show()
if simulated.selection:
    keys = ["step", *simulated.selection["rank_by"], "G1", "G2", "G3", "G4", "eligible"]
    display(Markdown(pd.DataFrame(simulated.selection["rows"])[keys].to_markdown(index=False, floatfmt=".4f")))
    if simulated.selection["selected_step"] is None:
        display(Markdown(f"Simulated learner: {simulated.selection['diagnosis']}"))
    else:
        display(
            Markdown(
                f"Simulated learner: selected step {simulated.selection['selected_step']} (eligible steps "
                f"{simulated.selection['eligible_steps']}; ranked by {', '.join(simulated.selection['rank_by'])}, "
                "then the earlier step). It was then evaluated once on `test` and the frozen cases; a second "
                "evaluation of this lineage is refused unless it is a diagnosis run excluded from claims."
            )
        )
if simulated.final_summary:
    # Ask the run store for a second test/frozen evaluation of this lineage (another checkpoint): refused.
    from rftlab.runs import RunStore
    from rftlab.training.arena.stage1 import SingleEvaluationError, claim_final_evaluation

    try:
        claim_final_evaluation(
            RunStore(STORE), simulated.lineage["experiment"], simulated.lineage["lineage"],
            {"stage": "final_eval", "checkpoint_step": -1}, simulated.lineage["backend"],
        )  # fmt: skip
        refusal = "NOT refused (a defect)"
    except SingleEvaluationError:
        refusal = "refused (`SingleEvaluationError`): only a diagnosis run, excluded from claims, may evaluate it again"
    display(Markdown(f"A second evaluation of lineage `{simulated.lineage['lineage']}` on another checkpoint: {refusal}."))
if simulated.test_summary:
    t = simulated.test_summary
    display(
        Markdown(
            f"Simulated learner on `test` ({t['rows']} rows): exact {t['overall']['exact']:.4f}, schema valid "
            f"{t['overall']['schema_valid']:.4f}, ACT legal {t['act']['legal']:.4f}, unsupported-fact replies "
            f"{t['unsupported_fact_responses']}."
        )
    )
if simulated.comparison and "endpoints" in simulated.comparison:
    display(Markdown("**Base vs SFT, paired (simulated learner)**"))
    display(Markdown(compare_markdown(simulated.comparison)))
    # paired differences with their 95% intervals, one line per endpoint
    endpoints = named_endpoints(simulated.comparison)
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(endpoints) + 1.2))
    for y, (_, e) in enumerate(endpoints):
        low, high = e["mean_difference_95"]
        mean = e["mean_difference"]
        ax.errorbar(mean, y, xerr=[[mean - low], [high - mean]], fmt="o", color="C0", capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(endpoints)), [name for name, _ in endpoints], fontsize=8)
    ax.set_xlabel("paired difference per case (95% CI); primary = regret, the others = reward")
    ax.set_title("Base vs SFT on the frozen cases, paired (simulated learner, not a model)")
    ax.invert_yaxis()
    plt.tight_layout()
    plt.show()
if simulated.gates:
    display(Markdown("**Gates G1–G7 on the selected checkpoint (simulated learner)**"))
    display(Markdown(rows_table(simulated.gates["rows"])))
    licenses = pd.DataFrame(simulated.gates["licenses_table"])[["gate", "role", "licenses the claim that", "verdict"]]
    display(Markdown(licenses.to_markdown(index=False)))

# %% [markdown]
# ## 9. The handoff document
#
# `rftlab arena handoff` renders the document for the GPU machine from the manifest it re-hashes, the audit
# report written beside the data, the versions, the recipe, the gate spec and the commands of the Stage-1 run
# (`rftlab arena sft-run data/specs/arena_sft_stage1.json --backend tinker`, or `--backend local --device
# cuda --base-model DIR` on the GPU machine). Its first table (the directory row left out):

# %%
start = handoff.index("## Fixed inputs")
end = handoff.index("| file | SHA-256 |")
fixed = [line for line in handoff[start:end].splitlines() if not line.startswith("| dataset directory")]
display(Markdown("\n".join(fixed).replace("## Fixed inputs", "**Fixed inputs**")))

# %% [markdown]
# ## What this does not show

# %%
mask_ok = bool(local.overfit) and not local.overfit["template_and_mask_problems"]
display(
    Markdown(
        "No language model was trained or served: every number about a *model* (Qwen3-4B base or SFT) is still to "
        "come, from the GPU or Tinker run the handoff describes. The scripted policies and the simulated learner "
        "exercise the machinery; their verdicts say nothing about a language model. "
        + (
            f"The tiny local model stops at step {local.stopped_at} because it is a randomly initialised 2-layer "
            "network trained for a few CPU steps"
            + (", not because of a defect the check found (its template and loss-mask checks pass). " if mask_ok else ". ")
            if local.stopped_at
            else ""
        )
        + "The data are structurally the seed's but rendered with rftlab's prompt, so even the GPU run will not "
        "reproduce the seed's exact inputs."
    )
)
