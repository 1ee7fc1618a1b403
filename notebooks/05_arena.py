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
# # Arena Stage-1 SFT: data, audit, frozen evaluation under message interventions, gates
#
# Everything the GPU handoff for the arena SFT run assumes, built and checked on CPU (`docs/arena.md`
# §9–§11). The notebook builds the SFT data from seeds, checks its structural digest against the spec,
# audits it (and shows the audit catching a one-byte edit), runs the frozen 60-case evaluation for the
# oracle and for two scripted policies that answer through the same prompts and strict parsers, measures
# what the messages change, and evaluates the promotion gates. No language model is trained or served here:
# the scripted policies stand in for "base" and "candidate" so that every gate is exercised on real
# summaries, and a tiny random-init model only checks the SFT plumbing (section 7). All computation lives
# in `rftlab.rollout.arena.sft_data*` and `rftlab.analysis.arena_*`.

# %% tags=["parameters"]
import os
import tempfile

QUICK = os.environ.get("RFTLAB_QUICK") == "1"
# Quick mode builds a small dataset (not the Stage-1 configuration) and evaluates every 5th frozen case.
NUM_SEEDS = 96 if QUICK else 1024
MECHANICS_PER_KIND = 8 if QUICK else 32
SILENCE_EXAMPLES = 16 if QUICK else 512
CASE_STRIDE = 5 if QUICK else 1
# Scratch folder for the built data, evaluations and the tiny model: not a run, so not in the run store;
# removed when the kernel exits.
_SCRATCH = tempfile.TemporaryDirectory(prefix="rftlab-arena-sft-")
WORK_DIR = _SCRATCH.name
# Overfit smoke on the local tinker-compatible backend (a tiny random-init Qwen3, CPU): rows, steps, peak lr.
SMOKE_ROWS, SMOKE_STEPS, SMOKE_LR = (2, 3, 1e-2) if QUICK else (4, 12, 1e-2)

# %%
# (imports follow the parameters cell, which must come first)
import json
import shutil
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from rftlab.analysis.arena.audit import audit_dataset
from rftlab.analysis.arena.gates import DEFAULT_GATE_SPEC, evaluate_arena_gates, gate_table, verdicts
from rftlab.analysis.arena.handoff import render_handoff
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT, FROZEN_MANIFEST_SHA256, frozen_cases, manifest_sha256
from rftlab.policies.arena.providers import EndpointProvider, OracleProvider, ScriptedProvider
from rftlab.policies.arena.server import ArenaPolicyServer
from rftlab.rollout.arena.evaluation import run_frozen_eval
from rftlab.rollout.arena.sft_data import (
    STAGE1_CONFIG,
    STAGE1_STRUCTURAL_SHA256,
    SftConfig,
    write_dataset,
)
from rftlab.studies.arena import evaluate_frozen, read_rows, write_evaluation
from rftlab.training.arena.recipe import STAGE1_RECIPE

work = Path(WORK_DIR)
if work.exists():
    shutil.rmtree(work)
work.mkdir(parents=True)
config = SftConfig(
    num_seeds=NUM_SEEDS,
    targeted_mechanics_per_kind=MECHANICS_PER_KIND,
    targeted_silence_examples=SILENCE_EXAMPLES,
)
is_stage1 = config == STAGE1_CONFIG

# %% [markdown]
# ## 1. The SFT data
#
# Each natural seed gives four BROADCAST rows (label: the reference broadcast of the agent's own
# local-priority action) and an ACT row for every agent whose oracle-optimal action is unique, equals what
# the agent would choose from its own prompt, and is not also chosen by a teammate. Targeted rows add
# WAIT, SCAN and TRANSFER situations and "nothing worth saying" broadcasts. Splits follow a hash of the
# seed, so all rows of one seed share a split. The build is done twice to check that it is byte-identical.

# %%
started = time.perf_counter()
manifest = write_dataset(work / "data", config)
build_seconds = time.perf_counter() - started
print(f"SFT data built in {build_seconds:.1f} s", file=sys.stderr)  # durations: build log, not report
rebuilt = write_dataset(work / "data_rebuild", config)
identical = all(
    (work / "data" / name).read_bytes() == (work / "data_rebuild" / name).read_bytes()
    for name in [*manifest["files"], "manifest.json"]
)
digest_match = manifest["structural_sha256"] == STAGE1_STRUCTURAL_SHA256

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
        f"built. Candidate ACT rows rejected: {rejections}.\n\n"
        f"Structural digest (§9.6, independent of the prompt wording): `{manifest['structural_sha256']['all']}`; "
        + (
            f"it {'**equals**' if digest_match else '**differs from**'} the spec's Stage-1 value "
            f"`{STAGE1_STRUCTURAL_SHA256['all'][:16]}…` for all rows and for each split."
            if is_stage1
            else "quick mode builds a subset, so it is not compared with the Stage-1 value."
        )
        + f" Rebuilding gave {'byte-identical' if identical else 'DIFFERENT'} files "
        f"(content SHA-256 `{manifest['content_sha256'][:16]}…` both times: {rebuilt['content_sha256'] == manifest['content_sha256']})."
    )
)

