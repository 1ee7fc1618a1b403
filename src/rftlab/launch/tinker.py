"""What every family's ``tinker`` backend shares: where it runs, the service client, the model's context,
and launching an arm spec into the run store (``launch_tinker_arm``). The families' launchers
(``rftlab.launch.spectrum.tinker``, ``rftlab.launch.poker.tinker``) map their arm specs onto the generic
trainer ``rftlab.training.tinker_rl``; docs/spectrum.md, "Training through the Tinker API".

Where it runs (``tinker_target``, ``rftlab.training.tinker_target``): ``TINKER_BASE_URL`` set → that server (``rftlab serve tinker``, or another
Tinker-API backend) through the ``tinker`` SDK; else ``TINKER_API_KEY`` set → hosted Tinker; else the
in-process ``LocalServiceClient`` (checkpoints beside the run store, one folder per family). The session is
closed at the end as GS1's are (``closing_session``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rftlab.runs.store import RunStore, load_run
from rftlab.training.sessions import closing_session
from rftlab.training.tinker_target import sdk_service_client, tinker_target
from rftlab.types import RunRef, RunStatus

TINKER_MODELS = {
    "accounts/fireworks/models/qwen3-1p7b": "Qwen/Qwen3-1.7B",
    "accounts/fireworks/models/qwen3-8b": "Qwen/Qwen3-8B",
}
"""A Fireworks base model → the same model's name on Tinker."""


def base_model_for(fireworks_model: str | None, default: str, target: str) -> str:
    """The arm's base model on ``target``: the built-in ``rftlab/tiny-qwen3-agent`` unless hosted, where it
    is the Fireworks block's model (``default`` when there is none) under its Tinker name."""
    from rftlab.training.local_tinker.model import AGENT_MODEL

    if target != "hosted":
        return AGENT_MODEL
    fw = fireworks_model or default
    if fw not in TINKER_MODELS:
        raise ValueError(
            f"no Tinker name known for the base model {fw!r} (known: {', '.join(TINKER_MODELS)})"
        )
    return TINKER_MODELS[fw]


def context_window(base_model: str) -> int | None:
    """The model's positions when they are known here (a built-in model or a local model directory)."""
    from rftlab.training.local_tinker.model import BUILTIN_MODELS

    if base_model in BUILTIN_MODELS:
        return BUILTIN_MODELS[base_model].max_position_embeddings
    config = Path(base_model) / "config.json"
    if config.is_file():
        value = json.loads(config.read_text(encoding="utf-8")).get("max_position_embeddings")
        return int(value) if value else None
    return None


def local_storage_dir(root: Path | str, family: str) -> Path:
    """Where the in-process backend keeps ``family``'s checkpoints for the run store at ``root``: beside it,
    hidden, as GS1's (``.<root>_local_tinker/<family>``)."""
    resolved = Path(root).resolve()
    return resolved.parent / f".{resolved.name}_local_tinker" / family


def make_service(root: Path | str, target: str | None = None, family: str = "spectrum") -> Any:
    """The ``ServiceClient`` of ``target`` (``tinker_target()`` by default)."""
    target = target or tinker_target()
    if target == "local":
        from rftlab.training.local_tinker import LocalServiceClient

        return LocalServiceClient(storage_dir=local_storage_dir(root, family))
    return sdk_service_client()


def poll_run(run: RunRef) -> RunStatus:
    """A run's status from its folder: epochs on record out of the trainer's epochs; never raises."""
    try:
        loaded = load_run(run.path)
        done = len({int(r["epoch"]) for r in loaded.metrics()})
    except Exception as exc:  # a poll never raises for a bad folder
        return RunStatus("failed", message=f"cannot read {run.path}: {exc}")
    total = (loaded.record.provider.get("trainer") or {}).get("epochs") or loaded.record.spec.get("epochs")
    state = {"running": "running", "finished": "completed", "failed": "failed"}[loaded.record.status]
    return RunStatus(state, progress=done, total=total, message=loaded.record.error or "")


