"""The Stage-1 LoRA recipe and the GPU handoff document, rendered from the dataset actually built.

``render_handoff`` reads ``manifest.json`` of a data directory, re-hashes every listed file (it refuses a
directory whose bytes no longer match), and writes a Markdown handoff with the hashes, versions, training
mixture, overfit smoke test, recipe and gates. The text is the project's own; nothing is copied from the
seed document. The output is deterministic (no timestamps), so the same data give the same document.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rftlab.envs.arena.cases import FROZEN_CASE_COUNT, FROZEN_MANIFEST_SHA256
from rftlab.runs.hashing import spec_sha256

from .arena_sft import STAGE1_STRUCTURAL_SHA256, UPSTREAM_CONTENT_SHA256, UPSTREAM_DATASET_VERSION
from .arena_sft_eval import EVAL_VERSION


class HandoffError(ValueError):
    """The data directory is missing, unreadable or no longer matches its manifest."""


@dataclass(frozen=True)
class SftRecipe:
    """The Stage-1 LoRA SFT recipe (seed handoff; spec §11 and §9.5)."""

    base_model: str = "Qwen/Qwen3-4B-Instruct-2507"
    lora_rank: int = 32
    lora_alpha: int = 64
    lora_dropout: float = 0.05
    lora_targets: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )
    max_sequence_length: int = 2048
    optimizer: str = "AdamW"
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    scheduler: str = "cosine"
    warmup_fraction: float = 0.03
    min_learning_rate: float = 5e-6
    effective_batch_size: int = 32
    epochs: int = 2
    gradient_clip_norm: float = 1.0
    gradient_checkpointing: bool = True
    loss: str = (
        "cross_entropy on assistant tokens only (target JSON + end-of-turn); system and user tokens masked"
    )
    chat_template: str = "the base model's own template, thinking disabled"
    validation_every_steps: int = 40
    evaluate_on_start: bool = True
    min_validation_measurements: int = 8
    overfit_rows: int = 256
    overfit_steps: int = 96
    overfit_batch_size: int = 16
    overfit_warmup_steps: int = 4
    overfit_weight_decay: float = 0.0
    overfit_min_schema_valid: float = 0.99

    def schedule(self, train_rows: int) -> dict[str, int]:
        """Optimizer steps, warm-up steps and validation points for ``train_rows`` rows per epoch."""
        draws = self.epochs * train_rows
        steps = math.ceil(draws / self.effective_batch_size)
        # Validate every ``validation_every_steps`` unless that gives too few measurements on a short run.
        every = min(
            self.validation_every_steps, max(1, steps // max(1, self.min_validation_measurements - 1))
        )
        points = sorted({0, *range(every, steps, every), steps})
        if not self.evaluate_on_start:
            points.remove(0)
        return {
            "draws": draws,
            "optimizer_steps": steps,
            "warmup_steps": math.ceil(self.warmup_fraction * steps),
            "validation_every_steps": every,
            "validation_points": len(points),
        }


STAGE1_RECIPE = SftRecipe()


def _read_manifest(data_dir: Path) -> dict[str, Any]:
    path = data_dir / "manifest.json"
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
        path = data_dir / name
        if not path.is_file():
            raise HandoffError(f"{path} is listed in the manifest but missing")
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != digest:
            raise HandoffError(
                f"{path} hashes to {actual}, the manifest says {digest}: rebuild or re-audit the data"
            )


def _audit_status(data_dir: Path, manifest: Mapping[str, Any]) -> str:
    path = data_dir / "audit.json"
    if not path.is_file():
        return "not run yet (run the audit command below before training)"
    try:
        audit = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return "audit.json is unreadable: re-run the audit"
    verdict = "passed" if audit.get("valid") else f"FAILED ({len(audit.get('failures', []))} failures)"
    same = audit.get("structural_sha256", {}).get("all") == manifest.get("structural_sha256", {}).get("all")
    where = "for this data" if same else "for different data: re-run it"
    return f"{verdict} {where}; split action coverage required: {audit.get('required_split_action_coverage')}"


def render_handoff(
    data_dir: str | Path,
    recipe: SftRecipe = STAGE1_RECIPE,
    gate_spec: str | Path | None = None,
    oracle_summary: Mapping[str, Any] | None = None,
) -> str:
    """The handoff document (Markdown) for the dataset in ``data_dir``."""
    data_dir = Path(data_dir)
    manifest = _read_manifest(data_dir)
    verify_files(data_dir, manifest)
    train_rows = manifest["examples_by_split"].get("train", 0)
    plan = recipe.schedule(train_rows)
    if plan["validation_points"] < recipe.min_validation_measurements:
        raise HandoffError(
            f"{plan['optimizer_steps']} optimizer steps allow only {plan['validation_points']} validation "
            f"measurements, fewer than {recipe.min_validation_measurements}: the training split is too small"
        )
    digest = manifest.get("structural_sha256", {})
    stage1 = digest == STAGE1_STRUCTURAL_SHA256
    mixture = manifest["training_mixture"]
    gate_line = "not given"
    gate_rows: list[str] = []
    if gate_spec is not None:
        gate_path = Path(gate_spec)
        spec = json.loads(gate_path.read_text(encoding="utf-8"))
        gate_line = f"`{gate_path.name}` SHA-256 `{hashlib.sha256(gate_path.read_bytes()).hexdigest()}`"
        labels = spec.get("labels", {})
        for check in spec["checks"]:
            bound = f">= {check['min']:g}" if "min" in check else f"<= {check['max']:g}"
            gate_rows.append(
                f"| {labels.get(check['metric'], '')} | `{check['metric']}` | {bound} | {check['measures']} |"
            )

    lines: list[str] = []
    add = lines.append
    add("# Arena Stage-1 SFT: GPU handoff")
    add("")
    add("Generated by `rftlab arena handoff` from the data directory below. Every hash in this document was")
    add("recomputed from the files when it was written; if a hash no longer matches, stop and rebuild.")
    add("")
    add("## Machine")
    add("")
    add(
        "- One NVIDIA GPU with 48 GB of memory (an RTX A6000 or similar) and a working CUDA build of PyTorch."
    )
    add("- Linux, 80 GB of free disk or more, and read access to the base checkpoint.")
    add(
        "- The CPU-side artifacts (data, audit, frozen manifest, oracle run) are finished. Do not rebuild or edit"
    )
    add("  the frozen evaluation manifest on the GPU machine.")
    add("")
    add("## Fixed inputs")
    add("")
    add("| item | value |")
    add("|---|---|")
    add(f"| dataset directory | `{data_dir}` |")
    add(
        f"| dataset version | `{manifest['dataset_version']}` (structurally the upstream `{UPSTREAM_DATASET_VERSION}`) |"
    )
    add(f"| dataset content SHA-256 (sorted row ids) | `{manifest['content_sha256']}` |")
    add(f"| structural digest, all rows (spec §9.6) | `{digest.get('all')}` |")
    add(
        f"| structural digest equals the spec's Stage-1 value | {'yes' if stage1 else 'NO (not the Stage-1 configuration)'} |"
    )
    add(
        f"| upstream content SHA-256 (provenance only, needs upstream prompt bytes) | `{UPSTREAM_CONTENT_SHA256}` |"
    )
    add(
        f"| prompt version | `{manifest['prompt_version']}` (upstream `{manifest.get('upstream_prompt_version')}`) |"
    )
    add(f"| environment version | `{manifest['arena_version']}` |")
    add(f"| generator version (also the split-hash salt) | `{manifest['generator_version']}` |")
    add(f"| evaluation version | `{EVAL_VERSION}` |")
    add(f"| frozen evaluation manifest SHA-256 ({FROZEN_CASE_COUNT} cases) | `{FROZEN_MANIFEST_SHA256}` |")
    add(f"| gate spec | {gate_line} |")
    add(f"| recipe SHA-256 (canonical JSON of the table below) | `{spec_sha256(asdict(recipe))}` |")
    add(f"| data audit | {_audit_status(data_dir, manifest)} |")
    add("")
    add("Rows per split: " + ", ".join(f"{k} {v}" for k, v in manifest["examples_by_split"].items())
        + "; per phase: " + ", ".join(f"{k} {v}" for k, v in manifest["examples_by_phase"].items()) + ".")  # fmt: skip
    add("")
    add("| file | SHA-256 |")
    add("|---|---|")
    for name, value in manifest["files"].items():
        add(f"| `{name}` | `{value}` |")
    add("")
    add("## Checks to repeat on the GPU machine before any training")
    add("")
    add("```bash")
    add("python -m pytest tests/arena tests/arena_sft -q")
    add(f"rftlab arena audit {data_dir} --require-split-action-coverage")
    add("rftlab arena manifest          # must print " + FROZEN_MANIFEST_SHA256)
    add(f"rftlab arena eval --provider oracle --validation-data {data_dir} --output-dir results/arena/oracle")
    add("```")
    add("")
    if oracle_summary is not None:
        gen = oracle_summary["conditions"]["generated"]
        add(
            f"The oracle run on this machine: strict message rate {oracle_summary['message_strict_rate']:.3f}, "
            f"generated-condition regret {gen['mean_oracle_regret']:.3f}, optimal rate {gen['optimal_outcome_rate']:.3f}, "
            f"mean reward {gen['mean_environment_reward']:.4f} over {oracle_summary['num_cases']} cases. "
            "Anything other than regret 0 and rates 1 is a harness bug."
        )
        add("")
    add("## Order of work")
    add("")
    add(
        "1. Serve the untouched base model (greedy, thinking off) and run the frozen evaluation on it, keeping"
    )
    add(
        "   every raw reply and the summary: `rftlab arena eval --provider endpoint --model BASE --base-url URL"
    )
    add(f"   --validation-data {data_dir} --output-dir results/arena/base`. This is the baseline for G5.")
    add(f"2. Overfit smoke test on `{manifest.get('overfit_file', 'overfit_256.jsonl')}` ({recipe.overfit_rows} rows): "
        f"{recipe.overfit_steps} steps, batch {recipe.overfit_batch_size},")  # fmt: skip
    add(f"   learning rate {recipe.learning_rate:g}, weight decay {recipe.overfit_weight_decay:g}, "
        f"{recipe.overfit_warmup_steps} warm-up steps, same LoRA. Score those rows with the validation scorer.")  # fmt: skip
    add(
        f"   Continue only if schema validity is at least {recipe.overfit_min_schema_valid:g} in both phases; a lower"
    )
    add("   value points at the chat template or the loss mask, not at the amount of data.")
    add(
        "3. Train the LoRA adapter on the training mixture below; choose checkpoints on `validation.jsonl` only."
    )
    add(
        "4. Pick the checkpoint by validation task metrics (eligible: passes G1-G4; rank by selection score, then"
    )
    add(
        "   broadcast exact, act exact, broadcast supported, act legal, then the earlier step), never by loss alone."
    )
    add("5. Evaluate the chosen checkpoint once on `test.jsonl` and once on the frozen 60 cases.")
    add("6. Compare base and candidate with `rftlab arena gates --base results/arena/base --candidate")
    add(
        "   results/arena/sft` under generated, dropped, reference and shuffled messages. MARL waits until G1-G6 pass."
    )
    add("")
    add("## Training mixture")
    add("")
    add(f"Training draws {mixture['draws']} rows ({mixture['epochs']} epochs of the {train_rows}-row train split) "
        f"from three strata with a seeded sampler (seed {mixture['seed']}); the draw order is in "
        f"`{mixture['schedule_file']}`. Validation and test are not reweighted.")  # fmt: skip
    add("")
    add("| stratum | rows | probability | expected passes |")
    add("|---|---|---|---|")
    for stratum in mixture["strata"].values():
        passes = mixture["draws"] * stratum["probability"] / stratum["rows"] if stratum["rows"] else 0.0
        add(f"| `{stratum['file']}` | {stratum['rows']} | {stratum['probability']:.2f} | {passes:.2f} |")
    add("")
    add("## LoRA recipe")
    add("")
    add("| setting | value |")
    add("|---|---|")
    add(f"| base model | `{recipe.base_model}` |")
    add(
        f"| LoRA rank / alpha / dropout | {recipe.lora_rank} / {recipe.lora_alpha} / {recipe.lora_dropout:g} |"
    )
    add(
        f"| LoRA targets | {', '.join(f'`{t}`' for t in recipe.lora_targets)} (attention and MLP projections) |"
    )
    add(f"| sequence length | {recipe.max_sequence_length} |")
    add(
        f"| optimizer | {recipe.optimizer}, learning rate {recipe.learning_rate:g}, weight decay {recipe.weight_decay:g} |"
    )
    add(f"| schedule | {recipe.scheduler}, {recipe.warmup_fraction:.0%} warm-up ({plan['warmup_steps']} steps), "
        f"floor {recipe.min_learning_rate:g} |")  # fmt: skip
    add(f"| effective batch | {recipe.effective_batch_size} sequences |")
    add(
        f"| length | {recipe.epochs} epochs = {plan['optimizer_steps']} optimizer steps; do not extend automatically |"
    )
    add(f"| gradient clipping | {recipe.gradient_clip_norm:g} |")
    add(f"| gradient checkpointing | {'on' if recipe.gradient_checkpointing else 'off'} |")
    add(f"| loss | {recipe.loss} |")
    add(f"| chat template | {recipe.chat_template} |")
    add(f"| validation | every {plan['validation_every_steps']} steps, at start and at the end: "
        f"{plan['validation_points']} measurements (at least {recipe.min_validation_measurements} required) |")  # fmt: skip
    add("")
    add("## Promotion gates")
    add("")
    add(
        "The strict parser is never relaxed. A failed gate sends the work back to data and prompt diagnosis; it"
    )
    add("is never a reason to reopen the test split or to loosen a threshold.")
    add("")
    if gate_rows:
        add("| gate | metric | threshold | what it measures |")
        add("|---|---|---|---|")
        lines.extend(gate_rows)
        add("")
        add("G7 only licenses the claim that messages help coordination; G1-G6 decide promotion.")
    return "\n".join(lines) + "\n"