# %% [markdown]
# ## 2. The data audit
#
# The audit rebuilds every state from its seed, re-solves the oracle, re-parses every label strictly,
# checks splits, leakage and intents, regenerates the whole dataset to compare prompts, labels and
# metadata row by row, and compares every file with its SHA-256 in the manifest. It then runs again on a
# copy in which a single byte of `validation.jsonl` was changed.

# %%
audit = audit_dataset(work / "data", require_split_action_coverage=is_stage1)
kinds = pd.DataFrame(audit.action_kinds_by_split).fillna(0).astype(int)
kinds["all"] = kinds.sum(axis=1)
display(Markdown(kinds.to_markdown()))

tampered = work / "data_tampered"
shutil.copytree(work / "data", tampered)
raw = bytearray((tampered / "validation.jsonl").read_bytes())
position = len(raw) // 2
raw[position] = ord("7") if raw[position] != ord("7") else ord("8")
(tampered / "validation.jsonl").write_bytes(bytes(raw))
tamper_audit = audit_dataset(tampered)
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
# ## 3. Frozen evaluation
#
# The frozen manifest is 60 cases (20 each of sizes 12, 13 and 14; RED styles cycling balanced, aggressive,
# defensive). Each case asks four broadcasts and then 24 actions: under the agents' own ("generated")
# messages with three displayed action orders, with no messages ("dropped"), with the oracle's reference
# messages, and with reference messages taken from another case ("shuffled"). Three providers answer:
#
# - **oracle** returns the reference reply; it must score regret 0 and strict rate 1 (a harness check);
# - **scripted** reads only its prompt: its own local-priority action, the reference-style broadcast of that
#   action, and in the ACT phase it skips a target a lower-numbered teammate declared;
# - **scripted, inbox ignored** is the same policy without reading messages, a "base" that cannot use them.
#
# The scripted policy is evaluated twice: in process (`local` provider) and through the local
# OpenAI-compatible policy server over HTTP (`endpoint` provider, temperature 0, thinking off), exactly as a
# served model would be. The two runs must agree case by case.

# %%
cases_run = list(range(0, FROZEN_CASE_COUNT, CASE_STRIDE))
validation_rows = read_rows(work / "data" / "validation.jsonl")
providers = {
    "oracle": OracleProvider(),
    "scripted": ScriptedProvider(),
    "scripted, inbox ignored": ScriptedProvider(use_inbox=False),
}
summaries, eval_seconds = {}, {}
for label, provider in providers.items():
    started = time.perf_counter()
    evaluation = evaluate_frozen(provider, cases_run, validation_rows)
    summaries[label] = evaluation.summary
    eval_seconds[label] = time.perf_counter() - started
    write_evaluation(work / "eval" / label.replace(",", "").replace(" ", "_"), evaluation)
    if label == "scripted":
        local_records = evaluation.records

with ArenaPolicyServer() as server:  # bound to 127.0.0.1; no key needed locally
    started = time.perf_counter()
    served_records = run_frozen_eval(EndpointProvider("scripted-balanced", server.base_url), cases_run)
    served_seconds = time.perf_counter() - started
    print(f"policy server: {served_seconds:.1f} s", file=sys.stderr)
    served_requests = len(server.requests)
strip_model = [{k: v for k, v in r.items() if k != "model"} for r in served_records]
served_agrees = strip_model == [{k: v for k, v in r.items() if k != "model"} for r in local_records]

table = []
for label, s in summaries.items():
    for condition in ("generated", "dropped", "reference", "shuffled"):
        c = s["conditions"][condition]
        table.append(
            {
                "policy": label,
                "messages": condition,
                "strict actions": c["strict_action_rate"],
                "legal": c["legal_action_rate"],
                "mean regret": c["mean_oracle_regret"],
                "regret 95% CI": "[{:.3f}, {:.3f}]".format(*c["mean_oracle_regret_95"]),
                "optimal": c["optimal_outcome_rate"],
                "optimal Wilson 95%": "[{:.3f}, {:.3f}]".format(*c["optimal_outcome_wilson_95"]),
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
        f"Message strict rate: "
        + ", ".join(f"{k} {s['message_strict_rate']:.3f}" for k, s in summaries.items())
        + f". Through the policy server: {served_requests} HTTP chat completions; the "
        f"records {'equal' if served_agrees else 'DIFFER from'} the in-process run in every case."
    )
)

