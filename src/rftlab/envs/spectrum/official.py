"""BSM-official: the three CLBench variants, the ``default`` 3-stage schedule, the frozen
``mixed_grid_lifecycle`` corpus (built in memory, byte-identical to upstream), its loader contract and the
permuted run orderings. Spec: ``docs/spectrum.md`` A.1, A.2, A.4, A.5.

Cached: ``_corpus_rows_cached`` (``functools.lru_cache``, one entry): the corpus rows as JSON lines, built
once per process (callers get fresh dicts decoded from them).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from rftlab.envs.spectrum.generator import ChannelDef, GeneratorParams, generate_scans

TASK_NAME = "blind_spectrum_monitoring"
CORPUS_ID = "mixed_grid_lifecycle"
SCHEDULE_ID = "default"
SCHEMA_VERSION = 2
TOTAL_SCANS = 90
STATED_HORIZON = 90
TASK_SEED = 42
N_RUNS = 5
BAND_WIDTH = 168.0
W = 15.0
G = 9.0
CORPUS_SHA256 = "89be0c2d1528c59ddae47b67747bbe551ca138a3f27fb6f2bcfdd496c5086ae7"
METADATA_SHA256 = "f46e0ce093bed2271e6c718f1e9db3fbe677c7156a9295c32f347a050577be18"

# Variant parameters shared by all three variants (A.2), in the metadata's ``dgp_params`` key order.
_SHARED_DGP: dict[str, float] = {
    "W": 15.0,
    "G": 9.0,
    "noise_sigma": 4.0,
    "noise_floor_dbm": -60.0,
    "channel_power_dbm": -40.0,
    "p_active": 0.9,
    "p_interference": 0.2,
    "band_width": 168.0,
    "freq_step": 0.5,
    "center_jitter": 0.5,
    "freq_noise": 1.0,
    "power_noise": 5.0,
    "p_miss": 0.15,
    "p_false_alarm": 0.2,
}

_NARROW_CENTRES = (19.5, 43.5, 67.5, 91.5, 115.5, 139.5)


def _variant_channels(dormant: set[int]) -> list[dict[str, Any]]:
    """Channel list of a variant in the upstream JSON shape (ids 1..13, A.1), dormant ids get
    ``p_active: 0.1``."""
    out: list[dict[str, Any]] = []
    for cid in range(1, 8):
        ch: dict[str, Any] = {"id": cid, "slot": cid - 1}
        if cid in dormant:
            ch["p_active"] = 0.1
        out.append(ch)
    for k, centre in enumerate(_NARROW_CENTRES):
        cid = 8 + k
        ch = {"id": cid, "center_freq": centre, "bandwidth": 5.0, "slot": 0}
        if cid in dormant:
            ch["p_active"] = 0.1
        out.append(ch)
    return out


@dataclass(frozen=True)
class Stage:
    stage_idx: int
    variant_id: str
    label: str
    n_active: int
    seed: int
    dormant: frozenset[int]
    num_instances: int = 30

    @property
    def start(self) -> int:
        return self.stage_idx * self.num_instances

    @property
    def end(self) -> int:
        return self.start + self.num_instances

    def channels_json(self) -> list[dict[str, Any]]:
        return _variant_channels(set(self.dormant))

    def channel_defs(self) -> list[ChannelDef]:
        return [ChannelDef.from_mapping(c) for c in self.channels_json()]

    def generator_params(self) -> GeneratorParams:
        d = _SHARED_DGP
        return GeneratorParams(
            W=d["W"],
            G=d["G"],
            noise_floor_dbm=d["noise_floor_dbm"],
            channel_power_dbm=d["channel_power_dbm"],
            p_active=d["p_active"],
            p_interference=d["p_interference"],
            band_width=d["band_width"],
            center_jitter=d["center_jitter"],
            freq_noise=d["freq_noise"],
            power_noise=d["power_noise"],
            p_miss=d["p_miss"],
            p_false_alarm=d["p_false_alarm"],
            n_active=self.n_active,
        )

    def dgp_params(self) -> dict[str, Any]:
        return {**_SHARED_DGP, "channels": self.channels_json(), "n_active": self.n_active}


STAGES: tuple[Stage, ...] = (
    Stage(0, "five_ch_wide", "Wideband 5-channel grid (8 dormant)", 2, 42, frozenset({6, 7, *range(8, 14)})),
    Stage(
        1,
        "five_plus_four_mixed",
        "Narrowband channels appear in guard-band gaps (4 dormant)",
        3,
        43,
        frozenset({6, 7, 12, 13}),
    ),
    Stage(2, "full_grid_active", "All channels fully active", 4, 44, frozenset()),
)


def stage_of(index: int) -> Stage:
    """The stage a position (or canonical index) 0..89 belongs to."""
    if not 0 <= index < TOTAL_SCANS:
        raise ValueError(f"scan index {index} is outside 0..{TOTAL_SCANS - 1}")
    return STAGES[index // STAGES[0].num_instances]


def ground_truth_channels() -> list[tuple[float, float]]:
    """Scoring GT (A.1): union of all stages' channel definitions, dedup by id (first wins), at nominal
    centres -> ``[(center, bandwidth)]`` for all 13 channels."""
    seen: dict[int, tuple[float, float]] = {}
    for stage in STAGES:
        for ch in stage.channel_defs():
            if ch.id not in seen:
                seen[ch.id] = (ch.nominal_center(W, G), ch.nominal_bandwidth(W))
    return list(seen.values())


# ----------------------------------------------------------------------------------------- corpus


@lru_cache(maxsize=1)
def _corpus_rows_cached() -> tuple[str, ...]:
    lines: list[str] = []
    for stage in STAGES:
        scans = generate_scans(
            stage.channel_defs(), stage.num_instances, stage.seed, stage.generator_params()
        )
        for k, scan in enumerate(scans):
            row = {"scan_idx": stage.start + k, "stage_idx": stage.stage_idx, "variant_id": stage.variant_id}
            row.update(scan)
            lines.append(json.dumps(row, separators=(",", ":")))
    return tuple(lines)


def build_corpus() -> list[dict[str, Any]]:
    """The 90 corpus rows (A.4), generated in memory. Returns fresh dicts (safe to mutate)."""
    return [json.loads(line) for line in _corpus_rows_cached()]


def corpus_bytes(rows: Sequence[dict[str, Any]] | None = None) -> bytes:
    """Compact JSONL of the corpus: one row per line, ``"\\n"`` separators, one trailing newline."""
    if rows is None:
        lines = list(_corpus_rows_cached())
    else:
        lines = [json.dumps(r, separators=(",", ":")) for r in rows]
    return ("\n".join(lines) + "\n").encode("utf-8")


def metadata_dict(jsonl_sha256: str | None = None) -> dict[str, Any]:
    if jsonl_sha256 is None:
        jsonl_sha256 = hashlib.sha256(corpus_bytes()).hexdigest()
    return {
        "task_name": TASK_NAME,
        "schema_version": SCHEMA_VERSION,
        "corpus_id": CORPUS_ID,
        "total_scans": TOTAL_SCANS,
        "rollout_schedule_id": SCHEDULE_ID,
        "variant_id": None,
        "jsonl_sha256": jsonl_sha256,
        "stages": [
            {
                "stage_idx": s.stage_idx,
                "variant_id": s.variant_id,
                "label": s.label,
                "num_instances": s.num_instances,
                "start_scan_idx": s.start,
                "end_scan_idx": s.end,
                "seed": s.seed,
                "dgp_params": s.dgp_params(),
            }
            for s in STAGES
        ],
    }


def metadata_bytes() -> bytes:
    return (json.dumps(metadata_dict(), indent=2) + "\n").encode("utf-8")


class CorpusContractError(ValueError):
    """The corpus file on disk violates the upstream load contract (A.4)."""


def load_corpus(path: str | Path, metadata_path: str | Path | None = None) -> list[dict[str, Any]]:
    """Read a ``mixed_grid_lifecycle`` JSONL file and enforce the load contract (A.4): the file must exist,
    its sha256 must equal the metadata's ``jsonl_sha256``, the row count must equal ``total_scans``, the
    task name, stage count, variant ids and stage sizes must match the ``default`` schedule."""
    path = Path(path)
    if not path.is_file():
        raise CorpusContractError(
            f"corpus file {path} is missing; the default schedule requires it "
            "(write it with `rftlab spectrum corpus --out FILE`)"
        )
    meta_path = Path(metadata_path) if metadata_path else path.with_name(path.stem + "_metadata.json")
    if not meta_path.is_file():
        raise CorpusContractError(f"corpus metadata {meta_path} is missing")
    meta = json.loads(meta_path.read_text())
    data = path.read_bytes()
    if meta.get("task_name") != TASK_NAME:
        raise CorpusContractError(f"{meta_path}: task_name {meta.get('task_name')!r} != {TASK_NAME!r}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != meta.get("jsonl_sha256"):
        raise CorpusContractError(
            f"{path}: sha256 {digest} does not match jsonl_sha256 {meta.get('jsonl_sha256')} in {meta_path}"
        )
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    if len(rows) != meta.get("total_scans") or len(rows) != TOTAL_SCANS:
        raise CorpusContractError(
            f"{path}: {len(rows)} rows, metadata says {meta.get('total_scans')}, schedule needs {TOTAL_SCANS}"
        )
    stages = meta.get("stages") or []
    if len(stages) != len(STAGES):
        raise CorpusContractError(f"{meta_path}: {len(stages)} stages, schedule has {len(STAGES)}")
    for got, want in zip(stages, STAGES, strict=True):
        if got.get("variant_id") != want.variant_id or got.get("num_instances") != want.num_instances:
            raise CorpusContractError(
                f"{meta_path}: stage {want.stage_idx} is {got.get('variant_id')}×{got.get('num_instances')}, "
                f"schedule needs {want.variant_id}×{want.num_instances}"
            )
    return rows


# ------------------------------------------------------------------------------------ run orders


def run_order(run_index: int) -> list[int]:
    """Corpus indices in the order run ``r`` presents them (A.5): r = 0 is corpus order; r >= 1 shuffles
    each stage slice in place, stage 1 then 2 then 3, with one ``random.Random(42 + r)``."""
    if run_index < 0:
        raise ValueError(f"run index must be >= 0, got {run_index}")
    order = list(range(TOTAL_SCANS))
    if run_index == 0:
        return order
    rng = random.Random(TASK_SEED + run_index)
    for stage in STAGES:
        part = order[stage.start : stage.end]
        rng.shuffle(part)
        order[stage.start : stage.end] = part
    return order
