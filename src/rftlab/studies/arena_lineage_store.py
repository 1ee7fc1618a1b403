"""The run-store side of an arena Stage-1 lineage (part of the ``rftlab.studies.arena`` driver).

``Stage1Result`` is what a lineage did. ``_Lineage`` reads and writes its stage runs, keyed by the lineage
id. The lineage key names the spec, the data and the gate spec, so an equivalent lineage is found again.
A finished lineage is read back (``_read_back``), never rerun.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.runs import atomic_write_text

STAGES: tuple[tuple[int, str, str], ...] = (
    (1, "base_eval", "base model on the frozen cases"),
    (2, "overfit", "overfit check"),
    (3, "train", "LoRA SFT with validation measurements"),
    (4, "selection", "selection on validation"),
    (5, "final_eval", "selected checkpoint on test and the frozen cases, once"),
    (6, "compare", "base vs SFT comparison and gates G1-G7"),
)


@dataclass
class Stage1Result:
    """What a Stage-1 run did: the lineage record (``lineage.json``) and every stage's outputs that exist."""

    lineage: dict[str, Any]
    runs: dict[str, str] = field(default_factory=dict)
    base_summary: dict[str, Any] | None = None
    overfit: dict[str, Any] | None = None
    training_metrics: list[dict[str, Any]] = field(default_factory=list)
    measurements: list[dict[str, Any]] = field(default_factory=list)
    selection: dict[str, Any] | None = None
    final_summary: dict[str, Any] | None = None
    test_summary: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None
    gates: dict[str, Any] | None = None

    @property
    def stopped_at(self) -> int | None:
        return self.lineage.get("stopped_at")