# %%
fig, ax = plt.subplots(figsize=(8, 3.6))
conditions = ["generated", "dropped", "reference", "shuffled"]
width = 0.27
for j, (label, s) in enumerate(summaries.items()):
    means = [s["conditions"][c]["mean_oracle_regret"] for c in conditions]
    lows = [
        m - s["conditions"][c]["mean_oracle_regret_95"][0] for m, c in zip(means, conditions, strict=True)
    ]
    highs = [
        s["conditions"][c]["mean_oracle_regret_95"][1] - m for m, c in zip(means, conditions, strict=True)
    ]
    ax.bar(np.arange(4) + (j - 1) * width, means, width, yerr=[lows, highs], capsize=3, label=label)
ax.set_xticks(np.arange(4), conditions)
ax.set_ylabel("mean oracle regret (95% CI)")
ax.set_title("Regret on the frozen cases by message condition")
ax.legend(frameon=False)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 4. What the messages change
#
# Paired per-case reward differences (left minus right; positive favours the left condition), with the 95%
# interval over cases. Only the scripted policy that reads its inbox can be affected by messages.

# %%
effects = []
for label, s in summaries.items():
    for name, e in s["communication_effects"].items():
        effects.append(
            {
                "policy": label,
                "difference": name.replace("_minus_", " − "),
                "mean reward difference": e["mean_difference"],
                "95% CI": "[{:+.3f}, {:+.3f}]".format(*e["mean_difference_95"]),
                "cases better": e["positive_case_rate"],
                "cases equal": e["zero_case_rate"],
            }
        )
display(Markdown(pd.DataFrame(effects).to_markdown(index=False, floatfmt="+.3f")))
scripted = summaries["scripted"]
gd = scripted["communication_effects"]["generated_minus_dropped"]
gs = scripted["communication_effects"]["generated_minus_shuffled"]
display(
    Markdown(
        f"With its own messages the scripted team gains {gd['mean_difference']:+.3f} reward per case over no "
        f"messages (95% [{gd['mean_difference_95'][0]:+.3f}, {gd['mean_difference_95'][1]:+.3f}]; better in "
        f"{gd['positive_case_rate']:.0%} of cases, unchanged in {gd['zero_case_rate']:.0%}), and "
        f"{gs['mean_difference']:+.3f} over another case's messages. This policy uses a message only to skip a "
        f"target a lower-numbered teammate declared, so any effect comes from fewer duplicated targets; the "
        f"reference messages (oracle intents) give "
        f"{scripted['communication_effects']['reference_minus_generated']['mean_difference']:+.3f} relative to its own."
    )
)

slices = []
for label in ("scripted", "scripted, inbox ignored"):
    for kind, groups in summaries[label]["generated_slices"].items():
        for value, g in groups.items():
            slices.append(
                {
                    "policy": label,
                    "slice": f"{kind.replace('_', ' ')} {value}",
                    "cases": g["cases"],
                    "mean regret": g["mean_oracle_regret"],
                    "optimal": g["optimal_outcome_rate"],
                }
            )
display(Markdown(pd.DataFrame(slices).to_markdown(index=False, floatfmt=".3f")))

# %% [markdown]
# ## 5. Promotion gates
#
# The gates of the seed, as pinned in `data/specs/arena_gates.json` (G1–G4 on the validation split, G5 the
# paired regret against the base on the frozen cases, G6 action-order robustness with "material" defined
# in the spec file, G7 the communication claim). Here the inbox-ignoring policy plays the base and the
# inbox-reading policy the candidate; a second table puts the oracle in the candidate's place.

# %%
gate_results = {}
for candidate in ("scripted", "oracle"):
    evaluation, labels, claims = evaluate_arena_gates(
        summaries["scripted, inbox ignored"], summaries[candidate]
    )
    gate_results[candidate] = (evaluation, verdicts(evaluation, labels, claims))
    display(Markdown(f"**Candidate: {candidate}** (base: scripted, inbox ignored)"))
    display(Markdown(gate_table(evaluation, labels)))
spec_sha = gate_results["scripted"][0].spec_sha256
lines = []
for candidate, (evaluation, v) in gate_results.items():
    failed = [c.metric for c in evaluation.checks if not c.passed]
    lines.append(
        f"- {candidate}: promotion gates {'pass' if v['promotion'] else 'fail'}, communication claim "
        f"{'supported' if v['communication_claim'] else 'not supported'}"
        + (f" (failed: {', '.join(failed)})" if failed else "")
    )
