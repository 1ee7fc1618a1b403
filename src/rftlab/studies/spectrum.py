"""The spectrum-memory study: the driver the notebooks (``01_spectrum_env``, ``02_memory``) and the CLI
(``rftlab arm``, ``rftlab spectrum``) both call.

``launch_arm`` runs one arm spec on a backend (reusing a finished run of the same spec, resuming an
unfinished one), ``launch_arms`` does it for every arm of the study and returns the runs, ``arm_status``
reports the newest run of a spec. Bad input raises ``ValueError``.

The family's modules, layer by layer (``tests/test_layers.py`` keeps this list complete):

- rewards: ``rftlab.rewards.spectrum``
- envs: ``rftlab.envs.spectrum`` (bench and RFT variants)
- policies: ``rftlab.policies.spectrum`` (reference, chat adapter, simulated policy)
- rollout: ``rftlab.rollout.spectrum`` (dataset rows, eval-protocol processors and McpGym server, scoring,
  bench90 evaluation, ceilings, the offline eval runner, the endpoint check); entry modules
  ``rftlab.rollout.eval_entries.spectrum_turn``, ``rftlab.rollout.eval_entries.spectrum_mcp_eval``,
  ``rftlab.rollout.eval_entries.spectrum_mcp_server``
- training: ``rftlab.training.spectrum`` (local GRPO of the simulated policy, group rollouts, calibration)
- launch: ``rftlab.launch.spectrum`` (arm spec, preflight, local launcher)
- analysis: ``rftlab.analysis.spectrum`` (study summaries, design power, episode summaries)
- studies: ``rftlab.studies.spectrum``
- cli: ``rftlab.cli.spectrum``
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rftlab.launch import launcher_for
from rftlab.launch.spectrum.spec import SpectrumArmSpec, load_arm_spec
from rftlab.runs import Run, RunStore, load_run
from rftlab.types import RunRef, RunStatus


@dataclass(frozen=True)
class ArmLaunch:
    """What launching an arm gave: the run, its status, and whether a finished run was reused."""

    ref: RunRef
    status: RunStatus
    reused: bool


def as_spec(spec: SpectrumArmSpec | str | Path) -> SpectrumArmSpec:
    """An arm spec, read and validated from its file when given a path."""
    return spec if isinstance(spec, SpectrumArmSpec) else load_arm_spec(spec)


def launch_arm(
    spec: SpectrumArmSpec | str | Path,
    backend: str = "local",
    root: str | Path = "runs",
    resume: bool = True,
    force: bool = False,
) -> ArmLaunch:
    """Run one arm on ``backend``: reuse a finished run of the same spec, resume an unfinished one (unless
    ``resume`` is false), or start a new one (always, with ``force``)."""
    spec = as_spec(spec)
    launcher = launcher_for(backend)
    before = RunStore(root).find_run(spec.experiment, spec.arm, spec.to_dict(), "finished", backend)
    ref = launcher.launch(spec, root=root, resume=resume, **({"force": True} if force else {}))
    reused = before is not None and before.path == ref.path and not force
    return ArmLaunch(ref, launcher.poll(ref), reused)


def launch_arms(
    specs: Mapping[str, SpectrumArmSpec] | Iterable[SpectrumArmSpec | str | Path],
    backend: str = "local",
    root: str | Path = "runs",
) -> dict[str, Run]:
    """Launch (or load) every arm and return its run, keyed by arm name, in the order given."""
    items = list(specs.values()) if isinstance(specs, Mapping) else [as_spec(s) for s in specs]
    return {spec.arm: load_run(launch_arm(spec, backend, root).ref.path) for spec in items}


def arm_status(
    spec: SpectrumArmSpec | str | Path, backend: str = "local", root: str | Path = "runs"
) -> ArmLaunch:
    """The status of the newest ``backend`` run of ``spec``; ``ValueError`` when there is none."""
    label = spec.arm if isinstance(spec, SpectrumArmSpec) else str(spec)
    spec = as_spec(spec)
    runs = [
        r
        for r in RunStore(root).runs(spec.experiment, spec.arm)
        if r.record.spec_sha256 == spec.sha256() and r.record.backend == backend
    ]
    if not runs:
        raise ValueError(f"no {backend} run of {label} under {root}")
    run = max(runs, key=lambda r: (r.record.created_at, r.path.name))
    ref = RunRef(spec.experiment, spec.arm, run.run_id, run.path, backend)
    return ArmLaunch(ref, launcher_for(backend).poll(ref), reused=True)
