"""Composition of the GS1 study's backend: the one place that builds real clients.

``make_gs1_backend("tinker" | "local", spec)`` returns the service client, the renderer, the task and
the arm configs for that backend; the loop (``rftlab.training.gs1.rl_loop``) then runs the same code on
either. Nothing here runs at import time, and tests inject fakes instead of calling it for ``tinker``.

* ``tinker`` — ``tinker.ServiceClient()`` (credentials from ``TINKER_API_KEY`` only, the service from
  ``TINKER_BASE_URL``: the hosted one, or ``rftlab serve tinker`` on this machine), the spec's base
  model with the cookbook renderer named explicitly (``qwen3_5``: the spec's ``Qwen/Qwen3.5-2B`` is not in
  the cookbook's ``model_info``), GSM8K from the Hugging Face Hub, the spec's sizes; sampling requests
  carry no seed (``GS1Backend.send_seeds``). ``overrides`` may name another served model, renderer and
  ``task="local_math"`` (the offline study against a local service).
* ``local`` — the in-process tinker-compatible backend (``rftlab.training.local_tinker``) on its tiny
  Qwen3-architecture model after its supervised warm start (a merged base-model directory, built once
  and reused; both arms start fresh seed-0 LoRAs on it), the local GSM8K-style task (``rftlab.envs.gs1``) and the spec's recipe at the
  sizes in ``LOCAL_SIZES`` (steps, rollouts per step and eval items as in the spec; shorter responses).
  Checkpoints go to a folder beside the run store so a new process can resume.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rftlab.envs.gs1.task import MathTask, cookbook_math_prompt_format, gsm8k_problems, local_task
from rftlab.launch.gs1.spec import GS1Spec
from rftlab.training.gs1.rl_loop import DEFAULT_RENDERER, GS1ArmConfig
from rftlab.training.gs1.warm_start import WarmStartResult

if TYPE_CHECKING:
    from tinker_cookbook.renderers import Renderer

BACKENDS = ("local", "tinker")
LOCAL_RENDERER = "qwen3_5_disable_thinking"
LOCAL_SIZES: dict[str, Any] = {"max_tokens": 32, "eval_max_tokens": 32}
# The smoke-size warm start: enough supervised steps that the tiny model's rewards vary (an untrained one
# scores 0 everywhere and the preflight rightly stops on constant rewards).
QUICK_WARM_START: dict[str, Any] = {
    "max_steps": 120,
    "eval_every": 20,
    "eval_problems": 32,
    "target_reward": 0.25,
}
QUICK_SIZES: dict[str, Any] = {
    "steps": 2,
    "n_eval": 16,
    "n_train": 64,
    "max_tokens": 24,
    "eval_max_tokens": 24,
}


class BackendUnavailable(RuntimeError):
    """The requested backend cannot be built here (no credentials, missing component)."""


@dataclass(frozen=True)
class BackendRecipe:
    """What ``make_gs1_backend`` was called with: a worker process builds the same backend from it."""

    name: str
    spec: GS1Spec
    root: str
    quick: bool
    overrides: dict[str, Any] | None = None

    def key(self) -> str:
        """One line naming the backend; equal recipes build the same backend."""
        spec = self.spec.model_dump(mode="json")
        return json.dumps(
            [self.name, spec, self.root, self.quick, self.overrides], sort_keys=True, default=str
        )

    def build(self) -> GS1Backend:
        return make_gs1_backend(self.name, self.spec, self.root, self.quick, self.overrides)


@dataclass
class GS1Backend:
    name: str
    service_client: Any
    renderer: Renderer
    task: MathTask
    arms: dict[str, GS1ArmConfig]
    warm_start: WarmStartResult | None = None  # local backend: the supervised warm start's result
    # a seed on every sampling request (local: reproducible runs); never on the service, whose seed
    # handling is unreliable (tinker-feedback #79, tinker-cookbook #206): rl_loop.sample_requests
    send_seeds: bool = True
    # check (c) of the preflight (loss and gradient against references): a float64 twin of the local
    # service, so float32 rounding of a loss whose terms cancel decides nothing; None: service_client
    reference_client: Any = None
    # how to build this backend again in another process (make_gs1_backend sets it; None: built by hand)
    recipe: BackendRecipe | None = None


TOKENIZER_ENV = "RFTLAB_TOKENIZER"  # a local tokenizer folder for the tinker backend (no Hub access needed)
HUB_HOST = "huggingface.co"


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face Hub answers a TCP connection within ``timeout`` seconds (``False`` at
    once when ``HF_HUB_OFFLINE=1``). Without it, a tokenizer download retries for about a minute."""
    import socket

    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    try:
        with socket.create_connection((HUB_HOST, 443), timeout=timeout):
            return True
    except OSError:
        return False


