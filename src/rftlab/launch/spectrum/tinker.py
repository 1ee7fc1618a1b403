"""The ``tinker`` backend: an arm spec → GRPO of a language model through the Tinker API
(``rftlab.training.spectrum.tinker_rl``), a run in the run store. docs/spectrum.md, "Training through the
Tinker API".

``trainer_config(spec, base_model)`` maps the arm spec's own fields: ``response_candidates`` (group size),
``epochs``, ``learning_rate`` (a LoRA rate, used as is), ``temperature``, ``advantage``, ``seed`` and the task
fields; ``fireworks.max_output_tokens`` (max tokens per reply) and ``fireworks.lora_rank`` (32 when unset or
when the arm has no Fireworks block); the base model is the Fireworks block's, named as on Tinker
(``TINKER_MODELS``), except on a local target, where it is the built-in ``rftlab/tiny-qwen3-agent``.

Where it runs (``tinker_target``): ``TINKER_BASE_URL`` set → that server (``rftlab serve tinker``, or another
Tinker-API backend) through the ``tinker`` SDK; else ``TINKER_API_KEY`` set → hosted Tinker; else the
in-process ``LocalServiceClient`` (checkpoints beside the run store). The session is closed at the end as
GS1's are (``closing_session``).

    TinkerLauncher().launch(load_arm_spec("data/specs/spectrum_C.json"), root="runs")
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from rftlab.launch.spectrum.local import DEFAULT_BATCH_ROWS, LocalLauncher, default_row_prefix
from rftlab.launch.spectrum.spec import SpectrumArmSpec
from rftlab.runs.store import RunStore
from rftlab.training.sessions import closing_session
from rftlab.training.spectrum.cookbook_env import SpectrumCookbookConfig
from rftlab.training.spectrum.tinker_rl import DEFAULT_LORA_RANK, SpectrumTinkerConfig, train_spectrum_tinker
from rftlab.types import RunRef

TINKER_MODELS = {
    "accounts/fireworks/models/qwen3-1p7b": "Qwen/Qwen3-1.7B",
    "accounts/fireworks/models/qwen3-8b": "Qwen/Qwen3-8B",
}
"""A Fireworks base model → the same model's name on Tinker."""
LOCAL_KEY = "tml-rftlab-local"
"""The key sent to a ``TINKER_BASE_URL`` server when ``TINKER_API_KEY`` is unset (``rftlab serve tinker``
then accepts any ``tml-`` key)."""


def tinker_target() -> str:
    """``"url"`` (``TINKER_BASE_URL``), ``"hosted"`` (``TINKER_API_KEY``) or ``"local"`` (in process)."""
    if os.environ.get("TINKER_BASE_URL"):
        return "url"
    return "hosted" if os.environ.get("TINKER_API_KEY") else "local"


def default_base_model(spec: SpectrumArmSpec, target: str) -> str:
    """The arm's base model on ``target`` (module docstring)."""
    from rftlab.training.local_tinker.model import AGENT_MODEL

    if target != "hosted":
        return AGENT_MODEL
    fw = spec.fireworks.base_model if spec.fireworks else "accounts/fireworks/models/qwen3-1p7b"
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


def trainer_config(spec: SpectrumArmSpec, base_model: str, **overrides: Any) -> SpectrumTinkerConfig:
    """The Tinker trainer's config for an arm spec; ``overrides`` set implementation settings
    (``max_tokens``, ``batch_rows``, ``think``, ``renderer_name``, ``context_window``)."""
    task_keys = ("batch_rows", "think", "renderer_name", "fewshot")
    task_over = {k: overrides.pop(k) for k in task_keys if k in overrides}
    task = SpectrumCookbookConfig.from_arm_spec(
        spec,
        base_model=base_model,
        row_prefix=spec.row_prefix or default_row_prefix(spec.prompt, spec.memory),
        batch_rows=task_over.pop("batch_rows", min(DEFAULT_BATCH_ROWS, spec.rows)),
        **task_over,
    )
    fw = spec.fireworks
    values: dict[str, Any] = {
        "task": task,
        "epochs": spec.epochs,
        "learning_rate": spec.learning_rate,
        "max_tokens": fw.max_output_tokens if fw else 4096,
        "lora_rank": (fw.lora_rank if fw and fw.lora_rank else DEFAULT_LORA_RANK),
        "advantage": spec.advantage,
        "context_window": context_window(base_model),
    }
    values.update(overrides)
    return SpectrumTinkerConfig(**values)


def local_storage_dir(root: Path | str) -> Path:
    """Where the in-process backend keeps this family's checkpoints for the run store at ``root``: beside it,
    hidden, as GS1's (``.<root>_local_tinker/spectrum``)."""
    resolved = Path(root).resolve()
    return resolved.parent / f".{resolved.name}_local_tinker" / "spectrum"


def make_service(root: Path | str, target: str | None = None) -> Any:
    """The ``ServiceClient`` of ``target`` (``tinker_target()`` by default)."""
    target = target or tinker_target()
    if target == "local":
        from rftlab.training.local_tinker import LocalServiceClient

        return LocalServiceClient(storage_dir=local_storage_dir(root))
    import tinker

    if target == "url":
        return tinker.ServiceClient(api_key=os.environ.get("TINKER_API_KEY") or LOCAL_KEY)
    return tinker.ServiceClient()


class TinkerLauncher(LocalLauncher):
    """``rftlab.types.Launcher`` for backend ``tinker`` (module docstring). ``service`` replaces the target's
    client (a test's ``LocalServiceClient`` or SDK client); ``base_model`` and ``overrides`` set the model
    and implementation settings."""

    backend = "tinker"

    def __init__(
        self,
        progress: bool | None = None,
        *,
        service: Any = None,
        base_model: str | None = None,
        close_session: bool = True,
        **overrides: Any,
    ):
        super().__init__(progress=progress)
        self.service = service
        self.base_model = base_model
        self.close_session = close_session
        self.overrides = overrides

    def launch(
        self, spec: SpectrumArmSpec, *, root: Path | str = "runs", resume: bool = True, force: bool = False
    ) -> RunRef:
        """Reuse a finished run of the same spec, resume an unfinished one after its last finished epoch, or
        train a new one; blocks until training is done."""
        target = "given" if self.service is not None else tinker_target()
        base_model = self.base_model or default_base_model(spec, target)
        config = trainer_config(spec, base_model, **self.overrides)
        store = RunStore(root)
        run, origin = store.start_or_reuse(
            spec.experiment, spec.arm, spec.to_dict(), backend=self.backend, force=force, resume=resume
        )
        if origin != "new" and run.record.provider.get("trainer") != config.to_dict():
            # made with other settings (model, max tokens, trainer version): start afresh
            run = store.create_run(spec.experiment, spec.arm, spec.to_dict(), backend=self.backend)
            origin = "new"
        if origin == "new":
            run.set_provider(trainer=config.to_dict(), target=target, simulation=False)
        if not run.finished:
            service = self.service if self.service is not None else make_service(root, target)
            show = self.progress if self.progress is not None else sys.stderr.isatty()
            say = (lambda msg: print(f"{spec.arm}: {msg}", file=sys.stderr, flush=True)) if show else None
            if self.close_session:
                with closing_session(service, detail=f"spectrum arm {spec.arm}"):
                    train_spectrum_tinker(config, run, service, progress=say)
            else:
                train_spectrum_tinker(config, run, service, progress=say)
        return RunRef(spec.experiment, spec.arm, run.run_id, run.path, self.backend)
