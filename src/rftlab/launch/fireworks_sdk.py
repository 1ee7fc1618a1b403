"""The Fireworks launcher over the ``fireworks-ai`` SDK instead of the firectl binary.

    launcher = sdk_launcher(account_id="acct", base_url="http://127.0.0.1:8778")  # FIREWORKS_API_KEY
    ref = launcher.launch(spec, root="runs")      # the same run.json / metrics.jsonl as the firectl path
    launcher.watch(ref)

``sdk_launcher`` is ``rftlab.launch.fireworks.FireworksLauncher`` with ``SdkTransport`` in place of
``Firectl``: the launcher's own plan, preflight, run records, polling and per-epoch metrics run unchanged,
and each call that would have been a firectl command is an SDK call (docs/platforms.md §1.6). The job's
settings are the firectl flags the launcher builds (``firectl.job_create_flags``), mapped one to one onto
the SDK's ``reinforcement_fine_tuning_jobs.create`` arguments (the table of docs/platforms.md §1.3); a flag
with no mapping here is refused, never dropped. So the W&B key travels in the HTTPS body, not on a
command line. Dataset listings are read page by page to the end (the REST API pages at 50). Each call is
logged like a firectl call (``provider/firectl_calls.jsonl``: ``["sdk", <call>, <id>]``, status, seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rftlab.launch.firectl import FirectlError
from rftlab.launch.fireworks import FireworksLauncher
from rftlab.runs.secrets import redact_text

BASE_URL_ENV = "FIREWORKS_BASE_URL"
# firectl flag -> (SDK argument path, type)
FLAG_TO_SDK: dict[str, tuple[tuple[str, ...], Callable[[str], Any]]] = {
    "--base-model": (("training_config", "base_model"), str),
    "--warm-start-from": (("training_config", "warm_start_from"), str),
    "--output-model": (("training_config", "output_model"), str),
    "--epochs": (("training_config", "epochs"), int),
    "--learning-rate": (("training_config", "learning_rate"), float),
    "--lora-rank": (("training_config", "lora_rank"), int),
    "--max-context-length": (("training_config", "max_context_length"), int),
    "--batch-size": (("training_config", "batch_size"), int),
    "--batch-size-samples": (("training_config", "batch_size_samples"), int),
    "--temperature": (("inference_parameters", "temperature"), float),
    "--top-p": (("inference_parameters", "top_p"), float),
    "--top-k": (("inference_parameters", "top_k"), int),
    "--max-output-tokens": (("inference_parameters", "max_output_tokens"), int),
    "--response-candidates-count": (("inference_parameters", "response_candidates_count"), int),
    "--rl-loss-method": (("loss_config", "method"), lambda v: v.upper().replace("-", "_")),
    "--rl-kl-beta": (("loss_config", "kl_beta"), float),
    "--chunk-size": (("chunk_size",), int),
    "--max-concurrent-rollouts": (("max_concurrent_rollouts",), int),
    "--max-concurrent-evaluations": (("max_concurrent_evaluations",), int),
    "--display-name": (("display_name",), str),
    "--wandb-project": (("wandb_config", "project"), str),
    "--wandb-entity": (("wandb_config", "entity"), str),
    "--wandb-api-key": (("wandb_config", "api_key"), str),
}


def sdk_job_arguments(flags: Sequence[str], account_id: str) -> dict[str, Any]:
    """The ``reinforcement_fine_tuning_jobs.create`` arguments of firectl create flags (module docstring)."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(flags):
        flag = flags[i]
        if flag == "--wandb":
            out.setdefault("wandb_config", {})["enabled"] = True
            i += 1
            continue
        if flag in ("--dataset", "--evaluator"):
            kind = "datasets" if flag == "--dataset" else "evaluators"
            value = flags[i + 1]
            out[flag[2:]] = (
                value if value.startswith("accounts/") else f"accounts/{account_id}/{kind}/{value}"
            )
            i += 2
            continue
        if flag not in FLAG_TO_SDK or i + 1 >= len(flags):
            raise FirectlError(f"the SDK launcher has no mapping for {flag!r}: refusing to drop a setting")
        path, kind = FLAG_TO_SDK[flag]
        try:
            value = kind(flags[i + 1])
        except ValueError:
            raise FirectlError(f"{flag} {flags[i + 1][:40]!r} is not a valid value") from None
        target = out
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value
        i += 2
    return out


def _dump(obj: Any) -> Any:
    return (
        obj.model_dump(by_alias=True, exclude_none=True, mode="json") if hasattr(obj, "model_dump") else obj
    )


