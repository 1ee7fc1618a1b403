"""RFT jobs of the local control plane: create, get, list, cancel, resume and delete, with the platform's
``JOB_STATE_*`` names. The epochs themselves run in ``rftlab.launch.local_fireworks.runner``.

States a job passes through here: ``JOB_STATE_CREATING`` (accepted) → ``JOB_STATE_PENDING`` (waiting for a
free runner or for its evaluator to finish ``BUILDING``) → ``JOB_STATE_VALIDATING`` (dataset and evaluator
checked) → ``JOB_STATE_RUNNING`` (one epoch after the other) → ``JOB_STATE_WRITING_RESULTS`` →
``JOB_STATE_COMPLETED``; or ``JOB_STATE_FAILED`` (``status`` says why), or ``JOB_STATE_CANCELLING`` →
``JOB_STATE_CANCELLED``. Only a ``FAILED`` job can be resumed (the firectl page: "Resumes a failed
reinforcement fine-tuning job"); it continues at the first epoch whose datasets were not all written.

Create checks field names and types (an unknown field is refused) and what a run needs (epochs, group
size, chunk size in range); it does not check that the dataset or the evaluator exist: a job naming a
missing dataset, or an evaluator without code or whose build failed, is accepted and then fails, as the
platform's jobs do. ``wandbConfig.apiKey`` is accepted and dropped: it is never stored, logged or echoed.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from typing import Any

from .state import ApiError, ControlPlane, bad, check_fields, check_id, now_iso, public

TOP_FIELDS = (
    "dataset", "evaluator", "awsS3Config", "azureBlobStorageConfig", "chunkSize", "displayName",
    "evalAutoCarveout", "evaluationDataset", "inferenceParameters", "lossConfig", "maxConcurrentEvaluations",
    "maxConcurrentRollouts", "maxInferenceReplicaCount", "mcpServer", "nodeCount", "reservationTarget",
    "trainingConfig", "wandbConfig",
)  # fmt: skip
TRAINING_FIELDS = (
    "baseModel", "batchSize", "batchSizeSamples", "samplerCheckpointSaveIntervalSteps", "epochs",
    "gradientAccumulationSteps", "jinjaTemplate", "learningRate", "learningRateWarmupSteps", "loraRank",
    "maxContextLength", "optimizerWeightDecay", "outputModel", "region", "warmStartFrom",
)  # fmt: skip
INFERENCE_FIELDS = ("extraBody", "maxOutputTokens", "responseCandidatesCount", "temperature", "topK", "topP")
LOSS_FIELDS = ("dpo", "klBeta", "method")
LOSS_METHODS = ("METHOD_UNSPECIFIED", "GRPO", "DAPO", "DPO", "ORPO", "GSPO_TOKEN")
WANDB_FIELDS = ("apiKey", "enabled", "entity", "project", "runId")
TERMINAL = frozenset(
    {
        "JOB_STATE_COMPLETED",
        "JOB_STATE_FAILED",
        "JOB_STATE_CANCELLED",
        "JOB_STATE_EXPIRED",
        "JOB_STATE_ARCHIVED",
    }
)
CANCELLABLE = frozenset(
    {"JOB_STATE_CREATING", "JOB_STATE_PENDING", "JOB_STATE_VALIDATING", "JOB_STATE_RUNNING"}
)
# what a run uses when the job does not say (documented defaults of the current pages; never written
# into the job: its JSON shows what the client sent)
RUN_DEFAULTS = {"epochs": 1, "responseCandidatesCount": 1, "chunkSize": 200, "chunkAbove": 300}
MAX_CANDIDATES = 64
MAX_EPOCHS = 1000


def _integer(value: object, lo: int, hi: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise bad(f"{what} must be an integer from {lo} to {hi}, got {str(value)[:40]!r}")
    return value


def _number(value: object, lo: float, hi: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise bad(f"{what} must be a finite number, got {str(value)[:40]!r}")
    if not lo <= value <= hi:
        raise bad(f"{what} must be from {lo:g} to {hi:g}, got {value!r}")
    return float(value)


def _resource(value: object, account: str, collection: str, what: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(
        rf"accounts/[A-Za-z0-9._-]+/{collection}/[a-z0-9-]+", value
    ):
        raise bad(
            f"{what} must be a resource name accounts/<account>/{collection}/<id>, got {str(value)[:120]!r}"
        )
    if value.split("/")[1] != account:
        raise ApiError(403, "PERMISSION_DENIED", f"{what} {value} belongs to another account")
    return value


def _check_nested(body: dict[str, Any]) -> None:
    tc = check_fields(body.get("trainingConfig", {}), TRAINING_FIELDS, "trainingConfig")
    ip = check_fields(body.get("inferenceParameters", {}), INFERENCE_FIELDS, "inferenceParameters")
    lc = check_fields(body.get("lossConfig", {}), LOSS_FIELDS, "lossConfig")
    check_fields(body.get("wandbConfig", {}), WANDB_FIELDS, "wandbConfig")
    if "epochs" in tc:
        _integer(tc["epochs"], 1, MAX_EPOCHS, "trainingConfig.epochs")
    if "learningRate" in tc:
        _number(tc["learningRate"], 0.0, 1.0, "trainingConfig.learningRate")
    if "responseCandidatesCount" in ip:
        _integer(
            ip["responseCandidatesCount"], 1, MAX_CANDIDATES, "inferenceParameters.responseCandidatesCount"
        )
    if "maxOutputTokens" in ip:
        _integer(ip["maxOutputTokens"], 1, 1_000_000, "inferenceParameters.maxOutputTokens")
    if "temperature" in ip:
        _number(ip["temperature"], 0.0, 2.0, "inferenceParameters.temperature")
    if "topP" in ip:
        _number(ip["topP"], 0.0, 1.0, "inferenceParameters.topP")
    if "method" in lc and lc["method"] not in LOSS_METHODS:
        raise bad(
            f"lossConfig.method must be one of {', '.join(LOSS_METHODS)}, got {str(lc['method'])[:40]!r}"
        )
    if "chunkSize" in body and body["chunkSize"] != -1:
        _integer(body["chunkSize"], 1, 10_000, "chunkSize (or -1: no chunking)")


def create(plane: ControlPlane, account: str, job_id: str | None, body: object) -> dict[str, Any]:
    """A new job (``reinforcementFineTuningJobId`` from the query, else a random id), started at once."""
    body = check_fields(body, TOP_FIELDS, "ReinforcementFineTuningJob")
    job_id = check_id(job_id, "reinforcementFineTuningJobId") if job_id else f"rftj-{uuid.uuid4().hex[:12]}"
    _resource(body.get("dataset"), account, "datasets", "dataset")
    _resource(body.get("evaluator"), account, "evaluators", "evaluator")
    _check_nested(body)
    record = dict(body)
    if isinstance(record.get("wandbConfig"), Mapping):  # the W&B key is dropped here, never kept
        record["wandbConfig"] = {k: v for k, v in record["wandbConfig"].items() if k != "apiKey"}
    record.update(
        state="JOB_STATE_CREATING",
        status={"code": "OK", "message": ""},
        createdBy=f"{account}@local-control-plane",
        jobProgress={"epoch": 0, "percent": 0},
        _attempt=1,
        _epochs_done=[],
    )
    out = public(plane.add("jobs", account, job_id, record))
    plane.on_job_changed(account, job_id)
    return out


def get(plane: ControlPlane, account: str, job_id: str) -> dict[str, Any]:
    with plane.lock:
        return public(plane.get("jobs", account, job_id))


def set_state(
    plane: ControlPlane, account: str, job_id: str, state: str, code: str = "OK", message: str = ""
) -> None:
    with plane.lock:
        record = plane.get("jobs", account, job_id)
        record.update(state=state, status={"code": code, "message": message[:2000]})
        if state in TERMINAL:
            record["completedTime"] = now_iso()
        plane.save("jobs", account, job_id)


def cancel(plane: ControlPlane, account: str, job_id: str, body: object) -> dict[str, Any]:
    check_fields(body, (), "CancelReinforcementFineTuningJob body")
    with plane.lock:
        record = plane.get("jobs", account, job_id)
        if record["state"] not in CANCELLABLE:
            raise ApiError(
                400, "FAILED_PRECONDITION", f"job {job_id} is {record['state']}: nothing to cancel"
            )
        record["_cancel"] = True
        record["state"] = "JOB_STATE_CANCELLING"
        plane.save("jobs", account, job_id)
    plane.on_job_changed(account, job_id)
    return {}


def resume(plane: ControlPlane, account: str, job_id: str, body: object) -> dict[str, Any]:
    check_fields(body, (), "ResumeReinforcementFineTuningJob body")
    with plane.lock:
        record = plane.get("jobs", account, job_id)
        if record["state"] != "JOB_STATE_FAILED":
            raise ApiError(
                400,
                "FAILED_PRECONDITION",
                f"job {job_id} is {record['state']}: only a FAILED job can be resumed",
            )
        record.update(state="JOB_STATE_PENDING", status={"code": "OK", "message": "resumed"})
        record["_attempt"] = int(record.get("_attempt", 1)) + 1
        record.pop("completedTime", None)
        record.pop("_cancel", None)
        out = public(plane.save("jobs", account, job_id))
    plane.on_job_changed(account, job_id)
    return out


def delete(plane: ControlPlane, account: str, job_id: str) -> dict[str, Any]:
    with plane.lock:
        record = plane.get("jobs", account, job_id)
        if record["state"] not in TERMINAL:
            record["_cancel"] = True
    plane.on_job_changed(account, job_id)
    return plane.delete("jobs", account, job_id)


def interrupted(plane: ControlPlane) -> None:
    """At start: a job a previous server run left unfinished is FAILED (ABORTED) and can be resumed."""
    with plane.lock:
        stale = [
            (a, i) for (k, a, i), r in plane.records.items() if k == "jobs" and r.get("state") not in TERMINAL
        ]
    for account, job_id in stale:
        set_state(
            plane, account, job_id, "JOB_STATE_FAILED", "ABORTED",
            "the local control plane stopped while this job ran; resume it",
        )  # fmt: skip
