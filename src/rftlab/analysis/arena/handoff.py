"""The GPU handoff document of the arena Stage-1 SFT, rendered from the dataset actually built.

``render_handoff`` reads ``manifest.json`` of a data directory, re-hashes every listed file (it refuses a
directory whose bytes no longer match), and writes a Markdown handoff: the machine, the fixed inputs and
how they compare with the seed's immutable inputs, the checks to repeat, the commands of the Stage-1 run
(``rftlab arena sft-run``), the training mixture, the recipe (and what the tinker interface does not
take) and the gates. Each section has its own function. The text is the project's own; nothing is copied
from the seed document. The output is deterministic (no timestamps), so the same data give the same
document.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rftlab.analysis.arena.gates import GateSpecError, load_gate_spec
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT, FROZEN_MANIFEST_SHA256
from rftlab.rollout.arena.evaluation import EVAL_VERSION
from rftlab.rollout.arena.sft_data import (
    STAGE1_STRUCTURAL_SHA256,
    UPSTREAM_CONTENT_SHA256,
    UPSTREAM_DATASET_VERSION,
)
from rftlab.runs.hashing import spec_sha256
from rftlab.runs.paths import display_path
from rftlab.training.arena.recipe import STAGE1_RECIPE, SftRecipe
from rftlab.training.arena.sft import BACKEND_LORA_SUPPORT

UPSTREAM_PROMPT_VERSION = "arena-v2-structured-priority"
STAGE1_SPEC = "data/specs/arena_sft_stage1.json"


class HandoffError(ValueError):
    """The data directory is missing, unreadable or no longer matches its manifest."""


def read_manifest(data_dir: Path) -> dict[str, Any]:
    """``manifest.json`` of an SFT data directory (``HandoffError`` when missing or not a manifest)."""
    path = Path(data_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise HandoffError(
            f"{path} is missing: build the data with `rftlab arena build-sft --out {data_dir}`"
        ) from None
    except ValueError as exc:
        raise HandoffError(f"{path} is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise HandoffError(f"{path} is not an rftlab arena SFT manifest")
    return manifest


def verify_files(data_dir: Path, manifest: Mapping[str, Any]) -> None:
    """Raise ``HandoffError`` unless every file listed in the manifest exists with the recorded SHA-256."""
    for name, digest in manifest["files"].items():
        path = Path(data_dir) / name
        if not path.is_file():
            raise HandoffError(f"{path} is listed in the manifest but missing")
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != digest:
            raise HandoffError(
                f"{path} hashes to {actual}, the manifest says {digest}: rebuild or re-audit the data"
            )


def audit_status(data_dir: Path, manifest: Mapping[str, Any]) -> str:
    """What ``DIR/audit.json`` (written by ``rftlab arena audit``) says about this data."""
    path = Path(data_dir) / "audit.json"
    if not path.is_file():
        return "not run yet (run the audit command below before training)"
    try:
        audit = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return "audit.json is unreadable: re-run the audit"
    if not isinstance(audit, dict):
        return "audit.json is not an audit report: re-run the audit"
    verdict = "passed" if audit.get("valid") else f"FAILED ({len(audit.get('failures', []))} failures)"
    same = (audit.get("structural_sha256") or {}).get("all") == (manifest.get("structural_sha256") or {}).get(
        "all"
    )
    where = "for this data" if same else "for different data: re-run it"
    return f"{verdict} {where}; split action coverage required: {audit.get('required_split_action_coverage')}"


def immutable_inputs(manifest: Mapping[str, Any]) -> list[dict[str, str]]:
    """The seed's immutable inputs against this data: item, the seed's value, this data's, met or not."""
    digest = (manifest.get("structural_sha256") or {}).get("all")
    rows = [
        ("dataset version", UPSTREAM_DATASET_VERSION, manifest.get("dataset_version")),
        ("dataset content SHA-256", UPSTREAM_CONTENT_SHA256, manifest.get("content_sha256")),
        ("prompt version", UPSTREAM_PROMPT_VERSION, manifest.get("prompt_version")),
        ("environment version", "arena-core-v1", manifest.get("arena_version")),
        ("frozen evaluation manifest SHA-256", FROZEN_MANIFEST_SHA256, FROZEN_MANIFEST_SHA256),
        ("structural digest, all rows (rftlab, §9.6)", STAGE1_STRUCTURAL_SHA256["all"], digest),
    ]
    return [
        {"item": item, "seed": str(seed), "this data": str(ours), "met": "yes" if seed == ours else "NO"}
        for item, seed, ours in rows
    ]


