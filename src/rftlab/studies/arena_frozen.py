"""The arena's frozen-evaluation I/O (part of the ``rftlab.studies.arena`` driver).

``evaluate_frozen`` runs a provider on the frozen cases (and optionally the validation rows) and
summarises it. ``write_evaluation`` writes ``rows.jsonl``, ``validation.jsonl`` and ``summary.json``
atomically. ``read_rows`` reads a JSONL split, and ``check_sft_rows`` checks SFT rows. Bad input raises
``ValueError``.
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


def check_sft_rows(rows: Sequence[Any], where: str) -> None:
    """``ValueError`` naming the first row that is not an SFT chat row the scorer can read (an object with
    an ``id``, ``metadata.phase`` BROADCAST/ACT and system, user, assistant messages whose user content is
    a JSON object with ``observation.known_nodes`` and ``legal_actions`` lists)."""
    for number, row in enumerate(rows, start=1):
        label = f"{where}:{number}"
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise ValueError(f"{label}: not an SFT row (an object with a string 'id')")
        meta = row.get("metadata")
        if not isinstance(meta, dict) or meta.get("phase") not in ("BROADCAST", "ACT"):
            raise ValueError(f"{label}: metadata.phase must be BROADCAST or ACT")
        messages = row.get("messages")
        if (
            not isinstance(messages, list)
            or [m.get("role") if isinstance(m, dict) else None for m in messages]
            != ["system", "user", "assistant"]
            or not all(isinstance(m.get("content"), str) for m in messages)
        ):
            raise ValueError(f"{label}: messages must be system, user, assistant with string content")
        try:
            user = json.loads(messages[1]["content"])
            target = json.loads(messages[2]["content"])
        except (ValueError, RecursionError):
            raise ValueError(f"{label}: the user or assistant content is not JSON") from None
        observation = user.get("observation") if isinstance(user, dict) else None
        if not (
            isinstance(observation, dict)
            and isinstance(observation.get("known_nodes"), list)
            and isinstance(user.get("legal_actions"), list)
            and all(isinstance(e, dict) and isinstance(e.get("id"), str) for e in user["legal_actions"])
            and all(isinstance(n, dict) for n in observation["known_nodes"])
        ):
            raise ValueError(
                f"{label}: the user JSON lacks observation.known_nodes or legal_actions with ids"
            )
        if not isinstance(target, dict) or (
            meta["phase"] == "BROADCAST" and not isinstance(target.get("facts"), list)
        ):
            raise ValueError(f"{label}: the assistant target is not a {meta['phase']} reply object")


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


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n"


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
