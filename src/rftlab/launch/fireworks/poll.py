"""What a poll of a Fireworks job does with the answers: job snapshots and the call log, the job's state as
a ``RunStatus``, the per-epoch rollout datasets downloaded and parsed into rollout records and metric rows,
and the checks that a found job is the one the spec describes."""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from rftlab.launch.firectl import (
    MAX_EPOCHS,
    RESUMABLE_JOB_STATES,
    TERMINAL_JOB_STATES,
    FirectlClient,
    FirectlError,
    accelerator_seconds,
    job_id_for,
    job_progress,
    job_state,
    output_metrics,
    output_model_for,
    rollout_dataset_id,
    status_message,
)
from rftlab.launch.fireworks.common import (
    MAX_ATTEMPTS,
    RESUME_GRACE_S,
    LaunchRefused,
)
from rftlab.launch.fireworks.evaluator import (
    _fireworks_section,
    evaluator_resource,
)
from rftlab.launch.specs import FireworksArmSpec, resolved_job_settings
from rftlab.runs import Run, RunStore
from rftlab.runs.secrets import redact_text
from rftlab.types import RunStatus


def _job_or_none(fc: FirectlClient, job_id: str) -> Mapping[str, Any] | None:
    try:
        job = fc.job_get(job_id)
    except FirectlError:
        return None
    if not isinstance(job, Mapping):
        raise LaunchRefused(f"firectl get of job {job_id!r} returned JSON that is not an object")
    return job


def _latest_attempt(fc: FirectlClient, spec: FireworksArmSpec) -> tuple[int, Mapping[str, Any] | None]:
    """``(n, job)`` of the highest attempt of the spec that exists on Fireworks (``(1, None)``: none)."""
    latest: tuple[int, Mapping[str, Any] | None] = (1, None)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        job = _job_or_none(fc, job_id_for(spec, attempt))
        if job is None:
            break
        latest = (attempt, job)
    return latest


class AttemptRecord(TypedDict):
    """What ``run.json`` keeps of an attempt that ended without completing (``_attempt_record``)."""

    job_id: str
    state: str
    status: str
    run_dir: str | None
    job: dict[str, Any]
    resumed_at: NotRequired[float]  # set by a launch that resumes the job (time.time())


def _attempt_record(
    job: Mapping[str, Any], job_id: str, store: RunStore, spec: FireworksArmSpec
) -> AttemptRecord:
    """What ``run.json`` keeps of an attempt that ended without completing: its job id, state, status
    message, the run that recorded it (when this run store has one) and the job JSON."""
    runs, _problems = store.scan(spec.experiment, spec.arm)
    mine = [r for r in runs if r.record.provider.get("job_id") == job_id]
    newest = max(mine, key=lambda r: (r.record.created_at, r.path.name), default=None)
    return {
        "job_id": job_id,
        "state": job_state(job),
        "status": status_message(job)[:500],
        "run_dir": str(newest.path) if newest is not None else None,
        "job": dict(job),
    }


def _call_logger(handle: Run) -> Callable[[dict[str, Any]], None]:
    path = handle.path / "provider" / "firectl_calls.jsonl"

    def log(record: dict[str, Any]) -> None:
        existing = path.read_text(encoding="utf-8") if path.exists() else ""
        handle.save_provider_snapshot("firectl_calls.jsonl", existing + json.dumps(record) + "\n")

    return log


def _append_snapshot(handle: Run, job: Mapping[str, Any]) -> None:
    path = handle.path / "provider" / "job_snapshots.jsonl"
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    handle.save_provider_snapshot("job_snapshots.jsonl", existing + json.dumps(job, sort_keys=True) + "\n")
    handle.save_provider_snapshot("fireworks_job.json", job)


_STATE_MAP = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "EXPIRED": "failed",
    "EARLY_STOPPED": "failed",
    "CANCELLED": "cancelled",
    "DELETED": "cancelled",
    "RUNNING": "running",
    "WRITING_RESULTS": "running",
}


def _spec_epochs(epochs: object) -> int | None:
    """The spec's epoch count when it is a plausible one (1..MAX_EPOCHS), else ``None``."""
    if isinstance(epochs, int) and not isinstance(epochs, bool) and 1 <= epochs <= MAX_EPOCHS:
        return epochs
    return None