def _machine_section() -> list[str]:
    return [
        "## Machine",
        "",
        "- One NVIDIA GPU with 48 GB of memory (an RTX A6000 or similar) and a working CUDA build of PyTorch,",
        "  or a Tinker account (`TINKER_API_KEY`).",
        "- Linux, 80 GB of free disk or more, and read access to the base checkpoint.",
        "- The CPU-side artifacts (data, audit, frozen manifest, oracle run) are finished. Do not rebuild or edit",
        "  the frozen evaluation manifest on the GPU machine.",
        "",
    ]


def _fixed_inputs_section(
    data_dir: Path, manifest: Mapping[str, Any], recipe: SftRecipe, gate_line: str, audit: str
) -> list[str]:
    digest = manifest.get("structural_sha256", {})
    stage1 = digest == STAGE1_STRUCTURAL_SHA256
    lines = [
        "## Fixed inputs",
        "",
        "| item | value |",
        "|---|---|",
        f"| dataset directory | `{display_path(data_dir)}` |",
        f"| dataset version | `{manifest['dataset_version']}` (structurally the upstream `{UPSTREAM_DATASET_VERSION}`) |",
        f"| dataset content SHA-256 (sorted row ids) | `{manifest['content_sha256']}` |",
        f"| structural digest, all rows (docs/arena.md §9.6) | `{digest.get('all')}` |",
        f"| structural digest equals the spec's Stage-1 value | {'yes' if stage1 else 'NO (not the Stage-1 configuration)'} |",
        f"| upstream content SHA-256 (provenance only, needs upstream prompt bytes) | `{UPSTREAM_CONTENT_SHA256}` |",
        f"| prompt version | `{manifest['prompt_version']}` (upstream `{manifest.get('upstream_prompt_version')}`) |",
        f"| environment version | `{manifest['arena_version']}` |",
        f"| generator version (also the split-hash salt) | `{manifest['generator_version']}` |",
        f"| evaluation version | `{EVAL_VERSION}` |",
        f"| frozen evaluation manifest SHA-256 ({FROZEN_CASE_COUNT} cases) | `{FROZEN_MANIFEST_SHA256}` |",
        f"| gate spec | {gate_line} |",
        f"| recipe SHA-256 (canonical JSON of the table below) | `{spec_sha256(asdict(recipe))}` |",
        f"| data audit | {audit} |",
        "",
        "Rows per split: " + ", ".join(f"{k} {v}" for k, v in manifest["examples_by_split"].items())
        + "; per phase: " + ", ".join(f"{k} {v}" for k, v in manifest["examples_by_phase"].items()) + ".",
        "",
        "| file | SHA-256 |",
        "|---|---|",
    ]  # fmt: skip
    lines += [f"| `{name}` | `{value}` |" for name, value in manifest["files"].items()]
    return [*lines, ""]


def _immutable_section(manifest: Mapping[str, Any]) -> list[str]:
    rows = immutable_inputs(manifest)
    unmet = [r["item"] for r in rows if r["met"] != "yes"]
    lines = [
        "## The seed's immutable inputs",
        "",
        "| item | seed | this data | met |",
        "|---|---|---|---|",
        *[f"| {r['item']} | `{r['seed']}` | `{r['this data']}` | {r['met']} |" for r in rows],
        "",
    ]
    if unmet:
        lines += [
            f"Not met: {', '.join(unmet)}. The rows are rendered with the project's own prompt wording, so their",
            "ids and content hash differ from the seed's; the prompt-independent structural digest is what shows",
            "the states, labels and metadata are the seed's. A run on this data is a run on rftlab's prompt, not",
            "a reproduction of the seed's exact inputs.",
            "",
        ]
    return lines


def _checks_section(data_dir: Path, oracle_summary: Mapping[str, Any] | None) -> list[str]:
    lines = [
        "## Checks to repeat on the GPU machine before any training",
        "",
        "```bash",
        "python -m pytest tests/arena -q",
        f"rftlab arena audit {display_path(data_dir)} --require-split-action-coverage",
        "rftlab arena manifest          # must print " + FROZEN_MANIFEST_SHA256,
        f"rftlab arena eval --provider oracle --validation-data {display_path(data_dir)} --output-dir results/arena/oracle",
        "```",
        "",
    ]
    if oracle_summary is not None:
        gen = oracle_summary["conditions"]["generated"]
        lines += [
            f"The oracle run on this machine: strict message rate {oracle_summary['message_strict_rate']:.3f}, "
            f"generated-condition regret {gen['mean_oracle_regret']:.3f}, optimal rate {gen['optimal_outcome_rate']:.3f}, "
            f"mean reward {gen['mean_environment_reward']:.4f} over {oracle_summary['num_cases']} cases. "
            "Anything other than regret 0 and rates 1 is a harness bug.",
            "",
        ]
    return lines


