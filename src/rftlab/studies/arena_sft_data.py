"""The arena SFT data, built and checked (part of the ``rftlab.studies.arena`` driver).

``build_sft`` writes the data once and checks its Stage-1 digests (``rftlab arena build-sft``).
``build_sft_data`` builds it twice, audits it, and audits a copy with one changed byte (notebook
``05_arena``'s sections 1 and 2). ``Clock`` times each step for the build log.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rftlab.analysis.arena.audit import AuditReport
from rftlab.rollout.arena.sft_data import SftConfig

T = TypeVar("T")


class Clock:
    """Wall time per step, for the build log (durations are not results)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def timed(self, label: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds[label] = time.perf_counter() - started


@dataclass(frozen=True)
class Stage1Digest:
    """How a build's structural digests compare with the Stage-1 values (docs/arena.md §9.6)."""

    is_stage1: bool
    """the build used the Stage-1 configuration"""
    digest_match: bool
    """every structural digest equals the seed's Stage-1 value"""

    @property
    def verdict(self) -> str | None:
        """``MATCH`` or ``MISMATCH`` for a Stage-1 build; ``None`` for another configuration."""
        if not self.is_stage1:
            return None
        return "MATCH" if self.digest_match else "MISMATCH"

    @property
    def exit_code(self) -> int:
        """1 for a Stage-1 build whose digests differ from the seed's, else 0."""
        return 1 if self.verdict == "MISMATCH" else 0


def stage1_digest(config: SftConfig, manifest: Mapping[str, Any]) -> Stage1Digest:
    """Compare a build's manifest with the Stage-1 structural digests (none recorded: no match)."""
    from rftlab.rollout.arena.sft_data import STAGE1_CONFIG, STAGE1_STRUCTURAL_SHA256

    digests = manifest.get("structural_sha256")
    return Stage1Digest(config == STAGE1_CONFIG, digests == STAGE1_STRUCTURAL_SHA256)


@dataclass(frozen=True)
class SftBuild:
    """The SFT data written by ``build_sft``: its manifest and its Stage-1 digest check."""

    manifest: dict[str, Any]
    digest: Stage1Digest


def build_sft(out: str | Path, config: SftConfig) -> SftBuild:
    """Write the SFT data of ``config`` into ``out`` and check its structural digests."""
    from rftlab.rollout.arena.sft_data import write_dataset

    manifest = write_dataset(out, config)
    return SftBuild(manifest, stage1_digest(config, manifest))


@dataclass(frozen=True)
class SftDataCheck:
    """The built SFT data and its audit (the notebook's sections 1 and 2)."""

    config: SftConfig
    is_stage1: bool
    manifest: dict[str, Any]
    rebuild_identical: bool
    """the second build gave byte-identical files"""
    digest_match: bool
    """the structural digest equals the seed's Stage-1 value"""
    inputs: list[dict[str, str]]
    """the seed's immutable inputs against this build (``immutable_inputs``)"""
    audit: AuditReport
    tamper_position: int
    """the byte of ``validation.jsonl`` changed in the tampered copy"""
    tamper_audit: AuditReport

    @property
    def unmet_inputs(self) -> list[str]:
        return [r["item"] for r in self.inputs if r["met"] != "yes"]


def build_sft_data(work: Path, config: SftConfig, clock: Clock | None = None) -> SftDataCheck:
    """Build the data twice in ``work``, audit it, and audit a copy with one changed byte."""
    from rftlab.analysis.arena.audit import audit_dataset, write_audit
    from rftlab.analysis.arena.handoff import immutable_inputs
    from rftlab.rollout.arena.sft_data import write_dataset

    clock = clock or Clock()
    built = clock.timed("build", build_sft, work / "data", config)
    manifest, is_stage1 = built.manifest, built.digest.is_stage1
    write_dataset(work / "data_rebuild", config)
    identical = all(
        (work / "data" / name).read_bytes() == (work / "data_rebuild" / name).read_bytes()
        for name in [*manifest["files"], "manifest.json"]
    )
    audit = clock.timed("audit", audit_dataset, work / "data", require_split_action_coverage=is_stage1)
    write_audit(audit, work / "data" / "audit.json")  # what `rftlab arena audit` writes; the handoff reads it
    tampered = work / "data_tampered"
    shutil.copytree(work / "data", tampered)
    raw = bytearray((tampered / "validation.jsonl").read_bytes())
    position = len(raw) // 2
    raw[position] = ord("7") if raw[position] != ord("7") else ord("8")
    (tampered / "validation.jsonl").write_bytes(bytes(raw))
    return SftDataCheck(
        config=config,
        is_stage1=is_stage1,
        manifest=manifest,
        rebuild_identical=identical,
        digest_match=built.digest.digest_match,
        inputs=immutable_inputs(manifest),
        audit=audit,
        tamper_position=position,
        tamper_audit=audit_dataset(tampered),
    )