def launch_tinker_arm(
    spec: Any,
    config: Any,
    train: Callable[..., Any],
    *,
    family: str,
    root: Path | str,
    resume: bool = True,
    force: bool = False,
    service: Any = None,
    target: str | None = None,
    progress: bool | None = None,
    close_session: bool = True,
    backend: str = "tinker",
    plan_sha256: str | None = None,
    provenance: dict[str, Any] | None = None,
) -> RunRef:
    """Reuse a finished run of the same spec and trainer config, resume an unfinished one after its last
    finished epoch, or train a new one with ``train(config, run, service, progress=...)``; blocks until
    training is done. ``service`` ``None``: ``make_service`` of ``target``. ``provenance`` is recorded in a new
    run's ``provider`` (the ``--set`` overrides that made the spec)."""
    target = target or ("given" if service is not None else tinker_target())
    store = RunStore(root)
    run, origin = store.start_or_reuse(
        spec.experiment,
        spec.arm,
        spec.to_dict(),
        backend=backend,
        force=force,
        resume=resume,
        plan_sha256=plan_sha256,
    )
    if origin != "new" and run.record.provider.get("trainer") != config.to_dict():
        # made with other settings (model, max tokens, trainer version): start afresh
        run = store.create_run(
            spec.experiment, spec.arm, spec.to_dict(), backend=backend, plan_sha256=plan_sha256
        )
        origin = "new"
    if origin == "new":
        run.set_provider(trainer=config.to_dict(), target=target, simulation=False, **(provenance or {}))
    if not run.finished:
        service = service if service is not None else make_service(root, target, family)
        show = progress if progress is not None else sys.stderr.isatty()
        say = (lambda msg: print(f"{spec.arm}: {msg}", file=sys.stderr, flush=True)) if show else None
        if close_session:
            with closing_session(service, detail=f"{family} arm {spec.arm}"):
                train(config, run, service, progress=say)
        else:
            train(config, run, service, progress=say)
    return RunRef(spec.experiment, spec.arm, run.run_id, run.path, backend)


class TinkerArmLauncher:
    """A family's ``rftlab.types.Launcher`` for backend ``tinker``: ``service`` replaces the target's client
    (a test's ``LocalServiceClient`` or SDK client); ``base_model`` and ``overrides`` set the model and
    implementation settings. A family names itself (``family``) and gives ``train`` (its trainer),
    ``trainer_config(spec, base_model, **overrides)`` and ``default_base_model(spec, target)``."""

    backend = "tinker"
    family: str
    # the family's hooks, set by each subclass (as staticmethods)
    train: Callable[..., Any]
    trainer_config: Callable[..., Any]
    default_base_model: Callable[[Any, str], str]

    def __init__(
        self,
        progress: bool | None = None,
        *,
        service: Any = None,
        base_model: str | None = None,
        close_session: bool = True,
        **overrides: Any,
    ):
        self.progress = progress
        self.service = service
        self.base_model = base_model
        self.close_session = close_session
        self.overrides = overrides

    def launch(
        self,
        spec: Any,
        *,
        root: Path | str = "runs",
        resume: bool = True,
        force: bool = False,
        plan_sha256: str | None = None,
    ) -> RunRef:
        """Reuse a finished run of the same spec, resume an unfinished one after its last finished epoch, or
        train a new one; blocks until training is done. ``plan_sha256``: the governing plan's hash, recorded
        in a new run's ``run.json``."""
        target = "given" if self.service is not None else tinker_target()
        base_model = self.base_model or self.default_base_model(spec, target)
        config = self.trainer_config(spec, base_model, **self.overrides)
        return launch_tinker_arm(
            spec,
            config,
            self.train,
            family=self.family,
            root=root,
            resume=resume,
            force=force,
            service=self.service,
            target=target,
            progress=self.progress,
            close_session=self.close_session,
            backend=self.backend,
            plan_sha256=plan_sha256,
            provenance=getattr(self, "provenance", None),
        )