def _run_section(data_dir: Path, recipe: SftRecipe) -> list[str]:
    return [
        "## The Stage-1 run (one command, one lineage)",
        "",
        "`rftlab arena sft-run` carries out the seed's order of work and records every stage as a run in",
        "`runs/arena_sft/<stage>/`: (1) the untouched base model on the frozen cases, every raw reply kept;",
        f"(2) the overfit check on `overfit_256.jsonl` ({recipe.overfit_steps} steps, batch {recipe.overfit_batch_size}, "
        f"stop unless schema validity reaches {recipe.overfit_min_schema_valid:g} in both phases);",
        "(3) LoRA SFT on the mixture with the validation scorer at steps 0, 40, ..., 280, 310, each checkpoint",
        "saved; (4) selection on validation only (eligible: G1-G4; no eligible checkpoint stops the run with a",
        "diagnosis); (5) the selected checkpoint on `test.jsonl` and the frozen cases, once (the run store refuses",
        "a second evaluation unless it is a diagnosis run, excluded from claims); (6) the comparison with the",
        "base (`frozen-paired-arena-v1`) and gates G1-G7. Re-running the command reuses finished stages.",
        "",
        "```bash",
        "# on Tinker (the hosted service, or a Tinker-compatible server named by TINKER_BASE_URL)",
        "export TINKER_API_KEY=...",
        f"rftlab arena sft-run {STAGE1_SPEC} --backend tinker --data {display_path(data_dir)}",
        "# or on the GPU machine itself, with the base weights in a local Hugging Face directory",
        f"rftlab arena sft-run {STAGE1_SPEC} --backend local --device cuda \\",
        f"    --base-model /models/Qwen3-4B-Instruct-2507 --data {display_path(data_dir)}",
        "# only if a final evaluation must be looked at again (never used for a claim)",
        f"rftlab arena sft-run {STAGE1_SPEC} --backend tinker --data {display_path(data_dir)} --diagnosis-eval",
        "```",
        "",
        "A base model served elsewhere can also be evaluated stage by stage: `rftlab arena eval --provider",
        "endpoint --model M --base-url URL --validation-data DIR --output-dir results/arena/base`, then",
        "`rftlab arena compare` and `rftlab arena gates --base results/arena/base --candidate results/arena/sft`.",
        "",
    ]


def _mixture_section(manifest: Mapping[str, Any], train_rows: int) -> list[str]:
    mixture = manifest["training_mixture"]
    lines = [
        "## Training mixture",
        "",
        f"Training draws {mixture['draws']} rows ({mixture['epochs']} epochs of the {train_rows}-row train split) "
        f"from three strata with a seeded sampler (seed {mixture['seed']}); the draw order is in "
        f"`{mixture['schedule_file']}`. Validation and test are not reweighted.",
        "",
        "| stratum | rows | probability | expected passes |",
        "|---|---|---|---|",
    ]
    for stratum in mixture["strata"].values():
        passes = mixture["draws"] * stratum["probability"] / stratum["rows"] if stratum["rows"] else 0.0
        lines.append(
            f"| `{stratum['file']}` | {stratum['rows']} | {stratum['probability']:.2f} | {passes:.2f} |"
        )
    return [*lines, ""]