def _status_of(job: Mapping[str, Any], epochs: object) -> RunStatus:
    """The job's status; every number is validated against the spec (``firectl.job_progress``)."""
    state = job_state(job)
    total = _spec_epochs(epochs)
    progress = job_progress(job, total)
    problems = list(progress["problems"])
    accel = accelerator_seconds(job, problems)
    mapped = _STATE_MAP.get(state, "pending" if state not in TERMINAL_JOB_STATES else "failed")
    finished = total if state == "COMPLETED" else progress["epoch"]
    provider = {
        "state": state,
        "epoch": progress["epoch"],
        "percent": progress["percent"],
        "accelerator_seconds": accel,
        "output_metrics": output_metrics(job),
        "progress_key": [state, progress["epoch"], progress["percent"], sorted(accel.items())],
        "problems": problems,
    }
    message = status_message(job)
    if problems:
        message = "; ".join([message, *problems]) if message else "; ".join(problems)
    return RunStatus(mapped, finished, total, message, provider)


def _duration(seconds: float) -> str:
    """``45 s``, ``30 min`` or ``2.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _with_message(status: RunStatus, note: str) -> RunStatus:
    message = f"{note}; {status.message}" if status.message else note
    return RunStatus(status.state, status.progress, status.total, message, status.provider)


def _finished_epochs(status: RunStatus) -> list[int]:
    """Epochs whose rollout datasets should exist: all of them once completed, else those before the
    current ``jobProgress.epoch`` (validated: never more than the spec's epochs)."""
    if status.progress is None:
        return []
    return list(range(min(int(status.progress), status.total or MAX_EPOCHS)))


def _failure_reason(exc: BaseException) -> str:
    """One line for ``run.json``'s ``error`` (keys scrubbed)."""
    if isinstance(exc, KeyboardInterrupt):
        return "launch interrupted before the Fireworks job was recorded"
    text = " ".join(redact_text(str(exc)).split()) or type(exc).__name__  # redact, then fold, then cut
    return f"launch failed before the job existed: {text}"[:2000]


def _download_epoch(
    fc: FirectlClient, handle, job_id: str, epoch: int
) -> tuple[list[dict[str, Any]], list[int] | None] | None:
    """``(rows, chunk numbers)`` of epoch ``epoch``'s rollout dataset (plain id, ``None`` chunks; else
    every ``-chunk-<n>`` dataset found in the whole ``dataset list``), kept raw under ``provider/``;
    ``None`` when it is not available yet."""
    ds_id = rollout_dataset_id(job_id, epoch)
    with tempfile.TemporaryDirectory(prefix="rftlab-dl-") as tmp:
        files: list[Path] = []
        chunks: list[int] | None = None
        try:
            files = fc.dataset_download(ds_id, Path(tmp) / ds_id)
        except FirectlError:
            files = []
        if not files:  # chunked datasets: rft-evalv3-<job>-epoch-<k>-chunk-<n>
            try:
                listing = fc.dataset_list()
            except FirectlError:
                return None
            found = {}
            for name in _dataset_ids(listing):
                m = re.fullmatch(re.escape(ds_id) + r"-chunk-([0-9]{1,6})", name)
                if m:
                    found[int(m.group(1))] = name
            chunks = sorted(found)
            for n in chunks:
                try:
                    files += fc.dataset_download(found[n], Path(tmp) / found[n])
                except FirectlError:
                    return None
        if not files:
            return None
        rows: list[dict[str, Any]] = []
        for i, f in enumerate(files):
            text = f.read_text(encoding="utf-8", errors="replace")
            safe = re.sub(r"[^A-Za-z0-9._-]", "_", f.name)[:100]
            handle.save_provider_snapshot(f"epoch-{epoch}-{i}-{safe}", text)
            rows += _parse_rows(text)
        return rows, chunks


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def epoch_completeness(
    records: Sequence[Mapping[str, Any]], chunks: Sequence[int] | None, spec: Mapping[str, Any]
) -> dict[str, Any] | None:
    """What an epoch's rollouts lack (``None`` when complete): the spec's ``rows`` × ``response_candidates``
    rollouts, every row id with ``response_candidates`` of them, and, for a chunked dataset, the chunks
    ``0..n`` without a gap."""
    rows, k = spec.get("rows"), spec.get("response_candidates")
    if not (_positive_int(rows) and _positive_int(k)):
        return None  # nothing to compare with
    assert isinstance(rows, int) and isinstance(k, int)
    per_row: dict[Any, int] = {}
    for r in records:
        per_row[r.get("row_id")] = per_row.get(r.get("row_id"), 0) + 1
    short = sorted(str(rid) for rid, n in per_row.items() if n < k)
    missing_chunks = sorted(set(range(max(chunks) + 1)) - set(chunks)) if chunks else []
    expected = rows * k
    if len(records) >= expected and len(per_row) >= rows and not short and not missing_chunks:
        return None
    return {
        "rollouts": len(records),
        "expected_rollouts": expected,
        "rows_seen": len(per_row),
        "rows_expected": rows,
        "rows_short_of_candidates": short[:50],
        "chunks": list(chunks or []),
        "missing_chunks": missing_chunks,
    }


def _after_resume(status: RunStatus, provider: Mapping[str, Any], now: float) -> RunStatus:
    """A resumed job may read FAILED for a while after ``rftj resume``: within ``RESUME_GRACE_S`` of the
    resume that state counts as pending, not as the end of the run."""
    resumed = provider.get("resumed_at")
    state = str((status.provider or {}).get("state") or "")
    if (
        isinstance(resumed, int | float)
        and not isinstance(resumed, bool)
        and state in RESUMABLE_JOB_STATES
        and now - float(resumed) < RESUME_GRACE_S
    ):
        note = f"resume requested {now - float(resumed):.0f} s ago; the job still reads {state}"
        return RunStatus("pending", status.progress, status.total, note, status.provider)
    return status


def _dataset_ids(listing: object) -> list[str]:
    items = listing.get("datasets", []) if isinstance(listing, Mapping) else listing
    out = []
    for item in items if isinstance(items, list) else []:
        name = item.get("name") if isinstance(item, Mapping) else item
        if isinstance(name, str):
            out.append(name.rsplit("/", 1)[-1])
    return out


def _parse_rows(text: str) -> list[dict[str, Any]]:
    """JSON objects of a JSONL text; a malformed line becomes ``{"_unparseable": <line number>}`` so it
    is counted (as a rollout without a score), never silently dropped."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        rows.append(row if isinstance(row, dict) else {"_unparseable": number})
    return rows


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (a field a downloaded row may lack or garble)."""
    return value if isinstance(value, Mapping) else {}


class RolloutRecord(TypedDict):
    """One downloaded rollout (``_rollout_record``); ``row_id`` and ``unparseable`` are the row's own."""

    index: int
    row_id: Any
    reward: float | None
    metrics: dict[str, float]
    unparseable: Any


def _rollout_record(row: Mapping[str, Any], index: int) -> RolloutRecord:
    """One rollout of a downloaded ``EvaluationRow``: row id, score and per-metric values (tolerant of
    missing keys and of metrics given as ``{"score": x}`` or bare numbers)."""
    meta = _mapping(row.get("input_metadata"))
    result = _mapping(row.get("evaluation_result"))
    metrics: dict[str, float] = {}
    raw_metrics = _mapping(result.get("metrics"))
    for name, value in raw_metrics.items():
        v = _finite(value.get("score", value.get("value"))) if isinstance(value, Mapping) else _finite(value)
        if v is not None:
            metrics[str(name)] = v
    return {
        "index": index,
        "row_id": meta.get("row_id"),
        "reward": _finite(result.get("score")),
        "metrics": metrics,
        "unparseable": row.get("_unparseable"),
    }


def epoch_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-epoch metrics from rollout records: mean reward, the mean of every evaluator metric, group
    (row id) statistics of the reward — the unit is the epoch, rollouts are inputs to its means."""
    scored = [r for r in records if r.get("reward") is not None]
    out: dict[str, Any] = {
        "rollouts": len(records),
        "rollouts_without_score": len(records) - len(scored),
        "reward": _mean([r["reward"] for r in scored]),
    }
    names: dict[str, None] = {}
    for r in records:
        names.update(dict.fromkeys(r.get("metrics", {})))
    for name in names:
        if name in out:
            continue
        out[name] = _mean([r["metrics"][name] for r in records if name in r.get("metrics", {})])
    groups: dict[Any, list[float]] = {}
    for r in scored:
        groups.setdefault(r.get("row_id"), []).append(r["reward"])
    sds = [_sd(v) for v in groups.values() if len(v) > 1]
    out["groups"] = len(groups)
    out["group_reward_sd"] = _mean(sds)
    out["frac_zero_var_groups"] = _mean([1.0 if sd == 0.0 else 0.0 for sd in sds])
    return out


def _mean(xs: Sequence[float]) -> float | None:
    """The mean, or ``None`` (JSON null) for an epoch with no values: a missing metric is not a zero."""
    return sum(xs) / len(xs) if xs else None


def _sd(xs: Sequence[float]) -> float:
    mu = sum(xs) / len(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1))


def _recorded_epochs(handle) -> list[int]:
    return sorted({int(row["epoch"]) for row in handle.metrics() if "epoch" in row})


def _recorded_status(handle) -> RunStatus:
    """The status a finished run was left in (a cancelled job's run is ``failed`` with that reason)."""
    error = handle.record.error or ""
    if handle.record.status == "finished":
        state = "completed"
    elif error.startswith("Fireworks job cancelled"):
        state = "cancelled"
    else:
        state = "failed"
    return RunStatus(state, message=error)


def _config_mismatch(
    job: Mapping[str, Any],
    spec: FireworksArmSpec,
    account_id: str,
    dataset_id: str | None = None,
    evaluator: str | None = None,
    attempt: int = 1,
) -> str:
    """Which recorded settings of an existing job differ from what this launch would send (empty when they
    match; a setting the job JSON does not show is not compared)."""
    fw = _fireworks_section(spec)
    tc = _section(job, "trainingConfig")
    ip = _section(job, "inferenceParameters")
    lc = _section(job, "lossConfig")
    settings = resolved_job_settings(fw)
    numbers = {
        "epochs": (_field(tc, "epochs"), spec.epochs),
        "learningRate": (_field(tc, "learningRate"), spec.learning_rate),
        "loraRank": (_field(tc, "loraRank"), settings["lora_rank"]),
        "maxContextLength": (_field(tc, "maxContextLength"), settings["max_context_length"]),
        "batchSize": (_field(tc, "batchSize"), settings["batch_size"]),
        "responseCandidatesCount": (_field(ip, "responseCandidatesCount"), spec.response_candidates),
        "temperature": (_field(ip, "temperature"), spec.temperature),
        "topP": (_field(ip, "topP"), settings["top_p"]),
        "topK": (_field(ip, "topK"), settings["top_k"]),
        "maxOutputTokens": (_field(ip, "maxOutputTokens"), fw.max_output_tokens),
        "klBeta": (_field(lc, "klBeta"), settings["kl_beta"]),
        "chunkSize": (_field(job, "chunkSize"), settings["chunk_size"]),
    }
    diffs = []
    for name, (have, want) in numbers.items():
        if have is None:
            continue
        try:
            same = math.isclose(float(have), float(want), rel_tol=1e-6, abs_tol=0.0)
        except (TypeError, ValueError):
            same = False
        if not same:
            diffs.append(f"{name} {have!r} != {want!r}")
    method = _field(lc, "method")
    if method is not None and str(method).upper().replace("-", "_") != settings[
        "loss_method"
    ].upper().replace("-", "_"):
        diffs.append(f"lossConfig.method {method!r} != {settings['loss_method']!r}")
    texts = {
        "dataset": (str(job.get("dataset") or ""), dataset_id or fw.dataset_id),
        "evaluator": (str(job.get("evaluator") or ""), evaluator or evaluator_resource(spec, account_id)),
        "outputModel": (str(_field(tc, "outputModel") or ""), output_model_for(spec, attempt)),
    }
    for name, (have, want) in texts.items():
        if have and have != want and not have.endswith("/" + want):
            diffs.append(f"{name} {have!r} != {want!r}")
    return "; ".join(diffs)


def _section(job: Mapping[str, Any], camel: str) -> Mapping[str, Any]:
    value = _field(job, camel)
    return value if isinstance(value, Mapping) else {}


def _field(obj: Mapping[str, Any], camel: str) -> Any:
    """``obj[camel]`` or its snake_case spelling."""
    if camel in obj:
        return obj[camel]
    return obj.get(re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower())