display(Markdown(f"Gate spec SHA-256 `{spec_sha}`.\n\n" + "\n".join(lines)))

# %% [markdown]
# ## 6. The handoff document
#
# `rftlab arena handoff` renders the document for the GPU machine from the manifest it re-hashes, the
# versions, the recipe and the gate spec. Its first table:

# %%
handoff = render_handoff(work / "data", gate_spec=DEFAULT_GATE_SPEC, oracle_summary=oracle)
start = handoff.index("## Fixed inputs")
end = handoff.index("| file | SHA-256 |")
display(Markdown(handoff[start:end].replace("## Fixed inputs", "**Fixed inputs**")))
plan = STAGE1_RECIPE.schedule(manifest["examples_by_split"]["train"])
display(
    Markdown(
        f"Recipe: LoRA rank {STAGE1_RECIPE.lora_rank}, alpha {STAGE1_RECIPE.lora_alpha}, dropout "
        f"{STAGE1_RECIPE.lora_dropout}, {plan['optimizer_steps']} optimizer steps at effective batch "
        f"{STAGE1_RECIPE.effective_batch_size} ({plan['warmup_steps']} warm-up), {plan['validation_points']} "
        f"validation measurements."
    )
)

# %% [markdown]
# ## 7. The SFT path on the local tinker-compatible backend
#
# `rftlab.training.arena.sft` renders rows with the Qwen3-Instruct chat template, puts loss weight on
# the reply and its end-of-turn token only, trains LoRA with `cross_entropy` and the recipe's AdamW
# schedule, then samples greedily and scores the trained rows (the seed's overfit smoke test). With
# `TINKER_API_KEY` set it runs on Tinker; here it runs on the in-process backend with a tiny random-init
# Qwen3 (context widened to 4,096 byte tokens so a whole arena prompt fits). That model is a plumbing check
# only: a few CPU steps cannot teach it strict JSON, so the verdict below is expected to be a stop.

# %%
from rftlab.training.arena.sft import (  # noqa: E402
    LOCAL_LONG_CONTEXT,
    get_arena_renderer,
    local_long_context_model,
    overfit_smoke_test,
    service_client,
    template_and_mask_problems,
)
from rftlab.training.local_tinker import byte_tokenizer  # noqa: E402

overfit = [json.loads(line) for line in (work / "data" / "overfit_256.jsonl").read_text().splitlines()]
mask_problems = template_and_mask_problems(
    overfit, get_arena_renderer(byte_tokenizer()), byte_tokenizer(), LOCAL_LONG_CONTEXT
)
pick = [r for r in overfit if r["metadata"]["phase"] == "ACT"][: SMOKE_ROWS // 2]
pick += [r for r in overfit if r["metadata"]["phase"] == "BROADCAST"][: SMOKE_ROWS - len(pick)]
tiny = local_long_context_model(work / "tiny-qwen3-4k")
started = time.perf_counter()
smoke = overfit_smoke_test(
    service_client(storage_dir=work / "checkpoints", model_dirs=[tiny]),
    pick,
    tiny,
    steps=SMOKE_STEPS,
    batch_size=min(4, len(pick)),
    base_lr=SMOKE_LR,
    max_tokens=32,
    max_length=LOCAL_LONG_CONTEXT,
)
smoke_seconds = time.perf_counter() - started
print(f"overfit smoke: {smoke_seconds:.0f} s; audit {audit.seconds:.1f} s; evaluations {eval_seconds}", file=sys.stderr)
display(
    Markdown(
        f"Loss-mask and template checks on all {len(overfit)} overfit rows: "
        f"{'no defect' if not mask_problems else f'{len(mask_problems)} defects'}. "
        f"Local run on {len(pick)} rows, {SMOKE_STEPS} steps: loss per weighted token "
        f"{smoke.losses[0]:.3f} → {smoke.losses[-1]:.3f}; strict schema validity "
        + ", ".join(f"{k} {v:.2f}" for k, v in smoke.schema_valid.items() if v is not None)
        + f" (threshold {smoke.threshold}). Verdict: {smoke.diagnosis}."
    )
)

# %% [markdown]
# ## What this does not show
#
# No language model was trained for real or served: the LoRA run and the full 256-row overfit test belong
# on the GPU machine (or Tinker), so every number about a *model* (base or SFT) is still to come. The
# scripted policies only exercise the gates; their verdicts say nothing about a language model.