def tinker_tokenizer(model_name: str, *, reachable: Callable[[], bool] = hub_reachable):
    """The base model's tokenizer for the tinker backend (the renderer needs it on this machine).

    ``$RFTLAB_TOKENIZER`` names a local tokenizer folder to use instead (e.g. one saved with
    ``save_pretrained`` on a machine with network access). Otherwise the Hub is asked, unless it is
    unreachable: then only the local Hugging Face cache is tried, at once, and a miss raises
    ``BackendUnavailable`` with transformers' own message and what to do, instead of a minute of retries."""
    from tinker_cookbook.tokenizer_utils import get_tokenizer

    local = os.environ.get(TOKENIZER_ENV, "").strip()
    if local:
        if not Path(local).is_dir():
            raise BackendUnavailable(f"${TOKENIZER_ENV}={local} is not a folder (a saved tokenizer folder)")
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(local, local_files_only=True)
    if reachable():
        return get_tokenizer(model_name)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model_name, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise BackendUnavailable(
            f"the tinker backend needs the tokenizer of {model_name} on this machine, and the Hugging Face "
            f"Hub ({HUB_HOST}) cannot be reached: {' '.join(str(exc).split())} -- run once with network "
            f"access (it is then cached), or set {TOKENIZER_ENV} to a local tokenizer folder"
        ) from None


def default_backend() -> str:
    """``tinker`` when the Tinker target is reached through the SDK (``TINKER_BASE_URL`` or
    ``TINKER_API_KEY``, ``rftlab.training.tinker_target``), else ``local``."""
    from rftlab.training.tinker_target import uses_sdk

    return "tinker" if uses_sdk() else "local"


def local_storage_dir(root: str | Path) -> Path:
    """Where the local backend keeps checkpoints for the run store at ``root`` (beside it, hidden)."""
    root = Path(root).resolve()
    return root.parent / f".{root.name}_local_tinker"


def quick_arms(arms: Mapping[str, GS1ArmConfig]) -> dict[str, GS1ArmConfig]:
    """Smoke sizes: 2 steps and 16 eval items, with the spec's rollouts per step (the kernel baseline's
    activation gate counts effective neighbours within a step's batch: a smaller batch fails it by
    design, and gates are never relaxed)."""
    from dataclasses import replace

    return {name: replace(cfg, **QUICK_SIZES) for name, cfg in arms.items()}


GSM8K_ENV = "RFTLAB_GSM8K"  # a local folder with GSM8K's train and test files (no Hub access needed)


def _gsm8k_jsonl_rows(file: Path) -> list[dict[str, Any]]:
    """The rows of one JSONL file, each checked (``BackendUnavailable`` naming the file and the line)."""
    import json

    from rftlab.envs.gs1.task import GSM8KRowError, gsm8k_final_answer

    rows = []
    with file.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"${GSM8K_ENV} file {file} line {number}"
            try:
                text = raw.decode("utf-8")
                if not text.strip():
                    continue
                row = json.loads(text)
                gsm8k_final_answer(row)
            except UnicodeDecodeError as exc:
                raise BackendUnavailable(f"{where}: byte {raw[exc.start]:#04x} is not UTF-8") from None
            except GSM8KRowError as exc:
                raise BackendUnavailable(f"{where}: {exc}") from None
            except (ValueError, RecursionError) as exc:
                raise BackendUnavailable(
                    f"{where}: not a JSON object ({' '.join(str(exc).split())[:120]})"
                ) from None
            rows.append(row)
    return rows