def _recipe_section(recipe: SftRecipe, plan: Mapping[str, int]) -> list[str]:
    lines = [
        "## LoRA recipe",
        "",
        "| setting | value |",
        "|---|---|",
        f"| base model | `{recipe.base_model}` |",
        f"| LoRA rank / alpha / dropout | {recipe.lora_rank} / {recipe.lora_alpha} / {recipe.lora_dropout:g} |",
        f"| LoRA targets | {', '.join(f'`{t}`' for t in recipe.lora_targets)} (attention and MLP projections) |",
        f"| sequence length | {recipe.max_sequence_length} |",
        f"| optimizer | {recipe.optimizer}, learning rate {recipe.learning_rate:g}, weight decay {recipe.weight_decay:g} |",
        f"| schedule | {recipe.scheduler}, {recipe.warmup_fraction:.0%} warm-up ({plan['warmup_steps']} steps), "
        f"floor {recipe.min_learning_rate:g} |",
        f"| effective batch | {recipe.effective_batch_size} sequences |",
        f"| length | {recipe.epochs} epochs = {plan['optimizer_steps']} optimizer steps; do not extend automatically |",
        f"| gradient clipping | {recipe.gradient_clip_norm:g} |",
        f"| gradient checkpointing | {'on' if recipe.gradient_checkpointing else 'off'} |",
        f"| loss | {recipe.loss} |",
        f"| chat template | {recipe.chat_template} |",
        f"| validation | every {plan['validation_every_steps']} steps, at start and at the end: "
        f"{plan['validation_points']} measurements (at least {recipe.min_validation_measurements} required) |",
        "",
        "What the tinker interface (hosted or local backend) takes of the LoRA settings:",
        "",
    ]  # fmt: skip
    lines += [f"- {setting}: {support}" for setting, support in BACKEND_LORA_SUPPORT.items()]
    return [*lines, ""]


def _gates_section(gate_spec: Path | None) -> list[str]:
    lines = [
        "## Gates",
        "",
        "The strict parser is never relaxed. A failed gate sends the work back to data and prompt diagnosis; it",
        "is never a reason to reopen the test split or to loosen a threshold. Rate gates decide on the rule",
        "named (`point`: the observed rate; `lower_bound`: the Wilson 95% lower bound) and say INSUFFICIENT N",
        "below their minimum n.",
        "",
    ]
    if gate_spec is None:
        return lines
    spec, _ = load_gate_spec(gate_spec)
    lines += [
        "| gate | metric | data | rule | threshold | min n | licenses the claim that |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in spec.checks:
        lines.append(
            f"| {c.gate} | `{c.metric}` | {c.data} | {c.rule} | {c.threshold_text()} | {c.min_n} | "
            f"{spec.licenses.get(c.gate, '')} |"
        )
    lines += [
        "",
        "Selection (validation only, before any test): "
        + "; ".join(
            f"{c.gate} `{c.metric}` {c.rule} {c.threshold_text()}, n >= {c.min_n}"
            for c in spec.selection.checks
        )
        + f". Ranked by {', '.join(spec.selection.rank_by)}, then the earlier step.",
        "",
        f"{', '.join(spec.claim_gates)} only license(s) the communication claim; the other gates decide promotion.",
    ]
    return lines


def render_handoff(
    data_dir: str | Path,
    recipe: SftRecipe = STAGE1_RECIPE,
    gate_spec: str | Path | None = None,
    oracle_summary: Mapping[str, Any] | None = None,
) -> str:
    """The handoff document (Markdown) for the dataset in ``data_dir``."""
    data_dir = Path(data_dir)
    manifest = read_manifest(data_dir)
    verify_files(data_dir, manifest)
    train_rows = manifest["examples_by_split"].get("train", 0)
    plan = recipe.schedule(train_rows)
    if plan["validation_points"] < recipe.min_validation_measurements:
        raise HandoffError(
            f"{plan['optimizer_steps']} optimizer steps allow only {plan['validation_points']} validation "
            f"measurements, fewer than {recipe.min_validation_measurements}: the training split is too small"
        )
    gate_line = "not given"
    gate_path = Path(gate_spec) if gate_spec is not None else None
    if gate_path is not None:
        try:
            spec, sha = load_gate_spec(gate_path)
        except GateSpecError as exc:
            raise HandoffError(str(exc)) from None
        gate_line = f"`{gate_path.name}` (`{spec.name}`) SHA-256 `{sha}`"
    lines = [
        "# Arena Stage-1 SFT: GPU handoff",
        "",
        "Generated by `rftlab arena handoff` from the data directory below. Every hash in this document was",
        "recomputed from the files when it was written; if a hash no longer matches, stop and rebuild.",
        "",
        *_machine_section(),
        *_fixed_inputs_section(data_dir, manifest, recipe, gate_line, audit_status(data_dir, manifest)),
        *_immutable_section(manifest),
        *_checks_section(data_dir, oracle_summary),
        *_run_section(data_dir, recipe),
        *_mixture_section(manifest, train_rows),
        *_recipe_section(recipe, plan),
        *_gates_section(gate_path),
    ]
    return "\n".join(lines) + "\n"
