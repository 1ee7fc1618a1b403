"""Audit of an arena SFT data directory (docs/arena.md §9.7 plus the rftlab additions).

Every state is rebuilt from its seed and every row is checked: chat schema, versions, split by seed hash,
frozen-seed leakage, answer leakage, strict parse of the label, solver optimality and prompt
identifiability of ACT labels, conflicting declared intents. On top of the upstream checks the audit also
regenerates the whole dataset from the configuration the rows imply and compares every row (prompt, label,
metadata, order), every file's SHA-256, every manifest field and the manifest's canonical bytes, so that
changing any byte of any file in the directory fails the audit.

A failure is one line ``row <file>:<line> (<id>): <check>`` or ``<scope>: <check>``.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from rftlab.envs.arena.cases import FROZEN_SEEDS
from rftlab.envs.arena.oracle import JointSolution, solve_joint_action
from rftlab.envs.arena.protocol import (
    ACT_PHASE,
    BROADCAST_PHASE,
    intent_from_json,
    parse_action,
    parse_broadcast,
)
from rftlab.envs.arena.rules import ACTION_KINDS, Action
from rftlab.envs.arena.world import BLUE, RED, GameState, generate_mechanics_state, generate_state
from rftlab.policies.arena.scripted import deterministic_policy, local_policy_action
from rftlab.rollout.arena.sft_data import (
    ANSWER_LEAK_MARKERS,
    MECHANICS_SKILLS,
    SPLITS,
    VERSIONS,
    BuiltDataset,
    SftConfig,
    build_manifest,
    build_rows,
    dataset_files,
    file_bytes_sha256,
    make_row,
    manifest_bytes,
    split_for_seed,
    structural_digests,
)

MANIFEST = "manifest.json"
ROLES = ["system", "user", "assistant"]
_MANIFEST_CODES = {
    "content_sha256": "manifest_content_hash",
    "num_examples": "manifest_example_count",
    "examples_by_split": "manifest_split_counts",
    "examples_by_phase": "manifest_phase_counts",
    "structural_sha256": "structural_digest",
}


@dataclass
class AuditReport:
    """The audit's findings; ``valid`` iff there is no failure."""

    failures: list[str] = field(default_factory=list)
    num_examples: int = 0
    num_unique_seeds: int = 0
    phases: dict[str, int] = field(default_factory=dict)
    action_kinds: dict[str, int] = field(default_factory=dict)
    action_kinds_by_split: dict[str, dict[str, int]] = field(default_factory=dict)
    action_positions: dict[str, int] = field(default_factory=dict)
    broadcast_fact_counts: dict[str, int] = field(default_factory=dict)
    verified_solver_seeds: int = 0
    required_split_action_coverage: bool = False
    structural_sha256: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def valid(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "failures": list(self.failures),
            "num_examples": self.num_examples,
            "num_unique_seeds": self.num_unique_seeds,
            "phases": self.phases,
            "action_kinds": self.action_kinds,
            "action_kinds_by_split": self.action_kinds_by_split,
            "action_positions": self.action_positions,
            "broadcast_fact_counts": self.broadcast_fact_counts,
            "verified_solver_seeds": self.verified_solver_seeds,
            "required_split_action_coverage": self.required_split_action_coverage,
            "structural_sha256": self.structural_sha256,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class _Row:
    file: str
    line: int
    row: dict[str, Any]

    @property
    def label(self) -> str:
        row_id = self.row.get("id") if isinstance(self.row, dict) else None
        return f"row {self.file}:{self.line} ({row_id if isinstance(row_id, str) else '?'})"


class _States:
    """Rebuilt states and oracle solutions, cached per (seed, skill)."""

    def __init__(self) -> None:
        self._states: dict[tuple[int, str | None], GameState] = {}
        self._solutions: dict[tuple[int, str | None], JointSolution] = {}

    def state(self, seed: int, skill: str | None) -> GameState:
        key = (seed, skill)
        if key not in self._states:
            self._states[key] = generate_mechanics_state(seed, skill) if skill else generate_state(seed)
        return self._states[key]

    def solution(self, seed: int, skill: str | None) -> JointSolution:
        key = (seed, skill)
        if key not in self._solutions:
            state = self.state(seed, skill)
            self._solutions[key] = solve_joint_action(
                state, BLUE, deterministic_policy(state, RED, "balanced")
            )
        return self._solutions[key]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _chat_ok(row: Any) -> bool:
    if not isinstance(row, dict) or not isinstance(row.get("metadata"), dict):
        return False
    messages = row.get("messages")
    return (
        isinstance(messages, list)
        and len(messages) == 3
        and all(isinstance(m, dict) and set(m) == {"role", "content"} for m in messages)
        and [m["role"] for m in messages] == ROLES
        and all(isinstance(m["content"], str) for m in messages)
    )


def _row_key(row: Mapping[str, Any]) -> tuple:
    meta = row["metadata"]
    return (meta.get("seed"), meta.get("phase"), meta.get("agent_id"), meta.get("targeted_skill"))


def _skill_of(meta: Mapping[str, Any]) -> str | None:
    if meta.get("generator_mode") == "targeted_mechanics":
        return meta.get("targeted_skill")
    return None


def _check_row(item: _Row, file_split: str, states: _States, fail, stats: dict) -> bool:
    """The per-row checks of §9.7 in order; returns False when the row was skipped."""
    row = item.row
    meta = row["metadata"]
    for key, expected in VERSIONS.items():
        if meta.get(key) != expected:
            fail(key)
    seed = meta.get("seed")
    if not _is_int(seed):
        fail("seed")
        return False
    if seed in FROZEN_SEEDS:
        fail("frozen_eval_leakage")
        return False
    expected_split = split_for_seed(seed)
    if meta.get("split") != expected_split or file_split != expected_split:
        fail("wrong_split")
    user_text = row["messages"][1]["content"]
    if any(marker in user_text for marker in ANSWER_LEAK_MARKERS):
        fail("answer_leakage")
    try:
        user = json.loads(user_text)
    except ValueError:
        fail("invalid_user_json")
        return False
    if not isinstance(user, dict):
        fail("invalid_user_json")
        return False
    skill = _skill_of(meta)
    if skill is not None and skill not in (*MECHANICS_SKILLS, "SILENCE"):
        fail("targeted_skill")
        return False
    agent_id = meta.get("agent_id")
    phase = meta.get("phase")
    state = states.state(seed, skill)
    if agent_id not in state.agents or not agent_id.startswith("blue-"):
        fail("agent_id")
        return False
    target = row["messages"][2]["content"]
    if phase == BROADCAST_PHASE:
        parsed = parse_broadcast(target, state, agent_id)
        if not parsed.valid:
            fail("invalid_broadcast:" + ",".join(parsed.errors))
        else:
            stats["fact_counts"][str(len(parsed.value.facts))] += 1
        return True
    if phase != ACT_PHASE:
        fail("unknown_phase")
        return True
    entries = user.get("legal_actions")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        fail("missing_legal_actions")
        return False
    if [e.get("id") for e in entries] != [f"A{i}" for i in range(len(entries))]:
        fail("action_ids")
    displayed: list[Action] = []
    for entry in entries:
        action = intent_from_json({k: v for k, v in entry.items() if k != "id"})
        displayed.append(action if action is not None else Action("?"))
    parsed = parse_action(target, displayed)
    if not parsed.valid:
        fail("invalid_action:" + ",".join(parsed.errors))
        return False
    selected = parsed.value
    solution = states.solution(seed, skill)
    stats["solver_seeds"].add((seed, skill))
    if selected not in solution.acceptable(agent_id):
        fail("not_solver_optimal")
    if selected != local_policy_action(state, agent_id):
        fail("not_prompt_identifiable")
    for message in user.get("inbox") or []:
        intent = message.get("broadcast", {}).get("intent") if isinstance(message, dict) else None
        if intent is not None and intent_from_json(intent) == selected:
            fail("conflicting_declared_intent")
            break
    kind = selected.kind
    stats["kinds"][kind] += 1
    stats["kinds_by_split"][file_split][kind] += 1
    stats["positions"][str(displayed.index(selected))] += 1
    return True


def infer_config(rows: list[dict[str, Any]], manifest: Mapping[str, Any]) -> SftConfig:
    """The generation configuration the rows themselves imply (natural seed range, targeted counts)."""
    natural = sorted(
        {
            r["metadata"]["seed"]
            for r in rows
            if r["metadata"].get("generator_mode") is None and _is_int(r["metadata"].get("seed"))
        }
    )
    per_skill = Counter(
        r["metadata"].get("targeted_skill")
        for r in rows
        if r["metadata"].get("generator_mode") == "targeted_mechanics"
    )
    start = natural[0] if natural else int(manifest.get("start_seed", 0) or 0)
    mech = max((per_skill.get(s, 0) for s in MECHANICS_SKILLS), default=0)
    workers = manifest.get("generation_workers")
    return SftConfig(
        start_seed=start,
        num_seeds=len(natural),
        targeted_mechanics_per_kind=mech,
        targeted_silence_examples=per_skill.get("SILENCE", 0),
        generation_workers=workers if _is_int(workers) else SftConfig().generation_workers,
    )


def _read_manifest(root: Path, failures: list[str]) -> dict[str, Any]:
    """``manifest.json`` as a dict (empty when missing or unreadable, with the failure recorded)."""
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        failures.append(f"{MANIFEST}: missing")
        return {}
    raw = manifest_path.read_bytes()
    try:
        loaded = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        failures.append(f"{MANIFEST}: invalid_json")
        return {}
    if not isinstance(loaded, dict):
        failures.append(f"{MANIFEST}: not_object")
        return {}
    if loaded and manifest_bytes(loaded) != raw:
        failures.append(f"{MANIFEST}: manifest_not_canonical")
    return loaded


def _read_split_rows(root: Path, failures: list[str]) -> tuple[list[_Row], dict[int, str]]:
    """Every JSON-object row of the three split files, and the split of each (by position)."""
    items: list[_Row] = []
    file_split: dict[int, str] = {}
    for split in SPLITS:
        name = f"{split}.jsonl"
        file = root / name
        if not file.is_file():
            failures.append(f"{name}: missing")
            continue
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            failures.append(f"{name}: not_utf8")
            continue
        for number, line in enumerate(lines, start=1):
            try:
                row = json.loads(line)
            except ValueError:
                failures.append(f"row {name}:{number} (?): invalid_row_json")
                continue
            if not isinstance(row, dict):
                failures.append(f"row {name}:{number} (?): invalid_row_json")
                continue
            file_split[len(items)] = split
            items.append(_Row(name, number, row))
    return items, file_split


def _check_rows(
    items: list[_Row], file_split: dict[int, str], failures: list[str]
) -> tuple[dict[str, Any], dict[Any, set[str]]]:
    """The per-row checks of §9.7 in order; returns the coverage statistics and each seed's splits."""
    states = _States()
    stats: dict[str, Any] = {
        "kinds": Counter(),
        "kinds_by_split": defaultdict(Counter),
        "positions": Counter(),
        "fact_counts": Counter(),
        "solver_seeds": set(),
    }
    seen_ids: set[str] = set()
    seed_splits: dict[Any, set[str]] = defaultdict(set)
    for index, item in enumerate(items):
        row = item.row

        def fail(code: str, item: _Row = item) -> None:
            failures.append(f"{item.label}: {code}")

        row_id = row.get("id")
        if isinstance(row_id, str) and row_id in seen_ids:
            fail("duplicate_id")
        if isinstance(row_id, str):
            seen_ids.add(row_id)
        if not _chat_ok(row):
            fail("chat_schema")
            continue
        if make_row(row["messages"], row["metadata"])["id"] != row_id:
            fail("row_id")
        if set(row) != {"id", "messages", "metadata"}:
            fail("row_keys")
        if _is_int(row["metadata"].get("seed")):
            seed_splits[row["metadata"]["seed"]].add(row["metadata"].get("split"))
        try:
            _check_row(item, file_split[index], states, fail, stats)
        except Exception as exc:  # a corrupted row must never crash the audit
            fail(f"unauditable:{type(exc).__name__}")
    for seed, splits in sorted(seed_splits.items()):
        if len(splits) > 1:
            failures.append(f"seed {seed}: seed_crosses_splits")
    return stats, seed_splits


def _compare_with_rebuild(items: list[_Row], rebuilt: BuiltDataset, failures: list[str]) -> None:
    """rftlab's rebuild comparison (§9.7): prompts, labels and metadata row by row, missing rows, order."""
    expected_by_key = {_row_key(r): r for r in rebuilt.rows}
    found_keys = set()
    for item in items:
        row = item.row
        if not _chat_ok(row):
            continue
        key = _row_key(row)
        found_keys.add(key)
        expected = expected_by_key.get(key)
        if expected is None:
            failures.append(f"{item.label}: unexpected_row")
            continue
        for position, name in ((0, "system_prompt_mismatch"), (1, "prompt_mismatch"), (2, "label_mismatch")):
            if row["messages"][position]["content"] != expected["messages"][position]["content"]:
                failures.append(f"{item.label}: {name}")
        if row["metadata"] != expected["metadata"]:
            failures.append(f"{item.label}: metadata_mismatch")
    for key, expected in expected_by_key.items():
        if key not in found_keys:
            failures.append(f"row {expected['id']}: missing_row seed={key[0]} phase={key[1]} agent={key[2]}")
    for split in SPLITS:
        name = f"{split}.jsonl"
        ours = [item.row.get("id") for item in items if item.file == name]
        theirs = [r["id"] for r in rebuilt.split_rows(split)]
        if ours != theirs and set(ours) == set(theirs):
            failures.append(f"{name}: row_order")


def _check_coverage(stats: Mapping[str, Any], require_split: bool, failures: list[str]) -> None:
    """§9.7 coverage: every action kind as an ACT target (per split with the flag) and a silence row."""
    missing = sorted(set(ACTION_KINDS) - set(stats["kinds"]))
    if missing:
        failures.append(f"dataset: missing_action_coverage:{','.join(missing)}")
    if require_split:
        for split in SPLITS:
            absent = sorted(set(ACTION_KINDS) - set(stats["kinds_by_split"][split]))
            if absent:
                failures.append(f"dataset: missing_{split}_action_coverage:{','.join(absent)}")
    if stats["fact_counts"].get("0", 0) == 0:
        failures.append("dataset: missing_silence_coverage")


def _check_files(
    root: Path, manifest: Mapping[str, Any], expected_files: Mapping[str, bytes], failures: list[str]
) -> None:
    """Every data file's bytes against the manifest's SHA-256 and against the canonical rebuild."""
    files = manifest.get("files")
    recorded: Mapping[str, Any] = files if isinstance(files, dict) else {}
    for name, data in expected_files.items():
        file = root / name
        if not file.is_file():
            failures.append(f"{name}: missing")
            continue
        actual = file_bytes_sha256(file.read_bytes())
        if recorded.get(name) != actual:
            failures.append(f"{name}: file_sha256 (manifest {recorded.get(name)}, file {actual})")
        if actual != file_bytes_sha256(data):
            failures.append(f"{name}: file_content_mismatch")
    for name in sorted(set(recorded) - set(expected_files)):
        failures.append(f"{MANIFEST}: unexpected_file_entry:{name}")


def _check_manifest_fields(
    manifest: Mapping[str, Any],
    rebuilt: BuiltDataset,
    expected_files: Mapping[str, bytes],
    failures: list[str],
) -> None:
    """Every manifest field against the manifest the rebuild implies."""
    if not manifest:
        return
    expected_manifest = build_manifest(rebuilt, expected_files)
    for key in sorted(set(expected_manifest) | set(manifest)):
        if key == "files":
            continue
        if manifest.get(key) != expected_manifest.get(key):
            code = _MANIFEST_CODES.get(key, f"manifest_{key}")
            if key in VERSIONS:
                code = f"manifest_{key}"
            failures.append(f"{MANIFEST}: {code}")
    if manifest.get("files") != expected_manifest["files"]:
        failures.append(f"{MANIFEST}: manifest_files")


def _rebuild(rows: list[dict[str, Any]], manifest: Mapping[str, Any], failures: list[str]) -> BuiltDataset:
    """The dataset the rows describe (configuration inferred from them), or an empty one if impossible."""
    config = infer_config(rows, manifest)
    try:
        return build_rows(config)
    except Exception as exc:  # e.g. an impossible configuration implied by corrupted rows
        failures.append(f"dataset: rebuild_failed:{type(exc).__name__}")
        return BuiltDataset(config, (), {})


def audit_dataset(path: str | Path, require_split_action_coverage: bool = False) -> AuditReport:
    """Audit the data directory ``path``; never raises on bad content (every problem becomes a failure line).

    In order: read the manifest and the split files, the per-row checks, the rebuild comparison, coverage,
    file hashes, manifest fields; then the report's statistics."""
    started = time.perf_counter()
    root = Path(path)
    report = AuditReport(required_split_action_coverage=require_split_action_coverage)
    failures = report.failures
    manifest = _read_manifest(root, failures)
    items, file_split = _read_split_rows(root, failures)
    stats, seed_splits = _check_rows(items, file_split, failures)
    rows = [item.row for item in items if _chat_ok(item.row)]
    rebuilt = _rebuild(rows, manifest, failures)
    _compare_with_rebuild(items, rebuilt, failures)
    _check_coverage(stats, require_split_action_coverage, failures)
    expected_files = dataset_files(rebuilt)
    _check_files(root, manifest, expected_files, failures)
    _check_manifest_fields(manifest, rebuilt, expected_files, failures)

    report.num_examples = len(items)
    report.num_unique_seeds = len(seed_splits)
    report.phases = dict(sorted(Counter(str(r["metadata"].get("phase")) for r in rows).items()))
    try:
        report.structural_sha256 = structural_digests(rows) if rows else {}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a row the per-row checks flagged
        failures.append(f"dataset: structural_digest_failed:{type(exc).__name__}")
    report.action_kinds = dict(sorted(stats["kinds"].items()))
    report.action_kinds_by_split = {
        split: dict(sorted(stats["kinds_by_split"][split].items())) for split in SPLITS
    }
    report.action_positions = dict(sorted(stats["positions"].items(), key=lambda kv: int(kv[0])))
    report.broadcast_fact_counts = dict(sorted(stats["fact_counts"].items()))
    report.verified_solver_seeds = len(stats["solver_seeds"])
    report.seconds = time.perf_counter() - started
    return report


def write_audit(report: AuditReport, output: str | Path) -> None:
    from rftlab.runs.atomic import atomic_write_text

    atomic_write_text(Path(output), json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n")
