"""The ``local`` backend: an arm spec → a local GRPO run of the **simulated** policy in the run store.

``trainer_config(spec)`` maps a ``SpectrumArmSpec`` onto the trainer's own config. Everything carries
over unchanged except the learning rate: the spec's rate is an LLM LoRA rate (1e-4 in the seed), which
has no meaning for the simulated policy's seven parameters, so it is multiplied by
``SIMULATED_LR_SCALE`` (1e-4 → 1e-2; the probe's 1e-9 stays effectively zero). Both rates are recorded
in ``run.json`` (``provider.trainer``).

    launcher = LocalLauncher()
    ref = launcher.launch(load_arm_spec("data/specs/spectrum_C.json"), root="runs")
    launcher.poll(ref)            # RunStatus(state="completed", progress=12, total=12)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.runs.store import RunStore, load_run
from rftlab.training.spectrum.grpo import SIMULATOR_VERSION, SpectrumGRPOConfig, train_spectrum_grpo
from rftlab.types import RunRef, RunStatus

SIMULATED_LR_SCALE = 100.0
DEFAULT_BATCH_ROWS = 8
_PREFIXES = {
    ("explicit", "echo"): "sc1",
    ("explicit", "scrambled"): "sc1",
    ("weak", "echo"): "sc2",
    ("weak", "scrambled"): "sc2",
    ("explicit", "notepad"): "spectrum",
    ("weak", "notepad"): "spectrum",
    ("explicit", "none"): "nm1",
    ("weak", "none"): "nm2",
}


def default_row_prefix(prompt: str, memory: str) -> str:
    """The dataset's row-id prefix for (prompt, memory): ``sc1``/``sc2`` (explicit/weak scaffold; the
    scrambled control shares its prompt's rows), ``spectrum`` (notepad), ``nm1``/``nm2`` (no memory)."""
    return _PREFIXES[(prompt, memory)]


def trainer_config(spec: SpectrumArmSpec, **overrides: Any) -> SpectrumGRPOConfig:
    """The local trainer's config for an arm spec (``overrides`` for implementation settings only)."""
    values: dict[str, Any] = {
        "prompt": spec.prompt,
        "memory": spec.memory,
        "rows": spec.rows,
        "row_prefix": spec.row_prefix or default_row_prefix(spec.prompt, spec.memory),
        "num_scans": spec.num_scans,
        "epoch_salt": spec.epoch_salt,
        "notepad_write_cost": spec.notepad_write_cost,
        "epochs": spec.epochs,
        "candidates": spec.response_candidates,
        "learning_rate": spec.learning_rate * SIMULATED_LR_SCALE,
        "temperature": spec.temperature,
        "advantage": spec.advantage,
        "seed": spec.seed,
        "batch_rows": min(DEFAULT_BATCH_ROWS, spec.rows),
    }
    values.update(overrides)
    return SpectrumGRPOConfig(**values)


class LocalLauncher:
    """``rftlab.types.Launcher`` for backend ``local``: runs the simulated-policy GRPO in-process."""

    backend = "local"
    # recorded in a new run's ``provider`` (for example the ``--set`` overrides that made the spec)
    provenance: dict[str, Any] = {}

    def __init__(self, progress: bool | None = None, **trainer_overrides: Any):
        self.progress = progress
        self.trainer_overrides = trainer_overrides

    def launch(
        self,
        spec: SpectrumArmSpec,
        *,
        root: Path | str = "runs",
        resume: bool = True,
        force: bool = False,
        plan_sha256: str | None = None,
    ) -> RunRef:
        """Reuse a finished run of the same spec (and simulator version), resume an unfinished one, or
        train a new one; returns where it lives. Blocks until training is done (it takes seconds).
        ``plan_sha256``: the governing plan's hash, recorded in a new run's ``run.json``."""
        store = RunStore(root)
        config = trainer_config(spec, **self.trainer_overrides)
        spec_dict = spec.to_dict()
        run, origin = store.start_or_reuse(
            spec.experiment,
            spec.arm,
            spec_dict,
            backend=self.backend,
            force=force,
            resume=resume,
            plan_sha256=plan_sha256,
        )
        if run.record.provider.get("trainer") not in (None, config.to_dict()):
            if origin == "reused" or origin == "resumed":  # made by another simulator / mapping: start afresh
                run = store.create_run(
                    spec.experiment, spec.arm, spec_dict, backend=self.backend, plan_sha256=plan_sha256
                )
                origin = "new"
        if origin == "new":
            run.set_provider(
                trainer=config.to_dict(), simulator=SIMULATOR_VERSION, simulation=True, **self.provenance
            )
        if not run.finished:
            train_spectrum_grpo(config, run, progress=self.progress)
        return RunRef(spec.experiment, spec.arm, run.run_id, run.path, self.backend)

    def poll(self, run: RunRef) -> RunStatus:
        try:
            loaded = load_run(run.path)
            done = len({int(r["epoch"]) for r in loaded.metrics()})
        except Exception as exc:  # a poll never raises for a bad folder
            return RunStatus("failed", message=f"cannot read {run.path}: {exc}")
        total = (loaded.record.provider.get("trainer") or {}).get("epochs") or loaded.record.spec.get(
            "epochs"
        )
        state = {"running": "running", "finished": "completed", "failed": "failed"}[loaded.record.status]
        return RunStatus(state, progress=done, total=total, message=loaded.record.error or "")
