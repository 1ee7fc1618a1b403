"""Stage-1 arena SFT data (docs/arena.md §9): chat rows from seeded states, oracle labels, hash splits, manifest.

``build_rows`` regenerates every row from its seed: the four BROADCAST rows of each natural seed (labels:
the reference broadcast of the agent's local-policy action), its ACT rows that survive the three filters of
§9.1, the targeted WAIT/SCAN/TRANSFER mechanics rows and the SILENCE rows (§9.3). ``write_dataset`` writes
``train/validation/test.jsonl``, the three training strata with the seeded 60/31/9 mixture schedule (§9.5),
and ``manifest.json`` with per-file SHA-256, the content hash of the row ids (§9.4) and the prompt-wording
independent structural digest (§9.6). Everything is deterministic, so a rebuild is byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rftlab.envs.arena.cases import FROZEN_SEEDS
from rftlab.envs.arena.oracle import JointSolution, solve_joint_action
from rftlab.envs.arena.protocol import (
    ACT_PHASE,
    BROADCAST_PHASE,
    EMPTY_BROADCAST,
    PROMPT_VERSION,
    Broadcast,
    action_prompt,
    broadcast_prompt,
    encode_action,
    encode_broadcast,
    inbox_for,
    oracle_broadcast,
    parse_action,
    parse_broadcast,
)
from rftlab.envs.arena.rules import SCAN, TRANSFER, WAIT, Action, step
from rftlab.envs.arena.world import (
    ARENA_VERSION,
    BLUE,
    GENERATOR_VERSION,
    RED,
    GameState,
    compact_json,
    generate_mechanics_state,
    generate_state,
    sha256_hex,
    team_agent_ids,
)
from rftlab.policies.arena.scripted import deterministic_policy, local_policy_action

DATASET_VERSION = "rftlab-arena-sft-v2"
UPSTREAM_DATASET_VERSION = "arena-sft-v2"
UPSTREAM_CONTENT_SHA256 = "edad09bb301748621a0fab73ebf3de60d60abfd9f56c9afcc6ca02ffe12f3a80"
SPLITS: tuple[str, ...] = ("train", "validation", "test")
PHASES: tuple[str, ...] = (BROADCAST_PHASE, ACT_PHASE)
VERSION_KEYS: tuple[str, ...] = ("dataset_version", "arena_version", "generator_version", "prompt_version")
VERSIONS: dict[str, str] = {
    "dataset_version": DATASET_VERSION,
    "arena_version": ARENA_VERSION,
    "generator_version": GENERATOR_VERSION,
    "prompt_version": PROMPT_VERSION,
}

# Seed blocks of the targeted rows (§9.3).
MECHANICS_SEED_BASE = 5_000_000
MECHANICS_SKILL_STRIDE = 2_000
SILENCE_SEED_BASE = 6_000_000
START_SEED_STRIDE = 10_000
MECHANICS_SKILLS: tuple[str, ...] = ("WAIT", "SCAN", "TRANSFER")

# Expected §9.6 structural digests of the Stage-1 configuration (0 / 1024 / 32 / 512).
STAGE1_STRUCTURAL_SHA256: dict[str, str] = {
    "all": "3bb0bf5e0c31c29eba12f7497815d5c3d2c4d032e469e082b01405e0ba04ff61",
    "train": "b5a1a2c5bebdc5db1f8848eb62c0ae582bb3d7cbe0b60eb36ab1eb206f69da77",
    "validation": "9d36ce040e9b2b2e664bda5442edacb1fb745d9604b4751e0ca659993f0d5cc9",
    "test": "7c8ca33a4ee962b4c54d638826970ea3fbde89855984daed0d27dae28e203a4e",
}

# Training mixture (§9.5): strata, sampling probabilities and the seeded schedule.
STRATA: tuple[str, ...] = ("train_broadcast", "train_action_common", "train_action_rare")
STRATUM_PROBABILITIES: dict[str, float] = {
    "train_broadcast": 0.60,
    "train_action_common": 0.31,
    "train_action_rare": 0.09,
}
RARE_ACTION_KINDS = frozenset({WAIT, SCAN, TRANSFER})
MIXTURE_SEED = 20260811
MIXTURE_EPOCHS = 2
EFFECTIVE_BATCH = 32
OVERFIT_COMPOSITION: tuple[tuple[str, int], ...] = (
    ("train_broadcast", 154),
    ("train_action_rare", 24),
    ("train_action_common", 78),
)

ANSWER_LEAK_MARKERS: tuple[str, ...] = ("required_joint", "oracle_message", "solver_reward", "answer_key")


class FrozenSeedError(ValueError):
    """A frozen evaluation seed was offered to the SFT splitter (§9.2)."""


@dataclass(frozen=True)
class SftConfig:
    """Generation settings recorded in the manifest; the defaults are the Stage-1 configuration (§9.4)."""

    start_seed: int = 0
    num_seeds: int = 1024
    targeted_mechanics_per_kind: int = 32
    targeted_silence_examples: int = 512
    generation_workers: int = 4  # recorded for fidelity; generation is sequential and order-preserving

    def __post_init__(self) -> None:
        for name in ("num_seeds", "targeted_mechanics_per_kind", "targeted_silence_examples"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.start_seed < 0:
            raise ValueError(f"start_seed must be >= 0, got {self.start_seed}")


STAGE1_CONFIG = SftConfig()


def split_for_seed(seed: int) -> str:
    """``int(sha256("arena-gen-v1:<seed>")[:8], 16) mod 100``: <90 train, <95 validation, else test."""
    if seed in FROZEN_SEEDS:
        raise FrozenSeedError(
            f"seed {seed} belongs to the frozen evaluation manifest and is never trained on"
        )
    bucket = int(sha256_hex(f"{GENERATOR_VERSION}:{seed}")[:8], 16) % 100
    if bucket < 90:
        return "train"
    if bucket < 95:
        return "validation"
    return "test"


# ---------------------------------------------------------------- rows


def make_row(messages: list[dict[str, str]], metadata: dict[str, Any]) -> dict[str, Any]:
    """A row with its id ``sha256(compact_json({messages, metadata}))`` (§9.4)."""
    row_id = sha256_hex(compact_json({"messages": messages, "metadata": metadata}))
    return {"id": row_id, "messages": messages, "metadata": metadata}


def _metadata(seed: int, split: str, phase: str, agent_id: str, label_source: str, **extra: Any) -> dict:
    return {**VERSIONS, "seed": seed, "split": split, "phase": phase, "agent_id": agent_id,
            "label_source": label_source, **extra}  # fmt: skip


def _with_assistant(messages: list[dict[str, str]], target: str) -> list[dict[str, str]]:
    return [*messages, {"role": "assistant", "content": target}]


@dataclass(frozen=True)
class SeedSetup:
    """Everything a natural seed's rows derive from: state, RED's actions, local actions and the oracle."""

    seed: int
    state: GameState
    red: dict[str, Action]
    local: dict[str, Action]
    solution: JointSolution


def natural_setup(seed: int, size: int = 12) -> SeedSetup:
    state = generate_state(seed, size)
    red = deterministic_policy(state, RED, "balanced")
    local = {a: local_policy_action(state, a) for a in team_agent_ids(BLUE)}
    return SeedSetup(seed, state, red, local, solve_joint_action(state, BLUE, red))


def generate_seed_examples(seed: int, rejections: Counter | None = None) -> list[dict[str, Any]]:
    """The BROADCAST rows (always 4) and surviving ACT rows of one natural seed (§9.1)."""
    rejections = rejections if rejections is not None else Counter()
    setup = natural_setup(seed)
    state, local, solution = setup.state, setup.local, setup.solution
    split = split_for_seed(seed)
    blue = team_agent_ids(BLUE)
    rows: list[dict[str, Any]] = []
    broadcasts: dict[str, Broadcast] = {}
    for i, agent_id in enumerate(blue):
        broadcast = oracle_broadcast(state, agent_id, local[agent_id])
        target = encode_broadcast(broadcast)
        if not parse_broadcast(target, state, agent_id).valid:
            raise RuntimeError(f"seed {seed} {agent_id}: the reference broadcast fails the strict parser")
        broadcasts[agent_id] = broadcast
        messages, _ = broadcast_prompt(state, agent_id, seed + i)
        meta = _metadata(seed, split, BROADCAST_PHASE, agent_id, "deterministic_observation_policy")
        rows.append(make_row(_with_assistant(messages, target), meta))

    local_claims = Counter((a.kind, a.target) for a in local.values() if a.kind != WAIT)
    policy_reward = None
    for i, agent_id in enumerate(blue):
        acceptable = solution.acceptable(agent_id)
        if len(acceptable) != 1:
            rejections["ambiguous_optimal_action"] += 1
            continue
        (chosen,) = acceptable
        if local[agent_id] != chosen:
            rejections["not_prompt_identifiable"] += 1
            continue
        if chosen.kind != WAIT and local_claims[(chosen.kind, chosen.target)] >= 2:
            rejections["conflicting_declared_intent"] += 1
            continue
        if policy_reward is None:
            policy_reward = step(state, {**setup.red, **local}, check=False).rewards[BLUE]
        inbox = inbox_for(agent_id, {a: b for a, b in broadcasts.items() if a != agent_id})
        messages, displayed = action_prompt(state, agent_id, inbox, seed + i)
        target = encode_action(chosen, displayed)
        if parse_action(target, displayed).value != chosen:
            raise RuntimeError(f"seed {seed} {agent_id}: the action target does not round-trip")
        meta = _metadata(
            seed,
            split,
            ACT_PHASE,
            agent_id,
            "exact_joint_solver_and_prompt_policy_agree",
            solver_reward=solution.reward,
            policy_reward=policy_reward,
            solver_joint_actions_explored=solution.explored,
            solver_optimal_count=solution.optimal_count,
        )
        rows.append(make_row(_with_assistant(messages, target), meta))
    return rows


def mechanics_quotas(per_kind: int) -> dict[str, int]:
    """Per-split quota of each targeted skill: ``m<3`` → all train; else ``m−2h / h / h``, ``h=max(1, m//8)``."""
    if per_kind < 3:
        return {"train": per_kind, "validation": 0, "test": 0}
    h = max(1, per_kind // 8)
    return {"train": per_kind - 2 * h, "validation": h, "test": h}


def mechanics_examples(
    skill_index: int, config: SftConfig, rejections: Counter | None = None
) -> list[dict[str, Any]]:
    """Targeted ACT rows for one skill (0 WAIT, 1 SCAN, 2 TRANSFER), filled split by split (§9.3)."""
    rejections = rejections if rejections is not None else Counter()
    skill = MECHANICS_SKILLS[skill_index]
    quotas = mechanics_quotas(config.targeted_mechanics_per_kind)
    filled = dict.fromkeys(SPLITS, 0)
    rows: list[dict[str, Any]] = []
    max_attempts = max(500, 200 * config.targeted_mechanics_per_kind)
    base = MECHANICS_SEED_BASE + config.start_seed * START_SEED_STRIDE + skill_index * MECHANICS_SKILL_STRIDE
    for attempt in range(max_attempts):
        if all(filled[s] >= quotas[s] for s in SPLITS):
            return rows
        seed = base + attempt
        if seed in FROZEN_SEEDS:
            continue
        split = split_for_seed(seed)
        if filled[split] >= quotas[split]:
            continue
        state = generate_mechanics_state(seed, skill)
        solution = solve_joint_action(state, BLUE, deterministic_policy(state, RED, "balanced"))
        acceptable = solution.acceptable("blue-0")
        local = local_policy_action(state, "blue-0")
        if len(acceptable) != 1 or local not in acceptable or local.kind != skill:
            rejections[f"targeted_{skill.lower()}_rejected"] += 1
            continue
        messages, displayed = action_prompt(state, "blue-0", [], seed)
        target = encode_action(local, displayed)
        meta = _metadata(
            seed,
            split,
            ACT_PHASE,
            "blue-0",
            "exact_joint_solver_and_unique_visible_mechanic",
            generator_mode="targeted_mechanics",
            targeted_skill=skill,
            solver_reward=solution.reward,
            solver_joint_actions_explored=solution.explored,
            solver_optimal_count=solution.optimal_count,
        )
        rows.append(make_row(_with_assistant(messages, target), meta))
        filled[split] += 1
    if all(filled[s] >= quotas[s] for s in SPLITS):
        return rows
    raise RuntimeError(f"targeted {skill}: quotas {quotas} not filled after {max_attempts} attempts")


def silence_examples(config: SftConfig) -> list[dict[str, Any]]:
    """BROADCAST rows whose label is the empty broadcast (nothing useful is visible) (§9.3)."""
    rows = []
    target = encode_broadcast(EMPTY_BROADCAST)
    for j in range(config.targeted_silence_examples):
        seed = SILENCE_SEED_BASE + config.start_seed * START_SEED_STRIDE + j
        state = generate_mechanics_state(seed, "SILENCE")
        messages, _ = broadcast_prompt(state, "blue-0", seed)
        meta = _metadata(
            seed,
            split_for_seed(seed),
            BROADCAST_PHASE,
            "blue-0",
            "exact_empty_broadcast",
            generator_mode="targeted_mechanics",
            targeted_skill="SILENCE",
        )
        rows.append(make_row(_with_assistant(messages, target), meta))
    return rows


@dataclass(frozen=True)
class BuiltDataset:
    """All rows in generation order and the rejection counts."""

    config: SftConfig
    rows: tuple[dict[str, Any], ...]
    rejections: dict[str, int]

    def split_rows(self, split: str) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["metadata"]["split"] == split]


def build_rows(config: SftConfig = STAGE1_CONFIG) -> BuiltDataset:
    """Generate every row in the order of §9.3: natural seeds, WAIT/SCAN/TRANSFER mechanics, silence."""
    rejections: Counter = Counter()
    rows: list[dict[str, Any]] = []
    for seed in range(config.start_seed, config.start_seed + config.num_seeds):
        rows.extend(generate_seed_examples(seed, rejections))
    for k in range(len(MECHANICS_SKILLS)):
        rows.extend(mechanics_examples(k, config, rejections))
    rows.extend(silence_examples(config))
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise RuntimeError("duplicate row ids in the generated dataset")
    seed_split: dict[int, str] = {}
    for row in rows:
        meta = row["metadata"]
        if seed_split.setdefault(meta["seed"], meta["split"]) != meta["split"]:
            raise RuntimeError(f"seed {meta['seed']} crosses splits")
    return BuiltDataset(config, tuple(rows), dict(sorted(rejections.items())))


# ---------------------------------------------------------------- hashes


def content_sha256(rows: Iterable[Mapping[str, Any]]) -> str:
    """§9.4: SHA-256 of the sorted row ids concatenated without separator."""
    return sha256_hex("".join(sorted(row["id"] for row in rows)))


def row_digest(row: Mapping[str, Any]) -> str:
    """§9.6 per-row structural digest: user JSON minus ``team_objective``, assistant text, metadata minus versions."""
    user = json.loads(row["messages"][1]["content"])
    user.pop("team_objective", None)
    metadata = {k: v for k, v in row["metadata"].items() if k not in VERSION_KEYS}
    return sha256_hex(
        compact_json({"user": user, "assistant": row["messages"][2]["content"], "metadata": metadata})
    )


def structural_sha256(rows: Iterable[Mapping[str, Any]]) -> str:
    """§9.6: SHA-256 of the sorted per-row structural digests, concatenated."""
    return sha256_hex("".join(sorted(row_digest(row) for row in rows)))


def structural_digests(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The structural digest of all rows and of each split (keys ``all``, ``train``, ``validation``, ``test``)."""
    out = {"all": structural_sha256(rows)}
    for split in SPLITS:
        out[split] = structural_sha256(r for r in rows if r["metadata"]["split"] == split)
    return out


def file_bytes_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- strata and the training mixture


def action_kind(row: Mapping[str, Any]) -> str | None:
    """The kind of an ACT row's target action (the ``legal_actions`` entry whose id is the target id)."""
    if row["metadata"]["phase"] != ACT_PHASE:
        return None
    action_id = json.loads(row["messages"][2]["content"])["action_id"]
    for entry in json.loads(row["messages"][1]["content"])["legal_actions"]:
        if entry["id"] == action_id:
            return entry["type"]
    return None


def stratum_of(row: Mapping[str, Any]) -> str:
    if row["metadata"]["phase"] == BROADCAST_PHASE:
        return "train_broadcast"
    return "train_action_rare" if action_kind(row) in RARE_ACTION_KINDS else "train_action_common"


def training_strata(train_rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The train split cut into the three strata of §9.5, file order kept."""
    strata: dict[str, list[Mapping[str, Any]]] = {name: [] for name in STRATA}
    for row in train_rows:
        strata[stratum_of(row)].append(row)
    return strata


def mixture_schedule(
    strata: Mapping[str, Sequence[Mapping[str, Any]]],
    draws: int,
    seed: int = MIXTURE_SEED,
    probabilities: Mapping[str, float] = STRATUM_PROBABILITIES,
) -> list[tuple[str, str]]:
    """``draws`` (stratum, row id) picks: a seeded stratum choice, then the next row of that stratum's shuffled
    stream (an exhausted stream is reshuffled). Empty strata are never chosen."""
    rng = random.Random(seed)
    names = [n for n in STRATA if strata.get(n)]
    if not names:
        return []
    weights = [probabilities[n] for n in names]
    streams: dict[str, list[str]] = {}
    position: dict[str, int] = {}
    out = []
    for _ in range(draws):
        name = rng.choices(names, weights)[0]
        if position.get(name, 0) >= len(streams.get(name, ())):
            order = [row["id"] for row in strata[name]]
            rng.shuffle(order)
            streams[name], position[name] = order, 0
        out.append((name, streams[name][position[name]]))
        position[name] += 1
    return out


def overfit_rows(train_rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The 256-row overfit set (§9.5): first 154 BROADCAST, then first 24 rare ACT, then first 78 common ACT."""
    strata = training_strata(train_rows)
    out: list[Mapping[str, Any]] = []
    for name, count in OVERFIT_COMPOSITION:
        out.extend(strata[name][:count])
    return out


# ---------------------------------------------------------------- files and manifest


def jsonl_bytes(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """One ``json.dumps(row, sort_keys=True)`` line per row (§9.4)."""
    return "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows).encode("utf-8")


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """``manifest.json``: indent 2, sorted keys, trailing newline."""
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")


def schedule_bytes(schedule: Sequence[tuple[str, str]]) -> bytes:
    return "".join(
        json.dumps({"draw": i, "stratum": name, "id": row_id}, sort_keys=True) + "\n"
        for i, (name, row_id) in enumerate(schedule)
    ).encode("utf-8")


def dataset_files(built: BuiltDataset) -> dict[str, bytes]:
    """Every data file (name → bytes), manifest excluded."""
    files: dict[str, bytes] = {}
    by_split = {split: built.split_rows(split) for split in SPLITS}
    for split in SPLITS:
        files[f"{split}.jsonl"] = jsonl_bytes(by_split[split])
    strata = training_strata(by_split["train"])
    for name in STRATA:
        files[f"{name}.jsonl"] = jsonl_bytes(strata[name])
    draws = MIXTURE_EPOCHS * len(by_split["train"])
    files["train_mixture.jsonl"] = schedule_bytes(mixture_schedule(strata, draws))
    files["overfit_256.jsonl"] = jsonl_bytes(overfit_rows(by_split["train"]))
    return files


def build_manifest(built: BuiltDataset, files: Mapping[str, bytes]) -> dict[str, Any]:
    rows = built.rows
    train = built.split_rows("train")
    strata = training_strata(train)
    draws = MIXTURE_EPOCHS * len(train)
    return {
        **VERSIONS,
        "upstream_dataset_version": UPSTREAM_DATASET_VERSION,
        "upstream_prompt_version": "arena-v2-structured-priority",
        **asdict(built.config),
        "num_examples": len(rows),
        "examples_by_split": dict(sorted(Counter(r["metadata"]["split"] for r in rows).items())),
        "examples_by_phase": dict(sorted(Counter(r["metadata"]["phase"] for r in rows).items())),
        "rejections": dict(built.rejections),
        "content_sha256": content_sha256(rows),
        "structural_sha256": structural_digests(rows),
        "files": {name: file_bytes_sha256(data) for name, data in sorted(files.items())},
        "training_mixture": {
            "strata": {
                name: {
                    "file": f"{name}.jsonl",
                    "rows": len(strata[name]),
                    "probability": STRATUM_PROBABILITIES[name],
                }
                for name in STRATA
            },
            "schedule_file": "train_mixture.jsonl",
            "seed": MIXTURE_SEED,
            "epochs": MIXTURE_EPOCHS,
            "draws": draws,
            "effective_batch": EFFECTIVE_BATCH,
            "optimizer_steps": -(-draws // EFFECTIVE_BATCH),
            "unweighted_splits": ["validation", "test"],
        },
        "overfit_file": "overfit_256.jsonl",
    }


def write_dataset(out_dir: str | Path, config: SftConfig = STAGE1_CONFIG) -> dict[str, Any]:
    """Build the dataset and write every file plus ``manifest.json`` into ``out_dir``; return the manifest."""
    built = build_rows(config)
    files = dataset_files(built)
    manifest = build_manifest(built, files)
    from rftlab.runs.atomic import atomic_write_bytes

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # each file atomically (unique temporary, credential check); the manifest last, so a manifest on
    # disk always describes files that are complete
    for name, data in {**files, "manifest.json": manifest_bytes(manifest)}.items():
        atomic_write_bytes(out / name, data)
    return manifest