@dataclass
class SdkTransport:
    """What ``FireworksLauncher`` asks of ``Firectl``, done with the ``fireworks-ai`` SDK against
    ``base_url`` (default ``$FIREWORKS_BASE_URL``, else the SDK's own default). SDK errors become
    ``FirectlError`` with the key scrubbed, as firectl failures do."""

    account_id: str
    api_key: str | None = None
    base_url: str | None = None
    log: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)
    timeout: float = 120.0
    exe: str | None = "fireworks-sdk"  # what ``FireworksLauncher.plan`` prints first in each command

    def argv(self, noun: str, verb: str, *args: str, json_out: bool = True) -> list[str]:
        """The call a launcher plan prints for what would have been ``firectl <noun> <verb> ...``."""
        return [str(self.exe), noun, verb, *args]

    def __repr__(self) -> str:
        return f"SdkTransport(account_id={self.account_id!r}, base_url={self.base_url!r})"

    def _client(self):
        from fireworks import Fireworks

        if not self.api_key:
            raise FirectlError("FIREWORKS_API_KEY is not set")
        return Fireworks(
            api_key=self.api_key, account_id=self.account_id, base_url=self.base_url, timeout=self.timeout
        )

    def _call(self, name: str, rid: str, fn: Callable[[Any], Any]) -> Any:
        t0 = time.monotonic()
        status: int | None = 0
        try:
            return fn(self._client())
        except FirectlError:
            status = None
            raise
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            message = redact_text(" ".join(str(exc).split()), [self.api_key])[:2000]
            raise FirectlError(f"{name} {rid} failed ({status or type(exc).__name__}): {message}") from None
        finally:
            if self.log is not None:
                self.log(
                    {
                        "argv": ["sdk", name, rid],
                        "returncode": status,
                        "seconds": round(time.monotonic() - t0, 3),
                        "stderr": "",
                    }
                )

    def version(self) -> str:
        """What ``run.json`` records in place of ``firectl version``: the SDK and its version."""
        from importlib.metadata import version

        return f"fireworks-ai {version('fireworks-ai')} (SDK transport; no firectl)"

    # ----------------------------------------------------------------------------- datasets
    def dataset_get(self, dataset_id: str) -> Any:
        return self._call("datasets.get", dataset_id, lambda fw: _dump(fw.datasets.get(dataset_id)))

    def dataset_create(self, dataset_id: str, path: str | Path) -> Any:
        def create(fw) -> Any:
            fw.datasets.create(dataset_id=dataset_id, dataset={"display_name": dataset_id})
            with open(path, "rb") as f:
                fw.datasets.upload(dataset_id, file=(Path(path).name, f))
            return _dump(fw.datasets.get(dataset_id))

        return self._call("datasets.create", dataset_id, create)

    def dataset_list(self) -> Any:
        return self._call(
            "datasets.list", "*", lambda fw: {"datasets": [_dump(d) for d in fw.datasets.list(page_size=200)]}
        )

    def dataset_download(self, dataset_id: str, out_dir: str | Path) -> list[Path]:
        """Every file of the dataset into ``out_dir/dataset/<id>/`` (firectl's layout); the JSONL files."""
        import httpx

        from rftlab.runs.atomic import atomic_write_bytes

        def download(fw) -> list[Path]:
            urls = fw.datasets.get_download_endpoint(dataset_id).filename_to_signed_urls or {}
            folder = Path(out_dir) / "dataset" / dataset_id
            folder.mkdir(parents=True, exist_ok=True)
            for name, url in urls.items():
                safe = Path(name).name
                response = httpx.get(url, timeout=self.timeout)
                response.raise_for_status()
                atomic_write_bytes(folder / safe, response.content)
            return sorted(folder.rglob("*.jsonl"))

        return self._call("datasets.download", dataset_id, download)

    # --------------------------------------------------------------------------------- jobs
    def job_create(self, job_id: str, flags: Sequence[str]) -> Any:
        kwargs = sdk_job_arguments(flags, self.account_id)
        return self._call(
            "reinforcement_fine_tuning_jobs.create",
            job_id,
            lambda fw: _dump(
                fw.reinforcement_fine_tuning_jobs.create(reinforcement_fine_tuning_job_id=job_id, **kwargs)
            ),
        )

    def job_get(self, job_id: str) -> Any:
        return self._call(
            "reinforcement_fine_tuning_jobs.get",
            job_id,
            lambda fw: _dump(fw.reinforcement_fine_tuning_jobs.get(job_id)),
        )

    def job_list(self) -> Any:
        return self._call(
            "reinforcement_fine_tuning_jobs.list",
            "*",
            lambda fw: {
                "reinforcementFineTuningJobs": [
                    _dump(j) for j in fw.reinforcement_fine_tuning_jobs.list(page_size=200)
                ]
            },
        )

    def job_cancel(self, job_id: str) -> Any:
        return self._call(
            "reinforcement_fine_tuning_jobs.cancel",
            job_id,
            lambda fw: fw.reinforcement_fine_tuning_jobs.cancel(job_id, body={}),
        )

    def job_resume(self, job_id: str) -> Any:
        return self._call(
            "reinforcement_fine_tuning_jobs.resume",
            job_id,
            lambda fw: _dump(fw.reinforcement_fine_tuning_jobs.resume(job_id, body={})),
        )

    def evaluator_get(self, evaluator_id: str) -> Any:
        short = evaluator_id.rsplit("/", 1)[-1]
        return self._call("evaluators.get", short, lambda fw: _dump(fw.evaluators.get(short)))


def sdk_launcher(account_id: str | None = None, base_url: str | None = None, **kw: Any) -> FireworksLauncher:
    """A ``FireworksLauncher`` whose calls go through the SDK (module docstring); ``kw`` as the launcher's."""
    import os

    url = base_url or os.environ.get(BASE_URL_ENV) or None

    def factory(*, account_id: str, api_key: str | None = None, log=None, **_ignored: Any) -> SdkTransport:
        return SdkTransport(account_id=account_id, api_key=api_key, base_url=url, log=log)

    from functools import partial

    from rftlab.launch.evaluators import fetch_evaluator

    kw.setdefault("evaluator_lookup", partial(fetch_evaluator, base_url=url))
    return FireworksLauncher(account_id=account_id, firectl_factory=factory, **kw)
