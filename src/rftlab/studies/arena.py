"""The arena Stage-1 SFT study: the driver the notebooks (``04_arena_env``, ``05_arena``) and the CLI
(``rftlab arena``) both call.

``evaluate_frozen`` runs a provider on the frozen cases (and optionally the validation rows) and
summarises it; ``write_evaluation`` writes ``rows.jsonl``, ``validation.jsonl`` and ``summary.json``
atomically; ``read_rows`` reads a JSONL split. Bad input raises ``ValueError``.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- envs: ``rftlab.envs.arena`` (world, rules, reward, oracle, protocol, frozen cases, env)
- policies: ``rftlab.policies.arena`` (scripted table and baselines, reply providers, the local server)
- rollout: ``rftlab.rollout.arena`` (SFT data, frozen evaluation and validation scorer)
- training: ``rftlab.training.arena`` (LoRA SFT on the tinker interface, the Stage-1 recipe)
- analysis: ``rftlab.analysis.arena`` (evaluation summaries, gates, comparisons, the data audit, handoff)
- studies: ``rftlab.studies.arena``
- cli: ``rftlab.cli.arena``
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rftlab.analysis.arena.evaluation import summarize_eval
from rftlab.envs.arena.cases import FROZEN_CASE_COUNT
from rftlab.policies.arena.providers import Provider
from rftlab.rollout.arena.evaluation import run_frozen_eval, run_validation
from rftlab.runs import atomic_write_text


@dataclass(frozen=True)
class FrozenEvaluation:
    """One provider's frozen evaluation: per-case records, validation records (or ``None``), summary."""

    records: list[dict[str, Any]]
    validation: list[dict[str, Any]] | None
    summary: dict[str, Any]


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The JSON rows of a JSONL file (blank lines skipped); ``ValueError`` naming the file otherwise."""
    path = Path(path)
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc


def evaluate_frozen(
    provider: Provider,
    cases: Sequence[int] | None = None,
    validation_rows: Sequence[Mapping[str, Any]] | None = None,
) -> FrozenEvaluation:
    """``provider`` on the frozen cases (all 60 by default) and on ``validation_rows`` when given."""
    indices = range(FROZEN_CASE_COUNT) if cases is None else cases
    records = run_frozen_eval(provider, indices)
    validation = run_validation(provider, validation_rows) if validation_rows is not None else None
    return FrozenEvaluation(records, validation, summarize_eval(records, provider.describe(), validation))


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


def write_evaluation(out_dir: str | Path, evaluation: FrozenEvaluation) -> list[Path]:
    """Write ``rows.jsonl``, ``validation.jsonl`` (when there is one) and ``summary.json`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"rows.jsonl": _jsonl(evaluation.records)}
    if evaluation.validation is not None:
        files["validation.jsonl"] = _jsonl(evaluation.validation)
    files["summary.json"] = json.dumps(evaluation.summary, indent=2, sort_keys=True) + "\n"
    for name, text in files.items():
        atomic_write_text(out / name, text)
    return [out / name for name in files]