def _gsm8k_parquet_rows(file: Path) -> list[dict[str, Any]]:
    """The rows of one parquet file, each checked (``BackendUnavailable`` naming the file and the row)."""
    import pyarrow.parquet as pq

    from rftlab.envs.gs1.task import GSM8KRowError, gsm8k_final_answer

    try:
        rows = pq.read_table(file).to_pylist()
    except Exception as exc:  # pyarrow raises its own ArrowInvalid/ArrowIOError (and OSError) on bad bytes
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise BackendUnavailable(
            f"${GSM8K_ENV} file {file}: not a readable parquet file ({reason})"
        ) from None
    for number, row in enumerate(rows, start=1):
        try:
            gsm8k_final_answer(row)
        except GSM8KRowError as exc:
            raise BackendUnavailable(f"${GSM8K_ENV} file {file} row {number}: {exc}") from None
    return rows


def _gsm8k_local(folder: str) -> dict[str, list[dict[str, Any]]]:
    """GSM8K from ``$RFTLAB_GSM8K``: ``train*.jsonl`` and ``test*.jsonl`` (the format of the original
    release, one ``{"question", "answer"}`` object per line) or ``train*.parquet``/``test*.parquet`` (the Hub
    copy's files), files of a split in name order. Every row is checked; a bad file, a bad row or an
    empty split is a ``BackendUnavailable`` naming the file and the row."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        why = "nothing is there" if not root.exists() else "it is a file"
        raise BackendUnavailable(
            f"${GSM8K_ENV}={folder} is not a folder ({why}); give a folder with GSM8K's train and test files"
        )
    for suffix, read in ((".parquet", _gsm8k_parquet_rows), (".jsonl", _gsm8k_jsonl_rows)):
        files = {split: sorted(root.glob(f"{split}*{suffix}")) for split in ("train", "test")}
        if not all(files.values()):
            continue
        out = {}
        for split, paths in files.items():
            for path in paths:
                if not path.is_file():  # a folder, FIFO or device named like a data file
                    raise BackendUnavailable(f"${GSM8K_ENV} file {path} is not a regular file")
            out[split] = [row for path in paths for row in read(path)]
            if not out[split]:
                shown = ", ".join(str(p) for p in paths)
                raise BackendUnavailable(f"${GSM8K_ENV}={folder}: the {split} split is empty ({shown})")
        return out
    raise BackendUnavailable(
        f"${GSM8K_ENV}={folder} holds no train*.jsonl and test*.jsonl (nor train*.parquet and test*.parquet)"
    )


def _gsm8k_cached(dataset: str, config: str) -> Any:
    """``dataset`` from the local Hugging Face cache only, at once (``datasets`` in offline mode for this
    call), with ``BackendUnavailable`` saying what to do on a miss."""
    import datasets
    import datasets.config

    offline = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = True
    try:
        return datasets.load_dataset(dataset, config)
    except (OSError, ValueError, ConnectionError) as exc:
        raise BackendUnavailable(
            f"the GSM8K task needs {dataset} on this machine, and the Hugging Face Hub ({HUB_HOST}) cannot be "
            f"reached: {' '.join(str(exc).split())[:300]} -- run once with network access (it is then cached), "
            f"or set {GSM8K_ENV} to a folder with train.jsonl and test.jsonl"
        ) from None
    finally:
        datasets.config.HF_HUB_OFFLINE = offline


def load_gsm8k_task(*, reachable: Callable[[], bool] = hub_reachable) -> MathTask:
    """``openai/gsm8k`` (``main``): from ``$RFTLAB_GSM8K`` when set, else from the Hugging Face Hub, or,
    when the Hub cannot be reached, from the local cache only, at once (instead of ~25 s of retries and
    then an error)."""
    import datasets

    local = os.environ.get(GSM8K_ENV, "").strip()
    if local:
        ds = _gsm8k_local(local)
    elif reachable():
        ds = datasets.load_dataset("openai/gsm8k", "main")
    else:
        ds = _gsm8k_cached("openai/gsm8k", "main")
    from rftlab.envs.gs1.task import GSM8KRowError

    # `datasets` leaves Dataset.__iter__ unannotated, so pyright infers list rows too; a split with no
    # format set (as here) yields one dict per row, like the local files
    splits = cast(Mapping[str, Iterable[Mapping[str, Any]]], ds)
    try:
        train, test = gsm8k_problems(splits["train"], "train"), gsm8k_problems(splits["test"], "test")
    except GSM8KRowError as exc:  # rows from the Hub or its cache (local files are checked as read)
        raise BackendUnavailable(f"openai/gsm8k {exc}") from None
    return MathTask("gsm8k", train, test, **cookbook_math_prompt_format())


def _tinker_parts(spec: GS1Spec, overrides: Mapping[str, Any] | None):
    """``(service, renderer, task or None, arms)`` on a tinker service (the hosted one, or a local
    ``rftlab serve tinker`` through ``TINKER_BASE_URL``)."""
    from rftlab.training.tinker_target import TinkerTargetError, check_sdk_credentials, sdk_service_client

    try:
        check_sdk_credentials()
    except TinkerTargetError as exc:
        raise BackendUnavailable(str(exc)) from None
    from tinker_cookbook import renderers
    from tinker_cookbook.tokenizer_utils import get_tokenizer

    from rftlab.training.local_tinker.model import BUILTIN_MODELS, register_builtin_tokenizers

    arms = spec.arm_configs(**{"renderer_name": DEFAULT_RENDERER, **dict(overrides or {})})
    first = next(iter(arms.values()))
    if first.base_model in BUILTIN_MODELS or Path(first.base_model).is_dir():
        # a model a local `rftlab serve tinker` serves (docs/platforms.md §3.12): its tokenizer is here
        register_builtin_tokenizers()
        tokenizer = get_tokenizer(first.base_model)
    else:
        tokenizer = tinker_tokenizer(first.base_model)  # before any client: fails fast offline
    service = sdk_service_client()  # TINKER_BASE_URL selects the service
    renderer = renderers.get_renderer(first.renderer_name, tokenizer)
    task = load_gsm8k_task() if first.task == "gsm8k" else None
    return service, renderer, task, arms


def _warm_base(root: str | Path, quick: bool) -> tuple[str, list[str], WarmStartResult]:
    """``(base model, model directories, warm-start record)`` of the local backend: the supervised warm
    start's merged base, built once under the run store's local storage (a short one at smoke size,
    ``QUICK_WARM_START``, enough for varied rewards so the quick study trains and draws its figures)."""
    from dataclasses import replace

    from rftlab.training.gs1.warm_start import WarmStartConfig, prepare_base_model

    config = WarmStartConfig(renderer_name=LOCAL_RENDERER)
    if quick:  # a short warm start, so rewards vary and the study trains (the preflight is never relaxed)
        config = replace(config, **QUICK_WARM_START)
    ws = prepare_base_model(local_storage_dir(root) / ("warm_start_quick" if quick else "warm_start"), config)
    return ws.path, [ws.path], ws


def make_gs1_backend(
    name: str,
    spec: GS1Spec,
    root: str | Path = "runs",
    quick: bool = False,
    overrides: Mapping[str, Any] | None = None,
) -> GS1Backend:
    """Build the backend ``name`` for the spec (see the module docstring)."""
    if name not in BACKENDS:
        raise BackendUnavailable(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    warm, reference = None, None
    if name == "tinker":
        service, renderer, task, arms = _tinker_parts(spec, overrides)
    else:
        import torch
        from tinker_cookbook import renderers
        from tinker_cookbook.tokenizer_utils import get_tokenizer

        from rftlab.training.local_tinker import LocalServiceClient

        base_model, model_dirs, warm = _warm_base(root, quick)
        sizes = {
            "base_model": base_model,
            "renderer_name": LOCAL_RENDERER,
            "task": "local_math",
            **LOCAL_SIZES,
        }
        arms = spec.arm_configs(**{**sizes, **dict(overrides or {})})
        service = LocalServiceClient(storage_dir=local_storage_dir(root), model_dirs=model_dirs)
        # the base model's own tokenizer (a built-in name is registered with the cookbook by the backend;
        # a warm-started directory carries its tokenizer), exactly as on the tinker path
        renderer = renderers.get_renderer(LOCAL_RENDERER, get_tokenizer(base_model))
        task = None
        # the float64 copy the preflight's loss/gradient check compares against (docs/gs1.md §4)
        reference = LocalServiceClient(
            storage_dir=local_storage_dir(root) / "float64", model_dirs=model_dirs, dtype=torch.float64
        )
    if quick:
        arms = quick_arms(arms)
    if task is None:
        task = local_task(max(cfg.n_train for cfg in arms.values()))
    return GS1Backend(
        name,
        service,
        renderer,
        task,
        arms,
        warm,
        send_seeds=name != "tinker",
        reference_client=reference,
        recipe=BackendRecipe(name, spec, str(root), quick, dict(overrides) if overrides else None),
    )