def balanced_prefix(rows: Sequence[Mapping[str, Any]], count: int | None) -> list[Mapping[str, Any]]:
    """All rows (``None``), or a phase-balanced prefix: the first ``count`` rows in file order with at
    most ⌈count/2⌉ of each phase while both last (so a small size still scores both phases)."""
    if count is None or count >= len(rows):
        return list(rows)
    acts = [r for r in rows if r["metadata"]["phase"] == "ACT"]
    broadcasts = [r for r in rows if r["metadata"]["phase"] == "BROADCAST"]
    n_act = min(len(acts), max(count - len(broadcasts), (count + 1) // 2))
    return acts[:n_act] + broadcasts[: count - n_act]


class _Lineage:
    """The run-store side of one lineage: stage runs keyed by the lineage id, files written atomically."""

    def __init__(
        self,
        store: Any,
        experiment: str,
        lineage_id: str,
        backend: str,
        progress,
        plan_sha256: str | None = None,
    ):
        self.store, self.experiment, self.id, self.backend = store, experiment, lineage_id, backend
        self.plan_sha256 = plan_sha256  # the gate spec's: it governs the lineage's gates (new runs record it)
        self.aliases: set[str] = set()  # ids of equivalent lineages (see _equivalent_lineages)
        self.progress = progress or (lambda message: None)

    def stage(self, arm: str, spec: Mapping[str, Any]) -> tuple[Any, bool]:
        """``(run, reused)`` of a stage: a finished run of the same stage spec is reused."""
        run, origin = self.open_stage(arm, spec)
        return run, origin == "reused"

    def open_stage(self, arm: str, spec: Mapping[str, Any], resume: bool = False) -> tuple[Any, str]:
        """``(run, origin)`` of a stage: a finished run of the same stage spec is ``"reused"``; with
        ``resume`` an unfinished one is ``"resumed"``; else a ``"new"`` run."""
        run, origin = self.store.start_or_reuse(
            self.experiment,
            arm,
            {"lineage": self.id, "stage": arm, **spec},
            backend=self.backend,
            resume=resume,
            plan_sha256=self.plan_sha256,
        )
        self.progress(f"stage {arm}: {'' if origin == 'new' else origin + ' '}{run.path}")
        return run, origin

    @staticmethod
    def write(run: Any, name: str, text: str) -> None:
        path = run.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)

    @staticmethod
    def read(run: Any, name: str) -> Any:
        path = run.path / name
        if name.endswith(".jsonl"):
            return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        return json.loads(path.read_text(encoding="utf-8"))

    def finish(self, run: Any, work: Callable[[], None]) -> None:
        """Run ``work`` on a new stage run and mark it finished, or failed (and re-raise) on an error."""
        with run.working():
            work()

    @staticmethod
    def finish_resumable(run: Any, work: Callable[[], None]) -> None:
        """Run ``work`` and mark the run finished; an error or an interruption leaves it unfinished (and
        released), so the next call of the lineage resumes it from its last checkpoint."""
        with run.working(resumable=True):
            work()


def _resume_point(run: Any) -> tuple[list[dict[str, Any]], Any, set[int]]:
    """What an interrupted training run left: ``(measurements, last checkpoint or None, recorded steps)``;
    the checkpoint is the last measured one with a saved state (``None``: nothing to continue from)."""
    from rftlab.training.arena.stage1 import Checkpoint

    measured = (run.path / "validation.jsonl").exists()
    measurements = _Lineage.read(run, "validation.jsonl") if measured else []
    recorded = {int(row["step"]) for row in run.metrics()}
    last = measurements[-1] if measurements else None
    if last is None or not last.get("state_path"):
        return measurements, None, recorded
    return measurements, Checkpoint(last["step"], last["sampler_path"], last["state_path"]), recorded


def _data_identity(data_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from rftlab.analysis.arena.handoff import HandoffError, read_manifest, verify_files
    from rftlab.training.arena.stage1 import Stage1Error

    try:
        manifest = read_manifest(data_dir)
        verify_files(data_dir, manifest)
    except HandoffError as exc:
        raise Stage1Error(str(exc)) from None
    identity = {
        "content_sha256": manifest.get("content_sha256"),
        "structural_sha256": (manifest.get("structural_sha256") or {}).get("all"),
        "files": manifest["files"],
    }
    return manifest, identity


def _lineage_key(
    spec: Any, data: Path, gate_path: Path, backend: str, base_model: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(data manifest, lineage key)``: what decides a lineage's results (the spec's recipe, sizes and
    cases, never its name or description; the data's hashes, the gate spec's hash, the backend and the
    base model); its SHA-256 prefix is the lineage id."""
    from rftlab.analysis.arena.gates import load_gate_spec
    from rftlab.training.arena.stage1 import Stage1Error

    try:
        _, gate_sha = load_gate_spec(gate_path)
    except ValueError as exc:
        raise Stage1Error(str(exc)) from None
    manifest, data_identity = _data_identity(data)
    key = {
        "spec": spec.result_identity(),
        "data": data_identity,
        "gate_spec_sha256": gate_sha,
        "backend": backend,
        "base_model": base_model or spec.base_model,
    }
    return manifest, key


def _equivalent_lineages(store: Any, experiment: str, key: Mapping[str, Any], lineage_id: str) -> list[Any]:
    """The experiment's other lineage runs with the same results-deciding key: records written before
    the key left out the spec's documentation fields (their key holds the raw spec). Their test
    evaluation counts as this lineage's (never evaluated a second time); a finished one is read back."""
    from rftlab.training.arena.stage1 import Stage1Spec

    same = []
    for run in store.runs(experiment, "lineage"):
        recorded = run.record.spec
        try:
            identity = Stage1Spec.model_validate(recorded["spec"], strict=True).result_identity()
        except (KeyError, TypeError, ValueError):
            identity = recorded.get("spec") if isinstance(recorded, dict) else None
        if {**recorded, "spec": identity} == dict(key) and run.record.spec_sha256[:16] != lineage_id:
            same.append(run)
    return same


def _lineage_run(lineage: _Lineage, key: Mapping[str, Any]) -> tuple[Any, str]:
    """``(lineage run, origin)``: a finished equivalent lineage recorded under an older key is
    ``"reused"``; else the run store's answer for ``key``. Notes the older ids in ``lineage.aliases``."""
    older = _equivalent_lineages(lineage.store, lineage.experiment, key, lineage.id)
    lineage.aliases = {run.record.spec_sha256[:16] for run in older}
    done = [run for run in older if run.record.status == "finished"]
    if done:
        return done[-1], "reused"
    return lineage.store.start_or_reuse(
        lineage.experiment, "lineage", key, backend=lineage.backend, plan_sha256=lineage.plan_sha256
    )


def _read_back(store: Any, experiment: str, lineage: dict[str, Any]) -> Stage1Result:
    """A finished lineage's result from its stage runs (nothing is evaluated again)."""
    from rftlab.runs import load_run

    result = Stage1Result(lineage=lineage)
    for arm, info in lineage["stages"].items():
        run = load_run(info["path"])
        result.runs[arm] = info["path"]
        if arm == "base_eval":
            result.base_summary = _Lineage.read(run, "summary.json")
        elif arm == "overfit":
            result.overfit = _Lineage.read(run, "overfit.json")
        elif arm == "train":
            result.measurements = _Lineage.read(run, "validation.jsonl")
            result.training_metrics = run.metrics()
        elif arm == "selection":
            result.selection = _Lineage.read(run, "selection.json")
        elif arm == "final_eval":
            summary = _Lineage.read(run, "summary.json")
            result.final_summary, result.test_summary = summary, summary.get("test")
        elif arm == "compare":
            result.comparison = _Lineage.read(run, "comparison.json")
            result.gates = _Lineage.read(run, "gates.json")
    return result
